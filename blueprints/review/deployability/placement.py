"""The `system-placement` check of `blueprint preview` (`blueprints.review.deployability.checks`): every pod of a Helm
add-on or an EKS managed add-on the stack installs, other than its per-node DaemonSet, runs on the system node group.

A chart's Deployment without a nodeSelector lands on any untainted node: a CPU service's Karpenter node included,
which it then keeps from consolidating (and whose NodePool's limits it eats into). The catalog records, per chart, the
values paths that place each of its pods (`blueprints/catalog/addons.yaml` `placement`, with the chart's templates as
source); an add-on with neither a placement record nor a DaemonSet is a finding too, so a new chart is classified
before it ships. An EKS managed add-on (`aws:eks/addon:Addon`) is placed by its configuration values, the same way
(`eks:` `placement`, the paths of its `aws eks describe-addon-configuration` schema).
"""

from __future__ import annotations

import json

from blueprints.review.preview import DeployabilityFinding
from blueprints.review.deployability.context import POOL_LABEL, CheckContext, get_in, named

#: The pool label value of the system node group (components.cluster.SYSTEM_POOL).
SYSTEM_POOL = "system"


def placed_by(values: dict, paths: list[str]) -> tuple[str, dict] | None:
    """The first of `paths` (dotted values paths) set to a non-empty mapping, as the chart's `default` chain reads it."""
    for path in paths:
        value = get_in(values, *path.split("."))
        if isinstance(value, dict) and value:
            return path, value
    return None


def check_system_placement(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = _eks_addon_placement(ctx)
    for addon_id, release in sorted(ctx.releases.items()):
        addon = ctx.pcat.addon(addon_id)
        if not addon.placement and addon.daemonset is None:
            findings.append(DeployabilityFinding("system-placement", release.urn, (
                f"{named(release)}: blueprints/catalog/addons.yaml records no placement for {addon_id}'s pods "
                "(`placement`: the values paths that set each Deployment's nodeSelector, from the chart's templates)")))
            continue
        values = release.inputs.get("values") or {}
        for workload, paths in addon.placement.items():
            found = placed_by(values, paths)
            if found is None or found[1].get(POOL_LABEL) != SYSTEM_POOL:
                where = f"{found[0]} is {found[1]}" if found else f"{' / '.join(paths)} unset"
                findings.append(DeployabilityFinding("system-placement", release.urn, (
                    f"{named(release)}: {addon_id}'s {workload} pods are not pinned to the system nodes ({where}): "
                    "they land on any untainted node, a service's Karpenter node included, and keep it from "
                    f"consolidating; set {paths[0]} to {{{POOL_LABEL}: {SYSTEM_POOL}}}")))
    return findings


def _eks_addon_placement(ctx: CheckContext) -> list[DeployabilityFinding]:
    """The EKS managed add-ons whose Deployments the catalog places (`eks:` `placement`) but whose configuration
    values do not pin to the system nodes."""
    findings = []
    for addon in ctx.report.resources:
        if addon.type != "aws:eks/addon:Addon" or addon.inputs.get("addonName") not in ctx.pcat.eks:
            continue
        addon_id = addon.inputs["addonName"]
        raw = addon.inputs.get("configurationValues")
        values = json.loads(raw) if isinstance(raw, str) and raw else {}
        for workload, paths in ctx.pcat.eks[addon_id].placement.items():
            found = placed_by(values, paths)
            if found is None or found[1].get(POOL_LABEL) != SYSTEM_POOL:
                where = f"{found[0]} is {found[1]}" if found else f"{' / '.join(paths)} unset"
                findings.append(DeployabilityFinding("system-placement", addon.urn, (
                    f"{named(addon)}: EKS add-on {addon_id}'s {workload} pods are not pinned to the system nodes "
                    f"({where} in its configuration values): they land on any untainted node, a service's Karpenter "
                    f"node included, and keep it from consolidating; set {paths[0]} to {{{POOL_LABEL}: "
                    f"{SYSTEM_POOL}}}")))
    return findings
