"""The add-on checks of `blueprint preview` (`blueprints.review.deployability.checks`): `addon-installed` (every CRD and
controller an object needs is installed before it, by the stack, its platform or the cluster's declaration) and
`webhook-ready` (an object a webhook guards depends on the release serving it).
"""

from __future__ import annotations

from blueprints.catalog.addons import PlatformCatalog
from blueprints.review.preview import DeployabilityFinding, RegisteredResource
from blueprints.review.deployability.context import (
    CheckContext, GPU, HPA_TYPES, RELEASE, SCALED_OBJECT, containers_of, crd_of, named, get_in, list_of, pod_spec,
    type_token,
)


def needed_addons(record: RegisteredResource, pcat: PlatformCatalog) -> list[tuple[str, str]]:
    """(add-on id, why) for everything `record` needs installed first; an id of `?` when no catalogued add-on
    installs its CRD, `?class` when none serves an Ingress's class; `a|b` when any one of those add-ons will do (a
    LoadBalancer Service off AWS: metallb)."""
    needs: list[tuple[str, str]] = []
    crd = crd_of(record)
    if crd is not None:
        owner = pcat.crd_owner(crd)
        needs.append((owner.id if owner else "?", f"its CRD {crd}"))
    if record.type == RELEASE:
        addon = next((a for a in pcat.helm.values() if a.release == record.inputs.get("name")), None)
        if addon is not None:
            needs += [(n, f"add-on {n} (chart {addon.chart} needs it)") for n in addon.needs]
            needs += [(pcat.crd_owner(c).id, f"the CRD {c} its chart renders")  # type: ignore[union-attr]
                      for c in addon.needs_crds]
    if record.type in ("kubernetes:core/v1:Service",) and get_in(record.inputs, "spec", "type") == "LoadBalancer":
        annotations = get_in(record.inputs, "metadata", "annotations") or {}
        if any(str(k).startswith("service.beta.kubernetes.io/aws-load-balancer-") for k in annotations):
            needs.append(("aws-load-balancer-controller", "a LoadBalancer Service becomes an NLB through it"))
        else:
            options = "|".join(a.id for a in pcat.load_balancers() if not a.aws_only)
            needs.append((options, "a LoadBalancer Service without a cloud load balancer gets its address from it"))
    if record.type == "kubernetes:networking.k8s.io/v1:Ingress":
        cls = get_in(record.inputs, "spec", "ingressClassName")
        if cls is None:  # the cluster's default IngressClass: any ingress controller
            needs.append(("|".join(a.id for a in pcat.ingress_controllers()), "an Ingress needs an ingress controller"))
        else:
            controller = next((a for a in pcat.ingress_controllers() if a.ingress_class == cls), None)
            needs.append((controller.id if controller else "?class",
                          f"it serves IngressClass {cls!r}" if controller else f"IngressClass {cls!r}"))
    if record.type in HPA_TYPES and any(get_in(m, "type") == "Resource"
                                        for m in list_of(get_in(record.inputs, "spec", "metrics"))):
        needs.append(("metrics-server", "an HPA on CPU or memory reads the resource metrics API"))
    if record.type == SCALED_OBJECT and any(get_in(t, "type") in ("cpu", "memory")
                                            for t in list_of(get_in(record.inputs, "spec", "triggers"))):
        needs.append(("metrics-server", "a cpu/memory trigger reads the resource metrics API"))
    spec = pod_spec(record)
    if spec is not None and any(get_in(c, "resources", "limits", GPU) for c in containers_of(spec)):
        needs.append(("nvidia-device-plugin", "its pods request nvidia.com/gpu"))
    return needs


def check_addons(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    for record in ctx.report.resources:
        if record.read:
            continue
        for addon_id, why in needed_addons(record, ctx.pcat):
            if "|" in addon_id:  # any one of these implementations
                options = addon_id.split("|")
                if any(o in ctx.external or o in ctx.releases for o in options):
                    continue
                addon_id = options[0]
            if addon_id == "?":
                findings.append(DeployabilityFinding(
                    "addon-installed", record.urn, f"{named(record)}: no add-on in blueprints/catalog/addons.yaml "
                    f"installs {why.removeprefix('its CRD ')}, so `pulumi up` fails with \"no matches for kind\"; "
                    "install its CRD first and add the add-on to the catalog"))
            elif addon_id == "?class":
                findings.append(DeployabilityFinding(
                    "addon-installed", record.urn, f"{named(record)}: no add-on in blueprints/catalog/addons.yaml "
                    f"serves {why}, so no controller ever routes it; use the class of a declared ingress controller "
                    "(exposure.ingress_class_name) or add the controller to the catalog"))
            elif addon_id in ctx.releases or addon_id in ctx.crd_releases:
                if not ctx.provides(record, addon_id):
                    release = ctx.releases.get(addon_id) or ctx.crd_releases[addon_id]
                    findings.append(DeployabilityFinding(
                        "addon-installed", record.urn, f"{named(record)} needs {why}, installed by release "
                        f"{release.inputs.get('name')!r} in this stack, but does not depend on it: it may be created "
                        f"first and fail; add depends_on=[that release]"))
            elif addon_id not in ctx.external:
                findings.append(DeployabilityFinding(
                    "addon-installed", record.urn, f"{named(record)} needs add-on {addon_id} ({why}), which is "
                    f"not installed: add it to {ctx.fix(addon_id)}"))
    return findings


def check_webhooks(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    for addon_id, release in ctx.releases.items():
        guarded = {type_token(*ref.rsplit("/", 1)) for ref in ctx.pcat.helm[addon_id].webhooks}
        for record in ctx.report.resources:
            if record.type in guarded and release.urn not in ctx.graph.closure(record):
                findings.append(DeployabilityFinding(
                    "webhook-ready", record.urn, f"{named(record)} is admitted by {addon_id}'s webhook, installed "
                    f"by release {release.inputs.get('name')!r} in this stack, but does not depend on it: created "
                    "before the webhook serves, it is rejected; add depends_on=[that release]"))
    return findings
