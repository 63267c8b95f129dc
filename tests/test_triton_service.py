"""Triton: config.pbtxt per model from Triton's protobuf schema, S3 repository, ports, probes, GPU/CPU placement."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from blueprints.core.errors import problem_lines
from blueprints.review.manifests import validate_manifest
from components.triton_service import config_pbtxt
from tests.blueprint_builders import derive, manifests, pod_spec, run_program, triton_blueprint


@pytest.fixture(scope="module")
def gpu_bp(chat_prod):
    return triton_blueprint(chat_prod, gpu=True)


@pytest.fixture(scope="module")
def gpu_run(gpu_bp):
    return run_program(gpu_bp)


def parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def test_each_model_gets_a_config_pbtxt_object_in_the_repository(gpu_run, gpu_bp):
    objects = {r.inputs["key"]: r.inputs for r in gpu_run.of_type("aws:s3/bucketObjectv2:BucketObjectv2")}
    assert set(objects) == {f"models/{m.name}/config.pbtxt" for m in gpu_bp.engine.models}
    assert all(o["tags"] == gpu_bp.tags for o in objects.values())


def test_config_pbtxt_carries_backend_batching_and_instance_group_from_the_plan(gpu_run, gpu_bp):
    objects = {r.inputs["key"]: r.inputs["content"] for r in gpu_run.of_type("aws:s3/bucketObjectv2:BucketObjectv2")}
    ranker = parse(objects["models/ranker/config.pbtxt"])
    planned = gpu_bp.engine.models[0]
    assert (ranker.name, ranker.backend, ranker.max_batch_size) == ("ranker", "onnxruntime", planned.max_batch_size)
    assert ranker.dynamic_batching.max_queue_delay_microseconds == planned.max_queue_delay_microseconds
    [group] = ranker.instance_group
    assert model_config_pb2.ModelInstanceGroup.Kind.Name(group.kind) == "KIND_GPU"
    assert group.count == planned.instance_count


def test_a_model_that_does_not_batch_gets_no_dynamic_batching(gpu_bp):
    embedder = parse(config_pbtxt(gpu_bp.engine.models[1]))
    assert embedder.max_batch_size == 0 and not embedder.HasField("dynamic_batching")


def test_engine_models_must_name_served_models(gpu_bp):
    with pytest.raises(ValidationError) as exc:
        derive(gpu_bp, models=[gpu_bp.models[0].model_dump(mode="json")])
    [(where, message, _)] = problem_lines(exc.value, data=exc.value.errors()[0]["input"])
    assert where == "engine.models[1] (embedder).name" and "'embedder' is not a served model (ranker)" in message


def test_the_init_container_copies_the_repository_to_local_disk_with_the_pod_identity(gpu_run, gpu_bp):
    pod = pod_spec(gpu_run)
    [init] = pod["initContainers"]
    assert init["image"].startswith("public.ecr.aws/aws-cli/")
    for m in gpu_bp.models:  # config.pbtxt and the version folder of each model, from the stack's store
        assert any(a.endswith(f"/models/{m.name}/") for a in init["args"] if isinstance(a, str))
        assert f"/models/{m.name}" in init["args"]
    assert {"name": "AWS_REGION", "value": gpu_bp.region} in init["env"]
    ctr = pod["containers"][0]
    assert "--model-repository=/models" in ctr["args"]
    assert not any("s3://" in a for a in ctr["args"]) and not any(e["name"].startswith("AWS_") for e in ctr["env"])


def test_model_control_is_off_and_every_api_but_health_needs_the_key_from_the_secret(gpu_run):
    ctr = pod_spec(gpu_run)["containers"][0]
    assert "--model-control-mode=none" in ctr["args"]
    assert not any(a.startswith(("--load-model", "--model-control-mode=explicit")) for a in ctr["args"])
    apis = "metadata,inference,shared-memory,model-config,model-repository,statistics,trace,logging"
    assert f"--http-restricted-api={apis}:api-key=$(API_KEY)" in ctr["args"]
    assert f"--grpc-restricted-protocol={apis}:api-key=$(API_KEY)" in ctr["args"]
    assert {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "chat-assistant-api-key",
                                                              "key": "api-key"}}} in ctr["env"]


def test_http_grpc_and_metrics_ports_and_health_probes(gpu_run):
    ctr = pod_spec(gpu_run)["containers"][0]
    assert {p["name"]: p["containerPort"] for p in ctr["ports"]} == {"http": 8000, "grpc": 8001, "metrics": 8002}
    assert ctr["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert ctr["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert ctr["args"].count("--http-port=8000") == 1


def test_gpu_plan_places_pods_on_gpu_nodes(gpu_run, gpu_bp):
    pod = pod_spec(gpu_run)
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == str(gpu_bp.compute.gpus_per_replica)
    assert pod["nodeSelector"]["node.kubernetes.io/instance-type"] == gpu_bp.compute.instance_type


def test_cpu_plan_places_pods_on_cpu_nodes_without_gpu_toleration(chat_prod):
    run = run_program(triton_blueprint(chat_prod, gpu=False))
    pod = pod_spec(run)
    assert not pod.get("tolerations")
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"]["limits"]
    assert pod["nodeSelector"]["kubernetes.io/arch"] == "amd64"
    assert run.of_type("servingblueprints:index:GpuDevicePlugin") == []


def test_serving_role_reads_only_its_models(gpu_run, gpu_bp):
    [policy] = [r for r in gpu_run.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-serving-policy")]
    text = policy.inputs["policy"]
    assert '"models/"' not in text and "s3:PutObject" not in text
    assert all(f"models/{m.name}/" in text for m in gpu_bp.models)


def test_every_manifest_validates_strictly(gpu_run):
    found = manifests(gpu_run)
    assert {"Deployment", "Service", "ServiceAccount"} <= {m["kind"] for m in found}
    for m in found:
        assert validate_manifest(m) == [], m["kind"]


def test_metrics_are_served_on_a_cluster_ip_service_never_on_the_load_balancer(gpu_run):
    services = {m["metadata"]["name"]: m["spec"] for m in manifests(gpu_run) if m["kind"] == "Service"}
    lb = services["chat-assistant-triton"]
    assert lb["type"] == "LoadBalancer" and lb["ports"] == [{"name": "api", "port": 80, "targetPort": "api",
                                                             "protocol": "TCP"}]
    metrics = services["chat-assistant-triton-metrics"]
    assert metrics["type"] == "ClusterIP" and [p["port"] for p in metrics["ports"]] == [8002]
