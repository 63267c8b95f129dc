"""ONNX Runtime on CPU: requests == limits, intra-op threads == CPU limit, arch placement, weights from S3."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from blueprints.core import defaults
from blueprints.review.manifests import validate_manifest
from blueprints.core.errors import problem_lines
from tests.blueprint_builders import derive, manifests, onnx_blueprint, pod_spec, run_program


@pytest.fixture(scope="module")
def bp(chat_prod):
    return onnx_blueprint(chat_prod, cpu=4.0)


@pytest.fixture(scope="module")
def run(bp):
    return run_program(bp)


def test_requests_equal_limits(run):
    res = pod_spec(run)["containers"][0]["resources"]
    assert res["requests"] == res["limits"]
    assert res["limits"]["cpu"] == "4"


def test_intra_op_threads_equal_the_cpu_limit_in_the_model_config_and_omp(run, bp):
    ctr = pod_spec(run)["containers"][0]
    assert {"name": "OMP_NUM_THREADS", "value": ctr["resources"]["limits"]["cpu"]} in ctr["env"]
    [obj] = run.of_type("aws:s3/bucketObjectv2:BucketObjectv2")
    assert obj.inputs["key"] == f"models/{bp.model.name}/config.pbtxt"
    cfg = text_format.Parse(obj.inputs["content"], model_config_pb2.ModelConfig())
    assert cfg.backend == "onnxruntime"
    assert cfg.parameters["intra_op_thread_count"].string_value == ctr["resources"]["limits"]["cpu"]
    assert model_config_pb2.ModelInstanceGroup.Kind.Name(cfg.instance_group[0].kind) == "KIND_CPU"


def test_threads_that_differ_from_the_cpu_limit_are_rejected(bp):
    with pytest.raises(ValidationError) as exc:
        derive(bp, engine={**bp.engine.model_dump(mode="json"), "intra_op_threads": 16})
    [(where, problem, _)] = problem_lines(exc.value)
    assert where == "engine.intra_op_threads"
    assert "intra_op_threads=16" in problem and f"set it to {int(bp.compute.cpu_per_replica)}" in problem


@pytest.mark.parametrize("arch,label", [("x86_64", "amd64"), ("arm64", "arm64")])
def test_pods_select_the_planned_cpu_architecture(chat_prod, arch, label):
    pod = pod_spec(run_program(onnx_blueprint(chat_prod, arch=arch)))
    assert pod["nodeSelector"]["kubernetes.io/arch"] == label
    assert not pod.get("tolerations")


def test_on_an_existing_edge_cluster_only_the_architecture_is_selected(chat_prod):
    bp = onnx_blueprint(chat_prod, arch="arm64", platform="existing-cluster")
    run = run_program(bp, extra_config={"servingblueprints:kubeconfig": "apiVersion: v1"},
                      secret_keys=["servingblueprints:kubeconfig"])
    assert pod_spec(run)["nodeSelector"] == {"kubernetes.io/arch": "arm64"}
    assert run.of_type("aws:eks/cluster:Cluster") == []


def test_model_is_pulled_from_s3_into_a_local_repository(run, bp):
    pod = pod_spec(run)
    [init] = pod["initContainers"]
    assert any(str(a).endswith(f"/models/{bp.model.name}/") for a in init["args"])
    assert {"name": "AWS_DEFAULT_REGION", "value": bp.region} in init["env"]
    assert "--model-repository=/models" in pod["containers"][0]["args"]


def test_default_image_is_documented_and_the_blueprint_image_overrides_it(chat_prod):
    bp = onnx_blueprint(chat_prod)
    assert pod_spec(run_program(bp))["containers"][0]["image"] == defaults.ONNXRUNTIME_IMAGE
    custom = derive(bp, engine={**bp.engine.model_dump(mode="json"), "image": "example.com/ort-triton:1.2.3"})
    assert pod_spec(run_program(custom))["containers"][0]["image"] == "example.com/ort-triton:1.2.3"


def test_every_manifest_validates_strictly(run):
    for m in manifests(run):
        assert validate_manifest(m) == [], m["kind"]
