"""WeightsSync: HF and S3 sources copied into the model store by Jobs on CPU/system nodes, never with static keys."""

from __future__ import annotations

import json

import pytest

from blueprints.review.manifests import validate_manifest
from blueprints.review.preview import run_under_mocks
from components.weights_sync import (
    WeightsSync,
    WeightsSyncArgs,
    source_read_statements,
    store_prefix,
    sync_deadline_s,
)
from tests.blueprint_builders import manifests, onnx_blueprint, run_program, with_weights


SYSTEM_NODES = {"servingblueprints.io/pool": "system"}


def run_sync(bp, *, token=None, node_selector=SYSTEM_NODES):
    def body():
        WeightsSync("sync", WeightsSyncArgs(blueprint=bp, bucket_name="store", hf_token=token,
                                            node_selector=node_selector))
    return run_under_mocks(body, stack=bp.stack)


def job(run, index=0):
    return [m for m in manifests(run) if m["kind"] == "Job"][index]


@pytest.fixture(scope="module")
def hf_run(chat_prod):
    return run_sync(chat_prod, token="hf_secret_value")


def test_hf_source_downloads_then_uploads_to_the_models_prefix(hf_run, chat_prod):
    pod = job(hf_run)["spec"]["template"]["spec"]
    [download] = pod["initContainers"]
    assert download["command"][:3] == ["hf", "download", "meta-llama/Llama-3.1-8B-Instruct"]
    [upload] = pod["containers"]
    assert upload["command"] == ["aws", "s3", "sync"]
    assert f"s3://store/models/{chat_prod.model.name}/" in upload["args"]


def test_hf_token_comes_from_a_kubernetes_secret_never_a_literal(hf_run):
    secret = [m for m in manifests(hf_run) if m["kind"] == "Secret"][0]
    assert secret["stringData"] == {"HF_TOKEN": "[secret]"}
    env = job(hf_run)["spec"]["template"]["spec"]["initContainers"][0]["env"]
    [token] = [e for e in env if e["name"] == "HF_TOKEN"]
    assert "value" not in token and token["valueFrom"]["secretKeyRef"]["key"] == "HF_TOKEN"
    assert "hf_secret_value" not in json.dumps([r.inputs for r in hf_run.records])


def test_without_a_token_no_secret_is_created_and_no_token_env_is_set(chat_prod):
    run = run_sync(chat_prod)
    assert [m for m in manifests(run) if m["kind"] == "Secret"] == []
    env = job(run)["spec"]["template"]["spec"]["initContainers"][0]["env"]
    assert "HF_TOKEN" not in {e["name"] for e in env}


def test_sync_job_runs_on_system_nodes_without_the_gpu_toleration(hf_run):
    pod = job(hf_run)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"servingblueprints.io/pool": "system"}
    assert "tolerations" not in pod
    assert all("nvidia.com/gpu" not in c["resources"]["limits"] for c in pod["containers"] + pod["initContainers"])


def test_on_an_existing_cluster_the_job_has_no_node_selector(chat_prod):
    assert "nodeSelector" not in job(run_sync(chat_prod, node_selector=None))["spec"]["template"]["spec"]


def test_scratch_volume_and_ephemeral_storage_grow_with_the_model(chat_prod):
    sizes = {}
    for gib in (15.0, 140.0):
        bp = with_weights(chat_prod, gib)
        pod = job(run_sync(bp))["spec"]["template"]["spec"]
        limit = int(pod["containers"][0]["resources"]["limits"]["ephemeral-storage"].removesuffix("Gi"))
        assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == f"{limit}Gi"
        assert limit >= gib
        sizes[gib] = limit
    assert sizes[140.0] > sizes[15.0]


def test_s3_source_is_copied_server_side_into_the_triton_version_folder(chat_prod):
    bp = onnx_blueprint(chat_prod)
    pod = job(run_sync(bp))["spec"]["template"]["spec"]
    [copy] = pod["containers"]
    assert copy["args"][:2] == [bp.model.source_uri, f"s3://store/models/{bp.model.name}/1/"]
    assert "initContainers" not in pod
    assert {v["name"] for v in pod["volumes"]} == {"home", "tmp"}  # only the hardening's writable dirs, no scratch
    assert store_prefix(bp, bp.model) == f"models/{bp.model.name}/1/"
    assert store_prefix(chat_prod, chat_prod.model) == f"models/{chat_prod.model.name}/"


def test_s3_sources_are_readable_only_under_their_prefix(chat_prod):
    bp = onnx_blueprint(chat_prod)
    statements = source_read_statements(bp.models)
    assert statements[0]["Resource"] == ["arn:aws:s3:::models-in/fraud-scorer/*"]
    assert statements[1]["Condition"]["StringLike"]["s3:prefix"] == ["fraud-scorer/*"]
    assert source_read_statements(chat_prod.models) == []


def test_deadline_grows_with_the_model(chat_prod):
    small = chat_prod.model
    large = small.model_copy(update={"weights_gib": 140.0})
    assert sync_deadline_s(large) > sync_deadline_s(small) >= 1800


def test_sync_manifests_validate_strictly_and_carry_no_static_keys(hf_run):
    for m in manifests(hf_run):
        assert validate_manifest(m) == [], m["kind"]
    assert "AWS_SECRET_ACCESS_KEY" not in json.dumps(manifests(hf_run))


def test_program_binds_the_sync_account_to_a_write_role_with_pod_identity(chat_prod):
    run = run_program(chat_prod)
    assocs = {r.inputs["serviceAccount"] for r in run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")}
    assert {"chat-assistant-weights-sync", "chat-assistant-vllm"} <= assocs
    [policy] = [r for r in run.of_type("aws:iam/rolePolicy:RolePolicy") if "weights-sync" in r.name]
    assert "s3:PutObject" in policy.inputs["policy"]
    [serving] = [r for r in run.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-serving-policy")]
    assert "s3:PutObject" not in serving.inputs["policy"]


def test_the_hf_download_keeps_only_what_vllm_loads_and_never_metas_original_folder(hf_run):
    """Meta's repositories ship `original/*.pth` beside the safetensors (~16 GB more for Llama-3.1-8B): excluded."""
    [download] = job(hf_run)["spec"]["template"]["spec"]["initContainers"]
    command = download["command"]
    includes = command[command.index("--include") + 1:command.index("--exclude")]
    excludes = command[command.index("--exclude") + 1:]
    assert "*.safetensors" in includes and "*.json" in includes
    assert not any(p.endswith((".pth", ".bin", ".pt")) for p in includes)
    assert excludes == ["original/*"]
