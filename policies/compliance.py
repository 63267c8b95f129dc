"""Compliance rules: buckets encrypted, versioned and private; private endpoints; SageMaker storage keys; allowed
regions; required tags; EKS audit logs."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any, Final

from blueprints.catalog import has_instance_storage
from policies.resources import INTERNAL_LB_ANNOTATIONS, UNKNOWN, Finding, Res, get, items, mapping

BUCKET = "aws:s3/bucket:Bucket"


def _bucket_settings(resources: Sequence[Res], setting_type: str) -> dict[str | None, list[Res]]:
    """Bucket id -> the `setting_type` resources that apply to it (by the `bucket` reference, else as siblings).

    A setting matches a bucket when its `bucket` input equals the bucket's `bucket`/`id` output; when that reference
    cannot be resolved (offline records carry inputs only, `pulumi preview` has unknowns), a setting matches the one
    bucket under the same parent component. Settings whose unknown reference matches no bucket are listed under
    None: they may belong to any bucket until `pulumi up` knows the names.
    """
    buckets = [r for r in resources if r.type == BUCKET]
    by_ref = {ref: b for b in buckets for ref in (b.props.get("bucket"), b.props.get("id")) if isinstance(ref, str)}
    siblings: dict[str | None, list[Res]] = {}
    for b in buckets:
        siblings.setdefault(b.parent, []).append(b)
    found: dict[str | None, list[Res]] = {b.id: [] for b in buckets} | {None: []}
    for setting in (r for r in resources if r.type == setting_type):
        ref = setting.props.get("bucket")
        bucket = by_ref.get(ref) if isinstance(ref, str) else None
        if bucket is None and setting.parent is not None and len(siblings.get(setting.parent, [])) == 1:
            bucket = siblings[setting.parent][0]
        if bucket is not None:
            found[bucket.id].append(setting)
        elif ref is UNKNOWN:
            found[None].append(setting)
    return found


def _bucket_check(setting_type: str, satisfied: Callable[[Mapping[str, Any]], bool | None], problem: str,
                  fix: str) -> Callable[[Sequence[Res], Mapping[str, Any]], list[Finding]]:
    """A stack check: every bucket has a `setting_type` resource for which `satisfied(props)` is not False."""
    kind = setting_type.rsplit(":", 1)[-1]

    def check(resources: Sequence[Res], config: Mapping[str, Any]) -> list[Finding]:
        findings: list[Finding] = []
        settings = _bucket_settings(resources, setting_type)
        for bucket in (r for r in resources if r.type == BUCKET):
            verdicts = [satisfied(s.props) for s in settings[bucket.id]]
            if not verdicts and settings[None]:
                continue  # a setting with a still-unknown bucket reference may be this bucket's
            if not verdicts:
                findings.append((bucket, f"{bucket.label} has no {kind}: {problem}; {fix}"))
            elif not any(v is not False for v in verdicts):
                findings.append((bucket, f"{bucket.label}: its {kind} does not comply: {problem}; {fix}"))
        return findings

    return check


def _sse_is_kms(props: Mapping[str, Any]) -> bool | None:
    algorithms = [get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm") for r in items(props.get("rules"))]
    if UNKNOWN in algorithms or props.get("rules") is UNKNOWN:
        return None
    return any(a in ("aws:kms", "aws:kms:dsse") for a in algorithms)


def _versioning_enabled(props: Mapping[str, Any]) -> bool | None:
    status = get(props, "versioningConfiguration", "status")
    return None if status is UNKNOWN else status == "Enabled"


_PUBLIC_ACCESS_FLAGS: Final = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def _public_access_blocked(props: Mapping[str, Any]) -> bool | None:
    flags = [props.get(k) for k in _PUBLIC_ACCESS_FLAGS]
    return None if UNKNOWN in flags else all(f is True for f in flags)


check_bucket_encrypted = _bucket_check(
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", _sse_is_kms,
    "objects are not encrypted with KMS",
    "add a BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms (components.WeightsStorage does)")
check_bucket_versioned = _bucket_check(
    "aws:s3/bucketVersioning:BucketVersioning", _versioning_enabled,
    "overwritten or deleted weights cannot be recovered",
    "add a BucketVersioning with versioningConfiguration.status Enabled")
check_bucket_public_access_blocked = _bucket_check(
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", _public_access_blocked,
    "a bucket policy or ACL could make the weights public",
    f"add a BucketPublicAccessBlock with {', '.join(_PUBLIC_ACCESS_FLAGS)} all true")


def check_private_endpoints(res: Res, config: Mapping[str, Any]) -> list[str]:
    """When `privateOnly`: no internet-facing LoadBalancer Service, no public EKS API, SageMaker models in a VPC."""
    if not config["privateOnly"]:
        return []
    props = res.props
    if res.type == "kubernetes:core/v1:Service" and get(props, "spec", "type") == "LoadBalancer":
        annotations = get(props, "metadata", "annotations")
        if annotations is UNKNOWN or UNKNOWN in mapping(annotations).values():
            return []  # judged at `pulumi up`
        if any(mapping(annotations).get(k) == v for k, v in INTERNAL_LB_ANNOTATIONS.items()):
            return []
        return [f"{res.label} is a LoadBalancer without an internal scheme, so AWS gives it a public address; add "
                "the annotation service.beta.kubernetes.io/aws-load-balancer-scheme: internal (or use ClusterIP)"]
    if res.type == "aws:eks/cluster:Cluster":
        public = get(props, "vpcConfig", "endpointPublicAccess")
        if public is None or public is True:  # EKS default: public
            return [f"{res.label} exposes its Kubernetes API on the internet (vpcConfig.endpointPublicAccess is "
                    f"{'unset, which defaults to true' if public is None else 'true'}); set "
                    "vpcConfig.endpointPublicAccess: false and endpointPrivateAccess: true"]
    if res.type == "aws:sagemaker/model:Model" and props.get("vpcConfig") is None:
        return [f"{res.label} has no vpcConfig, so its containers reach the internet; set vpcConfig with private "
                "subnets and security groups"]
    return []


def check_sagemaker_kms(res: Res, config: Mapping[str, Any]) -> list[str]:
    """SageMaker endpoint configurations encrypt the instances' storage volumes with a KMS key, except on instance
    types with local NVMe storage (`blueprints.catalog.has_instance_storage`): they have no EBS volume, SageMaker
    rejects a storage key for them, and their instance store is encrypted by the hardware."""
    if res.type != "aws:sagemaker/endpointConfiguration:EndpointConfiguration" or res.props.get("kmsKeyArn"):
        return []
    variants = res.props.get("productionVariants")
    types = [get(v, "instanceType") for v in variants] if isinstance(variants, list) else []
    if types and all(isinstance(t, str) and has_instance_storage(t) for t in types):
        return []
    return [f"{res.label} has no kmsKeyArn, so the ML storage volumes attached to the endpoint instances are not "
            "encrypted with your key; set kmsKeyArn to a KMS key ARN"]


def resource_region(res: Res) -> str | None:
    """The AWS region a resource lives in: its own `region` input (pulumi-aws 7) or else its provider's `region`."""
    own = res.props.get("region")
    if own is UNKNOWN:
        return None
    if isinstance(own, str):
        return own
    region = get(res.provider or {}, "region")
    return region if isinstance(region, str) else None


def check_region_allowed(res: Res, config: Mapping[str, Any]) -> list[str]:
    """AWS resources and AWS providers are in `allowedRegions`."""
    if res.type == "pulumi:providers:aws":
        region = res.props.get("region")
        region = region if isinstance(region, str) else None
    elif res.type.startswith("aws:"):
        region = resource_region(res)
    else:
        return []
    allowed = list(config["allowedRegions"])
    if region is None or region in allowed:
        return []
    return [f"{res.label} is in region {region!r}, outside the allowed {allowed}; set `aws:region` (or the "
            "resource's region) to an allowed region, or add it to allowedRegions in the policy config"]



@cache
def accepts_tags(type_token: str) -> bool:
    """Whether a pulumi-aws resource type takes a `tags` input (read from the installed pulumi-aws SDK)."""
    _, module_path, class_name = type_token.split(":")
    module_name = module_path.split("/")[0]
    for candidate in ("pulumi_aws" if module_name == "index" else f"pulumi_aws.{module_name}",
                      f"pulumi_aws.{module_name}_"):  # Python keywords get a trailing underscore (lambda_)
        try:
            cls = getattr(importlib.import_module(candidate), class_name, None)
        except ImportError:
            continue
        if cls is not None:
            return "tags" in inspect.signature(cls._internal_init).parameters
    return False


def check_required_tags(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Taggable AWS resources carry every tag in `requiredTags` (their own tags plus the provider's defaultTags)."""
    if not res.type.startswith("aws:") or not accepts_tags(res.type):
        return []
    tags = res.props.get("tags")
    if tags is UNKNOWN:
        return []
    present = {**mapping(get(res.provider or {}, "defaultTags", "tags")), **mapping(tags)}
    missing = [t for t in config["requiredTags"] if not present.get(t)]
    if not missing:
        return []
    return [f"{res.label} lacks the tag(s) {', '.join(missing)} needed for cost allocation and ownership; pass the "
            "blueprint's tags (service, environment, owner, cost-center) to every taggable resource"]


def check_audit_logs(res: Res, config: Mapping[str, Any]) -> list[str]:
    """When `auditLoggingRequired`: EKS clusters ship control-plane audit logs (enabledClusterLogTypes has audit)."""
    if res.type != "aws:eks/cluster:Cluster" or not config["auditLoggingRequired"]:
        return []
    log_types = res.props.get("enabledClusterLogTypes")
    if log_types is UNKNOWN or "audit" in items(log_types):
        return []
    return [f"{res.label} does not send Kubernetes audit logs to CloudWatch; add \"audit\" (and \"authenticator\") to "
            "enabledClusterLogTypes"]

