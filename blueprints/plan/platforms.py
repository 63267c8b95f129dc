"""Plan the shared platforms: which services land where, and each platform's config as a pure function of
`platform.yaml` and every requirements file that lands on it.

A platform's posture (API endpoint access, customer-managed KMS for Kubernetes secrets, audit logs, its VPC) is the
platform team's: platform.yaml sets it, the environment's policy config may demand audit logs, and only a platform
that opts in (`strictest_service_wins`) takes the strictest compliance of its services as well. A service whose
compliance its platform's posture does not meet does not land there: planning it is refused, naming platform.yaml and
the two fixes (`unmet_compliance`), and every other service's plan, the platform's bytes included, stays as it was.
The plan date is an explicit input: it picks the default Kubernetes version (the newest in EKS standard support that
every pinned add-on supports), the control plane's price and the support-window warnings.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from blueprints.catalog.cluster_network import eks_default_service_cidr
from blueprints.core import defaults
from blueprints.catalog.endpoints import NODES, SAGEMAKER, SERVICE, load_endpoint_catalog
from blueprints.catalog import Catalog, load_catalog
from blueprints.catalog.addons import PlatformCatalog
from blueprints.core.errors import BlueprintError, CatalogError, RequirementsError
from blueprints.requirements.platform_file import (
    ALERT_RECEIVER_SECRET_KEY, PLATFORM_SERVICE, DERIVED_NAME, AccessSpec, PlatformOverride, PlatformRequirements,
    SpotPolicy, platform_stack_name,
)
from blueprints.contracts.platform import (
    AddonRelease, CostItem, NodeClass, PlatformAlerting, PlatformConfig, PlatformKind, PlatformNetwork, SystemNodes,
    kubernetes_minor,
)
from blueprints.plan.landing import (
    ServiceFile, check_members, check_platform_names, check_unused_entries, landing_platform, self_hosted_on_eks,
)
from blueprints.plan.quota import quota_note
from blueprints.plan.guardrails import Guardrails
from blueprints.plan.kubernetes_features import minimum_version
from blueprints.requirements.exposure import OPEN_INTERNET
from blueprints.requirements.hosting import Accelerator, CpuArch
from blueprints.requirements.service import Requirements
from blueprints.contracts.consistency import stored_weights_gib
from blueprints.contracts.weights import disk_for_gib, replica_ephemeral_gib, sync_job_ephemeral_gib
from blueprints.catalog.startup import load_startup_catalog
from blueprints.catalog.images import load_image_catalog
from blueprints.contracts.images import in_private_ecr

#: A platform's guardrails by its environment name and production flag (None: no policy).
PolicyFor = Callable[[str, bool], "Guardrails | None"]

#: Add-ons every EKS platform installs, in install order.
BASE_ADDONS = ("karpenter", "aws-load-balancer-controller", "kube-prometheus-stack", "keda", "metrics-server")
#: Added when a service on the platform may run on GPUs.
GPU_ADDONS = ("nvidia-device-plugin", "dcgm-exporter")
#: Added when a service on the platform scales to zero (its interceptor holds requests during a cold start).
SCALE_TO_ZERO_ADDONS = ("keda-http-add-on",)


def _where_of(name: str, override: PlatformOverride | None, first: tuple[ServiceFile, str]) -> tuple[str, str]:
    """(environment, region) of a platform: its platform.yaml entry, else parsed from `<env>-<region>`, else the
    first environment landing on it."""
    parsed = DERIVED_NAME.fullmatch(name)
    service, env = first
    environment = (override.environment if override and override.environment else
                   parsed.group(1) if parsed else env)
    region = (override.region if override and override.region else
              parsed.group(2) if parsed else service.requirements.environments[env].region)
    return environment, region


@dataclass(frozen=True)
class Posture:
    """What a platform guarantees its services: a private API endpoint, Kubernetes secrets under a customer-managed
    KMS key, audit logs; and why (the rationale line)."""

    private_endpoint: bool
    secrets_kms: bool
    audit_logging: bool
    why: str


#: (compliance field of a service, the posture attribute that meets it, the platform.yaml key setting it, what it is).
POSTURE_NEEDS = (
    ("private_only", "private_endpoint", "private_endpoint", "a private Kubernetes API endpoint"),
    ("customer_managed_kms", "secrets_kms", "secrets_kms",
     "Kubernetes secrets (its API key) encrypted with a customer-managed KMS key"),
    ("audit_logging", "audit_logging", "audit_logging", "Kubernetes audit logs"),
)


def platform_posture(name: str, override: PlatformOverride | None, *, policy: Guardrails | None,
                     services: Sequence[Requirements], platform_file: str) -> Posture:
    """A platform's posture: platform.yaml's `platforms.<name>` settings (default: public API, EKS-managed secrets
    encryption, audit logs as the policy config requires), and with `strictest_service_wins`, or for a platform
    platform.yaml does not declare, the strictest compliance of the self-hosted `services` landing there too.

    Raises:
        RequirementsError: platform.yaml turns audit logs off where the environment's policy config requires them.
    """
    # A platform platform.yaml does not declare has no posture the platform team chose: the services landing there
    # shape it (as with strictest_service_wins), so a minimal requirements file in a new Region plans with the secure
    # defaults it asks for (compliance.audit_logging defaults to true) instead of being refused for them.
    undeclared = override is None
    opted = undeclared or bool(override.strictest_service_wins)
    eks = [r for r in services if self_hosted_on_eks(r)]
    required = policy is not None and policy.audit_logs_required
    if override is not None and override.audit_logging is False and required:
        raise RequirementsError(f"{platform_file}: platforms.{name}.audit_logging is false but {policy.source} "
                                "requires audit logs (cluster-audit-logs); remove the setting or lower that policy's "
                                "enforcementLevel", rule="platform-settings")
    declared = {a: bool(getattr(override, a, None)) for _, a, _, _ in POSTURE_NEEDS}
    if required:
        declared["audit_logging"] = True
    values = {a: declared[a] or (opted and any(getattr(r.compliance, c) for r in eks))
              for c, a, _, _ in POSTURE_NEEDS}
    why = (f"{'API endpoint private' if values['private_endpoint'] else 'API endpoint public'}, audit logs "
           f"{'on' if values['audit_logging'] else 'off'}, Kubernetes secrets "
           f"{'encrypted with a customer-managed KMS key' if values['secrets_kms'] else 'encrypted by EKS'}: "
           + (f"the strictest compliance of its services ({platform_file} has no platforms.{name} entry)"
              if undeclared else f"as {platform_file} sets"
              + (" (strictest_service_wins: and the strictest compliance of its services)" if opted else ""))
           + (f"; {policy.source} requires audit logs (cluster-audit-logs)" if required else ""))
    return Posture(why=why, **values)


def unmet_compliance(posture: Posture, req: Requirements) -> list[tuple[str, str, str]]:
    """What of a service's compliance a platform's posture does not meet: (compliance field, platform.yaml key,
    what the platform lacks). A self-hosted service on the platform's cluster needs all of its posture; a private
    SageMaker endpoint needs only its private VPC (interface endpoints, so clients in the VPC reach the endpoint
    without the internet)."""
    if not self_hosted_on_eks(req):
        private = req.compliance.private_only and not posture.private_endpoint
        return [("private_only", "private_endpoint", "interface VPC endpoints (a private VPC), through which clients "
                 "reach a private SageMaker endpoint")] if private else []
    return [(c, key, what) for c, a, key, what in POSTURE_NEEDS
            if getattr(req.compliance, c) and not getattr(posture, a)]


def refusal(svc: ServiceFile, env: str, name: str, unmet: list[tuple[str, str, str]], *, platform_file: str) -> str:
    """Why a service environment is refused on platform `name`, with both fixes."""
    region = svc.requirements.environments[env].region
    fields = ", ".join(f"compliance.{c}" for c, _, _ in unmet)
    keys = ", ".join(f"platforms.{name}.{k}: true" for _, k, _ in unmet)
    private = any(k == "private_endpoint" for _, k, _ in unmet)
    return (f"{svc.where}: environments.{env} lands on {platform_stack_name(name)}, whose posture ({platform_file}) "
            f"lacks {'; '.join(w for _, _, w in unmet)}, which {fields} needs; a service's plan never changes a "
            f"platform's posture. Either set {keys} in {platform_file}"
            + (" (with existing_vpc and runner_label: a private API is reached from inside its VPC)" if private else "")
            + f", or declare a dedicated platform for such services under platforms: in {platform_file} (environment "
            f"{env}, region {region}, that posture) and land this environment there with environments.{env}.platform")


def standalone_platform_file(req: Requirements) -> PlatformRequirements:
    """The platform.yaml a file planned on its own (the library's `plan` without platforms: one file's what-if,
    tests) stands in: every platform it lands on follows its services (`strictest_service_wins`) and pages a webhook
    receiver. `blueprint plan` always plans with the project's platform.yaml."""
    from blueprints.requirements.platform_file import AlertingSpec, ReceiverKind

    names = {n for env in req.environments if (n := landing_platform(req, env)) is not None}
    return PlatformRequirements(alerting=AlertingSpec(receiver=ReceiverKind.WEBHOOK),
                                platforms={n: PlatformOverride(strictest_service_wins=True) for n in sorted(names)
                                           if DERIVED_NAME.fullmatch(n)})


def choose_kubernetes_version(pcat: PlatformCatalog, addon_ids: Sequence[str], as_of: dt.date, *,
                              wanted: str | None, source: str) -> tuple[str, list[str], list[str]]:
    """The platform's Kubernetes version, with rationale and warnings.

    Default: among the catalog versions EKS had released by `as_of` that every add-on supports (`kubernetes_max`),
    the newest in EKS standard support on `as_of`; when none is (the catalog is older than the plan date), the
    newest still in extended support, with a warning. Never older than a field the service workloads render needs
    (`kubernetes_features`). A version asked for must be in the catalog, released by `as_of`, still supported on
    `as_of`, supported by every add-on and no older than those fields need.

    Raises:
        RequirementsError: the wanted version is unknown, unreleased, out of support, beyond an add-on's support or
            older than a workload field needs; or no catalog version is supported on `as_of` at all.
    """
    oldest = minimum_version()
    limits = {a: pcat.addon(a).kubernetes_max for a in addon_ids if pcat.addon(a).kubernetes_max}

    def beyond_addons(version: str) -> list[str]:
        return [f"{a} (<= {m})" for a, m in limits.items() if kubernetes_minor(version) > kubernetes_minor(m)]

    released = [v for v, r in pcat.versions.items()
                if r.released is not None and r.released <= as_of and not beyond_addons(v)
                and kubernetes_minor(v) >= kubernetes_minor(oldest)]
    by_phase = {phase: max((v for v in released if pcat.versions[v].phase(as_of) == phase), key=kubernetes_minor,
                           default=None) for phase in ("standard", "extended")}
    best = by_phase["standard"] or by_phase["extended"]
    warnings: list[str] = []
    if wanted is not None:
        try:
            record = pcat.version(wanted)
        except CatalogError as exc:
            raise RequirementsError(f"{source}: kubernetes_version: {exc}", rule="kubernetes-version-supported") from None
        if record.released is not None and record.released > as_of:
            raise RequirementsError(f"{source}: kubernetes_version {wanted} is released in EKS on {record.released}, "
                                    f"after the plan date {as_of}; choose {best or 'an older version'}", rule="kubernetes-version-supported")
        if record.phase(as_of) == "unsupported":
            raise RequirementsError(f"{source}: kubernetes_version {wanted} left EKS extended support on "
                                    f"{record.end_of_extended}; choose {best or 'a newer version'}", rule="kubernetes-version-supported")
        if kubernetes_minor(wanted) < kubernetes_minor(oldest):
            raise RequirementsError(f"{source}: kubernetes_version {wanted} is older than the service workloads need "
                                    f"(>= {oldest}: {', '.join(f.field for f in pcat.workload_features)}); choose "
                                    f">= {oldest}", rule="kubernetes-version-supported")
        too_new = beyond_addons(wanted)
        if too_new:
            raise RequirementsError(f"{source}: kubernetes_version {wanted} is newer than the pinned add-ons support: "
                                    f"{', '.join(too_new)}; set kubernetes_version: \"{best}\" (the newest they all "
                                    "support) in the platform file, or remove it for the default", rule="kubernetes-version-supported")
        version = wanted
        why = f"Kubernetes {wanted} as platform.yaml asks"
    elif by_phase["standard"] is not None:
        version = by_phase["standard"]
        why = (f"Kubernetes {version}: the newest EKS version in standard support on {as_of} that every pinned "
               "add-on supports")
    elif by_phase["extended"] is not None:
        version = by_phase["extended"]
        why = (f"Kubernetes {version}: no catalogued version every pinned add-on supports is in EKS standard support "
               f"on {as_of}; the newest in extended support")
        warnings.append(f"no Kubernetes version in the catalog is both in EKS standard support on {as_of} and "
                        f"supported by every pinned add-on: falling back to {version} (extended support); update "
                        "blueprints/catalog (kubernetes.yaml, add-on versions) or set kubernetes_version in "
                        "platform.yaml")
    else:
        raise RequirementsError(f"{source}: no Kubernetes version in the catalog is released and still supported by "
                                f"EKS on {as_of} and supported by the pinned add-ons; update blueprints/catalog "
                                "(kubernetes.yaml, add-on versions)")
    record = pcat.version(version)
    phase = record.phase(as_of)
    if phase == "standard" and record.end_of_standard is not None:
        days = (record.end_of_standard - as_of).days
        extra = (pcat.extended_usd_per_hour - pcat.standard_usd_per_hour) * load_catalog().hours_per_month
        why += (f" (standard support until {record.end_of_standard}; upgrade policy {defaults.EKS_SUPPORT_TYPE}: "
                "never upgraded automatically, it then enters extended support)")
        if days <= pcat.warn_days_before_end:
            warnings.append(f"Kubernetes {version} leaves EKS standard support on {record.end_of_standard} "
                            f"({days} days after {as_of}): with upgrade policy {defaults.EKS_SUPPORT_TYPE} the "
                            f"cluster enters extended support that day and its control plane costs "
                            f"${pcat.extended_usd_per_hour:.2f}/hour instead of ${pcat.standard_usd_per_hour:.2f} "
                            f"(+${extra:,.0f}/month): upgrade before then (set kubernetes_version in platform.yaml, "
                            "one minor version per deploy)")
    elif phase == "extended":
        warnings.append(f"Kubernetes {version} is in EKS extended support on {as_of} (until "
                        f"{record.end_of_extended}): the control plane costs ${pcat.extended_usd_per_hour:.2f}/hour")
    elif phase == "unknown":
        warnings.append(f"Kubernetes {version}: EKS has not published its support dates; priced as standard support")
    return version, [why], warnings


def _addon_releases(ids: Sequence[str], wanted: dict[str, str], pcat: PlatformCatalog, source: str) -> list[AddonRelease]:
    releases = []
    for addon_id in ids:
        addon = pcat.addon(addon_id)
        version = wanted.get(addon_id, addon.default_version)
        if version not in addon.versions:
            raise RequirementsError(f"{source}: addon_versions.{addon_id}: unknown chart version {version!r}; the "
                                    f"catalog knows {', '.join(addon.versions)}")
        releases.append(AddonRelease(id=addon_id, version=version))
    return releases


def _check_addon_versions(wanted: dict[str, str], pcat: PlatformCatalog, source: str) -> None:
    unknown = sorted(a for a in wanted if a not in pcat.helm)
    if unknown:
        raise RequirementsError(f"{source}: addon_versions: unknown add-on(s) {', '.join(unknown)}; known: "
                                f"{', '.join(sorted(pcat.helm))}")
    for addon_id, version in wanted.items():
        if version not in pcat.helm[addon_id].versions:
            raise RequirementsError(f"{source}: addon_versions.{addon_id}: unknown chart version {version!r}; the "
                                    f"catalog knows {', '.join(pcat.helm[addon_id].versions)}")


def sync_scratch_gib(services: Sequence[ServiceFile], catalog: Catalog) -> float:
    """Scratch disk the largest weights sync Job of these services requests on a system node, GiB: the Jobs run there
    (they need no GPU), one model per Job, each requesting `blueprints.contracts.weights.sync_job_ephemeral_gib` of
    its weights as the stack config records them (`stored_weights_gib`). 0 when no service syncs weights.

    Raises:
        BlueprintError: a service's model is unknown; the message names its file.
    """
    from blueprints.plan.options.search import resolve_models

    sizes = []
    for svc in services:
        try:
            models = resolve_models(svc.requirements, catalog)
        except BlueprintError as exc:
            raise type(exc)(f"{svc.where}: {exc}") from None
        sizes += [sync_job_ephemeral_gib(stored_weights_gib(m.weights_gib),
                                         from_hugging_face=m.spec.weights_uri.startswith("hf://")) for m in models]
    return max(sizes, default=0.0)


def _downloads_from_hugging_face(svc: ServiceFile, catalog: Catalog) -> bool:
    """The service's weights sync Job downloads an `hf://` model (with `defaults.HF_DOWNLOAD_IMAGE`)."""
    from blueprints.plan.options.search import resolve_models

    return any(m.spec.weights_uri.startswith("hf://") for m in resolve_models(svc.requirements, catalog))


def cpu_root_volume_gib(services: Sequence[ServiceFile], catalog: Catalog) -> int:
    """Root volume of the platform's CPU node class, GiB: at least `defaults.CPU_NODE_ROOT_VOLUME_GIB`, grown in
    steps of `NODE_VOLUME_STEP_GIB` until the OS, a serving image and a node full (`CPU_REPLICAS_PER_NODE`, the most
    the planner packs) of replicas of the largest CPU-capable service here (one allowing CPUs, without a generative
    model) fit within the kubelet's eviction
    threshold (`blueprints.contracts.weights.usable_disk_gib`).

    Raises:
        BlueprintError: a service's model is unknown; the message names its file.
    """
    from blueprints.plan.options.search import resolve_models

    need = 0
    for svc in services:
        if Accelerator.CPU not in svc.requirements.hardware.accelerators:
            continue
        try:
            models = resolve_models(svc.requirements, catalog)
        except BlueprintError as exc:
            raise type(exc)(f"{svc.where}: {exc}") from None
        if any(m.task.generative for m in models):  # generative models are served on GPUs only (`selection`)
            continue
        need = max(need, max(defaults.CPU_REPLICAS_PER_NODE) * replica_ephemeral_gib(m.weights_gib for m in models))
    disk = disk_for_gib(need, reserve_gib=defaults.SERVING_NODE_ROOT_RESERVE_GIB) if need else 0
    step = defaults.NODE_VOLUME_STEP_GIB
    return max(defaults.CPU_NODE_ROOT_VOLUME_GIB, -(-disk // step) * step)


def unpullable(name: str, addons: Sequence[AddonRelease], pcat: PlatformCatalog, region: str, *,
               platform_file: str) -> str:
    """Why an EKS platform in an existing VPC without internet egress is refused: every image its add-ons run
    (`blueprints/catalog/addons.yaml` `images`) and every chart the runner fetches that is not in the region's private
    ECR, which is all the VPC endpoints reach; and the fix."""
    images = [i for a in addons for i in pcat.addon(a.id).images if not in_private_ecr(i, region)]
    serving = [i for i in load_image_catalog() if not in_private_ecr(i, region)]
    charts = [f"{pcat.addon(a.id).chart} {a.version} ({pcat.addon(a.id).repository})" for a in addons]
    return (f"{platform_file}: platforms.{name}.existing_vpc.internet_egress is false: its nodes reach only AWS APIs "
            f"through the VPC endpoints (ECR in {region}), so these add-on images would never pull and every Helm "
            f"release would wait out its timeout: {', '.join(images)}; nor the serving images its services run "
            f"(blueprints/catalog/images.yaml): {', '.join(serving)}; nor would the runner fetch the charts "
            f"{', '.join(charts)}. Give the VPC a NAT route and set internet_egress: true, or use a VPC that has one")


def private_endpoints(addons: Sequence[AddonRelease], pcat: PlatformCatalog, *, eks: bool, sagemaker: bool,
                      existing_vpc: bool) -> list[str]:
    """The interface VPC endpoints of a private platform: every AWS API its callers call (`blueprints/catalog/
    endpoints.yaml`: its nodes, EKS add-ons and Helm add-ons, its services' pods, its private SageMaker endpoints), so
    none relies on a NAT route. S3 is an interface endpoint in an existing VPC (its route tables are its owner's) and a
    gateway endpoint (not listed) in a new one."""
    ecat = load_endpoint_catalog()
    callers = [NODES, *(f"eks:{addon}" for addon in pcat.eks), *(f"helm:{a.id}" for a in addons), SERVICE] if eks else []
    if sagemaker:
        callers.append(SAGEMAKER)
    return [s for s in ecat.needed(callers) if s != "s3" or existing_vpc]


def _line(item: str, quantity: float, usd_per_hour: float, catalog: Catalog) -> CostItem:
    return CostItem(item=item, quantity=quantity, usd_per_hour=round(usd_per_hour, 4),
                    monthly_usd=round(quantity * usd_per_hour * catalog.hours_per_month, 2))


def plan_platforms(services: Sequence[ServiceFile], platform_req: PlatformRequirements, *, catalog: Catalog,
                   pcat: PlatformCatalog, as_of: dt.date, platform_file: str = "platform.yaml",
                   complete: bool = False, policy_for: PolicyFor | None = None,
                   planning: Path | None = None) -> list[PlatformConfig]:
    """Every platform that at least one service environment lands on, sorted by name.

    Args:
        services: every requirements file whose environments may land on a platform (a service whose compliance
            its platform's posture does not meet does not land there).
        platform_req: `platform.yaml` (defaults when absent).
        catalog, pcat: instance prices; add-ons and Kubernetes versions.
        as_of: the plan date.
        platform_file: the platform file's path, named in errors.
        complete: `services` are every requirements file of the project, so a `platforms.<name>` entry of
            platform.yaml no service lands on is an error (a typo); False when planning a subset.
        policy_for: a platform's guardrails by its environment and production flag (`blueprints.plan.guardrails`):
            audit logs on where required, no spot where forbidden, system nodes of an allowed family. None plans
            without a policy.
        planning: the requirements file being planned: when its compliance is not met by the posture of a
            platform it lands on, it is refused (`refusal`); other files are left off such a platform.

    Raises:
        RequirementsError: a service conflicts with its platform's settings (region, production, privacy, spot,
            public subnets), names a platform it cannot land on, two files declare the same service, the reserved
            service name is used, or platform.yaml names an unknown add-on, chart version or Kubernetes version, or
            (complete) a platform no service lands on; `planning` lands on a platform whose posture does not meet
            its compliance; the message names both files and the fix.
    """
    parts, stacks = _service_stacks(services, catalog)
    _check_addon_versions(platform_req.addon_versions, pcat, platform_file)
    check_platform_names(services, platform_req, platform_file=platform_file)
    groups: dict[str, list[tuple[ServiceFile, str]]] = {}
    for svc in sorted(parts, key=lambda s: s.requirements.service):
        for env in svc.requirements.environments:
            name = landing_platform(svc.requirements, env)
            if name is not None:
                groups.setdefault(name, []).append((svc, env))
    for name in groups:
        clash = stacks.get(platform_stack_name(name))
        if clash is not None:
            raise RequirementsError(f"{clash.where}: service {clash.requirements.service!r} plans stack "
                                    f"{platform_stack_name(name)}, the name of a shared platform's stack; rename the "
                                    "service or the environment", rule="stack-names-unique")
    if complete:
        check_unused_entries(groups, platform_req, platform_file=platform_file)
    planned = []
    for name, members in sorted(groups.items()):
        override = platform_req.platforms.get(name)
        environment, region = _where_of(name, override, members[0])
        check_members(name, region, members, override, platform_file=platform_file)
        production = any(svc.requirements.is_production(env) for svc, env in members)
        policy = policy_for(environment, production) if policy_for is not None else None
        posture = platform_posture(name, override, policy=policy, services=[svc.requirements for svc, _ in members],
                                   platform_file=platform_file)
        landing = []
        for svc, env in members:
            unmet = unmet_compliance(posture, svc.requirements)
            if not unmet:
                landing.append((svc, env))
            elif planning is not None and svc.path is not None and svc.path.resolve() == planning.resolve():
                raise RequirementsError(refusal(svc, env, name, unmet, platform_file=platform_file),
                                        rule="platform-posture-meets-service")
        if landing:
            planned.append(_plan_one(name, landing, platform_req, catalog=catalog, pcat=pcat, as_of=as_of,
                                     platform_file=platform_file, policy=policy, posture=posture))
    return planned


def _service_stacks(services: Sequence[ServiceFile],
                    catalog: Catalog) -> tuple[list[ServiceFile], dict[str, ServiceFile]]:
    """Every stack-worth of requirements the files plan (a compound service's parts, `blueprints.plan.compound.parts`, each on
    its own), and every service stack by name with the requirements it is planned from.

    Raises:
        RequirementsError: a service (or a compound service's part) is named `platform` or like another file's, or
            two files plan the same stack name (`a` + environment `b-prod` and `a-b` + `prod`).
    """
    from blueprints.plan.compound.parts import service_parts

    names: dict[str, tuple[ServiceFile, str]] = {}
    planned: list[ServiceFile] = []
    stacks: dict[str, ServiceFile] = {}
    for svc in services:
        declared = svc.requirements.service
        try:
            parts = service_parts(svc.requirements, catalog)
        except BlueprintError as exc:
            raise type(exc)(f"{svc.where}: {exc}") from None
        for part in parts:
            name = part.requirements.service
            what = f"{svc.where}: the {part.part.value} part of compound service {declared!r}" if part.part else ""
            if name in names:
                other, other_what = names[name]
                parts_of = "; ".join(w for w in (what, other_what) if w)
                raise RequirementsError(f"{svc.where} and {other.where} both declare service {name!r}"
                                        + (f" ({parts_of})" if parts_of else "") + "; service names are unique "
                                        "(they name stacks, namespaces and node pools): rename one", rule="stack-names-unique")
            names[name] = (svc, what)
            planned.append(ServiceFile(svc.path, part.requirements))
            for env in part.requirements.environments:
                stack = f"{name}-{env}"
                if stack in stacks:
                    raise RequirementsError(f"{svc.where} (service {name!r}, environment {env!r}) and "
                                            f"{stacks[stack].where} both plan stack {stack!r}; rename a service or "
                                            "an environment", rule="stack-names-unique")
                stacks[stack] = planned[-1]
    return planned, stacks


def _plan_one(name: str, members: list[tuple[ServiceFile, str]], preq: PlatformRequirements, *, catalog: Catalog,
              pcat: PlatformCatalog, as_of: dt.date, platform_file: str, policy: Guardrails | None,
              posture: Posture) -> PlatformConfig:
    override = preq.platforms.get(name)
    environment, region = _where_of(name, override, members[0])
    stack = platform_stack_name(name)
    reqs = [(svc, env, svc.requirements) for svc, env in members]
    production = any(r.is_production(env) for _, env, r in reqs)
    eks = any(self_hosted_on_eks(r) for _, _, r in reqs)
    private = posture.private_endpoint
    spot_forbidden = policy is not None and policy.spot_forbidden
    spot_envs = [f"{r.service}.{env} ({svc.where})" for svc, env, r in reqs
                 if r.environments[env].spot and not spot_forbidden]
    # What the stack config records names services only: file paths depend on where `plan` ran from.
    spot_names = [f"{r.service}.{env}" for _, env, r in reqs if r.environments[env].spot and not spot_forbidden]
    if spot_envs and preq.spot is SpotPolicy.FORBIDDEN:
        raise RequirementsError(f"{spot_envs[0]}: asks for spot capacity but {platform_file} sets spot: forbidden; "
                                "set environments.<env>.spot: false or allow spot in the platform file",
                                rule="platform-settings")
    gpu = any(Accelerator.NVIDIA_GPU in r.hardware.accelerators for _, _, r in reqs if self_hosted_on_eks(r))
    zero = any(r.environments[env].min_replicas == 0 for _, env, r in reqs if self_hosted_on_eks(r))
    existing = override.existing_vpc if override else None
    runner = override.runner_label if override else None
    rationale: list[str] = []
    warnings: list[str] = []
    services = sorted(f"{r.service}-{env}" for _, env, r in reqs)
    if eks:
        addon_ids = [*BASE_ADDONS, *(GPU_ADDONS if gpu else ()), *(SCALE_TO_ZERO_ADDONS if zero else ())]
        addons = _addon_releases(addon_ids, preq.addon_versions, pcat, platform_file)
        version, why, warned = choose_kubernetes_version(pcat, addon_ids, as_of, wanted=preq.kubernetes_version,
                                                         source=platform_file)
        for svc, env, r in reqs:
            asked = r.operations.kubernetes_version
            if asked is not None and asked != version and self_hosted_on_eks(r):
                raise RequirementsError(f"{svc.where}: operations.kubernetes_version {asked} differs from {stack}'s "
                                        f"{version} ({platform_file}); a shared cluster has one version: remove the "
                                        "service's setting or set kubernetes_version in the platform file",
                                        rule="kubernetes-version-matches-platform")
        rationale += why
        warnings += warned
        if existing is not None and not existing.internet_egress:
            raise RequirementsError(unpullable(name, addons, pcat, region, platform_file=platform_file),
                                    rule="images-pull-in-vpc")
        if private and (existing is None or runner is None):
            raise RequirementsError(
                f"{platform_file}: a private platform ({stack}) has no public Kubernetes API, so neither a "
                "GitHub-hosted runner nor a runner in a VPC the same stack creates can deploy it; in "
                f"{platform_file} set platforms.{name}.existing_vpc (a VPC where a self-hosted runner lives) and "
                f"platforms.{name}.runner_label (that runner's label)", rule="private-platform-runner")
        rationale.append(f"add-ons: {', '.join(f'{a.id} {a.version}' for a in addons)}"
                         + (" (GPU services land here: device plugin and DCGM exporter)" if gpu else "")
                         + (" (a service scales to zero: KEDA HTTP add-on)" if zero else ""))
        cpu_root = cpu_root_volume_gib([svc for svc, _, r in reqs if self_hosted_on_eks(r)], catalog)
        if cpu_root > defaults.CPU_NODE_ROOT_VOLUME_GIB:
            rationale.append(f"CPU nodes get a {cpu_root} GiB root volume: the OS, an image and "
                             f"{max(defaults.CPU_REPLICAS_PER_NODE)} replicas of the largest CPU-capable service's "
                             "models fit within the kubelet's 10 % eviction threshold")
        node_classes = [NodeClass(name="cpu", ami_alias=defaults.KARPENTER_AMI_ALIAS,
                                  root_volume_gib=cpu_root, instance_store_raid0=False, fast_image_pull=False)]
        if gpu:
            node_classes.insert(0, NodeClass(name="gpu", ami_alias=defaults.KARPENTER_AMI_ALIAS,
                                             root_volume_gib=defaults.GPU_NODE_ROOT_VOLUME_GIB,
                                             instance_store_raid0=True, fast_image_pull=True))
            pull = load_startup_catalog().image_pull
            rationale.append(f"GPU nodes pull images with SOCI parallel pull/unpack (the nodeadm FastImagePull "
                             f"feature gate): {pull.soci_parallel_mb_per_s:g} MB/s measured against containerd's "
                             f"{pull.containerd_mb_per_s:g} MB/s (blueprints/catalog/startup.yaml)")
    else:
        addons, node_classes = [], []
        version = choose_kubernetes_version(pcat, [], as_of, wanted=None, source=platform_file)[0]
        rationale.append("network only: every service here is a private SageMaker endpoint in this VPC")
    kind = PlatformKind.EKS if eks else PlatformKind.NETWORK
    audit, kms = posture.audit_logging and eks, posture.secrets_kms and eks
    retention = override.audit_log_retention_days if override and audit else None
    public_cidrs = [] if private or not eks else list(override.public_access_cidrs if override and
                                                      override.public_access_cidrs else [OPEN_INTERNET])
    if eks:
        rationale.append(posture.why)
        rationale.append(f"deployed from self-hosted runner {runner!r} in {existing.vpc_id if existing else 'its VPC'}"
                         " (no public API)" if private else
                         f"the public API endpoint admits {', '.join(public_cidrs)}"
                         + (" (GitHub-hosted runners deploy it)" if public_cidrs == [OPEN_INTERNET] else ""))
        if audit:
            rationale.append(f"audit logs kept {retention} days" if retention else
                             "audit logs kept without expiry (platforms.<name>.audit_log_retention_days sets a period)")
    system_type = catalog.instance(preq.system_nodes.instance_type)  # a catalogued CPU type (PlatformRequirements)
    if eks and policy is not None and not policy.allows(system_type.instance_type):
        raise RequirementsError(f"{platform_file}: system_nodes.instance_type {system_type.instance_type} is not "
                                f"allowed by {policy.source} (instance-types-allowed "
                                f"{list(policy.allowed_instance_families or [])}) for {stack}; choose an allowed type "
                                "or allow its family")
    system_arch = CpuArch(system_type.cpu_arch)
    scratch = sync_scratch_gib([svc for svc, _, r in reqs if self_hosted_on_eks(r)], catalog)
    hf = next((svc for svc, _, r in reqs if self_hosted_on_eks(r) and _downloads_from_hugging_face(svc, catalog)), None)
    if eks and hf is not None and system_arch.value not in defaults.HF_DOWNLOAD_IMAGE_ARCHES:
        raise RequirementsError(
            f"{platform_file}: system_nodes.instance_type {system_type.instance_type} is {system_arch.value}, but the "
            f"weights sync Job of {hf.requirements.service} ({hf.where}: an hf:// model) runs on the system nodes "
            f"with {defaults.HF_DOWNLOAD_IMAGE}, published for {', '.join(defaults.HF_DOWNLOAD_IMAGE_ARCHES)} only; "
            "choose an x86_64 type such as m7i.xlarge (or copy the weights to s3:// and use that source)")
    az = defaults.NETWORK_AZ_COUNT if existing is None else len(existing.private_subnet_ids)
    nat = 0 if existing else (az if production else 1)
    sagemaker = any(not self_hosted_on_eks(r) for _, _, r in reqs)  # a private SageMaker endpoint in this VPC
    endpoints = private_endpoints(addons, pcat, eks=eks, sagemaker=sagemaker,
                                  existing_vpc=existing is not None) if private else []
    lines = []
    if eks:
        lines.append(_line(f"EKS control plane (Kubernetes {version})", 1,
                           pcat.control_plane_usd_per_hour(version, as_of), catalog))
        lines.append(_line(f"system nodes ({system_type.instance_type})", preq.system_nodes.count,
                           system_type.usd_per_hour, catalog))
    if nat:
        lines.append(_line("NAT gateways", nat, catalog.nat_gateway_usd_per_hour, catalog))
    if endpoints:
        lines.append(_line(f"interface VPC endpoints ({len(endpoints)} services x {az} zones)", len(endpoints) * az,
                           catalog.interface_endpoint_usd_per_hour_per_az, catalog))
    if kms and eks:
        lines.append(_line("KMS key (Kubernetes secrets)", 1, catalog.kms_key_usd_per_month / catalog.hours_per_month,
                           catalog))
    if spot_envs and preq.spot is SpotPolicy.ALLOWED:
        rationale.append(f"spot allowed for {', '.join(spot_names)}: Karpenter may create the EC2 Spot service-linked "
                         "role on first use")
    if region != catalog.price_region:
        rationale.append(f"costs use the catalog's {catalog.price_region} list prices; {region} prices differ")
    rationale.append(f"serves {', '.join(services)}")
    alerting = PlatformAlerting()
    if eks:
        spec = override.alerting if override and override.alerting else preq.alerting
        alerting = PlatformAlerting(receiver=spec.receiver, slack_channel=spec.slack_channel)
        if spec.receiver is None and production:
            raise RequirementsError(f"{platform_file}: production platform {stack} has no alerting.receiver: every "
                                    "alert of its services would fire into nothing (the chart's default receiver is "
                                    f"'null'); set alerting.receiver (or platforms.{name}.alerting.receiver) and the "
                                    f"receiver's URL with `pulumi config set --secret {ALERT_RECEIVER_SECRET_KEY} ...`",
                                    rule="platform-settings")
        if spec.receiver is None:
            warnings.append("no Alertmanager receiver: every alert of the services here fires into nothing (the "
                            "chart's default receiver is 'null'); set alerting.receiver in platform.yaml and the "
                            f"receiver's URL with `pulumi config set --secret {ALERT_RECEIVER_SECRET_KEY} ...`")
        else:
            rationale.append(f"alerts page through Alertmanager's {spec.receiver.value} receiver"
                             + (f" ({spec.slack_channel})" if spec.slack_channel else "")
                             + f"; its URL is the secret config key {ALERT_RECEIVER_SECRET_KEY}")
    vpc_cidr = None if existing else (override.vpc_cidr if override and override.vpc_cidr else defaults.VPC_CIDR)
    # The cluster's Service CIDR is set explicitly (create-only): platform.yaml's, else for a new VPC the one EKS
    # would choose for it, which a cluster created without one already has (no replacement). An existing VPC's CIDR
    # blocks are unknown here: EKS chooses, and the platform exports its choice.
    service_cidr = (override.service_cidr if override and override.service_cidr else
                    None if existing else eks_default_service_cidr([vpc_cidr or defaults.VPC_CIDR]))
    if eks:
        where = service_cidr or "the Service CIDR EKS chooses for the VPC"
        rationale.append(f"Kubernetes Services get ClusterIPs from {where} (the API server's is its first address, "
                         "which the NetworkPolicies of services calling the API admit)")
    tags = {"service": PLATFORM_SERVICE, "environment": environment, "owner": preq.owner,
            "cost-center": preq.cost_center, "managed-by": "servingblueprints"}
    config = PlatformConfig(
        name=name, environment=environment, production=production, region=region, kind=kind,
        kubernetes_version=version, audit_logging=audit, audit_log_retention_days=retention, secrets_kms=kms,
        network=PlatformNetwork(existing_vpc=existing, vpc_cidr=vpc_cidr,
                                service_cidr=service_cidr if eks else None,
                                az_count=az, nat_per_az=production, private_endpoint=private and eks,
                                public_access_cidrs=public_cidrs, interface_endpoints=endpoints),
        system_nodes=SystemNodes(instance_type=system_type.instance_type, cpu_arch=system_arch,
                                 count=preq.system_nodes.count,
                                 disk_gib=disk_for_gib(scratch, reserve_gib=defaults.SYSTEM_NODE_RESERVE_GIB)),
        addons=addons, node_classes=node_classes,
        spot_allowed=bool(spot_envs) and preq.spot is SpotPolicy.ALLOWED and eks,
        access=preq.access if eks else AccessSpec(), runner_label=runner if private and eks else None,
        alerting=alerting,
        services=services, tags=tags, cost_lines=lines,
        monthly_cost_usd=round(sum(line.monthly_usd for line in lines), 2), rationale=rationale, warnings=warnings)
    note = quota_note(config)
    return config.model_copy(update={"rationale": [*rationale, note]}) if note else config
