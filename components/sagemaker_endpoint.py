"""SageMakerEndpoint: a managed endpoint (Model, EndpointConfiguration, Endpoint) and its execution role: real-time,
or asynchronous for a batch (`batch.async_inference`: requests and results in the stack's model store).

Timeouts and the volume follow the model's size: SageMaker fails the health check of a large model that is still
loading, or the download of one that is still copying, when these keep their defaults. The blueprint's engine values
are kept when larger than what the model needs; otherwise they are raised (never above SageMaker's 3600 s / 512 GB).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from blueprints.contracts.sections import ECR_IMAGE, SageMakerEngine
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Task, has_instance_storage
from components.naming import ENDPOINT_CONFIGURATION, ROLE, SAGEMAKER_ENDPOINT, SAGEMAKER_MODEL, bounded, fit
from components.weights_storage import MODELS_PREFIX

_ECR_IMAGE = re.compile(ECR_IMAGE)


@dataclass(frozen=True)
class VariantSizing:
    """Model-size-driven settings of the production variant."""

    startup_health_check_timeout_s: int
    model_data_download_timeout_s: int
    volume_size_gb: int | None


def variant_sizing(bp: Blueprint) -> VariantSizing:
    """The variant's timers as planned from the startup budget (`blueprints.plan.builders.sagemaker.sagemaker_timers`), and
    its volume: none on instance types with local NVMe storage (SageMaker rejects `VolumeSizeInGB` there)."""
    engine: SageMakerEngine = bp.engine  # type: ignore[assignment]
    volume = None if has_instance_storage(bp.compute.instance_type) else engine.volume_size_gib
    return VariantSizing(engine.container_startup_health_check_timeout_s, engine.model_data_download_timeout_s,
                         volume)


def ecr_repository_arn(image: str) -> str:
    """`arn:aws:ecr:<region>:<account>:repository/<name>` of an ECR image URI; ValueError for other registries (a
    blueprint's engine.image is one: `Blueprint` refuses others)."""
    found = _ECR_IMAGE.match(image)
    if not found:
        raise ValueError(f"engine.image {image!r} is not an ECR image URI (<account>.dkr.ecr.<region>.amazonaws.com/"
                         "<repo>:<tag>): SageMaker pulls serving containers from ECR only")
    return f"arn:aws:ecr:{found['region']}:{found['account']}:repository/{found['repo']}"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix/` -> (`bucket`, `some/prefix/`); a prefix ends with `/`; the whole bucket
    (`s3://bucket/`) has the prefix ``."""
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"{uri!r} is not an s3://bucket/prefix/ URI")
    bucket, prefix = uri[5:].split("/", 1)
    return bucket, prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def model_data_uri(bp: Blueprint, bucket_name: str) -> str:
    """Where SageMaker downloads the model from: always the stack's model store, `models/<name>/` (SSE-KMS, in the
    endpoint's region as SageMaker requires: "The model artifacts must be in an S3 bucket that is in the same region
    as the model", CreateModel ModelDataUrl). An `s3://` source is copied there first (`components.weights_copy`);
    an `hf://` model must be uploaded there (SageMaker runs no sync Job)."""
    return f"s3://{bucket_name}/{MODELS_PREFIX}/{bp.model.name}/"


def async_paths(bp: Blueprint, bucket_name: str) -> dict[str, str] | None:
    """A SageMaker asynchronous batch's S3 locations in the stack's model store (`batch.async_inference
    .output_prefix`): `input` (where the job that feeds the queue uploads each request's payload, InvokeEndpointAsync's
    InputLocation), `output` (S3OutputPath) and `failure` (S3FailurePath); None for a real-time endpoint."""
    a = bp.batch.async_inference if bp.batch is not None else None
    if a is None:
        return None
    base = f"s3://{bucket_name}/{a.output_prefix}"
    return {"input": f"{base}in/", "output": f"{base}out/", "failure": f"{base}failed/"}


def async_inference_config(bp: Blueprint, bucket_name: str, kms_key_arn: str | None) -> dict | None:
    """The endpoint configuration's `async_inference_config` (pulumi-aws 7.51.1 EndpointConfigurationAsyncInference
    ConfigArgs: `output_config` {`s3_output_path`, `s3_failure_path`, `kms_key_id`} and `client_config`
    {`max_concurrent_invocations_per_instance`}; SageMaker API AsyncInferenceConfig, botocore 1.44.8): results and
    failures under the stack's prefix of its model store, encrypted with the store's key, each instance taking its
    planned batch at once. None for a real-time endpoint."""
    paths = async_paths(bp, bucket_name)
    if paths is None:
        return None
    a = bp.batch.async_inference  # type: ignore[union-attr]
    output = {"s3_output_path": paths["output"], "s3_failure_path": paths["failure"]}
    if kms_key_arn is not None:
        output["kms_key_id"] = kms_key_arn
    return {"output_config": output,
            "client_config": {"max_concurrent_invocations_per_instance": a.max_concurrent_invocations_per_instance}}


def execution_policy(model_uri: str, *, image: str, region: str, kms_key_arn: str | None, in_vpc: bool,
                     async_io: dict[str, str] | None = None) -> str:
    """Least privilege: read the model's prefix, pull the one image, write the endpoint's logs (and VPC ENIs); an
    asynchronous endpoint (`async_io`, `async_paths`) also reads its requests' payloads and writes its results and
    failures there (the permissions awsdocs amazon-sagemaker-developer-guide
    doc_source/async-inference-create-endpoint-prerequisites.md lists: s3:GetObject, s3:PutObject,
    s3:AbortMultipartUpload, narrowed to those prefixes), encrypting them with the store's key."""
    bucket, prefix = split_s3_uri(model_uri)
    statements: list[dict] = [
        {"Sid": "ReadModelData", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*"]},
        {"Sid": "ListModelData", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{bucket}"],
         "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
    ]
    if async_io is not None:
        objects = {k: "arn:aws:s3:::{}/{}*".format(*split_s3_uri(uri)) for k, uri in async_io.items()}
        statements += [
            {"Sid": "ReadAsyncRequests", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [objects["input"]]},
            {"Sid": "WriteAsyncResults", "Effect": "Allow", "Action": ["s3:AbortMultipartUpload", "s3:PutObject"],
             "Resource": [objects["output"], objects["failure"]]},
        ]
    if kms_key_arn:
        statements.append({"Sid": "DecryptModelData", "Effect": "Allow", "Action": ["kms:Decrypt"],
                           "Resource": [kms_key_arn]})
        if async_io is not None:
            statements.append({"Sid": "EncryptAsyncResults", "Effect": "Allow", "Action": ["kms:GenerateDataKey"],
                               "Resource": [kms_key_arn]})
    statements += [
        {"Sid": "EcrAuth", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"]},
        {"Sid": "EcrPull", "Effect": "Allow", "Resource": [ecr_repository_arn(image)],
         "Action": ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]},
        {"Sid": "EndpointLogs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
         "Resource": [f"arn:aws:logs:{region}:*:log-group:/aws/sagemaker/Endpoints/*"]},
        {"Sid": "EndpointMetrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": ["*"],
         "Condition": {"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}}},
    ]
    if in_vpc:
        statements.append({"Sid": "VpcNetworkInterfaces", "Effect": "Allow", "Resource": ["*"], "Action": [
            "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
            "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs"]})
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def container_environment(bp: Blueprint) -> dict[str, str]:
    """The serving container's environment: for text generation, the LMI/TGI options, each a documented variable
    (docs.djl.ai LMI "Container and Model Configurations": `HF_MODEL_ID`, `OPTION_TENSOR_PARALLEL_DEGREE`,
    `OPTION_MAX_MODEL_LEN`, `OPTION_MAX_ROLLING_BATCH_SIZE`); unset engine fields render no variable."""
    engine: SageMakerEngine = bp.engine  # type: ignore[assignment]
    if bp.model.task is not Task.TEXT_GENERATION:
        return {}
    env = {"HF_MODEL_ID": "/opt/ml/model"}  # the downloaded model data, not a hub id: no egress to the hub
    for var, value in (("OPTION_TENSOR_PARALLEL_DEGREE", engine.tensor_parallel_degree),
                       ("OPTION_MAX_MODEL_LEN", engine.max_model_len),
                       ("OPTION_MAX_ROLLING_BATCH_SIZE", engine.max_rolling_batch_size)):
        if value is not None:
            env[var] = str(value)
    return env


@dataclass
class SageMakerEndpointArgs:
    """Inputs of `SageMakerEndpoint`.

    Args:
        blueprint: a sagemaker-endpoint blueprint (engine: image, instance count, timeouts, volume).
        bucket_name: the model store bucket; the model is read from its `models/<name>/` prefix (uncompressed).
        kms_key_arn: customer-managed key of the model store; also encrypts the endpoint's storage volume where the
            instance type has one. Defaults to none (AWS-managed keys).
        subnet_ids: private subnets for the model's VPC config; required with `network.private_only`.
        security_group_ids: security groups for the model's VPC config.
        rollback_alarm_names: CloudWatch alarms that roll a blue/green update back (`EndpointMonitoring`'s alarms
            above their steady state).
        instance_type_gate: the resource the endpoint waits for so that its scalable target is deregistered before
            an instance-type change (`components.autoscaling.instance_type_gate`). Defaults to none.
        weights_ready: what fills the store's model prefix first (the `WeightsCopy` of an `s3://` source); the model
            waits for it. Defaults to none (an `hf://` model uploaded by hand).
    """

    blueprint: Blueprint
    bucket_name: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    subnet_ids: pulumi.Input[list[str]] | None = None
    security_group_ids: list[pulumi.Input[str]] | None = None
    rollback_alarm_names: list[str] = field(default_factory=list)
    instance_type_gate: pulumi.Resource | None = None
    weights_ready: pulumi.Resource | None = None


#: The endpoint's one production variant (autoscaling and alarms address it by name).
VARIANT_NAME = "primary"
#: Blue/green: how long the canary (or, with all-at-once, the whole green fleet) bakes before the old fleet goes, long
#: enough that the alarms (5 x 60 s) can fire; SageMaker allows 0-3600 s (WaitIntervalInSeconds).
CANARY_WAIT_S = 600
#: A canary is at most half of the variant's instances ("the canary size should be less than or equal to 50% of the
#: new fleet's capacity": docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-blue-green-canary.html;
#: pulumi-aws 7.51 sagemaker.Endpoint canary_size: "less than or equal to 50% of the variant's total instance count").
CANARY_MAX_SHARE = 0.5
#: How long the old (blue) fleet is kept after the shift, for a fast rollback, s.
BLUE_FLEET_TERMINATION_WAIT_S = 300


def endpoint_name(bp: Blueprint) -> str:
    """The SageMaker endpoint name: the stack name, within SageMaker's 63 characters (`components.naming.bounded`: a
    longer one keeps a prefix and a digest of the whole, never a trailing hyphen)."""
    return bounded(bp.stack, SAGEMAKER_ENDPOINT)


def fleet_instances(bp: Blueprint) -> int:
    """The fewest instances the variant runs during an update: its initial count, never below the autoscaling
    minimum the scalable target holds."""
    engine: SageMakerEngine = bp.engine  # type: ignore[assignment]
    return min(engine.initial_instance_count, max(1, bp.autoscaling.min_replicas))


def traffic_routing(bp: Blueprint) -> dict:
    """A one-instance canary when one instance is at most `CANARY_MAX_SHARE` of the variant (two instances or more);
    otherwise all at once, baking `CANARY_WAIT_S` on the whole green fleet under the rollback alarms."""
    if 1 <= CANARY_MAX_SHARE * fleet_instances(bp):
        return {"type": "CANARY", "wait_interval_in_seconds": CANARY_WAIT_S,
                "canary_size": {"type": "INSTANCE_COUNT", "value": 1}}
    return {"type": "ALL_AT_ONCE", "wait_interval_in_seconds": CANARY_WAIT_S}


def deployment_config(bp: Blueprint, alarm_names: list[str]) -> dict:
    """Blue/green updates (`traffic_routing`) with automatic rollback on `alarm_names`.

    The whole update may take the green fleet's cold start (the startup budget) plus the bake, twice over, within
    SageMaker's 600-14400 s bounds.
    """
    timeout = min(14400, max(600, 2 * (bp.startup.total_s + CANARY_WAIT_S)))
    return {
        "blue_green_update_policy": {
            "traffic_routing_configuration": traffic_routing(bp),
            "termination_wait_in_seconds": BLUE_FLEET_TERMINATION_WAIT_S,
            "maximum_execution_timeout_in_seconds": timeout,
        },
        "auto_rollback_configuration": {"alarms": [{"alarm_name": n} for n in alarm_names]},
    }


class SageMakerEndpoint(pulumi.ComponentResource):
    """SageMaker Model + EndpointConfiguration + Endpoint, with a least-privilege execution role.

    With `network.private_only`, the model runs in the given private subnets with network isolation (no internet
    egress from the container; weights come from S3 through SageMaker).

    Outputs: `endpoint_name`, `invocation_url`.
    """

    def __init__(self, name: str, args: SageMakerEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:SageMakerEndpoint", name, None, opts)
        bp = args.blueprint
        if not isinstance(bp.engine, SageMakerEngine):
            raise ValueError(f"SageMakerEndpoint needs a sagemaker-endpoint blueprint, got {bp.archetype.value}")
        private = bp.network.private_only
        if private and (args.subnet_ids is None or not args.security_group_ids):
            raise ValueError("network.private_only needs subnet_ids and security_group_ids for the model's VPC config")
        engine = bp.engine
        ecr_repository_arn(engine.image)  # fail before registering anything
        child = pulumi.ResourceOptions(parent=self)
        model = bp.model
        trust = json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
            sort_keys=True)
        self.execution_role = aws.iam.Role(fit(name, "execution-role", ROLE), assume_role_policy=trust, tags=bp.tags,
                                           opts=child)
        key = args.kms_key_arn if args.kms_key_arn is not None else ""
        if args.weights_ready is None:
            pulumi.log.warn(f"{model.name}: source {model.source_uri} is not copied by the stack; upload the weights "
                            f"to the model store's {MODELS_PREFIX}/{model.name}/ prefix before the endpoint is "
                            "created", self)
        model_uri = pulumi.Output.from_input(args.bucket_name).apply(lambda bucket: model_data_uri(bp, bucket))
        policy = aws.iam.RolePolicy(
            f"{name}-execution-policy", role=self.execution_role.id,
            policy=pulumi.Output.all(model_uri, key, args.bucket_name).apply(lambda parts: execution_policy(
                parts[0], image=engine.image, region=bp.region, kms_key_arn=parts[1] or None, in_vpc=private,
                async_io=async_paths(bp, parts[2]))),
            opts=child)
        self.model = aws.sagemaker.Model(
            fit(name, "model", SAGEMAKER_MODEL),
            execution_role_arn=self.execution_role.arn,
            primary_container={
                "image": engine.image,
                "model_data_source": {"s3_data_sources": [{
                    "s3_uri": model_uri, "s3_data_type": "S3Prefix", "compression_type": "None"}]},
                "environment": container_environment(bp) or None,
            },
            vpc_config={"subnets": args.subnet_ids, "security_group_ids": args.security_group_ids} if private else None,
            enable_network_isolation=private,
            tags=bp.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, *([args.weights_ready]
                                                                          if args.weights_ready else [])]))
        sizing = variant_sizing(bp)
        storage_kms = None if has_instance_storage(bp.compute.instance_type) else args.kms_key_arn
        self.endpoint_config = aws.sagemaker.EndpointConfiguration(
            fit(name, "endpoint-config", ENDPOINT_CONFIGURATION),
            production_variants=[{
                "variant_name": VARIANT_NAME,
                "model_name": self.model.name,
                "instance_type": bp.compute.instance_type,
                "initial_instance_count": engine.initial_instance_count,
                "container_startup_health_check_timeout_in_seconds": sizing.startup_health_check_timeout_s,
                "model_data_download_timeout_in_seconds": sizing.model_data_download_timeout_s,
                "volume_size_in_gb": sizing.volume_size_gb,
            }],
            kms_key_arn=storage_kms,
            async_inference_config=pulumi.Output.all(args.bucket_name, key).apply(
                lambda parts: async_inference_config(bp, parts[0], parts[1] or None))
            if bp.batch is not None and bp.batch.async_inference is not None else None,
            tags=bp.tags,
            opts=child)
        # The endpoint is named after the stack so its alarms can name it before it exists (no dependency cycle
        # between the alarms and the rollback configuration that lists them).
        gate = [args.instance_type_gate] if args.instance_type_gate is not None else []
        self.endpoint = aws.sagemaker.Endpoint(f"{name}-endpoint", name=endpoint_name(bp),
                                               endpoint_config_name=self.endpoint_config.name,
                                               deployment_config=deployment_config(bp, args.rollback_alarm_names),
                                               tags=bp.tags,
                                               opts=pulumi.ResourceOptions(parent=self, depends_on=gate))
        self.endpoint_name = self.endpoint.name
        # InvokeEndpoint's path, or InvokeEndpointAsync's for an asynchronous endpoint (botocore 1.44.8
        # sagemaker-runtime 2017-05-13 requestUri `/endpoints/{EndpointName}/async-invocations`).
        path = "/async-invocations" if bp.batch is not None and bp.batch.async_inference is not None else "/invocations"
        self.invocation_url = pulumi.Output.concat(f"https://runtime.sagemaker.{bp.region}.amazonaws.com/endpoints/",
                                                   self.endpoint.name, path)
        self.register_outputs({"endpoint_name": self.endpoint_name, "invocation_url": self.invocation_url})
