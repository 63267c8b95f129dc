"""Plan the shared platforms: which services land where, and each platform's config as a pure function of
`platform.yaml` and every requirements file that lands on it.

The strictest compliance of the services on a platform wins (private API endpoint, audit logs, customer-managed KMS
for Kubernetes secrets), so planning any one service writes the same platform bytes and never weakens what another
service needs. The plan date is an explicit input: it picks the default Kubernetes version (the newest in EKS
standard support that every pinned add-on supports), the control plane's price and the support-window warnings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from blueprints.core import defaults
from blueprints.catalog.endpoints import NODES, SAGEMAKER, SERVICE, load_endpoint_catalog
from blueprints.catalog import Catalog
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
from blueprints.requirements.hosting import Accelerator, CpuArch
from blueprints.contracts.consistency import stored_weights_gib
from blueprints.contracts.weights import disk_for_gib, replica_ephemeral_gib, sync_job_ephemeral_gib

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
        why += f" (standard support until {record.end_of_standard})"
        days = (record.end_of_standard - as_of).days
        if days <= pcat.warn_days_before_end:
            warnings.append(f"Kubernetes {version} leaves EKS standard support on {record.end_of_standard} "
                            f"({days} days after {as_of}); the control plane then costs "
                            f"${pcat.extended_usd_per_hour:.2f}/hour instead of ${pcat.standard_usd_per_hour:.2f}: "
                            "plan an upgrade")
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
                   complete: bool = False, policy_for: PolicyFor | None = None) -> list[PlatformConfig]:
    """Every platform that at least one service environment lands on, sorted by name.

    Args:
        services: every requirements file whose environments may land on a platform (all of them: the strictest
            compliance of all wins).
        platform_req: `platform.yaml` (defaults when absent).
        catalog, pcat: instance prices; add-ons and Kubernetes versions.
        as_of: the plan date.
        platform_file: the platform file's path, named in errors.
        complete: `services` are every requirements file of the project, so a `platforms.<name>` entry of
            platform.yaml no service lands on is an error (a typo); False when planning a subset.
        policy_for: a platform's guardrails by its environment and production flag (`blueprints.plan.guardrails`):
            audit logs on where required, no spot where forbidden, system nodes of an allowed family. None plans
            without a policy.

    Raises:
        RequirementsError: a service conflicts with its platform's settings (region, production, privacy, spot,
            public subnets), names a platform it cannot land on, two files declare the same service, the reserved
            service name is used, or platform.yaml names an unknown add-on, chart version or Kubernetes version, or
            (complete) a platform no service lands on; the message names both files and the fix.
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
    return [_plan_one(name, members, platform_req, catalog=catalog, pcat=pcat, as_of=as_of,
                      platform_file=platform_file, policy_for=policy_for) for name, members in sorted(groups.items())]


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
              pcat: PlatformCatalog, as_of: dt.date, platform_file: str,
              policy_for: PolicyFor | None = None) -> PlatformConfig:
    override = preq.platforms.get(name)
    environment, region = _where_of(name, override, members[0])
    stack = platform_stack_name(name)
    where = f"{platform_file} (platform {stack})"
    check_members(name, region, members, override, platform_file=platform_file)
    reqs = [(svc, env, svc.requirements) for svc, env in members]
    production = any(r.is_production(env) for _, env, r in reqs)
    policy = policy_for(environment, production) if policy_for is not None else None
    eks = any(self_hosted_on_eks(r) for _, _, r in reqs)
    private_services = [f"{r.service} ({svc.where})" for svc, _, r in reqs if r.compliance.private_only]
    if override and override.private_endpoint is False and private_services:
        raise RequirementsError(f"{private_services[0]}: compliance.private_only needs a private platform, but "
                                f"{where} sets private_endpoint: false; remove that setting or land the service on "
                                "another platform (environments.<env>.platform)", rule="platform-settings")
    private = bool(override.private_endpoint) if override and override.private_endpoint is not None \
        else bool(private_services)
    spot_forbidden = policy is not None and policy.spot_forbidden
    spot_envs = [f"{r.service}.{env} ({svc.where})" for svc, env, r in reqs
                 if r.environments[env].spot and not spot_forbidden]
    # What the stack config records names services only: file paths depend on where `plan` ran from.
    private_names = [r.service for _, _, r in reqs if r.compliance.private_only]
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
        if private and (existing is None or runner is None):
            raise RequirementsError(
                f"{private_services[0] if private_services else where}: a private platform ({stack}) has no public "
                "Kubernetes API, so neither a GitHub-hosted runner nor a runner in a VPC the same stack creates can "
                f"deploy it; in {platform_file} set platforms.{name}.existing_vpc (a VPC where a self-hosted runner "
                f"lives) and platforms.{name}.runner_label (that runner's label)", rule="private-platform-runner")
        rationale.append(f"add-ons: {', '.join(f'{a.id} {a.version}' for a in addons)}"
                         + (" (GPU services land here: device plugin and DCGM exporter)" if gpu else "")
                         + (" (a service scales to zero: KEDA HTTP add-on)" if zero else ""))
        cpu_root = cpu_root_volume_gib([svc for svc, _, r in reqs if self_hosted_on_eks(r)], catalog)
        if cpu_root > defaults.CPU_NODE_ROOT_VOLUME_GIB:
            rationale.append(f"CPU nodes get a {cpu_root} GiB root volume: the OS, an image and "
                             f"{max(defaults.CPU_REPLICAS_PER_NODE)} replicas of the largest CPU-capable service's "
                             "models fit within the kubelet's 10 % eviction threshold")
        node_classes = [NodeClass(name="cpu", ami_alias=defaults.KARPENTER_AMI_ALIAS,
                                  root_volume_gib=cpu_root, instance_store_raid0=False)]
        if gpu:
            node_classes.insert(0, NodeClass(name="gpu", ami_alias=defaults.KARPENTER_AMI_ALIAS,
                                             root_volume_gib=defaults.GPU_NODE_ROOT_VOLUME_GIB,
                                             instance_store_raid0=True))
    else:
        addons, node_classes = [], []
        version = choose_kubernetes_version(pcat, [], as_of, wanted=None, source=platform_file)[0]
        rationale.append("network only: every service here is a private SageMaker endpoint in this VPC")
    kind = PlatformKind.EKS if eks else PlatformKind.NETWORK
    audit_services = any(r.compliance.audit_logging for _, _, r in reqs if self_hosted_on_eks(r))
    audit = audit_services or (policy is not None and policy.audit_logs_required)
    kms = any(r.compliance.customer_managed_kms for _, _, r in reqs if self_hosted_on_eks(r))
    if private:
        rationale.append("private: " + (", ".join(private_names) or "platform.yaml") + " require(s) private_only; "
                         f"deployed from self-hosted runner {runner!r} in {existing.vpc_id if existing else 'its VPC'}"
                         if eks else "private: " + ", ".join(private_names))
    if eks:
        rationale.append(f"audit logs {'on' if audit else 'off'}, Kubernetes secrets "
                         f"{'encrypted with a customer-managed KMS key' if kms else 'encrypted by EKS'}: the strictest "
                         "compliance of the services here"
                         + (f" and of {policy.source} (cluster-audit-logs requires audit logs)"
                            if policy is not None and audit and not audit_services else ""))
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
        if spec.receiver is None:
            warnings.append("no Alertmanager receiver: every alert of the services here fires into nothing (the "
                            "chart's default receiver is 'null'); set alerting.receiver in platform.yaml and the "
                            f"receiver's URL with `pulumi config set --secret {ALERT_RECEIVER_SECRET_KEY} ...`")
        else:
            rationale.append(f"alerts page through Alertmanager's {spec.receiver.value} receiver"
                             + (f" ({spec.slack_channel})" if spec.slack_channel else "")
                             + f"; its URL is the secret config key {ALERT_RECEIVER_SECRET_KEY}")
    tags = {"service": PLATFORM_SERVICE, "environment": environment, "owner": preq.owner,
            "cost-center": preq.cost_center, "managed-by": "servingblueprints"}
    config = PlatformConfig(
        name=name, environment=environment, production=production, region=region, kind=kind,
        kubernetes_version=version, audit_logging=audit, secrets_kms=kms,
        network=PlatformNetwork(existing_vpc=existing, az_count=az, nat_per_az=production,
                                private_endpoint=private and eks, interface_endpoints=endpoints),
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
