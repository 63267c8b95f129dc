"""One startup model: how long a replica takes from an empty node to ready, part by part.

Every timer that must outlast a cold start derives from the `StartupBudget` `startup_estimate()` returns: startup
probes, the Deployment's `progressDeadlineSeconds`, KEDA cooldowns, SageMaker's startup/download timeouts, the warm
floor and the fleet simulation's replica starts. The data and its sources are in `blueprints/catalog/startup.yaml`
(`blueprints.catalog.startup`); `StartupEstimate.reason` is the rationale line listing the parts. A calibration
of the replica's shape with a measured cold start (`stacks/calibration/`, `CalibrationFile.startup`, written by
`blueprint calibrate` from `blueprint benchmark`'s measurement) scales each measured part (`calibrated`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from blueprints.catalog.startup import load_startup_catalog
from blueprints.core import defaults
from blueprints.contracts.calibration_file import Calibration
from blueprints.contracts.sections import Archetype, ServedModel, StartupBudget
from blueprints.contracts.weights import streams_format

#: The rationale's part names -> the budget's fields.
PART_FIELDS = {"node": "node_provisioning_s", "image": "image_pull_s", "weights": "weights_download_s",
               "engine": "model_load_s"}


@dataclass(frozen=True)
class StartupEstimate:
    """A replica's cold start: the budget in whole seconds and how each part was found (`parts`: name -> how)."""

    budget: StartupBudget
    parts: dict[str, str]
    calibration: str | None = None

    @property
    def reason(self) -> str:
        """The rationale line: `cold start 260 s on a new node: node 170 s (...), image 40 s (...), ...`; with a
        calibration, `cold start 370 s on a new node, calibrated on <its measurement> (<file>): ...`."""
        b = self.budget
        listed = ", ".join(f"{name} {getattr(b, PART_FIELDS[name])} s ({how})" for name, how in self.parts.items())
        how = f", calibrated on {self.calibration}" if self.calibration else ""
        return f"cold start {b.total_s} s on a new node{how}: {listed}"


def vllm_startup(served: ServedModel, *, tensor_parallel_size: int, gpus_per_node: int,
                 engine: str = "vllm") -> StartupEstimate:
    """The uncalibrated cold start of a self-hosted LLM replica of `served` on `engine` (vllm, sglang, tensorrt-llm:
    the planner's and `blueprint calibrate`'s prediction: one place)."""
    return startup_estimate(weights_gib=served.weights_gib, engine_kind=engine, gpu=True,
                            streamed=streams_format(Archetype.VLLM_GPU, served.format, engine),
                            params_b=served.params_b,
                            tensor_parallel_size=tensor_parallel_size, gpus_per_node=gpus_per_node)


def calibrated(estimate: StartupEstimate, found: Calibration | None, *, streamed: bool) -> StartupEstimate:
    """`estimate` with each part the calibration measured multiplied by its factor (rounded up), the rationale
    saying so; `estimate` itself without a calibration or without a measured cold start in it."""
    if found is None or found.file.startup is None:
        return estimate
    s = found.file.startup
    seconds, parts = {}, dict(estimate.parts)
    for name, field in PART_FIELDS.items():
        factor = s.factor(field, weights_streamed=streamed)
        seconds[field] = getattr(estimate.budget, field)
        if factor != 1.0 and name in parts:
            seconds[field] = max(1, math.ceil(seconds[field] * factor))
            parts[name] += f"; x{factor:g} as measured"
    made = "" if found.file.measured else " (constructed, not measured)"
    return replace(estimate, budget=StartupBudget(**seconds), parts=parts,
                   calibration=f"{s.words()}{made} ({found.path})")


def startup_estimate(*, weights_gib: float, engine_kind: str, gpu: bool, streamed: bool = False,
                     params_b: float | None = None, tensor_parallel_size: int = 1, gpus_per_node: int = 1,
                     owned_nodes: bool = False) -> StartupEstimate:
    """Cold start of one replica from `blueprints/catalog/startup.yaml`.

    Args:
        weights_gib: total weights the replica reads, GiB.
        engine_kind: `vllm`, `triton`, `onnxruntime` or `sagemaker` (the image size and the engine start).
        gpu: the replica runs on a GPU node (device plugin wait; SOCI parallel pull on the GPU node classes).
        streamed: vLLM streams the weights from the model store (Run:ai Model Streamer) instead of an init
            container copying them to disk first (`blueprints.contracts.weights.streams_weights`). Defaults to False.
        params_b: parameters, billions (vLLM's compile and CUDA-graph capture grow with them); None for other
            engines. Defaults to None.
        tensor_parallel_size: GPUs per replica; each rank streams every file (no distributed streaming). Defaults to 1.
        gpus_per_node: GPUs of the node type (large GPU nodes boot slower). Defaults to 1.
        owned_nodes: an edge cluster's owned nodes: none is launched (`defaults.EDGE_NODE_PROVISIONING_S`).
            Defaults to False.

    Returns:
        The `StartupEstimate`: node launch, image pull, weights (streamed to GPU, or copied to disk) and engine start
        (disk load when copied, plus warm-up: for vLLM the API server's start, the first torch.compile into the new
        pod's empty caches and the engine's compile and CUDA-graph capture), each rounded up to whole seconds.
    """
    cat = load_startup_catalog()
    launch, pull, weights, start = cat.node_launch, cat.image_pull, cat.weights, cat.engine_start
    parts: dict[str, str] = {}
    if owned_nodes:
        node_s, parts["node"] = defaults.EDGE_NODE_PROVISIONING_S, "owned nodes, none launched"
    elif engine_kind == "sagemaker":
        node_s, parts["node"] = launch.sagemaker_instance_s, "SageMaker instance launch"
    else:
        extra = launch.large_gpu_node_extra_s if gpu and gpus_per_node >= launch.large_gpu_node_min_gpus else 0
        node_s = launch.registration_s + (launch.gpu_device_plugin_s if gpu else 0) + extra
        parts["node"] = (f"Karpenter launch to registration {launch.registration_s} s"
                         + (f" + GPU device plugin {launch.gpu_device_plugin_s} s" if gpu else "")
                         + (f" + {extra} s boot of a {gpus_per_node}-GPU node" if extra else ""))
    image_gb = pull.image_gb[engine_kind]
    soci = gpu and not owned_nodes  # the platform's GPU node classes; an edge cluster's nodes are its own
    rate = pull.soci_parallel_mb_per_s if soci else pull.containerd_mb_per_s
    image_s = math.ceil(image_gb * 1e3 / rate)
    parts["image"] = (f"{image_gb:g} GB at {rate:g} MB/s, " + ("SOCI parallel pull" if soci else "containerd pull")
                      if image_gb else "pulled before the timers start")
    # SGLang and TensorRT-LLM (PyTorch backend) also compile and capture CUDA graphs at start: timed as vLLM's
    # [assumption: no published start of theirs measured here].
    vllm = engine_kind in ("vllm", "sglang", "tensorrt-llm") and params_b
    compile_s = start.vllm_base_s + start.vllm_s_per_b_params * params_b if vllm else 0
    warm_s = start.vllm_process_start_s + start.vllm_cold_compile_s + compile_s if vllm else start.other_s
    warm_how = (f"API server start {start.vllm_process_start_s:g} s + first torch.compile into empty caches "
                f"{start.vllm_cold_compile_s:g} s + compile and CUDA graphs for {params_b:g}B parameters "
                f"{math.ceil(compile_s)} s" if vllm else "engine warm-up")
    if streamed:
        s = weights.streamer
        weights_s = max(1, math.ceil(weights_gib * tensor_parallel_size / s.gib_per_s))
        parts["weights"] = (f"{weights_gib:g} GiB streamed from S3 to GPU at {s.gib_per_s:g} GiB/s"
                            + (f", read by each of {tensor_parallel_size} ranks" if tensor_parallel_size > 1 else "")
                            + f", Run:ai streamer concurrency {s.concurrency}")
        load_s = max(1, math.ceil(warm_s))
        parts["engine"] = warm_how
    else:
        weights_s = max(1, math.ceil(weights_gib / weights.s3_copy_gib_per_s))
        parts["weights"] = f"{weights_gib:g} GiB copied from S3 to disk at {weights.s3_copy_gib_per_s:g} GiB/s"
        load_s = max(1, math.ceil(weights_gib / weights.disk_load_gib_per_s + warm_s))
        parts["engine"] = (f"load from disk at {weights.disk_load_gib_per_s:g} GiB/s + "
                           + (warm_how if vllm else f"{math.ceil(warm_s)} s warm-up"))
    budget = StartupBudget(node_provisioning_s=node_s, image_pull_s=image_s, weights_download_s=weights_s,
                           model_load_s=load_s)
    return StartupEstimate(budget=budget, parts=parts)
