"""Property tests: for generated requirements the planner returns plans that satisfy their own constraints, or
raises a `BlueprintError` (never any other exception); and every plan that succeeds previews clean (`blueprint preview`
exit 0), so the planner refuses (exit 2, with the fix) whatever its own preview would reject."""

from __future__ import annotations

from tests.conftest import PLAN_DATE, examples

import math
from typing import Any

from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Catalog, load_catalog
from blueprints.core.errors import BlueprintError
from blueprints.contracts.memory import kv_cache_tokens
from blueprints.plan.options.nongen import latency_target_ms
from blueprints.plan import planner
from blueprints.requirements.model import Precision
from blueprints.requirements.service import Requirements
from blueprints.capacity.sizing import estimate_llm
from blueprints.catalog.addons import load_platform_catalog
from tests import plan_preview
from tests.fresh_thread import on_fresh_stack

CATALOG = load_catalog()
LLMS = sorted(m.id for m in CATALOG.models.values() if m.task.generative)
ENCODERS = sorted(m.id for m in CATALOG.models.values() if not m.task.generative)
FAMILIES = sorted({i.family for i in CATALOG.ec2.values()})
REGIONS = ["us-east-1", "eu-central-1", "ap-east-1"]  # ap-east-1: no SageMaker image in the catalog


def plan(req: Requirements, catalog: Catalog, **inputs: Any) -> list[Blueprint]:
    """`blueprints.plan.planner.plan` on a fresh thread's stack (`tests.fresh_thread`)."""
    return on_fresh_stack(planner.plan, req, catalog, **inputs)


def plan_and_preview(data: dict) -> plan_preview.Outcome:
    """`tests.plan_preview.plan_and_preview` of `data` on a fresh thread's stack (`tests.fresh_thread`)."""
    return on_fresh_stack(plan_preview.plan_and_preview, data)


maybe = lambda strategy: st.one_of(st.none(), strategy)  # noqa: E731


@st.composite
def traffic(draw, *, generative: bool) -> dict:
    out = {"peak_requests_per_s": draw(st.floats(0.05, 200 if not generative else 40)),
           "mean_input_tokens": draw(st.integers(16, 3000)),
           "pattern": draw(st.sampled_from(["steady", "bursty", "spiky"]))}
    if generative:
        out["mean_output_tokens"] = draw(st.integers(16, 1000))
        out["streaming"] = draw(st.booleans())
    return out


@st.composite
def requirements(draw) -> dict:
    shape = draw(st.sampled_from(["llm", "encoder", "estate"]))
    region = draw(st.sampled_from(REGIONS))
    data: dict = {"service": "svc", "owner": "team", "cost_center": "cc-1"}
    if shape == "llm":
        data["model"] = {"id": draw(st.sampled_from(LLMS)), "weights_uri": "s3://bucket-name/m/",
                         "precision": draw(st.sampled_from(["bf16", "fp16", "fp8", "int4"])),
                         "max_context_tokens": draw(st.sampled_from([4096, 8192, 16384]))}
        data["traffic"] = draw(traffic(generative=True))
    elif shape == "encoder":
        data["model"] = {"id": draw(st.sampled_from(ENCODERS)), "weights_uri": "s3://bucket-name/m/",
                         "format": draw(st.sampled_from(["onnx", "onnx", "safetensors"])),
                         "precision": draw(st.sampled_from(["fp32", "fp16"]))}
        data["traffic"] = draw(traffic(generative=False))
    else:
        ids = draw(st.lists(st.sampled_from(ENCODERS), min_size=2, max_size=3, unique=True))
        data["models"] = [{"id": i, "weights_uri": "s3://bucket-name/m/", "format": "onnx",
                           "traffic": draw(traffic(generative=False))} for i in ids]
    data["slo"] = {k: v for k, v in {
        "ttft_p95_ms": draw(maybe(st.floats(50, 5000))), "itl_p95_ms": draw(maybe(st.floats(3, 150))),
        "latency_p95_ms": draw(maybe(st.floats(5, 500))),
        "availability_pct": draw(st.sampled_from([99.0, 99.5, 99.9]))}.items() if v is not None}
    accelerators = [["nvidia-gpu"], ["nvidia-gpu", "cpu"]] if shape == "llm" else [["cpu"], ["nvidia-gpu", "cpu"]]
    data["hardware"] = {"accelerators": draw(st.sampled_from([*accelerators, ["nvidia-gpu"], ["cpu"]])),
                        "allowed_instance_families": draw(st.one_of(
                            st.just([]), st.lists(st.sampled_from(FAMILIES), min_size=1, max_size=4, unique=True))),
                        "cpu_arch": draw(st.sampled_from([None, "x86_64", "arm64"]))}
    preferences = ["any", "self-hosted", "managed"] if shape != "estate" else ["any", "self-hosted"]
    data["operations"] = {"preference": draw(st.sampled_from(preferences)),
                          "platform": draw(st.sampled_from(["eks", "existing-cluster"]))}
    data["budget"] = {"max_monthly_usd": draw(maybe(st.floats(300, 200_000)))}
    data["environments"] = {
        "dev": {"region": region, "traffic_scale": draw(st.floats(0.05, 1.0)), "spot": draw(st.booleans()),
                "min_replicas": draw(st.sampled_from([None, 0, 1]))},
        "prod": {"region": region, "max_replicas": draw(st.sampled_from([None, 4, 50]))},
    }
    return data


def check_blueprint(bp: Blueprint, req: Requirements) -> None:
    env = req.environments[bp.environment]
    assert bp.region == env.region
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        assert f".dkr.ecr.{env.region}.amazonaws.com/" in bp.engine.image
        assert bp.engine.container_startup_health_check_timeout_s >= 2 * bp.startup.pod_start_s
    assert bp.compute.accelerator in req.hardware.accelerators
    families = req.hardware.allowed_instance_families
    assert not families or bp.compute.instance_type.removeprefix("ml.").split(".")[0] in families
    assert 1 <= bp.compute.replicas <= bp.autoscaling.max_replicas
    assert bp.autoscaling.min_replicas <= bp.autoscaling.max_replicas
    if req.budget.max_monthly_usd is not None:
        assert bp.predictions.monthly_cost_usd <= req.budget.max_monthly_usd
    assert bp.predictions.monthly_cost_usd == round(sum(line.monthly_usd for line in bp.predictions.cost_lines), 2)
    assert bp.autoscaling.cooldown_s > bp.startup.total_s
    if bp.models[0].task.generative:
        spec = req.model
        gpu = CATALOG.gpu(bp.compute.gpu)
        tp = bp.compute.gpus_per_replica
        assert bp.compute.gpus_per_node % tp == 0 and tp & (tp - 1) == 0
        conc = bp.predictions.concurrency_per_replica
        fp8_kv = bp.archetype is Archetype.VLLM_GPU and bp.engine.kv_cache_dtype == "fp8"
        assert not fp8_kv or gpu.supports_fp8
        kv = kv_cache_tokens(CATALOG.model(spec.id).architecture, gpu, precision=spec.precision,
                             tensor_parallel_size=tp, kv_cache_fp8=fp8_kv)
        assert kv >= bp.models[0].max_context_tokens  # weights + one max_model_len sequence fit in memory
        assert conc * (req.traffic.mean_input_tokens + req.traffic.mean_output_tokens) <= kv  # mean requests fit
        p = bp.predictions  # simulated p95 at this environment's peak share per replica
        assert req.slo.ttft_p95_ms is None or p.ttft_p95_ms <= req.slo.ttft_p95_ms
        assert req.slo.itl_p95_ms is None or p.itl_p95_ms <= req.slo.itl_p95_ms
        if bp.archetype is Archetype.VLLM_GPU:
            assert bp.engine.tensor_parallel_size == tp and bp.engine.max_num_seqs == conc
            assert bp.engine.max_num_batched_tokens >= conc
    else:
        assert bp.predictions.latency_p95_ms <= latency_target_ms(req) + 0.05  # predictions are rounded to 0.1 ms
        if bp.archetype is Archetype.ONNX_CPU:
            assert bp.engine.intra_op_threads == bp.compute.cpu_per_replica
        if bp.compute.accelerator.value == "cpu":
            c = bp.compute
            assert c.gpus_per_replica == 0
            assert c.replicas_per_node * c.cpu_per_replica <= c.vcpus_per_node * defaults.NODE_ALLOCATABLE_CPU_FRACTION


#: Found by this test: an endpoint sized at its instances' capacity, whose InvocationsPerInstance target rounded up
#: to 3 significant figures (53.3) passed what one instance reaches (53.223), so its blueprint was refused.
_SAGEMAKER_AT_CAPACITY = {
    "service": "svc", "owner": "team", "cost_center": "cc-1",
    "model": {"id": "mistral-7b", "weights_uri": "s3://bucket-name/m/", "precision": "fp8", "max_context_tokens": 4096},
    "traffic": {"peak_requests_per_s": 18.628042559253213, "mean_input_tokens": 1436, "pattern": "steady",
                "mean_output_tokens": 58, "streaming": True},
    "slo": {"itl_p95_ms": 45.0, "availability_pct": 99.0},
    "hardware": {"accelerators": ["nvidia-gpu"], "allowed_instance_families": ["p5", "c7g", "c7i", "g6"],
                 "cpu_arch": None},
    "operations": {"preference": "managed", "platform": "eks"},
    "budget": {"max_monthly_usd": None},
    "environments": {"dev": {"region": "us-east-1", "traffic_scale": 0.3404530842563496, "spot": False,
                             "min_replicas": None},
                     "prod": {"region": "us-east-1", "max_replicas": None}},
}


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requirements())
@example(data=_SAGEMAKER_AT_CAPACITY)
def test_the_planner_returns_self_consistent_plans_or_a_blueprint_error(data):
    try:
        req = Requirements.model_validate(data)
    except ValueError:
        return  # the schema refused the combination (e.g. spot in production): not the planner's concern
    try:
        blueprints = plan(req, CATALOG, as_of=PLAN_DATE)
    except BlueprintError as exc:
        assert str(exc)  # a message the user can act on
        return
    assert [bp.environment for bp in blueprints] == ["dev", "prod"]
    assert len({bp.archetype for bp in blueprints}) == 1
    for bp in blueprints:
        check_blueprint(bp, req)
    assert plan(req, CATALOG, as_of=PLAN_DATE) == blueprints  # deterministic


@settings(max_examples=examples(40), deadline=None)
@given(st.sampled_from(LLMS), st.sampled_from(sorted(CATALOG.gpus)), st.sampled_from([1, 2, 4, 8]),
       st.integers(1, 64), st.integers(1, 8000), st.integers(1, 2000))
def test_more_concurrency_never_lowers_itl_and_more_gpus_never_shrink_the_kv_cache(model, gpu, tp, conc, inp, out):
    arch, g = CATALOG.model(model).architecture, CATALOG.gpu(gpu)
    kw = dict(precision=Precision.BF16, input_tokens=inp,
              output_tokens=out)
    one = estimate_llm(arch, g, tensor_parallel_size=tp, concurrency=conc, **kw)
    more = estimate_llm(arch, g, tensor_parallel_size=tp, concurrency=conc + 1, **kw)
    wider = estimate_llm(arch, g, tensor_parallel_size=tp * 2, concurrency=conc, **kw)
    assert more.itl_ms >= one.itl_ms
    assert wider.kv_cache_tokens >= one.kv_cache_tokens
    assert math.isfinite(one.ttft_ms) and one.output_tokens_per_s > 0


#: The regions the bundled policy configs allow (a plan elsewhere is refused before it is made).
POLICY_REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1"]
ADDONS = sorted(load_platform_catalog().helm)


@st.composite
def deployable_requirements(draw) -> dict:
    """The documents above in the regions the policies allow, with only the SLO fields of their task (the others are
    refused before planning); an existing cluster declares all, some or none of the add-ons (the planner must refuse
    what its cluster cannot run)."""
    data = draw(requirements())
    generative = "model" in data and CATALOG.model(data["model"]["id"]).task.generative
    for key in (("latency_p95_ms",) if generative else ("ttft_p95_ms", "itl_p95_ms")):
        data["slo"].pop(key, None)
    region = draw(st.sampled_from(POLICY_REGIONS))
    for env in data["environments"].values():
        env["region"] = region
    if data["operations"]["platform"] == "existing-cluster":
        data["operations"]["kubernetes_version"] = draw(st.sampled_from(["1.31", "1.33", "1.35"]))
        declared = draw(st.sampled_from(["none", "some", "all"]))
        if declared != "none":
            data["operations"]["cluster_addons"] = ADDONS if declared == "all" else draw(
                st.lists(st.sampled_from(ADDONS), max_size=5, unique=True))
    return data


#: Each example plans and previews every stack it writes: few examples, no shrinking (the policy-pack documents of
#: tests/test_plan_then_preview.py run beside these). `benchmarks/plan_preview.py` runs 300 and prints the figures.
@settings(max_examples=examples(10), deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])
@given(deployable_requirements())
def test_every_successful_plan_previews_clean(data):
    outcome = plan_and_preview(data)  # a refusal (the schema's or the planner's) is exit 2 with a message
    event("refused" if outcome.refused else "planned")
    assert outcome.failures == {}, outcome.failures  # a plan its own preview rejects
