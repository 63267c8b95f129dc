"""Plan a compound service (`blueprints.plan.compound.parts`): each part as a service of its own, then its end-to-end budget
and its cost as one service.

Per environment: both parts are planned at their own targets. When their composed p95 (`blueprints.plan.compound.latency`) meets
`slo.pipeline_latency_p95_ms`, that is the plan. Otherwise the parts' own targets are tightened, which costs
replicas or faster hardware but is better than refusing: the retrieval part's request-latency target down a ladder
of fractions (`RETRIEVAL_TIGHTENING`), and for each, the generator's TTFT target (streamed answers) down to what
the budget leaves it. The cheapest pair that meets the budget wins (at equal cost, the one whose retrieval target is
tightened least); when none does, the plan refuses (exit 2) with
the parts' p95s and the lowest composition found. `budget.max_monthly_usd` applies to the two parts together.

Each try is sized and priced first (what the split compares: p95s, planned peaks, the cost before the fleet
simulation); a part is finished (scaling targets, warm floor, fleet simulation: `blueprints.plan.scaling.finish`, most
of a part's planning time) only when the choice needs its final cost. Finishing never lowers a cost (the simulated
autoscaler can only add nodes to the planned peak), so the cheapest pair is found by finishing pairs in order of their
cost before finishing until no unfinished one can be cheaper: the pair an exhaustive comparison picks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Pipeline, PipelinePart
from blueprints.catalog import Catalog
from blueprints.plan.compound.parts import ServicePart
from blueprints.core.errors import BlueprintError, Fix, SizingError
from blueprints.plan.hints import budget_fix
from blueprints.plan.options.search import resolve_models
from blueprints.plan.options.nongen import latency_target_ms
from blueprints.plan.compound.latency import RULE, compose, describe, pipeline_stages, retrieval_p95_ms
from blueprints.requirements.service import Requirements
from blueprints.requirements.model import Slo

#: Fractions of the retrieval part's own request-latency target tried, in order, when the parts at their own targets
#: miss the end-to-end budget. Each step re-plans the retrieval part (a fast, closed-form search) and, when the
#: generator's share no longer fits, the generator at the TTFT target left to it (a simulated search, about a second)
#: [assumption: a coarse ladder bounds planning time; finer steps could find a slightly cheaper split].
RETRIEVAL_TIGHTENING = (1.0, 0.75, 0.5, 0.35, 0.25)

@dataclass(frozen=True)
class PartPlanner:
    """The planner's own path for a service, in its two steps, for one part's requirements in one environment.

    Attributes:
        size: (requirements, environment) -> the blueprint selected, sized and priced (`planner._plan_sized`).
        finish: (requirements, sized blueprint) -> the finished blueprint (`planner._finish_service`).
    """

    size: Callable[[Requirements, str], Blueprint]
    finish: Callable[[Requirements, Blueprint], Blueprint]


class _Part:
    """One part planned for one environment: sized, and finished on first need (once)."""

    def __init__(self, part: ServicePart, req: Requirements, sized: Blueprint, planner: PartPlanner) -> None:
        self.part, self.requirements, self.sized, self._planner = part, req, sized, planner

    @cached_property
    def finished(self) -> Blueprint:
        try:
            return self._planner.finish(self.requirements, self.sized)
        except BlueprintError as exc:
            raise _named(self.part, self.requirements, exc) from None


@dataclass(frozen=True)
class _Pair:
    """Both parts of one environment, their composed pipeline (the generator's record) and the targets each part was
    planned to (`_plan`'s keywords, to plan it again with a share of the budget). `generator` and `retrieval` are the
    sized blueprints (their p95s, fleets and planned peaks are final); the costs that the fleet simulation may raise
    finish both parts."""

    parts: tuple[_Part, _Part] = field(repr=False)
    pipeline: Pipeline
    generator_targets: tuple[tuple[str, float], ...] = ()
    retrieval_targets: tuple[tuple[str, float], ...] = ()

    @property
    def generator(self) -> Blueprint:
        return self.parts[0].sized

    @property
    def retrieval(self) -> Blueprint:
        return self.parts[1].sized

    @property
    def finished(self) -> tuple[Blueprint, Blueprint]:
        """Both parts finished (the fleet simulation's peak and maxima in their predictions)."""
        return self.parts[0].finished, self.parts[1].finished

    @property
    def monthly_usd(self) -> float:
        """Both parts' stated peaks, finished."""
        return sum(bp.predictions.monthly_cost_usd for bp in self.finished)

    @property
    def sized_usd(self) -> float:
        """Both parts' peaks before finishing: at most `monthly_usd`."""
        return self.generator.predictions.monthly_cost_usd + self.retrieval.predictions.monthly_cost_usd

    @property
    def planned_usd(self) -> float:
        """Both parts' planned peaks (what the budget must hold at least)."""
        return self.generator.planned_monthly_usd + self.retrieval.planned_monthly_usd

    @property
    def max_usd(self) -> float:
        """Both parts' autoscaler maxima (what the budget applies to), finished."""
        return sum(bp.max_monthly_usd for bp in self.finished)

    @property
    def p95_ms(self) -> float:
        return self.pipeline.latency_p95_ms


def plan_pipeline(req: Requirements, parts: list[ServicePart], names: list[str], *, catalog: Catalog,
                  plan_part: PartPlanner) -> list[Blueprint]:
    """Plan each environment of a compound service: its generator and retrieval part stacks.

    Args:
        req: the compound service's requirements.
        parts: `compound.service_parts(req, catalog)` (generator, retrieval).
        names: the environments to plan.
        plan_part: plans one part's requirements for one environment.

    Returns:
        Per environment, the generator's blueprint then the retrieval's, each with the same `pipeline` record.

    Raises:
        SizingError: a part cannot be planned, the end-to-end budget cannot be met even with tightened targets, or
            the parts together cost more than `budget.max_monthly_usd`; the message names the field and the fix.
        RequirementsError, CatalogError: as the planner.
    """
    resolve_models(req, catalog)  # every entry of `models:` checked under its own field path in the file
    gen, ret = parts
    streaming = gen.requirements.served_models()[0][1].streaming
    planned: list[Blueprint] = []
    for env in names:
        chosen, own = _choose(req, env, gen, ret, plan_part, streaming=streaming)
        planned += _record(req, chosen, own, gen, ret)
    return planned


def _plan(part: ServicePart, env: str, plan_part: PartPlanner, *, budget_usd: float | None = None,
          **targets: float) -> _Part:
    """The part sized for `env`, with its SLO's `targets` replaced (tightened) and `budget_usd` its share of the
    service's budget (None: no budget of its own; the service's budget is checked on the pair, `_check_cost` and
    `_within_budget`, so a tightening over budget is refused as over budget, not as missing the latency budget);
    errors name the part."""
    req = part.requirements
    if targets:
        # A p95 target is at most the p99 target of the same metric (a p99 met implies it): the budget's share never
        # asks for a p95 above the requirements' own p99.
        slo = req.slo.model_dump()
        targets = {k: min(v, slo[k.replace("_p95_", "_p99_")]) if slo.get(k.replace("_p95_", "_p99_")) else v
                   for k, v in targets.items()}
        req = req.model_copy(update={"slo": Slo.model_validate({**slo, **targets})})
    req = req.model_copy(update={"budget": req.budget.model_copy(update={"max_monthly_usd": budget_usd})})
    try:
        return _Part(part, req, plan_part.size(req, env), plan_part)
    except BlueprintError as exc:
        raise _named(part, req, exc) from None


def _named(part: ServicePart, req: Requirements, exc: BlueprintError) -> BlueprintError:
    """`exc` with the part named first."""
    text = f"{part.part.value} part ({req.service}): {exc}"  # type: ignore[union-attr]
    if isinstance(exc, SizingError):
        return SizingError(text, rule=exc.rule, fixes=exc.fixes)
    return type(exc)(text)


def _try(part: ServicePart, env: str, plan_part: PartPlanner, **targets: float) -> _Part | None:
    """`_plan` at tightened targets, or None when nothing meets them."""
    try:
        return _plan(part, env, plan_part, **targets)
    except SizingError:
        return None


def _pair(req: Requirements, generator: _Part, retrieval: _Part, *, streaming: bool,
          generator_targets: dict[str, float] | None = None,
          retrieval_targets: dict[str, float] | None = None) -> _Pair:
    return _Pair((generator, retrieval), compose(generator.sized, retrieval.sized, service=req.service,
                                                 streaming=streaming, budget_ms=None),
                 tuple(sorted((generator_targets or {}).items())), tuple(sorted((retrieval_targets or {}).items())))


def _cheapest(pairs: list[_Pair]) -> _Pair:
    """The pair of the lowest finished cost (to the cent; at equal cost the first), finishing only the pairs that could
    be: in order of their cost before finishing, until the next one's is above the best found (finishing never lowers
    a cost, `_Pair.sized_usd`)."""
    best: tuple[float, int] | None = None
    for bound, i in sorted((round(p.sized_usd, 2), i) for i, p in enumerate(pairs)):
        if best is not None and (bound, i) > best:
            break
        found = (round(pairs[i].monthly_usd, 2), i)
        best = found if best is None or found < best else best
    assert best is not None, "no pair to choose from"
    return pairs[best[1]]


def _choose(req: Requirements, env: str, gen: ServicePart, ret: ServicePart, plan_part: PartPlanner, *,
            streaming: bool) -> tuple[_Pair, _Pair]:
    """(the pair planned, the pair at the parts' own targets)."""
    budget = req.slo.pipeline_latency_p95_ms
    own = _pair(req, _plan(gen, env, plan_part), _plan(ret, env, plan_part), streaming=streaming)
    if budget is None or own.p95_ms <= budget:
        chosen = own
        if budget is not None and streaming and own.generator.slo.ttft_p95_ms is None:
            # A generator without a TTFT target of its own gets what the budget leaves it, so its plan, autoscaling
            # and alerts hold the end-to-end budget; its own plan met it, so this costs no more.
            ttft = math.floor(budget - retrieval_p95_ms(own.pipeline.stages))
            given = _try(gen, env, plan_part, ttft_p95_ms=ttft)
            own_usd = own.finished[0].predictions.monthly_cost_usd  # finishing never lowers a cost: the sized one first
            if (given is not None and given.sized.predictions.monthly_cost_usd <= own_usd
                    and given.finished.predictions.monthly_cost_usd <= own_usd):
                chosen = _pair(req, given, own.parts[1], streaming=streaming, generator_targets={"ttft_p95_ms": ttft})
        _check_cost(req, env, [chosen])
        return _within_budget(req, env, chosen, gen, ret, plan_part, streaming=streaming), own
    own_target = latency_target_ms(ret.requirements)
    generator_stage = own.pipeline.stages[-1].stage_p95_ms
    generators: dict[int, _Part | None] = {}
    tried, meeting = [own], []  # meeting: in ladder order, so equal costs keep the retrieval target least tightened
    for fraction in RETRIEVAL_TIGHTENING:
        ret_targets = {} if fraction == 1.0 else {"latency_p95_ms": max(1.0, math.floor(own_target * fraction))}
        retrieval = own.parts[1] if fraction == 1.0 else _try(ret, env, plan_part, **ret_targets)
        if retrieval is None:
            continue
        room = budget - retrieval_p95_ms(pipeline_stages(own.generator, retrieval.sized, streaming=streaming))
        generator: _Part | None = own.parts[0]
        gen_targets: dict[str, float] = {}
        if generator_stage > room:
            if not streaming or room < 1:
                continue  # a whole answer's latency is not a target the LLM search takes; see the refusal's fixes
            target = math.floor(room)
            gen_targets = {"ttft_p95_ms": target}
            if target not in generators:
                generators[target] = _try(gen, env, plan_part, ttft_p95_ms=target)
            generator = generators[target]
        if generator is None:
            continue
        pair = _pair(req, generator, retrieval, streaming=streaming, generator_targets=gen_targets,
                     retrieval_targets=ret_targets)
        tried.append(pair)
        if pair.p95_ms <= budget:
            meeting.append(pair)
    if not meeting:
        best = min(tried, key=lambda p: p.p95_ms)
        raise SizingError(_refusal(req, env, own, best, streaming=streaming),
                          fixes=(_pipeline_fix(best),))
    _check_cost(req, env, meeting, what="with their targets tightened to meet slo.pipeline_latency_p95_ms, ")
    affordable = [p for p in meeting if req.budget.max_monthly_usd is None or p.planned_usd <= req.budget.max_monthly_usd]
    chosen = _cheapest(affordable)
    return _within_budget(req, env, chosen, gen, ret, plan_part, streaming=streaming), own


def _within_budget(req: Requirements, env: str, pair: _Pair, gen: ServicePart, ret: ServicePart,
                   plan_part: PartPlanner, *, streaming: bool) -> _Pair:
    """`pair`, or both parts planned again with a share of budget.max_monthly_usd each when their autoscaler maxima
    together cost more: the budget applies to the most both can run, so each part's maximum is capped at what its
    share pays for (`blueprints.plan.builders.cost.budget_ceiling`). The room above both planned peaks is shared in
    proportion to each part's own headroom (maximum less planned peak); the planned peaks fit (`_check_cost`)."""
    budget = req.budget.max_monthly_usd
    if budget is None or pair.max_usd <= budget + 0.005:
        return pair
    peaks = [pair.generator.planned_monthly_usd, pair.retrieval.planned_monthly_usd]
    heads = [bp.max_monthly_usd - peak for bp, peak in zip(pair.finished, peaks)]
    room = budget - sum(peaks)
    shares = [math.floor((peak + room * head / sum(heads)) * 100) / 100 for peak, head in zip(peaks, heads)]
    generator = _plan(gen, env, plan_part, budget_usd=shares[0], **dict(pair.generator_targets))
    retrieval = _plan(ret, env, plan_part, budget_usd=shares[1], **dict(pair.retrieval_targets))
    return _pair(req, generator, retrieval, streaming=streaming, generator_targets=dict(pair.generator_targets),
                 retrieval_targets=dict(pair.retrieval_targets))


def _targets(pair: _Pair) -> str:
    """The targets the parts were planned to, in words."""
    return f"retrieval {_retrieval_target(pair)}, generator {_generator_target(pair)}"


def _retrieval_target(pair: _Pair) -> str:
    r = pair.retrieval.slo
    return (f"latency_p95_ms {r.latency_p95_ms:g} ms" if r.latency_p95_ms is not None else
            f"latency_p99_ms {r.latency_p99_ms:g} ms" if r.latency_p99_ms is not None else
            f"latency_p95_ms {defaults.DEFAULT_NONGEN_LATENCY_P95_MS:g} ms (the default)")


def _generator_target(pair: _Pair) -> str:
    ttft = pair.generator.slo.ttft_p95_ms
    return "no ttft_p95_ms" if ttft is None else f"ttft_p95_ms {ttft:g} ms"


def _given(chosen: _Pair, own: _Pair, budget: float | None) -> str:
    """What each part was given, against its own targets, and what that costs."""
    retrieval, generator = _retrieval_target(chosen), _generator_target(chosen)
    retrieval += " (its own)" if retrieval == _retrieval_target(own) else f" (tightened from {_retrieval_target(own)})"
    if generator == _generator_target(own):
        generator += " (its own)"
    elif own.generator.slo.ttft_p95_ms is None:
        generator += " (what the end-to-end budget leaves it: it has no TTFT target of its own)"
    else:
        generator += f" (tightened from {_generator_target(own)})"
    text = f"targets given: retrieval {retrieval}, generator {generator}"
    if chosen.p95_ms != own.p95_ms or chosen.monthly_usd != own.monthly_usd:
        extra = chosen.monthly_usd - own.monthly_usd
        text += (f"; at their own targets the parts compose to {own.p95_ms:,.0f} ms"
                 + (" (over the budget)" if budget is not None and own.p95_ms > budget else "")
                 + (f", for ${extra:,.0f}/month less: this split is the cheapest of those tried that meets the budget"
                    if extra > 0.005 else ", at the same cost"))
    return text


def _refusal(req: Requirements, env: str, own: _Pair, best: _Pair, *, streaming: bool) -> str:
    budget = req.slo.pipeline_latency_p95_ms
    generator_share = best.pipeline.stages[-1].stage_p95_ms
    if generator_share >= best.p95_ms / 2:
        fix = ("shorten the generator's prompts (traffic.mean_input_tokens) or allow faster GPUs "
               "(hardware.allowed_instance_families)" if streaming else
               "stream the generator's answers (its traffic.streaming: true: the pipeline then waits for the first "
               "token only), lower its mean_output_tokens, or allow faster GPUs")
    else:
        fix = ("send the retrieval models fewer calls per request (a reranker scoring fewer passages), or allow "
               "faster hardware for them (hardware.allowed_instance_families)")
    def against_budget(pair: _Pair) -> str:
        return describe(pair.pipeline.model_copy(update={"latency_p95_budget_ms": budget}))

    lowest = "" if best is own else (f"; tightening the parts' targets (down to {_targets(best)}) reaches "
                                     f"{best.p95_ms:,.0f} ms at the lowest ({against_budget(best)})")
    return (f"environments.{env}: slo.pipeline_latency_p95_ms={budget:g} cannot be met: at their own targets the "
            f"parts compose to {against_budget(own)}{lowest}: {_pipeline_fix(best).text}, or {fix}")


def _pipeline_fix(best: _Pair) -> Fix:
    """The fix "raise slo.pipeline_latency_p95_ms to >= <the lowest composition found>"."""
    value = math.ceil(best.p95_ms)
    return Fix("slo.pipeline_latency_p95_ms", value, f"raise slo.pipeline_latency_p95_ms to >= {value}")


def _check_cost(req: Requirements, env: str, pairs: list[_Pair], *, what: str = "") -> None:
    """Raise when even the cheapest pair's planned peaks cost more than budget.max_monthly_usd (the parts together),
    naming both fleets and their prices."""
    budget = req.budget.max_monthly_usd
    cheapest = min(pairs, key=lambda p: p.planned_usd)
    if budget is None or cheapest.planned_usd <= budget:
        return
    g, r = cheapest.generator, cheapest.retrieval
    total = cheapest.planned_usd
    fix = budget_fix(total)
    raise SizingError(f"environments.{env}: {what}the service's parts at their planned peaks cost "
                      f"${g.planned_monthly_usd:,.0f} ({g.stack}, {_fleet(g)}) + ${r.planned_monthly_usd:,.0f} "
                      f"({r.stack}, {_fleet(r)}) = ${total:,.0f}/month, ${total - budget:,.0f} over "
                      f"budget.max_monthly_usd={budget:g} (the budget covers both parts): {fix.text}, or relax the "
                      "SLO or lower the traffic", fixes=(fix,))


def _fleet(bp: Blueprint) -> str:
    """A part's planned fleet, e.g. `vllm-gpu, 3x g6e.xlarge`."""
    return f"{bp.archetype.value}, {bp.planned_nodes}x {bp.compute.node_type}"


def _record(req: Requirements, chosen: _Pair, own: _Pair, gen: ServicePart, ret: ServicePart) -> list[Blueprint]:
    """Both blueprints with the pipeline record, the service's tags and the reasons."""
    record = chosen.pipeline.model_copy(update={"latency_p95_budget_ms": req.slo.pipeline_latency_p95_ms})
    record = Pipeline.model_validate(record.model_dump())
    g, r = chosen.finished
    given = _given(chosen, own, req.slo.pipeline_latency_p95_ms)
    total = (f"the service costs ${g.predictions.monthly_cost_usd:,.0f} (generator) + "
             f"${r.predictions.monthly_cost_usd:,.0f} (retrieval) = ${chosen.monthly_usd:,.0f}/month provisioned for "
             f"the peak, at most ${chosen.max_usd:,.0f}/month at both autoscalers' maxima"
             + (f", within budget.max_monthly_usd={req.budget.max_monthly_usd:g} (both parts together)"
                if req.budget.max_monthly_usd is not None else ""))
    out = []
    for bp, part, other in ((g, gen, r), (r, ret, g)):
        assert part.part is not None
        reasons = [*part.reasons,
                   f"the {part.part.value} part of compound service {req.service}: {other.stack} serves its "
                   f"{'retrieval models' if part.part is PipelinePart.GENERATOR else 'generator'}"
                   + (f", on the same platform {bp.platform.stack}" if bp.platform.stack and
                      bp.platform.stack == other.platform.stack else ""),
                   f"end-to-end p95 <= {describe(record)}", f"how: {RULE}", given, total]
        out.append(bp.model_copy(update={
            "pipeline": record.model_copy(update={"part": part.part}),
            "tags": {**bp.tags, "service": req.service, "part": part.part.value},
            "rationale": [*bp.rationale, *reasons]}))
    return [Blueprint.model_validate(bp.model_dump()) for bp in out]
