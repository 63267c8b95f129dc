"""The stack against its requirements: each rule checks the settings the program rendered against a floor from outside
the stack, its config key (`privateOnly`, `customerManagedKms`, `auditLogging`, `regionsAllowed`, `production`): the
offline preview sets them from the requirements file the stack was planned from and the environment's policy config
(`blueprints.review.stack.stack_policy_config`), a policy config may set them for a whole environment. The stack's
own record (a tag on its model store bucket, `blueprints.contracts.sections.COMPLIANCE_TAG`) can only add to that
floor: editing the record never weakens what the floor demands, and `blueprint plan --check` reports the edit.

The platform's own settings (audit logs, private API endpoint, secrets key) are read from the namespace annotation the
service writes from its platform's StackReference outputs (`blueprints.contracts.sections.PLATFORM_COMPLIANCE_ANNOTATION`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from blueprints.contracts.sections import (
    COMPLIANCE_ANNOTATION, COMPLIANCE_TAG, PLATFORM_COMPLIANCE_ANNOTATION, PRIVATE_ONLY_LABEL, decode_flags,
)
from policies.compliance import BUCKET, resource_region
from policies.exposure import is_internet_facing
from policies.resources import (
    CAPACITY_TYPE_LABEL,
    NODE_GROUP,
    NODE_POOL,
    UNKNOWN,
    Finding,
    Res,
    get,
    items,
    mapping,
    node_pool_requirement,
)

NAMESPACE: Final = "kubernetes:core/v1:Namespace"
SSE: Final = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
SCALED_OBJECT: Final = "kubernetes:keda.sh/v1alpha1:ScaledObject"
HPAS: Final = ("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "kubernetes:autoscaling/v1:HorizontalPodAutoscaler")
SCALABLE_TARGET: Final = "aws:appautoscaling/target:Target"
ENDPOINT: Final = "aws:sagemaker/endpoint:Endpoint"
ENDPOINT_CONFIGURATION: Final = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"


def queues_requests(target: Res, resources: Sequence[Res]) -> bool:
    """Whether a SageMaker scalable target (`resourceId` `endpoint/<name>/variant/<variant>`) scales an asynchronous
    endpoint: its endpoint's configuration has an `asyncInferenceConfig`, so requests wait in its queue at zero
    instances (the HasBacklogWithoutCapacity alarm starts it). The endpoint is found by name; its configuration by
    name, or, when no configuration states that name (unknown on a first preview, or auto-named), as the stack's only
    configuration."""
    rid = target.props.get("resourceId")
    parts = rid.split("/") if isinstance(rid, str) else []
    endpoint = next((r for r in resources if r.type == ENDPOINT and len(parts) == 4 and r.props.get("name") == parts[1]),
                    None)
    if endpoint is None:
        return False
    configs = [r for r in resources if r.type == ENDPOINT_CONFIGURATION]
    name = endpoint.props.get("endpointConfigName")
    used = [c for c in configs if isinstance(name, str) and c.props.get("name") == name]
    if not used and len(configs) == 1:  # its name unknown yet, or auto-named (inputs lack it): the only one
        used = configs
    return len(used) == 1 and isinstance(used[0].props.get("asyncInferenceConfig"), Mapping)


def compliance_record(resources: Sequence[Res]) -> tuple[Res, dict[str, Any]] | None:
    """(the resource carrying it, the decoded record) of the stack's compliance record: its model store bucket's
    tag, or (an edge cluster's stack, which keeps no bucket) its namespace's annotation; None when the stack has none
    (a platform stack) or its tags are unknown yet."""
    for res in resources:
        tags = res.props.get("tags") if res.type == BUCKET else None
        value = mapping(tags).get(COMPLIANCE_TAG) if tags is not UNKNOWN else None
        if isinstance(value, str):
            return res, decode_flags(value)
    for res in resources:
        value = get(res.props, "metadata", "annotations", COMPLIANCE_ANNOTATION) if res.type == NAMESPACE else None
        if isinstance(value, str):
            return res, decode_flags(value)
    return None


def platform_settings(resources: Sequence[Res]) -> list[tuple[Res, dict[str, Any]]]:
    """(namespace, the platform's settings as recorded on it) for each namespace carrying them."""
    found = []
    for res in resources:
        if res.type != NAMESPACE:
            continue
        value = get(res.props, "metadata", "annotations", PLATFORM_COMPLIANCE_ANNOTATION)
        if isinstance(value, str):
            found.append((res, decode_flags(value)))
    return found


def _record_check(requirement: str, floor_key: str,
                  check: Callable[[Sequence[Res], Res | None, dict[str, Any]], list[Finding]]):
    """A stack check that runs `check` when the policy config's `floor_key` (the floor from outside the stack: its
    requirements file offline, or the environment) or the stack's own record requires `requirement`: the stricter
    of both, so editing the record never weakens what the floor demands."""

    def run(resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
        found = compliance_record(resources)
        floor = config.get(floor_key)
        values = dict(found[1]) if found is not None else {}
        if requirement == "regions_allowed" and floor:
            recorded = [r for r in str(values.get(requirement) or "").split("/") if r]
            values[requirement] = "/".join(r for r in floor if not recorded or r in recorded) or "none"
        elif floor:
            values[requirement] = True
        if not values.get(requirement):
            return []
        return check(resources, found[0] if found is not None else None, values)

    return run


def _platform_flag(resources: Sequence[Res], flag: str, problem: str, fix: str) -> list[Finding]:
    return [(ns, f"{ns.label}: its platform reports {flag}=false: {problem}; {fix}")
            for ns, settings in platform_settings(resources) if settings.get(flag) is False]


def _private_only(resources: Sequence[Res], record: Res | None, _: dict[str, Any]) -> list[Finding]:
    findings: list[Finding] = []
    for res in resources:
        if is_internet_facing(res):
            findings.append((res, f"{res.label} is internet-facing but the stack's requirements are private_only; "
                                  "re-plan (`blueprint plan`): exposure is internal for a private-only service"))
        label = get(res.props, "metadata", "labels", PRIVATE_ONLY_LABEL) if res.type == NAMESPACE else None
        if label == "false":
            findings.append((res, f"{res.label} is labelled {PRIVATE_ONLY_LABEL}=false (network.private_only) but the "
                                  "stack's requirements are private_only; re-plan instead of editing the stack config"))
        if res.type == "aws:sagemaker/model:Model" and res.props.get("vpcConfig") is None:
            findings.append((res, f"{res.label} runs outside a VPC but the stack's requirements are private_only; "
                                  "re-plan (the model runs in the platform's private subnets)"))
    return findings + _platform_flag(resources, "private_endpoint", "its Kubernetes API is public",
                                     "re-plan the platform (a private-only service needs a private platform)")


def _sse_key(props: Mapping[str, Any]) -> Any:
    keys = [get(r, "applyServerSideEncryptionByDefault", "kmsMasterKeyId") for r in items(props.get("rules"))]
    return UNKNOWN if UNKNOWN in keys or props.get("rules") is UNKNOWN else next((k for k in keys if k), None)


def _customer_managed_kms(resources: Sequence[Res], record: Res | None, _: dict[str, Any]) -> list[Finding]:
    findings: list[Finding] = []
    buckets = [record] if record is not None else [r for r in resources if r.type == BUCKET]
    for bucket in buckets:
        settings = [r for r in resources if r.type == SSE and r.parent == bucket.parent]
        keys = [_sse_key(r.props) for r in settings]
        own_key = [isinstance(k, str) and k != "aws/s3" and not k.endswith("alias/aws/s3") for k in keys]
        if settings and UNKNOWN not in keys and not any(own_key):
            findings.append((bucket, f"{bucket.label} is encrypted with the AWS-managed key (no kmsMasterKeyId) but "
                                     "the stack's requirements are customer_managed_kms; re-plan "
                                     "(storage.customer_managed_kms creates the key)"))
    return findings + _platform_flag(resources, "secrets_kms", "Kubernetes secrets (the API key) are not encrypted "
                                     "with a customer-managed key", "re-plan the platform")


def _audit_logging(resources: Sequence[Res], record: Res | None, _: dict[str, Any]) -> list[Finding]:
    return _platform_flag(resources, "audit_logging", "the cluster sends no Kubernetes audit logs, which the stack's "
                          "requirements need", "re-plan the platform (audit logging follows its services)")


def _regions(resources: Sequence[Res], record: Res | None, values: dict[str, Any]) -> list[Finding]:
    allowed = [r for r in str(values.get("regions_allowed") or "").split("/") if r]
    findings: list[Finding] = []
    for res in resources:
        region = resource_region(res) if res.type.startswith("aws:") else None
        if allowed and region is not None and region not in allowed:
            findings.append((res, f"{res.label} is in {region}, outside the stack's compliance.regions_allowed "
                                  f"{allowed}; re-plan for an allowed region"))
    return findings


def _production(resources: Sequence[Res], record: Res | None, _: dict[str, Any]) -> list[Finding]:
    findings: list[Finding] = []
    for res in resources:
        if res.type == SCALED_OBJECT:
            low = get(res.props, "spec", "minReplicaCount")
            low = 0 if low is None else low  # KEDA's default minReplicaCount is 0
            triggers = get(res.props, "spec", "triggers") or []
            if triggers and all(isinstance(t, dict) and t.get("type") == "cron" for t in triggers):
                low = None  # a batch's schedule: no request waits on a cold start outside it
        elif res.type in HPAS:
            low = get(res.props, "spec", "minReplicas")
            low = 1 if low is None else low
        elif res.type == SCALABLE_TARGET:
            # An asynchronous endpoint holds its requests in its queue at zero (within their TTL, which the plan
            # budgets for the cold start): none is refused for want of an instance.
            low = None if queues_requests(res, resources) else res.props.get("minCapacity")
        else:
            low = None
        if isinstance(low, (int, float)) and low < 1:
            findings.append((res, f"{res.label} may scale to zero but the stack's requirements are production; "
                                  "re-plan (production keeps at least one replica)"))
        spot = ((res.type == NODE_POOL and "spot" in (node_pool_requirement(res, CAPACITY_TYPE_LABEL) or []))
                or (res.type == NODE_GROUP and res.props.get("capacityType") == "SPOT"))
        if spot:
            findings.append((res, f"{res.label} may use spot capacity but the stack's requirements are production; "
                                  "re-plan (production runs on-demand)"))
    return findings


check_compliance_private_only = _record_check("private_only", "privateOnly", _private_only)
check_compliance_customer_managed_kms = _record_check("customer_managed_kms", "customerManagedKms",
                                                      _customer_managed_kms)
check_compliance_audit_logging = _record_check("audit_logging", "auditLogging", _audit_logging)
check_compliance_regions = _record_check("regions_allowed", "regionsAllowed", _regions)
check_compliance_production = _record_check("production", "production", _production)
