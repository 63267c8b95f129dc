"""The non-generative builders (triton-multi-model, onnx-cpu, and the sizing SageMaker's Triton shares): the
cheapest option from `blueprints.plan.options.nongen` (or the kept one), its Triton backends and batching or ONNX Runtime
threads, its compute, predictions, autoscaling (an edge cluster's own) and the reasons in plain words. Pure.
"""

from __future__ import annotations

from blueprints.core import defaults
from blueprints.contracts.sections import (
    Archetype, Autoscaling, CapacityType, Compute, CostLine, ModelLatency, OnnxRuntimeEngine, Predictions, ServedModel,
    TritonEngine, TritonModelConfig,
)
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Catalog
from blueprints.contracts.serving_flags import TRITON_BACKEND
from blueprints.core.errors import RequirementsError
from blueprints.plan.options.search import ResolvedModel, service_fixed_monthly_usd, peak_rps
from blueprints.plan.options.nongen import NongenOption, latency_target_ms, nongen_nodes, search_nongen_options
from blueprints.plan.options.infeasible import explain_infeasible_nongen
from blueprints.requirements.service import Requirements
from blueprints.requirements.model import ModelFormat
from blueprints.requirements.hosting import Accelerator, CpuArch
from blueprints.plan.owned_nodes import OwnedNodeShape
from blueprints.plan.edge import bounded_ceiling, edge_autoscaling, edge_reasons, owned_cost_lines, roles_anywhere_spec
from blueprints.plan.selection import Selection
from blueprints.catalog.signals import planned_target
from blueprints.plan.stability import Hardware, decide
from blueprints.plan.startup import startup_estimate
from blueprints.contracts.weights import replica_ephemeral_gib
from blueprints.plan.builders.context import (
    PlanContext, access_reasons, autoscaling_bounds, capacity_type_of, common_fields, cooldown_s, quota_cap,
    served_model,
)
from blueprints.plan.builders.cost import budget_ceiling, cost_lines, cost_notes


#: Triton's python backend runs `<model>/<version>/model.py` in the server's own Python, which in the pinned image has
#: no PyTorch or transformers: they come as the model's execution environment (a conda-pack archive named by the
#: `EXECUTION_ENV_PATH` parameter). Source: triton-inference-server/python_backend README, "Usage" and "Creating
#: Custom Execution Environments".
PYTHON_BACKEND_NOTE = ("Triton's python backend runs the model.py shipped with the weights (the source prefix lands in "
                       "models/{name}/1/) in the server's own Python; the pinned image has no PyTorch or "
                       "transformers, so ship them as an execution environment archive (python_backend "
                       "EXECUTION_ENV_PATH)")


def _triton_backend(model: ResolvedModel, accelerator: Accelerator) -> str:
    """The Triton backend serving `model`'s format; a python-backend model must come from an `s3://` prefix that
    holds its model.py (a Hugging Face download keeps weights, configs and tokenizer files only)."""
    if TRITON_BACKEND.get(model.spec.format) == "python" and model.spec.weights_uri.startswith("hf://"):
        raise RequirementsError(
            f"{model.path}.weights_uri: format {model.spec.format.value} on Triton runs the python backend, which "
            f"loads a model.py from the model's folder; {model.spec.weights_uri} is a Hugging Face download without "
            "one: give an s3:// weights_uri holding model.py beside the weights, or export the model to ONNX "
            "(format: onnx)", rule="servable-format")
    backend = TRITON_BACKEND.get(model.spec.format)
    if backend is None or (backend == "tensorrt" and accelerator is Accelerator.CPU):
        allowed = [f.value for f in TRITON_BACKEND
                   if accelerator is Accelerator.NVIDIA_GPU or f is not ModelFormat.TENSORRT]
        raise RequirementsError(f"{model.path}.format={model.spec.format.value}: Triton on "
                                f"{'GPU' if accelerator is Accelerator.NVIDIA_GPU else 'CPU'} serves {allowed}; "
                                "export the model to one of them (ONNX is the most portable)", rule="servable-format")
    return backend


def _nongen_hardware(option: NongenOption, archetype: Archetype) -> Hardware:
    return Hardware(archetype=archetype, instance_type=option.instance.instance_type,
                    cpu_per_replica=None if option.gpu else option.cpu_per_replica)


def nongen_option(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog, ctx: PlanContext, *,
                   archetype: Archetype, accelerator: Accelerator) -> tuple[NongenOption, list[str]]:
    """The cheapest option within the latency budget and the environment's constraints (or the existing stack
    config's hardware while it stays within `ctx.switch_threshold_pct` of it), and why.

    Raises:
        SizingError: no option meets the budget within the constraints; the message names the binding one.
    """
    managed = archetype is Archetype.SAGEMAKER_ENDPOINT
    limits = ctx.limits(req, env, managed=managed)
    options = search_nongen_options(req, env, models, catalog, accelerator=accelerator, managed=managed, limits=limits)
    if not options:
        raise explain_infeasible_nongen(req, models, catalog, accelerator=accelerator, managed=managed, env=env,
                                        limits=limits)
    best, headline = options[0], None
    previous = ctx.existing.get(f"{req.service}-{env}")
    if previous is not None and previous.archetype is archetype:
        fixed = service_fixed_monthly_usd(req, env, catalog, managed=managed)
        month = catalog.hours_per_month
        kept = next((o for o in options if _nongen_hardware(o, archetype) == previous), None)
        keep, headline = decide(
            previous, _nongen_hardware(best, archetype),
            cheapest_usd=best.nodes * best.node_usd_per_hour * month + fixed,
            previous_usd=kept.nodes * kept.node_usd_per_hour * month + fixed if kept else None,
            unavailable=None if kept else "it no longer meets the latency budget within the constraints",
            threshold_pct=ctx.switch_threshold_pct)
        if keep:
            best = kept  # type: ignore[assignment]
    return best, [*([headline] if headline else []),
                  *_nongen_reasons(req, env, best, catalog, cheapest=best is options[0])]


def nongen_compute(req: Requirements, env: str, option: NongenOption, served: list[ServedModel], *,
                    managed: bool = False) -> Compute:
    inst = option.instance
    owned = inst if isinstance(inst, OwnedNodeShape) else None
    return Compute(
        accelerator=Accelerator.NVIDIA_GPU if option.gpu else Accelerator.CPU,
        instance_type=None if owned else inst.instance_type, owned_nodes=owned.count if owned else None,
        gpu=option.gpu.name if option.gpu else None, gpus_per_node=inst.gpu_count,
        gpus_per_replica=option.gpus_per_replica, vcpus_per_node=inst.vcpus, memory_gib_per_node=inst.memory_gib,
        cpu_per_replica=option.cpu_per_replica, memory_gib_per_replica=option.memory_gib_per_replica,
        ephemeral_storage_gib_per_replica=replica_ephemeral_gib(s.weights_gib for s in served),
        replicas=option.replicas, capacity_type=capacity_type_of(req, env, managed=managed),
        cpu_arch=CpuArch(inst.cpu_arch))


def _nongen_reasons(req: Requirements, env: str, option: NongenOption, catalog: Catalog, *,
                    cheapest: bool = True) -> list[str]:
    inst = option.instance
    if isinstance(inst, OwnedNodeShape):
        source = ("hardware.edge_nodes.gflops_per_vcpu" if req.hardware.edge_nodes
                  and req.hardware.edge_nodes.gflops_per_vcpu else f"{inst.cpu_arch} default [assumption]")
        shape = f"{option.cpu_per_replica} vCPU ({inst.gflops_per_vcpu:g} GFLOP/s per vCPU, {source})"
    else:
        shape = (f"{option.gpus_per_replica} GPU ({option.gpu.model})" if option.gpu
                 else f"{option.cpu_per_replica} vCPU ({inst.family}, {catalog.cpu_gflops(inst):g} GFLOP/s per vCPU "
                      "[unverified])")
    choice = ("the replica shape using the fewest owned nodes" if isinstance(inst, OwnedNodeShape)
              else "the cheapest option" if cheapest else "the kept option")
    why = [f"{inst.instance_type}, {shape} per replica: {choice} meeting a p95 request latency of "
           f"{latency_target_ms(req):g} ms"
           + ("" if req.slo.latency_p95_ms or req.slo.latency_p99_ms else " (default budget; set slo.latency_p95_ms)")]
    for ld in option.loads:
        source = "measured latency" if ld.model.spec.measured_latency_ms else "catalog FLOPs"
        if ld.model.task.autoregressive:
            source += (f"; an encoder pass and {ld.model.traffic.mean_output_tokens} decode steps, each reading the "
                       "decoder's weights, so it scales between GPUs with memory bandwidth")
        batching = (f"max_batch_size {ld.max_batch_size}, max_queue_delay {ld.max_queue_delay_ms:.1f} ms, "
                    if option.gpu else "")
        why.append(f"{ld.model.spec.served_name}: {ld.gflops_per_request:.1f} GFLOP per request ({source}); "
                   f"{batching}{ld.batch_ms:.1f} ms per {'batch' if option.gpu else 'request'}, p95 "
                   f"{ld.latency_p95_ms:.0f} ms, {ld.requests_per_s_per_replica:,.0f} requests/s per replica "
                   f"at full load, {peak_rps(req, env, ld.model):g} requests/s at peak")
    why.append(f"{option.replicas} replica(s) on {option.nodes} node(s) ({option.replicas_per_node} per node) keep "
               "each replica under its target utilisation")
    return why


def nongen_predictions(req: Requirements, env: str, option: NongenOption, lines: list[CostLine], *,
                       managed: bool = False, max_monthly_usd: float) -> Predictions:
    """The predictions of a non-generative plan; `managed`: a SageMaker endpoint (never spot, so never an estimate)."""
    instances = defaults.TRITON_GPU_INSTANCES if option.gpu else 1
    return Predictions(
        models=[ModelLatency(name=ld.model.spec.served_name, latency_p95_ms=round(ld.latency_p95_ms, 1),
                             batch_ms=round(ld.batch_ms, 2), concurrent_requests=ld.max_batch_size * instances)
                for ld in option.loads],
        latency_p95_ms=round(option.latency_p95_ms, 1),
        requests_per_s_capacity=round(option.requests_per_s_capacity, 3),
        concurrency_per_replica=max(ld.max_batch_size for ld in option.loads) * instances,
        monthly_cost_usd=round(sum(line.monthly_usd for line in lines), 2), cost_lines=lines,
        max_monthly_cost_usd=max_monthly_usd,
        cost_is_estimate=capacity_type_of(req, env, managed=managed) is CapacityType.SPOT)


def plan_nongen(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog,
                 selection: Selection, ctx: PlanContext) -> Blueprint:
    """Triton (one or several models, GPU or CPU) or ONNX Runtime on CPU."""
    onnx = selection.archetype is Archetype.ONNX_CPU
    backends = [None if onnx else _triton_backend(m, selection.accelerator) for m in models]
    option, sized = nongen_option(req, env, models, catalog, ctx, archetype=selection.archetype,
                                   accelerator=selection.accelerator)
    served = [served_model(m, req, env) for m in models]
    inst = option.instance
    owned = inst if isinstance(inst, OwnedNodeShape) else None
    estimate = startup_estimate(weights_gib=sum(s.weights_gib for s in served),
                                engine_kind="onnxruntime" if onnx else "triton", gpu=option.gpu is not None,
                                gpus_per_node=inst.gpu_count, owned_nodes=owned is not None)
    startup = estimate.budget
    lines = (owned_cost_lines(owned, option.nodes, catalog) if owned is not None else
             cost_lines(req, env, catalog, what="GPU nodes" if option.gpu else "CPU nodes",
                         instance_type=inst.instance_type, nodes=option.nodes,
                         usd_per_hour=option.node_usd_per_hour, managed=False))
    quota = quota_cap(ctx, req, env, per_node=option.replicas_per_node, gpus_per_node=inst.gpu_count)
    floor, ceiling, capped = autoscaling_bounds(req, env, option.replicas,
                                                 can_scale_to_zero=not onnx and owned is None, **quota)
    if owned is not None:
        ceiling = bounded_ceiling(req, env, ceiling=ceiling, owned=owned, per_node=option.replicas_per_node,
                                  replicas=option.replicas)
    limits = ctx.limits(req, env, managed=False)
    ceiling, most_usd, budget_notes = budget_ceiling(
        req, env, catalog, lines=lines, what=f"{selection.archetype.value}, {option.nodes}x {inst.instance_type}",
        replicas=option.replicas, ceiling=ceiling, per_node=option.replicas_per_node,
        nodes_for=lambda n: nongen_nodes(inst, n, option.replicas_per_node, limits))
    utilization = min(defaults.TARGET_UTILIZATION[m.traffic.pattern.value] for m in models)
    cpu_target = planned_target(utilization * 100, whole=True)
    edge_scaling = None
    if owned is not None:
        edge_scaling = edge_autoscaling(req, selection.archetype, floor=floor, ceiling=ceiling,
                                        replicas=option.replicas, keda_metric="nv_inference_pending_request_count",
                                        cpu_target=cpu_target, cooldown_s=cooldown_s(startup))
    if onnx:
        engine = OnnxRuntimeEngine(image=defaults.ONNXRUNTIME_IMAGE, intra_op_threads=option.cpu_per_replica)
        scaling = Autoscaling(min_replicas=floor, max_replicas=ceiling, metric="cpu",
                              target=cpu_target, cooldown_s=cooldown_s(startup))
        engine_note = (f"ONNX Runtime intra_op_threads={option.cpu_per_replica} = the CPU limit (0 would start one "
                       "thread per host core and oversubscribe the node)")
    else:
        kind = "KIND_GPU" if option.gpu else "KIND_CPU"
        count = defaults.TRITON_GPU_INSTANCES if option.gpu else 1
        engine = TritonEngine(image=defaults.TRITON_IMAGE, models=[
            TritonModelConfig(name=s.name, backend=b, max_batch_size=ld.max_batch_size,  # type: ignore[arg-type]
                              max_queue_delay_microseconds=round(ld.max_queue_delay_ms * 1000), instance_kind=kind,
                              instance_count=count)
            for s, b, ld in zip(served, backends, option.loads)])
        # The target is set from the replica model once the blueprint exists (`blueprints.plan.scaling.scaling_targets`).
        scaling = Autoscaling(min_replicas=floor, max_replicas=ceiling, metric="nv_inference_pending_request_count",
                              target=1.0, cooldown_s=cooldown_s(startup))
        engine_note = (f"Triton instance_group {kind} x{count} per model"
                       + (": two instances overlap one batch's data transfer with the other's compute" if option.gpu
                          else "")
                       + "".join(f"; {s.name}: {PYTHON_BACKEND_NOTE.format(name=s.name)}"
                                 for s, b in zip(served, backends) if b == "python"))
    edge_notes: list[str] = []
    if owned is not None and edge_scaling is not None:
        scaling, scaling_note = edge_scaling
        edge_notes = edge_reasons(req, env, owned=owned, replicas=option.replicas, per_node=option.replicas_per_node,
                                  cpu=option.cpu_per_replica, nodes=option.nodes, ceiling=scaling.max_replicas,
                                  scaling_note=scaling_note, roles_anywhere=roles_anywhere_spec(req, env))
        if req.environments[env].min_replicas == 0:
            edge_notes.append(f"environments.{env}.min_replicas=0 raised to {scaling.min_replicas}: an edge cluster's "
                              "service does not scale to zero (no KEDA HTTP interceptor is planned there)")
    return Blueprint(
        **common_fields(req, env, ctx, managed=False, idle_timeout_s=defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S),
        archetype=selection.archetype, models=served, compute=nongen_compute(req, env, option, served),
        engine=engine, startup=startup, autoscaling=scaling,
        predictions=nongen_predictions(req, env, option, lines, max_monthly_usd=most_usd),
        rationale=[*selection.reasons, *sized, engine_note, estimate.reason, *capped, *budget_notes, *edge_notes,
                   *access_reasons(req, managed=False), *cost_notes(req, env, catalog, managed=False)],
    )
