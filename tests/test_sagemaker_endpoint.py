"""SageMaker endpoint: model-size-driven timeouts and volume, VPC config when private, least-privilege role."""

from __future__ import annotations

import json

import pytest

from blueprints.catalog import has_instance_storage
from components.sagemaker_endpoint import SageMakerEndpoint, SageMakerEndpointArgs, ecr_repository_arn, variant_sizing
from tests.blueprint_builders import derive, run_component, run_program, sagemaker_blueprint, sized_model


def variant(run):
    [v] = run.one("aws:sagemaker/endpointConfiguration:EndpointConfiguration").inputs["productionVariants"]
    return v


@pytest.fixture(scope="module")
def run(chat_prod):
    return run_program(sagemaker_blueprint(chat_prod, instance_type="ml.g6e.2xlarge"))


def test_timeouts_grow_with_model_size(chat_prod):
    small = variant(run_program(sagemaker_blueprint(chat_prod, weights_gib=15.0)))
    large = variant(run_program(sagemaker_blueprint(chat_prod, weights_gib=130.0)))
    for key in ("containerStartupHealthCheckTimeoutInSeconds", "modelDataDownloadTimeoutInSeconds"):
        assert large[key] > small[key]
        assert 60 <= small[key] <= 3600 and large[key] <= 3600


def test_the_planned_timers_reach_the_endpoint_configuration_unchanged(chat_prod):
    bp = sagemaker_blueprint(chat_prod, weights_gib=1.0)
    bp = derive(bp, engine={**bp.engine.model_dump(mode="json"), "container_startup_health_check_timeout_s": 1200})
    assert variant_sizing(bp).startup_health_check_timeout_s == 1200
    assert variant(run_program(bp))["containerStartupHealthCheckTimeoutInSeconds"] == 1200


def test_volume_grows_with_the_model_on_ebs_instances_and_is_omitted_on_local_nvme(chat_prod):
    # Every SageMaker type in the catalog has local NVMe, so a type with an EBS volume (ml.inf2.xlarge) is not one a
    # blueprint may name; the component's sizing for it is checked on an unvalidated copy.
    def ebs(gib: float):
        bp = sagemaker_blueprint(chat_prod, weights_gib=gib)
        return variant_sizing(bp.model_copy(update={"compute": bp.compute.model_copy(
            update={"instance_type": "ml.inf2.xlarge"})}))

    small, large = ebs(15.0), ebs(130.0)
    assert large.volume_size_gb > small.volume_size_gb >= 2 * 15
    nvme = variant(run_program(sagemaker_blueprint(chat_prod, instance_type="ml.g5.2xlarge")))
    assert "volumeSizeInGb" not in nvme
    assert has_instance_storage("ml.g5.2xlarge") and has_instance_storage("ml.p4d.24xlarge")
    assert not has_instance_storage("ml.inf2.xlarge") and not has_instance_storage("ml.c7i.xlarge")


def test_instance_type_and_count_come_from_the_plan(run, chat_prod):
    v = variant(run)
    # The builder starts the endpoint at the autoscaling floor (within min_replicas-max_replicas).
    assert v["instanceType"] == "ml.g6e.2xlarge" and v["initialInstanceCount"] == chat_prod.autoscaling.min_replicas >= 2


def test_model_uses_the_pinned_ecr_image_and_reads_the_uncompressed_prefix(run, chat_prod):
    container = run.one("aws:sagemaker/model:Model").inputs["primaryContainer"]
    assert container["image"].startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/") and ":" in container["image"]
    [source] = container["modelDataSource"]["s3DataSources"]
    assert source["s3DataType"] == "S3Prefix" and source["compressionType"] == "None"
    assert source["s3Uri"].endswith(f"/models/{chat_prod.model.name}/")
    assert container["environment"]["HF_MODEL_ID"] == "/opt/ml/model"


def test_lmi_options_render_only_when_planned(chat_prod):
    bp = sagemaker_blueprint(chat_prod)
    planned = derive(bp, engine={**bp.engine.model_dump(mode="json"), "tensor_parallel_degree": 1,
                                 "max_rolling_batch_size": 32})
    env = run_program(planned).one("aws:sagemaker/model:Model").inputs["primaryContainer"]["environment"]
    assert env["OPTION_TENSOR_PARALLEL_DEGREE"] == "1" and env["OPTION_MAX_ROLLING_BATCH_SIZE"] == "32"
    assert "OPTION_MAX_MODEL_LEN" not in env


def test_execution_role_is_least_privilege(run):
    policy = json.loads(run.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert "s3:PutObject" not in actions and not any(a.endswith(":*") or a == "*" for a in actions)
    [pull] = [s for s in policy["Statement"] if s["Sid"] == "EcrPull"]
    assert pull["Resource"] == [
        "arn:aws:ecr:us-east-1:763104351884:repository/huggingface-pytorch-tgi-inference"]
    [logs] = [s for s in policy["Statement"] if s["Sid"] == "EndpointLogs"]
    assert logs["Resource"][0].endswith(":log-group:/aws/sagemaker/Endpoints/*")
    assert not [s for s in policy["Statement"] if s["Sid"] == "VpcNetworkInterfaces"]
    trust = json.loads(run.one("aws:iam/role:Role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}


def test_private_only_puts_the_model_in_private_subnets_with_network_isolation(chat_prod):
    r = run_program(sagemaker_blueprint(chat_prod, private_only=True))
    model = r.one("aws:sagemaker/model:Model").inputs
    assert len(model["vpcConfig"]["subnets"]) == 3 and len(model["vpcConfig"]["securityGroupIds"]) == 1
    assert model["enableNetworkIsolation"] is True
    # The VPC and its endpoints are the shared platform's (read through its StackReference), not this stack's.
    assert r.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") == [] and r.of_type("aws:ec2/vpc:Vpc") == []
    [ref] = [x for x in r.records if x.type == "pulumi:pulumi:StackReference"]
    assert ref.read and ref.name.endswith("/servingblueprints/platform-prod-us-east-1")
    policy = json.loads(r.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    assert [s for s in policy["Statement"] if s["Sid"] == "VpcNetworkInterfaces"]


def test_without_private_only_no_network_or_vpc_config(run):
    assert "vpcConfig" not in run.one("aws:sagemaker/model:Model").inputs
    assert run.of_type("aws:ec2/vpc:Vpc") == []


def test_customer_managed_kms_encrypts_the_endpoint_volume_where_there_is_one(chat_prod):
    bp = derive(sagemaker_blueprint(chat_prod), storage={"customer_managed_kms": True})
    cfg = run_program(bp).one("aws:sagemaker/endpointConfiguration:EndpointConfiguration").inputs
    assert "kmsKeyArn" not in cfg  # every catalogued SageMaker type has local NVMe: no EBS volume to encrypt
    # A type with an EBS volume (not in the catalog, so on an unvalidated copy) gets the store's key on it.
    ebs = bp.model_copy(update={"compute": bp.compute.model_copy(update={"instance_type": "ml.inf2.xlarge"})})
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    run = run_component(lambda: SageMakerEndpoint("ebs", SageMakerEndpointArgs(
        blueprint=ebs, bucket_name="store", kms_key_arn=key)), ebs)
    assert run.one("aws:sagemaker/endpointConfiguration:EndpointConfiguration").inputs["kmsKeyArn"] == key


def test_outputs_name_the_invocation_url_and_dashboards(run, chat_prod):
    assert run.outputs["endpoint"].startswith("https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/")
    assert run.outputs["endpoint"].endswith("/invocations")
    assert run.outputs["endpoint_name"] in run.outputs["dashboards"]["sagemaker"]
    for r in run.records:
        if r.custom and r.type.startswith("aws:sagemaker"):
            assert r.inputs["tags"] == chat_prod.tags


def test_non_ecr_images_are_rejected_with_the_field_name():
    with pytest.raises(ValueError, match="engine.image"):
        ecr_repository_arn("docker.io/library/tgi:1.0")


def _deployment(run):
    return run.one("aws:sagemaker/endpoint:Endpoint").inputs["deploymentConfig"]


def test_a_one_instance_variant_deploys_all_at_once_with_baking_and_rollback():
    """The old config put a 1-instance canary on a 1-instance variant: more than the 50 % SageMaker allows."""
    from tests.conftest import plan_env, requirements_with

    pilot = plan_env(requirements_with("prototype-summarizer"), "pilot")
    assert pilot.engine.initial_instance_count == 1
    config = _deployment(run_program(pilot))
    routing = config["blueGreenUpdatePolicy"]["trafficRoutingConfiguration"]
    assert routing == {"type": "ALL_AT_ONCE", "waitIntervalInSeconds": 600}
    assert [a["alarmName"] for a in config["autoRollbackConfiguration"]["alarms"]] == [
        "prototype-summarizer-pilot-model-latency-p95", "prototype-summarizer-pilot-invocation-5xx"]


def test_a_canary_of_one_instance_needs_two_or_more(chat_prod):
    bp = derive(sagemaker_blueprint(chat_prod), autoscaling={"min_replicas": 2})
    routing = _deployment(run_program(bp))["blueGreenUpdatePolicy"]["trafficRoutingConfiguration"]
    assert routing["type"] == "CANARY" and routing["canarySize"] == {"type": "INSTANCE_COUNT", "value": 1}
    single = derive(sagemaker_blueprint(chat_prod), autoscaling={"min_replicas": 1})
    assert _deployment(run_program(single))["blueGreenUpdatePolicy"]["trafficRoutingConfiguration"]["type"] == \
        "ALL_AT_ONCE"


def test_rollback_alarms_never_sit_at_steady_state(chat_prod):
    """The old GPU-memory alarm (> 90 %) sat where vLLM preallocates (gpu_memory_utilization 0.9)."""
    from blueprints.contracts.observability import ROLLBACK_MARGIN, cloudwatch_alarm_specs

    for bp in (sagemaker_blueprint(chat_prod), derive(sagemaker_blueprint(chat_prod), models=[
            sized_model(chat_prod.model.name, 1.0, fmt="safetensors")])):
        for spec in cloudwatch_alarm_specs(bp):
            if spec.rollback:
                assert spec.steady_state is not None and spec.steady_state * ROLLBACK_MARGIN <= spec.threshold
            if spec.metric_name == "GPUMemoryUtilization":
                assert not spec.rollback and not bp.model.task.generative


def test_the_endpoint_waits_for_the_instance_type_gate_and_the_target_is_replaced_with_it(run):
    gate = run.one("random:index/randomId:RandomId")
    assert gate.delete_before_replace and gate.inputs["keepers"]["instance_type"] == "ml.g6e.2xlarge"
    assert gate.urn in run.one("aws:sagemaker/endpoint:Endpoint").dependencies
    assert run.one("aws:appautoscaling/target:Target").replace_with == (gate.urn,)
    assert run.one("aws:appautoscaling/policy:Policy").replace_with == (gate.urn,)


def test_alarms_notify_the_planned_topic():
    from tests.conftest import plan_env, requirements_with

    pilot = plan_env(requirements_with("prototype-summarizer"), "pilot")
    assert pilot.alerting.sns_topic_arn is None  # planned without platform.yaml: the plan says nobody is paged
    assert any("alerts reach nobody" in line for line in pilot.rationale)
    topic = "arn:aws:sns:us-east-1:123456789012:ml-serving-alerts"
    bp = derive(pilot, alerting={"sns_topic_arn": topic})
    for alarm in run_program(bp).of_type("aws:cloudwatch/metricAlarm:MetricAlarm"):
        assert alarm.inputs["alarmActions"] == [topic]
