"""Where services land: which platform each environment of a service uses, and the checks that every landing is
possible before a platform is planned (names, regions, production, public subnets, platform.yaml entries).

Each error names the requirements file (or both files when platform.yaml is part of the conflict), the field and the
fix; `blueprints.plan.platforms` plans the platforms once these hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from blueprints.core.errors import RequirementsError
from blueprints.requirements.platform_file import (
    DERIVED_NAME, PlatformOverride, PlatformRequirements, platform_name_problem, platform_stack_name,
)
from blueprints.requirements.service import Requirements
from blueprints.requirements.hosting import OperationsPreference, Platform
from blueprints.requirements.exposure import ExposureScope


@dataclass(frozen=True)
class ServiceFile:
    """A service's requirements and the file they come from (named in errors)."""

    path: Path | None
    requirements: Requirements

    @property
    def where(self) -> str:
        return str(self.path) if self.path else f"service {self.requirements.service!r}"


def self_hosted_on_eks(req: Requirements) -> bool:
    """The service may run on a platform's EKS cluster (not only on SageMaker, not on an existing cluster)."""
    return req.operations.platform is Platform.EKS and req.operations.preference is not OperationsPreference.MANAGED


def landing_platform(req: Requirements, env: str) -> str | None:
    """The platform an environment of a service lands on (`<env>-<region>` unless the environment names one), or
    None when it needs none: an existing cluster, or a SageMaker endpoint outside any VPC of ours.

    Self-hosted EKS services land on the platform's cluster; private SageMaker endpoints use its VPC. With
    `operations.preference: any` a service may still be planned onto SageMaker: it is counted as landing (its
    platform then exists for it, see the platform's rationale).
    """
    spec = req.environments[env]
    managed_private = req.operations.preference is not OperationsPreference.SELF_HOSTED and req.compliance.private_only
    if not (self_hosted_on_eks(req) or managed_private):
        return None
    return spec.platform or f"{env}-{spec.region}"


def _lands_nowhere_because(req: Requirements) -> str:
    if req.operations.platform in (Platform.EXISTING_CLUSTER, Platform.EDGE_CLUSTER):
        return (f"operations.platform is {req.operations.platform.value} (the service runs on that cluster, not on a "
                "platform)")
    return ("operations.preference is managed and compliance.private_only is false (a SageMaker endpoint outside any "
            "VPC of ours)")


def check_platform_names(services: Sequence[ServiceFile], preq: PlatformRequirements, *, platform_file: str) -> None:
    """Every `environments.<env>.platform` names a platform: not a stack name (`platform-...`), a custom name only when
    platform.yaml declares it under `platforms:`, and only on services that land on a platform at all.

    Raises:
        RequirementsError: naming the requirements file, the field and the fix.
    """
    for svc in services:
        req = svc.requirements
        for env, spec in req.environments.items():
            if spec.platform is None:
                continue
            field = f"{svc.where}: environments.{env}.platform"
            problem = platform_name_problem(spec.platform)
            if problem:
                raise RequirementsError(f"{field}: {problem}", rule="platform-name-declared")
            if landing_platform(req, env) is None:
                raise RequirementsError(f"{field} is set but the service lands on no platform: "
                                        f"{_lands_nowhere_because(req)}; remove environments.{env}.platform", rule="platform-name-declared")
            if DERIVED_NAME.fullmatch(spec.platform) is None and spec.platform not in preq.platforms:
                raise RequirementsError(
                    f"{field}: {spec.platform!r} is a custom platform name, but {platform_file} declares no "
                    f"platforms.{spec.platform}; declare it there (with environment and region), or use "
                    f"<env>-<region> such as {env}-{spec.region}", rule="platform-name-declared")


def check_unused_entries(groups: Mapping[str, object], preq: PlatformRequirements, *, platform_file: str) -> None:
    """Every `platforms.<name>` entry of platform.yaml is a platform some service lands on (a typo in a name would
    otherwise leave a private platform's VPC and runner unused, silently).

    Raises:
        RequirementsError: naming platform.yaml, the entry and the platforms services land on.
    """
    unused = sorted(set(preq.platforms) - set(groups))
    if unused:
        raise RequirementsError(
            f"{platform_file}: platforms.{unused[0]}: no service lands on platform {unused[0]} (services land on "
            f"{', '.join(sorted(groups)) or 'none'}); remove the entry, fix its name, or land a service on it with "
            "environments.<env>.platform")


def check_members(name: str, region: str, members: Sequence[tuple[ServiceFile, str]],
                  override: PlatformOverride | None, *, platform_file: str) -> None:
    """The service environments landing on platform `name` (in `region`) can share it: same region, all production
    or all not, and public services only where the platform has public subnets.

    Raises:
        RequirementsError: naming both files (the service's and platform.yaml when its settings are part of the
            conflict), the field and the fix.
    """
    stack = platform_stack_name(name)
    where = f"{platform_file} (platform {stack})"
    for svc, env in members:
        env_region = svc.requirements.environments[env].region
        if env_region != region:
            raise RequirementsError(f"{svc.where}: environments.{env}.region is {env_region} but it lands on {stack} "
                                    f"in {region} ({where}); land it on a platform in {env_region} or move it",
                                    rule="platform-one-region")
    kinds = {svc.requirements.is_production(env): (svc, env) for svc, env in members}
    if len(kinds) > 1:
        (prod_svc, prod_env), (other_svc, other_env) = kinds[True], kinds[False]
        raise RequirementsError(
            f"{prod_svc.where}: environments.{prod_env} (production) and {other_svc.where}: environments.{other_env} "
            f"(not production) both land on {stack}; production and non-production services never share a platform "
            "(its spot policy, NAT, Kubernetes upgrades and blast radius are one): give one of them another platform "
            "(environments.<env>.platform) or make both production", rule="platform-production-apart")
    vpc = override.existing_vpc if override else None
    if vpc is not None and not vpc.public_subnet_ids:
        for svc, env in members:
            req = svc.requirements
            if req.exposure.scope is ExposureScope.PUBLIC and self_hosted_on_eks(req):
                raise RequirementsError(
                    f"{svc.where}: exposure.scope public needs an internet-facing load balancer in public subnets, "
                    f"but {platform_file} platforms.{name}.existing_vpc ({vpc.vpc_id}) lists no public_subnet_ids; "
                    f"add the VPC's public subnets there, or use exposure.scope: internal", rule="platform-settings")
