"""WeightsCopy: copy an `s3://` model source into the stack's model store at deploy time, for stacks with no cluster
to run the sync Job on (SageMaker endpoints), so the model reads the stack's encrypted store, never the source.

A Lambda function (`lambda_src/copy_weights.py`: boto3's managed server-side copy) with a role of its own: read of
the source prefix (and kms:Decrypt on the source's declared key), write of the model's store prefix (and the store's
key), its own log group. `aws.lambda_.Invocation` runs it synchronously once, and again whenever its input (source or
destination) changes (pulumi-aws `lambda.Invocation`: "only invokes the function when the arguments call for a
create or replace"); a failed copy fails the deploy, before the model that reads the store is created. To roll out
new weights, point `weights_uri` at a new prefix (a version folder): the copy runs again and the model is replaced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import ServedModel
from components.naming import LAMBDA_FUNCTION, ROLE, bounded, fit
from components.weights_storage import MODELS_PREFIX, WeightsStorage
from components.weights_sync import S3_SCHEME, sync_policy_json

#: The handler's source file, shipped as the function's code.
HANDLER_FILE = Path(__file__).parent / "lambda_src" / "copy_weights.py"
HANDLER = "copy_weights.handler"
#: Lambda's longest run, s (Lambda quotas: "Function timeout 900 seconds (15 minutes)"). The largest model a
#: SageMaker plan holds (its volume limit: defaults.SAGEMAKER_MAX_VOLUME_GIB) copies within it at >= 0.4 GiB/s of
#: server-side copy. [assumption] parallel UploadPartCopy reaches that in-region.
TIMEOUT_S = 900
MEMORY_MB = 512
LOG_RETENTION_DAYS = 30


def source_location(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` -> (`bucket`, `a/b/`); a bare bucket -> (`bucket`, ``)."""
    bucket, _, prefix = uri.removeprefix(S3_SCHEME).partition("/")
    return bucket, prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def function_name(bp: Blueprint, model: ServedModel) -> str:
    """`<stack>-copy-<model>`, within Lambda's 64 characters (`components.naming.bounded`)."""
    return bounded(f"{bp.stack}-copy-{model.name}", LAMBDA_FUNCTION)


def copy_input(model: ServedModel, bucket_name: str) -> str:
    """The invocation's JSON input: source bucket and prefix, the store bucket and the model's prefix."""
    bucket, prefix = source_location(model.source_uri)
    return json.dumps({"source_bucket": bucket, "source_prefix": prefix, "destination_bucket": bucket_name,
                       "destination_prefix": f"{MODELS_PREFIX}/{model.name}/"}, sort_keys=True)


def logs_statement(region: str, name: str) -> dict:
    """Write the function's own log group only."""
    return {"Sid": "WriteOwnLogs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": [f"arn:aws:logs:{region}:*:log-group:/aws/lambda/{name}:*"]}


@dataclass
class WeightsCopyArgs:
    """Inputs of `WeightsCopy`.

    Args:
        blueprint: the planned stack; `model` is one of its models with an `s3://` source.
        model: the model to copy.
        store: the stack's model store.
    """

    blueprint: Blueprint
    model: ServedModel
    store: WeightsStorage


class WeightsCopy(pulumi.ComponentResource):
    """Role, log group, function and one synchronous invocation copying a model's `s3://` source into the store.

    Outputs: `role_arn`, `function_name`.
    """

    def __init__(self, name: str, args: WeightsCopyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:WeightsCopy", name, None, opts)
        bp, model = args.blueprint, args.model
        if not model.source_uri.startswith(S3_SCHEME):
            raise ValueError(f"WeightsCopy copies s3:// sources; {model.name} comes from {model.source_uri}")
        child = pulumi.ResourceOptions(parent=self)
        fn_name = function_name(bp, model)
        trust = json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
            sort_keys=True)
        self.role = aws.iam.Role(fit(name, "role", ROLE), assume_role_policy=trust, tags=bp.tags, opts=child)
        policy_json = sync_policy_json(args.store.write_policy_json([model.name]), [model]).apply(
            lambda text: _with_logs(text, bp.region, fn_name))
        policy = aws.iam.RolePolicy(f"{name}-policy", role=self.role.id, policy=policy_json, opts=child)
        logs = aws.cloudwatch.LogGroup(f"{name}-logs", name=f"/aws/lambda/{fn_name}",
                                       retention_in_days=LOG_RETENTION_DAYS, tags=bp.tags, opts=child)
        self.function = aws.lambda_.Function(
            f"{name}-function", name=fn_name, role=self.role.arn, runtime=aws.lambda_.Runtime.PYTHON3D13,
            handler=HANDLER, code=pulumi.AssetArchive({HANDLER_FILE.name: pulumi.FileAsset(str(HANDLER_FILE))}),
            timeout=TIMEOUT_S, memory_size=MEMORY_MB, architectures=["arm64"], tags=bp.tags,
            description=f"Copies {model.source_uri} into the model store of {bp.stack}",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, logs]))
        self.invocation = aws.lambda_.Invocation(
            f"{name}-run", function_name=self.function.name,
            input=pulumi.Output.from_input(args.store.bucket_name).apply(lambda bucket: copy_input(model, bucket)),
            opts=child)
        self.role_arn = self.role.arn
        self.function_name = self.function.name
        self.register_outputs({"role_arn": self.role_arn, "function_name": self.function_name})


def _with_logs(policy_text: str, region: str, fn_name: str) -> str:
    doc = json.loads(policy_text)
    doc["Statement"].append(logs_statement(region, fn_name))
    return json.dumps(doc, sort_keys=True)
