"""How clients reach a Kubernetes service, from its exposure and what its cluster runs.

`resolve_exposure` turns the requirements' `exposure` and `operations` into one decision: a Service of type
LoadBalancer (an NLB through the AWS Load Balancer Controller, or MetalLB), an Ingress of a declared ingress
controller, or a NodePort, and the add-on that implements it. The shared EKS platform installs the load balancer
controller; an existing or edge cluster must declare what it runs (`operations.cluster_addons`), and an exposure that
needs an add-on it does not declare is refused here, naming the field and the fix.

Pure: no Pulumi, no network; facts about the add-ons (the IngressClass each serves, which implement LoadBalancer,
how an Ingress admits source CIDRs) come from `blueprints/catalog/addons.yaml`.
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.catalog.addons import HelmAddon, load_platform_catalog
from blueprints.requirements.hosting import Operations, Platform
from blueprints.requirements.exposure import Exposure, ExposureVia

#: The AWS Load Balancer Controller's catalog id: it turns a LoadBalancer Service into an NLB.
AWS_LOAD_BALANCER_CONTROLLER = "aws-load-balancer-controller"


@dataclass(frozen=True)
class ClusterExposure:
    """The resolved exposure.

    Attributes:
        via: load-balancer, ingress or node-port.
        exposed_by: the add-on implementing it (aws-load-balancer-controller, metallb, ingress-nginx, traefik);
            None for a NodePort (kube-proxy serves it on every node).
        ingress_class_name: via ingress: the IngressClass.
        ingress_namespace: via ingress: where the controller's pods run (the NetworkPolicy admits it).
    """

    via: ExposureVia
    exposed_by: str | None
    ingress_class_name: str | None = None
    ingress_namespace: str | None = None

    def exposure(self, exposure: Exposure) -> Exposure:
        """`exposure` with `via` and the Ingress settings filled in as resolved."""
        return exposure.model_copy(update={"via": self.via, "ingress_class_name": self.ingress_class_name,
                                           "ingress_namespace": self.ingress_namespace})


class ExposureProblem(ValueError):
    """The exposure needs something the cluster does not declare, or settings that do not apply to it; `field` is
    the requirements field the message starts with (`exposure.via`, `operations.cluster_addons`)."""

    @property
    def field(self) -> tuple[str, ...]:
        return tuple(str(self).split(" ", 1)[0].rstrip(":").split("."))


def _declared(ops: Operations, pick: list[HelmAddon]) -> list[HelmAddon]:
    declared = set(ops.declared_addons or [])
    return [a for a in pick if a.id in declared]


def default_via(ops: Operations) -> ExposureVia:
    """Without `exposure.via`: a load balancer on eks and existing clusters; on an edge cluster an Ingress when an
    ingress controller is declared, else a NodePort (an edge cluster has no cloud load balancer)."""
    if ops.platform is not Platform.EDGE_CLUSTER:
        return ExposureVia.LOAD_BALANCER
    controllers = [a for a in _declared(ops, load_platform_catalog().ingress_controllers()) if not a.aws_only]
    return ExposureVia.INGRESS if controllers else ExposureVia.NODE_PORT


def _load_balancer(ops: Operations, exposure: Exposure) -> ClusterExposure:
    if ops.platform is Platform.EKS or ops.declared_addons is None:
        # The shared platform installs the controller; an existing cluster that declares nothing is judged by the
        # preview (which names the missing add-on), as before.
        chosen = AWS_LOAD_BALANCER_CONTROLLER
    else:
        found = [a.id for a in _declared(ops, load_platform_catalog().load_balancers())]
        if not found:
            known = ", ".join(a.id for a in load_platform_catalog().load_balancers()
                              if ops.platform is not Platform.EDGE_CLUSTER or not a.aws_only)
            raise ExposureProblem(
                f"exposure.via load-balancer needs a LoadBalancer implementation, but operations.cluster_addons "
                f"declares none ({known}); on a cluster without one the Service stays pending forever: declare the "
                "one the cluster runs (install it first), or set exposure.via: node-port or ingress")
        chosen = AWS_LOAD_BALANCER_CONTROLLER if AWS_LOAD_BALANCER_CONTROLLER in found else found[0]
    if chosen == AWS_LOAD_BALANCER_CONTROLLER and exposure.tls_secret_name:
        raise ExposureProblem("exposure.tls_secret_name: the NLB of the AWS Load Balancer Controller terminates TLS "
                              "with an ACM certificate; set exposure.tls_certificate_arn instead")
    if chosen != AWS_LOAD_BALANCER_CONTROLLER and exposure.tls_certificate_arn:
        raise ExposureProblem(f"exposure.tls_certificate_arn is an ACM certificate for an AWS load balancer, but "
                              f"{chosen} implements this LoadBalancer: give exposure.tls_secret_name (a kubernetes.io/"
                              "tls Secret; the pod's proxy terminates TLS with it)")
    return ClusterExposure(ExposureVia.LOAD_BALANCER, chosen)


def _ingress(ops: Operations, exposure: Exposure) -> ClusterExposure:
    if ops.platform is Platform.EKS:
        raise ExposureProblem("exposure.via ingress: the shared EKS platform exposes services through an NLB (via: "
                              "load-balancer); an Ingress is for existing and edge clusters")
    catalog = load_platform_catalog()
    candidates = [a for a in _declared(ops, catalog.ingress_controllers()) if not a.aws_only]
    known = ", ".join(f"{a.id} (class {a.ingress_class})" for a in catalog.ingress_controllers() if not a.aws_only)
    if not candidates:
        raise ExposureProblem(f"exposure.via ingress needs an ingress controller, but operations.cluster_addons "
                              f"declares none ({known}): declare the one the cluster runs, or set exposure.via: "
                              "node-port")
    wanted = exposure.ingress_class_name
    if wanted is not None:
        matching = [a for a in candidates if a.ingress_class == wanted]
        if not matching:
            raise ExposureProblem(f"exposure.ingress_class_name {wanted!r} is served by no declared ingress "
                                  f"controller ({', '.join(f'{a.id}: {a.ingress_class}' for a in candidates)}); use "
                                  "one of those classes or declare its controller in operations.cluster_addons")
        controller = matching[0]
    elif len(candidates) > 1:
        raise ExposureProblem(f"operations.cluster_addons declares several ingress controllers "
                              f"({', '.join(a.id for a in candidates)}): set exposure.ingress_class_name to the one "
                              "this service uses")
    else:
        controller = candidates[0]
    if exposure.allowed_cidrs and controller.source_range_annotation is None:
        raise ExposureProblem(f"exposure.allowed_cidrs: {controller.id} cannot restrict a plain Ingress to source "
                              "CIDRs (it needs a custom resource of its own); use exposure.via: node-port (the pods' "
                              "NetworkPolicy admits only those CIDRs) or a controller that can (ingress-nginx)")
    return ClusterExposure(ExposureVia.INGRESS, controller.id, ingress_class_name=controller.ingress_class,
                           ingress_namespace=exposure.ingress_namespace or controller.namespace)


def resolve_exposure(ops: Operations, exposure: Exposure) -> ClusterExposure:
    """The exposure a Kubernetes service gets on its cluster.

    Raises:
        ExposureProblem: the exposure needs an add-on `operations.cluster_addons` does not declare, or names TLS
            or Ingress settings its implementation cannot use; the message names the field and the fix.
    """
    via = exposure.via or default_via(ops)
    if via is ExposureVia.LOAD_BALANCER:
        return _load_balancer(ops, exposure)
    if via is ExposureVia.INGRESS:
        return _ingress(ops, exposure)
    if ops.platform is Platform.EKS:
        raise ExposureProblem("exposure.via node-port: the shared EKS platform's nodes are in private subnets and "
                              "its services are exposed through an NLB (via: load-balancer)")
    if exposure.tls_certificate_arn:
        raise ExposureProblem("exposure.tls_certificate_arn is an ACM certificate for an AWS load balancer; a "
                              "NodePort is served by the pod's proxy: give exposure.tls_secret_name instead")
    return ClusterExposure(ExposureVia.NODE_PORT, None)
