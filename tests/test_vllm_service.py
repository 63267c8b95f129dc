"""VllmService: GPU pods with /dev/shm, weights streamed (or copied) from S3 by the pod's identity, and an NLB with a
long idle timeout."""

from __future__ import annotations

import json

import pytest

from blueprints.review.manifests import validate_manifest
from blueprints.review.preview import run_under_mocks
from components.vllm_service import VllmService, VllmServiceArgs
from components.weights_delivery import StoreDelivery
from components.workload import Endpoint
from tests.blueprint_builders import derive, manifests, pod_spec, with_weights
from tests.conftest import vllm_blueprint

LB = "service.beta.kubernetes.io/aws-load-balancer-"
CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"


def run_vllm(bp, **kwargs):
    kwargs.setdefault("endpoint", Endpoint(api_key_secret="chat-assistant-api-key", vpc_cidrs=["10.0.0.0/16"]))
    return run_under_mocks(lambda: VllmService(bp.stack, VllmServiceArgs(blueprint=bp, weights=StoreDelivery("store"), **kwargs))
                           and None, stack=bp.stack)


def service(run):
    """The serving Service (not the metrics one)."""
    [svc] = [m for m in manifests(run) if m["kind"] == "Service" and not m["metadata"]["name"].endswith("-metrics")]
    return svc


def public(bp, **exposure):
    return derive(bp, network={"exposure": {"scope": "public", "tls_certificate_arn": CERT,
                                            "allowed_cidrs": ["203.0.113.0/24"], **exposure}})


@pytest.fixture(scope="module")
def prod_run(chat_prod):
    return run_vllm(chat_prod)


def test_service_is_an_internal_nlb_on_the_proxy_reachable_from_the_vpc_by_default(prod_run, chat_prod):
    svc = service(prod_run)
    assert chat_prod.network.private_only is False and chat_prod.network.exposure.scope.value == "internal"
    assert svc["spec"]["type"] == "LoadBalancer"
    ann = svc["metadata"]["annotations"]
    assert ann[f"{LB}scheme"] == "internal"
    assert ann[f"{LB}type"] == "external" and ann[f"{LB}nlb-target-type"] == "ip"
    assert ann[f"{LB}target-group-attributes"] == "preserve_client_ip.enabled=true"
    assert f"{LB}ssl-cert" not in ann
    assert svc["spec"]["ports"] == [{"name": "api", "port": 80, "targetPort": "api", "protocol": "TCP"}]
    assert svc["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/16"]


def test_public_exposure_is_an_internet_facing_tls_listener_open_only_to_the_allowed_cidrs(chat_prod):
    svc = service(run_vllm(public(chat_prod)))
    ann = svc["metadata"]["annotations"]
    assert ann[f"{LB}scheme"] == "internet-facing"
    assert ann[f"{LB}ssl-cert"] == CERT and ann[f"{LB}ssl-ports"] == "443"
    assert ann[f"{LB}ssl-negotiation-policy"].startswith("ELBSecurityPolicy-TLS13")
    assert svc["spec"]["ports"][0]["port"] == 443 and svc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]


def test_engine_port_and_metrics_are_never_on_the_load_balancer(prod_run, chat_prod):
    [metrics] = [m for m in manifests(prod_run) if m["metadata"]["name"] == "chat-assistant-vllm-metrics"]
    assert metrics["spec"]["type"] == "ClusterIP"
    assert metrics["spec"]["ports"] == [{"name": "metrics", "port": chat_prod.engine.port, "targetPort": "http",
                                         "protocol": "TCP"}]
    assert all(p["targetPort"] == "api" for p in service(prod_run)["spec"]["ports"])


def test_private_only_gives_an_internal_load_balancer(chat_prod):
    ann = service(run_vllm(derive(chat_prod, network={"private_only": True})))["metadata"]["annotations"]
    assert ann[f"{LB}scheme"] == "internal"


def test_idle_timeout_is_set_above_the_longest_streamed_response(prod_run, chat_prod):
    ann = service(prod_run)["metadata"]["annotations"]
    value = ann[f"{LB}listener-attributes.TCP-80"]
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


def copied(bp):
    """`bp` serving a PyTorch (.bin) checkpoint: a format the Run:ai streamer does not read, so it is copied."""
    return derive(bp, models=[{**m.model_dump(mode="json"), "format": "pytorch"} for m in bp.models])


def extra_config(args: list[str]) -> dict:
    [value] = [a.split("=", 1)[1] for a in args if a.startswith("--model-loader-extra-config=")]
    return json.loads(value)


def test_safetensors_stream_from_the_model_store_with_the_pod_identity_and_an_explicit_region(prod_run, chat_prod):
    pod = pod_spec(prod_run)
    vllm = pod["containers"][0]
    assert chat_prod.model.format.value == "safetensors"
    assert vllm["args"][0] == f"s3://store/models/{chat_prod.model.name}"
    assert "--load-format=runai_streamer" in vllm["args"]
    assert {"name": "AWS_REGION", "value": chat_prod.region} in vllm["env"]
    assert pod["initContainers"] == []  # no per-start copy
    text = json.dumps(manifests(prod_run))
    assert "AWS_SECRET_ACCESS_KEY" not in text and "AWS_ACCESS_KEY_ID" not in text
    assert pod["serviceAccountName"] == "chat-assistant-vllm"


def test_streamer_settings_are_the_keys_the_pinned_loader_accepts_as_positive_integers(prod_run):
    """vllm 0.24.0 runai_streamer_loader.py:34-65 raises on any other key and on a non-positive integer."""
    config = extra_config(pod_spec(prod_run)["containers"][0]["args"])
    assert set(config) <= {"distributed", "concurrency", "memory_limit"}
    assert config == {"concurrency": 16, "memory_limit": 5 * 1024**3}
    assert all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in config.values())


def test_streamed_pods_mount_no_weights_volume_and_claim_no_shared_one(prod_run):
    pod = pod_spec(prod_run)
    assert not [v for v in pod["volumes"] if v["name"] == "models"]
    assert not any(m["name"] == "models" for m in pod["containers"][0]["volumeMounts"])
    assert not any("persistentVolumeClaim" in v for v in pod["volumes"])
    assert not [m for m in manifests(prod_run) if m["kind"] == "PersistentVolumeClaim"]


def test_streamer_buffers_are_in_the_replica_memory_request(chat_prod):
    for tp in (1, 8):
        bp = vllm_blueprint(tp, base=chat_prod)
        assert bp.compute.memory_gib_per_replica >= bp.engine.shm_size_gib + 5 * tp


def test_other_formats_are_copied_by_an_init_container_into_a_node_local_volume(chat_prod):
    bp = copied(chat_prod)
    run = run_vllm(bp)
    pod = pod_spec(run)
    [init] = pod["initContainers"]
    assert f"s3://store/models/{bp.model.name}/" in init["args"]
    assert {"name": "AWS_DEFAULT_REGION", "value": bp.region} in init["env"]
    args = pod["containers"][0]["args"]
    assert args[0] == f"/models/{bp.model.name}" and not any(a.startswith("--load-format") for a in args)
    [models] = [v for v in pod["volumes"] if v["name"] == "models"]
    assert set(models) == {"name", "emptyDir"}


def test_copy_step_limits_and_volume_grow_with_the_model(chat_prod):
    seen = {}
    for gib in (15.0, 140.0):
        bp = copied(with_weights(chat_prod, gib))
        pod = pod_spec(run_vllm(bp))
        limits = pod["initContainers"][0]["resources"]["limits"]
        [models] = [v for v in pod["volumes"] if v["name"] == "models"]
        storage = int(limits["ephemeral-storage"].removesuffix("Gi"))
        assert storage >= gib and models["emptyDir"]["sizeLimit"] == limits["ephemeral-storage"]
        seen[gib] = (storage, int(limits["memory"].removesuffix("Gi")))
    assert seen[140.0][0] > seen[15.0][0] and seen[140.0][1] > seen[15.0][1]


def test_containers_are_unprivileged_and_cannot_escalate(prod_run):
    pod = pod_spec(prod_run)
    assert [c["name"] for c in pod["containers"]] == ["vllm", "auth-proxy"]
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
