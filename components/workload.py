"""The Kubernetes objects every serving workload has, built one way: ServiceAccount (no token mounted), Deployment
(the engine behind the authenticating proxy, every container hardened, with the rollout options of
`components.disruption.deployment_options`), PodDisruptionBudget, the serving Service on the proxy's port (when
exposed: an NLB, a MetalLB LoadBalancer, a NodePort, or a ClusterIP behind an Ingress, see `components.exposure`), a
ClusterIP metrics Service for Prometheus, and the pods' NetworkPolicy. All are named `Blueprint.workload_name` (the
metrics Service `<workload>-metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pulumi
import pulumi_kubernetes as k8s

from blueprints.catalog.addons import load_platform_catalog
from blueprints.contracts.client_api import api_base_path
from blueprints.contracts.proxy import service_app_protocol
from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.requirements.exposure import ExposureVia
from components.access import PROXY_PORT_NAME, proxy_container
from components.autoscaling import HTTP_ADD_ON
from components.disruption import deployment_options, disruption_budget
from components.rollout import bounded_probe_kills, container_lifecycle
from components.exposure import client_cidrs, client_url, ingress_spec, listener_port, service_exposure
from components.hardening import hardened_pod_spec
from components.labels import router_labels, selector_labels
from components.network_policy import serving_policy


@dataclass
class Endpoint:
    """How a serving workload is reached.

    Attributes:
        api_key_secret: the Secret holding the API key and the proxy's configuration (`components.access.ApiKey`).
        vpc_cidrs: the VPC's CIDR(s): the load balancer's addresses and interface endpoints (default: the private
            address space, for a cluster whose VPC is not known).
        load_balancer_subnet_ids: the load balancer's subnets; None lets the controller discover them by role tags.
        monitoring_namespace: where Prometheus runs; only it reaches the engine's metrics port.
        interceptor_namespace: where the KEDA HTTP add-on's interceptor runs, for a service that scales to zero (it
            forwards clients' requests to the proxy's port); None otherwise.
        ingress_namespace: where the ingress controller's pods run, for a service behind an Ingress (they forward
            clients' requests to the proxy's port); None otherwise.
        service_cidr: the cluster's Service CIDR (pods calling the Kubernetes API get an egress rule to the API
            server's ClusterIP); None: unknown (an existing or edge cluster), where `vpc_cidrs` is the whole private
            address space.
    """

    api_key_secret: pulumi.Input[str]
    vpc_cidrs: pulumi.Input[list[str]] = field(default_factory=lambda: list(defaults.PRIVATE_CIDRS))
    load_balancer_subnet_ids: pulumi.Input[list[str]] | None = None
    monitoring_namespace: str = "monitoring"
    interceptor_namespace: str | None = None
    ingress_namespace: str | None = None
    service_cidr: pulumi.Input[str] | None = None


@dataclass
class ServingObjects:
    service_account: k8s.core.v1.ServiceAccount
    deployment: k8s.apps.v1.Deployment
    disruption_budget: k8s.policy.v1.PodDisruptionBudget | None
    service: k8s.core.v1.Service
    metrics_service: k8s.core.v1.Service
    network_policy: k8s.networking.v1.NetworkPolicy
    ingress: k8s.networking.v1.Ingress | None = None

    @property
    def load_balancer_host(self) -> pulumi.Output[str]:
        """The load balancer's (or Ingress's) address once it is provisioned (its status)."""
        def host(status) -> str:
            ingress = (status.load_balancer.ingress or []) if status and status.load_balancer else []
            return (ingress[0].hostname or ingress[0].ip or "") if ingress else ""
        return (self.ingress or self.service).status.apply(host)

    def endpoint(self, bp: Blueprint, namespace: pulumi.Input[str], *, expose: bool) -> pulumi.Output[str]:
        """The `endpoint` output: the URL clients use, ending in the engine API's base path
        (`blueprints.contracts.client_api.api_base_path`). Exposed: the load balancer's or Ingress's address (or the
        plan's hostname); for a NodePort, `<node-address>:<node port>` (any node's address on the site network).
        Otherwise the serving Service's in-cluster name."""
        base = api_base_path(bp)
        if not expose:
            return pulumi.Output.concat("http://", self.service.metadata.name, ".", namespace, ".svc.cluster.local",
                                        base)
        if bp.network.exposure.via is ExposureVia.NODE_PORT:
            port = self.service.spec.apply(lambda spec: str(spec.ports[0].node_port or "<node port>"))
            return client_url(bp, "<node-address>", base, port=port)
        return client_url(bp, self.load_balancer_host, base)


def with_proxy(spec: dict, secret_name: pulumi.Input[str], *, pod_start_s: int, lifecycle: dict,
               tls_secret: str | None = None) -> dict:
    """A Deployment spec whose pod runs the authenticating proxy beside the engine (serving TLS with `tls_secret`
    when given, draining like the engine: `lifecycle`), every container hardened and killed by its probes without
    waiting out its drain (`components.rollout.bounded_probe_kills`)."""
    template = spec["template"]
    pod = dict(template["spec"])
    proxy, volumes = proxy_container(secret_name, pod_start_s=pod_start_s, lifecycle=lifecycle, tls_secret=tls_secret)
    pod["containers"] = [bounded_probe_kills(c) for c in [*pod["containers"], proxy]]
    pod["volumes"] = [*pod.get("volumes", []), *volumes]
    return {**spec, "template": {**template, "spec": hardened_pod_spec(pod)}}


def serving_objects(name: str, bp: Blueprint, *, labels: dict[str, str], namespace: pulumi.Input[str],
                    deployment_spec: Callable[[pulumi.Output[str]], dict], metrics_port: int, metrics_target: str,
                    endpoint: Endpoint, expose: bool, opts: pulumi.ResourceOptions) -> ServingObjects:
    """Create the workload's objects as children (`opts`) of a serving component named `name`.

    Args:
        deployment_spec: builds the Deployment spec (camelCase, the engine's containers) from the ServiceAccount's
            name; the proxy container and the hardening are added here.
        metrics_port: the engine port Prometheus scrapes; `metrics_target` its container port name.
        endpoint: the API-key Secret, the VPC's CIDRs, the load balancer's subnets and the monitoring namespace.
        expose: the planned exposure (`network.exposure.via`); otherwise ClusterIP only (a service that scales to
            zero is reached through the KEDA HTTP interceptor).
    """
    workload = bp.workload_name
    # With a router (blueprints.contracts.router) clients reach the router's pods, and only they reach the engine
    # pods' proxy port, in plain HTTP inside the cluster (the router's own proxy serves the exposure's TLS).
    routed = router_labels(bp.stack, bp.router.image) if bp.router is not None else None
    client_selector = selector_labels(routed) if routed else selector_labels(labels)
    account = k8s.core.v1.ServiceAccount(
        f"{name}-sa", metadata={"name": workload, "namespace": namespace, "labels": labels},
        automount_service_account_token=False, opts=opts)
    deployment = k8s.apps.v1.Deployment(
        f"{name}-deployment", metadata={"name": workload, "namespace": namespace, "labels": labels},
        spec=with_proxy(deployment_spec(account.metadata.name), endpoint.api_key_secret,
                        pod_start_s=bp.startup.pod_start_s, lifecycle=container_lifecycle(bp),
                        tls_secret=bp.network.exposure.tls_secret_name if bp.proxy_terminates_tls and not routed
                        else None),
        opts=pulumi.ResourceOptions.merge(opts, deployment_options(bp)))
    budget = disruption_budget(f"{name}-pdb", bp, workload, namespace, labels, opts)
    port = listener_port(bp)
    ports = [{"name": PROXY_PORT_NAME, "port": port, "targetPort": PROXY_PORT_NAME, "protocol": "TCP"}]
    app_protocol = service_app_protocol(bp, load_platform_catalog().addon(HTTP_ADD_ON).backend_h2c_app_protocol)
    if app_protocol:  # the KEDA HTTP interceptor in front speaks HTTP/2 to it (gRPC)
        ports[0]["appProtocol"] = app_protocol
    if expose and bp.network.exposure.via is ExposureVia.NODE_PORT and bp.network.exposure.node_port:
        ports[0]["nodePort"] = bp.network.exposure.node_port
    kind, annotations = (service_exposure(bp, port, vpc_cidrs=endpoint.vpc_cidrs,
                                          subnet_ids=endpoint.load_balancer_subnet_ids)
                         if expose else ({"type": "ClusterIP"}, {}))
    service = k8s.core.v1.Service(
        f"{name}-service", metadata={"name": workload, "namespace": namespace, "labels": labels,
                                     "annotations": annotations},
        spec={**kind, "selector": client_selector, "ports": ports}, opts=opts)
    ingress = None
    if expose and bp.network.exposure.via is ExposureVia.INGRESS:
        spec, ingress_annotations = ingress_spec(bp, service.metadata.name, PROXY_PORT_NAME)
        ingress = k8s.networking.v1.Ingress(
            f"{name}-ingress", metadata={"name": workload, "namespace": namespace, "labels": labels,
                                         "annotations": ingress_annotations},
            spec=spec, opts=opts)
    # Metrics stay inside the cluster: a ClusterIP Service for Prometheus, never a port on the load balancer.
    metrics = k8s.core.v1.Service(
        f"{name}-metrics", metadata={"name": bp.metrics_service_name, "namespace": namespace, "labels": labels},
        spec={"type": "ClusterIP", "selector": selector_labels(labels),
              "ports": [{"name": "metrics", "port": metrics_port, "targetPort": metrics_target, "protocol": "TCP"}]},
        opts=opts)
    policy = serving_policy(f"{name}-network-policy", bp, namespace=namespace, selector=selector_labels(labels),
                            proxy_port=defaults.PROXY_PORT, metrics_port=metrics_port,
                            client_cidrs=client_cidrs(bp, endpoint.vpc_cidrs),
                            vpc_cidrs=endpoint.vpc_cidrs, monitoring_namespace=endpoint.monitoring_namespace,
                            interceptor_namespace=endpoint.interceptor_namespace,
                            ingress_namespace=endpoint.ingress_namespace,
                            client_pods=selector_labels(routed) if routed else None, opts=opts)
    return ServingObjects(account, deployment, budget, service, metrics, policy, ingress)
