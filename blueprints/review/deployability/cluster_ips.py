"""`cluster-ip-egress` (`blueprints.review.deployability.checks`): every pod reaches every in-cluster Service it calls,
judged the way the VPC CNI's network policy agent judges it.

The agent's eBPF programs sit on the pod's veth, before kube-proxy's DNAT: an egress packet to a Service carries the
Service's ClusterIP and port, never an endpoint's address. Its controller widens a rule's pod and namespace selector
peers with the ClusterIPs of the Services those selectors match (a Service whose `spec.selector` the peer's podSelector
matches as a label set, on the Service port whose targetPort is the rule's port); an ipBlock is taken as written
(`blueprints/catalog/cluster_network.yaml`, `network_policy_agent`, with its sources). So a policy that admits "the
VPC" on 443 never admits the API server at 172.20.0.1.

The pairs checked: every pod of the stack (a workload's template) with the cluster DNS Service (every pod with
dnsPolicy ClusterFirst, the default, resolves names through its ClusterIP), and with each Service its containers'
processes call (`blueprints/catalog/processes.yaml` `calls`: the router's pod watcher calls the API server). A pod no
egress policy selects is not restricted. The ClusterIPs lie in the cluster's Service CIDR: its platform's
(`PlatformNetwork.planned_service_cidr`); on an existing or edge cluster, whose Service CIDR is not known, anywhere in
the private address space, so only a policy admitting all of it passes.

Not modelled (each can only make a policy look worse than it is, never let a broken one pass): the controller's
second port lookup through the target pods' named container ports, and namespace labels other than
`kubernetes.io/metadata.name`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from blueprints.catalog.cluster_network import CLUSTER_DNS, ClusterService, ServicePort, cluster_service_ip, \
    load_cluster_network
from blueprints.catalog.processes import process_facts
from blueprints.core import defaults
from blueprints.review.preview import DeployabilityFinding
from blueprints.review.deployability.context import CheckContext, POD_TEMPLATES, get_in, list_of, type_token

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
#: Label every namespace carries with its own name (Kubernetes >= 1.21).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

Network = ipaddress.IPv4Network


@dataclass(frozen=True)
class Call:
    """A pod's call to an in-cluster Service on one of its ports: the addresses its ClusterIP may have."""

    service: ClusterService
    port: ServicePort
    addresses: tuple[Network, ...]
    why: str

    @property
    def where(self) -> str:
        shown = ", ".join(str(a.network_address) if a.prefixlen == 32 else str(a) for a in self.addresses)
        return f"{shown}:{self.port.port}/{self.port.protocol}"


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (`matchLabels`, `matchExpressions`) matches `labels`; an empty one matches all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in list_of(selector.get("matchExpressions")):
        key, op, values = expr.get("key"), expr.get("operator"), list_of(expr.get("values"))
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) or \
                (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def _ports_admit(ports: list[Mapping[str, Any]], port: int, protocol: str) -> bool:
    """A rule's `ports` admit `port`/`protocol` as an address peer sees it (named ports never match an address)."""
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        number = p.get("port")
        if number is None:
            return True
        if isinstance(number, (int, float)) and int(number) <= port <= int(p.get("endPort") or number):
            return True
    return False


def _ip_block_admits(block: Mapping[str, Any], address: Network) -> bool:
    try:
        cidr = ipaddress.ip_network(str(block.get("cidr")), strict=False)
        excepted = [ipaddress.ip_network(str(e), strict=False) for e in list_of(block.get("except"))]
    except ValueError:
        return False
    return address.subnet_of(cidr) and not any(address.overlaps(e) for e in excepted)  # type: ignore[arg-type]


def _selector_peer_admits(peer: Mapping[str, Any], ports: list[Mapping[str, Any]], call: Call,
                          policy_namespace: str) -> bool:
    """The controller's widening of a pod/namespace selector peer: the Service's namespace is a peer namespace, the
    peer's podSelector matches the Service's selector, and a rule port is the Service port's targetPort."""
    service = call.service
    namespace_selector = peer.get("namespaceSelector")
    in_namespace = (service.namespace == policy_namespace if namespace_selector is None else
                    selects(namespace_selector, {NAMESPACE_NAME_LABEL: service.namespace}))
    if not in_namespace or not selects(peer.get("podSelector"), service.selector):
        return False
    return not ports or any(p.get("protocol", "TCP") == call.port.protocol and (
        p.get("port") is None or p.get("port") == call.port.target_port) for p in ports)


def rule_admits(rule: Mapping[str, Any], call: Call, policy_namespace: str) -> bool:
    """One egress rule admits the call to every address its ClusterIP may have (pre-DNAT)."""
    ports = [p for p in list_of(rule.get("ports")) if isinstance(p, Mapping)]
    peers = [p for p in list_of(rule.get("to")) if isinstance(p, Mapping)]
    if not peers:  # no `to`: every destination
        return _ports_admit(ports, call.port.port, call.port.protocol)
    if any(_selector_peer_admits(p, ports, call, policy_namespace) for p in peers if "ipBlock" not in p):
        return True
    blocks = [p["ipBlock"] for p in peers if isinstance(p.get("ipBlock"), Mapping)]
    return _ports_admit(ports, call.port.port, call.port.protocol) and all(
        any(_ip_block_admits(b, a) for b in blocks) for a in call.addresses)


def egress_policies(policies: Iterable[Mapping[str, Any]], namespace: str, labels: Mapping[str, str]
                    ) -> list[Mapping[str, Any]]:
    """The NetworkPolicies (manifests) of `namespace` that select pods of `labels` and restrict their egress."""
    found = []
    for policy in policies:
        spec = policy.get("spec") or {}
        types = list_of(spec.get("policyTypes")) or (["Ingress", "Egress"] if "egress" in spec else ["Ingress"])
        if get_in(policy, "metadata", "namespace") == namespace and "Egress" in types and \
                selects(spec.get("podSelector"), labels):
            found.append(policy)
    return found


def admitted(call: Call, policies: list[Mapping[str, Any]]) -> bool:
    """Some egress rule of `policies` (manifests, all in the pod's namespace) admits the call."""
    return any(rule_admits(rule, call, str(get_in(p, "metadata", "namespace")))
               for p in policies for rule in list_of((p.get("spec") or {}).get("egress"))
               if isinstance(rule, Mapping))


def service_addresses(service: ClusterService, service_cidr: str | None) -> tuple[Network, ...]:
    """Where the Service's ClusterIP is: its address in `service_cidr`, or (unknown) anywhere private."""
    if service_cidr is None:
        return tuple(Network(c) for c in defaults.PRIVATE_CIDRS)
    return (Network(f"{cluster_service_ip(service_cidr, service.id)}/32"),)


def pod_calls(spec: Mapping[str, Any], service_cidr: str | None) -> list[Call]:
    """The in-cluster Services a pod calls, one `Call` per Service port: cluster DNS (dnsPolicy ClusterFirst), and
    what its containers' processes call (`processes.yaml` `calls`)."""
    catalog = load_cluster_network()
    wanted: dict[str, str] = {}
    if spec.get("dnsPolicy", "ClusterFirst") == "ClusterFirst" and not spec.get("hostNetwork"):
        wanted[CLUSTER_DNS] = "name lookups (dnsPolicy ClusterFirst)"
    for container in [*list_of(spec.get("initContainers")), *list_of(spec.get("containers"))]:
        facts = process_facts(str(container.get("image", "")))
        args = [str(a) for a in [*list_of(container.get("command")), *list_of(container.get("args"))]]
        for call in facts.calls if facts else []:
            if call.when_arg is None or call.when_arg in args:
                wanted.setdefault(call.service, f"container {container.get('name')!r} ({container.get('image')})")
    calls = []
    for service_id, why in wanted.items():
        service = catalog.service(service_id)
        addresses = service_addresses(service, service_cidr)
        calls += [Call(service, port, addresses, why) for port in service.ports]
    return calls


def _fix(call: Call) -> str:
    if call.service.selector:
        selector = ", ".join(f"{k}: {v}" for k, v in call.service.selector.items())
        return (f"add an egress rule to the pods {{{selector}}} of namespace {call.service.namespace} on port "
                f"{call.port.target_port}/{call.port.protocol} (the controller adds the Service's ClusterIP), or an "
                f"ipBlock holding {call.where}")
    return f"add an egress rule with an ipBlock holding {call.where} (port {call.port.port}/{call.port.protocol})"


@dataclass(frozen=True)
class Unreached:
    """A workload whose pods call a Service their egress policies do not admit."""

    workload: Mapping[str, Any]
    call: Call
    policies: tuple[Mapping[str, Any], ...]

    def message(self) -> str:
        call = self.call
        kind, name = self.workload.get("kind"), get_in(self.workload, "metadata", "name")
        policies = ", ".join(f"NetworkPolicy '{get_in(p, 'metadata', 'name')}'" for p in self.policies)
        source = load_cluster_network().network_policy_agent.source.split(" pkg/")[0]
        return (f"{kind} '{name}': its pods call Service {call.service.namespace}/{call.service.name} ({call.why}) "
                f"at {call.where}, but no egress rule of the NetworkPolicies selecting them ({policies}) admits that "
                "address: the VPC CNI's network policy agent judges egress by the Service's ClusterIP and port, "
                f"before kube-proxy's DNAT ({source}), so the call times out; {_fix(call)}")


def unreached_calls(manifests: Iterable[Mapping[str, Any]], service_cidr: str | None) -> list[Unreached]:
    """Every (workload, Service call) of `manifests` (Kubernetes objects: workloads with a pod template and
    NetworkPolicies) that the workload's egress policies do not admit, judged pre-DNAT. `service_cidr`: the
    cluster's, or None when unknown (the ClusterIPs may then be anywhere private)."""
    objects = [m for m in manifests if isinstance(m, Mapping)]
    policies = [m for m in objects if m.get("kind") == "NetworkPolicy"]
    found = []
    for workload in objects:
        path = POD_TEMPLATES.get(type_token(str(workload.get("apiVersion", "")), str(workload.get("kind", ""))))
        if path is None:
            continue
        template = get_in(workload, *path) if path else workload
        spec, namespace = get_in(template, "spec"), get_in(workload, "metadata", "namespace")
        if not isinstance(spec, Mapping) or not isinstance(namespace, str):
            continue
        mine = egress_policies(policies, namespace, get_in(template, "metadata", "labels") or {})
        if mine:
            found += [Unreached(workload, call, tuple(mine)) for call in pod_calls(spec, service_cidr)
                      if not admitted(call, mine)]
    return found


def check_cluster_ip_egress(ctx: CheckContext) -> list[DeployabilityFinding]:
    report = ctx.report
    if report.is_platform:
        return []
    service_cidr = report.platform.network.planned_service_cidr if report.platform is not None else None
    by_object = {id(r.inputs): r for r in report.resources}
    return [DeployabilityFinding("cluster-ip-egress", by_object[id(u.workload)].urn, u.message())
            for u in unreached_calls([r.inputs for r in report.resources if r.type.startswith("kubernetes:")],
                                     service_cidr)]
