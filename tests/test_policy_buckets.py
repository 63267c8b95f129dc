"""Stack policies on S3 buckets: KMS encryption, versioning, public access block (matched by reference or parent)."""

from __future__ import annotations

import pytest

from test_policy_support import policy_resource, stack_violations, urn

BUCKET = "aws:s3/bucket:Bucket"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
PUBLIC_ACCESS = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
STORAGE = "servingblueprints:index:WeightsStorage"

COMPLIANT = {
    SSE: {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}, "bucketKeyEnabled": True}]},
    VERSIONING: {"versioningConfiguration": {"status": "Enabled"}},
    PUBLIC_ACCESS: {"blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True,
                    "restrictPublicBuckets": True},
}
CASES = [  # policy, setting type, the one field changed, message
    ("bucket-encrypted-kms", SSE,
     {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]},
     "Bucket 'weights-bucket': its BucketServerSideEncryptionConfiguration does not comply: objects are not encrypted "
     "with KMS; add a BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms (components.WeightsStorage "
     "does)"),
    ("bucket-versioned", VERSIONING, {"versioningConfiguration": {"status": "Suspended"}},
     "Bucket 'weights-bucket': its BucketVersioning does not comply: overwritten or deleted weights cannot be "
     "recovered; add a BucketVersioning with versioningConfiguration.status Enabled"),
    ("bucket-public-access-blocked", PUBLIC_ACCESS, {**COMPLIANT[PUBLIC_ACCESS], "restrictPublicBuckets": False},
     "Bucket 'weights-bucket': its BucketPublicAccessBlock does not comply: a bucket policy or ACL could make the "
     "weights public; add a BucketPublicAccessBlock with blockPublicAcls, blockPublicPolicy, ignorePublicAcls, "
     "restrictPublicBuckets all true"),
]


def storage(settings: dict[str, dict], *, by_reference: bool) -> list:
    """A WeightsStorage component with a bucket and its settings, linked by `bucket` name or only by parent."""
    parent = policy_resource(STORAGE, {}, name="weights")
    bucket = policy_resource(BUCKET, {"bucket": "weights-34fd614", "tags": {}}, name="weights-bucket", parent=parent)
    ref = {"bucket": "weights-34fd614"} if by_reference else {}
    others = [policy_resource(t, {**ref, **props}, name=f"weights-{t.rsplit(':', 1)[-1]}",
                              parent=parent if not by_reference else None) for t, props in settings.items()]
    return [parent, bucket, *others]


@pytest.mark.parametrize("by_reference", [True, False], ids=["by bucket reference", "by parent component"])
@pytest.mark.parametrize("policy", [c[0] for c in CASES])
def test_a_bucket_with_its_compliant_setting_passes(policy, by_reference):
    assert stack_violations(policy, storage(COMPLIANT, by_reference=by_reference)) == []


@pytest.mark.parametrize("by_reference", [True, False], ids=["by bucket reference", "by parent component"])
@pytest.mark.parametrize("policy, setting_type, changed, message", CASES, ids=[c[0] for c in CASES])
def test_a_bucket_whose_setting_has_one_field_changed_is_flagged(policy, setting_type, changed, message,
                                                                 by_reference):
    resources = storage({**COMPLIANT, setting_type: changed}, by_reference=by_reference)
    assert stack_violations(policy, resources) == [(urn(BUCKET, "weights-bucket"), message)]


@pytest.mark.parametrize("policy, setting_type", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_a_bucket_without_the_setting_resource_is_flagged(policy, setting_type):
    resources = storage({t: p for t, p in COMPLIANT.items() if t != setting_type}, by_reference=True)
    [(resource_urn, message)] = stack_violations(policy, resources)
    assert resource_urn == urn(BUCKET, "weights-bucket")
    assert message.startswith(f"Bucket 'weights-bucket' has no {setting_type.rsplit(':', 1)[-1]}: ")


def test_a_setting_of_another_bucket_does_not_cover_this_one():
    resources = storage(COMPLIANT, by_reference=True)
    resources[1] = policy_resource(BUCKET, {"bucket": "other-bucket"}, name="weights-bucket")
    assert [m.split(":")[0] for _, m in stack_violations("bucket-versioned", resources)] == [
        "Bucket 'weights-bucket' has no BucketVersioning"]
