"""Safe rollouts for every Kubernetes serving workload: one place for the Deployment strategy, the progress
deadline, graceful drain, zone spread and the PodDisruptionBudget, all derived from the blueprint.

- Rolling updates never drop below serving capacity: `maxSurge: 1, maxUnavailable: 0`. The surge replica needs
  room, so GPU node pools are sized for `max_replicas + SURGE_REPLICAS` (see `node_pool_max_nodes`). On an existing
  cluster, whose capacity we do not manage, keep one replica's worth of GPUs free or the rollout waits for it. On an
  edge cluster whose owned nodes are full at the autoscaler's maximum, a rollout replaces one replica at a time
  (`maxSurge: 0, maxUnavailable: 1`, `Blueprint.rollout_surge`): it cannot wait for a node that will never come.
- The progress deadline covers a cold start on a new node (startup budget x 1.5).
- Drain: every container of the request path (the proxy and the engine, which both stop at once on SIGTERM:
  blueprints/catalog/processes.yaml) sleeps in its preStop hook for the drain window (`blueprints.contracts.proxy.
  drain_window_s`: the pod's deregistration, then the longest request it may still have started), so no request is
  cut; the grace period is that window plus `defaults.EXIT_MARGIN_S` to exit. A liveness or startup probe kill does
  not wait out that sleep: its probes carry their own, short grace period (`bounded_probe_kills`).
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
from blueprints.contracts.proxy import drain_window_s

#: Extra replicas a rolling update starts before stopping an old one.
SURGE_REPLICAS = defaults.SURGE_REPLICAS


def node_pool_max_nodes(bp: Blueprint) -> int:
    """Nodes the workload pool must be able to reach (`Blueprint.node_pool_max_nodes`: autoscaler max plus surge)."""
    return bp.node_pool_max_nodes


def progress_deadline_s(bp: Blueprint) -> int:
    """`progressDeadlineSeconds`: a cold start on a new node (provisioning, pull, download, load) x 1.5."""
    return math.ceil(bp.startup.total_s * 1.5)


def termination_grace_period_s(bp: Blueprint) -> int:
    """The drain window (every request-path container's preStop sleep) plus the time to exit; bounded, as the
    blueprint's longest response is (at most 4,000 s)."""
    return drain_window_s(bp) + defaults.EXIT_MARGIN_S


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


def container_lifecycle(bp: Blueprint) -> dict:
    """A request-path container's `lifecycle`: a preStop sleep of the drain window (the kubelet's sleep action; no
    shell needed in the image)."""
    return {"pre_stop": {"sleep": {"seconds": drain_window_s(bp)}}}


def bounded_probe_kills(container: dict) -> dict:
    """`container` with a probe-level `terminationGracePeriodSeconds` (`defaults.PROBE_KILL_GRACE_S`) on its liveness
    and startup probes when it has a preStop hook: the kubelet runs preStop before a probe kill too, and would otherwise
    give it the pod's whole grace period (the drain window), so a hung engine would restart only after its drain
    sleep. Deletion keeps the pod's grace period (the kubelet prefers the deletion grace period). Readiness probes take
    no such field (the API server refuses it)."""
    lifecycle = container.get("lifecycle") or {}
    if not (lifecycle.get("pre_stop") or lifecycle.get("preStop")):
        return container
    return {**container, **{key: {**container[key], "terminationGracePeriodSeconds": defaults.PROBE_KILL_GRACE_S}
                            for key in ("livenessProbe", "startupProbe") if container.get(key)}}


def disruption_budget_spec(bp: Blueprint, selector: dict[str, str]) -> dict | None:
    """PodDisruptionBudget spec: `maxUnavailable: 1` when at least two replicas run. A production service's single
    replica gets `minAvailable: 1`: no voluntary eviction (a Karpenter expiry or drift drain, consolidation, `kubectl
    drain`) takes its only replica down for a cold start; the drain waits until a second replica runs (a scale-out
    lets it evict one) or a rollout moves it (the Deployment surges: the new replica starts on another node first).
    Karpenter's expiry is forceful but still drains through the Eviction API, and its NodePools set no
    `terminationGracePeriod` that would delete the pod after all (Karpenter v1.14 docs, concepts/disruption.md
    "Expiration", "TerminationGracePeriod"). None for a single replica elsewhere: a cold start there is accepted."""
    if bp.least_running_replicas < 2:
        if not bp.production:
            return None
        return {"min_available": 1, "selector": {"match_labels": selector}}
    return {"max_unavailable": 1, "selector": {"match_labels": selector}}
