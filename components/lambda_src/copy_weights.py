"""Lambda handler of `components.weights_copy.WeightsCopy`: copy every object under an S3 prefix into the stack's
model store, server-side.

Runs in AWS Lambda's Python runtime, which bundles boto3 ("Lambda runtimes": the Python runtimes include the AWS SDK
for Python), so this file imports only boto3 and the standard library. `client.copy` is boto3's managed copy: one
CopyObject below the multipart threshold, UploadPartCopy parts above it (S3 refuses CopyObject of a source over
5 GiB), no bytes through the function. The destination objects get the store bucket's default encryption (SSE-KMS).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

#: Part size of multipart copies (and the threshold above which they are used): 256 MiB, well within S3's 5 GiB
#: part limit and 10,000 parts per object (S3 User Guide, "Amazon S3 multipart upload limits").
PART_BYTES = 256 * 1024**2
#: Parts copied at once per object, and objects copied at once.
PART_WORKERS = 8
OBJECT_WORKERS = 8
#: The event keys the handler requires.
EVENT_KEYS = ("source_bucket", "source_prefix", "destination_bucket", "destination_prefix")


def copy_prefix(s3, *, source_bucket: str, source_prefix: str, destination_bucket: str,
                destination_prefix: str) -> dict:
    """Copy every object under `s3://source_bucket/source_prefix` to the same relative keys under
    `s3://destination_bucket/destination_prefix`; {"objects": N, "bytes": B}.

    Raises:
        RuntimeError: nothing under the source prefix (a wrong URI must fail the deploy, not serve an empty model).
    """
    from boto3.s3.transfer import TransferConfig

    config = TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES,
                            max_concurrency=PART_WORKERS)
    objects = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=source_bucket, Prefix=source_prefix):
        objects += [(o["Key"], o["Size"]) for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    if not objects:
        raise RuntimeError(f"no objects under s3://{source_bucket}/{source_prefix}: check the model's weights_uri")

    def copy_one(item: tuple[str, int]) -> None:
        key, _ = item
        s3.copy({"Bucket": source_bucket, "Key": key}, destination_bucket,
                destination_prefix + key[len(source_prefix):], Config=config)

    with ThreadPoolExecutor(max_workers=OBJECT_WORKERS) as pool:
        list(pool.map(copy_one, objects))
    return {"objects": len(objects), "bytes": sum(size for _, size in objects)}


def handler(event: dict, context: object) -> dict:
    """Lambda entry point; `event` holds `EVENT_KEYS` (the `aws.lambda_.Invocation` input)."""
    import boto3

    missing = [k for k in EVENT_KEYS if not isinstance(event.get(k), str)]
    if missing:
        raise ValueError(f"invocation input lacks {missing}")
    return copy_prefix(boto3.client("s3"), **{k: event[k] for k in EVENT_KEYS})
