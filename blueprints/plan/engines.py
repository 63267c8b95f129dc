"""The engine table of a self-hosted LLM plan: each serving engine's cheapest option (vLLM, SGLang, TensorRT-LLM),
priced alike, the planned one marked, and why the others lost.

`engine_table` builds the rows from the search (`blueprints.plan.options.llm.LlmSearch.engines`);
`with_token_prices` prices them per 1M tokens once the plan's unit costs exist; `engine_lines` renders them for the
rationale, `blueprint plan` and plan.md (one text, three places).
"""

from __future__ import annotations

from blueprints.catalog.engines import engine_facts
from blueprints.contracts.sections import EngineOption, UnitCosts
from blueprints.plan.options.llm import LlmOption, LlmSearch


def engine_table(search: LlmSearch, planned: LlmOption, *, fixed_monthly_usd: float, hours_per_month: float,
                 threshold_pct: float) -> list[EngineOption] | None:
    """One row per engine the search considered (None with a single engine and nothing left out: no comparison).

    Args:
        search: the LLM search (its per-engine results).
        planned: the option the plan deploys (the search's best, or the existing stack config's kept hardware).
        fixed_monthly_usd: the stack's fixed monthly items beside its nodes (the same for every engine), USD.
        hours_per_month: hours a month is priced over.
        threshold_pct: `operations.engine_switch_threshold_pct`.
    """
    if len(search.engines) <= 1:
        return None
    planned_usd = planned.monthly_node_usd_per_hour * hours_per_month + fixed_monthly_usd
    vllm = next((r.best[0] if r.best else r.bound for r in search.engines if r.engine == "vllm"), None)
    vllm_bound = any(r.engine == "vllm" and r.best is None for r in search.engines)
    rows = []
    for result in search.engines:
        facts = engine_facts(result.engine)
        if result.best is None and result.bound is not None:  # a lower bound: its cost only grows once simulated
            b = result.bound
            usd = b.monthly_node_usd_per_hour * hours_per_month + fixed_monthly_usd
            rows.append(EngineOption(
                engine=result.engine, planned=False, instance_type=b.instance.instance_type,  # type: ignore
                tensor_parallel_size=b.tensor_parallel_size, kv_cache_dtype=b.kv_cache_dtype,  # type: ignore
                replicas=b.replicas, monthly_cost_usd=round(usd, 2), step_times=b.candidate.model.source.kind,
                verdict=_clip(f"at least ${usd - planned_usd:,.0f}/month (+{usd / planned_usd - 1:.1%}) above the "
                              f"planned engine ({result.why_not})")))
            continue
        if result.best is None:
            rows.append(EngineOption(engine=result.engine, planned=False,  # type: ignore[arg-type]
                                     verdict=_clip(f"not sized: {result.why_not}")))
            continue
        option, run = result.best
        is_planned = result.engine == planned.engine
        if is_planned:
            option = planned
        usd = option.monthly_node_usd_per_hour * hours_per_month + fixed_monthly_usd
        rows.append(EngineOption(
            engine=result.engine, planned=is_planned,  # type: ignore[arg-type]
            instance_type=option.instance.instance_type, tensor_parallel_size=option.tensor_parallel_size,
            kv_cache_dtype=option.kv_cache_dtype, replicas=option.replicas,  # type: ignore[arg-type]
            monthly_cost_usd=round(usd, 2), ttft_p95_ms=round(run.ttft_ms.p95, 1), itl_p95_ms=round(run.itl_ms.p95, 2),
            step_times=option.candidate.model.source.kind,
            verdict=_clip(_verdict(facts.display, usd, planned_usd, is_planned=is_planned, planned=planned,
                                   vllm=vllm, vllm_bound=vllm_bound, hours_per_month=hours_per_month,
                                   fixed=fixed_monthly_usd, threshold_pct=threshold_pct))))
    return rows


def _verdict(display: str, usd: float, planned_usd: float, *, is_planned: bool, planned: LlmOption,
             vllm: LlmOption | None, vllm_bound: bool, hours_per_month: float, fixed: float,
             threshold_pct: float) -> str:
    if not is_planned:
        delta = usd - planned_usd
        if delta > 0.005:
            return f"${delta:,.0f}/month (+{delta / planned_usd:.1%}) above the planned engine"
        return (f"${-delta:,.0f}/month ({-delta / planned_usd:.1%}) cheaper, within engine_switch_threshold_pct "
                f"{threshold_pct:g}: vLLM is kept" if delta < -0.005 else
                "the same cost: vLLM is kept (the default engine wins a tie)")
    if planned.engine != "vllm" and vllm is not None:
        vllm_usd = vllm.monthly_node_usd_per_hour * hours_per_month + fixed
        least = "at least " if vllm_bound else ""
        return (f"planned: {least}{1 - usd / vllm_usd:.1%} cheaper than vLLM's best ({least}${vllm_usd - usd:,.0f}"
                f"/month{', its analytic bound' if vllm_bound else ''}), more than engine_switch_threshold_pct "
                f"{threshold_pct:g}")
    return f"planned: {display}, the cheapest within the switch threshold"


def with_token_prices(rows: list[EngineOption] | None, costs: UnitCosts | None) -> list[EngineOption] | None:
    """`rows` with `usd_per_million_tokens` over the planned traffic's tokens (`costs`: the plan's unit costs)."""
    if not rows or costs is None or costs.million_input_tokens_per_month is None:
        return rows
    tokens = costs.million_input_tokens_per_month + (costs.million_output_tokens_per_month or 0.0)
    return [r.model_copy(update={"usd_per_million_tokens": float(f"{r.monthly_cost_usd / tokens:.4g}")})
            if r.monthly_cost_usd is not None else r for r in rows]


def engine_lines(rows: list[EngineOption]) -> list[str]:
    """One line per row: `SGLang 0.5.14: 3x p5.4xlarge (tp 1), $15,084/month, $0.38 per 1M tokens, TTFT p95 1,250 ms,
    ITL p95 40.4 ms (measured) - +2.1 % above the planned engine`."""
    out = []
    for r in rows:
        facts = engine_facts(r.engine)
        name = f"{facts.display} {facts.version}"
        if r.instance_type is None:
            out.append(f"{name}: {r.verdict}")
            continue
        per_token = f", ${r.usd_per_million_tokens:g} per 1M tokens" if r.usd_per_million_tokens is not None else ""
        kv = ", FP8 KV" if r.kv_cache_dtype == "fp8" else ""
        latency = (f", TTFT p95 {r.ttft_p95_ms:,.0f} ms, ITL p95 {r.itl_p95_ms:g} ms" if r.ttft_p95_ms is not None
                   else ", not simulated")
        out.append(f"{name}: {r.replicas}x {r.instance_type} (tp {r.tensor_parallel_size}{kv}), "
                   f"{'>= ' if r.ttft_p95_ms is None else ''}${r.monthly_cost_usd:,.0f}/month{per_token}{latency} "
                   f"({r.step_times} step times) - {r.verdict}")
    return out


def _clip(text: str) -> str:
    return text if len(text) <= 400 else text[:397] + "..."
