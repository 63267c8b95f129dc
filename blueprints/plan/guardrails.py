"""An environment's guardrails from its policy config, planned within so a plan never fails the policy pack it will be
checked against. Pure: the CLI reads `policies/config/<env>.json` (`blueprints.review.policy_pack.guardrails`) and passes these in.

Each mandatory guardrail a plan could break is one of three kinds:
- a constraint of the candidate search (`SearchLimits`): allowed instance families and types, the GPU quota counted
  with the rollout surge over the platform's zones (the NodePool limit the plan sets), and the environment's own
  `max_replicas`; the search returns the cheapest option within all of them (`blueprints.plan.options.llm`,
  `blueprints.plan.options.nongen`);
- a choice the plan makes to satisfy it: on-demand capacity where spot is forbidden (`Guardrails.apply`), audit logs
  on a platform whose environment requires them (`blueprints.plan.platforms`);
- a fact of the requirements no choice can change (the region, private endpoints, tags the plan does not set): a
  refusal naming the policy and the fix (`Guardrails.problems`).
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.core import bounds, defaults
from blueprints.contracts.placement import Placement, serving_placement
from blueprints.catalog import InstanceType
from blueprints.requirements.service import Requirements

#: The tag keys every plan sets on every taggable AWS resource (`blueprints.plan.builders.context._tags`).
PLANNED_TAG_KEYS = ("service", "environment", "owner", "cost-center", "managed-by")


@dataclass(frozen=True)
class Guardrails:
    """Limits of one environment (`None` / empty / False where the policy is disabled or sets none).

    Attributes:
        source: the policy-config file they come from (named in messages).
        allowed_instance_families: families the environment allows (`instance-types-allowed`).
        allowed_instance_types: exact types allowed besides those families.
        max_gpus: GPUs the stacks of one account may reach together in one Region at full scale (`gpu-quota`: node
            pool limit x GPUs per node); quotas are per account and Region, so a stack's own GPUs count with
            `gpus_in_use`.
        gpus_in_use: GPUs the account's other stacks in this environment's Region reach at full scale (their committed
            stack configs; `blueprints.workspace.account_gpus_in_use`), 0 when unknown.
        gpus_in_use_by: those stacks, named in messages.
        allowed_regions: regions AWS resources may live in (`region-allowed`).
        audit_logs_required: EKS clusters must send audit logs (`cluster-audit-logs`).
        spot_forbidden: node pools must be on-demand (`no-spot-capacity`).
        private_only: nothing reachable from the internet (`private-endpoints` privateOnly).
        required_tags: tag keys every taggable AWS resource carries (`required-tags`).
        production: whether the environment is production (`compliance-production` production); None when the
            policy config does not say.
        allowed_engines: the LLM serving engines the environment allows (`engines-allowed`); None: every one.
    """

    source: str
    allowed_instance_families: tuple[str, ...] | None = None
    max_gpus: int | None = None
    gpus_in_use: int = 0
    gpus_in_use_by: tuple[str, ...] = ()
    allowed_instance_types: tuple[str, ...] = ()
    allowed_regions: tuple[str, ...] | None = None
    audit_logs_required: bool = False
    spot_forbidden: bool = False
    private_only: bool = False
    required_tags: tuple[str, ...] = ()
    production: bool | None = None
    allowed_engines: tuple[str, ...] | None = None

    def allows(self, instance_type: str) -> bool:
        """Whether `instance-types-allowed` admits an EC2 or SageMaker (`ml.`) instance type."""
        if self.allowed_instance_families is None:
            return True
        family = instance_type.removeprefix("ml.").split(".")[0]
        return family in self.allowed_instance_families or instance_type in self.allowed_instance_types

    def problems(self, req: Requirements, env: str) -> list[str]:
        """What in the requirements breaks this environment's policy whatever the plan chooses, each with the fix;
        empty when nothing does."""
        spec, found = req.environments[env], []
        if self.production is not None and req.is_production(env) != self.production:
            found.append(f"environments.{env} is {'production' if req.is_production(env) else 'not production'} but "
                         f"{self.source} declares production: {str(self.production).lower()} (compliance-production); "
                         f"set environments.{env}.production: {str(self.production).lower()}, or plan the environment "
                         "under a policy config that matches it")
        if self.allowed_regions is not None and spec.region not in self.allowed_regions:
            found.append(f"environments.{env}.region {spec.region} is outside the regions {self.source} allows "
                         f"(region-allowed: {list(self.allowed_regions)}); choose one of them, or add {spec.region} "
                         "to allowedRegions")
        if self.private_only and not req.compliance.private_only:
            found.append(f"{self.source} requires private endpoints (private-endpoints privateOnly: true); set "
                         "compliance.private_only: true")
        missing = [t for t in self.required_tags if t not in PLANNED_TAG_KEYS]
        if missing:
            found.append(f"{self.source} (required-tags) requires tag(s) {missing} that plans do not set (they set "
                         f"{list(PLANNED_TAG_KEYS)}); remove them from requiredTags or add them with the provider's "
                         "defaultTags")
        if self.allowed_engines is not None and not set(self.allowed_engines) & set(req.operations.engines):
            found.append(f"operations.engines {req.operations.engines} and the environment's policy ({self.source}, "
                         f"engines-allowed) {list(self.allowed_engines)} have no engine in common; allow one in "
                         "either")
        wanted = req.hardware.allowed_instance_families
        if self.allowed_instance_families is not None and wanted:
            allowed = set(self.allowed_instance_families) | {t.removeprefix("ml.").split(".")[0]
                                                              for t in self.allowed_instance_types}
            if not allowed & set(wanted):
                found.append(f"hardware.allowed_instance_families {wanted} and the environment's policy "
                             f"({self.source}, instance-types-allowed) {sorted(allowed)} have no family in common; "
                             "allow one in either")
        return [f"environments.{env}: {p}" if not p.startswith("environments.") else p for p in found]

    def apply(self, req: Requirements, env: str) -> tuple[Requirements, list[str]]:
        """`req` with the choices this environment's policy makes for it, and the rationale for each: the engines
        it allows, on-demand capacity where spot is forbidden."""
        spec, notes = req.environments[env], []
        engines = [e for e in req.operations.engines if self.allowed_engines is None or e in self.allowed_engines]
        if engines != list(req.operations.engines) and engines:
            notes.append(f"engines {engines} of operations.engines {req.operations.engines}: {self.source} allows "
                         f"{list(self.allowed_engines or [])} (engines-allowed)")
            req = req.model_copy(update={"operations": req.operations.model_copy(update={"engines": engines})})
        if self.spot_forbidden and spec.spot:
            environments = {**req.environments, env: spec.model_copy(update={"spot": False})}
            notes.append(f"on-demand capacity although environments.{env}.spot is true: {self.source} forbids spot "
                         "(no-spot-capacity)")
            req = req.model_copy(update={"environments": environments})
        return req, notes


@dataclass(frozen=True)
class Breach:
    """A constraint an option breaks: its policy or field, what the option needs against the limit, the amount
    needed, the fix (a template with `{env}` and `{needed}`) and the field the fix sets (a template with `{env}`,
    as `blueprints.core.errors.Fix.field` names it; None when no value of one field fixes it)."""

    constraint: str
    why: str
    needed: int
    fix: str
    field: str | None = None

    def fix_for(self, env: str, needed: int | None = None) -> str:
        return self.fix.format(env=env, needed=self.needed if needed is None else needed)

    def field_for(self, env: str) -> str | None:
        return None if self.field is None else self.field.format(env=env)


@dataclass(frozen=True)
class SearchLimits:
    """What one environment's options must stay within besides the SLO: constraints of the candidate search.

    Attributes:
        guardrails: the environment's policy limits (instance types, GPU quota); None without a policy config.
        zones: the zones the platform's node pools span (replicas spread evenly over them, whole nodes per zone).
        strict_zone_spread: the environment's replicas must spread over zones (`Blueprint.strict_zone_spread`: high
            availability in production), DoNotSchedule with minDomains.
        max_replicas: environments.<env>.max_replicas (the replicas the peak needs may not exceed it).
        replica_limit: the most replicas one stack scales to (`bounds.MAX_REPLICAS`: one autoscaler and node pool);
            None only to name the constraint that binds (`blueprints.plan.options.infeasible.relaxed`).
    """

    guardrails: Guardrails | None = None
    zones: int = 1
    strict_zone_spread: bool = False
    max_replicas: int | None = None
    replica_limit: int | None = bounds.MAX_REPLICAS

    def allows(self, inst: InstanceType) -> bool:
        """The policy's instance types admit `inst` (the requirements' families are checked by the search)."""
        return self.guardrails is None or self.guardrails.allows(inst.instance_type)

    @property
    def max_gpus(self) -> int | None:
        return self.guardrails.max_gpus if self.guardrails is not None else None

    @property
    def gpus_in_use(self) -> int:
        """GPUs the account's other stacks in the Region reach at full scale (counted against `max_gpus`)."""
        return self.guardrails.gpus_in_use if self.guardrails is not None else 0

    def quota_source(self) -> str:
        """The GPU quota in words: `maxGpus=8 (policies/config/dev.json, gpu-quota)`, with what the account's other
        stacks in the Region already reach."""
        g = self.guardrails
        assert g is not None and g.max_gpus is not None
        used = (f", of which the account's other stacks in the Region reach {g.gpus_in_use} "
                f"({', '.join(g.gpus_in_use_by)})") if g.gpus_in_use else ""
        return f"maxGpus={g.max_gpus} ({g.source}, gpu-quota){used}"

    def placement(self, per_node: int) -> Placement:
        """How an option's replicas take nodes at `per_node` to a node (`blueprints.contracts.placement`), as the
        program will spread them."""
        return serving_placement(per_node=per_node, zones=self.zones, strict_zone_spread=self.strict_zone_spread)

    def nodes(self, replicas: int, *, per_node: int) -> int:
        """Nodes `replicas` take at `per_node` to a node (what the option is billed for)."""
        return self.placement(per_node).nodes(replicas)

    def gpus_at_full_scale(self, replicas: int, *, per_node: int, gpus_per_node: int) -> int:
        """GPUs of the node pool that holds `replicas` plus the rollout surge over the zones (its smallest limit)."""
        return self.nodes(replicas + defaults.SURGE_REPLICAS, per_node=per_node) * gpus_per_node

    def breach(self, inst: InstanceType, *, replicas: int, per_node: int, managed: bool) -> Breach | None:
        """The first constraint an option with `replicas` at peak breaks, None when it breaks none. SageMaker
        instances count against SageMaker's own quotas, not the node pools' GPU quota."""
        if self.replica_limit is not None and replicas > self.replica_limit:
            return Breach("replica-limit", f"needs {replicas:,} replicas at peak, more than one stack scales to "
                                           f"({self.replica_limit:,}: one autoscaler and node pool)", replicas,
                          "split the load over several services (at most {needed} replicas each)".replace(
                              "{needed}", f"{self.replica_limit:,}"))
        if self.max_replicas is not None and replicas > self.max_replicas:
            return Breach("max_replicas", f"needs {replicas} replicas at peak, above max_replicas={self.max_replicas}",
                          replicas, "raise environments.{env}.max_replicas to >= {needed}",
                          "environments.{env}.max_replicas")
        if self.max_gpus is not None and inst.gpu_count and not managed:
            gpus = self.gpus_at_full_scale(replicas, per_node=per_node, gpus_per_node=inst.gpu_count)
            if gpus + self.gpus_in_use > self.max_gpus:
                source = self.guardrails.source  # type: ignore[union-attr]
                total = f" ({gpus + self.gpus_in_use} with the account's others)" if self.gpus_in_use else ""
                return Breach("gpu-quota", f"needs {gpus} GPUs with the rollout surge{total}, above "
                                           f"{self.quota_source()}", gpus + self.gpus_in_use,
                              f"raise maxGpus in {source} to >= {{needed}}", "policy:{env}:maxGpus")
        return None

    def need(self, constraint: str, inst: InstanceType, *, replicas: int, per_node: int) -> int:
        """What an option needs of a constraint: replicas at peak (`max_replicas`) or GPUs with the surge (with the
        account's other stacks in the Region: what `maxGpus` must hold)."""
        if constraint in ("max_replicas", "replica-limit"):
            return replicas
        return self.gpus_at_full_scale(replicas, per_node=per_node, gpus_per_node=inst.gpu_count) + self.gpus_in_use

    def autoscaling_cap(self, *, per_node: int, gpus_per_node: int) -> int | None:
        """The most replicas the autoscaler may reach with the surge inside the GPU quota (None: no quota)."""
        if self.max_gpus is None or not gpus_per_node:
            return None
        free = self.max_gpus - self.gpus_in_use
        cap = (free // gpus_per_node) * per_node - defaults.SURGE_REPLICAS
        while cap > 0 and self.gpus_at_full_scale(cap, per_node=per_node, gpus_per_node=gpus_per_node) > free:
            cap -= 1
        return cap
