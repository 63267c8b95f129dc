"""VllmRouter: the vLLM production-stack router in front of a vLLM Deployment whose prompts are reused
(`blueprints.contracts.router`): prefix-aware or session routing over the engine pods.

The request path is client -> the serving Service (its selector is the router's pods when a router is planned,
`components.workload`) -> the router pod's authenticating proxy (the same Envoy, key check and TLS as an engine pod)
-> the router on 127.0.0.1 -> an engine pod's proxy port with the client's `Authorization` header (the router passes
request headers through: production-stack request.py `_build_backend_request_headers`) -> vLLM. The router discovers
the engine pods by label through the Kubernetes API (a namespaced Role: get, list, watch on pods) and reaches each
at `--k8s-port` = the proxy's port, reading `/v1/models` with `VLLM_API_KEY` (service_discovery.py). So nothing
bypasses an engine's proxy, and the engine pods' NetworkPolicy admits their proxy port from the router's pods only.
The router's own NetworkPolicy admits the API server's ClusterIP on 443 (the address the VPC CNI's policy agent
judges, before DNAT: `components.network_policy.kubernetes_api_egress`): without it the watcher only logs errors.
Its engine-stats scrape of `/metrics` gets the proxy's 404 (engine metrics stay for Prometheus): prefix-aware and
session routing do not read engine stats.

Failure mode: the router is on every request's path. Two pods spread over nodes and zones and a PodDisruptionBudget
keep one up through voluntary disruptions; a request to an engine that fails before its first byte is retried on
another replica (`failover_reroute_attempts`). Both router pods down is an outage of the endpoint (no fall back to
round robin: the Service selects only the router), paged by the `RouterDown` alert. A router that cannot list its
pods still answers 200 on /health (its watcher thread logs each error and retries, and /health asks only whether the
thread is alive) and answers every request 404 "Model not found": the `RouterHasNoEngines` alert pages on requests
that come in while none is forwarded.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from blueprints.catalog.router import load_router_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.router import router_metrics_service_name, router_workload_name
from blueprints.core import defaults
from components.access import api_key_env
from components.labels import router_labels, selector_labels
from components.network_policy import serving_policy
from components.exposure import client_cidrs
from components.rollout import container_lifecycle, termination_grace_period_s
from components.workload import Endpoint, with_proxy

#: Node labels a topology spread keeps the router pods apart on (well-known labels, kubernetes.io/docs).
SPREAD_KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
#: The router's start budget for its proxy's startup probe, s (a Python process, no weights) [assumption].
ROUTER_START_S = 60


@dataclass
class VllmRouterArgs:
    """Inputs of `VllmRouter`.

    Args:
        blueprint: the planned stack; its `router` is set.
        namespace: the serving namespace.
        endpoint: the API-key Secret, the VPC's CIDRs and the namespaces that forward clients' requests.
        engine_selector: the engine pods' selector labels (the router's `--k8s-label-selector`).
        node_selector: where the router pods run (the platform's system nodes); none: anywhere.
    """

    blueprint: Blueprint
    namespace: pulumi.Input[str]
    endpoint: Endpoint
    engine_selector: dict[str, str]
    node_selector: dict[str, str] | None = None


def router_args(bp: Blueprint, namespace: str, engine_selector: dict[str, str]) -> list[str]:
    """The router's command line (production-stack parser.py at vllm-stack-0.1.12, catalog router.yaml): discovery of
    the engine pods by label in `namespace`, reached at the proxy's port; the planned routing."""
    router = bp.router
    assert router is not None
    selector = ",".join(f"{k}={v}" for k, v in sorted(engine_selector.items()))
    return ["--host=0.0.0.0", f"--port={router.port}", "--service-discovery=k8s",
            "--k8s-service-discovery-type=pod-ip", f"--k8s-namespace={namespace}",
            f"--k8s-label-selector={selector}", f"--k8s-port={defaults.PROXY_PORT}", *router.args]


def _spec(bp: Blueprint, labels: dict[str, str], namespace: str, args: VllmRouterArgs,
          account: pulumi.Input[str]) -> dict:
    router, facts = bp.router, load_router_catalog()
    assert router is not None
    resources = {"cpu": facts.cpu, "memory": facts.memory}
    probe = {"httpGet": {"path": facts.health_path, "port": "http"}, "timeoutSeconds": 5}
    selector = selector_labels(labels)
    pod = {
        "serviceAccountName": account,
        **({"nodeSelector": dict(args.node_selector)} if args.node_selector else {}),
        "terminationGracePeriodSeconds": termination_grace_period_s(bp),
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": {"matchLabels": selector}} for key in SPREAD_KEYS],
        "containers": [{
            "name": "router",
            "image": router.image,
            "args": router_args(bp, namespace, args.engine_selector),
            "env": [api_key_env(args.endpoint.api_key_secret, "VLLM_API_KEY")],
            "lifecycle": container_lifecycle(bp),
            "ports": [{"name": "http", "containerPort": router.port, "protocol": "TCP"}],
            "resources": {"requests": resources, "limits": resources},
            "startupProbe": {**probe, "periodSeconds": 5, "failureThreshold": ROUTER_START_S // 5},
            "readinessProbe": {**probe, "periodSeconds": 5, "failureThreshold": 3},
            "livenessProbe": {**probe, "periodSeconds": 15, "failureThreshold": 4},
        }],
    }
    spec = {"replicas": router.replicas, "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels}, "spec": pod}}
    tls = bp.network.exposure.tls_secret_name if bp.proxy_terminates_tls else None
    out = with_proxy(spec, args.endpoint.api_key_secret, pod_start_s=ROUTER_START_S,
                     lifecycle=container_lifecycle(bp), tls_secret=tls)
    # The router watches pods through the API server: the one serving pod that mounts its ServiceAccount's token.
    out["template"]["spec"]["automountServiceAccountToken"] = True
    return out


class VllmRouter(pulumi.ComponentResource):
    """The router's ServiceAccount, Role and RoleBinding (pods: get, list, watch), Deployment (router + the
    authenticating proxy), PodDisruptionBudget, metrics Service and NetworkPolicy (module docstring).

    Outputs: `deployment_name`, `metrics_service_name`.
    """

    def __init__(self, name: str, args: VllmRouterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:VllmRouter", name, None, opts)
        bp = args.blueprint
        router = bp.router
        if router is None:
            raise ValueError(f"{bp.stack}: VllmRouter needs a blueprint with a planned router")
        child = pulumi.ResourceOptions(parent=self)
        workload = router_workload_name(bp.service)
        labels = router_labels(bp.stack, router.image)
        self.selector = selector_labels(labels)
        meta = {"name": workload, "namespace": args.namespace, "labels": labels}
        self.service_account = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=meta, opts=child)
        self.role = k8s.rbac.v1.Role(f"{name}-role", metadata=meta, rules=[
            {"apiGroups": [""], "resources": ["pods"], "verbs": list(load_router_catalog().pod_verbs)}], opts=child)
        self.role_binding = k8s.rbac.v1.RoleBinding(
            f"{name}-role-binding", metadata=meta,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": workload},
            subjects=[{"kind": "ServiceAccount", "name": workload, "namespace": args.namespace}], opts=child)
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata=meta,
            spec=pulumi.Output.from_input(args.namespace).apply(
                lambda ns: _spec(bp, labels, ns, args, workload)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.service_account, self.role_binding]))
        self.disruption_budget = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=meta, spec={"minAvailable": 1, "selector": {"matchLabels": self.selector}},
            opts=child)
        self.metrics_service = k8s.core.v1.Service(
            f"{name}-metrics", metadata={**meta, "name": router_metrics_service_name(bp.service)},
            spec={"type": "ClusterIP", "selector": self.selector,
                  "ports": [{"name": "metrics", "port": router.port, "targetPort": "http", "protocol": "TCP"}]},
            opts=child)
        endpoint = args.endpoint
        engines = {"to": [{"podSelector": {"matchLabels": dict(args.engine_selector)}}],
                   "ports": [{"port": defaults.PROXY_PORT, "protocol": "TCP"}]}
        self.network_policy = serving_policy(
            f"{name}-network-policy", bp, namespace=args.namespace, selector=self.selector,
            proxy_port=defaults.PROXY_PORT, metrics_port=router.port,
            client_cidrs=client_cidrs(bp, endpoint.vpc_cidrs), vpc_cidrs=endpoint.vpc_cidrs,
            monitoring_namespace=endpoint.monitoring_namespace, interceptor_namespace=endpoint.interceptor_namespace,
            ingress_namespace=endpoint.ingress_namespace, policy_name=workload, extra_egress=[engines],
            kubernetes_api=endpoint.service_cidr, opts=child)
        self.deployment_name = self.deployment.metadata.name
        self.metrics_service_name = self.metrics_service.metadata.name
        self.register_outputs({"deployment_name": self.deployment_name,
                               "metrics_service_name": self.metrics_service_name})
