"""The `prometheus-address` check of `blueprint preview` (`blueprints.review.deployability.checks`): a KEDA Prometheus trigger
queries the Prometheus the platform runs, or the one the existing cluster declares.
"""

from __future__ import annotations

from blueprints.core import defaults
from blueprints.contracts.platform import planned_outputs
from blueprints.review.preview import DeployabilityFinding
from blueprints.contracts.stackconfig import PROJECT
from blueprints.review.deployability.context import CheckContext, SCALED_OBJECT, named, get_in, list_of


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
