"""NetworkPolicies of a service's namespace, enforced by the VPC CNI's network policy agent (the platform turns it on:
`enableNetworkPolicy: "true"` on the vpc-cni add-on).

- `<service>-default-deny`: every pod in the namespace, no ingress and no egress unless another policy allows it.
- `<workload>` (serving pods): ingress to the proxy port from the load balancer's path (the VPC's CIDR, where the
  NLB's addresses are, plus the exposure's allowed CIDRs: the load balancer preserves client IPs, see
  `components.exposure`), and to the engine's metrics port from the monitoring namespace only; egress to DNS, the EKS
  Pod Identity agent and HTTPS to AWS's public endpoints (S3, STS) and the VPC's interface endpoints, never to other
  private addresses; pods that call the Kubernetes API (the router) also to the API server's ClusterIP.

The policy agent judges a pod's egress to a Service by its ClusterIP, before kube-proxy's DNAT: a rule naming the
Service's pods (DNS) is widened to its ClusterIP by the controller, an address rule must hold the ClusterIP itself
(`blueprints/catalog/cluster_network.yaml`; proven by `blueprint preview`'s `cluster-ip-egress` check).
- `<service>-weights-sync` (sync Jobs): egress to DNS, the Pod Identity agent and HTTPS anywhere (Hugging Face, S3).

NetworkPolicy has no host names: "S3" and "Hugging Face" can only be written as addresses and ports, so HTTPS egress
is by port (443) and address range, not by service.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from blueprints.catalog.cluster_network import KUBERNETES_API, cluster_service_ip, load_cluster_network
from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from components.labels import recommended_labels

#: Label every namespace carries with its own name (Kubernetes >= 1.21, `kubernetes.io/metadata.name`).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _tcp(port: int | str) -> dict:
    return {"port": port, "protocol": "TCP"}


def egress_base(*, pod_identity: bool = True) -> list[dict]:
    """DNS (CoreDNS in kube-system, UDP and TCP 53) and, where pods get AWS credentials from it, the EKS Pod Identity
    agent (TCP 80; not on an edge cluster)."""
    dns = {"to": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: defaults.DNS_NAMESPACE}},
                   "podSelector": {"matchLabels": dict(defaults.DNS_POD_LABELS)}}],
           "ports": [{"port": 53, "protocol": "UDP"}, _tcp(53)]}
    agent = {"to": [{"ipBlock": {"cidr": defaults.POD_IDENTITY_AGENT_CIDR}}],
             "ports": [_tcp(defaults.POD_IDENTITY_AGENT_PORT)]}
    return [dns, agent] if pod_identity else [dns]


def aws_endpoints_egress(vpc_cidrs: list[str]) -> dict:
    """HTTPS to AWS's public endpoints (any public address: S3 and STS have no fixed ranges NetworkPolicy can name)
    and to the VPC's interface endpoints (`vpc_cidrs`); no other private address."""
    return {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(defaults.PRIVATE_CIDRS)}},
                   *({"ipBlock": {"cidr": c}} for c in vpc_cidrs)],
            "ports": [_tcp(443)]}


def kubernetes_api_egress(service_cidr: str) -> dict:
    """HTTPS to the API server's ClusterIP (the first address of the cluster's Service CIDR), the address the VPC
    CNI's policy agent judges a pod's egress by: before kube-proxy's DNAT, so the control plane's ENIs (in the VPC,
    which `aws_endpoints_egress` admits) are never what it sees (blueprints/catalog/cluster_network.yaml)."""
    service = load_cluster_network().service(KUBERNETES_API)
    return {"to": [{"ipBlock": {"cidr": f"{cluster_service_ip(service_cidr, KUBERNETES_API)}/32"}}],
            "ports": [{"port": p.port, "protocol": p.protocol} for p in service.ports]}


def default_deny(name: str, bp: Blueprint, namespace: pulumi.Input[str],
                 opts: pulumi.ResourceOptions) -> k8s.networking.v1.NetworkPolicy:
    """Deny all ingress and egress to every pod of the namespace (other policies add what is allowed)."""
    return k8s.networking.v1.NetworkPolicy(
        name, metadata={"name": f"{bp.service}-default-deny", "namespace": namespace,
                        "labels": recommended_labels(name=bp.engine.kind, instance=bp.stack, component="network")},
        spec={"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}, opts=opts)


def serving_policy(name: str, bp: Blueprint, *, namespace: pulumi.Input[str], selector: dict[str, str],
                   proxy_port: int, metrics_port: int, client_cidrs: pulumi.Input[list[str]],
                   vpc_cidrs: pulumi.Input[list[str]], monitoring_namespace: str,
                   opts: pulumi.ResourceOptions, interceptor_namespace: str | None = None,
                   ingress_namespace: str | None = None, client_pods: dict[str, str] | None = None,
                   policy_name: str | None = None, extra_egress: list[dict] | None = None,
                   kubernetes_api: pulumi.Input[str | None] = None) -> k8s.networking.v1.NetworkPolicy:
    """The serving pods' policy (see the module docstring).

    Args:
        client_cidrs: who may reach the proxy port: the VPC's CIDR(s) and the exposure's allowed CIDRs.
        vpc_cidrs: the VPC's CIDR(s), for its interface endpoints.
        monitoring_namespace: where Prometheus runs (it scrapes `metrics_port`).
        interceptor_namespace: where the KEDA HTTP interceptor runs, when the service scales to zero: it forwards
            clients' requests to the proxy port.
        ingress_namespace: where the ingress controller runs, for a service behind an Ingress: it forwards clients'
            requests to the proxy port.
        client_pods: when set, the only peers of the proxy port: the pods of these labels in the namespace (engine
            pods behind the router, `components.router`), instead of the CIDRs and forwarders.
        policy_name: the policy's name. Defaults to the workload's.
        extra_egress: egress rules besides DNS, the Pod Identity agent and HTTPS to AWS (the router's to the engine
            pods' proxy port).
        kubernetes_api: for pods that call the Kubernetes API, the cluster's Service CIDR: egress to the API
            server's ClusterIP (`kubernetes_api_egress`). None: no such rule (pods without a token, or a cluster
            whose Service CIDR is unknown, where `vpc_cidrs` is the whole private address space).
    """
    forwarders = [ns for ns in (interceptor_namespace, ingress_namespace) if ns]

    def spec(sources: list[str], vpcs: list[str], service_cidr: str | None) -> dict:
        peers = [{"podSelector": {"matchLabels": dict(client_pods)}}] if client_pods else [
            *({"ipBlock": {"cidr": c}} for c in sorted(set(sources))),
            *({"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: ns}}} for ns in forwarders)]
        # A rule without peers would admit everyone: with no source at all, the proxy's port gets no rule.
        clients = [{"from": peers, "ports": [_tcp(proxy_port)]}] if peers else []
        return {
            "podSelector": {"matchLabels": dict(selector)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                *clients,
                {"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: monitoring_namespace}}}],
                 "ports": [_tcp(metrics_port)]},
            ],
            "egress": [*egress_base(pod_identity=bp.platform.kind != "edge-cluster"),
                       aws_endpoints_egress(sorted(set(vpcs))), *(extra_egress or []),
                       *([kubernetes_api_egress(service_cidr)] if service_cidr else [])],
        }

    return k8s.networking.v1.NetworkPolicy(
        name, metadata={"name": policy_name or bp.workload_name, "namespace": namespace,
                        "labels": recommended_labels(name=bp.engine.kind, instance=bp.stack, component="network")},
        spec=pulumi.Output.all(client_cidrs, vpc_cidrs, kubernetes_api).apply(lambda v: spec(v[0], v[1], v[2])),
        opts=opts)


def sync_job_policy(name: str, bp: Blueprint, *, namespace: pulumi.Input[str], selector: dict[str, str],
                    opts: pulumi.ResourceOptions) -> k8s.networking.v1.NetworkPolicy:
    """The weights sync Jobs' policy: no ingress; DNS, the Pod Identity agent and HTTPS anywhere."""
    return k8s.networking.v1.NetworkPolicy(
        name, metadata={"name": f"{bp.service}-weights-sync", "namespace": namespace,
                        "labels": recommended_labels(name="weights-sync", instance=bp.stack, component="network")},
        spec={"podSelector": {"matchLabels": dict(selector)}, "policyTypes": ["Ingress", "Egress"], "ingress": [],
              "egress": [*egress_base(), {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [_tcp(443)]}]},
        opts=opts)
