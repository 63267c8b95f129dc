"""The `overrides:` section of a requirements file: an intended deviation from a derived setting of the plan, with its
reason, instead of a hand edit of a generated stack config; and which requirements field decides every other setting.

An override sets one of a closed list of derived settings (`OVERRIDABLE`: engine batch limits, autoscaling cooldown
and target, startup budgets, the idle timeout, old-version expiry). Whatever the requirements' compliance and the
policy config demand (exposure and CIDRs, private endpoint, KMS, audit, monitoring, retention, production,
namespace, images) is never overridable: `BLUEPRINT_SOURCES` names the requirements field to change instead, and the
overridden plan is checked against the same floors as any other (`blueprints.plan.overrides`).
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, field_validator

from blueprints.core import bounds
from blueprints.core.errors import describe_pattern
from blueprints.requirements.fields import DNS_1123_LABEL, Section

#: The blueprint settings an override may set, with the JSON type of their value.
OVERRIDABLE: dict[str, type] = {
    "autoscaling.cooldown_s": int,
    "autoscaling.target": float,
    "engine.max_num_seqs": int,
    "engine.max_num_batched_tokens": int,
    "engine.gpu_memory_utilization": float,
    "network.load_balancer_idle_timeout_s": int,
    "startup.weights_download_s": int,
    "startup.model_load_s": int,
    "storage.noncurrent_version_expiry_days": int,
}

OverridableField = Literal["autoscaling.cooldown_s", "autoscaling.target", "engine.max_num_seqs",
                           "engine.max_num_batched_tokens", "engine.gpu_memory_utilization",
                           "network.load_balancer_idle_timeout_s", "startup.weights_download_s",
                           "startup.model_load_s", "storage.noncurrent_version_expiry_days"]
assert set(get_args(OverridableField)) == set(OVERRIDABLE)

#: Blueprint field prefixes -> the requirements field that decides them (`{env}`: the stack's environment;
#: `{path}`: the field itself; `{rest}`: the field below the prefix), most specific first. Fields not listed are
#: derived by the plan's search from the model, traffic, SLO and hardware.
BLUEPRINT_SOURCES: tuple[tuple[str, str], ...] = (
    ("production", "environments.{env}.production"),
    ("region", "environments.{env}.region"),
    ("tags", "owner, cost_center"),
    ("compliance.production", "environments.{env}.production"),
    ("compliance", "{path}"),
    ("network.private_only", "compliance.private_only"),
    ("network.exposure", "exposure{rest}"),
    ("network.exposed_by", "exposure.via, operations.cluster_addons"),
    ("storage.customer_managed_kms", "compliance.customer_managed_kms"),
    ("storage.retain_on_delete", "environments.{env}.production"),
    ("models", "model / models"),
    ("compute.capacity_type", "environments.{env}.spot"),
    ("compute", "hardware, traffic, slo (the sizing search)"),
    ("engine.image", "nothing: the engine image is the catalog's pin (blueprints/catalog/images.yaml)"),
    ("autoscaling.min_replicas", "environments.{env}.min_replicas"),
    ("autoscaling.max_replicas", "environments.{env}.max_replicas"),
    ("platform", "environments.{env}.platform, operations, platform.yaml"),
    ("slo", "{path}"),
    ("alerting", "platform.yaml alerting"),
    ("monitored", "operations.cluster_addons (kube-prometheus-stack)"),
    ("roles_anywhere", "operations.roles_anywhere"),
    ("pipeline", "slo.pipeline_latency_p95_ms, models"),
    ("overrides", "overrides"),
    ("batch.requests_per_day", "traffic.batch.requests_per_day (or tokens_per_day), environments.{env}.traffic_scale"),
    ("batch.deadline_hours", "traffic.batch.deadline_hours"),
    ("batch.run_hours", "traffic.batch.deadline_hours"),
    ("batch.window_start_hour", "traffic.batch.window.start_hour"),
    ("batch.window_hours", "traffic.batch.window (length_hours or end_hour)"),
    ("batch.timezone", "traffic.batch.window.timezone"),
    ("batch.keda_cron", "traffic.batch.window, traffic.batch.deadline_hours"),
    ("batch.async_inference", "operations.preference (managed, or any when SageMaker's run is cheaper), "
                              "traffic.batch, traffic.mean_input_tokens, traffic.mean_output_tokens"),
    ("batch", "traffic.batch (the fewest replicas finishing by deadline_hours), hardware"),
)

#: One line of text: no control characters (no line break, tab or escape), as a rationale line prints it.
ONE_LINE = describe_pattern(r"^[^\x00-\x1f\x7f]+$", "one line of text, without line breaks, tabs or other control "
                            "characters")
#: A batch service's `autoscaling` states its run's schedule (`BatchPlan.scaling`), not the environment's bounds.
BATCH_SCALING_SOURCE = "traffic.batch (a batch's autoscaling is its run's schedule)"

#: What `source_field` says of a field the plan derives (no requirements field sets it directly).
DERIVED = "derived by the plan from the model, traffic, SLO and hardware"


def source_field(path: str, *, env: str | None = None, batch: bool = False) -> str:
    """The requirements field behind a blueprint field (`network.exposure.allowed_cidrs` -> `exposure.allowed_cidrs`),
    or `DERIVED`. `batch`: the blueprint is a batch service's (its `autoscaling` follows `traffic.batch`)."""
    if batch and (path == "autoscaling" or path.startswith("autoscaling.")):
        return BATCH_SCALING_SOURCE
    for prefix, where in BLUEPRINT_SOURCES:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return where.format(env=env or "<env>", path=path, rest=path[len(prefix):])
    return DERIVED


class Override(Section):
    """One intended deviation from the plan: a derived setting set to `value` in some environments, with the reason a
    reviewer reads. Example: `{field: autoscaling.cooldown_s, value: 900, environments: [prod], reason: "launch week:
    keep capacity through the evening peak"}`."""

    field: OverridableField = Field(description="the blueprint setting (one of the derived settings a plan may "
                                    "deviate from; compliance, exposure, retention, monitoring, production, "
                                    "namespace and images never are)")
    value: float = Field(ge=0, le=bounds.INT32_MAX, description="its value, in the field's unit (a whole number "
                         "for integer settings); checked against the field's own bounds when applied")
    reason: str = Field(min_length=10, max_length=300, pattern=ONE_LINE, description="why: shown in "
                        "the plan's rationale and in the review of the change")
    environments: list[Annotated[str, Field(pattern=DNS_1123_LABEL, max_length=20)]] = Field(
        default_factory=list, max_length=bounds.MAX_ENVIRONMENTS, description="the environments it applies to "
        "(default: every one)")
    part: Literal["generator", "retrieval"] | None = Field(default=None, description="a compound service's part it "
                                                           "applies to (default: both)")

    @field_validator("field", mode="before")
    @classmethod
    def _not_protected(cls, value: object) -> object:
        if isinstance(value, str) and value not in OVERRIDABLE:
            where = source_field(value)
            decided = (f"it is decided by {where}: change that instead" if where not in (value, DERIVED)
                       else "it is not a setting an override may change")
            raise ValueError(f"{value!r} cannot be overridden: {decided}; overridable: {', '.join(OVERRIDABLE)}")
        return value
