"""The `last-replica-eviction` check of `blueprint preview` (`blueprints.review.deployability.checks`): no voluntary
node disruption takes a production service's last replica down.

Karpenter drains a node it expires (`expireAfter`, 720 h: forceful, no replacement started first), drifts or
consolidates, and an operator drains one, through the Eviction API; without a PodDisruptionBudget a single replica is
evicted and the service is down for a cold start (minutes on a GPU node) at every one of them. A budget that keeps
one pod available holds the drain until a second replica runs or a rollout moves the pod (surge first), unless the
NodePool's `terminationGracePeriod` deletes it after all (Karpenter v1.14 docs, concepts/disruption.md).
"""

from __future__ import annotations

from blueprints.review.preview import DeployabilityFinding
from blueprints.review.deployability.context import CheckContext, get_in, named

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def _selects(pdb: dict, labels: dict) -> bool:
    wanted = get_in(pdb, "spec", "selector", "matchLabels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def keeps_one(pdb: dict) -> bool:
    """Whether a budget refuses to evict a workload's last pod: `minAvailable` >= 1 or `maxUnavailable` 0."""
    spec = pdb.get("spec") or {}
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    return (isinstance(low, int) and low >= 1) or high == 0 or high == "0%" or (
        isinstance(low, str) and low.endswith("%") and low != "0%")


def check_last_replica(ctx: CheckContext) -> list[DeployabilityFinding]:
    report = ctx.report
    if report.is_platform or not report.blueprint.production:
        return []
    bp = report.blueprint
    if bp.least_running_replicas >= 2:
        return []
    budgets = [r.inputs for r in report.resources if r.type == PDB]
    pools = [r for r in report.resources if r.type == NODE_POOL]
    findings = []
    for record in (r for r in report.resources if r.type == DEPLOYMENT):
        labels = get_in(record.inputs, "spec", "template", "metadata", "labels") or {}
        mine = [b for b in budgets if _selects(b, labels)]
        if not any(keeps_one(b) for b in mine):
            findings.append(DeployabilityFinding("last-replica-eviction", record.urn, (
                f"{named(record)} is a production service with {bp.least_running_replicas} replica and no "
                "PodDisruptionBudget keeping it (minAvailable: 1): every node expiry, drift, consolidation or drain "
                "evicts it and the service is down for a cold start; add one (or plan two replicas)")))
        for pool in pools:
            grace = get_in(pool.inputs, "spec", "template", "spec", "terminationGracePeriod")
            if grace not in (None, ""):
                findings.append(DeployabilityFinding("last-replica-eviction", pool.urn, (
                    f"{named(pool)} sets terminationGracePeriod {grace}: Karpenter deletes the single replica of "
                    f"{named(record)} that long after a drain starts, whatever its disruption budget; drop it")))
    return findings
