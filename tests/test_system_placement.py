"""Add-on pods on the system nodes (check `system-placement`): every pod a platform's Helm charts run, but their per-node
DaemonSets, is pinned to the system node group by the values paths `blueprints/catalog/addons.yaml` records per chart
(`placement`); unpinned, the KEDA HTTP add-on's interceptor, scaler and operator landed on any untainted node, a CPU
service's Karpenter node included, and kept it from consolidating."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from blueprints.catalog.addons import load_platform_catalog
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.deployability.context import RELEASE
from blueprints.review.deployability.placement import placed_by
from blueprints.review.preview import PreviewReport
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"
PLATFORMS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS.glob("Pulumi.platform-*.yaml"))
SYSTEM = {"servingblueprints.io/pool": "system"}


@pytest.fixture(scope="module")
def dev() -> PreviewReport:
    """The platform with scale-to-zero services: it installs the KEDA HTTP add-on."""
    return bundled_review("platform-dev-us-west-2")


def _findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == "system-placement"]


def _release(report: PreviewReport, name: str):
    return next(r for r in report.resources if r.type == RELEASE and r.inputs.get("name") == name)


def _edit_values(report: PreviewReport, release: str, edit) -> PreviewReport:
    record = _release(report, release)
    inputs = copy.deepcopy(record.inputs)
    edit(inputs["values"])
    new = dataclasses.replace(record, inputs=inputs)
    return dataclasses.replace(report, resources=[new if r.urn == record.urn else r for r in report.resources])


def test_every_chart_the_platform_can_install_records_where_its_pods_go():
    pcat = load_platform_catalog()
    for addon_id in ("karpenter", "aws-load-balancer-controller", "keda", "keda-http-add-on", "kube-prometheus-stack",
                     "metrics-server", "nvidia-device-plugin", "dcgm-exporter"):
        addon = pcat.addon(addon_id)
        assert addon.placement or addon.daemonset is not None, addon_id


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_add_on_pod_of_every_platform_is_pinned_to_the_system_nodes(platform):
    report = bundled_review(platform)
    pcat = load_platform_catalog()
    releases = [r for r in report.resources if r.type == RELEASE and not r.inputs.get("name", "").endswith("-crd")]
    assert releases
    for record in releases:
        addon = next(a for a in pcat.helm.values() if a.release == record.inputs["name"])
        for workload, paths in addon.placement.items():
            found = placed_by(record.inputs["values"], paths)
            assert found is not None and found[1] == SYSTEM, (platform, addon.id, workload)
    assert _findings(report) == []


def test_the_http_add_on_without_the_interceptor_s_node_selector_is_a_finding(dev):
    """What the program installed before: only the interceptor's resources, no nodeSelector for any of the three."""
    def old(values):
        for workload in ("operator", "scaler"):
            del values[workload]
        del values["interceptor"]["nodeSelector"]
    messages = _findings(_edit_values(dev, "keda-add-ons-http", old))
    assert len(messages) == 3
    assert all("keep it from consolidating" in m for m in messages)
    assert any("interceptor pods" in m and "interceptor.nodeSelector unset" in m for m in messages)


def test_a_node_selector_for_another_pool_is_a_finding_and_keda_s_top_level_default_counts(dev):
    def elsewhere(values):
        values["interceptor"]["nodeSelector"] = {"servingblueprints.io/pool": "chat-assistant-dev"}
    [message] = _findings(_edit_values(dev, "keda-add-ons-http", elsewhere))
    assert "interceptor.nodeSelector is {'servingblueprints.io/pool': 'chat-assistant-dev'}" in message
    # KEDA's own chart: `.Values.operator.nodeSelector | default .Values.nodeSelector`.
    keda = load_platform_catalog().addon("keda")
    assert placed_by({"nodeSelector": SYSTEM}, keda.placement["operator"]) == ("nodeSelector", SYSTEM)
    assert placed_by({"operator": {"nodeSelector": {}}, "nodeSelector": SYSTEM}, keda.placement["operator"])[1] == SYSTEM


def test_a_chart_without_a_placement_record_is_a_finding(dev, monkeypatch):
    pcat = load_platform_catalog()
    monkeypatch.setitem(pcat.helm, "metrics-server", pcat.addon("metrics-server").model_copy(update={"placement": {}}))
    [message] = _findings(dev)
    assert "records no placement for metrics-server's pods" in message


ADDON = "aws:eks/addon:Addon"


def _eks_addon(report: PreviewReport, addon_name: str):
    return next(r for r in report.resources if r.type == ADDON and r.inputs.get("addonName") == addon_name)


def test_coredns_and_the_ebs_csi_controller_run_on_the_system_nodes(dev):
    import json

    pcat = load_platform_catalog()
    placed = {a for a, addon in pcat.eks.items() if addon.placement}
    assert placed == {"coredns", "aws-ebs-csi-driver"}  # the others are per-node DaemonSets
    assert all(pcat.eks[a].daemonset is not None for a in set(pcat.eks) - placed)
    for addon_id in sorted(placed):
        values = json.loads(_eks_addon(dev, addon_id).inputs["configurationValues"])
        for workload, paths in pcat.eks[addon_id].placement.items():
            assert placed_by(values, paths) == (paths[0], SYSTEM), (addon_id, workload)


def test_an_eks_add_on_without_its_node_selector_is_a_finding(dev):
    record = _eks_addon(dev, "coredns")
    inputs = {k: v for k, v in record.inputs.items() if k != "configurationValues"}
    report = dataclasses.replace(dev, resources=[dataclasses.replace(record, inputs=inputs) if r.urn == record.urn
                                                 else r for r in dev.resources])
    [message] = _findings(report)
    assert "EKS add-on coredns's coredns pods are not pinned to the system nodes (nodeSelector unset" in message
