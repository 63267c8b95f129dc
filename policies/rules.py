"""The policy pack's rule table: each rule a pure function in a module by concern, run by CrossGuard and by the
offline preview.

- `policies.resources`: the resource view (`Res`, `UNKNOWN`) and the readers rules share;
- `policies.gpu`, `policies.compliance`, `policies.kubernetes_versions`, `policies.workloads`, `policies.exposure`,
  `policies.stack_compliance`: the checks, by concern.

`RULES` lists them with their name, enforcement level and config schema; `POLICIES` wraps each one as a
`ResourceValidationPolicy` or `StackValidationPolicy` for the CrossGuard pack (`policies/__main__.py`), and
`blueprints.review.policy_pack.evaluate` runs the very same functions over an offline `PreviewReport`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies.compliance import (
    check_audit_logs,
    check_bucket_encrypted,
    check_bucket_public_access_blocked,
    check_bucket_versioned,
    check_private_endpoints,
    check_region_allowed,
    check_required_tags,
    check_sagemaker_kms,
)
from policies.gpu import (
    check_engines_allowed,
    check_gpu_limits,
    check_gpu_quota,
    check_gpu_taint_tolerated,
    check_instance_types_allowed,
    check_no_spot,
    check_node_capacity,
    check_startup_probe_budget,
    check_tensor_parallel_shm,
)
from policies.kubernetes_versions import check_kubernetes_version_extended, check_kubernetes_version_supported
from policies.resources import Finding, Res, plain
from policies.exposure import check_public_endpoint_protected, check_workloads_have_network_policy
from policies.stack_compliance import (
    check_compliance_audit_logging,
    check_compliance_customer_managed_kms,
    check_compliance_private_only,
    check_compliance_production,
    check_compliance_regions,
)
from policies.workloads import (
    image_registry,
    check_containers_non_root,
    check_images_from_allowed_registries,
    check_images_pinned,
    check_model_control_disabled,
    check_no_plaintext_secrets,
    check_no_privileged_containers,
    check_no_static_aws_credentials,
    check_not_in_system_namespaces,
)


def catalog_registries() -> list[str]:
    """The registries of the images the project pins (blueprints/catalog/images.yaml: vLLM, Triton, aws-cli, Envoy,
    the IAM Roles Anywhere credential helper, curl) and of the catalog's SageMaker serving images
    (blueprints/catalog/instances.yaml, per-region ECR accounts)."""
    from blueprints.catalog import load_catalog
    from blueprints.catalog.images import load_image_catalog

    pinned = sorted({image_registry(image).rsplit("/", 1)[0] + "/" for image in load_image_catalog()})
    sagemaker = sorted({f"{account}.dkr.ecr.{region}.amazonaws.com/{image.repository}"
                        for image in load_catalog().sagemaker_images.values()
                        for region, account in image.registry_accounts.items()})
    return pinned + sagemaker


ResourceCheck = Callable[[Res, Mapping[str, Any]], list[str]]
StackCheck = Callable[[Sequence[Res], Mapping[str, Any]], list[Finding]]

_STRING_LIST: Final = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
_AS_OF: Final = {"type": "string", "pattern": "^([0-9]{4}-[0-9]{2}-[0-9]{2})?$", "default": "",
                 "description": "judge support on this date (YYYY-MM-DD) instead of the day the pack runs (empty)"}


@dataclass(frozen=True)
class Rule:
    """One guardrail: its policy name, why/how-to-fix description, default level, config schema and check.

    `config` maps each config key to its JSON schema (with a `default`); exactly one of `resource_check` and
    `stack_check` is set.
    """

    name: str
    description: str
    enforcement_level: EnforcementLevel
    resource_check: ResourceCheck | None = None
    stack_check: StackCheck | None = None
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def with_defaults(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """The policy config with each key's schema default filled in (`enforcementLevel` dropped)."""
        given = {k: v for k, v in (config or {}).items() if k != "enforcementLevel"}
        return {**{k: s["default"] for k, s in self.config.items() if "default" in s}, **given}

    def findings(self, resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
        """Run the check over `resources` (each one for a resource check): (resource or None, message) pairs."""
        if self.resource_check is not None:
            return [(res, message) for res in resources for message in self.resource_check(res, config)]
        assert self.stack_check is not None, f"rule {self.name} has no check"
        return self.stack_check(resources, config)

    def config_json_schema(self) -> dict[str, Any]:
        """The JSON schema of this policy's entry in a policy-config file (config keys plus `enforcementLevel`)."""
        return {"type": "object", "additionalProperties": False,
                "properties": {"enforcementLevel": {"enum": [e.value for e in EnforcementLevel]}, **self.config}}


MANDATORY = EnforcementLevel.MANDATORY

RULES: Final[tuple[Rule, ...]] = (
    Rule("instance-types-allowed",
         "Node groups, Karpenter NodePools and SageMaker endpoints use only instance families this environment "
         "allows, so a typo or an oversized GPU type cannot reach the bill. Fix: pick an allowed type, or extend "
         "allowedInstanceFamilies.",
         MANDATORY, resource_check=check_instance_types_allowed,
         config={"allowedInstanceFamilies": {**_STRING_LIST, "description": "families such as g6e, p5, m7i",
                                             "default": ["g5", "g6", "g6e", "g7e", "p4d", "p4de", "p5", "p5en",
                                                         "p6-b200", "p6-b300", "c7i", "c7g", "m7i"]},
                 "allowedInstanceTypes": {**_STRING_LIST, "description": "exact types allowed besides the families",
                                          "default": []}}),
    Rule("engines-allowed",
         "LLM serving containers run only the engines this environment allows (vllm, sglang, tensorrt-llm: "
         "blueprints/catalog/engines.yaml), so a team cannot bring an engine the platform team has not vetted. Fix: "
         "plan an allowed engine (operations.engines), or extend allowedEngines.",
         MANDATORY, resource_check=check_engines_allowed,
         config={"allowedEngines": {**_STRING_LIST, "items": {"enum": ["vllm", "sglang", "tensorrt-llm"]},
                                    "description": "engines.yaml names", "default": ["vllm", "sglang",
                                                                                    "tensorrt-llm"]}}),
    Rule("gpu-quota",
         "The stack's GPUs at full scale (NodePool limits['nvidia.com/gpu'], node group scalingConfig.maxSize x GPUs "
         "per instance) stay within the environment's cap, so the account's GPU quota and budget hold. Fix: lower "
         "the limit or raise maxGpus.",
         MANDATORY, stack_check=check_gpu_quota,
         config={"maxGpus": {"type": "integer", "minimum": 0, "description": "GPUs the account's stacks may reach "
                             "together in one Region at full scale (this pack sees one stack and checks its own; "
                             "`blueprint plan` and `blueprint preflight` add up the account's)",
                             "default": 64}}),
    Rule("gpu-limits-set",
         "GPU containers set resources.limits['nvidia.com/gpu'] (equal to any request, and at least the "
         "tensor-parallel degree), or the scheduler cannot place them on GPUs. Fix: set the limit.",
         MANDATORY, resource_check=check_gpu_limits),
    Rule("gpu-taint-tolerated",
         "Pods that request GPUs or are pinned to GPU nodes tolerate the nvidia.com/gpu taint, or they stay Pending. "
         "Fix: add the toleration {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}.",
         MANDATORY, resource_check=check_gpu_taint_tolerated),
    Rule("tensor-parallel-shm",
         "Tensor parallel > 1 needs a memory-backed /dev/shm (NCCL fails on the 64 MiB default), and an "
         "environment variable named like shm-size does not resize it. Fix: mount an emptyDir with medium Memory at "
         "/dev/shm sized shmGibPerRank x tensor_parallel_size.",
         MANDATORY, resource_check=check_tensor_parallel_shm,
         config={"shmGibPerRank": {"type": "number", "exclusiveMinimum": 0,
                                   "description": "GiB of /dev/shm per tensor-parallel rank", "default": 1}}),
    Rule("startup-probe-budget",
         "The startup probe waits at least the model's download-and-load time (pod annotation "
         "servingblueprints.io/pod-start-s), or the kubelet kills the pod in a restart loop. Fix: raise "
         "startupProbe.failureThreshold.",
         MANDATORY, resource_check=check_startup_probe_budget),
    Rule("node-capacity-covers-autoscaler",
         "NodePools at their GPU limit (node groups at maxSize) fit the autoscaler's maximum replicas (KEDA "
         "maxReplicaCount / HPA maxReplicas) of each GPU workload, or scale-out stalls with Pending pods. Fix: raise "
         "the NodePool's limit.",
         MANDATORY, stack_check=check_node_capacity),
    Rule("no-spot-capacity",
         "Node groups and NodePools run on on-demand capacity: spot GPUs are reclaimed mid-request. Fix: "
         "capacityType ON_DEMAND / capacity-type [on-demand]; non-production environments lower this policy's "
         "enforcementLevel.",
         MANDATORY, resource_check=check_no_spot),
    Rule("bucket-encrypted-kms",
         "S3 buckets encrypt objects with KMS (auditable key use, revocable access). Fix: add a "
         "BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms.",
         MANDATORY, stack_check=check_bucket_encrypted),
    Rule("bucket-versioned",
         "S3 buckets are versioned, so overwritten or deleted model weights can be restored. Fix: add a "
         "BucketVersioning with status Enabled.",
         MANDATORY, stack_check=check_bucket_versioned),
    Rule("bucket-public-access-blocked",
         "S3 buckets block every form of public access. Fix: add a BucketPublicAccessBlock with all four flags true.",
         MANDATORY, stack_check=check_bucket_public_access_blocked),
    Rule("private-endpoints",
         "In a private-only environment nothing is reachable from the internet: no internet-facing LoadBalancer "
         "Service, no public EKS API endpoint, SageMaker models in a VPC. Fix: internal load balancer scheme, "
         "endpointPublicAccess false, Model vpcConfig.",
         MANDATORY, resource_check=check_private_endpoints,
         config={"privateOnly": {"type": "boolean", "description": "the environment is private-only",
                                 "default": True}}),
    Rule("sagemaker-endpoint-kms",
         "SageMaker endpoint configurations encrypt the instances' storage with a KMS key. Fix: set kmsKeyArn.",
         MANDATORY, resource_check=check_sagemaker_kms),
    Rule("region-allowed",
         "AWS resources live only in allowed regions (data residency). The region is the resource's own region "
         "input, else its provider's (from `aws:region`). Fix: set aws:region to an allowed region.",
         MANDATORY, resource_check=check_region_allowed,
         config={"allowedRegions": {**_STRING_LIST, "minItems": 1, "description": "AWS regions, e.g. us-east-1",
                                    "default": ["us-east-1", "us-west-2"]}}),
    Rule("no-static-aws-credentials",
         "No static AWS access keys in pod specs, Kubernetes Secrets or the AWS provider: keys leak and never expire. "
         "Fix: give pods an IAM identity (EKS Pod Identity / IRSA).",
         MANDATORY, resource_check=check_no_static_aws_credentials),
    Rule("no-plaintext-secrets",
         "Pod environment variables named like credentials (token, password, secret, API key) come from a Secret "
         "via valueFrom, never a literal value in the pod spec. Fix: a Kubernetes Secret built from a Pulumi secret "
         "and env.valueFrom.secretKeyRef.",
         MANDATORY, resource_check=check_no_plaintext_secrets),
    Rule("images-pinned",
         "Container images carry a version tag or digest, never `latest` or no tag, so every replica and rollback "
         "runs the same code. Fix: pin a version tag.",
         MANDATORY, resource_check=check_images_pinned),
    Rule("required-tags",
         "Taggable AWS resources carry the cost-allocation and ownership tags. Fix: pass the blueprint's tags to "
         "every taggable resource (or the provider's defaultTags).",
         MANDATORY, resource_check=check_required_tags,
         config={"requiredTags": {**_STRING_LIST, "description": "tag keys every taggable AWS resource carries",
                                  "default": ["service", "environment", "owner", "cost-center"]}}),
    Rule("cluster-audit-logs",
         "EKS clusters send control-plane audit logs to CloudWatch when audit logging is required. Fix: add audit to "
         "enabledClusterLogTypes.",
         MANDATORY, resource_check=check_audit_logs,
         config={"auditLoggingRequired": {"type": "boolean", "description": "audit logs are required",
                                          "default": True}}),
    Rule("kubernetes-version-supported",
         "EKS clusters run a Kubernetes version EKS still supports on the day the pack runs (or `asOf`): past "
         "extended support EKS upgrades the cluster by itself. Fix: upgrade (kubernetes_version in platform.yaml).",
         MANDATORY, resource_check=check_kubernetes_version_supported,
         config={"asOf": _AS_OF}),
    Rule("kubernetes-version-extended-support",
         "EKS clusters in extended support are flagged: the control plane costs $0.60/hour instead of $0.10. Fix: "
         "upgrade to a version in standard support.",
         EnforcementLevel.ADVISORY, resource_check=check_kubernetes_version_extended,
         config={"asOf": _AS_OF}),
    Rule("no-privileged-containers",
         "Containers are not privileged and cannot escalate privileges: a compromised model server must not own the "
         "GPU node. Fix: securityContext {privileged: false, allowPrivilegeEscalation: false}.",
         MANDATORY, resource_check=check_no_privileged_containers),
    Rule("containers-run-as-non-root",
         "Containers run as a non-root user (runAsNonRoot, never UID 0) and drop every Linux capability. Fix: "
         "securityContext {runAsNonRoot: true, runAsUser: <the image's non-root UID>, capabilities: {drop: [ALL]}}.",
         MANDATORY, resource_check=check_containers_non_root),
    Rule("model-control-disabled",
         "No model server lets its clients load or unload models (Triton --model-control-mode explicit/poll or "
         "--load-model; vLLM runtime LoRA updates): model control can run arbitrary code. Fix: "
         "--model-control-mode=none.",
         MANDATORY, resource_check=check_model_control_disabled),
    Rule("images-from-allowed-registries",
         "Container images come from allowed registries (the catalog's, or your ECR), so a typo or a look-alike "
         "repository cannot run in the cluster. Fix: mirror the image into an allowed registry, or extend "
         "allowedRegistries / ecrAccountIds.",
         MANDATORY, resource_check=check_images_from_allowed_registries,
         config={"allowedRegistries": {**_STRING_LIST, "description": "registry/repository prefixes, e.g. "
                                       "docker.io/vllm/ (Docker Hub images are docker.io/<org>/...)",
                                       "default": catalog_registries()},
                 "ecrAccountIds": {**_STRING_LIST, "items": {"type": "string", "pattern": "^[0-9]{12}$"},
                                   "description": "AWS accounts whose ECR registries are allowed (your account: a "
                                   "policy cannot see it)", "default": []}}),
    Rule("no-workloads-in-system-namespaces",
         "Service workloads run in their own namespace, never in kube-system or default, where they would share "
         "the cluster components' permissions and policies. Fix: the service's namespace.",
         MANDATORY, resource_check=check_not_in_system_namespaces,
         config={"forbiddenNamespaces": {**_STRING_LIST, "description": "namespaces no service workload runs in",
                                         "default": ["kube-system", "default"]}}),
    Rule("workloads-have-network-policy",
         "Every workload's pods are selected by NetworkPolicies restricting both ingress and egress, so only the "
         "load balancer path reaches the proxy and only monitoring reaches the engine's metrics. Fix: a default-deny "
         "policy plus the allowed traffic (components.network_policy).",
         MANDATORY, stack_check=check_workloads_have_network_policy),
    Rule("public-endpoint-protected",
         "An internet-facing load balancer terminates TLS on every port, admits only listed source ranges and "
         "reaches only an authenticating proxy. Fix: exposure.tls_certificate_arn and exposure.allowed_cidrs in the "
         "requirements, or an internal exposure.",
         MANDATORY, stack_check=check_public_endpoint_protected,
         config={"authProxyImages": {**_STRING_LIST, "description": "images of authenticating proxies (repository, "
                                     "without tag)", "default": ["envoyproxy/envoy"]}}),
    Rule("compliance-private-only",
         "A stack whose requirements (privateOnly: the offline preview sets it from its requirements file) or "
         "recorded compliance are private_only has no internet-facing load balancer, keeps network.private_only, "
         "runs SageMaker models in a VPC and lands on a platform with a private API. Fix: re-plan instead of editing "
         "the stack config.",
         MANDATORY, stack_check=check_compliance_private_only,
         config={"privateOnly": {"type": "boolean", "description": "judge every stack as private-only, whatever "
                                 "its own record says (the offline preview sets it from the stack's requirements); "
                                 "false: the record decides", "default": False}}),
    Rule("compliance-customer-managed-kms",
         "A stack whose requirements (customerManagedKms) or recorded compliance are customer_managed_kms encrypts its model store with its own KMS "
         "key and lands on a platform whose secrets (the API key) are KMS-encrypted. Fix: re-plan.",
         MANDATORY, stack_check=check_compliance_customer_managed_kms,
         config={"customerManagedKms": {"type": "boolean", "description": "judge every stack as needing "
                                         "customer-managed keys, whatever its own record says; false: the record "
                                         "decides", "default": False}}),
    Rule("compliance-audit-logging",
         "A stack whose requirements (auditLogging) or recorded compliance are audit_logging lands on a platform whose cluster sends Kubernetes "
         "audit logs (as its StackReference reports). Fix: re-plan the platform.",
         MANDATORY, stack_check=check_compliance_audit_logging,
         config={"auditLogging": {"type": "boolean", "description": "judge every stack as needing audit logs, "
                                   "whatever its own record says; false: the record decides", "default": False}}),
    Rule("compliance-regions",
         "A stack's AWS resources live in its requirements' regions (regionsAllowed) and its recorded "
         "regions_allowed, whatever the environment's allowedRegions. Fix: re-plan for an allowed region.",
         MANDATORY, stack_check=check_compliance_regions,
         config={"regionsAllowed": {**_STRING_LIST, "description": "the regions every stack is judged against, "
                                     "whatever its own record says (the narrower of both applies); empty: the "
                                     "record decides", "default": []}}),
    Rule("compliance-production",
         "A stack of a production environment (production, from the policy config) or whose recorded compliance "
         "says production never scales to zero and never runs on spot capacity. Fix: re-plan instead of editing "
         "production or the autoscaling bounds.",
         MANDATORY, stack_check=check_compliance_production,
         config={"production": {"type": "boolean", "description": "the environment is production: every "
                                 "stack is judged as production whatever its own record says, and (given in the "
                                 "file) a plan whose environment says otherwise is refused; false: the record "
                                 "decides", "default": False}}),
)

RULES_BY_NAME: Final = {r.name: r for r in RULES}


def _crossguard_res(type_: str, name: str, urn: str, props: Mapping[str, Any], parent: str | None,
                    provider: Any) -> Res:
    return Res(type=type_, name=name, urn=urn, props=plain(props), parent=parent,
               provider=plain(provider.props) if provider is not None else None)


def res_from_args(args: ResourceValidationArgs) -> Res:
    """A CrossGuard resource-validation request as a `Res` (parent URN from the options)."""
    return _crossguard_res(args.resource_type, args.name, args.urn, args.props, args.opts.parent, args.provider)


def res_from_policy_resource(resource: PolicyResource) -> Res:
    """A CrossGuard stack resource as a `Res` (parent URN from the parent resource, else the options)."""
    parent = resource.parent.urn if resource.parent is not None else resource.opts.parent
    return _crossguard_res(resource.resource_type, resource.name, resource.urn, resource.props, parent,
                           resource.provider)


def _policy(rule: Rule) -> ResourceValidationPolicy | StackValidationPolicy:
    schema = PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config.items()}) if rule.config else None
    if rule.resource_check is not None:

        def validate_resource(args: ResourceValidationArgs, report: ReportViolation) -> None:
            for _, message in rule.findings([res_from_args(args)], rule.with_defaults(args.get_config())):
                report(message, None)  # CrossGuard attaches the resource's URN

        return ResourceValidationPolicy(rule.name, rule.description, validate_resource, rule.enforcement_level,
                                        schema)

    def validate_stack(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [res_from_policy_resource(r) for r in args.resources]
        for res, message in rule.findings(resources, rule.with_defaults(args.get_config())):
            report(message, res.urn if res is not None else None)

    return StackValidationPolicy(rule.name, rule.description, validate_stack, rule.enforcement_level, schema)


#: The CrossGuard policies, one per rule, in `RULES` order.
POLICIES: Final = [_policy(rule) for rule in RULES]

