"""The Prometheus checks of `blueprint preview` (`blueprints.review.deployability.checks`): `prometheus-address` (a KEDA
Prometheus trigger queries the Prometheus the platform runs, or the one the existing cluster declares) and
`scrapes-hidden-components` (kube-prometheus-stack scrapes nothing EKS hides).
"""

from __future__ import annotations

from blueprints.core import defaults
from blueprints.contracts.platform import PlatformConfig, PlatformKind, planned_outputs
from blueprints.review.preview import DeployabilityFinding
from blueprints.contracts.stackconfig import PROJECT
from blueprints.review.deployability.context import CheckContext, RELEASE, SCALED_OBJECT, named, get_in, list_of


def expected_prometheus(ctx: CheckContext) -> str | None:
    """The Prometheus server a KEDA trigger must query: the platform's, or the existing cluster's declared one."""
    if ctx.report.platform is not None:
        return planned_outputs(ctx.report.platform).prometheus_url
    declared = ctx.config.get(f"{PROJECT}:prometheusUrl")
    if declared:
        return declared
    if "kube-prometheus-stack" in ctx.external:
        return defaults.PROMETHEUS_URL
    return None


def check_prometheus(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    expected = expected_prometheus(ctx)
    for record in ctx.report.resources:
        if record.type != SCALED_OBJECT:
            continue
        for trigger in list_of(get_in(record.inputs, "spec", "triggers")):
            if trigger.get("type") != "prometheus":
                continue
            address = get_in(trigger, "metadata", "serverAddress")
            if expected is None:
                findings.append(DeployabilityFinding(
                    "prometheus-address", record.urn, f"{named(record)} queries Prometheus at {address}, but no "
                    f"Prometheus is installed or declared: add kube-prometheus-stack to {ctx.fix('kube-prometheus-stack')}, or set "
                    f"{PROJECT}:prometheusUrl"))
            elif address != expected:
                findings.append(DeployabilityFinding(
                    "prometheus-address", record.urn, f"{named(record)} queries Prometheus at {address}, but the "
                    f"installed Prometheus serves {expected}: KEDA would read nothing and never scale; use that "
                    "address"))
    return findings


def check_hidden_components(ctx: CheckContext) -> list[DeployabilityFinding]:
    """`scrapes-hidden-components`: on an EKS platform, kube-prometheus-stack scrapes none of the components EKS does
    not expose (catalog `hidden_on_eks`: the managed control plane's controller manager, scheduler and etcd, and
    kube-proxy's loopback-only metrics); each scraped one would have its "...Down" alert page forever."""
    cfg = ctx.report.subject
    if not isinstance(cfg, PlatformConfig) or cfg.kind is not PlatformKind.EKS:
        return []
    addon = ctx.pcat.helm["kube-prometheus-stack"]
    findings = []
    for record in ctx.report.resources:
        if record.type != RELEASE or record.inputs.get("name") != addon.release:
            continue
        values = record.inputs.get("values") or {}
        scraped = [key for key in addon.hidden_on_eks if get_in(values, key, "enabled") is not False]
        if scraped:
            findings.append(DeployabilityFinding("scrapes-hidden-components", record.urn, (
                f"{named(record)} scrapes {', '.join(scraped)} (the chart's default), which EKS does not expose: their "
                "ServiceMonitors find nothing and their \"...Down\" alerts page forever; set "
                f"{', '.join(f'{k}.enabled: false' for k in scraped)} (blueprints/catalog/addons.yaml hidden_on_eks)")))
    return findings
