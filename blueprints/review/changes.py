"""The review of a re-plan: what changed in the requirements, in the plan and in the predictions, and which changes
replace a resource (`catalog/replacements.yaml`).

The before side is the previous stack config's recorded blueprint (`blueprint plan`) or a baseline `plan.json`
(`blueprint preview --baseline`), read as a plain dict so a config of an older schema still compares. At plan time
replacements come from the blueprint fields each rule is `planned_by`; at preview time from the resources' own input
changes, each named with the blueprint changes that caused it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.platform import EKS_CLUSTER_TYPE, VPC_TYPE, PlatformConfig
from blueprints.contracts.stackconfig import recorded_platform, stack_config_path
from blueprints.catalog.replacements import Effect, ReplaceRule, load_replace_rules
from blueprints.review.adapters import AdapterChange, adapter_change
from blueprints.review.diff import ResourceChange, flatten
from blueprints.core.errors import CatalogError, clip

#: Blueprint paths that record the requirements (everything else but `IGNORED` is the plan derived from them).
REQUIREMENT_PREFIXES = ("region", "production", "tags", "compliance", "slo", "network.exposure", "alerting",
                        "overrides")
#: The fields of a served model that come from the requirements (the rest, params and weights size, are derived).
MODEL_REQUIREMENT_FIELDS = ("catalog_id", "task", "format", "precision", "quantization", "source_uri",
                            "source_kms_key_arn", "max_context_tokens", "traffic")
#: Not compared: identity, the prose rationale, and the predictions (compared on their own).
IGNORED_PREFIXES = ("schema_version", "service", "environment", "rationale", "predictions")
#: Words for the fields a reviewer meets most; other fields are shown by their path.
FIELD_LABELS = {
    "archetype": "archetype",
    "compute.instance_type": "instance type",
    "compute.capacity_type": "capacity type",
    "compute.cpu_arch": "CPU architecture",
    "compute.accelerator": "accelerator",
    "compute.replicas": "replicas at peak",
    "compute.gpus_per_replica": "GPUs per replica",
    "engine.tensor_parallel_size": "tensor parallel",
    "engine.initial_instance_count": "instance count",
    "engine.image": "engine image",
    "autoscaling.min_replicas": "min replicas",
    "autoscaling.max_replicas": "max replicas",
    "platform.kubernetes_version": "Kubernetes version",
    "platform.stack": "platform",
    "region": "region",
}
#: (prediction field, label, unit) in the order the review lists them.
PREDICTIONS = (("ttft_p95_ms", "TTFT p95", "ms"), ("itl_p95_ms", "ITL p95", "ms"),
               ("ttft_p99_ms", "TTFT p99", "ms"), ("itl_p99_ms", "ITL p99", "ms"),
               ("latency_p95_ms", "request latency p95", "ms"),
               ("requests_per_s_capacity", "capacity", "requests/s"),
               ("expected_monthly_cost_usd", "expected monthly cost (simulated)", "USD"),
               ("monthly_cost_usd", "peak monthly cost", "USD"),
               ("max_monthly_cost_usd", "monthly cost at the autoscaler's maximum", "USD"),
               ("platform_monthly_cost_usd", "its platform's monthly cost (shared)", "USD"),
               ("unit_costs.expected.usd_per_1k_requests", "cost per 1k requests (expected fleet)", "USD"),
               ("unit_costs.expected.usd_per_million_input_tokens", "cost per 1M input tokens (expected fleet)",
                "USD"),
               ("unit_costs.expected.usd_per_million_output_tokens", "cost per 1M output tokens (expected fleet)",
                "USD"),
               ("unit_costs.expected.usd_per_million_tokens", "cost per 1M tokens (expected fleet)", "USD"))


#: Blueprint fields that move a service to another Region or platform (another cluster, VPC or endpoint host).
MOVE_FIELDS = ("region", "platform.stack", "platform.kind")
#: Why a move replaces everything: the stack's AWS resources take their Region from the provider, and its Kubernetes
#: objects their cluster from the platform stack's kubeconfig.
MOVE_SOURCE = ("changing `region` replaces an AWS resource (pulumi.com/dev/tutorials/aws-enhanced-region-support, "
               "pulumi-aws v7); a Kubernetes provider whose kubeconfig names another cluster is replaced with every "
               "object it manages [assumption: pulumi-kubernetes DiffConfig on a changed cluster]")


@dataclass(frozen=True)
class FieldChange:
    """One blueprint field, before -> after (None: absent on that side)."""

    path: str
    before: Any
    after: Any

    @property
    def label(self) -> str:
        return FIELD_LABELS.get(self.path, self.path)


@dataclass(frozen=True)
class PredictionChange:
    """One prediction, before -> after, in `unit`; `delta` is None when either side is missing."""

    name: str
    label: str
    unit: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return round(self.after - self.before, 4)

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class Replacement:
    """A change that replaces a resource, or makes it replace what it manages (`effect`).

    `resource_name` and `paths` are the resource and its changed inputs (preview time; None and empty at plan time);
    `causes` the blueprint changes that feed those inputs (`ReplaceRule.planned_by`)."""

    effect: Effect
    what: str
    change: str
    consequence: str
    brief: str
    source: str
    resource_type: str
    resource_name: str | None = None
    paths: tuple[str, ...] = ()
    values: tuple[tuple[Any, Any], ...] = ()
    causes: tuple[FieldChange, ...] = ()

    @property
    def message(self) -> str:
        """One sentence: the cause, the resource change and its consequence, e.g. "instance type g6e.xlarge ->
        p5.4xlarge: NodePool requirements, labels, taints or node class change; Karpenter replaces every node ..."."""
        cause = "; ".join(f"{c.label} {show(c.before)} -> {show(c.after)}" for c in self.causes)
        shown = ", ".join(f"{p} {show(b)} -> {show(a)}" for p, (b, a) in zip(self.paths[:3], self.values))
        shown += f" and {len(self.paths) - 3} more" if len(self.paths) > 3 else ""
        if self.resource_name is None:
            subject = f"the {self.what}'s {self.change} change" + (f" ({shown})" if shown else "")
        else:
            subject = f"{self.what} {self.resource_name} {self.change} change ({shown})"
        return f"{cause + ': ' if cause else ''}{subject}; {self.consequence}"

    @property
    def summary(self) -> str:
        """The same in a few words, for a terminal: "instance type g6e.xlarge -> p5.4xlarge: NodePool requirements,
        labels, taints or node class change; Karpenter replaces every node (drift)"."""
        cause = "; ".join(f"{c.label} {show(c.before)} -> {show(c.after)}" for c in self.causes)
        where = f"{self.what} {self.resource_name}" if self.resource_name else self.what
        return f"{cause + ': ' if cause else ''}{where} {self.change} change; {self.brief}"

    def to_json(self) -> dict[str, Any]:
        return {"effect": self.effect.value, "what": self.what, "change": self.change,
                "resource_type": self.resource_type, "resource_name": self.resource_name,
                "paths": [{"path": p, "before": b, "after": a} for p, (b, a) in zip(self.paths, self.values)],
                "causes": [asdict(c) for c in self.causes], "consequence": self.consequence, "brief": self.brief,
                "source": self.source, "message": self.message, "summary": self.summary}


@dataclass
class Review:
    """What changed for one stack: requirements, plan, predictions (before -> after) and the replacements they bring.
    `blueprint_known` is False when the before side recorded no blueprint (a baseline report of an older version):
    then only the predictions and the resources compare."""

    stack: str
    blueprint_known: bool
    #: A platform stack: only its resources compare (its settings are in the resource diff).
    platform: bool = False
    requirements: list[FieldChange] = field(default_factory=list)
    plan: list[FieldChange] = field(default_factory=list)
    predictions: list[PredictionChange] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    #: The LoRA adapters' change, which restarts every pod (`blueprints.review.adapters`); None when they did not change.
    adapters: AdapterChange | None = None
    #: A calibration accepted with --accept-shift that this change brings (`CapacityCorrection.accepted_shift`), shown
    #: first; None otherwise.
    capacity_shift: str | None = None

    @property
    def traffic_restart(self) -> Replacement | None:
        """The rolling update of a Deployment whose pod template changes when only traffic requirements changed
        (`models.*.traffic.*`): a traffic change should touch replica counts, limits and scaler settings only, so the
        review warns that it restarts every pod, and why (the template paths that changed). None otherwise."""
        if not self.requirements or not all(_is_traffic(c.path) for c in self.requirements):
            return None
        return next((r for r in self.replacements if r.effect is Effect.ROLLOUT
                     and r.resource_type == "kubernetes:apps/v1:Deployment"), None)

    @property
    def move(self) -> Replacement | None:
        """The replacement of the whole service by a Region, platform or archetype change (`service_move`), if any."""
        return next((r for r in self.replacements if r.what in ("service", "stack")), None)

    @property
    def platform_replacement(self) -> Replacement | None:
        """A platform's cluster or VPC replaced (with every add-on and service on it), if any: the review leads with
        it."""
        return next((r for r in self.replacements if self.platform and r.effect is Effect.REPLACE
                     and r.resource_type in (EKS_CLUSTER_TYPE, VPC_TYPE)), None)

    @property
    def changed_predictions(self) -> list[PredictionChange]:
        return [p for p in self.predictions if p.changed]

    @property
    def empty(self) -> bool:
        return not (self.requirements or self.plan or self.changed_predictions or self.replacements
                    or self.capacity_shift)

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack, "blueprint_known": self.blueprint_known, "platform": self.platform,
            "requirements": [{**asdict(c), "label": c.label} for c in self.requirements],
            "plan": [{**asdict(c), "label": c.label} for c in self.plan],
            "predictions": [{**asdict(p), "delta": p.delta} for p in self.predictions],
            "replacements": [r.to_json() for r in self.replacements],
            **({"adapters": self.adapters.to_json()} if self.adapters is not None else {}),
            **({"capacity_shift": self.capacity_shift} if self.capacity_shift is not None else {}),
        }


#: Longest value the review prints, characters: a pull-request comment holds at most 65,536, and a value such as a
#: dashboard's JSON (8 KB) would fill it; the full values are in plan.json.
SHOWN_CHARS = 120


def show(value: Any) -> str:
    """A value as the review prints it: `none`, numbers with `:g`, lists comma-joined, at most `SHOWN_CHARS`
    characters (a longer one is cut, its full length noted)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return clip("[" + ", ".join(show(v) for v in value) + "]", limit=SHOWN_CHARS)
    return clip(str(value), limit=SHOWN_CHARS)


def _keyed(blueprint: dict[str, Any]) -> dict[str, Any]:
    """The blueprint with `models` keyed by model name and `overrides` by setting, so fields read
    `models.<name>.<field>` and `overrides.<setting>.reason`."""
    models = blueprint.get("models") or []
    keyed = {str(m.get("name", i)): m for i, m in enumerate(models) if isinstance(m, dict)}
    overrides = {str(o.get("field", i)): o for i, o in enumerate(blueprint.get("overrides") or [])
                 if isinstance(o, dict)}  # `overrides.<field>.value` / `.reason`: each intended deviation, why
    rest = {k: v for k, v in blueprint.items() if k != "overrides"}
    return {**rest, "models": keyed, **({"overrides": overrides} if overrides else {})}


def _is_traffic(path: str) -> bool:
    """A requirement path of a model's traffic (`models.<name>.traffic.<field>`)."""
    parts = path.split(".")
    return len(parts) > 3 and parts[0] == "models" and parts[2] == "traffic"


def _is_requirement(path: str) -> bool:
    if path.startswith("models."):
        parts = path.split(".")
        return len(parts) > 2 and parts[2] in MODEL_REQUIREMENT_FIELDS
    return any(path == p or path.startswith(f"{p}.") for p in REQUIREMENT_PREFIXES)


def blueprint_changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[FieldChange], list[FieldChange]]:
    """(requirement changes, plan changes) between two blueprint dicts (`Blueprint.model_dump(mode="json")`), field
    by field. A model present on one side only is one change `models.<name>`: its source before -> after."""
    old, new = _keyed(before), _keyed(after)
    changes: list[FieldChange] = []
    for name in sorted(old["models"].keys() ^ new["models"].keys()):
        changes.append(FieldChange(f"models.{name}", (old["models"].get(name) or {}).get("source_uri"),
                                   (new["models"].get(name) or {}).get("source_uri")))
    shared = set(old["models"]) & set(new["models"])
    old["models"] = {k: v for k, v in old["models"].items() if k in shared}
    new["models"] = {k: v for k, v in new["models"].items() if k in shared}
    flat_old, flat_new = flatten(old), flatten(new)
    for path in sorted(flat_old.keys() | flat_new.keys()):
        if path.startswith(IGNORED_PREFIXES) or flat_old.get(path) == flat_new.get(path):
            continue
        changes.append(FieldChange(path, flat_old.get(path), flat_new.get(path)))
    requirements = [c for c in changes if c.path.startswith("models.") and c.path.count(".") == 1
                    or _is_requirement(c.path)]
    return requirements, [c for c in changes if c not in requirements]


def prediction_changes(before: dict[str, Any] | None, after: dict[str, Any]) -> list[PredictionChange]:
    """Every prediction either side has (TTFT/ITL/request latency p95, capacity, expected and peak monthly cost, the
    expected fleet's unit costs)."""
    before = before or {}
    out = []
    for name, label, unit in PREDICTIONS:
        old, new = _dotted(before, name), _dotted(after, name)
        if old is None and new is None:
            continue
        out.append(PredictionChange(name, label, unit, None if old is None else float(old),
                                    None if new is None else float(new)))
    return out


def _dotted(data: dict[str, Any], path: str) -> Any:
    """The value at a dotted `path` of nested dicts (None where any part is absent)."""
    for key in path.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _causes(rule: ReplaceRule, changes: list[FieldChange]) -> tuple[FieldChange, ...]:
    return tuple(c for c in changes if any(fnmatch.fnmatchcase(c.path, pattern) for pattern in rule.planned_by))


def _with_fleets(rule: ReplaceRule, before: dict[str, Any] | None, after: Blueprint) -> str:
    """A blue/green consequence with the two fleets' sizes: the green one at its initial count, the blue one as it was
    planned (more if it has scaled out)."""
    if rule.effect is not Effect.BLUE_GREEN or after.archetype.value != "sagemaker-endpoint":
        return rule.consequence
    green = f"{after.engine.initial_instance_count} x {after.compute.instance_type}"  # type: ignore[union-attr]
    blue = ""
    if before:
        count = (before.get("engine") or {}).get("initial_instance_count")
        kind = (before.get("compute") or {}).get("instance_type")
        if count and kind:
            blue = f"{count} x {kind} blue (more if scaled out) + "
    return f"{rule.consequence} ({blue}{green} green)"


def _platform_kind(bp: Blueprint) -> str:
    """`eks`, `existing-cluster` or `sagemaker`."""
    return str(getattr(bp.platform.kind, "value", bp.platform.kind))


def _archetype_replacement(changes: list[FieldChange]) -> Replacement | None:
    """Every resource replaced when the archetype changes (another component type); None when it did not."""
    archetype_change = next((c for c in changes if c.path == "archetype"), None)
    if archetype_change is None:
        return None
    return Replacement(Effect.REPLACE, "stack", "archetype", "every resource of the stack is created again under "
                       "the new archetype's component and the old ones are deleted", "every resource is replaced",
                       "Pulumi URNs include the parent component's type (pulumi.com/docs/iac/concepts/resources/"
                       "names, URNs)", "*", causes=(archetype_change,))


def planned_replacements(changes: list[FieldChange], before: dict[str, Any] | None,
                         after: Blueprint) -> list[Replacement]:
    """Plan time: each rule whose `planned_by` fields changed, for a stack that has its resource."""
    whole = _archetype_replacement(changes)
    if whole is not None:
        return [whole]
    out = []
    for rule in load_replace_rules():
        if not rule.planned_for(after.archetype.value, _platform_kind(after)):
            continue
        causes = _causes(rule, changes)
        if causes:
            out.append(Replacement(rule.effect, rule.what, rule.change, _with_fleets(rule, before, after), rule.brief,
                                   rule.source, rule.type, causes=causes))
    return out


def resource_replacements(resource_changes: list[ResourceChange], changes: list[FieldChange],
                          before: dict[str, Any] | None, after: Blueprint | None) -> list[Replacement]:
    """Preview time: each changed resource input a rule covers, named with the blueprint changes behind it."""
    out = []
    for change in resource_changes:
        for rule in load_replace_rules():
            if not rule.applies_to(change.type):
                continue
            hit = [s for s in change.settings if rule.matches(s.path)]
            if not hit:
                continue
            consequence = _with_fleets(rule, before, after) if after is not None else rule.consequence
            out.append(Replacement(rule.effect, rule.what, rule.change, consequence, rule.brief, rule.source, change.type,
                                   resource_name=change.name, paths=tuple(s.path for s in hit),
                                   values=tuple((s.before, s.after) for s in hit), causes=_causes(rule, changes)))
    return out


def platform_replacements(before: PlatformConfig, after: PlatformConfig) -> list[Replacement]:
    """Plan time, a platform: each create-only input (`PlatformConfig.create_only_inputs`) whose value changes,
    with the replacement rule its type and path match, named with the platform fields behind it.

    Raises:
        CatalogError: a create-only input no replace rule of `replacements.yaml` covers (the catalog lacks it).
    """
    old = {(i.type, i.path): i.value for i in before.create_only_inputs()}
    was, now = flatten(before.model_dump(mode="json")), flatten(after.model_dump(mode="json"))
    out = []
    for changed in after.create_only_inputs():
        key = (changed.type, changed.path)
        if key not in old or old[key] == changed.value:
            continue
        rule = next((r for r in load_replace_rules() if r.applies_to(changed.type) and r.matches(changed.path)
                     and r.effect is Effect.REPLACE), None)
        if rule is None:
            raise CatalogError(f"replacements.yaml: no replace rule covers {changed.type} {changed.path}, a "
                               "create-only input of the platform: add one with its source")
        causes = tuple(FieldChange(f, was.get(f), now.get(f)) for f in changed.fields if was.get(f) != now.get(f))
        out.append(Replacement(rule.effect, rule.what, rule.change, rule.consequence, rule.brief, rule.source,
                               rule.type, paths=(changed.path,), values=((old[key], changed.value),), causes=causes))
    return out


def service_move(changes: list[FieldChange], after: Blueprint, *, before_platform_usd: float | None = None,
                 tenants: dict[str, tuple[str, ...]] | None = None) -> Replacement | None:
    """The replacement of the whole service when `region` or the platform it lands on changes (`MOVE_FIELDS`): every
    resource is created again where the service now runs, and the old ones deleted; the archetype's replacement when
    that changed (`_archetype_replacement`); None when none of these changed.

    A move to another platform names it with its monthly cost and says to deploy it first, and names the platform
    left with its cost (`_platform_move`): `before_platform_usd` is the old platform's (the before side's
    `predictions.platform_monthly_cost_usd`), `tenants` the services each platform planned alongside serves (known at
    plan time: whether this service is the new platform's first, or the old one's last)."""
    whole = _archetype_replacement(changes)
    if whole is not None:
        return whole
    causes = tuple(c for c in changes if c.path in MOVE_FIELDS)
    if not causes:
        return None
    kind = _platform_kind(after)
    where = (f"on {after.platform.stack}'s cluster in {after.region}" if after.platform.stack and kind == "eks"
             else f"in {after.region}")
    if kind == "sagemaker":
        front = "a new SageMaker endpoint with a new invocation URL, its model and endpoint configuration"
    else:
        front = ("every Kubernetes object on the new cluster (Deployment, Service, scaler, policies), a new load "
                 "balancer with a new URL (clients must move to it)")
    platform = _platform_move(causes, after, before_platform_usd, tenants or {})
    consequence = (f"`pulumi up` creates the whole service again {where}: {front}, the weights bucket in "
                   f"{after.region}, and the weights copied into it again; then it deletes the old service. This is "
                   "not a rolling update" + platform)
    return Replacement(Effect.REPLACE, "service", "region or platform", consequence,
                       "the whole service is replaced: new cluster objects, load balancer and URL; bucket recreated, "
                       "weights copied again" + platform, MOVE_SOURCE, "*", causes=causes)


def _platform_move(causes: tuple[FieldChange, ...], after: Blueprint, before_usd: float | None,
                   tenants: dict[str, tuple[str, ...]]) -> str:
    """What a move to another platform stack costs and in which order it deploys ('' when the platform stayed)."""
    moved = next((c for c in causes if c.path == "platform.stack" and c.before != c.after), None)
    if moved is None:
        return ""
    text = ""
    if moved.after:
        usd = after.predictions.platform_monthly_cost_usd
        cost = f" (${usd:,.0f}/month" if usd is not None else " ("
        mine = set(after.pipeline.stacks) if after.pipeline is not None else {after.stack}
        others = [s for s in tenants.get(moved.after, ()) if s not in mine]
        cost += (", shared with " + ", ".join(others) + ")" if others else
                 ", this service its first: a cost this move adds)" if moved.after in tenants else
                 ", shared by the services on it; this move's cost when it is their first)")
        text += (f"; it lands on platform {moved.after}{cost}: deploy that platform stack first (`blueprint preview "
                 f"{moved.after}`, then `pulumi up -s {moved.after}`), then this service")
    if moved.before:
        left = f" (${before_usd:,.0f}/month)" if before_usd is not None else ""
        if moved.before not in tenants:
            text += f"; platform {moved.before}{left} keeps running: destroy it once no service lands on it"
        elif tenants[moved.before]:
            text += f"; platform {moved.before} keeps serving {', '.join(tenants[moved.before])}"
        else:
            saves = f", saving ${before_usd:,.0f}/month" if before_usd is not None else ""
            text += (f"; platform {moved.before}{left} then serves no service (this one was its last): destroy it "
                     f"after this service has moved (`pulumi destroy -s {moved.before}`){saves}")
    return text


def platform_tenants(platforms: list[PlatformConfig], planned: list[Blueprint],
                     previous: dict[str, dict[str, Any] | None], stacks_dir: Path) -> dict[str, tuple[str, ...]]:
    """The service stacks each platform serves once a plan is written (`service_move`'s `tenants`): each planned
    platform's own `services` (every requirements file landing on it), and each platform a planned service leaves (its
    previous stack config's `platform.stack`, not planned now) as that platform's stack config records them, without
    the stacks planned now and their compound service's other parts (they land elsewhere). A platform left whose stack
    config is missing or does not validate is not listed (unknown: the review says to destroy it once no service lands
    on it).

    Args:
        platforms: the platforms the plan writes.
        planned: the service blueprints it writes.
        previous: per planned stack, its previous stack config's blueprint (`recorded_blueprint`), None when new.
        stacks_dir: where the stack configs are.

    Raises:
        StackConfigError: a platform's stack config exists but is not readable YAML.
    """
    tenants = {p.stack: tuple(p.services) for p in platforms}
    now = {s for bp in planned for s in (bp.pipeline.stacks if bp.pipeline is not None else [bp.stack])}
    for before in previous.values():
        platform = (before or {}).get("platform")  # a plain dict of any schema version: read defensively
        left = platform.get("stack") if isinstance(platform, dict) else None
        if not isinstance(left, str) or not left or left in tenants:
            continue
        recorded = recorded_platform(stack_config_path(stacks_dir, left))
        if recorded is not None:
            tenants[left] = tuple(s for s in recorded.services if s not in now)
    return tenants


def review_changes(stack: str, before: dict[str, Any] | None, after: Blueprint | None, *,
                   before_predictions: dict[str, Any] | None = None,
                   resource_changes: list[ResourceChange] | None = None,
                   tenants: dict[str, tuple[str, ...]] | None = None) -> Review:
    """The review of `after` against `before`.

    Args:
        stack: the stack name.
        before: the previous blueprint as a dict (a stack config's `servingblueprints:blueprint`, or a baseline
            report's `blueprint`); None when the before side recorded none.
        after: the new blueprint; None for a platform stack (then only `resource_changes` are reviewed).
        before_predictions: the before side's predictions when `before` is None (an older baseline report's
            `predictions`).
        resource_changes: the resources' input changes (`blueprints.review.diff.diff_reports(...).changed`); None at plan
            time, when replacements come from the blueprint fields each rule is planned by.
        tenants: the service stacks each platform serves as planned (platform stack -> its `services`), when known
            (plan time): a move says whether it adds a platform's cost or leaves one with no service.

    Returns:
        A `Review`.
    """
    if after is None:
        return Review(stack, False, platform=True,
                      replacements=resource_replacements(resource_changes or [], [], None, None))
    after_dict = after.model_dump(mode="json")
    requirements, plan = blueprint_changes(before, after_dict) if before is not None else ([], [])
    changes = requirements + plan
    predictions = prediction_changes(before.get("predictions") if before is not None else before_predictions,
                                     after_dict["predictions"])
    if resource_changes is None:
        replacements = planned_replacements(changes, before, after) if before is not None else []
    else:
        replacements = resource_replacements(resource_changes, changes, before, after)
    was = (before or {}).get("predictions") or before_predictions or {}
    move = service_move(changes, after, before_platform_usd=was.get("platform_monthly_cost_usd"), tenants=tenants)
    if move is not None:  # everything is new where it now runs: no resource is updated in place or rolled
        replacements = [move] + [r for r in replacements if r.effect is not Effect.ROLLOUT and r.what != move.what]
    return Review(stack, before is not None, requirements=requirements, plan=plan, predictions=predictions,
                  replacements=replacements, adapters=adapter_change(before, after_dict) if before is not None else None,
                  capacity_shift=_accepted_shift(before, after))


def _accepted_shift(before: dict[str, Any] | None, after: Blueprint) -> str | None:
    """The accepted capacity shift of `after`'s calibration when `before` did not carry the same one."""
    now = after.predictions.capacity_correction
    shift = now.accepted_shift if now is not None else None
    was = ((before or {}).get("predictions") or {}).get("capacity_correction") or {}
    return shift if shift is not None and was.get("accepted_shift") != shift else None
