"""The `replica-owner` check of `blueprint preview` (`blueprints.review.deployability.checks`): one owner per replica
count, so a second `pulumi up` keeps the fleet.

KEDA's ScaledObject (through the HPA it creates) and an HPA write a Deployment's or StatefulSet's `.spec.replicas`
through the scale subresource and so become its owner under server-side apply; Pulumi applying its own value again
then conflicts on `.spec.replicas` or, forced, resets a scaled-out fleet to its minimum
(`defaults.AUTOSCALED_REPLICAS_PATH` has the upstream facts). So a workload an autoscaler targets either leaves
`spec.replicas` out of its manifest or has Pulumi ignore it after creation (`ignore_changes`); a workload no
autoscaler targets must not ignore it, or a re-planned replica count never reaches the cluster.
"""

from __future__ import annotations

from blueprints.core import defaults
from blueprints.review.preview import DeployabilityFinding, RegisteredResource
from blueprints.review.deployability.context import CheckContext, get_in, named

#: Workload kinds with a scale subresource that the program registers, by Pulumi type token.
SCALABLE = {"kubernetes:apps/v1:Deployment": "Deployment", "kubernetes:apps/v1:StatefulSet": "StatefulSet"}
#: Autoscalers and where their target is named (camelCase, as the engine sees the inputs).
SCALERS = ("kubernetes:keda.sh/v1alpha1:ScaledObject", "kubernetes:autoscaling/v2:HorizontalPodAutoscaler")


def _key(kind: str, record: RegisteredResource, name: object) -> tuple[str, object, object]:
    return kind, get_in(record.inputs, "metadata", "namespace"), name


def scaled_targets(records: list[RegisteredResource]) -> dict[tuple[str, object, object], RegisteredResource]:
    """(kind, namespace, name) of every workload an autoscaler targets -> that autoscaler."""
    targets = {}
    for record in records:
        if record.type in SCALERS:
            ref = get_in(record.inputs, "spec", "scaleTargetRef") or {}
            targets[_key(ref.get("kind") or "Deployment", record, ref.get("name"))] = record
    return targets


def check_replica_owner(ctx: CheckContext) -> list[DeployabilityFinding]:
    records = ctx.report.resources
    targets = scaled_targets(records)
    path = defaults.AUTOSCALED_REPLICAS_PATH
    findings = []
    for record in records:
        kind = SCALABLE.get(record.type)
        if kind is None:
            continue
        scaler = targets.get(_key(kind, record, get_in(record.inputs, "metadata", "name")))
        ignored = path in record.ignore_changes
        sets = get_in(record.inputs, "spec", "replicas") is not None
        if scaler is not None and sets and not ignored:
            findings.append(DeployabilityFinding("replica-owner", record.urn, (
                f"{named(record)} sets spec.replicas while {named(scaler)} owns it: the second `pulumi up` conflicts "
                "with the autoscaler's field manager on .spec.replicas or resets the scaled-out fleet; drop "
                f"replicas from the manifest or create it with ignore_changes=[{path!r}]")))
        elif scaler is None and ignored:
            findings.append(DeployabilityFinding("replica-owner", record.urn, (
                f"{named(record)} ignores changes to {path} but no autoscaler targets it: a re-planned replica count "
                "never reaches the cluster; drop the ignore_changes")))
    return findings
