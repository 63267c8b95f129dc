"""Deployability, proven offline: what a real `pulumi up` needs that Pulumi's mock engine never checks.

The mock engine accepts any resource the SDK signatures accept. These checks read what the program registered (with
each resource's dependencies) and the catalog's facts about the add-ons (`blueprints/catalog/addons.yaml`: the CRDs
each installs, the objects its webhooks guard, its per-node DaemonSets, its Pod Security level), and report:

- `addon-installed`: every custom resource's CRD, and every controller an object needs (a LoadBalancer Service's
  load balancer controller, a CPU HPA's metrics-server, a GPU pod's device plugin), is installed by a Helm release
  the object depends on (transitively) in this stack, or by the platform the service lands on, or is declared in
  an existing cluster's `servingblueprints:clusterAddons`;
- `webhook-ready`: an object guarded by a webhook of an add-on this stack installs depends on that add-on's release;
- `schedulable`: every workload's pods match a NodePool or node group (node selector, taints) and fit its nodes'
  allocatable resources after the DaemonSets every node runs;
- `node-pool-arch`: every instance type a NodePool allows has an architecture its `kubernetes.io/arch` requirement
  admits and its node class's AMI alias resolves;
- `node-pool-limits`: a NodePool's limits hold the nodes (their capacity, as Karpenter counts) the autoscaler's maximum
  replicas plus the rollout surge need;
- `owned-nodes`: an edge cluster's declared nodes hold the autoscaler's maximum replicas plus the rollout surge;
- `billed-nodes`: the plan bills at least the nodes the planned peak replicas take as the manifests place them
  (requests against allocatable after the DaemonSets, topology spread over the pool's zones:
  `blueprints.contracts.placement`), and a strict zone spread's minDomains fits the pool's zones (`schedulable`);
- `pod-security`: every pod is admitted by its namespace's Pod Security level (kubernetes.io Pod Security Standards);
- `prometheus-address`: a KEDA Prometheus trigger queries the Prometheus the platform (or cluster) runs;
- `kubernetes-upgrade` (with a baseline, `check_kubernetes_upgrade`): a platform's EKS cluster neither goes back a
  Kubernetes version nor skips a minor one (EKS cannot do either).

Each finding names the resource and the fix; any finding makes `blueprint preview` exit 1. This module runs them;
each family lives in its own: `blueprints.review.deployability.addons` (addon-installed, webhook-ready),
`blueprints.review.deployability.scheduling` (schedulable, node-pool-arch, node-pool-limits, owned-nodes, billed-nodes, over the nodes of
`blueprints.review.deployability.nodes`), `blueprints.review.deployability.pod_security` and `blueprints.review.deployability.prometheus`;
what they all read is `blueprints.review.deployability.context`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from blueprints.catalog.addons import KUBERNETES_VERSION
from blueprints.contracts.platform import kubernetes_upgrade_problem
from blueprints.review.preview import DeployabilityFinding, PreviewReport
from blueprints.review.deployability.addons import check_addons, check_webhooks
from blueprints.review.deployability.context import check_context, named
from blueprints.review.deployability.pod_security import check_pod_security
from blueprints.review.deployability.prometheus import check_prometheus
from blueprints.review.deployability.scheduling import (
    check_billed_nodes, check_node_pool_arch, check_node_pool_limits, check_owned_nodes, check_scheduling,
)


CHECKS = (check_addons, check_webhooks, check_scheduling, check_node_pool_arch, check_node_pool_limits,
          check_owned_nodes, check_billed_nodes, check_pod_security, check_prometheus)


def check_deployability(report: PreviewReport, *, stacks_dir: Path = Path("stacks")) -> list[DeployabilityFinding]:
    """Every deployability finding of an offline preview (see the module docstring), in check order.

    Args:
        report: the offline preview (its records, the platform it lands on).
        stacks_dir: where the stack configs are (an existing cluster's `clusterAddons` is read from its file).
    """
    ctx = check_context(report, stacks_dir)
    return [finding for check in CHECKS for finding in check(ctx)]


EKS_CLUSTER = "aws:eks/cluster:Cluster"


def check_kubernetes_upgrade(report: PreviewReport, baseline: Mapping[str, Any]) -> list[DeployabilityFinding]:
    """A platform's EKS cluster against the base branch's report (`plan.json`): its Kubernetes version may stay or go
    up one minor version, as EKS upgrades (`blueprints.contracts.platform.kubernetes_upgrade_problem`); a finding per cluster
    that would go down or skip a version, naming the fix."""
    before = {r.get("name"): (r.get("inputs") or {}).get("version") for r in baseline.get("resources", [])
              if isinstance(r, Mapping) and r.get("type") == EKS_CLUSTER}
    findings = []
    for r in report.resources:
        old, new = before.get(r.name), r.inputs.get("version")
        if r.type == EKS_CLUSTER and all(isinstance(v, str) and re.fullmatch(KUBERNETES_VERSION, v) for v in (old, new)):
            problem = kubernetes_upgrade_problem(old, new)
            if problem:
                findings.append(DeployabilityFinding("kubernetes-upgrade", r.urn, f"{named(r)} (base branch: "
                                                     f"Kubernetes {old}): {problem}"))
    return findings
