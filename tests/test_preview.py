"""Offline preview: the real __main__.py under the mock engine, on the bundled example's stack configs."""

from __future__ import annotations

import pytest

from blueprints.core.errors import StackConfigError
from blueprints.review.manifests import validate_manifest
from blueprints.review.preview import run_preview
from tests.conftest import ROOT, plan_env, requirements_with, vllm_blueprint, write_stacks


@pytest.fixture()
def stacks(tmp_path, chat_prod):
    write_stacks([chat_prod], tmp_path)
    return tmp_path


def preview(stacks_dir, stack="chat-assistant-prod"):
    return run_preview(stack, stacks_dir=stacks_dir, program=ROOT / "__main__.py")


def deployment(report):
    [dep] = [m for m in report.manifests if m["kind"] == "Deployment"]
    return dep


def test_preview_lists_bucket_and_gpu_deployment(stacks, chat_prod):
    report = preview(stacks)
    types = {r.type for r in report.resources}
    assert "aws:s3/bucket:Bucket" in types
    assert "kubernetes:apps/v1:Deployment" in types
    assert report.archetype == "vllm-gpu"
    container = deployment(report)["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(chat_prod.compute.gpus_per_replica)


def test_deployment_mounts_memory_backed_dev_shm(stacks, chat_prod):
    pod = deployment(preview(stacks))["spec"]["template"]["spec"]
    [shm] = [v for v in pod["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{int(chat_prod.engine.shm_size_gib)}Gi"}
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/dev/shm"] == "dshm"


def test_dev_shm_grows_with_tensor_parallel(tmp_path, chat_prod):
    sizes = {}
    for tp in (1, 4):
        folder = tmp_path / f"tp{tp}"
        write_stacks([vllm_blueprint(tp, base=chat_prod)], folder)
        pod = deployment(preview(folder))["spec"]["template"]["spec"]
        [shm] = [v for v in pod["volumes"] if v["name"] == "dshm"]
        sizes[tp] = int(shm["emptyDir"]["sizeLimit"].removesuffix("Gi"))
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == str(tp)
        assert f"--tensor-parallel-size={tp}" in pod["containers"][0]["args"]
    assert sizes[4] == 4 * sizes[1]


def test_every_manifest_is_strictly_valid(stacks):
    report = preview(stacks)
    assert len(report.manifests) >= 4
    problems = {m["kind"]: validate_manifest(m) for m in report.manifests}
    assert all(not p for p in problems.values()), problems


def test_gpu_pods_tolerate_the_gpu_taint(stacks):
    pod = deployment(preview(stacks))["spec"]["template"]["spec"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]


def test_engine_flags_reach_the_container(stacks, chat_prod):
    args = deployment(preview(stacks))["spec"]["template"]["spec"]["containers"][0]["args"]
    e = chat_prod.engine
    for flag in (f"--max-model-len={e.max_model_len}", f"--max-num-seqs={e.max_num_seqs}",
                 f"--gpu-memory-utilization={e.gpu_memory_utilization}", f"--dtype={e.dtype}"):
        assert flag in args


def test_no_static_aws_keys_anywhere(stacks):
    report = preview(stacks)
    text = str(report.to_json())
    assert "AWS_SECRET_ACCESS_KEY" not in text and "AWS_ACCESS_KEY_ID" not in text
    vllm = deployment(report)["spec"]["template"]["spec"]["containers"][0]  # streams from S3 (no init container)
    assert {"name": "AWS_REGION", "value": "us-east-1"} in vllm["env"]


def test_json_report_has_the_documented_shape(stacks):
    data = preview(stacks).to_json()
    assert {"stack", "archetype", "resources", "manifests", "outputs"} <= set(data)
    assert data["stack"] == "chat-assistant-prod"
    bucket = next(r for r in data["resources"] if r["type"] == "aws:s3/bucket:Bucket")
    assert set(bucket) == {"urn", "type", "name", "parent", "read", "depends_on", "inputs"}
    assert bucket["parent"] == "chat-assistant-prod-weights" and bucket["read"] is False
    [reference] = [r for r in data["resources"] if r["type"] == "pulumi:pulumi:StackReference"]
    assert reference["read"] is True  # the platform's outputs are read, not created
    deployment = next(r for r in data["resources"] if r["type"] == "kubernetes:apps/v1:Deployment")
    names = {r["urn"]: r["name"] for r in data["resources"]}
    waits = {names.get(u, u) for u in deployment["depends_on"]}
    # the provider built from the platform's kubeconfig, the namespace, the node pool and the Pod Identity binding
    assert {"chat-assistant-prod-k8s", "chat-assistant-prod-namespace", "chat-assistant-prod-node-pool",
            "chat-assistant-prod-serving-binding"} <= waits
    assert data["outputs"]["weights_uri"].endswith("/models/llama-3-1-8b/")


def test_report_is_deterministic(stacks):
    assert preview(stacks).to_json() == preview(stacks).to_json()


def test_missing_stack_lists_the_known_ones(stacks):
    with pytest.raises(StackConfigError, match="known stacks: chat-assistant-prod"):
        preview(stacks, "chat-assistant-qa")


def test_dev_stack_previews_with_one_replica_on_spot(tmp_path):
    dev = plan_env(requirements_with(), "dev")
    write_stacks([dev], tmp_path)
    dep = deployment(preview(tmp_path, "chat-assistant-dev"))
    assert dep["spec"]["replicas"] == 1


def test_program_config_missing_from_the_stack_is_a_clear_error(stacks):
    program = stacks / "program.py"
    program.write_text("import pulumi\npulumi.Config('servingblueprints').require_secret('apiKey')\n")
    with pytest.raises(StackConfigError, match=r"needs config 'servingblueprints:apiKey'; set it with "
                                               r"`pulumi config set --secret servingblueprints:apiKey"):
        run_preview("chat-assistant-prod", stacks_dir=stacks, program=program)


def test_secrets_in_the_stack_file_are_masked_in_the_report(stacks):
    path = stacks / "Pulumi.chat-assistant-prod.yaml"
    path.write_text(path.read_text().replace("config:\n", "config:\n  servingblueprints:hfToken: {secure: v1:abc}\n", 1))
    program = stacks / "program.py"
    program.write_text("import pulumi\n"
                       "pulumi.export('probe', pulumi.Config('servingblueprints').require_secret('hfToken'))\n")
    report = run_preview("chat-assistant-prod", stacks_dir=stacks, program=program)
    assert report.outputs["probe"] == "[secret]"


def test_the_mock_engine_registers_resources_without_walking_the_python_stack_and_restores_the_sdk(monkeypatch):
    """Under the mocks nothing reads a registration's stack trace, so the preview builds none (each would read every
    frame's source line); the SDK's own function is back afterwards, and walks the stack again."""
    import traceback

    from pulumi.runtime import resource

    from blueprints.review.preview import run_under_mocks
    from components.network import Network, NetworkArgs

    walked: list[int] = []
    extract = traceback.extract_stack
    monkeypatch.setattr(traceback, "extract_stack", lambda *a, **k: walked.append(1) or extract(*a, **k))
    traced = resource._get_stack_trace
    args = NetworkArgs(region="us-east-1", tags={"service": "chat", "environment": "prod"})
    run = run_under_mocks(lambda: {"private": Network("net", args).private_subnet_ids}, stack="chat-prod",
                          config={"aws:region": "us-east-1"})
    assert len(run.of_type("aws:ec2/subnet:Subnet")) == 6 and len(run.outputs["private"]) == 3
    assert walked == []
    assert resource._get_stack_trace is traced
    traced()
    assert walked == [1]
