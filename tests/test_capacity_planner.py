"""The planner sizes LLM replicas from the queue-aware model: engine limits (max_num_seqs, max_num_batched_tokens,
KV-cache dtype, quantisation kernels) reach vLLM, replicas follow the simulated p95 at peak, FP8 KV only when it is
cheaper."""

from __future__ import annotations

import pytest

from blueprints.core import defaults
from blueprints.capacity.planning import run_at_rate
from blueprints.catalog import load_catalog
from blueprints.plan.options.search import resolve_models
from blueprints.plan.options.llm import llm_search, traffic_shape
from blueprints.engines.vllm import args as _vllm_args


def vllm_args(engine, name):
    from blueprints.catalog.engines import engine_facts
    return _vllm_args(engine, engine_facts("vllm"), name)
from tests.conftest import plan_env, requirements_with

#: A KV-bound workload on L40S nodes: long prompts, a loose ITL target.
LONG_PROMPTS = dict(traffic={"peak_requests_per_s": 10, "mean_input_tokens": 6000, "mean_output_tokens": 400,
                             "pattern": "steady"},
                    model={"max_context_tokens": 32768}, slo={"ttft_p95_ms": 5000, "itl_p95_ms": 100},
                    hardware={"allowed_instance_families": ["g6e"]}, budget={"max_monthly_usd": None})


def test_the_fixed_p95_factors_are_gone():
    assert not hasattr(defaults, "TTFT_P95_FACTOR") and not hasattr(defaults, "ITL_P95_FACTOR")


def test_engine_limits_reach_the_vllm_container_args(chat_prod):
    e = chat_prod.engine
    args = vllm_args(e, chat_prod.model.name)
    assert f"--max-num-seqs={e.max_num_seqs}" in args
    assert f"--max-num-batched-tokens={e.max_num_batched_tokens}" in args
    assert f"--kv-cache-dtype={e.kv_cache_dtype}" in args
    assert e.max_num_batched_tokens >= e.max_num_seqs  # vLLM refuses to start otherwise


def test_an_unset_token_budget_renders_no_flag(chat_prod):
    engine = chat_prod.engine.model_copy(update={"max_num_batched_tokens": None})
    assert not any(a.startswith("--max-num-batched-tokens") for a in vllm_args(engine, "m"))


def test_a_full_step_never_stretches_a_token_gap_past_the_itl_target(catalog):
    req = requirements_with()
    model = resolve_models(req, catalog)[0]
    best = llm_search(req, "prod", model, catalog).options[0]
    cand, shape = best.candidate, traffic_shape(model)
    seqs, tokens = cand.max_num_seqs, cand.max_num_batched_tokens
    context = seqs * (shape.inputs.mean + shape.outputs.mean / 2)
    assert cand.model.step_s(seqs, context) <= req.slo.itl_p95_ms / 1e3  # max_num_seqs: decode within the target
    chunk = tokens - seqs
    assert cand.model.step_s(seqs, context, chunk, chunk * shape.inputs.mean / 2) <= req.slo.itl_p95_ms / 1e3
    assert seqs * (shape.inputs.mean + shape.outputs.mean) <= cand.model.kv_cache_tokens


def test_the_plan_predicts_the_simulated_p95_at_its_peak_share_per_replica(catalog, chat_prod):
    """The fleet is sized on the replica at the band's pessimistic edge (production, uncalibrated): that replica meets
    the SLO at the peak share, and the rationale states its p95s; the predictions are the central estimate, the same
    replica (engine limits and all) without the margin, at the same share."""
    from dataclasses import replace

    from blueprints.capacity.planning import candidate

    req = requirements_with()
    model = resolve_models(req, catalog)[0]
    best = llm_search(req, "prod", model, catalog).options[0]
    assert chat_prod.compute.replicas >= best.replicas
    assert chat_prod.compute.instance_type == best.instance.instance_type
    peak = req.traffic.peak_requests_per_s  # prod's traffic_scale is 1
    shape, share = traffic_shape(model), peak / chat_prod.compute.replicas
    sized = run_at_rate(best.candidate, shape, share)
    assert sized.ttft_ms.p95 <= req.slo.ttft_p95_ms and sized.itl_ms.p95 <= req.slo.itl_p95_ms
    assert any(f"TTFT p50/p95 {sized.ttft_ms.p50:.0f}/{sized.ttft_ms.p95:.0f} ms, ITL p50/p95 "
               f"{sized.itl_ms.p50:.1f}/{sized.itl_ms.p95:.1f} ms" in r for r in chat_prod.rationale)
    margin = chat_prod.predictions.capacity_margin
    assert margin is not None and best.candidate.model.correction.step_time == margin.step_time > 1
    central_correction = model.correction(best.gpu, best.tensor_parallel_size, managed=False, production=False,
                                          kv_cache_fp8=best.kv_cache_dtype == "fp8")
    central = candidate(replace(best.candidate.model, correction=central_correction), best.candidate.gpu,
                        best.tensor_parallel_size, best.candidate.kv_cache_fp8, best.candidate.config, shape)
    run = run_at_rate(central, shape, share)
    assert chat_prod.predictions.ttft_p95_ms == round(run.ttft_ms.p95, 1) <= round(sized.ttft_ms.p95, 1)
    assert chat_prod.predictions.itl_p95_ms == round(run.itl_ms.p95, 2) <= round(sized.itl_ms.p95, 2)
    assert chat_prod.predictions.requests_per_s_capacity >= peak


def test_more_traffic_needs_more_replicas_and_spikes_more_than_steady_load():
    def replicas(**traffic):
        # One replica shape to count (L40S nodes): unrestricted, 6 requests/s plan g6e.xlarge and 24 p5.4xlarge.
        req = requirements_with(traffic=traffic, budget={"max_monthly_usd": None},
                                hardware={"allowed_instance_families": ["g6e"]})
        bp = plan_env(req, "prod")
        assert bp.compute.instance_type == "g6e.xlarge"
        return bp.compute.replicas

    assert replicas(peak_requests_per_s=24) > replicas(peak_requests_per_s=6)
    steady = replicas(peak_requests_per_s=24, pattern="steady")
    assert steady <= replicas(peak_requests_per_s=24, pattern="bursty") < replicas(peak_requests_per_s=24,
                                                                                    pattern="spiky")


def test_an_fp8_kv_cache_is_planned_where_it_is_cheaper_and_the_rationale_says_by_how_much():
    from blueprints.plan.options.llm import llm_option_on

    # KV-bound on H100 nodes: LONG_PROMPTS with long answers (each sequence holds 7,000 tokens), so a 16-bit cache
    # holds half the sequences an FP8 one does. (At 400-token answers the H100's 16-bit cache serves as few replicas.)
    req = requirements_with(**{**LONG_PROMPTS, "traffic": {**LONG_PROMPTS["traffic"], "mean_output_tokens": 1000},
                               "hardware": {"allowed_instance_families": ["p5"]}})
    bp = plan_env(req, "prod")
    assert bp.compute.gpu == "h100" and bp.engine.kv_cache_dtype == "fp8"
    assert "--kv-cache-dtype=fp8" in vllm_args(bp.engine, bp.model.name)
    # The same instance type and degree with each KV-cache dtype, priced as the search prices them: FP8 is the plan
    # and is cheaper, and the rationale states both by their replicas and node cost.
    catalog = load_catalog()
    [model] = resolve_models(req, catalog)
    on = {fp8: llm_option_on(req, "prod", model, catalog, instance_type=bp.compute.instance_type,
                             tensor_parallel_size=bp.engine.tensor_parallel_size, kv_cache_fp8=fp8, managed=False)[0]
          for fp8 in (True, False)}
    assert on[True].replicas == bp.compute.replicas < on[False].replicas
    month = catalog.hours_per_month
    [why] = [r for r in bp.rationale if r.startswith("FP8 KV cache")]
    assert "holds twice the tokens" in why
    assert (f"on {bp.compute.instance_type} a 16-bit cache would need {on[False].replicas} replica(s), "
            f"${on[False].monthly_node_usd_per_hour * month:,.0f}/month for nodes against "
            f"${on[True].monthly_node_usd_per_hour * month:,.0f}.") in why


def test_a_16_bit_kv_cache_is_kept_where_fp8_saves_nothing():
    bp = plan_env(requirements_with(**{**LONG_PROMPTS, "hardware": {"allowed_instance_families": ["p5en"]}}), "prod")
    assert bp.compute.gpu == "h200" and bp.engine.kv_cache_dtype == "auto"
    assert any("FP8 (supported on NVIDIA H200 141GB) would not lower the cost here" in r for r in bp.rationale)


def test_fp8_kv_cache_below_sm_9_only_where_measured_kernels_time_its_attention():
    """The pinned vLLM with --kv-cache-dtype fp8 below SM 9.0 leaves its default attention backend (FlashAttention)
    for another (processes.yaml fp8_kv_default_attention_from): planned only where the measured tables of that vLLM
    time FP8-KV attention on the GPU itself (the L40S at 0.24.0), never on a roofline GPU (the L4)."""
    from blueprints.capacity.measured import measures_fp8_kv
    from blueprints.plan.options.llm import fp8_kv_cache_planned

    gpus = load_catalog().gpus
    assert [fp8_kv_cache_planned(gpus[g], managed=False) for g in ("l4", "l40s", "h100")] == [False, True, True]
    assert not fp8_kv_cache_planned(gpus["h100"], managed=True)
    assert measures_fp8_kv(gpus["l40s"], "vllm", "0.24.0") and not measures_fp8_kv(gpus["l40s"], "vllm", "0.11.0")
    # chat-assistant on L40S nodes (its bundled requirements plan H100s): FP8 KV, which lowers the cost there
    l40s = plan_env(requirements_with(hardware={"allowed_instance_families": ["g6e"]}), "prod")
    assert l40s.compute.gpu == "l40s" and l40s.engine.kv_cache_dtype == "fp8"
    bp = plan_env(requirements_with(**{**LONG_PROMPTS, "hardware": {"allowed_instance_families": ["g6"]}}), "prod")
    assert bp.compute.gpu == "l4" and bp.engine.kv_cache_dtype == "auto"
    assert any(r.startswith("16-bit KV cache: an FP8 cache on NVIDIA L4 (compute capability 8.9) moves")
               for r in bp.rationale)


def test_gpus_without_fp8_never_get_an_fp8_kv_cache():
    req = requirements_with(**{**LONG_PROMPTS, "hardware": {"allowed_instance_families": ["p4de"]}})
    bp = plan_env(req, "prod")
    assert bp.compute.gpu == "a100-80gb" and bp.engine.kv_cache_dtype == "auto"
    assert not any("KV cache" in r and "FP8" in r for r in bp.rationale)


@pytest.mark.parametrize(("families", "quantization", "flag"), [
    (["g6e"], None, "awq_marlin"), (["g4dn"], None, "awq"), (["g6e"], "gptq", "gptq_marlin")])
def test_quantised_checkpoints_run_the_kernels_the_model_was_calibrated_on(families, quantization, flag):
    model = {"precision": "int4", **({"quantization": quantization} if quantization else {})}
    req = requirements_with(model=model, hardware={"allowed_instance_families": families},
                            slo={"ttft_p95_ms": 3000, "itl_p95_ms": 150}, budget={"max_monthly_usd": None})
    bp = plan_env(req, "prod")
    assert bp.engine.quantization == flag and f"--quantization={flag}" in vllm_args(bp.engine, bp.model.name)


def test_a_mixture_of_experts_model_is_sized_on_its_active_experts():
    req = requirements_with(model={"id": "mixtral-8x7b", "max_context_tokens": 8192},
                            hardware={"allowed_instance_families": ["p5", "p4de"]}, budget={"max_monthly_usd": None})
    bp = plan_env(req, "prod")
    assert bp.models[0].weights_gib == pytest.approx(87, abs=1)
    assert bp.predictions.itl_p95_ms <= 50 and bp.compute.gpus_per_replica >= 2


def test_llm_search_is_deterministic_and_simulates_only_candidates_that_can_win():
    catalog = load_catalog()
    req = requirements_with()
    model = resolve_models(req, catalog)[0]
    first = llm_search(req, "prod", model, catalog)
    assert first == llm_search(req, "prod", model, catalog)
    assert first.screened > 2 * first.simulated


def test_the_search_keeps_simulating_until_some_candidate_meets_the_slo():
    # Long p95 prompts: the cheapest candidates all miss the TTFT target; a faster, dearer one meets it.
    req = requirements_with(traffic={"mean_input_tokens": 3000, "input_tokens_p95": 9000, "mean_output_tokens": 200},
                            model={"max_context_tokens": 16384}, slo={"ttft_p95_ms": 400, "itl_p95_ms": 40},
                            budget={"max_monthly_usd": None})
    bp = plan_env(req, "prod")
    assert bp.predictions.ttft_p95_ms <= 400 and bp.predictions.itl_p95_ms <= 40


def test_targets_met_idle_but_not_under_load_name_the_light_load_p95s():
    """A TTFT target an idle replica meets (prod: at the band's pessimistic edge) but the 95th-percentile prompt misses
    even at light load: the error names the light-load p95s, which miss the target, and how far to raise it."""
    import re

    from blueprints.core.errors import SizingError

    def regulated(ttft_p95_ms: float):
        return requirements_with("regulated-assistant", traffic={"mean_input_tokens": 2000, "input_tokens_p95": 4000},
                                 slo={"ttft_p95_ms": ttft_p95_ms, "itl_p95_ms": 20}, budget={"max_monthly_usd": None})

    target = 300
    with pytest.raises(SizingError) as idle:  # a target no idle replica meets names the idle floor instead
        plan_env(regulated(1), "prod")
    floor = re.search(r"the lowest TTFT of a mean-length prompt on an idle replica is (\d+) ms", str(idle.value))
    assert floor and int(floor.group(1)) < target  # the premise: met idle
    with pytest.raises(SizingError, match=r"even at light load the best p95s are TTFT (\d+) ms and ITL [\d.]+ ms "
                                          r"\(p5(en)?\.48xlarge, tensor_parallel_size=8\).*raise slo.ttft_p95_ms to >= "
                                          r"\d+, or relax the ITL target") as exc:
        plan_env(regulated(target), "prod")
    named = int(re.search(r"best p95s are TTFT (\d+) ms", str(exc.value)).group(1))
    assert named > target and f"raise slo.ttft_p95_ms to >= {named}, or relax" in str(exc.value)


def test_a_run_that_must_miss_stops_early_and_only_a_complete_run_meets(catalog):
    """`run_meeting` (the bisection's runs) is `run_at_rate`'s run where it meets the targets and None where the
    complete run misses them, on rates across the bracket; a stopped run has served fewer requests."""
    from blueprints.capacity import planning
    from blueprints.capacity.planning import LatencyTargets, run_meeting, simulate_rate
    from blueprints.capacity.workload import simulation_requests

    req = requirements_with()
    model = resolve_models(req, catalog)[0]
    best = llm_search(req, "prod", model, catalog).options[0]
    cand, shape = best.candidate, traffic_shape(model)
    hi = cand.rate_bound_rps
    met = missed = stopped = 0
    for targets in (LatencyTargets(req.slo.ttft_p95_ms, req.slo.itl_p95_ms),
                    LatencyTargets(None, None, e2e_p95_ms=8000.0)):
        for rate in (hi / 32, hi / 4, hi / 2, hi * 3 / 4, hi):
            planning.clear_caches()
            fast = run_meeting(cand, shape, targets, rate)
            full = run_at_rate(cand, shape, rate)
            assert (fast is not None) == targets.met_by(full)
            if fast is not None:
                met += 1
                assert fast == full
                continue
            missed += 1
            early = simulate_rate(cand, shape, rate, requests=simulation_requests(hi),
                                  stop_above_ms=(targets.ttft_p95_ms, targets.e2e_p95_ms))
            assert not early.stable and early.measured <= full.measured
            stopped += early.measured < full.measured
    assert met >= 2 and missed >= 2 and stopped >= 2


def test_a_remembered_run_answers_every_target_it_decides_and_only_those(monkeypatch, catalog):
    """A stable run is the complete one whatever its stops (`run_at_rate` and looser targets get it without a new
    run); a stopped run answers targets at least as tight as its stops with a miss, and looser ones are simulated."""
    from blueprints.capacity import planning
    from blueprints.capacity.planning import LatencyTargets, run_meeting

    req = requirements_with()
    model = resolve_models(req, catalog)[0]
    cand, shape = llm_search(req, "prod", model, catalog).options[0].candidate, traffic_shape(model)
    runs: list[tuple] = []
    simulate_rate = planning.simulate_rate
    monkeypatch.setattr(planning, "simulate_rate",
                        lambda *a, **kw: runs.append(kw.get("stop_above_ms")) or simulate_rate(*a, **kw))
    light, heavy = cand.rate_bound_rps / 8, cand.rate_bound_rps
    planning.clear_caches()
    complete = planning.run_at_rate(cand, shape, light)
    planning.clear_caches()
    tight_itl = LatencyTargets(60_000, complete.itl_ms.p95 / 2)  # a stable run that misses on ITL alone
    assert run_meeting(cand, shape, tight_itl, light) is None and len(runs) == 2
    assert planning.run_at_rate(cand, shape, light) == complete and len(runs) == 2
    assert run_meeting(cand, shape, LatencyTargets(60_000, None), light) == complete and len(runs) == 2
    ttft = LatencyTargets(1.0, None)  # a TTFT no loaded replica meets: the run stops
    assert run_meeting(cand, shape, ttft, heavy) is None and len(runs) == 3 and runs[-1] == (1.0, None)
    assert run_meeting(cand, shape, LatencyTargets(0.5, None, e2e_p95_ms=10.0), heavy) is None and len(runs) == 3
    looser = LatencyTargets(60_000, None)
    assert (run_meeting(cand, shape, looser, heavy) is not None) == looser.met_by(
        planning.run_at_rate(cand, shape, heavy)) and runs[3] == (60_000, None)


def test_a_rate_search_stopped_once_the_replicas_are_known_gives_the_complete_searchs_replicas(monkeypatch, catalog):
    """`size_replica_until` asked for the replicas of a peak gives the complete search's count, from fewer simulated
    runs where every rate it could still end on gives that count; `size_replica` afterwards goes on to the sizing a
    cold search finds."""
    from blueprints.capacity import planning
    from blueprints.plan.options.llm import latency_targets, replicas_for

    req = requirements_with()
    model = resolve_models(req, catalog)[0]
    shape, targets = traffic_shape(model), latency_targets(req, model, managed=False)
    cands = [o.candidate for o in llm_search(req, "prod", model, catalog).options]
    runs: list[float] = []
    simulate_rate = planning.simulate_rate
    # Every run the searches ask for is counted; the simulation is deterministic, so a run asked again (the caches are
    # cleared before each search) is this test's copy of the first (777 runs asked, 159 distinct).
    simulated: dict[tuple, object] = {}

    def counted(c, s, rate, **kw):
        runs.append(rate)
        key = (c, s, rate, tuple(sorted(kw.items())))
        if key not in simulated:
            simulated[key] = simulate_rate(c, s, rate, **kw)
        return simulated[key]

    monkeypatch.setattr(planning, "simulate_rate", counted)
    fewer = 0
    for cand in cands:
        for peak, floor in ((cand.rate_bound_rps * 7.3, 1), (cand.rate_bound_rps * 2.1, 2), (1.0, 50)):
            def replicas(rps: float, peak: float = peak, floor: int = floor) -> int:
                return replicas_for(peak, rps, floor)
            planning.clear_caches()
            runs.clear()
            cold = planning.size_replica(cand, shape, targets)
            complete = len(runs)
            planning.clear_caches()
            runs.clear()
            part = planning.size_replica_until(cand, shape, targets, lambda rates: len(set(map(replicas, rates))) == 1)
            assert len(runs) <= complete and (part is None) == (cold is None)
            fewer += len(runs) < complete
            if cold is not None:
                assert replicas(part.max_rps) == replicas(cold.max_rps) and part.max_rps <= cold.max_rps
                assert planning.size_replica(cand, shape, targets) == cold
    assert fewer >= 1


@pytest.mark.parametrize("meets_below, sized_at, light_load_run", [
    (0.6, "the highest bisection rate at or below it", False),  # a mid meets: the light load is never simulated
    (0.04, "the light load", True),  # every mid misses: the light load is simulated last, and is the answer
    (0.01, None, True),  # nothing meets, not even the light load: None
])
def test_the_rate_search_simulates_the_light_load_only_when_every_higher_rate_missed(monkeypatch, catalog,
                                                                                     meets_below, sized_at,
                                                                                     light_load_run):
    """The bisection over (1/32 of the rate bound, the bound], against a replica that meets the targets below
    `meets_below` x the bound (a stand-in for the simulation, so the search itself is what is tested)."""
    from blueprints.capacity import planning

    req = requirements_with()
    model = resolve_models(req, catalog)[0]
    cand, shape = llm_search(req, "prod", model, catalog).options[0].candidate, traffic_shape(model)
    targets = planning.LatencyTargets(req.slo.ttft_p95_ms, req.slo.itl_p95_ms)
    hi = cand.rate_bound_rps
    asked: list[float] = []

    def meeting(candidate, shape, targets, rate):
        asked.append(rate)
        return run_at_rate(candidate, shape, hi / 4) if rate <= meets_below * hi else None

    monkeypatch.setattr(planning, "run_meeting", meeting)
    planning._size_replica.cache_clear()
    try:
        sizing = planning.size_replica(cand, shape, targets)
    finally:
        planning._size_replica.cache_clear()
    assert asked[0] == hi and len(asked) == 1 + 6 + light_load_run
    assert (asked[-1] == hi / 32) is light_load_run and asked.count(hi / 32) == light_load_run
    if sized_at is None:
        assert sizing is None
    elif light_load_run:
        assert sizing.max_rps == round(hi / 32, 6)
    else:
        meeting_mids = [r for r in asked[1:] if r <= meets_below * hi]
        assert sizing.max_rps == round(max(meeting_mids), 6) and sizing.max_rps > (meets_below - 0.02) * hi
