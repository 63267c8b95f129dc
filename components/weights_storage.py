"""WeightsStorage: the per-stack model store, an S3 bucket that is private, encrypted, versioned and TLS-only."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.naming import BUCKET, fit

#: Prefix under which model weights live: s3://<bucket>/models/<model-name>/
MODELS_PREFIX = "models"


@dataclass
class WeightsStorageArgs:
    """Inputs of `WeightsStorage`.

    Args:
        tags: AWS tags for every taggable child.
        customer_managed_kms: encrypt with a new customer-managed KMS key (rotation on); otherwise SSE-KMS with the
            AWS-managed `aws/s3` key.
        retain_on_delete: keep the bucket (and key) when the stack is destroyed. Defaults to True.
        noncurrent_version_expiry_days: delete overwritten weight versions after this many days. Defaults to 30.
        bucket_tags: tags for the bucket only, besides `tags` (e.g. the stack's compliance record). Defaults to none.
    """

    tags: dict[str, str]
    customer_managed_kms: bool = False
    retain_on_delete: bool = True
    noncurrent_version_expiry_days: int = 30
    bucket_tags: dict[str, str] = field(default_factory=dict)


class WeightsStorage(pulumi.ComponentResource):
    """An S3 bucket for model weights: public access blocked, SSE-KMS, versioned, TLS-only, old versions expired.

    Outputs: `bucket_name`, `bucket_arn`, `kms_key_arn` (None unless customer-managed).

    Example:
        storage = WeightsStorage("chat-prod-weights", WeightsStorageArgs(tags=tags), opts)
        policy_json = storage.read_policy_json("llama-3-1-8b")
    """

    def __init__(self, name: str, args: WeightsStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:WeightsStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain_on_delete)
        self.kms_key = None
        if args.customer_managed_kms:
            self.kms_key = aws.kms.Key(f"{name}-key", description=f"Model weights of {name}",
                                       enable_key_rotation=True, deletion_window_in_days=30, tags=args.tags, opts=child)
        self.bucket = aws.s3.Bucket(fit(name, "bucket", BUCKET), force_destroy=False,
                                    tags={**args.tags, **args.bucket_tags},
                                    opts=child)
        on_bucket = pulumi.ResourceOptions(parent=self)
        aws.s3.BucketPublicAccessBlock(f"{name}-public-access", bucket=self.bucket.id, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True,
                                       restrict_public_buckets=True, opts=on_bucket)
        aws.s3.BucketVersioning(f"{name}-versioning", bucket=self.bucket.id,
                                versioning_configuration={"status": "Enabled"}, opts=on_bucket)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption", bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {
                "sse_algorithm": "aws:kms",
                "kms_master_key_id": self.kms_key.arn if self.kms_key else None},
                "bucket_key_enabled": True}],
            opts=on_bucket)
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle", bucket=self.bucket.id,
            rules=[{"id": "expire-noncurrent-weights", "status": "Enabled", "filter": {"prefix": ""},
                    "noncurrent_version_expiration": {"noncurrent_days": args.noncurrent_version_expiry_days},
                    "abort_incomplete_multipart_upload": {"days_after_initiation": 7}}],
            opts=on_bucket)
        aws.s3.BucketPolicy(f"{name}-tls-only", bucket=self.bucket.id,
                            policy=self.bucket.arn.apply(_tls_only_policy), opts=on_bucket)
        self.bucket_name = self.bucket.bucket
        self.bucket_arn = self.bucket.arn
        self.kms_key_arn = self.kms_key.arn if self.kms_key else None
        self.register_outputs({"bucket_name": self.bucket_name, "bucket_arn": self.bucket_arn,
                               "kms_key_arn": self.kms_key_arn})

    def model_uri(self, model_name: str) -> pulumi.Output[str]:
        """`s3://<bucket>/models/<model_name>/`: where serving pods read this model's weights."""
        return pulumi.Output.concat("s3://", self.bucket_name, f"/{MODELS_PREFIX}/{model_name}/")

    def read_policy_json(self, model_names: list[str], *, list_repository_root: bool = False) -> pulumi.Output[str]:
        """IAM policy JSON granting read of exactly these models' prefixes (and KMS decrypt when customer-managed).

        Args:
            model_names: models whose `models/<name>/` prefixes may be read.
            list_repository_root: also allow listing `models/` itself (one level, no object reads), which a Triton
                server reading `s3://<bucket>/models` as its model repository needs. Defaults to False.
        """
        key_arn = self.kms_key.arn if self.kms_key else pulumi.Output.from_input("")
        return pulumi.Output.all(self.bucket_arn, key_arn).apply(
            lambda parts: read_only_policy(parts[0], model_names, kms_key_arn=parts[1] or None,
                                           list_repository_root=list_repository_root))

    def write_policy_json(self, model_names: list[str]) -> pulumi.Output[str]:
        """IAM policy JSON for the weights sync Job: write (and list) exactly these models' prefixes."""
        key_arn = self.kms_key.arn if self.kms_key else pulumi.Output.from_input("")
        return pulumi.Output.all(self.bucket_arn, key_arn).apply(
            lambda parts: write_policy(parts[0], model_names, kms_key_arn=parts[1] or None))


def _tls_only_policy(bucket_arn: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }],
    }, sort_keys=True)


def read_only_policy(bucket_arn: str, model_names: list[str], *, kms_key_arn: str | None = None,
                     list_repository_root: bool = False) -> str:
    """Least-privilege read policy: GetObject under each model's prefix, ListBucket limited to those prefixes
    (plus the bare `models` / `models/` prefixes with `list_repository_root`)."""
    prefixes = [f"{MODELS_PREFIX}/{m}/" for m in model_names]
    listable = [f"{p}*" for p in prefixes] + ([MODELS_PREFIX, f"{MODELS_PREFIX}/"] if list_repository_root else [])
    statements = [
        {"Sid": "ReadModelWeights", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [f"{bucket_arn}/{p}*" for p in prefixes]},
        {"Sid": "ListModelWeights", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringLike": {"s3:prefix": listable}}},
    ]
    if kms_key_arn:
        statements.append({"Sid": "DecryptModelWeights", "Effect": "Allow", "Action": ["kms:Decrypt"],
                           "Resource": [kms_key_arn]})
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def write_policy(bucket_arn: str, model_names: list[str], *, kms_key_arn: str | None = None) -> str:
    """Least-privilege write policy of the weights sync Job: put/overwrite objects under each model's prefix only."""
    prefixes = [f"{MODELS_PREFIX}/{m}/" for m in model_names]
    statements = [
        {"Sid": "WriteModelWeights", "Effect": "Allow",
         "Action": ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
         "Resource": [f"{bucket_arn}/{p}*" for p in prefixes]},
        {"Sid": "ListModelWeights", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}}},
    ]
    if kms_key_arn:
        statements.append({"Sid": "EncryptModelWeights", "Effect": "Allow",
                           "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": [kms_key_arn]})
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)
