"""A compound service's end-to-end latency, composed from its parts' planned p95s.

The rule (one function, used by the planner and by the review alike):

    end-to-end p95  <=  sum over retrieval models of  (one call's p95 + (rounds - 1) x one batch's time)
                      + the generator's TTFT p95 (streamed answers: the caller waits for the first token)
                        or its request latency p95 (not streamed: the caller waits for the whole answer)

- Each retrieval model is counted as a step of its own, one after another (embed the question, search, rerank):
  models that a caller runs in parallel only make the bound looser.
- Fan-out: a model's calls per end-to-end request are its peak rate over the generator's, rounded up (a reranker
  scoring 20 passages per answer states 20x the answers' rate). They are sent together; one replica computes
  `concurrent_requests` of them at once (max_batch_size x instances on GPU, one on CPU), so they take
  `rounds = ceil(calls / concurrent_requests)` batches, each further one adding a batch's compute time.
- A sum of p95s is a conservative bound for latencies like these: it equals the p95 of the sum when the stages are
  slow together (as under a shared load peak), and lies above it for independent stages without rare, very long
  stalls (two independent exponential stages of mean m: a sum of p95s of 6.0 m, a p95 of the sum of 4.7 m). It is
  a planning bound, not a theorem: quantiles are not additive for every distribution (a stall in under 5 % of each
  of two stages' requests can put the p95 of the sum above the sum of p95s).
- Not included: the vector search between the retrieval models and the generator, and network hops between the
  caller and each part; leave room for them in the budget.
"""

from __future__ import annotations

import math

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Pipeline, PipelinePart, PipelineStage
from blueprints.core.errors import StackConfigError

#: Tolerance on a rate ratio before rounding calls per request up (rates are stored to 6 decimals).
_RATIO_EPSILON = 1e-6


def pipeline_stages(generator: Blueprint, retrieval: Blueprint, *, streaming: bool) -> list[PipelineStage]:
    """The stages of a compound service in one environment: each retrieval model in order, then the generator.

    Args:
        generator: the generator part's blueprint (its predictions' TTFT and request latency p95).
        retrieval: the retrieval part's blueprint (its `predictions.models`).
        streaming: the generator's answers are streamed (the pipeline then waits for the first token only).

    Raises:
        StackConfigError: a blueprint lacks the traffic or per-model predictions the rule needs (a hand edit, or a
            plan older than compound services): re-plan.
    """
    answers = generator.model.traffic.peak_requests_per_s if generator.model.traffic else None
    latencies = {m.name: m for m in retrieval.predictions.models or []}
    if answers is None or set(latencies) != {m.name for m in retrieval.models}:
        raise StackConfigError(f"{generator.stack} / {retrieval.stack}: the generator's traffic or the retrieval "
                               "models' predicted latencies are missing; re-plan with `blueprint plan`")
    stages = []
    for model in retrieval.models:
        own = latencies[model.name]
        rate = model.traffic.peak_requests_per_s if model.traffic else answers
        calls = max(1, math.ceil(rate / answers - _RATIO_EPSILON))
        rounds = math.ceil(calls / own.concurrent_requests)
        stages.append(PipelineStage(part=PipelinePart.RETRIEVAL, model=model.name, measure="latency",
                                    calls_per_request=calls, rounds=rounds, latency_p95_ms=own.latency_p95_ms,
                                    stage_p95_ms=round(own.latency_p95_ms + (rounds - 1) * own.batch_ms, 1)))
    p = generator.predictions
    value = p.ttft_p95_ms if streaming else p.latency_p95_ms
    if value is None:
        raise StackConfigError(f"{generator.stack}: predictions.{'ttft' if streaming else 'latency'}_p95_ms is "
                               "missing; re-plan with `blueprint plan`")
    stages.append(PipelineStage(part=PipelinePart.GENERATOR, model=generator.model.name,
                                measure="ttft" if streaming else "latency", calls_per_request=1, rounds=1,
                                latency_p95_ms=value, stage_p95_ms=value))
    return stages


def compose(generator: Blueprint, retrieval: Blueprint, *, service: str, streaming: bool,
            budget_ms: float | None) -> Pipeline:
    """The generator part's `Pipeline` record (the retrieval part's differs only in `part`).

    Raises:
        StackConfigError: as `pipeline_stages`.
    """
    stages = pipeline_stages(generator, retrieval, streaming=streaming)
    return Pipeline(service=service, part=PipelinePart.GENERATOR, stacks=[generator.stack, retrieval.stack],
                    latency_p95_budget_ms=budget_ms,
                    latency_p95_ms=round(sum(s.stage_p95_ms for s in stages), 1), stages=stages)


def retrieval_p95_ms(stages: list[PipelineStage]) -> float:
    """The retrieval part's share of the end-to-end p95, ms."""
    return sum(s.stage_p95_ms for s in stages if s.part is PipelinePart.RETRIEVAL)


def describe(pipeline: Pipeline) -> str:
    """The composition in one line: `embedder 31 ms + reranker 2 x 44 ms ... + generator TTFT 900 ms = 1,010 ms`."""
    terms = []
    for s in pipeline.stages:
        what = "TTFT " if s.measure == "ttft" else ""
        if s.calls_per_request > 1:
            terms.append(f"{s.model} {s.stage_p95_ms:,.0f} ms ({s.calls_per_request} calls per request in "
                         f"{s.rounds} round(s) of batches, {s.latency_p95_ms:,.0f} ms p95 each)")
        else:
            terms.append(f"{s.model} {what}{s.stage_p95_ms:,.0f} ms")
    budget = (f" against slo.pipeline_latency_p95_ms={pipeline.latency_p95_budget_ms:g}"
              if pipeline.latency_p95_budget_ms is not None else " (no end-to-end budget set)")
    return f"{' + '.join(terms)} = {pipeline.latency_p95_ms:,.0f} ms{budget}"


RULE = ("end-to-end p95 <= each retrieval model's p95 (plus a batch time per further round of its calls) + the "
        "generator's TTFT p95 (streamed) or request latency p95 (not streamed); a sum of p95s is conservative for "
        "latencies that rise together under load (a planning bound: quantiles are not additive for every "
        "distribution); the vector search and network hops between parts are not included")


def check_parts(generator: Blueprint, retrieval: Blueprint) -> Pipeline:
    """The service's pipeline as both part stack configs record it, verified: the same record in both, and the
    stages recomputed from the parts' own predictions (a hand edit or a half re-plan shows up here).

    Returns:
        The generator's record.

    Raises:
        StackConfigError: a part has no record, the records differ, or they disagree with the predictions; the
            message says to re-plan.
    """
    g, r = generator.pipeline, retrieval.pipeline
    if g is None or r is None or g.part is not PipelinePart.GENERATOR or r.part is not PipelinePart.RETRIEVAL:
        raise StackConfigError(f"{generator.stack} / {retrieval.stack}: not the generator and retrieval parts of one "
                               "compound service (servingblueprints:blueprint.pipeline); re-plan with `blueprint plan`")
    if r.model_copy(update={"part": PipelinePart.GENERATOR}) != g:
        raise StackConfigError(f"{generator.stack} and {retrieval.stack} record different pipelines (one part was "
                               "planned or edited without the other); re-plan the service's requirements file with "
                               "`blueprint plan`")
    streaming = next(s.measure for s in g.stages if s.part is PipelinePart.GENERATOR) == "ttft"
    if pipeline_stages(generator, retrieval, streaming=streaming) != g.stages:
        raise StackConfigError(f"{generator.stack} / {retrieval.stack}: the recorded pipeline stages do not follow "
                               "from the parts' predictions; re-plan with `blueprint plan`")
    return g
