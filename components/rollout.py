"""Safe rollouts for every Kubernetes serving workload: one place for the Deployment strategy, the progress
deadline, graceful drain, zone spread and the PodDisruptionBudget, all derived from the blueprint.

- Rolling updates never drop below serving capacity: `maxSurge: 1, maxUnavailable: 0`. The surge replica needs
  room, so GPU node pools are sized for `max_replicas + SURGE_REPLICAS` (see `node_pool_max_nodes`). On an existing
  cluster, whose capacity we do not manage, keep one replica's worth of GPUs free or the rollout waits for it. On an
  edge cluster whose owned nodes are full at the autoscaler's maximum, a rollout replaces one replica at a time
  (`maxSurge: 0, maxUnavailable: 1`, `Blueprint.rollout_surge`): it cannot wait for a node that will never come.
- The progress deadline covers a cold start on a new node (startup budget x 1.5).
- Drain: a preStop sleep lets the load balancer deregister the pod before SIGTERM; the grace period then covers
  the longest request the plan expects.
- `availability_pct >= 99.9` in production (`Blueprint.strict_zone_spread`): replicas must spread over at least
  `MIN_ZONES_FOR_HIGH_AVAILABILITY` zones (DoNotSchedule with `minDomains`, so the minimum of two replicas lands on two
  nodes in two zones and a node drain evicts one replica, which its PodDisruptionBudget allows); otherwise best
  effort (ScheduleAnyway, which Karpenter still provisions for). Nodes are spread with `maxSkew` = the replicas a node
  holds, so Karpenter packs nodes as the plan bills them (`blueprints.contracts.placement`).
"""

from __future__ import annotations

import math

from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint

#: Extra replicas a rolling update starts before stopping an old one.
SURGE_REPLICAS = defaults.SURGE_REPLICAS
#: Seconds a terminating pod keeps serving so endpoints and load-balancer targets deregister first
#: (AWS Load Balancer Controller docs, "pod graceful termination": deregistration takes seconds).
PRESTOP_SLEEP_S = 15
#: Upper bound on the grace period, s: a stuck pod must not block node drains for ever.
MAX_GRACE_PERIOD_S = 1800


def node_pool_max_nodes(bp: Blueprint) -> int:
    """Nodes the workload pool must be able to reach (`Blueprint.node_pool_max_nodes`: autoscaler max plus surge)."""
    return bp.node_pool_max_nodes


def progress_deadline_s(bp: Blueprint) -> int:
    """`progressDeadlineSeconds`: a cold start on a new node (provisioning, pull, download, load) x 1.5."""
    return math.ceil(bp.startup.total_s * 1.5)


def termination_grace_period_s(bp: Blueprint) -> int:
    """preStop sleep + the longest expected request (the load balancer idle timeout the plan derived from it)."""
    return min(MAX_GRACE_PERIOD_S, PRESTOP_SLEEP_S + bp.network.load_balancer_idle_timeout_s)


def deployment_rollout(bp: Blueprint) -> dict:
    """Deployment spec fields: `strategy`, `progress_deadline_seconds`, `min_ready_seconds`, `revision_history_limit`."""
    return {
        "strategy": {"type": "RollingUpdate",
                     "rolling_update": {"max_surge": bp.rollout_surge, "max_unavailable": 0 if bp.rollout_surge else 1}},
        "progress_deadline_seconds": progress_deadline_s(bp),
        "min_ready_seconds": 10,
        "revision_history_limit": 5,
    }


def pod_rollout(bp: Blueprint, selector: dict[str, str]) -> dict:
    """Pod spec fields: `termination_grace_period_seconds` and `topology_spread_constraints`, the placement the plan
    bills (`Blueprint.placement`, `blueprints.contracts.placement.serving_spreads`)."""
    return {
        "termination_grace_period_seconds": termination_grace_period_s(bp),
        "topology_spread_constraints": [s.manifest(selector) for s in bp.placement.spreads],
    }


def container_lifecycle() -> dict:
    """Container `lifecycle`: a preStop sleep (the kubelet's sleep action; no shell needed in the image)."""
    return {"pre_stop": {"sleep": {"seconds": PRESTOP_SLEEP_S}}}


def disruption_budget_spec(bp: Blueprint, selector: dict[str, str]) -> dict | None:
    """PodDisruptionBudget spec (`maxUnavailable: 1`) when at least two replicas run; None for a single replica,
    where any budget would either block node drains for ever or protect nothing."""
    if max(1, bp.autoscaling.min_replicas) < 2:
        return None
    return {"max_unavailable": 1, "selector": {"match_labels": selector}}
