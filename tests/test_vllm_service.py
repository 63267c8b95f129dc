"""VllmService: GPU pods with /dev/shm, weights from S3 by the pod's identity, and an NLB with a long idle timeout."""

from __future__ import annotations

import json

import pytest

from blueprints.manifests import validate_manifest
from blueprints.preview import run_under_mocks
from components.vllm_service import VllmService, VllmServiceArgs
from tests.blueprint_builders import derive, manifests, pod_spec
from tests.conftest import vllm_blueprint

LB = "service.beta.kubernetes.io/aws-load-balancer-"


def run_vllm(bp, **kwargs):
    return run_under_mocks(lambda: VllmService(bp.stack, VllmServiceArgs(blueprint=bp, bucket_name="store", **kwargs))
                           and None, stack=bp.stack)


def service(run):
    [svc] = [m for m in manifests(run) if m["kind"] == "Service"]
    return svc


@pytest.fixture(scope="module")
def prod_run(chat_prod):
    return run_vllm(chat_prod)


def test_service_is_an_internet_facing_nlb_without_private_only(prod_run, chat_prod):
    svc = service(prod_run)
    assert chat_prod.network.private_only is False
    assert svc["spec"]["type"] == "LoadBalancer"
    ann = svc["metadata"]["annotations"]
    assert ann[f"{LB}scheme"] == "internet-facing"
    assert ann[f"{LB}type"] == "external" and ann[f"{LB}nlb-target-type"] == "ip"


def test_private_only_gives_an_internal_load_balancer(chat_prod):
    ann = service(run_vllm(derive(chat_prod, network={"private_only": True})))["metadata"]["annotations"]
    assert ann[f"{LB}scheme"] == "internal"


def test_idle_timeout_is_set_above_the_longest_streamed_response(prod_run, chat_prod):
    ann = service(prod_run)["metadata"]["annotations"]
    value = ann[f"{LB}listener-attributes.TCP-{chat_prod.engine.port}"]
    key, seconds = value.split("=")
    assert key == "tcp.idle_timeout.seconds"
    assert chat_prod.network.load_balancer_idle_timeout_s < int(seconds) <= 6000


def test_without_expose_the_service_is_cluster_internal(chat_prod):
    svc = service(run_vllm(chat_prod, expose=False))
    assert svc["spec"]["type"] == "ClusterIP" and not svc["metadata"].get("annotations")


def test_load_balancer_carries_the_blueprint_tags(prod_run, chat_prod):
    tags = service(prod_run)["metadata"]["annotations"][f"{LB}additional-resource-tags"]
    assert dict(kv.split("=") for kv in tags.split(",")) == chat_prod.tags


def test_dev_shm_is_memory_backed_and_grows_with_tensor_parallel(chat_prod):
    sizes = {}
    for tp in (1, 2, 8):
        [shm] = [v for v in pod_spec(run_vllm(vllm_blueprint(tp, base=chat_prod)))["volumes"] if v["name"] == "dshm"]
        assert shm["emptyDir"]["medium"] == "Memory"
        sizes[tp] = int(shm["emptyDir"]["sizeLimit"].removesuffix("Gi"))
    assert sizes[1] < sizes[2] < sizes[8]


def test_weights_are_copied_from_s3_by_the_pod_identity_with_an_explicit_region(prod_run, chat_prod):
    pod = pod_spec(prod_run)
    [init] = pod["initContainers"]
    assert f"s3://store/models/{chat_prod.model.name}/" in init["args"]
    assert {"name": "AWS_DEFAULT_REGION", "value": chat_prod.region} in init["env"]
    text = json.dumps(manifests(prod_run))
    assert "AWS_SECRET_ACCESS_KEY" not in text and "AWS_ACCESS_KEY_ID" not in text
    assert pod["serviceAccountName"] == "chat-assistant-vllm"


def test_weights_land_in_a_node_local_volume_never_a_shared_read_write_once_claim(prod_run):
    pod = pod_spec(prod_run)
    [models] = [v for v in pod["volumes"] if v["name"] == "models"]
    assert set(models) == {"name", "emptyDir"}
    assert not any("persistentVolumeClaim" in v for v in pod["volumes"])
    assert not [m for m in manifests(prod_run) if m["kind"] == "PersistentVolumeClaim"]


def test_copy_step_limits_and_volume_grow_with_the_model(chat_prod):
    seen = {}
    for gib in (15.0, 140.0):
        bp = derive(chat_prod, models=[{**chat_prod.model.model_dump(mode="json"), "weights_gib": gib}])
        pod = pod_spec(run_vllm(bp))
        limits = pod["initContainers"][0]["resources"]["limits"]
        [models] = [v for v in pod["volumes"] if v["name"] == "models"]
        storage = int(limits["ephemeral-storage"].removesuffix("Gi"))
        assert storage >= gib and models["emptyDir"]["sizeLimit"] == limits["ephemeral-storage"]
        seen[gib] = (storage, int(limits["memory"].removesuffix("Gi")))
    assert seen[140.0][0] > seen[15.0][0] and seen[140.0][1] > seen[15.0][1]


def test_containers_are_unprivileged_and_cannot_escalate(prod_run):
    pod = pod_spec(prod_run)
    for c in pod["containers"] + pod["initContainers"]:
        assert c["securityContext"]["privileged"] is False
        assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_gpu_pods_tolerate_the_taint_and_request_tensor_parallel_gpus(chat_prod):
    pod = pod_spec(run_vllm(vllm_blueprint(4, base=chat_prod)))
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"


def test_every_manifest_validates_strictly_and_has_the_recommended_labels(prod_run):
    for m in manifests(prod_run):
        assert validate_manifest(m) == [], m["kind"]
        assert {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by"} <= set(m["metadata"]["labels"])
