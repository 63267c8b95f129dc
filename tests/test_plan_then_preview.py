"""Property tests of planning within the policy pack, over generated requirements (Hypothesis, derandomized, a
bounded number of examples):

- every successful plan previews clean: each stack it writes (services and platforms) runs under the mock engine
  with the bundled policy configs (an existing cluster declares all, some or none of the add-ons), and no invalid
  manifest, deployability or signal finding or mandatory policy violation (what makes `blueprint preview` exit 1) is
  allowed; a refusal must be a `BlueprintError` (`tests.plan_preview`; `benchmarks/plan_preview.py` runs 300);
- adding instance families never makes a fresh plan fail or cost more (a single production environment, so the
  archetype compared is the one planned; `operations.preference: any` trades up to 10 % for a managed endpoint by
  design and is left out).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from blueprints.catalog import load_catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.core.errors import BlueprintError
from tests import plan_preview
from tests.conftest import examples
from tests.fresh_thread import on_fresh_stack

CATALOG = load_catalog()
LLMS = ["llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"]
ENCODERS = sorted(m.id for m in CATALOG.models.values() if not m.task.generative)
FAMILIES = sorted({i.family for i in CATALOG.ec2.values()})
#: Regions the bundled policies allow (drawn four times as often), and one they do not.
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1"] * 4 + ["ap-south-1"]
ADDONS = sorted(load_platform_catalog().helm)


def plan_and_preview(data: dict) -> plan_preview.Outcome:
    """`tests.plan_preview.plan_and_preview` of `data` on a fresh thread's stack (`tests.fresh_thread`)."""
    return on_fresh_stack(plan_preview.plan_and_preview, data)


def plan_in(data: dict, folder: Path):
    """`tests.plan_preview.plan_in` of `data` in `folder` on a fresh thread's stack (`tests.fresh_thread`)."""
    return on_fresh_stack(plan_preview.plan_in, data, folder)


maybe = lambda strategy: st.one_of(st.none(), strategy)  # noqa: E731


@st.composite
def traffic(draw, *, generative: bool) -> dict:
    out = {"peak_requests_per_s": draw(st.sampled_from([0.5, 2, 6, 20] if generative else [5, 50, 300])),
           "mean_input_tokens": draw(st.sampled_from([128, 800, 2000])),
           "pattern": draw(st.sampled_from(["steady", "bursty", "spiky"]))}
    if generative:
        out["mean_output_tokens"] = draw(st.sampled_from([64, 300, 800]))
        out["streaming"] = draw(st.booleans())
    return out


@st.composite
def model_part(draw, shape: str) -> dict:
    if shape == "llm":
        return {"model": {"id": draw(st.sampled_from(LLMS)), "weights_uri": "s3://bucket-name/m/",
                          "precision": draw(st.sampled_from(["bf16", "fp8", "int4"])), "max_context_tokens": 8192},
                "traffic": draw(traffic(generative=True)),
                "slo": {"ttft_p95_ms": draw(st.sampled_from([1000, 2000, 5000])),
                        "itl_p95_ms": draw(st.sampled_from([40, 60, 120]))}}
    if shape == "encoder":
        return {"model": {"id": draw(st.sampled_from(ENCODERS)), "weights_uri": "s3://bucket-name/m/",
                          "format": "onnx"},
                "traffic": draw(traffic(generative=False)),
                "slo": {"latency_p95_ms": draw(st.sampled_from([50, 200]))}}
    ids = draw(st.lists(st.sampled_from(ENCODERS), min_size=1 if shape == "compound" else 2, max_size=3, unique=True))
    estate = [{"id": i, "weights_uri": "s3://bucket-name/m/", "format": "onnx",
               "traffic": draw(traffic(generative=False))} for i in ids]
    slo = {"latency_p95_ms": draw(st.sampled_from([100, 300]))}
    if shape == "compound":  # a generator beside retrieval models: two stacks per environment
        llm = draw(model_part("llm"))
        return {"models": [{**llm["model"], "traffic": llm["traffic"]}, *estate], "slo": {**llm["slo"], **slo}}
    return {"models": estate, "slo": slo}


@st.composite
def requirements(draw) -> dict:
    shape = draw(st.sampled_from(["llm", "llm", "encoder", "estate", "compound"]))
    data: dict = {"service": "svc", "owner": "team", "cost_center": "cc-1", **draw(model_part(shape))}
    data["slo"]["availability_pct"] = draw(st.sampled_from([99.0, 99.9]))
    gpu_families = sorted({i.family for i in CATALOG.ec2.values() if i.gpu_count})
    data["hardware"] = {"accelerators": draw(st.sampled_from([["nvidia-gpu"], ["nvidia-gpu", "cpu"]]
                                                             if shape in ("llm", "compound")
                                                             else [["nvidia-gpu"], ["nvidia-gpu", "cpu"], ["cpu"]])),
                        "allowed_instance_families": draw(st.one_of(st.just([]), st.lists(
                            st.sampled_from(gpu_families if shape in ("llm", "compound") else FAMILIES), min_size=1,
                            max_size=4,
                            unique=True)))}
    platform = draw(st.sampled_from(["eks", "eks", "existing-cluster"]))
    data["operations"] = {"preference": draw(st.sampled_from(["any", "self-hosted", "managed"] if shape != "estate"
                                                             else ["any", "self-hosted"])),
                          "platform": platform}
    if platform == "existing-cluster":  # all, some or none of the add-ons: the planner refuses what it cannot run
        declared = draw(st.sampled_from(["all", "all", "some", "none"]))
        if declared != "none":
            data["operations"]["cluster_addons"] = ADDONS if declared == "all" else draw(
                st.lists(st.sampled_from(ADDONS), max_size=5, unique=True))
        data["operations"]["kubernetes_version"] = draw(st.sampled_from(["1.31", "1.33", "1.35"]))
    data["compliance"] = {"audit_logging": draw(st.booleans()), "customer_managed_kms": draw(st.booleans())}
    data["budget"] = {"max_monthly_usd": draw(st.sampled_from([None, 5000, 60000, 400000]))}
    region = draw(st.sampled_from(REGIONS))
    data["environments"] = {
        "dev": {"region": region, "traffic_scale": 0.1, "spot": draw(st.booleans()),
                "min_replicas": draw(st.sampled_from([None, 0, 1]))},
        "staging": {"region": draw(st.sampled_from(REGIONS)), "traffic_scale": 0.3, "spot": draw(st.booleans())},
        "prod": {"region": region, "max_replicas": draw(st.sampled_from([None, 3, 40]))},
    }
    return data


#: Each example plans (and previews) a service: no shrinking, so a failure reports its example in bounded time.
BOUNDED = dict(deadline=None, suppress_health_check=list(HealthCheck),
               phases=[Phase.explicit, Phase.generate])


@settings(max_examples=examples(15), **BOUNDED)
@given(requirements())
def test_every_successful_plan_previews_clean_within_the_policy_pack(data):
    outcome = plan_and_preview(data)  # a refusal is a `BlueprintError` (or a schema error) with a message
    event("refused" if outcome.refused else f"planned: {len(outcome.stacks)} stack(s)")
    assert outcome.failures == {}, outcome.failures  # a plan its own preview rejects


@st.composite
def families_and_more(draw) -> tuple[dict, list[str]]:
    shape = draw(st.sampled_from(["llm", "llm", "encoder", "estate"]))
    data: dict = {"service": "svc", "owner": "team", "cost_center": "cc-1", **draw(model_part(shape))}
    families = draw(st.lists(st.sampled_from(FAMILIES), min_size=1, max_size=3, unique=True))
    more = draw(st.lists(st.sampled_from([f for f in FAMILIES if f not in families]), min_size=1, max_size=4,
                         unique=True))
    data["hardware"] = {"accelerators": ["nvidia-gpu", "cpu"], "allowed_instance_families": families}
    data["operations"] = {"preference": "managed" if shape == "encoder" and draw(st.booleans()) else "self-hosted"}
    data["budget"] = {"max_monthly_usd": draw(st.sampled_from([None, 5000, 100000]))}
    data["environments"] = {"prod": {"region": "us-east-1", "traffic_scale": draw(st.sampled_from([1, 3]))}}
    return data, more


@settings(max_examples=examples(12), **BOUNDED)
@given(families_and_more())
def test_adding_instance_families_never_makes_a_plan_fail_or_cost_more(case):
    data, more = case
    wider = {**data, "hardware": {**data["hardware"],
                                  "allowed_instance_families": data["hardware"]["allowed_instance_families"] + more}}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            [narrow] = plan_in(data, Path(tmp)).blueprints
        except BlueprintError:
            event("narrower set refused")
            return  # nothing to compare: the narrower set does not plan
        event(f"compared: {narrow.archetype.value}")
        [wide] = plan_in(wider, Path(tmp)).blueprints  # must not raise
    assert wide.predictions.monthly_cost_usd <= narrow.predictions.monthly_cost_usd + 0.01
