"""The parts of a plan that differ on an edge cluster (`operations.platform: edge-cluster`): the owned-hardware cost
line, the scaling its declared add-ons allow, the Roles Anywhere settings, and the plan's sentences about them,
including what the operator must provide. Called by the planner's builders (`blueprints.plan.builders.nongen`,
`blueprints.plan.builders.context`); pure.
"""

from __future__ import annotations

from blueprints.core import defaults
from blueprints.contracts.sections import FIXED_REPLICAS, Archetype, Autoscaling, CostLine, RolesAnywhereSpec
from blueprints.catalog import Catalog
from blueprints.requirements.cluster_exposure import ClusterExposure
from blueprints.plan.owned_nodes import OwnedNodeShape, edge_count_fix, edge_nodes_needed
from blueprints.core.errors import Fix, SizingError
from blueprints.requirements.service import Requirements
from blueprints.requirements.exposure import Exposure, ExposureVia
from blueprints.contracts.stackconfig import ROLES_ANYWHERE_CA_KEY

#: The add-on a CPU HPA reads (the resource metrics API), and those a KEDA Prometheus trigger needs.
METRICS_SERVER = "metrics-server"
PROMETHEUS = "kube-prometheus-stack"
KEDA = "keda"


def declared(req: Requirements) -> set[str]:
    return set(req.operations.declared_addons or [])


def monitored(req: Requirements) -> bool:
    """Monitoring objects (ServiceMonitor, PrometheusRule, dashboard) are rendered only where Prometheus runs: on an
    edge cluster, when it declares kube-prometheus-stack."""
    return req.hardware.edge_nodes is None or PROMETHEUS in declared(req)


OWNED_NODES_ITEM = "owned edge nodes"


def owned_cost_lines(owned: OwnedNodeShape, nodes: int, catalog: Catalog) -> list[CostLine]:
    """One line for the owned nodes the plan uses at the peak, at the declared monthly cost per node (or $0)."""
    what = (f"{OWNED_NODES_ITEM} ({owned.cpu_arch}, {owned.vcpus} vCPU / {owned.memory_gib:g} GiB; {nodes} of "
            f"{owned.count} used at peak)")
    return [CostLine(item=what, quantity=nodes, usd_per_hour=round(owned.usd_per_hour, 4),
                     monthly_usd=round(nodes * owned.usd_per_hour * catalog.hours_per_month, 2))]


def bounded_ceiling(req: Requirements, env: str, *, ceiling: int, owned: OwnedNodeShape, per_node: int,
                    replicas: int) -> int:
    """The autoscaling maximum on owned nodes: the environment's max_replicas, or the default ceiling capped at what
    the nodes hold besides a rolling update's extra replica (all of it when the peak fills them).

    Raises:
        SizingError: environments.<env>.max_replicas asks for more replicas than the nodes hold.
    """
    slots = owned.count * per_node
    asked = req.environments[env].max_replicas
    if asked is not None and asked > slots:
        lower = Fix(f"environments.{env}.max_replicas", slots, f"lower max_replicas to <= {slots}")
        more = edge_count_fix(edge_nodes_needed(asked, per_node))
        raise SizingError(f"environments.{env}.max_replicas={asked}: {owned.describe()} hold {slots} replica(s) of "
                          f"this shape ({per_node} per node); {lower.text} or {more.text}", fixes=(lower, more))
    room = slots - defaults.SURGE_REPLICAS if slots - defaults.SURGE_REPLICAS >= replicas else slots
    return ceiling if asked is not None else max(replicas, min(ceiling, room))


def edge_autoscaling(req: Requirements, archetype: Archetype, *, floor: int, ceiling: int, replicas: int,
                     keda_metric: str, cpu_target: float, cooldown_s: int) -> tuple[Autoscaling, str]:
    """The scaling an edge cluster's declared add-ons allow, and the plan's sentence about it.

    ONNX Runtime: a CPU HPA when metrics-server is declared; Triton: KEDA when keda and kube-prometheus-stack are;
    otherwise a fixed replica count (the peak's replicas, at least the availability floor).
    """
    have = declared(req)
    fixed = max(floor, replicas)
    can_scale = ((archetype is Archetype.ONNX_CPU and METRICS_SERVER in have)
                 or (archetype is Archetype.TRITON_MULTI_MODEL and {KEDA, PROMETHEUS} <= have))
    if can_scale and ceiling <= fixed:
        return (Autoscaling(min_replicas=fixed, max_replicas=fixed, metric=FIXED_REPLICAS, target=cpu_target,
                            cooldown_s=cooldown_s),
                f"a fixed count of {fixed} replica(s), no autoscaler: the owned nodes hold no more beside a rolling "
                "update's extra replica; add nodes (hardware.edge_nodes.count) to autoscale")
    if archetype is Archetype.ONNX_CPU and METRICS_SERVER in have:
        return (Autoscaling(min_replicas=floor, max_replicas=ceiling, metric="cpu", target=cpu_target,
                            cooldown_s=cooldown_s),
                f"a CPU HorizontalPodAutoscaler between {floor} and {ceiling} replicas (metrics-server is declared "
                "in operations.cluster_addons; the ceiling is what the owned nodes hold)")
    if archetype is Archetype.TRITON_MULTI_MODEL and {KEDA, PROMETHEUS} <= have:
        return (Autoscaling(min_replicas=floor, max_replicas=ceiling, metric=keda_metric, target=1.0,
                            cooldown_s=cooldown_s),
                f"KEDA between {floor} and {ceiling} replicas (keda and kube-prometheus-stack are declared in "
                "operations.cluster_addons)")
    needs = METRICS_SERVER if archetype is Archetype.ONNX_CPU else f"{KEDA} and {PROMETHEUS}"
    return (Autoscaling(min_replicas=fixed, max_replicas=fixed, metric=FIXED_REPLICAS, target=cpu_target,
                        cooldown_s=cooldown_s),
            f"a fixed count of {fixed} replica(s), no autoscaler: the edge cluster declares no {needs} "
            "(operations.cluster_addons); declare it to autoscale")


def roles_anywhere_spec(req: Requirements, env: str) -> RolesAnywhereSpec | None:
    """IAM Roles Anywhere settings for an edge cluster's `s3://` sources (None without them)."""
    if req.hardware.edge_nodes is None or not any(m.weights_uri.startswith("s3://") for m, _ in req.served_models()):
        return None
    ra = req.operations.roles_anywhere
    return RolesAnywhereSpec(
        acm_pca_arn=ra.acm_pca_arn if ra else None,
        certificate_secret=(ra.certificate_secret if ra and ra.certificate_secret else f"{req.service}-roles-anywhere"),
        certificate_common_name=(ra.certificate_common_name if ra and ra.certificate_common_name
                                 else f"{req.service}-{env}"),
        session_duration_s=ra.session_duration_s if ra else 3600)


def edge_reasons(req: Requirements, env: str, *, owned: OwnedNodeShape, replicas: int, per_node: int, cpu: int,
                 nodes: int, ceiling: int, scaling_note: str, roles_anywhere: RolesAnywhereSpec | None) -> list[str]:
    """The plan's sentences about the edge cluster: the nodes used, scaling, monitoring, cost, weights and what the
    operator provides before `pulumi up`."""
    room = owned.count * per_node - ceiling
    rollout = (f"with room for {defaults.SURGE_REPLICAS} more during a rolling update" if room >= defaults.SURGE_REPLICAS
               else "and no room for an extra replica: a rolling update replaces one replica at a time (maxSurge 0, "
               "maxUnavailable 1), so capacity drops by a replica during it" + (" and a single replica means a "
               "short outage; add a node to avoid it" if replicas == 1 else ""))
    why = [f"on the edge cluster's {owned.describe()}: {replicas} replica(s) of {cpu} vCPU, {per_node} per node, on "
           f"{nodes} node(s), {rollout}; no node is launched (node provisioning 0 s in the startup budget)",
           f"scaling: {scaling_note}",
           ("monitoring: ServiceMonitor, PrometheusRule (alerts on the SLO) and a Grafana dashboard for the declared "
            "kube-prometheus-stack" if monitored(req) else "monitoring: no ServiceMonitor, PrometheusRule or "
            "dashboard: kube-prometheus-stack is not declared in operations.cluster_addons (declare it to get them)")]
    nodes_cost = req.hardware.edge_nodes.monthly_usd_per_node if req.hardware.edge_nodes else None
    why.append("cost: owned hardware, never an EC2 price: " + (
        f"{nodes} node(s) at ${nodes_cost:,.0f}/month each (hardware.edge_nodes.monthly_usd_per_node)"
        if nodes_cost is not None else "no monthly cost per node given (hardware.edge_nodes.monthly_usd_per_node), "
        "shown as $0"))
    provide = ["the cluster's kubeconfig (`pulumi config set --secret servingblueprints:kubeconfig`)"]
    for m, _ in req.served_models():
        name = m.served_name
        if m.weights_uri.startswith("s3://"):
            why.append(f"weights of {name}: each pod reads {m.weights_uri} itself with IAM Roles Anywhere (the stack's "
                       "trust anchor, profile and a role allowed only s3:GetObject/ListBucket on that prefix; the "
                       "credential helper signs with the pod's certificate"
                       + (f"; kms:Decrypt on {m.weights_kms_key_arn} only through S3" if m.weights_kms_key_arn else "")
                       + "); no model store, no static keys"
                       + ("" if m.weights_kms_key_arn else " (a bucket encrypted with your own KMS key: set "
                          "model.weights_kms_key_arn)"))
        else:
            why.append(f"weights of {name}: each pod downloads {m.weights_uri} and refuses it unless its SHA-256 is "
                       f"{m.sha256}; no AWS identity needed")
    if roles_anywhere is not None:
        ca = (f"issued by the ACM Private CA {roles_anywhere.acm_pca_arn}" if roles_anywhere.acm_pca_arn else
              f"issued by your CA, whose PEM bundle you set with `pulumi config set {ROLES_ANYWHERE_CA_KEY} -- \"$(cat "
              "ca.pem)\"` (the trust anchor)")
        provide.append(f"the kubernetes.io/tls Secret {roles_anywhere.certificate_secret} (tls.crt, tls.key) in "
                       f"namespace {req.service}: a client certificate with subject CN "
                       f"{roles_anywhere.certificate_common_name}, {ca}")
    exposure = req.exposure
    if exposure.tls_secret_name:
        provide.append(f"the kubernetes.io/tls Secret {exposure.tls_secret_name} (tls.crt, tls.key) in namespace "
                       f"{req.service} for clients' TLS"
                       + (f" (for {exposure.hostname})" if exposure.hostname else ""))
    why.append("the operator provides: " + "; ".join(provide))
    return why


def exposure_words(via: ExposureVia, exposed_by: str | None, *, ingress_class: str | None,
                   node_port: int | None, hostname: str | None) -> str:
    """How clients reach a service off AWS load balancers, in a reviewer's words."""
    if via is ExposureVia.INGRESS:
        return f"the Ingress of class {ingress_class} ({exposed_by}) at {hostname or 'its controller address'}"
    if via is ExposureVia.NODE_PORT:
        return f"NodePort {node_port or '(assigned by Kubernetes: stack output endpoint)'} on every node"
    return f"a LoadBalancer address from {exposed_by}"


def client_ip_preserved(via: ExposureVia, exposure: Exposure) -> bool:
    """The serving pods see clients' own addresses, so their NetworkPolicy can admit only the allowed CIDRs: a
    MetalLB LoadBalancer always and a NodePort with allowed CIDRs run `externalTrafficPolicy: Local`; a NodePort
    without them keeps `Cluster` (any node forwards, source-NATed to the node's address)."""
    if via is ExposureVia.LOAD_BALANCER:
        return True
    return via is ExposureVia.NODE_PORT and bool(exposure.allowed_cidrs)


def reach_words(resolved: ClusterExposure, exposure: Exposure) -> str:
    """Who can reach a service exposed without an AWS load balancer, and what enforces it."""
    cidrs = ", ".join(exposure.allowed_cidrs)
    if resolved.via is ExposureVia.INGRESS:
        gate = (f"{resolved.exposed_by} admits only {cidrs} ({'its source-range annotation'})" if cidrs else
                f"whoever can reach the {resolved.exposed_by} controller")
        return (f"{gate}; the pods admit only the controller's namespace {resolved.ingress_namespace} "
                "(NetworkPolicy)")
    if client_ip_preserved(resolved.via, exposure):
        who = cidrs or "private networks (RFC 1918)"
        extra = ("; clients must reach a node that runs a replica (externalTrafficPolicy Local keeps their "
                 "addresses)" if resolved.via is ExposureVia.NODE_PORT else "")
        return f"reachable from {who} only, enforced by the pods' NetworkPolicy on the clients' own addresses{extra}"
    return ("any client that reaches a node's port (NodePort traffic arrives source-NATed from the node's own "
            "address, which the pods' NetworkPolicy admits within private networks); list exposure.allowed_cidrs to "
            "admit only those clients")
