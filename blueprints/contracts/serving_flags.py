"""A `Blueprint`'s serving flags against its models and hosting: what the engine loads and how the stack holds it.

Checked by `blueprints.contracts.consistency.blueprint_problems` (a hand edit of a stack config exits 2 naming the field), and defined here
once: the planner derives the same flags with the same functions.

- the model's format against what the archetype's engine loads (vLLM checkpoints, ONNX Runtime's ONNX files, Triton's
  backend per format);
- vLLM's `--dtype` and `--quantization` against the model's precision and quantisation method on the stack's GPU;
- a SageMaker endpoint's tensor parallel degree within the instance's GPUs, its initial instance count within the
  autoscaling range;
- Triton's three ports distinct;
- an edge cluster's replicas within its owned nodes;
- a compound part's pipeline: each stack named once, no stage taking more rounds than calls;
- the autoscaling metric a scaling signal of the archetype's engine (`blueprints.catalog.signals`), a utilisation target
  within 100 %;
- a production stack's model store kept when the stack is destroyed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from blueprints.catalog import Catalog, Gpu
from blueprints.core.errors import FieldProblem
from blueprints.requirements.model import DEFAULT_QUANTIZATION, ModelFormat, Precision, Quantization

if TYPE_CHECKING:
    from blueprints.contracts.blueprint import Blueprint

#: Checkpoint formats the pinned vLLM image loads (safetensors, PyTorch .bin); ONNX/TensorRT/TorchScript exports are
#: for Triton or ONNX Runtime. GGUF left vLLM for an out-of-tree plugin by v0.24.0 (docs/features/quantization/
#: gguf.md:7, "GGUF support has migrated to OOT vllm-gguf-plugin"; model_executor/model_loader/ has no gguf_loader.py,
#: which 0.20.0 still had), and docker/Dockerfile does not install the plugin, so the image cannot load one.
VLLM_FORMATS = (ModelFormat.SAFETENSORS, ModelFormat.PYTORCH)
#: The Triton backend loading each format (triton-inference-server backend docs).
TRITON_BACKEND = {ModelFormat.ONNX: "onnxruntime", ModelFormat.TENSORRT: "tensorrt",
                  ModelFormat.TORCHSCRIPT: "pytorch", ModelFormat.PYTORCH: "pytorch", ModelFormat.SAFETENSORS: "python"}

_REPLAN = "re-plan with `blueprint plan`"


def vllm_dtype(precision: Precision, quantization: Quantization | None, gpu: Gpu) -> tuple[str, str | None]:
    """(--dtype, --quantization) for a weight precision and quantisation method. FP8 uses vLLM's fp8 quantization;
    AWQ and GPTQ checkpoints use the Marlin kernels on GPUs that have them (compute capability >= 8.0), which the
    calibrated kernel bandwidths describe, and the older kernels otherwise; W8A8 (int8) checkpoints are
    compressed-tensors. GPUs without BF16 (T4) run BF16 checkpoints as float16."""
    if precision is Precision.FP32:
        return "float32", None
    if precision is Precision.FP16 or (precision is Precision.BF16 and not gpu.supports_bf16):
        return "float16", None
    if precision is Precision.BF16:
        return "bfloat16", None
    method = quantization or DEFAULT_QUANTIZATION[precision]
    flag = {Quantization.FP8: "fp8", Quantization.W8A8: "compressed-tensors",
            Quantization.AWQ: "awq_marlin" if gpu.supports_marlin else "awq",
            Quantization.GPTQ: "gptq_marlin" if gpu.supports_marlin else "gptq"}[method]
    return "auto", flag


def serving_problems(bp: Blueprint, catalog: Catalog) -> list[FieldProblem]:
    """Every inconsistency of `bp`'s serving flags and hosting, each naming its field."""
    return [*_formats(bp), *_vllm(bp, catalog), *_sagemaker(bp), *_triton_ports(bp), *_owned_nodes(bp),
            *_pipeline(bp), *_autoscaling(bp), *_storage(bp)]


def _formats(bp: Blueprint) -> list[FieldProblem]:
    from blueprints.contracts.sections import TritonEngine

    kind = bp.engine.kind
    problems = []
    for i, m in enumerate(bp.models):
        at = ("models", i, "format")
        if kind == "onnxruntime" and m.format is not ModelFormat.ONNX:
            problems.append(FieldProblem(at, f"format {m.format.value}: ONNX Runtime loads ONNX files only; export "
                                         f"the model to ONNX or {_REPLAN}"))
        elif kind == "vllm" and m.format not in VLLM_FORMATS:
            problems.append(FieldProblem(at, f"format {m.format.value}: vLLM loads "
                                         f"{', '.join(f.value for f in VLLM_FORMATS)} checkpoints; {_REPLAN}"))
    if isinstance(bp.engine, TritonEngine):
        formats = {m.name: m.format for m in bp.models}
        for j, config in enumerate(bp.engine.models):
            want = TRITON_BACKEND.get(formats[config.name]) if config.name in formats else config.backend
            if want != config.backend:
                problems.append(FieldProblem(("engine", "models", j, "backend"), f"backend {config.backend} but "
                                             f"{config.name} is {formats[config.name].value}, which Triton loads with "
                                             f"the {want or 'no'} backend; {_REPLAN}"))
    return problems


def _vllm(bp: Blueprint, catalog: Catalog) -> list[FieldProblem]:
    from blueprints.contracts.sections import VllmEngine

    engine, gpu = bp.engine, catalog.gpus.get(bp.compute.gpu or "")
    if not isinstance(engine, VllmEngine) or gpu is None:
        return []
    m = bp.model
    dtype, quantization = vllm_dtype(m.precision, m.quantization, gpu)
    problems = []
    if engine.quantization != quantization:
        problems.append(FieldProblem(("engine", "quantization"), f"quantization={engine.quantization!r} but "
                                     f"{m.name}'s {m.precision.value} weights"
                                     f"{f' ({m.quantization.value})' if m.quantization else ''} load on {gpu.model} "
                                     f"with quantization {'null' if quantization is None else repr(quantization)}; "
                                     f"set it to that or {_REPLAN}"))
    if engine.dtype != dtype:
        problems.append(FieldProblem(("engine", "dtype"), f"dtype={engine.dtype!r} but {m.name}'s "
                                     f"{m.precision.value} weights run on {gpu.model} as {dtype!r}; set it to that or "
                                     f"{_REPLAN}"))
    return problems


def _sagemaker(bp: Blueprint) -> list[FieldProblem]:
    from blueprints.contracts.sections import SageMakerEngine

    engine, at = bp.engine, ("engine",)
    if not isinstance(engine, SageMakerEngine):
        return []
    problems = []
    if engine.tensor_parallel_degree is not None and engine.tensor_parallel_degree > bp.compute.gpus_per_node:
        problems.append(FieldProblem((*at, "tensor_parallel_degree"), f"tensor_parallel_degree="
                                     f"{engine.tensor_parallel_degree} is more than the "
                                     f"{bp.compute.gpus_per_node} GPU(s) of {bp.compute.instance_type}; lower it or "
                                     f"{_REPLAN}"))
    low, high = max(1, bp.autoscaling.min_replicas), bp.autoscaling.max_replicas
    if not low <= engine.initial_instance_count <= high:
        problems.append(FieldProblem((*at, "initial_instance_count"), f"initial_instance_count="
                                     f"{engine.initial_instance_count} is outside the autoscaling range {low}-{high} "
                                     "(autoscaling.min_replicas-max_replicas); the first scaling action would undo "
                                     "it"))
    return problems


def _triton_ports(bp: Blueprint) -> list[FieldProblem]:
    from blueprints.contracts.sections import TritonEngine

    engine = bp.engine
    if not isinstance(engine, TritonEngine):
        return []
    seen: dict[int, str] = {}
    problems = []
    for field in ("http_port", "grpc_port", "metrics_port"):
        port = getattr(engine, field)
        if port in seen:
            problems.append(FieldProblem(("engine", field), f"{field}={port} is also {seen[port]}: Triton listens on "
                                         "three distinct ports"))
        seen.setdefault(port, field)
    return problems


def _owned_nodes(bp: Blueprint) -> list[FieldProblem]:
    c = bp.compute
    if c.owned_nodes is None:
        return []
    room = c.owned_nodes * c.replicas_per_node
    if c.replicas > room:
        return [FieldProblem(("compute", "replicas"), f"replicas={c.replicas} but the edge cluster's "
                             f"{c.owned_nodes} owned node(s) hold {c.replicas_per_node} each ({room} in all); "
                             f"lower it or {_REPLAN}")]
    return []


def _pipeline(bp: Blueprint) -> list[FieldProblem]:
    pipeline = bp.pipeline
    if pipeline is None:
        return []
    problems = []
    if len(set(pipeline.stacks)) != len(pipeline.stacks):
        problems.append(FieldProblem(("pipeline", "stacks"), f"{pipeline.stacks} names a stack twice: one stack per "
                                     f"part; {_REPLAN}"))
    problems += [FieldProblem(("pipeline", "stages", k, "rounds"), f"rounds={s.rounds} is more than "
                              f"calls_per_request={s.calls_per_request}: each round batches at least one call")
                 for k, s in enumerate(pipeline.stages) if s.rounds > s.calls_per_request]
    return problems


def _autoscaling(bp: Blueprint) -> list[FieldProblem]:
    from blueprints.contracts.sections import BACKLOG_PER_INSTANCE, CRON_SCHEDULE, FIXED_REPLICAS
    from blueprints.catalog.signals import SIGNALS, engine_of, scaling_signal_row

    a, engine = bp.autoscaling, engine_of(bp.archetype.value, getattr(bp.engine, "kind", None))
    if a.metric == FIXED_REPLICAS and bp.platform.kind == "edge-cluster":
        return []  # no autoscaler: an edge cluster without the add-ons one needs
    if a.metric == CRON_SCHEDULE and bp.batch is not None and bp.batch.keda_cron is not None:
        return []  # a batch's cron schedule (`blueprints.contracts.consistency` checks it against the batch)
    row = scaling_signal_row(a.metric)
    asynchronous = bp.batch is not None and bp.batch.async_inference is not None
    if row is not None and (a.metric == BACKLOG_PER_INSTANCE) != asynchronous:
        return [FieldProblem(("autoscaling", "metric"), f"{a.metric!r} is not a scaling signal of this "
                             f"{'asynchronous' if asynchronous else 'real-time'} endpoint (an asynchronous endpoint "
                             f"scales on {BACKLOG_PER_INSTANCE}, which a real-time one never publishes); {_REPLAN}")]
    if row is None or row.engine != engine:
        known = [s.name for s in SIGNALS if s.kind == "scaling" and s.engine == engine]
        return [FieldProblem(("autoscaling", "metric"), f"{a.metric!r} is not a scaling signal of "
                             f"{bp.archetype.value} (its engine {engine} scales on {', '.join(known)}); {_REPLAN}")]
    if row.unit == "percent" and a.target > 100:
        return [FieldProblem(("autoscaling", "target"), f"target={a.target:g} % of the CPU request (= limit) is never "
                             "reached, so the autoscaler never scales out; set it to <= 100")]
    return []


def _storage(bp: Blueprint) -> list[FieldProblem]:
    if bp.storage is None:
        return []
    # A store below compliance.customer_managed_kms is the policy pack's stack-compliance rule (exit 1), not here.
    if bp.production and not bp.storage.retain_on_delete:
        return [FieldProblem(("storage", "retain_on_delete"), "a production stack keeps its model store when "
                             "destroyed: set retain_on_delete: true")]
    return []
