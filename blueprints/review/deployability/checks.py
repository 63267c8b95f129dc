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
- `api-reachable`, `aws-apis-reachable`: a private cluster admits the deploy runner's network on 443; every node,
  add-on and pod reaches every AWS API it calls through an endpoint or NAT (`blueprints/catalog/endpoints.yaml`);
- `probe-reachable`, `drain-before-sigterm`, `probe-kill-drain`, `proxy-timeouts`, `writable-paths`,
  `scratch-caches`: every container against how its image's process runs (`blueprints/catalog/processes.yaml`:
  listen addresses, SIGTERM, writes, keep-alive, caches; the kubelet's probe kills);
- `scrapes-hidden-components`: kube-prometheus-stack on EKS scrapes no component EKS hides (and never pages on it);
- `eks-zones`: an EKS platform's new subnets are placed by zone ID, never where EKS refuses cluster subnets;
- `listener-attributes`: an NLB listener attribute annotation names a listener the controller builds (TLS-443 on a
  TLS port), and sets no idle timeout on a TLS listener (fixed at 350 s);
- `interceptor-protocol`: the KEDA HTTP interceptor in front of a service whose pods serve gRPC targets a Service port
  with appProtocol kubernetes.io/h2c (else it speaks HTTP/1.1 to it);
- `system-placement`: every pod of a Helm add-on or EKS managed add-on the stack installs (but its per-node DaemonSet) is
  pinned to the system nodes by the values paths `addons.yaml` `placement` records;
- `startup-timers`: a SageMaker endpoint's model-download and startup health-check timeouts hold at the slowest copy rate
  planned for (`defaults.SAGEMAKER_SLOWEST_GIB_PER_S`);
- `last-replica-eviction`: a production service's single replica has a disruption budget that keeps it through
  voluntary node disruptions (Karpenter expiry, drift, consolidation, drains), and no NodePool deletes it after all;
- `replica-owner`: a Deployment or StatefulSet an autoscaler (KEDA ScaledObject, HPA) targets does not keep applying
  `spec.replicas` after creation (left out, or ignored by Pulumi), and one no autoscaler targets does not ignore it
  (`blueprints.review.deployability.replicas`);
- `cluster-ip-egress`: every pod's egress NetworkPolicies admit each in-cluster Service it calls (cluster DNS; the
  API server for the router's pod watcher) by the Service's ClusterIP and port, as the VPC CNI's network policy agent
  judges egress, before kube-proxy's DNAT (`blueprints/catalog/cluster_network.yaml`);
- `physical-names`: every AWS name (explicit, or Pulumi's never-truncated auto-name), Kubernetes name, label value,
  container name and Helm release name fits its type (`blueprints/catalog/names.yaml`);
- `kubernetes-upgrade` (with a baseline, `check_kubernetes_upgrade`): a platform's EKS cluster neither goes back a
  Kubernetes version nor skips a minor one (EKS cannot do either).

Each finding names the resource and the fix; any finding makes `blueprint preview` exit 1. This module runs them;
each family lives in its own: `blueprints.review.deployability.addons` (addon-installed, webhook-ready),
`blueprints.review.deployability.scheduling` (schedulable, node-pool-arch, node-pool-limits, owned-nodes, billed-nodes, over the nodes of
`blueprints.review.deployability.nodes`), `blueprints.review.deployability.pod_security`, `blueprints.review.deployability.prometheus`,
`blueprints.review.deployability.names`, `blueprints.review.deployability.reachability`,
`blueprints.review.deployability.cluster_ips` and
`blueprints.review.deployability.processes`;
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
from blueprints.review.deployability.cluster_ips import check_cluster_ip_egress
from blueprints.review.deployability.context import check_context, named
from blueprints.review.deployability.names import check_names
from blueprints.review.deployability.processes import check_processes
from blueprints.review.deployability.reachability import check_api_reachable, check_aws_apis_reachable
from blueprints.review.deployability.pod_security import check_pod_security
from blueprints.review.deployability.prometheus import check_hidden_components, check_prometheus
from blueprints.review.deployability.zones import check_eks_zones
from blueprints.review.deployability.load_balancers import check_interceptor_protocol, check_listener_attributes
from blueprints.review.deployability.placement import check_system_placement
from blueprints.review.deployability.timers import check_startup_timers
from blueprints.review.deployability.disruption import check_last_replica
from blueprints.review.deployability.replicas import check_replica_owner
from blueprints.review.deployability.scheduling import (
    check_billed_nodes, check_node_pool_arch, check_node_pool_limits, check_owned_nodes, check_scheduling,
)


CHECKS = (check_addons, check_webhooks, check_scheduling, check_node_pool_arch, check_node_pool_limits,
          check_owned_nodes, check_billed_nodes, check_pod_security, check_prometheus, check_names, check_api_reachable,
          check_aws_apis_reachable, check_processes, check_hidden_components,
          check_eks_zones, check_listener_attributes, check_interceptor_protocol, check_system_placement,
          check_startup_timers, check_last_replica, check_replica_owner, check_cluster_ip_egress)


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
