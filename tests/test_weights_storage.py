"""WeightsStorage: private, encrypted, versioned, TLS-only model store; read/write grants scoped to model prefixes."""

from __future__ import annotations

import json

from blueprints.review.preview import run_under_mocks
from components.weights_storage import WeightsStorage, WeightsStorageArgs, read_only_policy, write_policy

TAGS = {"service": "chat", "environment": "prod"}
BUCKET_ARN = "arn:aws:s3:::store"


def run_storage(**kwargs):
    def body():
        storage = WeightsStorage("store", WeightsStorageArgs(tags=TAGS, **kwargs))
        return {"read": storage.read_policy_json(["llama"]), "write": storage.write_policy_json(["llama"])}
    return run_under_mocks(body, stack="chat-prod", config={"aws:region": "us-east-1"})


def test_bucket_blocks_every_kind_of_public_access():
    block = run_storage().one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                          "restrictPublicBuckets"))


def test_bucket_is_encrypted_with_sse_kms_and_a_bucket_key():
    [rule] = run_storage().one(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration").inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    assert rule["bucketKeyEnabled"] is True


def test_customer_managed_kms_uses_a_rotating_key_for_the_bucket():
    run = run_storage(customer_managed_kms=True)
    key = run.one("aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    [rule] = run.one(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration").inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"].startswith("arn:aws:kms:")
    assert "kms:Decrypt" in run.outputs["read"]


def test_bucket_policy_denies_requests_without_tls():
    policy = json.loads(run_storage().one("aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
    [deny] = policy["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_read_policy_grants_only_the_model_prefix_and_no_writes():
    policy = json.loads(read_only_policy(BUCKET_ARN, ["llama"]))
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert actions == {"s3:GetObject", "s3:ListBucket"}
    [get] = [s for s in policy["Statement"] if s["Action"] == ["s3:GetObject"]]
    assert get["Resource"] == ["arn:aws:s3:::store/models/llama/*"]


def test_repository_root_listing_is_off_by_default_and_never_grants_object_reads():
    default = json.loads(read_only_policy(BUCKET_ARN, ["a"]))
    rooted = json.loads(read_only_policy(BUCKET_ARN, ["a"], list_repository_root=True))

    def prefixes(policy):
        [listing] = [s for s in policy["Statement"] if s["Sid"] == "ListModelWeights"]
        return listing["Condition"]["StringLike"]["s3:prefix"]
    assert "models/" not in prefixes(default) and "models/" in prefixes(rooted)
    assert [s for s in rooted["Statement"] if s["Sid"] == "ReadModelWeights"][0]["Resource"] == [
        "arn:aws:s3:::store/models/a/*"]


def test_write_policy_puts_only_under_the_model_prefix():
    policy = json.loads(write_policy(BUCKET_ARN, ["llama"]))
    [put] = [s for s in policy["Statement"] if "s3:PutObject" in s["Action"]]
    assert put["Resource"] == ["arn:aws:s3:::store/models/llama/*"]
    assert "s3:DeleteObject" not in json.dumps(policy)


def test_every_taggable_child_carries_the_tags():
    run = run_storage(customer_managed_kms=True)
    for r in run.of_type("aws:s3/bucket:Bucket") + run.of_type("aws:kms/key:Key"):
        assert r.inputs["tags"] == TAGS
