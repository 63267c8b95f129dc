"""Policies on GPU pods: nvidia.com/gpu limits, the GPU taint, /dev/shm for tensor parallel, startup probe budget."""

from __future__ import annotations

from test_policy_support import gpu_deployment, main_container, pod_annotations, resource_violations

DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def test_a_gpu_container_with_equal_request_and_limit_passes():
    assert resource_violations("gpu-limits-set", DEPLOYMENT, gpu_deployment()) == []


def test_a_gpu_request_without_a_limit_is_flagged():
    d = gpu_deployment()
    del main_container(d)["resources"]["limits"]["nvidia.com/gpu"]
    assert resource_violations("gpu-limits-set", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm' requests 1 nvidia.com/gpu but its limit is unset; set "
        "resources.limits['nvidia.com/gpu'] equal to the request (extended resources are not overcommitted)",
        "Deployment 'vllm' runs tensor_parallel_size=1 (servingblueprints.io/tensor-parallel-size) but no container "
        "sets resources.limits['nvidia.com/gpu'] >= 1; set the model server's GPU limit to the tensor-parallel "
        "degree"]


def test_a_tensor_parallel_pod_limited_to_fewer_gpus_than_its_degree_is_flagged():
    d = gpu_deployment()
    pod_annotations(d)["servingblueprints.io/tensor-parallel-size"] = "2"
    assert resource_violations("gpu-limits-set", DEPLOYMENT, d, name="vllm") == [
        "Deployment 'vllm' runs tensor_parallel_size=2 (servingblueprints.io/tensor-parallel-size) but no container "
        "sets resources.limits['nvidia.com/gpu'] >= 2; set the model server's GPU limit to the tensor-parallel "
        "degree"]


def test_a_gpu_pod_that_tolerates_the_gpu_taint_passes():
    assert resource_violations("gpu-taint-tolerated", DEPLOYMENT, gpu_deployment()) == []


TAINT_MESSAGE = ("Deployment 'vllm' requests GPUs or selects GPU nodes but does not tolerate the 'nvidia.com/gpu' "
                 "taint, so it stays Pending; add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: "
                 "NoSchedule}]")


def test_a_gpu_pod_without_the_toleration_is_flagged():
    assert resource_violations("gpu-taint-tolerated", DEPLOYMENT, gpu_deployment(tolerations=[]),
                               name="vllm") == [TAINT_MESSAGE]


def test_a_helper_pod_pinned_to_a_gpu_instance_type_without_gpus_still_needs_the_toleration():
    d = gpu_deployment(tolerations=[])
    main_container(d)["resources"] = {"limits": {"cpu": "1"}}
    assert resource_violations("gpu-taint-tolerated", DEPLOYMENT, d, name="vllm") == [TAINT_MESSAGE]


def test_a_pod_with_required_affinity_to_gpu_nodes_needs_the_toleration():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "Exists"}]}]}}}
    d = gpu_deployment(tolerations=[], nodeSelector={}, affinity=affinity)
    main_container(d)["resources"] = {}
    assert resource_violations("gpu-taint-tolerated", DEPLOYMENT, d, name="vllm") == [TAINT_MESSAGE]


def test_a_cpu_pod_on_cpu_nodes_needs_no_gpu_toleration():
    d = gpu_deployment(tolerations=[], nodeSelector={"node.kubernetes.io/instance-type": "m7i.xlarge"})
    main_container(d)["resources"] = {"limits": {"cpu": "1"}}
    assert resource_violations("gpu-taint-tolerated", DEPLOYMENT, d) == []


def tp2(size_limit: str | None = "2Gi") -> dict:
    d = gpu_deployment()
    pod_annotations(d)["servingblueprints.io/tensor-parallel-size"] = "2"
    if size_limit is None:
        del d["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"]
    else:
        d["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = size_limit
    return d


def test_tensor_parallel_2_with_a_2_gib_memory_backed_shm_passes():
    assert resource_violations("tensor-parallel-shm", DEPLOYMENT, tp2("2Gi")) == []


def test_a_memory_backed_shm_without_size_limit_passes():
    assert resource_violations("tensor-parallel-shm", DEPLOYMENT, tp2(None)) == []


def test_tensor_parallel_2_with_a_1_gib_shm_is_too_small():
    assert resource_violations("tensor-parallel-shm", DEPLOYMENT, tp2("1024Mi"), name="vllm") == [
        "Deployment 'vllm' runs tensor_parallel_size=2 with /dev/shm sizeLimit 1024Mi, below 2 GiB; mount an "
        "emptyDir {medium: Memory, sizeLimit: 2Gi} at /dev/shm (1 GiB per tensor-parallel rank)"]


def test_the_shm_size_per_rank_comes_from_the_policy_config():
    assert resource_violations("tensor-parallel-shm", DEPLOYMENT, tp2("2Gi"), name="vllm",
                               config={"shmGibPerRank": 2})[0].startswith(
        "Deployment 'vllm' runs tensor_parallel_size=2 with /dev/shm sizeLimit 2Gi, below 4 GiB")


def test_tensor_parallel_2_with_a_disk_backed_shm_is_flagged():
    d = tp2()
    del d["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["medium"]
    assert resource_violations("tensor-parallel-shm", DEPLOYMENT, d, name="vllm") == [
        "Deployment 'vllm' runs tensor_parallel_size=2 without a memory-backed /dev/shm (NCCL fails on the 64 MiB "
        "default); mount an emptyDir {medium: Memory, sizeLimit: 2Gi} at /dev/shm (1 GiB per tensor-parallel rank)"]


def test_tensor_parallel_1_needs_no_shm():
    d = gpu_deployment(volumes=[])
    main_container(d)["volumeMounts"] = []
    assert resource_violations("tensor-parallel-shm", DEPLOYMENT, d) == []


def test_an_shm_size_environment_variable_is_flagged_as_ineffective():
    d = gpu_deployment()
    main_container(d)["env"] = [{"name": "SHM_SIZE", "value": "10g"}]
    assert resource_violations("tensor-parallel-shm", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm' sets environment variable 'SHM_SIZE', which does not resize /dev/shm "
        "(the container runtime ignores it); mount an emptyDir with medium: Memory at /dev/shm instead"]


def test_a_startup_probe_longer_than_the_pod_start_time_passes():
    assert resource_violations("startup-probe-budget", DEPLOYMENT, gpu_deployment()) == []  # 270 s >= 135 s


def test_a_startup_probe_shorter_than_the_pod_start_time_is_flagged_with_the_threshold_to_set():
    d = gpu_deployment()
    main_container(d)["startupProbe"]["failureThreshold"] = 12  # 120 s < 135 s
    assert resource_violations("startup-probe-budget", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm': startupProbe gives up after 120 s (initialDelaySeconds + "
        "periodSeconds x failureThreshold) but the model needs 135 s to download and load "
        "(servingblueprints.io/pod-start-s); raise startupProbe.failureThreshold to at least 14"]


def test_without_a_startup_probe_the_liveness_probe_defaults_are_judged():
    d = gpu_deployment()
    container = main_container(d)
    del container["startupProbe"]
    container["livenessProbe"] = {"httpGet": {"path": "/health", "port": "http"}}  # 0 + 10 x 3 = 30 s
    assert resource_violations("startup-probe-budget", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm': livenessProbe gives up after 30 s (initialDelaySeconds + "
        "periodSeconds x failureThreshold) but the model needs 135 s to download and load "
        "(servingblueprints.io/pod-start-s); add a startupProbe with periodSeconds 10 and failureThreshold >= 14"]
