"""Blueprints of every archetype for component tests, derived from the planned chat-assistant blueprint.

The builders change what an archetype needs and keep the rest consistent as the planner would (`consistent`: the
node's figures from the catalog, memory and local disk above the models' needs, the cost lines at the catalog's
price), then validate the result with the same `Blueprint` model the program uses.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from blueprints.core import defaults
from blueprints.contracts.sections import FIXED_REPLICAS
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Architecture, load_catalog
from blueprints.contracts.memory import weights_gib as shape_weights_gib
from blueprints.contracts.consistency import (
    cpu_replica_memory_gib, stored_weights_gib, streamer_buffer_gib, vllm_host_memory_gib,
)
from blueprints.contracts.sections import Archetype
from blueprints.contracts.weights import replica_ephemeral_gib, streams_format
from blueprints.requirements.model import ModelFormat
from blueprints.contracts.placement import serving_placement
from blueprints.review.preview import MockRun, run_under_mocks
from blueprints.requirements.model import Precision
from blueprints.contracts.stackconfig import config_values

#: A pinned SageMaker Hugging Face TGI image (ECR in us-east-1), as the planner would write it.
TGI_IMAGE = ("763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:"
             "2.4.0-tgi2.4.0-gpu-py311-cu124-ubuntu22.04")


def _sequences_held(data: dict, catalog, gpu: str) -> int:
    """Mean-length requests the KV cache of the blueprint's replica holds on `gpu` (as the planner counts them)."""
    from blueprints.contracts.consistency import model_architecture
    from blueprints.contracts.memory import kv_cache_tokens
    from blueprints.requirements.reuse import sequences_held

    m, engine = data["models"][0], data["engine"]
    traffic = m.get("traffic")
    arch = model_architecture(m.get("catalog_id"), Architecture.model_validate(m["architecture"])
                              if m.get("architecture") else None, catalog)
    if arch is None or not traffic:
        return engine["max_num_seqs"]
    kv = kv_cache_tokens(arch, catalog.gpu(gpu), precision=Precision(m["precision"]),
                         tensor_parallel_size=engine["tensor_parallel_size"],
                         kv_cache_fp8=engine.get("kv_cache_dtype") == "fp8",
                         gpu_memory_utilization=engine["gpu_memory_utilization"])
    mean = traffic["mean_input_tokens"] + traffic["mean_output_tokens"]
    return max(1, sequences_held(kv, request_tokens=mean, shared_prefix_tokens=traffic.get("shared_prefix_tokens")
                                 or 0))


def consistent(data: dict, *, given: frozenset[str] = frozenset()) -> dict:
    """A blueprint mapping made consistent after an edit, as the planner would write it: the compute's node figures
    from the catalog's instance type, a GPU replica's CPU and memory its share of the node (unless the edit `given`
    them: compute keys it set), memory and local disk at least the models' needs, the first cost line (the nodes) at
    the catalog's price for the planned node count, and the total."""
    catalog = load_catalog()
    c, engine = data["compute"], data["engine"]
    inst = (catalog.sagemaker if data["archetype"] == "sagemaker-endpoint" else catalog.ec2)[c["instance_type"]]
    c.update(gpu=inst.gpu, gpus_per_node=inst.gpu_count, vcpus_per_node=inst.vcpus, memory_gib_per_node=inst.memory_gib,
             cpu_arch=inst.cpu_arch, accelerator="nvidia-gpu" if inst.gpu_count else "cpu")
    if not inst.gpu_count:
        c["gpus_per_replica"] = 0
    weights = sum(m["weights_gib"] for m in data["models"])
    if inst.gpu_count and c["gpus_per_replica"]:  # the replica's share of the node, as the planner gives it
        share = c["gpus_per_replica"] / inst.gpu_count
        if "cpu_per_replica" not in given:
            c["cpu_per_replica"] = max(1, math.floor(inst.vcpus * share * defaults.NODE_ALLOCATABLE_CPU_FRACTION))
        if "memory_gib_per_replica" not in given:
            c["memory_gib_per_replica"] = math.floor(inst.memory_gib * share * 0.8)
        if engine.get("kind") == "vllm":  # at most the sequences the new GPUs' KV cache holds
            engine["max_num_seqs"] = min(engine["max_num_seqs"], _sequences_held(data, catalog, inst.gpu))
    if data["archetype"] != "sagemaker-endpoint":
        streamed = data["storage"] is not None and all(
            streams_format(Archetype(data["archetype"]), ModelFormat(m["format"])) for m in data["models"])
        buffers = streamer_buffer_gib(engine["tensor_parallel_size"]) if streamed else 0.0
        need = (vllm_host_memory_gib(engine["shm_size_gib"], streamer_buffer_gib=buffers) if engine["kind"] == "vllm"
                else cpu_replica_memory_gib(weights) if not inst.gpu_count else weights)
        c["memory_gib_per_replica"] = max(c["memory_gib_per_replica"], need)
        c["ephemeral_storage_gib_per_replica"] = max(c["ephemeral_storage_gib_per_replica"],
                                                     replica_ephemeral_gib([weights], streamed=streamed))
    per_node = (inst.gpu_count // c["gpus_per_replica"]) if c["gpus_per_replica"] else \
        max(1, int(inst.vcpus // c["cpu_per_replica"]))
    spot = c["capacity_type"] == "spot"
    price = round(inst.usd_per_hour * (catalog.spot_price_factor if spot else 1.0), 4)
    p = data["predictions"]
    strict = data["production"] and data["slo"]["availability_pct"] >= defaults.HIGH_AVAILABILITY_PCT
    managed = data["archetype"] == "sagemaker-endpoint"
    nodes = c["replicas"] if managed else serving_placement(
        per_node=per_node, zones=data["platform"]["zones"], strict_zone_spread=strict).nodes(c["replicas"])
    what = "SageMaker instances" if data["archetype"] == "sagemaker-endpoint" else \
        "GPU nodes" if inst.gpu_count else "CPU nodes"
    p["cost_lines"][0] = {"item": f"{what} ({inst.instance_type}{', spot' if spot else ''})", "quantity": nodes,
                          "usd_per_hour": price, "monthly_usd": round(nodes * price * catalog.hours_per_month, 2)}
    p["monthly_cost_usd"] = round(sum(line["monthly_usd"] for line in p["cost_lines"]), 2)
    p["cost_is_estimate"] = spot
    most = max(c["replicas"], data["autoscaling"]["max_replicas"])
    most_nodes = most if managed else serving_placement(
        per_node=per_node, zones=data["platform"]["zones"], strict_zone_spread=strict).nodes(most)
    fixed = sum(line["monthly_usd"] for line in p["cost_lines"][1:])
    p["max_monthly_cost_usd"] = round(most_nodes * price * catalog.hours_per_month + fixed, 2)
    if (p.get("expected_monthly_cost_usd") or 0) > p["monthly_cost_usd"]:
        p["expected_monthly_cost_usd"] = None  # the base's simulation does not hold for the derived fleet
    # The archetype's scaling signal, as the planner writes it (a vLLM base turned ONNX Runtime scales on CPU).
    scaling = {"vllm-gpu": "vllm:num_requests_running", "triton-multi-model": "nv_inference_pending_request_count",
               "onnx-cpu": "cpu", "sagemaker-endpoint": "SageMakerVariantInvocationsPerInstance"}[data["archetype"]]
    if scaling == "vllm:num_requests_running" and engine.get("kind") == "vllm":  # a target one replica reaches
        data["autoscaling"]["target"] = min(data["autoscaling"]["target"], engine["max_num_seqs"])
    if data["autoscaling"]["metric"] not in (scaling, FIXED_REPLICAS):
        data["autoscaling"]["metric"] = scaling
        if scaling == "cpu":  # a whole percent of the CPU request, at most 100
            data["autoscaling"]["target"] = max(1, min(math.floor(data["autoscaling"]["target"]), 100))
    return data


def derive(base: Blueprint, **changes: Any) -> Blueprint:
    """`base` with top-level sections replaced (dict values merge one level into the section), made `consistent`
    (keeping the compute figures the caller gave) and re-validated."""
    data = base.model_dump(mode="json")
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict) and key != "engine":
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    if data["archetype"] != "vllm-gpu" or data["autoscaling"]["min_replicas"] < 1:
        data.pop("router", None)  # the prompt-reuse router fronts vLLM pods that never scale to zero
    compute = changes.get("compute")
    return Blueprint.model_validate(consistent(data, given=frozenset(compute if isinstance(compute, dict) else ())))


def sized_model(name: str, weights_gib: float, *, fmt: str = "onnx", task: str = "classification",
                precision: str = "fp16", source: str | None = None, max_context_tokens: int = 512,
                traffic: dict | None = None) -> dict:
    """A served model outside the catalog whose shape (a dense transformer) weighs about `weights_gib` at
    `precision`, recorded with its architecture as the planner records it."""
    params_b = round(weights_gib * 2**30 / Precision(precision).bytes_per_param / 1e9, 6)
    arch = {"params_b": params_b, "layers": 32, "hidden_size": 4096, "attention_heads": 32, "kv_heads": 8,
            "head_dim": 128}
    weights = stored_weights_gib(shape_weights_gib(Architecture(**arch), Precision(precision)))
    return {"name": name, "catalog_id": None, "task": task, "format": fmt, "precision": precision,
            "source_uri": source or f"s3://models-in/{name}/", "params_b": params_b, "weights_gib": weights,
            "max_context_tokens": max_context_tokens, "architecture": arch, "traffic": traffic}


def _model(name: str, weights_gib: float, *, fmt: str = "onnx", task: str = "classification") -> dict:
    return sized_model(name, weights_gib, fmt=fmt, task=task)


CPU_COMPUTE = {"accelerator": "cpu", "instance_type": "c7i.2xlarge", "gpu": None, "gpus_per_node": 0,
               "gpus_per_replica": 0, "vcpus_per_node": 8, "memory_gib_per_node": 16.0, "cpu_per_replica": 3.0,
               "memory_gib_per_replica": 6.0, "ephemeral_storage_gib_per_replica": 10.0, "replicas": 2,
               "capacity_type": "on-demand", "cpu_arch": "x86_64"}


def triton_blueprint(base: Blueprint, *, gpu: bool = True) -> Blueprint:
    """Two ONNX models on Triton, on the base's GPU node (or on CPU nodes)."""
    kind = "KIND_GPU" if gpu else "KIND_CPU"
    engine = {"kind": "triton", "image": defaults.TRITON_IMAGE, "models": [
        {"name": "ranker", "backend": "onnxruntime", "max_batch_size": 32, "max_queue_delay_microseconds": 500,
         "instance_kind": kind, "instance_count": 2},
        {"name": "embedder", "backend": "onnxruntime", "max_batch_size": 0, "max_queue_delay_microseconds": 0,
         "instance_kind": kind, "instance_count": 1}]}
    changes: dict[str, Any] = {"archetype": "triton-multi-model", "engine": engine,
                               "models": [_model("ranker", 1.5), _model("embedder", 0.8)]}
    if not gpu:
        changes["compute"] = CPU_COMPUTE
    return derive(base, **changes)


def onnx_blueprint(base: Blueprint, *, arch: str = "x86_64", cpu: float = 3.0, platform: str = "eks") -> Blueprint:
    """One ONNX model on CPU nodes of `arch`, `cpu` cores per replica (threads = the CPU limit)."""
    instance = "c7i.2xlarge" if arch == "x86_64" else "c7g.2xlarge"
    return derive(base, archetype="onnx-cpu", models=[_model("fraud-scorer", 0.4)],
                  compute={**CPU_COMPUTE, "instance_type": instance, "cpu_arch": arch, "cpu_per_replica": cpu},
                  engine={"kind": "onnxruntime", "image": defaults.ONNXRUNTIME_IMAGE,
                          "intra_op_threads": int(cpu), "inter_op_threads": 1, "port": 8001},
                  platform={**base.platform.model_dump(mode="json"), "kind": platform,
                            "stack": base.platform.stack if platform == "eks" else None})


def with_weights(base: Blueprint, weights_gib: float) -> Blueprint:
    """The base's vLLM stack serving a model of about `weights_gib` (explicit shape, same context and traffic) on a
    node whose GPUs hold it: the base's node when they do, else 8x H100 (p5.48xlarge) at tensor parallel 8."""
    model = sized_model(base.model.name, weights_gib, fmt="safetensors", task="text-generation", precision="bf16",
                        source=base.model.source_uri, max_context_tokens=base.model.max_context_tokens,
                        traffic=base.model.traffic.model_dump(mode="json") if base.model.traffic else None)
    gpu = load_catalog().gpu(base.compute.gpu)  # type: ignore[arg-type]
    if weights_gib < 0.5 * gpu.memory_gib * base.compute.gpus_per_replica:
        return derive(base, models=[model])
    engine = {**base.engine.model_dump(mode="json"), "tensor_parallel_size": 8, "shm_size_gib": 16.0,
              "max_num_seqs": 1}
    return derive(base, models=[model], engine=engine,
                  compute={"instance_type": "p5.48xlarge", "gpus_per_replica": 8, "cpu_per_replica": 96.0,
                           "memory_gib_per_replica": 1024.0})


def sagemaker_blueprint(base: Blueprint, *, weights_gib: float | None = None, private_only: bool = False,
                        instance_type: str = "ml.g5.2xlarge") -> Blueprint:
    """The base's LLM (or one of `weights_gib`) on a SageMaker real-time endpoint, with the timers and volume the
    planner derives from the startup budget for that size (`blueprints.plan.builders.sagemaker.sagemaker_timers`)."""
    from blueprints.plan.builders.sagemaker import sagemaker_timers

    model = base.model.model_dump(mode="json") if weights_gib is None else sized_model(
        base.model.name, weights_gib, fmt="safetensors", task="text-generation", precision="bf16",
        source=base.model.source_uri, max_context_tokens=base.model.max_context_tokens,
        traffic=base.model.traffic.model_dump(mode="json") if base.model.traffic else None)
    _, health_s, download_s, volume = sagemaker_timers(base.model.name, model["weights_gib"])
    return derive(base, archetype="sagemaker-endpoint", models=[model],
                  compute={"instance_type": instance_type, "capacity_type": "on-demand"},
                  engine={"kind": "sagemaker", "image": TGI_IMAGE,
                          "initial_instance_count": max(1, base.autoscaling.min_replicas),
                          "container_startup_health_check_timeout_s": health_s,
                          "model_data_download_timeout_s": download_s, "volume_size_gib": volume},
                  network={"private_only": private_only},
                  # A private endpoint uses its platform's VPC; otherwise it lands on no platform.
                  platform={**base.platform.model_dump(mode="json"), "kind": "sagemaker",
                            "stack": base.platform.stack if private_only else None})


def bundled_platform(stack: str):
    """The bundled examples' planned platform `stack` (`platform-<env>-<region>`), as `blueprint plan` writes it."""
    from blueprints.workspace import plan_platform_set
    from tests.conftest import EXAMPLES, PLAN_DATE

    platforms = {p.stack: p for p in plan_platform_set(EXAMPLES, as_of=PLAN_DATE)}
    return platforms[stack]


def run_program(bp: Blueprint, *, extra_config: dict[str, str] | None = None,
                secret_keys: list[str] | None = None, platform=None) -> MockRun:
    """Run the real program (`components.program.main`) for `bp` under the mock engine. A service on a platform reads
    `platform`'s planned outputs (default: the bundled examples' platform of that name) through its StackReference."""
    from blueprints.contracts.platform import PlatformOutputs, planned_outputs
    from blueprints.review.preview import StackOutputs
    from components.program import main

    from blueprints.contracts.deploy_inputs import deploy_inputs
    from blueprints.review.preview import OFFLINE_CA_BUNDLE, SECRET_PLACEHOLDER

    config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config_values(bp).items()}
    config.update(extra_config or {})
    secret_keys = list(secret_keys or [])
    for item in deploy_inputs(bp):  # what the deployer sets before `pulumi up` (a gated model's hfToken, ...)
        if item.key not in config:
            config[item.key] = SECRET_PLACEHOLDER if item.secret else OFFLINE_CA_BUNDLE
            secret_keys += [item.key] if item.secret else []
    references = {}
    if bp.platform.stack is not None:
        platform = platform or bundled_platform(bp.platform.stack)
        references[platform.stack] = StackOutputs(planned_outputs(platform).model_dump(mode="json"),
                                                  PlatformOutputs.SECRET_FIELDS)
    return run_under_mocks(main, stack=bp.stack, config=config, secret_keys=secret_keys, stack_references=references)


def run_component(body: Callable[[], Any], bp: Blueprint) -> MockRun:
    """Run one component's construction under the mock engine."""
    return run_under_mocks(body, stack=bp.stack, config={"aws:region": bp.region})


def manifests(run: MockRun) -> list[dict]:
    """Kubernetes manifests of a run (apiVersion/kind/metadata + spec), as the preview builds them."""
    from blueprints.review.preview import is_manifest, manifest

    return [manifest(r) for r in run.records if is_manifest(r)]


def pod_spec(run: MockRun, kind: str = "Deployment") -> dict:
    """The serving workload's pod spec (not the prompt-reuse router's, `components.router`)."""
    [obj] = [m for m in manifests(run) if m["kind"] == kind
             and m["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "router"]
    return obj["spec"]["template"]["spec"]


def run_platform(platform) -> MockRun:
    """Run the real program for a platform stack config (`PlatformConfig`) under the mock engine."""
    from components.program import main

    config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config_values(platform).items()}
    secrets = []
    if platform.alerting.receiver is not None:  # the receiver's URL, a secret the deployer sets
        config["servingblueprints:alertReceiverUrl"] = "https://hooks.slack.com/services/T000/B000/XXXX"
        secrets.append("servingblueprints:alertReceiverUrl")
    return run_under_mocks(main, stack=platform.stack, config=config, secret_keys=secrets)
