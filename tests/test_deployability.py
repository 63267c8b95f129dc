"""Deployability (`blueprints.review.deployability.checks`): what a real `pulumi up` needs that the mock engine never checks.

Each check passes on the bundled stacks and fails, naming the resource and the fix, on a stack config edited to break
it (a real preview) or, where the program cannot produce the case, on hand-edited records of a real preview.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.catalog.addons import load_platform_catalog
from blueprints.plan.platforms import BASE_ADDONS, GPU_ADDONS, SCALE_TO_ZERO_ADDONS
from blueprints.cli import app
from blueprints.review.deployability.checks import check_deployability
from blueprints.contracts.placement import allocatable
from blueprints.review.deployability.nodes import pod_requests
from blueprints.review.deployability.pod_security import pod_security_violations
from blueprints.core.errors import StackConfigError
from blueprints.contracts.platform import PlatformConfig, planned_outputs
from blueprints.review.preview import PreviewReport, RegisteredResource
from blueprints.review.stack import review_stack
from blueprints.contracts.stackconfig import BLUEPRINT_KEY, CLUSTER_ADDONS_KEY, PLATFORM_KEY, PROJECT, read_stack_config
from tests.conftest import ROOT

STACKS = ROOT / "stacks"
PROGRAM = ROOT / "__main__.py"
PLATFORM = "platform-prod-us-east-1"
CHAT = "chat-assistant-prod"      # vLLM on a GPU NodePool, on PLATFORM
L40S = "partner-api-prod"          # vLLM on g6e.xlarge (one L40S, 4 vCPU), on PLATFORM
EDGE = "support-sentiment-prod"   # ONNX on an existing (EKS) cluster
RELEASE = "kubernetes:helm.sh/v3:Release"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
ENFORCE = "pod-security.kubernetes.io/enforce"
#: kube-prometheus-stack's Prometheus Service for release `kube-prometheus-stack` in `monitoring`
#: ([KPS] templates/prometheus/service.yaml: `<fullname>-prometheus`, port 9090).
PLATFORM_PROMETHEUS = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
#: The add-on whose chart installs each custom resource kind the program creates.
CRD_OWNERS = {"ScaledObject": "keda", "ServiceMonitor": "kube-prometheus-stack",
              "PrometheusRule": "kube-prometheus-stack", "EC2NodeClass": "karpenter", "NodePool": "karpenter"}

runner = CliRunner()


# --- helpers --------------------------------------------------------------------------------------------------------


def _review(stacks_dir: Path, stack: str) -> PreviewReport:
    """`review_stack` as `blueprint preview` runs it, with the project's policy configs whatever the working dir."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return review_stack(stack, stacks_dir=stacks_dir, program=PROGRAM)


def _copy_stacks(dest: Path, *stacks: str) -> Path:
    """The stack configs, beside the requirements they are judged against."""
    dest.mkdir(parents=True, exist_ok=True)
    for stack in stacks:
        shutil.copy(STACKS / f"Pulumi.{stack}.yaml", dest)
    if not (dest / "requirements").exists():
        shutil.copytree(STACKS / "requirements", dest / "requirements")
    return dest


def _edit_config(stacks_dir: Path, stack: str, edit: Callable[[dict], None]) -> None:
    """Hand-edit a stack config's `config:` map."""
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["config"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


#: What a platform config must drop with an add-on to stay valid (PlatformConfig refuses an add-on whose needs are
#: missing, and node classes without Karpenter).
_DROPPED_WITH = {"kube-prometheus-stack": ["dcgm-exporter"], "keda": ["keda-http-add-on"]}


def _drop_addon(addon: str) -> Callable[[dict], None]:
    def edit(config: dict) -> None:
        addons = config[PLATFORM_KEY]["addons"]
        assert addon in [a["id"] for a in addons]
        gone = {addon, *_DROPPED_WITH.get(addon, [])}
        config[PLATFORM_KEY]["addons"] = [a for a in addons if a["id"] not in gone]
        if addon == "karpenter":
            config[PLATFORM_KEY]["node_classes"] = []
    return edit


def _record(report: PreviewReport, kind: str, name: str | None = None) -> RegisteredResource:
    """The one Kubernetes object of `kind` (and metadata name) in a report."""
    found = [r for r in report.resources if r.type.startswith("kubernetes:") and r.type.endswith(f":{kind}")
             and (name is None or r.inputs.get("metadata", {}).get("name") == name)]
    assert len(found) == 1, f"{kind} {name}: {[r.name for r in found]}"
    return found[0]


def _release(report: PreviewReport, addon: str) -> RegisteredResource:
    name = load_platform_catalog().addon(addon).release
    [release] = [r for r in report.resources if r.type == RELEASE and r.inputs.get("name") == name]
    return release


def _edited(report: PreviewReport, record: RegisteredResource, edit: Callable[[dict], object]) -> PreviewReport:
    """`report` with `record`'s inputs changed by `edit` (on a copy)."""
    inputs = copy.deepcopy(record.inputs)
    edit(inputs)
    return _replaced(report, dataclasses.replace(record, inputs=inputs))


def _replaced(report: PreviewReport, new: RegisteredResource) -> PreviewReport:
    return dataclasses.replace(report, resources=[new if r.urn == new.urn else r for r in report.resources])


def _added(report: PreviewReport, *records: RegisteredResource) -> PreviewReport:
    return dataclasses.replace(report, resources=[*report.resources, *records])


def _object(stack: str, api_version: str, kind: str, name: str, *, spec: dict | None = None,
            provider: str | None = None, dependencies: tuple[str, ...] = (), namespace: str = "default"
            ) -> RegisteredResource:
    """A hand-built Kubernetes object as the mock engine records it."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    type_ = f"kubernetes:{group_version}:{kind}"
    return RegisteredResource(
        urn=f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}", type=type_, name=name, parent=None, custom=True,
        inputs={"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace},
                "spec": spec or {}},
        dependencies=dependencies, provider=provider)


def _findings(report: PreviewReport, stacks_dir: Path = STACKS) -> list[tuple[str, str, str]]:
    return [(f.check, f.resource, f.message) for f in check_deployability(report, stacks_dir=stacks_dir)]


def _closure(report: PreviewReport, record: RegisteredResource) -> set[str]:
    """Every URN `record` waits for, transitively (`PreviewReport.depends_on`: dependencies and provider)."""
    by_urn = {r.urn: r for r in report.resources}
    seen: set[str] = set()
    todo = [record]
    while todo:
        for urn in report.depends_on(todo.pop()):
            if urn not in seen:
                seen.add(urn)
                if urn in by_urn:
                    todo.append(by_urn[urn])
    return seen


def _pod_spec(inputs: dict) -> dict:
    """A Deployment's or Job's pod spec, from its inputs."""
    return inputs["spec"]["template"]["spec"]


def _gpu_node_daemonsets(platform: PlatformConfig) -> list[tuple[int, int]]:
    """(cpu_m, memory_mi) of every DaemonSet on a GPU node of `platform`: EKS add-ons and its Helm add-ons."""
    pcat = load_platform_catalog()
    found = [a.daemonset for a in pcat.eks.values()] + [pcat.addon(a.id).daemonset for a in platform.addons]
    return [(d.cpu_m, d.memory_mi) for d in found if d is not None]


def _plain(output: str) -> str:
    """Terminal output with line wrapping undone."""
    return " ".join(output.split())


@pytest.fixture(scope="module")
def bundled(bundled_previews) -> dict[str, PreviewReport]:
    """Every bundled stack, reviewed as `blueprint preview` does."""
    return bundled_previews


@pytest.fixture()
def project(tmp_path, monkeypatch) -> Path:
    """A copy of the project (program, Pulumi.yaml, requirements and stack configs, policy configs) as the working
    directory."""
    shutil.copy(PROGRAM, tmp_path / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(STACKS, tmp_path / "stacks")
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- every check passes on the bundled stacks -----------------------------------------------------------------------


def test_every_bundled_stack_previews_with_no_deployability_finding(bundled):
    assert {PLATFORM, CHAT, EDGE} <= set(bundled)
    assert {stack: report.deployability for stack, report in bundled.items()} == {stack: [] for stack in bundled}
    assert all(report.clean for report in bundled.values())


# --- CRDs: every custom resource waits for what installs it ---------------------------------------------------------


def test_every_custom_resource_of_the_bundled_stacks_waits_for_the_release_or_platform_that_installs_its_crd(
        bundled):
    seen: dict[str, set[str]] = {"platform": set(), "service": set(), "existing cluster": set()}
    for stack, report in bundled.items():
        by_urn = {r.urn: r for r in report.resources}
        for record in report.resources:
            kind = record.type.rsplit(":", 1)[-1]
            if not record.type.startswith("kubernetes:") or kind not in CRD_OWNERS:
                continue
            owner, where = CRD_OWNERS[kind], f"{stack}: {record.name}"
            if report.is_platform:  # the CRD's release (or its CRD chart's) is created first
                addon = load_platform_catalog().addon(owner)
                releases = {r.urn for r in report.resources
                            if r.type == RELEASE and r.inputs.get("name") in (addon.release, f"{addon.release}-crd")}
                assert releases & _closure(report, record), f"{where} does not wait for {addon.release}"
                seen["platform"].add(kind)
            elif report.platform is not None:  # through the platform's StackReference, on a platform that has it
                [reference] = [r for r in report.resources if r.read and r.type == STACK_REFERENCE]
                assert reference.name.endswith(f"/{report.platform.stack}")
                assert record.provider is not None, f"{where} has no explicit provider"
                provider = by_urn[record.provider.rsplit("::", 1)[0]]
                assert provider.type == "pulumi:providers:kubernetes"
                assert reference.urn in report.depends_on(provider), f"{where}: provider not from the platform"
                assert reference.urn in _closure(report, record)
                assert owner in {a.id for a in report.platform.addons}, f"{where}: {owner} not on the platform"
                seen["service"].add(kind)
            else:  # an existing cluster declares it runs the add-on
                config = yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text())["config"]
                assert owner in config[CLUSTER_ADDONS_KEY], where
                seen["existing cluster"].add(kind)
    assert seen == {"platform": {"EC2NodeClass"}, "service": set(CRD_OWNERS) - {"EC2NodeClass"},
                    "existing cluster": {"ServiceMonitor", "PrometheusRule"}}


def test_a_node_class_that_does_not_wait_for_the_karpenter_release_is_flagged_naming_the_release(bundled):
    report = bundled[PLATFORM]
    node_class, release = _record(report, "EC2NodeClass", "gpu"), _release(report, "karpenter")
    assert release.urn in node_class.dependencies
    racing = dataclasses.replace(node_class, dependencies=tuple(d for d in node_class.dependencies
                                                                if d != release.urn))
    [(check, resource, message)] = _findings(_replaced(report, racing))
    assert (check, resource) == ("addon-installed", node_class.urn)
    assert "EC2NodeClass 'gpu' needs its CRD karpenter.k8s.aws/EC2NodeClass, installed by release 'karpenter'" \
        in message
    assert "add depends_on=[that release]" in message


def test_a_custom_resource_waiting_for_its_release_through_another_resource_passes(bundled):
    report = bundled[PLATFORM]
    node_class, release = _record(report, "EC2NodeClass", "gpu"), _release(report, "karpenter")
    between = _object(PLATFORM, "v1", "ConfigMap", "karpenter-ready", dependencies=(release.urn,),
                      provider=node_class.provider)
    via = dataclasses.replace(node_class, dependencies=tuple(between.urn if d == release.urn else d
                                                             for d in node_class.dependencies))
    assert _findings(_added(_replaced(report, via), between)) == []


def test_a_custom_resource_no_catalogued_add_on_installs_is_flagged(bundled):
    report = bundled[CHAT]
    certificate = _object(CHAT, "cert-manager.io/v1", "Certificate", "chat-tls", namespace="chat-assistant")
    [(check, resource, message)] = _findings(_added(report, certificate))
    assert (check, resource) == ("addon-installed", certificate.urn)
    assert "Certificate 'chat-tls': no add-on in blueprints/catalog/addons.yaml installs cert-manager.io/Certificate" \
        in message
    assert "install its CRD first and add the add-on to the catalog" in message


# --- add-ons: a service fails when its platform lacks one -----------------------------------------------------------


@pytest.mark.parametrize(("addon", "kind", "name"), [
    ("karpenter", "NodePool", "chat-assistant"),
    ("aws-load-balancer-controller", "Service", "chat-assistant-vllm"),
    ("keda", "ScaledObject", "chat-assistant-vllm"),
    ("nvidia-device-plugin", "Deployment", "chat-assistant-vllm"),
])
def test_removing_an_add_on_from_the_platform_fails_the_service_preview_naming_the_object_that_needs_it(
        tmp_path, addon, kind, name):
    stacks = _copy_stacks(tmp_path, CHAT, PLATFORM)
    _edit_config(stacks, PLATFORM, _drop_addon(addon))
    report = _review(stacks, CHAT)
    [finding] = [f for f in report.deployability if f.check == "addon-installed"]
    assert (finding.check, finding.resource) == ("addon-installed", _record(report, kind, name).urn)
    if addon == "karpenter":  # without it the NodePool's node class is gone too: no node fits the pods
        assert {f.check for f in report.deployability} == {"addon-installed", "schedulable"}
    else:
        assert len(report.deployability) == 1
    assert f"{kind} '{name}' needs add-on {addon} (" in finding.message
    assert f"which is not installed: add it to the platform {PLATFORM}" in finding.message
    assert not report.clean


def test_removing_kube_prometheus_stack_from_the_platform_fails_the_service_preview_naming_its_monitors(tmp_path):
    stacks = _copy_stacks(tmp_path, CHAT, PLATFORM)
    _edit_config(stacks, PLATFORM, _drop_addon("kube-prometheus-stack"))
    report = _review(stacks, CHAT)
    assert {(f.check, f.resource) for f in report.deployability} == {
        ("addon-installed", _record(report, "ServiceMonitor").urn),
        ("addon-installed", _record(report, "PrometheusRule").urn),
        ("prometheus-address", _record(report, "ScaledObject").urn)}


def test_a_platform_without_kube_prometheus_stack_fails_the_service_naming_its_monitors_and_prometheus(bundled):
    report = bundled[CHAT]
    platform = report.platform.model_copy(update={"addons": [a for a in report.platform.addons
                                                             if a.id != "kube-prometheus-stack"]})
    findings = _findings(dataclasses.replace(report, platform=platform))
    monitor, rule = _record(report, "ServiceMonitor"), _record(report, "PrometheusRule")
    scaler = _record(report, "ScaledObject")
    assert [(c, r) for c, r, _ in findings] == [("addon-installed", rule.urn), ("addon-installed", monitor.urn),
                                                ("prometheus-address", scaler.urn)]
    assert "PrometheusRule 'chat-assistant-vllm-slo' needs add-on kube-prometheus-stack (its CRD " \
           "monitoring.coreos.com/PrometheusRule)" in findings[0][2]
    assert "ServiceMonitor 'chat-assistant-vllm' needs add-on kube-prometheus-stack" in findings[1][2]
    assert all(f"add it to the platform {PLATFORM}" in m for _, _, m in findings[:2])
    assert f"ScaledObject 'chat-assistant-vllm' queries Prometheus at {PLATFORM_PROMETHEUS}, but no Prometheus is " \
           f"installed or declared: add kube-prometheus-stack to the platform {PLATFORM}" in findings[2][2]


@pytest.mark.parametrize("addon", ["metrics-server", "dcgm-exporter"])
def test_removing_an_add_on_no_object_of_the_service_needs_leaves_its_preview_clean(tmp_path, addon):
    stacks = _copy_stacks(tmp_path, CHAT, PLATFORM)
    _edit_config(stacks, PLATFORM, _drop_addon(addon))
    report = _review(stacks, CHAT)
    assert addon not in {a.id for a in report.platform.addons}
    assert report.deployability == []


def test_an_existing_cluster_without_metrics_server_fails_naming_its_cpu_autoscaler(tmp_path):
    stacks = _copy_stacks(tmp_path, EDGE)
    _edit_config(stacks, EDGE, lambda config: config[CLUSTER_ADDONS_KEY].remove("metrics-server"))
    report = _review(stacks, EDGE)
    [finding] = report.deployability
    hpa = _record(report, "HorizontalPodAutoscaler")
    assert (finding.check, finding.resource) == ("addon-installed", hpa.urn)
    assert "HorizontalPodAutoscaler 'support-sentiment-onnxruntime' needs add-on metrics-server" in finding.message
    assert f"add it to {CLUSTER_ADDONS_KEY} in {stacks / f'Pulumi.{EDGE}.yaml'}" in finding.message


def test_an_existing_cluster_that_declares_no_add_ons_fails_its_preview_naming_each_one(project):
    _edit_config(project / "stacks", EDGE, lambda config: config.__setitem__(CLUSTER_ADDONS_KEY, []))
    result = runner.invoke(app, ["preview", EDGE])
    assert result.exit_code == 1, result.output
    output = _plain(result.output)
    for kind, name, addon in [("PrometheusRule", "support-sentiment-onnxruntime-slo", "kube-prometheus-stack"),
                              ("ServiceMonitor", "support-sentiment-onnxruntime", "kube-prometheus-stack"),
                              ("HorizontalPodAutoscaler", "support-sentiment-onnxruntime", "metrics-server"),
                              ("Service", "support-sentiment-onnxruntime", "aws-load-balancer-controller")]:
        assert f"{kind} '{name}' needs add-on {addon}" in output
    assert len(re.findall(rf"add it to {CLUSTER_ADDONS_KEY} in \S*stacks/Pulumi\.{EDGE}\.yaml", output)) == 4
    data = json.loads(runner.invoke(app, ["preview", EDGE, "--json"]).stdout)
    assert [f["check"] for f in data["deployability"]] == ["addon-installed"] * 4


def test_a_service_whose_platform_config_is_missing_raises_naming_the_platform_to_plan_first(tmp_path):
    stacks = _copy_stacks(tmp_path, CHAT)
    with pytest.raises(StackConfigError, match=rf"{CHAT} lands on platform {PLATFORM}, whose stack config is "
                                               r"missing; plan it first"):
        _review(stacks, CHAT)


def test_the_cli_exits_2_naming_the_platform_to_plan_first_when_its_config_is_missing(project):
    (project / "stacks" / f"Pulumi.{PLATFORM}.yaml").unlink()
    result = runner.invoke(app, ["preview", CHAT])
    assert result.exit_code == 2, result.output
    output = _plain(result.output)
    assert "StackConfigError" in output
    assert f"lands on platform {PLATFORM}, whose stack config is missing; plan it first" in output
    assert "Traceback" not in output


# --- webhooks: a guarded object waits for the controller serving its webhook ----------------------------------------

#: The add-ons a platform installs (the others, MetalLB and the ingress controllers, are declared by existing and edge
#: clusters and never installed here).
_PLATFORM_ADDONS = {*BASE_ADDONS, *GPU_ADDONS, *SCALE_TO_ZERO_ADDONS}
WEBHOOKS = [(a.id, ref) for a in load_platform_catalog().helm.values() if a.id in _PLATFORM_ADDONS
            for ref in a.webhooks]


@pytest.mark.parametrize(("addon", "ref"), WEBHOOKS, ids=[ref for _, ref in WEBHOOKS])
def test_an_object_a_webhook_guards_that_does_not_wait_for_its_controller_is_flagged(bundled, addon, ref):
    report = bundled[PLATFORM]
    assert addon in {a.id for a in report.subject.addons}
    api_version, kind = ref.rsplit("/", 1)
    release = _release(report, addon)
    provider = _record(report, "EC2NodeClass", "gpu").provider  # the platform's Kubernetes provider
    spec = {"containers": [{"name": "app", "image": "busybox:1.37"}]} if kind == "Pod" else {}
    racing = _object(PLATFORM, api_version, kind, "demo", spec=spec, provider=provider)
    found = [(r, m) for c, r, m in _findings(_added(report, racing)) if c == "webhook-ready"]
    assert [r for r, _ in found] == [racing.urn]
    assert f"{kind} 'demo' is admitted by {addon}'s webhook, installed by release {release.inputs['name']!r}" \
        in found[0][1]
    assert "add depends_on=[that release]" in found[0][1]
    waiting = dataclasses.replace(racing, dependencies=(release.urn,))
    assert _findings(_added(report, waiting)) == []


# --- scheduling -----------------------------------------------------------------------------------------------------


def test_a_g6e_xlarge_gives_pods_what_kube_reserved_and_the_daemonsets_leave(bundled):
    have = allocatable("g6e.xlarge", ephemeral_gib=0, daemonsets=_gpu_node_daemonsets(bundled[L40S].platform))
    # 4 vCPU less kube-reserved (60 + 10 + 5 + 5 m) and aws-node 50, kube-proxy 100, ebs-csi-node 30, dcgm 100 m
    assert have["cpu"] == Decimal("3.64")
    # 32 GiB less 7.5 % VM overhead, 110 pods x 11 MiB + 255 MiB kube-reserved, 100 MiB eviction, 104 + 128 MiB DSs
    assert have["memory"] == 28513 * 2**20
    assert have["nvidia.com/gpu"] == 1


@pytest.mark.parametrize(("field", "value", "resource", "shown"), [
    ("cpu_per_replica", 3.9, "cpu", lambda v: f"{float(v):g} CPU"),
    ("memory_gib_per_replica", 28.5, "memory", lambda v: f"{float(v) / 2**30:.1f} GiB memory"),
], ids=["cpu", "memory"])
def test_a_replica_requesting_more_than_a_g6e_xlarge_can_give_is_unschedulable(tmp_path, field, value, resource,
                                                                             shown):
    stacks = _copy_stacks(tmp_path, L40S, PLATFORM)
    _edit_config(stacks, L40S, lambda config: config[BLUEPRINT_KEY]["compute"].__setitem__(field, value))
    report = _review(stacks, L40S)
    assert report.subject.compute.instance_type == "g6e.xlarge"
    deployment = _record(report, "Deployment")
    want = pod_requests(_pod_spec(deployment.inputs))[resource]
    have = allocatable("g6e.xlarge", ephemeral_gib=0, daemonsets=_gpu_node_daemonsets(report.platform))[resource]
    assert want > have
    [finding] = report.deployability
    assert (finding.check, finding.resource) == ("schedulable", deployment.urn)
    assert "Deployment 'partner-api-vllm': its pods request more than a node can give" in finding.message
    assert f"(NodePool 'partner-api' g6e.xlarge: {shown(want)} > {shown(have)})" in finding.message
    assert "lower the requests, use a larger instance type or a larger node volume" in finding.message


def test_a_replica_requesting_just_under_what_a_g6e_xlarge_can_give_is_schedulable(tmp_path):
    stacks = _copy_stacks(tmp_path, L40S, PLATFORM)
    # 3.5 CPU for vLLM plus the authenticating proxy's 0.1 CPU (components/access.py).
    _edit_config(stacks, L40S, lambda config: config[BLUEPRINT_KEY]["compute"].__setitem__("cpu_per_replica", 3.5))
    report = _review(stacks, L40S)
    assert report.subject.compute.instance_type == "g6e.xlarge"
    assert pod_requests(_pod_spec(_record(report, "Deployment").inputs))["cpu"] == Decimal("3.6")
    assert report.deployability == []


def test_a_deployment_whose_node_selector_matches_no_node_pool_is_unschedulable(bundled):
    report = bundled[CHAT]
    deployment = _record(report, "Deployment")
    stray = _edited(report, deployment, lambda i: _pod_spec(i)["nodeSelector"].__setitem__(
        "servingblueprints.io/pool", "chat-assistant-typo"))
    [(check, resource, message)] = _findings(stray)
    assert (check, resource) == ("schedulable", deployment.urn)
    assert "Deployment 'chat-assistant-vllm': its pods stay Pending: no NodePool or node group carries its " \
           "nodeSelector" in message
    assert "'servingblueprints.io/pool': 'chat-assistant-typo'" in message
    assert "select a node pool's labels and tolerate its taints" in message


def test_a_gpu_deployment_that_does_not_tolerate_the_gpu_taint_is_unschedulable(bundled):
    report = bundled[CHAT]
    deployment = _record(report, "Deployment")
    assert _pod_spec(deployment.inputs)["tolerations"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu",
                                                     "operator": "Exists"}]
    intolerant = _edited(report, deployment, lambda i: _pod_spec(i).pop("tolerations"))
    [(check, resource, message)] = _findings(intolerant)
    assert (check, resource) == ("schedulable", deployment.urn)
    assert "Deployment 'chat-assistant-vllm': its pods stay Pending: NodePool 'chat-assistant' taint(s) it does " \
           "not tolerate: ['nvidia.com/gpu']" in message
    assert "tolerate its taints" in message


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}, True),
    ({"operator": "Exists"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}, False),
])
def test_only_a_toleration_matching_the_gpu_taint_lets_the_pods_schedule(bundled, toleration, tolerated):
    report = bundled[CHAT]
    deployment = _record(report, "Deployment")
    edited = _edited(report, deployment, lambda i: _pod_spec(i).__setitem__("tolerations", [toleration]))
    assert [c for c, _, _ in _findings(edited)] == ([] if tolerated else ["schedulable"])


def _max_replicas(stack: str = CHAT) -> int:
    return read_stack_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml").autoscaling.max_replicas


def test_a_gpu_node_pool_whose_limit_is_below_max_replicas_plus_surge_is_flagged(bundled):
    report, most = bundled[CHAT], _max_replicas()
    pool = _record(report, "NodePool")
    assert pool.inputs["spec"]["limits"] == {"nvidia.com/gpu": most + 1}  # max replicas + 1 surge, one GPU each
    short = _edited(report, pool, lambda i: i["spec"]["limits"].__setitem__("nvidia.com/gpu", most))
    [(check, resource, message)] = _findings(short)
    assert (check, resource) == ("node-pool-limits", pool.urn)
    assert f"NodePool 'chat-assistant' limits nvidia.com/gpu to {most} but Deployment 'chat-assistant-vllm' may run " \
           f"{most} replicas plus 1 surge" in message
    assert f"{most + 1} nvidia.com/gpu in all" in message
    assert "raise the NodePool's limits (or lower the autoscaler's maximum)" in message


def test_a_percentage_max_surge_counts_against_the_node_pool_limits(bundled):
    report, most = bundled[CHAT], _max_replicas()
    deployment = _record(report, "Deployment")
    assert deployment.inputs["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 1
    wide = _edited(report, deployment, lambda i: i["spec"]["strategy"]["rollingUpdate"].__setitem__("maxSurge",
                                                                                                   "50%"))
    [(check, _, message)] = _findings(wide)
    assert check == "node-pool-limits"
    surge = -(-most // 2)  # Kubernetes rounds a percentage surge up
    assert f"may run {most} replicas plus {surge} surge" in message and f"{most + surge} nvidia.com/gpu in all" in message


def test_node_pool_limits_count_the_capacity_of_the_nodes_not_the_requests_of_the_pods(bundled):
    # Pods of 3.1 CPU (vLLM 3, its proxy 0.1), but each needs its own 4-vCPU g6e.xlarge: Karpenter counts 4 vCPU
    # per pod, not 3.1.
    report, most = bundled[L40S], _max_replicas(L40S)
    assert report.subject.compute.instance_type == "g6e.xlarge"
    pool = _record(report, "NodePool")
    assert pod_requests(_pod_spec(_record(report, "Deployment").inputs))["cpu"] == Decimal("3.1")
    nodes = most + 1
    short = _edited(report, pool, lambda i: i["spec"]["limits"].__setitem__("cpu", str(3 * nodes + 1)))
    [(check, resource, message)] = _findings(short)
    assert (check, resource) == ("node-pool-limits", pool.urn)
    assert f"NodePool 'partner-api' limits cpu to {3 * nodes + 1} but Deployment 'partner-api-vllm' may run " \
           f"{most} replicas plus 1 surge on {nodes} g6e.xlarge node(s) over 3 zones, 1 per node, {4 * nodes} CPU in all" \
        in message
    enough = _edited(report, pool, lambda i: i["spec"]["limits"].__setitem__("cpu", str(4 * nodes)))
    assert _findings(enough) == []


# --- Pod Security ---------------------------------------------------------------------------------------------------


def test_a_host_path_volume_in_a_baseline_namespace_is_rejected(bundled):
    report = bundled[CHAT]
    namespace = _record(report, "Namespace")
    assert namespace.inputs["metadata"]["labels"][ENFORCE] == "restricted"
    baseline = _edited(report, namespace, lambda i: i["metadata"]["labels"].__setitem__(ENFORCE, "baseline"))
    deployment = _record(baseline, "Deployment")
    host = _edited(baseline, deployment, lambda i: _pod_spec(i)["volumes"].append(
        {"name": "host-logs", "hostPath": {"path": "/var/log"}}))
    [(check, resource, message)] = _findings(host)
    assert (check, resource) == ("pod-security", deployment.urn)
    assert "Deployment 'chat-assistant-vllm': namespace 'chat-assistant' enforces Pod Security 'baseline', which " \
           "rejects its pods (hostPath volume 'host-logs')" in message
    assert "fix the pod's securityContext or lower the namespace's level with a reason" in message


def test_pods_that_do_not_set_run_as_non_root_are_rejected_in_a_restricted_namespace(bundled):
    report = bundled[CHAT]
    namespace, deployment = _record(report, "Namespace"), _record(report, "Deployment")
    assert namespace.inputs["metadata"]["labels"][ENFORCE] == "restricted" and _findings(report) == []

    def drop_non_root(inputs: dict) -> None:  # neither the pod nor the containers say so
        pod = _pod_spec(inputs)
        del pod["securityContext"]["runAsNonRoot"]
        for c in pod["initContainers"] + pod["containers"]:
            del c["securityContext"]["runAsNonRoot"]

    findings = _findings(_edited(report, deployment, drop_non_root))
    assert [(c, r) for c, r, _ in findings] == [("pod-security", deployment.urn)]
    assert "Deployment 'chat-assistant-vllm': namespace 'chat-assistant' enforces Pod Security 'restricted'" \
        in findings[0][2]
    assert "(container 'vllm' does not set runAsNonRoot: true; container 'auth-proxy' does not set " \
           "runAsNonRoot: true)" in findings[0][2]
    assert pod_security_violations(_pod_spec(deployment.inputs), "restricted") == []
    # The pod-level runAsNonRoot alone admits every container again.
    admitted = _edited(report, deployment, lambda i: (drop_non_root(i), _pod_spec(i)["securityContext"].__setitem__(
        "runAsNonRoot", True)))
    assert _findings(admitted) == []


def _pod(sc: dict | None = None, *, unset: tuple[str, ...] = (), **pod) -> dict:
    """A pod spec the restricted level admits, with the container's securityContext changed by `sc` (and `unset`
    keys removed) and pod-level fields from `pod`."""
    context = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"},
               "capabilities": {"drop": ["ALL"]}, **(sc or {})}
    container = {"name": "app", "image": "busybox:1.37",
                 "securityContext": {k: v for k, v in context.items() if k not in unset}}
    return {"containers": [container], **pod}


#: Controls of the baseline level (restricted rejects them too): a pod breaking one control, and the reason.
BASELINE_CASES = {
    "host network": (_pod(hostNetwork=True), "hostNetwork: true"),
    "host PID": (_pod(hostPID=True), "hostPID: true"),
    "host IPC": (_pod(hostIPC=True), "hostIPC: true"),
    "hostPath volume": (_pod(volumes=[{"name": "logs", "hostPath": {"path": "/var/log"}}]), "hostPath volume 'logs'"),
    "privileged container": (_pod({"privileged": True}), "container 'app' is privileged"),
    "added capability": (_pod({"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}),
                         "container 'app' adds capabilities ['SYS_ADMIN']"),
    "host port": ({"containers": [{**_pod()["containers"][0], "ports": [{"containerPort": 80, "hostPort": 80}]}]},
                  "container 'app' uses a hostPort"),
    "container seccomp Unconfined": (_pod({"seccompProfile": {"type": "Unconfined"}}),
                                     "container 'app' runs seccomp Unconfined"),
    "pod seccomp Unconfined": (_pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
                               "pod runs seccomp Unconfined"),
}
#: Controls only the restricted level adds (baseline admits these pods).
RESTRICTED_CASES = {
    "volume type": (_pod(volumes=[{"name": "shared", "nfs": {"server": "nfs.example", "path": "/"}}]),
                    "volume 'shared' of type ['nfs']"),
    "privilege escalation": (_pod({"allowPrivilegeEscalation": True}),
                             "container 'app' does not set allowPrivilegeEscalation: false"),
    "runAsNonRoot unset": (_pod(unset=("runAsNonRoot",)), "container 'app' does not set runAsNonRoot: true"),
    "container runAsNonRoot false": (_pod({"runAsNonRoot": False}), "container 'app' does not set runAsNonRoot: true"),
    "pod runAsNonRoot false": (_pod(securityContext={"runAsNonRoot": False}), "pod sets runAsNonRoot: false"),
    "container runAsUser 0": (_pod({"runAsUser": 0}), "container 'app' runs as UID 0"),
    "pod runAsUser 0": (_pod({"runAsUser": 1000}, securityContext={"runAsUser": 0}), "pod runs as UID 0"),
    "seccomp unset": (_pod(unset=("seccompProfile",)), "container 'app' has no seccompProfile RuntimeDefault"),
    "capabilities not dropped": (_pod({"capabilities": {"drop": ["NET_RAW"]}}),
                                 "container 'app' does not drop ALL capabilities"),
    "capability baseline allows": (_pod({"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}),
                                   "container 'app' adds capabilities ['CHOWN']"),
}


@pytest.mark.parametrize("control", BASELINE_CASES)
def test_the_baseline_level_rejects_each_of_its_controls(control):
    spec, reason = BASELINE_CASES[control]
    assert pod_security_violations(spec, "baseline") == [reason]
    assert reason in pod_security_violations(spec, "restricted")
    assert pod_security_violations(spec, "privileged") == []


@pytest.mark.parametrize("control", RESTRICTED_CASES)
def test_the_restricted_level_rejects_each_of_its_controls_that_baseline_admits(control):
    spec, reason = RESTRICTED_CASES[control]
    assert pod_security_violations(spec, "baseline") == []
    assert pod_security_violations(spec, "restricted") == [reason]


@pytest.mark.parametrize("spec", [
    _pod(),
    _pod({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}),
    _pod(unset=("runAsNonRoot",), securityContext={"runAsNonRoot": True}),
    _pod(unset=("seccompProfile",), securityContext={"seccompProfile": {"type": "RuntimeDefault"}}),
    _pod({"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/app.json"}}),
    _pod({"runAsUser": 1000}, volumes=[{"name": "cache", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]),
], ids=["compliant", "NET_BIND_SERVICE", "pod-level runAsNonRoot", "pod-level seccomp", "Localhost seccomp",
        "allowed volumes"])
def test_a_pod_meeting_every_restricted_control_is_admitted(spec):
    assert pod_security_violations(spec, "restricted") == []


# --- KEDA's Prometheus ----------------------------------------------------------------------------------------------


def test_every_scaled_object_on_a_platform_queries_the_platforms_prometheus(bundled):
    queried = []
    for report in bundled.values():
        if report.platform is None:
            continue
        assert planned_outputs(report.platform).prometheus_url == PLATFORM_PROMETHEUS
        for record in report.resources:
            if record.type == "kubernetes:keda.sh/v1alpha1:ScaledObject":
                queried += [t["metadata"]["serverAddress"] for t in record.inputs["spec"]["triggers"]
                            if t["type"] == "prometheus"]
    assert len(queried) >= 6 and set(queried) == {PLATFORM_PROMETHEUS}


def test_a_scaled_object_querying_another_prometheus_is_flagged_with_the_platforms_address(bundled):
    report = bundled[CHAT]
    scaler = _record(report, "ScaledObject")
    elsewhere = _edited(report, scaler, lambda i: i["spec"]["triggers"][0]["metadata"].__setitem__(
        "serverAddress", "http://prometheus-server.monitoring.svc:80"))
    [(check, resource, message)] = _findings(elsewhere)
    assert (check, resource) == ("prometheus-address", scaler.urn)
    assert "ScaledObject 'chat-assistant-vllm' queries Prometheus at http://prometheus-server.monitoring.svc:80, " \
           f"but the installed Prometheus serves {PLATFORM_PROMETHEUS}" in message
    assert "use that address" in message


def _prometheus_scaler(address: str) -> RegisteredResource:
    return _object(EDGE, "keda.sh/v1alpha1", "ScaledObject", "edge-queue", namespace="support-sentiment", spec={
        "scaleTargetRef": {"name": "support-sentiment-onnxruntime"}, "maxReplicaCount": 2,
        "triggers": [{"type": "prometheus", "metadata": {"serverAddress": address, "query": "sum(up)",
                                                         "threshold": "1"}}]})


def test_an_existing_clusters_prometheus_is_its_declared_url_else_kube_prometheus_stacks(bundled, tmp_path):
    declared = "http://prometheus.observability.svc:9090"
    stacks = _copy_stacks(tmp_path / "declared", EDGE)
    _edit_config(stacks, EDGE, lambda config: config.update({
        f"{PROJECT}:prometheusUrl": declared, CLUSTER_ADDONS_KEY: [*config[CLUSTER_ADDONS_KEY], "keda"]}))
    assert _findings(_added(bundled[EDGE], _prometheus_scaler(declared)), stacks_dir=stacks) == []
    scaler = _prometheus_scaler(PLATFORM_PROMETHEUS)
    [(check, resource, message)] = _findings(_added(bundled[EDGE], scaler), stacks_dir=stacks)
    assert (check, resource) == ("prometheus-address", scaler.urn)
    assert f"ScaledObject 'edge-queue' queries Prometheus at {PLATFORM_PROMETHEUS}, but the installed Prometheus " \
           f"serves {declared}" in message
    undeclared = _copy_stacks(tmp_path / "undeclared", EDGE)  # kube-prometheus-stack's default address
    _edit_config(undeclared, EDGE, lambda config: config[CLUSTER_ADDONS_KEY].append("keda"))
    assert _findings(_added(bundled[EDGE], scaler), stacks_dir=undeclared) == []


def test_an_existing_cluster_with_no_prometheus_flags_a_scaler_that_queries_one(bundled, tmp_path):
    stacks = _copy_stacks(tmp_path, EDGE)
    _edit_config(stacks, EDGE, lambda config: config.__setitem__(CLUSTER_ADDONS_KEY, [
        "aws-load-balancer-controller", "metrics-server", "keda"]))
    scaler = _prometheus_scaler(PLATFORM_PROMETHEUS)
    found = [(r, m) for c, r, m in _findings(_added(bundled[EDGE], scaler), stacks_dir=stacks)
             if c == "prometheus-address"]
    assert [r for r, _ in found] == [scaler.urn]
    assert f"ScaledObject 'edge-queue' queries Prometheus at {PLATFORM_PROMETHEUS}, but no Prometheus is " \
           f"installed or declared: add kube-prometheus-stack to {CLUSTER_ADDONS_KEY} in " \
           f"{stacks / f'Pulumi.{EDGE}.yaml'}" in found[0][1]
    assert f"or set {PROJECT}:prometheusUrl" in found[0][1]


def test_a_platform_config_edited_into_an_add_on_without_what_it_needs_exits_2_naming_both(tmp_path):
    stacks = _copy_stacks(tmp_path, PLATFORM)

    def drop_only_prometheus(config: dict) -> None:
        config[PLATFORM_KEY]["addons"] = [a for a in config[PLATFORM_KEY]["addons"]
                                          if a["id"] != "kube-prometheus-stack"]

    _edit_config(stacks, PLATFORM, drop_only_prometheus)
    with pytest.raises(StackConfigError, match="add-on dcgm-exporter needs kube-prometheus-stack installed too"):
        _review(stacks, PLATFORM)
