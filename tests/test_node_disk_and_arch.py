"""Node disks and architectures as a real node has them: pods' ephemeral storage gets what the kubelet's filesystem
leaves after its 10 % eviction threshold, kube-reserved, the OS and images; the platform sizes its node volumes for
that; a NodePool only allows instance types its architecture requirement and AMI alias can launch; and a missing
add-on's fix names the key that pins its version."""

from __future__ import annotations

import copy
import dataclasses
import math
import shutil
from pathlib import Path

import pytest
import yaml

from blueprints.core import defaults
from blueprints.catalog import load_catalog
from blueprints.review.deployability.checks import check_deployability
from blueprints.plan.options.search import resolve_models
from blueprints.review.preview import PreviewReport
from blueprints.review.stack import review_stack
from blueprints.contracts.stackconfig import BLUEPRINT_KEY, PLATFORM_KEY, read_stack_config
from blueprints.contracts.consistency import stored_weights_gib
from blueprints.contracts.weights import disk_for_gib, replica_ephemeral_gib, sync_job_ephemeral_gib, usable_disk_gib
from tests.blueprint_builders import bundled_platform
from tests.conftest import ROOT, requirements_with

STACKS = ROOT / "stacks"
PLATFORM = "platform-prod-us-east-1"
CHAT = "chat-assistant-prod"
#: The instance type CHAT's NodePool launches, as planned (an amd64 GPU type with an NVMe instance store).
CHAT_TYPE = read_stack_config(STACKS / f"Pulumi.{CHAT}.yaml").compute.instance_type
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def review(tmp_path: Path, edits: dict | None = None) -> PreviewReport:
    """CHAT on PLATFORM, reviewed as `blueprint preview` does, after hand edits of their `config:` maps."""
    for stack in (CHAT, PLATFORM):
        shutil.copy(STACKS / f"Pulumi.{stack}.yaml", tmp_path)
    shutil.copytree(STACKS / "requirements", tmp_path / "requirements", dirs_exist_ok=True)
    for stack, change in (edits or {}).items():
        path = tmp_path / f"Pulumi.{stack}.yaml"
        data = yaml.safe_load(path.read_text())
        change(data["config"])
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return review_stack(CHAT, stacks_dir=tmp_path, program=ROOT / "__main__.py")


@pytest.fixture(scope="module")
def chat_report(tmp_path_factory) -> PreviewReport:
    return review(tmp_path_factory.mktemp("chat"))


# --- the arithmetic -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pods_gib", [0.5, 1, 18.5, 96, 155.3, 1000])
def test_the_smallest_disk_for_a_pods_requests_is_the_first_whose_usable_space_holds_them(pods_gib):
    reserve = defaults.SYSTEM_NODE_RESERVE_GIB
    disk = disk_for_gib(pods_gib, reserve_gib=reserve)
    assert usable_disk_gib(disk, reserve_gib=reserve) >= pods_gib > usable_disk_gib(disk - 1, reserve_gib=reserve)


def test_usable_disk_keeps_the_eviction_threshold_kube_reserved_and_the_reserve_free():
    # kubelet: nodefs.available<10 %; EKS nodeadm: kube-reserved ephemeral-storage 1Gi.
    assert usable_disk_gib(100, reserve_gib=40) == pytest.approx(100 * 0.9 - 1 - 40)
    assert usable_disk_gib(30, reserve_gib=40) == 0.0


# --- the platform sizes its node volumes ----------------------------------------------------------------------------


def test_system_nodes_hold_the_largest_download_its_image_and_the_controllers():
    chat = resolve_models(requirements_with(), load_catalog())[0]
    assert chat.spec.weights_uri.startswith("hf://")
    platform = bundled_platform(PLATFORM)
    need = sync_job_ephemeral_gib(stored_weights_gib(chat.weights_gib), from_hugging_face=True)  # the Job's request
    assert platform.system_nodes.disk_gib == disk_for_gib(need, reserve_gib=defaults.SYSTEM_NODE_RESERVE_GIB)
    assert usable_disk_gib(platform.system_nodes.disk_gib, reserve_gib=defaults.SYSTEM_NODE_RESERVE_GIB) >= need


def test_cpu_nodes_grow_their_root_volume_for_a_node_full_of_the_largest_cpu_capable_services_replicas():
    search = requirements_with("search-relevance")  # nvidia-gpu or cpu: may land on CPU nodes
    per_replica = replica_ephemeral_gib(m.weights_gib for m in resolve_models(search, load_catalog()))
    need = max(defaults.CPU_REPLICAS_PER_NODE) * per_replica
    step = defaults.NODE_VOLUME_STEP_GIB
    expected = max(defaults.CPU_NODE_ROOT_VOLUME_GIB,
                   math.ceil(disk_for_gib(need, reserve_gib=defaults.SERVING_NODE_ROOT_RESERVE_GIB) / step) * step)
    cpu = {nc.name: nc for nc in bundled_platform(PLATFORM).node_classes}["cpu"]
    assert cpu.root_volume_gib == expected == 200
    assert usable_disk_gib(cpu.root_volume_gib, reserve_gib=defaults.SERVING_NODE_ROOT_RESERVE_GIB) >= need
    gpu_only = {nc.name: nc for nc in bundled_platform("platform-prod-eu-central-1").node_classes}["cpu"]
    assert gpu_only.root_volume_gib == defaults.CPU_NODE_ROOT_VOLUME_GIB  # regulated-assistant runs on GPUs only


def test_every_catalogued_gpu_type_has_the_instance_store_its_node_class_puts_pods_on():
    gpu_types = [i.instance_type for i in load_catalog().ec2.values() if i.gpu_count]
    assert gpu_types and all(t in defaults.INSTANCE_STORE_GB for t in gpu_types)


# --- the scheduling check sees the same disk ------------------------------------------------------------------------


def test_a_system_disk_too_small_for_the_sync_jobs_download_is_unschedulable(tmp_path):
    report = review(tmp_path, {PLATFORM: lambda c: c[PLATFORM_KEY]["system_nodes"].__setitem__("disk_gib", 60)})
    usable = usable_disk_gib(60, reserve_gib=defaults.SYSTEM_NODE_RESERVE_GIB)
    [finding] = [f for f in report.deployability if f.check == "schedulable"]
    assert "Job 'chat-assistant-sync-llama-3-1-8b'" in finding.message
    assert f"{PLATFORM}'s system node group m7i.xlarge" in finding.message
    assert f"> {usable:.1f} GiB ephemeral-storage" in finding.message
    assert "the kubelet's 10 % eviction threshold, the OS and images" in finding.message


def test_a_replica_needing_more_than_the_instance_store_leaves_after_images_and_eviction_is_unschedulable(tmp_path):
    store_gib = defaults.INSTANCE_STORE_GB[CHAT_TYPE] * 1e9 / 2**30
    usable = usable_disk_gib(store_gib, reserve_gib=defaults.SERVING_NODE_RESERVE_GIB)
    assert usable < store_gib - 50  # what the check used to compare against: the raw instance store
    report = review(tmp_path, {CHAT: lambda c: c[BLUEPRINT_KEY]["compute"].__setitem__(
        "ephemeral_storage_gib_per_replica", math.ceil(usable) + 1)})
    [finding] = [f for f in report.deployability if f.check == "schedulable" and "Deployment" in f.message]
    assert f"NodePool 'chat-assistant' {CHAT_TYPE}: {math.ceil(usable) + 1 + 0.0:.1f} GiB ephemeral-storage > " \
           f"{usable:.1f} GiB ephemeral-storage" in finding.message


# --- NodePool architecture ------------------------------------------------------------------------------------------


def _with_pool(report: PreviewReport, change) -> PreviewReport:
    [pool] = [r for r in report.resources if r.type == NODE_POOL]
    inputs = copy.deepcopy(pool.inputs)
    change(inputs["spec"]["template"]["spec"]["requirements"])
    new = dataclasses.replace(pool, inputs=inputs)
    return dataclasses.replace(report, resources=[new if r.urn == pool.urn else r for r in report.resources])


def _arch_findings(report: PreviewReport) -> list:
    return [f for f in check_deployability(report, stacks_dir=STACKS) if f.check == "node-pool-arch"]


def test_a_node_pool_whose_architecture_requirement_excludes_its_instance_type_is_flagged(chat_report):
    assert _arch_findings(chat_report) == []
    assert load_catalog().instance(CHAT_TYPE).cpu_arch == "x86_64"

    def arm64(requirements: list) -> None:
        [arch] = [r for r in requirements if r["key"] == "kubernetes.io/arch"]
        arch["values"] = ["arm64"]

    [finding] = _arch_findings(_with_pool(chat_report, arm64))
    assert finding.message == (f"NodePool 'chat-assistant' requires kubernetes.io/arch In ['arm64'] but {CHAT_TYPE} is "
                               "amd64: Karpenter can never launch it; require amd64 (the instance type's architecture)")


def test_a_graviton_type_in_an_amd64_node_pool_is_flagged(chat_report):
    def graviton(requirements: list) -> None:
        [types] = [r for r in requirements if r["key"] == "node.kubernetes.io/instance-type"]
        types["values"] = ["c7g.4xlarge"]

    assert load_catalog().instance("c7g.4xlarge").cpu_arch == "arm64"
    [finding] = _arch_findings(_with_pool(chat_report, graviton))
    assert "but c7g.4xlarge is arm64" in finding.message


def test_a_node_class_alias_without_an_ami_for_the_architecture_is_flagged(chat_report, monkeypatch):
    monkeypatch.setitem(defaults.AMI_ALIAS_ARCHES, "al2023", ("arm64",))  # as if AL2023 shipped no x86_64 AMI
    [finding] = _arch_findings(chat_report)
    assert finding.message == (f"NodePool 'chat-assistant' launches {CHAT_TYPE} (x86_64) with AMI alias "
                               f"{defaults.KARPENTER_AMI_ALIAS}, which has no x86_64 AMI; use a node class whose alias "
                               "resolves one")


# --- the fix for a missing add-on names the key -------------------------------------------------------------------


def test_a_missing_platform_add_on_names_the_platform_to_re_plan_and_the_version_key(chat_report):
    platform = chat_report.platform
    without = platform.model_copy(update={"addons": [a for a in platform.addons if a.id != "keda"]})
    findings = check_deployability(dataclasses.replace(chat_report, platform=without), stacks_dir=STACKS)
    [scaled] = [f for f in findings if f.check == "addon-installed" and "ScaledObject" in f.message]
    assert (f"needs add-on keda (its CRD keda.sh/ScaledObject), which is not installed: add it to the platform "
            f"{PLATFORM}: re-plan it (`blueprint plan` of any service on it installs the add-ons its services need; "
            "platform.yaml's addon_versions.keda only pins that add-on's chart version)") in scaled.message
