"""Plans their own preview rejects (issue 23, class 7): the planner applies the rules the preview checks, so a plan
that succeeds previews clean, or the plan refuses (exit 2) naming the fix. One test per rule and instance found: the
sync Job's download and the system disk (`blueprints.contracts.weights.sync_job_ephemeral_gib`), a serving pod and
its node (`blueprints.contracts.placement`), an existing cluster's add-ons (`blueprints.plan.cluster_addons`)."""

from __future__ import annotations

import copy

import pytest
import yaml

from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.placement import allocatable, every_daemonset, proxied_pod_requests, serving_pod_fits
from blueprints.contracts.weights import disk_for_gib, sync_job_ephemeral_gib, usable_disk_gib, weights_volume_gib
from blueprints.core import defaults
from tests.plan_preview import plan_and_preview

LLAMA_70B_FROM_HF = {
    "service": "svc", "owner": "team", "cost_center": "cc-1",
    "model": {"id": "llama-3.1-70b", "weights_uri": "hf://meta-llama/Llama-3.1-70B-Instruct", "precision": "fp8",
              "max_context_tokens": 8192},
    "traffic": {"peak_requests_per_s": 2, "mean_input_tokens": 800, "mean_output_tokens": 300, "pattern": "steady"},
    "slo": {"ttft_p95_ms": 5000, "itl_p95_ms": 120, "availability_pct": 99.9},
    "hardware": {"accelerators": ["nvidia-gpu"]},
    "operations": {"preference": "self-hosted"},
    "environments": {"prod": {"region": "us-east-1"}},
}
#: Two ONNX encoders at fp32 whose Triton replica needs 5.68 GiB: the old 75 %-of-memory rule put it on a c7g.xlarge,
#: where the pod (6 GiB in whole GiB, plus the proxy's 128 MiB) exceeds the node's 5.8 GiB allocatable.
TRITON_ON_C7G = {
    "service": "svc", "owner": "team", "cost_center": "cc-1",
    "models": [{"id": i, "weights_uri": "s3://bucket-name/m/", "format": "onnx", "precision": "fp32",
                "traffic": {"peak_requests_per_s": 0.2, "mean_input_tokens": 64, "pattern": "steady"}}
               for i in ("bge-reranker-large", "distilbert-sst2")],
    "slo": {"latency_p95_ms": 60000, "availability_pct": 99.0},
    "hardware": {"accelerators": ["cpu"], "allowed_instance_families": ["c7g"]},
    "operations": {"preference": "self-hosted"},
    "environments": {"prod": {"region": "us-east-1"}},
}


# --- the sync Job's download and the system disk ------------------------------------------------------------------


@pytest.mark.parametrize("weights_gib", [0.01, 14.96, 68.18, 130.0])
def test_the_system_disk_planned_for_a_download_holds_the_request_the_sync_job_writes(weights_gib):
    request = sync_job_ephemeral_gib(weights_gib, from_hugging_face=True)
    assert request >= weights_volume_gib([weights_gib]) > request - 1  # whole GiB, rounded up, as `gi()` writes it
    disk = disk_for_gib(request, reserve_gib=defaults.SYSTEM_NODE_RESERVE_GIB)
    assert usable_disk_gib(disk, reserve_gib=defaults.SYSTEM_NODE_RESERVE_GIB) >= request
    assert sync_job_ephemeral_gib(weights_gib, from_hugging_face=False) == defaults.S3_SYNC_EPHEMERAL_GIB


def test_a_70b_model_from_hugging_face_previews_clean_on_the_system_disk_planned_for_it():
    # The disk was sized for 76.998 GiB while the Job asks 77Gi: `schedulable` failed its pods (76.8 GiB usable).
    outcome = plan_and_preview(LLAMA_70B_FROM_HF)
    assert outcome.planned, outcome.refused
    assert outcome.stacks == ["platform-prod-us-east-1", "svc-prod"]
    assert outcome.failures == {}


# --- a serving pod and its node ------------------------------------------------------------------------------------


def test_a_serving_pod_fits_only_where_the_previews_allocatable_holds_it_whole():
    have = allocatable("c7g.xlarge", ephemeral_gib=None, daemonsets=every_daemonset(gpu_node=False))
    cpu, memory = proxied_pod_requests(cpu=3, memory_gib=5.68)
    assert memory == 6 * 2**30 + 128 * 2**20  # the server's 6Gi and the proxy's 128Mi
    assert memory > have["memory"] and cpu <= have["cpu"]
    assert not serving_pod_fits("c7g.xlarge", per_node=1, cpu=3, memory_gib=5.68)
    assert serving_pod_fits("c7g.xlarge", per_node=1, cpu=3, memory_gib=4.36)
    assert serving_pod_fits("c7g.2xlarge", per_node=1, cpu=6, memory_gib=5.68)
    assert not serving_pod_fits("c7g.2xlarge", per_node=2, cpu=3, memory_gib=6.5)  # 2 x 7.1 GiB > 13.2 GiB


def test_every_catalogued_daemonset_is_counted_on_a_node_and_gpu_only_ones_only_on_gpu_nodes():
    pcat = load_platform_catalog()
    sets = [a.daemonset for a in [*pcat.eks.values(), *pcat.helm.values()] if a.daemonset]
    assert len(every_daemonset(gpu_node=True)) == len(sets)
    assert len(every_daemonset(gpu_node=False)) == len([d for d in sets if not d.gpu_nodes_only])
    helm_only = [a.daemonset for a in pcat.helm.values() if a.daemonset]
    assert len(every_daemonset(gpu_node=True, eks=False)) == len(helm_only)


def test_a_triton_pod_too_big_for_a_c7g_xlarge_is_planned_on_a_node_that_holds_it():
    outcome = plan_and_preview(TRITON_ON_C7G)
    assert outcome.planned, outcome.refused
    assert outcome.failures == {}  # was: schedulable, 6.1 GiB memory > 5.8 GiB on c7g.xlarge


# --- an existing cluster's add-ons ---------------------------------------------------------------------------------


def on_existing_cluster(addons: list[str] | None) -> dict:
    data = copy.deepcopy(TRITON_ON_C7G)
    data["hardware"] = {"accelerators": ["cpu"]}
    data["operations"] = {"preference": "self-hosted", "platform": "existing-cluster", "kubernetes_version": "1.33"}
    if addons is not None:
        data["operations"]["cluster_addons"] = addons
    return data


def test_an_existing_cluster_declaring_what_the_plan_needs_previews_clean():
    outcome = plan_and_preview(on_existing_cluster(["aws-load-balancer-controller", "keda",
                                                    "kube-prometheus-stack"]))
    assert outcome.planned, outcome.refused
    assert outcome.stacks == ["svc-prod"] and outcome.failures == {}


@pytest.mark.parametrize("addons, missing", [
    (None, ["aws-load-balancer-controller", "keda", "kube-prometheus-stack"]),
    (["aws-load-balancer-controller", "kube-prometheus-stack"], ["keda"]),
])
def test_an_existing_cluster_without_an_add_on_the_plan_needs_is_refused_naming_it(addons, missing):
    outcome = plan_and_preview(on_existing_cluster(addons))
    assert not outcome.planned  # `blueprint plan` exits 2 instead of writing what `addon-installed` fails
    assert "operations.cluster_addons: the existing cluster must run" in outcome.refused
    for addon in missing:
        assert f"{addon} (" in outcome.refused
    assert "install them on the cluster and list them in operations.cluster_addons" in outcome.refused
    declared = "declares none" if addons is None else f"declares only {', '.join(sorted(addons))}"
    assert declared in outcome.refused


@pytest.mark.parametrize("stack", ["support-sentiment-prod"])
def test_every_add_on_the_planner_requires_is_one_the_preview_fails_without(tmp_path, stack):
    """The planner's rule and the preview's checks agree on the bundled existing-cluster stack: it declares all the
    planner requires, and dropping any one of them makes `blueprint preview` fail."""
    from blueprints.contracts.stackconfig import CLUSTER_ADDONS_KEY, read_stack_config
    from blueprints.plan.cluster_addons import cluster_addons_needed
    from blueprints.review.stack import review_stack
    from tests.conftest import ROOT
    from tests.test_deployability import _copy_stacks, _edit_config

    stacks = _copy_stacks(tmp_path, stack)
    needed = cluster_addons_needed(read_stack_config(stacks / f"Pulumi.{stack}.yaml"))
    declared = yaml.safe_load((stacks / f"Pulumi.{stack}.yaml").read_text())["config"][CLUSTER_ADDONS_KEY]
    assert set(needed) == {"aws-load-balancer-controller", "kube-prometheus-stack", "metrics-server"}
    assert set(needed) <= set(declared)
    for addon in needed:
        _edit_config(stacks, stack, lambda c: c.__setitem__(CLUSTER_ADDONS_KEY, [a for a in declared if a != addon]))
        report = review_stack(stack, stacks_dir=stacks, program=ROOT / "__main__.py")
        assert not report.clean, addon
        assert any(addon in f.message for f in [*report.deployability, *report.signals]), addon
