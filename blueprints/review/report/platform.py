"""What a platform stack builds, for people: a table of its VPC, EKS cluster, node group, add-ons and node classes with
their versions, and a Mermaid diagram of the same in install order (`plan.md` of a platform stack).

Read from what the program registered (the records of the offline preview) and, for the network, the platform's
config (an existing VPC is read, not registered).
"""

from __future__ import annotations

import re
from typing import Any

from blueprints.core.defaults import VPC_CIDR
from blueprints.contracts.platform import PlatformConfig
from blueprints.review.preview import PreviewReport, RegisteredResource

CLUSTER = "aws:eks/cluster:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EKS_ADDON = "aws:eks/addon:Addon"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def _of(report: PreviewReport, type_token: str) -> list[RegisteredResource]:
    return [r for r in report.resources if r.type == type_token and not r.read]


def _vpc(cfg: PlatformConfig) -> str:
    net = cfg.network
    if net.existing_vpc is not None:
        vpc = net.existing_vpc
        return (f"existing {vpc.vpc_id}: {len(vpc.private_subnet_ids)} private, {len(vpc.public_subnet_ids)} public "
                "subnets")
    nat = net.az_count if net.nat_per_az else 1
    return f"new {VPC_CIDR} over {net.az_count} zones, {nat} NAT gateway(s)"


def _chart(release: RegisteredResource) -> str:
    return str(release.inputs.get("chart", "")).rsplit("/", 1)[-1]


def platform_rows(report: PreviewReport) -> list[list[str]]:
    """(component, what, version) rows: the VPC and its endpoints, the EKS cluster, the system node group, the EKS
    add-ons, every Helm release (chart and version) and every EC2NodeClass (AMI alias, root volume)."""
    cfg = report.subject
    assert isinstance(cfg, PlatformConfig), "platform_rows takes a platform stack's report"
    rows = [["VPC", _vpc(cfg), ""]]
    if cfg.network.interface_endpoints:
        gateway = "" if "s3" in cfg.network.interface_endpoints else ", s3 (gateway)"
        rows.append(["VPC endpoints", ", ".join(cfg.network.interface_endpoints) + f" (interface){gateway}", ""])
    for r in _of(report, CLUSTER):
        api = "private" if cfg.network.private_endpoint else "public"
        rows.append(["EKS cluster", f"{r.inputs.get('name')}, {api} API endpoint", f"Kubernetes {r.inputs.get('version')}"])
    for r in _of(report, NODE_GROUP):
        scaling = r.inputs.get("scalingConfig") or {}
        rows.append(["node group", f"{scaling.get('minSize')}-{scaling.get('maxSize')} x "
                     f"{', '.join(r.inputs.get('instanceTypes') or [])}, {r.inputs.get('diskSize')} GiB disk",
                     str(r.inputs.get("amiType", ""))])
    addons = sorted(str(r.inputs.get("addonName")) for r in _of(report, EKS_ADDON))
    if addons:
        rows.append(["EKS add-ons", ", ".join(addons), "EKS default for the cluster version"])
    for r in _of(report, RELEASE):
        rows.append(["Helm release", f"{r.inputs.get('name')} (chart {_chart(r)}) in {r.inputs.get('namespace')}",
                     str(r.inputs.get("version", ""))])
    for r in _of(report, NODE_CLASS):
        spec: dict[str, Any] = r.inputs.get("spec") or {}
        alias = next((t.get("alias") for t in spec.get("amiSelectorTerms") or [] if t.get("alias")), "")
        volume = next((b.get("ebs", {}).get("volumeSize") for b in spec.get("blockDeviceMappings") or []), "")
        store = ", instance-store RAID0" if spec.get("instanceStorePolicy") == "RAID0" else ""
        rows.append(["EC2NodeClass", f"{(r.inputs.get('metadata') or {}).get('name')}: root {volume}{store}", alias])
    return rows


def _id(record: RegisteredResource) -> str:
    return "p_" + re.sub(r"[^A-Za-z0-9_]", "_", record.name)


def platform_diagram(report: PreviewReport) -> str:
    """A Mermaid flowchart: VPC -> EKS -> system nodes -> Helm releases in install order (an edge where a release
    waits for another) -> node classes, each labelled with its version."""
    cfg = report.subject
    assert isinstance(cfg, PlatformConfig), "platform_diagram takes a platform stack's report"
    lines = ["flowchart TB", f"  vpc[\"VPC<br/>{_vpc(cfg)}\"]"]
    clusters, groups = _of(report, CLUSTER), _of(report, NODE_GROUP)
    releases, classes = _of(report, RELEASE), _of(report, NODE_CLASS)
    for r in clusters:
        lines += [f"  {_id(r)}[\"EKS {r.inputs.get('name')}<br/>Kubernetes {r.inputs.get('version')}\"]",
                  f"  vpc --> {_id(r)}"]
        addons = sorted(str(a.inputs.get("addonName")) for a in _of(report, EKS_ADDON))
        if addons:
            lines += [f"  eks_addons[\"EKS add-ons<br/>{', '.join(addons)}\"]", f"  {_id(r)} --> eks_addons"]
    for g in groups:
        lines.append(f"  {_id(g)}[\"system nodes<br/>{', '.join(g.inputs.get('instanceTypes') or [])} "
                     f"{g.inputs.get('amiType', '')}\"]")
        lines += [f"  {_id(c)} --> {_id(g)}" for c in clusters]
    by_urn = {r.urn: r for r in releases}
    for r in releases:
        lines.append(f"  {_id(r)}[\"{r.inputs.get('name')}<br/>{_chart(r)} {r.inputs.get('version')}\"]")
        before = [by_urn[u] for u in r.dependencies if u in by_urn]
        lines += [f"  {_id(b)} --> {_id(r)}" for b in before] or [f"  {_id(g)} --> {_id(r)}" for g in groups]
    for n in classes:
        spec = n.inputs.get("spec") or {}
        alias = next((t.get("alias") for t in spec.get("amiSelectorTerms") or [] if t.get("alias")), "")
        lines.append(f"  {_id(n)}[(\"EC2NodeClass {(n.inputs.get('metadata') or {}).get('name')}<br/>{alias}\")]")
        waits = [by_urn[u] for u in n.dependencies if u in by_urn]
        lines += [f"  {_id(w)} --> {_id(n)}" for w in waits]
    return "\n".join(lines)
