"""Archetype selection: which of the four ways to serve fits the requirements, and why, in plain words.

Rules, after the public decision guides (sizing-facts.md, "Serving-engine guidance"):
- one generative model -> `vllm-gpu`; `sagemaker-endpoint` when operations prefer managed, or (preference `any`)
  when the managed endpoint costs no more than self-hosting plus `MANAGED_COST_TOLERANCE` (small load: no cluster
  to run, so ops simplicity wins);
- several models (`models:`), e.g. embedding + reranker + classifier -> `triton-multi-model`;
- one non-generative model -> `onnx-cpu` when no GPU is allowed, or when CPU meets the SLO for less than a GPU;
  `sagemaker-endpoint` when operations prefer managed; otherwise Triton on a GPU (`triton-multi-model`).
Compliance and regions filter: SageMaker only where the catalog has its serving image for every environment's region.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype
from blueprints.catalog import Catalog
from blueprints.contracts.serving_flags import VLLM_FORMATS
from blueprints.core.errors import RequirementsError, SizingError
from blueprints.plan.guardrails import SearchLimits
from blueprints.plan.options.search import ResolvedModel, service_fixed_monthly_usd
from blueprints.plan.options.llm import llm_search
from blueprints.plan.options.nongen import search_nongen_options
from blueprints.requirements.service import Requirements
from blueprints.requirements.model import ModelFormat
from blueprints.requirements.hosting import Accelerator, OperationsPreference, Platform
from blueprints.plan.stability import Hardware


@dataclass(frozen=True)
class Selection:
    """The chosen archetype, the accelerator it runs on, and each reason in plain words (for the rationale)."""

    archetype: Archetype
    accelerator: Accelerator
    reasons: tuple[str, ...]


def sagemaker_engine(models: list[ResolvedModel]) -> str:
    """The SageMaker serving image for these models: `lmi` (vLLM inside) for text generation, else `triton`."""
    return "lmi" if models[0].task.generative else "triton"


def reference_environment(req: Requirements) -> str:
    """The environment costs are compared on: the busiest production environment, else the busiest (file order
    breaks ties)."""
    names = list(req.environments)
    return max(names, key=lambda n: (req.is_production(n), req.environments[n].traffic_scale, -names.index(n)))


def _sagemaker_regions_missing(req: Requirements, models: list[ResolvedModel], catalog: Catalog) -> list[str]:
    image = catalog.sagemaker_image(sagemaker_engine(models))
    return sorted({spec.region for spec in req.environments.values() if spec.region not in image.registry_accounts})


#: An environment's search constraints, by environment name and whether the archetype is managed (SageMaker).
LimitsFor = Callable[[str, bool], SearchLimits]


def no_limits(env: str, managed: bool) -> SearchLimits:
    """No constraints besides the requirements' own (planning without a policy config)."""
    return SearchLimits()


def _cheapest_monthly_usd(option, req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> float | None:
    """Monthly cost of the cheapest option within the constraints (nodes plus the stack's fixed items); None when
    there is none."""
    if option is None:
        return None
    return option.nodes * option.node_usd_per_hour * catalog.hours_per_month + service_fixed_monthly_usd(
        req, env, catalog, managed=managed)


def _llm_monthly_usd(req: Requirements, env: str, model: ResolvedModel, catalog: Catalog, *, managed: bool,
                     limits_for: LimitsFor) -> float | None:
    best = llm_search(req, env, model, catalog, managed=managed, limits=limits_for(env, managed)).best
    return _cheapest_monthly_usd(best, req, env, catalog, managed=managed)


def _nongen_monthly_usd(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog, *,
                        accelerator: Accelerator, limits_for: LimitsFor) -> float | None:
    options = search_nongen_options(req, env, models, catalog, accelerator=accelerator,
                                    limits=limits_for(env, False))
    return _cheapest_monthly_usd(options[0] if options else None, req, env, catalog, managed=False)


def _check_slo_fields(req: Requirements, models: list[ResolvedModel]) -> None:
    """An SLO the plan would ignore is an error: TTFT/ITL apply to text generation, request latency to the rest."""
    generative = [m for m in models if m.task.generative]
    if generative and (req.slo.latency_p95_ms is not None or req.slo.latency_p99_ms is not None):
        raise RequirementsError(f"slo.latency_p95_ms / latency_p99_ms apply to non-generative models; "
                                f"{generative[0].spec.served_name} generates text: set slo.ttft_p95_ms and "
                                "slo.itl_p95_ms instead", rule="slo-matches-task")
    if not generative and any(v is not None for v in (req.slo.ttft_p95_ms, req.slo.itl_p95_ms, req.slo.ttft_p99_ms,
                                                       req.slo.itl_p99_ms)):
        raise RequirementsError("slo.ttft_p95_ms / itl_p95_ms apply to text generation (as do ttft_p99_ms / "
                                "itl_p99_ms); "
                                f"{models[0].spec.served_name} is a {models[0].task.value} model: set "
                                "slo.latency_p95_ms (and latency_p99_ms) instead", rule="slo-matches-task")
    for m in generative:
        if m.spec.format not in VLLM_FORMATS:
            raise RequirementsError(f"{m.path}.format={m.spec.format.value} cannot be served by vLLM; give "
                                    f"{', '.join(f.value for f in VLLM_FORMATS)} weights", rule="servable-format")


def select_archetype(req: Requirements, models: list[ResolvedModel], catalog: Catalog, *,
                     limits_for: LimitsFor = no_limits) -> Selection:
    """Choose the archetype and say why.

    Args:
        req: validated requirements.
        models: `resolve_models(req, catalog)`.
        catalog: from `load_catalog()`.
        limits_for: each environment's search constraints; costs are compared within those of the reference
            environment (`reference_environment`).

    Returns:
        A `Selection`; its reasons go first in every blueprint's rationale.

    Raises:
        RequirementsError: the requirements contradict every archetype (e.g. a text-generation model inside a
            `models:` estate, managed operations for an estate, CPU-only text generation).
        SizingError: the preferred archetype is unavailable (e.g. no SageMaker image in an environment's region).
    """
    preference = req.operations.preference
    edge = req.operations.platform is Platform.EDGE_CLUSTER
    gpu_ok = Accelerator.NVIDIA_GPU in req.hardware.accelerators and not edge  # edge nodes have no GPU
    cpu_ok = Accelerator.CPU in req.hardware.accelerators
    generative = [m.spec.served_name for m in models if m.task.generative]
    if edge and generative:
        raise SizingError(f"{', '.join(generative)} generate text, which needs GPUs, and an edge cluster's "
                          "hardware.edge_nodes are CPU nodes: serve it on operations.platform eks or "
                          "existing-cluster, or serve a non-generative ONNX model on the edge")
    if len(models) > 1:
        estate = _select_estate(req, models, generative, gpu_ok=gpu_ok)
        _check_slo_fields(req, models)
        return estate
    _check_slo_fields(req, models)
    model = models[0]
    name = model.spec.served_name
    missing = _sagemaker_regions_missing(req, models, catalog)
    if preference is OperationsPreference.MANAGED and missing:
        raise SizingError(f"operations.preference=managed, but the catalog has no SageMaker "
                          f"{sagemaker_engine(models)} image for region(s) {missing}; pick a region from "
                          f"{sorted(catalog.sagemaker_image(sagemaker_engine(models)).registry_accounts)} or set "
                          "operations.preference: any")
    if model.task.generative:
        if not gpu_ok:
            raise SizingError("hardware.accelerators excludes nvidia-gpu, but text generation with "
                              f"{name} needs GPUs; add nvidia-gpu")
        what = f"{name} is a generative model: served token by token by vLLM (continuous batching, paged KV cache)"
        if model.spec.adapters:
            return _select_for_adapters(req, model, what)
        if preference is OperationsPreference.MANAGED:
            return Selection(Archetype.SAGEMAKER_ENDPOINT, Accelerator.NVIDIA_GPU, (
                f"{what} inside SageMaker's LMI container",
                "operations.preference=managed: a SageMaker " + ("asynchronous endpoint (the batch's queue, no "
                                                                  "cluster to run or patch)" if req.batch is not None
                                                                  else "real-time endpoint (no cluster to run or patch)")))
        if preference is OperationsPreference.SELF_HOSTED or missing:
            why = (f"operations.preference={preference.value}: self-hosted on {req.operations.platform.value}"
                   if not missing else f"no SageMaker LMI image for region(s) {missing}: self-hosted on "
                   f"{req.operations.platform.value}")
            return Selection(Archetype.VLLM_GPU, Accelerator.NVIDIA_GPU, (f"{what} on GPU nodes", why))
        return _select_llm_by_cost(req, model, catalog, what, limits_for)
    return _select_single_nongen(req, model, catalog, gpu_ok=gpu_ok, cpu_ok=cpu_ok, limits_for=limits_for)


def llm_archetypes(req: Requirements, models: list[ResolvedModel], catalog: Catalog) -> dict[Archetype, str]:
    """The archetypes a single generative model may run on, as `select_archetype` allows them, each with "" or why
    not: `vllm-gpu` unless operations.preference is managed; `sagemaker-endpoint` unless the preference is
    self-hosted, the model has LoRA adapters, or an environment's region has no LMI image. For a pilot's finalists
    (`blueprints.plan.pilot`), which compares them instead of choosing one."""
    preference = req.operations.preference
    missing = _sagemaker_regions_missing(req, models, catalog)
    managed_not = ("operations.preference=self-hosted" if preference is OperationsPreference.SELF_HOSTED else
                   f"{models[0].path}.adapters are served on vllm-gpu only" if models[0].spec.adapters else
                   f"no SageMaker LMI image for region(s) {missing}" if missing else "")
    return {Archetype.VLLM_GPU: "operations.preference=managed" if preference is OperationsPreference.MANAGED else "",
            Archetype.SAGEMAKER_ENDPOINT: managed_not}


def pinned_selection(req: Requirements, models: list[ResolvedModel], pinned: Hardware,
                     by: str | None = None) -> Selection:
    """The selection of pinned hardware: a pilot's candidate (`blueprints.plan.pilot`), or the candidate the
    requirements' `choice` keeps (`by`: why, `blueprints.plan.choice.choice_words`); its archetype, and why, in plain
    words."""
    _check_slo_fields(req, models)
    where = ("inside SageMaker's LMI container" if pinned.archetype is Archetype.SAGEMAKER_ENDPOINT
             else f"by {pinned.engine or 'vllm'} on GPU nodes")
    return Selection(pinned.archetype, Accelerator.NVIDIA_GPU, (
        f"{models[0].spec.served_name} is a generative model, served token by token {where}",
        by if by is not None else f"a pilot's finalist: {pinned.archetype.value} on {pinned.describe()}, deployed to "
        "be measured (`blueprint pilot`), not the plan's choice"))


def _select_for_adapters(req: Requirements, model: ResolvedModel, what: str) -> Selection:
    """LoRA adapters are served by vLLM on `vllm-gpu` only: this project's SageMaker archetype runs the LMI container
    with one model and no adapters, and Triton / ONNX Runtime serve non-generative models. `operations.preference:
    managed` with adapters is refused; `any` takes vllm-gpu without comparing costs."""
    count = len(model.spec.adapters or [])
    if req.operations.preference is OperationsPreference.MANAGED:
        raise RequirementsError(f"{model.path}.adapters: {count} LoRA adapter(s) need vLLM on the vllm-gpu archetype, "
                                "and operations.preference=managed plans a SageMaker endpoint, which serves the base "
                                "model only here: set operations.preference: self-hosted or any, or remove the "
                                "adapters", rule="adapters-servable")
    return Selection(Archetype.VLLM_GPU, Accelerator.NVIDIA_GPU, (
        f"{what} on GPU nodes, with {count} LoRA adapter(s) beside it",
        f"{model.path}.adapters: LoRA adapters are served by vLLM on vllm-gpu only (a SageMaker endpoint here serves "
        f"the base model alone); operations.preference={req.operations.preference.value}: self-hosted on "
        f"{req.operations.platform.value}"))


def _usd(cost: float | None) -> str:
    return "no plan meeting the SLO within the constraints" if cost is None else f"${cost:,.0f}/month"


def _select_llm_by_cost(req: Requirements, model: ResolvedModel, catalog: Catalog, what: str,
                        limits_for: LimitsFor) -> Selection:
    """operations.preference=any: SageMaker when it meets the SLO within budget and costs at most
    MANAGED_COST_TOLERANCE more than self-hosting (the service's own nodes and load balancer: the shared platform is
    not charged to one service), or when self-hosting cannot meet the SLO or the budget."""
    env = reference_environment(req)
    managed = _llm_monthly_usd(req, env, model, catalog, managed=True, limits_for=limits_for)
    hosted = _llm_monthly_usd(req, env, model, catalog, managed=False, limits_for=limits_for)
    budget = req.budget.max_monthly_usd

    def usable(cost: float | None) -> bool:
        return cost is not None and (budget is None or cost <= budget)

    close = managed is not None and hosted is not None and managed <= hosted * (1 + defaults.MANAGED_COST_TOLERANCE)
    if usable(managed) and (close or not usable(hosted)):
        why = "the load is small" if close else "self-hosting does not meet the SLO"
        return Selection(Archetype.SAGEMAKER_ENDPOINT, Accelerator.NVIDIA_GPU, (
            f"{what} inside SageMaker's LMI container",
            f"operations.preference=any and {why}: in {env} a SageMaker endpoint costs {_usd(managed)} vs "
            f"self-hosted {_usd(hosted)} (its own nodes; the shared platform apart), so ops simplicity wins"))
    if managed is not None and not usable(managed):
        tail = f", over budget.max_monthly_usd={budget:g}"
    else:
        tail = f", more than {defaults.MANAGED_COST_TOLERANCE:.0%} apart" if managed is not None else ""
    return Selection(Archetype.VLLM_GPU, Accelerator.NVIDIA_GPU, (
        f"{what} on GPU nodes",
        f"operations.preference=any: in {env} self-hosting costs {_usd(hosted)} (its own nodes; the shared platform "
        "apart) vs SageMaker "
        f"{_usd(managed)}{tail}"))


def _select_estate(req: Requirements, models: list[ResolvedModel], generative: list[str], *,
                   gpu_ok: bool) -> Selection:
    names = ", ".join(f"{m.spec.served_name} ({m.task.value})" for m in models)
    if generative:
        raise RequirementsError(f"models: {generative} generate text and one Triton estate serves non-generative "
                                "models only; a generator beside retrieval models plans as a compound service, one "
                                "stack per part (`blueprint plan`, blueprints.plan.compound.parts), or move it to its own "
                                "requirements file under `model:`", rule="one-generative-model")
    if req.operations.preference is OperationsPreference.MANAGED:
        raise RequirementsError("operations.preference=managed: a SageMaker endpoint here serves one model; for the "
                                f"{len(models)} models of `models:` set operations.preference: any or self-hosted "
                                "(Triton multi-model), or split them into one requirements file each",
                                rule="one-generative-model")
    accelerator = Accelerator.NVIDIA_GPU if gpu_ok else Accelerator.CPU
    where = ("sharing each GPU" if gpu_ok else "on the edge cluster's CPU nodes"
             if req.operations.platform is Platform.EDGE_CLUSTER else
             "on CPU nodes (hardware.accelerators excludes nvidia-gpu)")
    return Selection(Archetype.TRITON_MULTI_MODEL, accelerator, (
        f"{len(models)} models in one estate: {names}",
        f"Triton serves them from one model repository, {where}, with dynamic batching per model: one fleet to "
        "scale and monitor instead of one per model"))


def _select_single_nongen(req: Requirements, model: ResolvedModel, catalog: Catalog, *, gpu_ok: bool,
                          cpu_ok: bool, limits_for: LimitsFor) -> Selection:
    name, task = model.spec.served_name, model.task.value
    is_onnx = model.spec.format is ModelFormat.ONNX
    call = ("one call per audio window (an encoder pass, then the decoder token by token)"
            if model.task.autoregressive else "one forward pass per request")
    if req.operations.preference is OperationsPreference.MANAGED:
        if not gpu_ok:
            raise RequirementsError("operations.preference=managed with hardware.accelerators=[cpu]: the catalog's "
                                    "SageMaker hosting types are GPU types; add nvidia-gpu or set operations.preference: "
                                    "any (CPU serving with ONNX Runtime)", rule="managed-needs-gpu")
        return Selection(Archetype.SAGEMAKER_ENDPOINT, Accelerator.NVIDIA_GPU, (
            f"{name} is a single {task} model: {call}, batched by Triton",
            "operations.preference=managed: a SageMaker real-time endpoint (SageMaker's Triton container)"))
    if not gpu_ok:
        edge = req.operations.platform is Platform.EDGE_CLUSTER
        if not is_onnx:
            raise RequirementsError(f"{model.path}.format={model.spec.format.value}: without GPUs {name} is served by "
                                    "ONNX Runtime on CPU, which loads ONNX files; export it (e.g. `optimum-cli export "
                                    "onnx`) and set model.format: onnx", rule="servable-format")
        why = ("the edge cluster's owned nodes (hardware.edge_nodes) are CPU nodes" if edge
               else "hardware.accelerators excludes nvidia-gpu")
        return Selection(Archetype.ONNX_CPU, Accelerator.CPU, (
            f"{name} is a single {task} model and {why}",
            "ONNX Runtime on CPU nodes, intra-op threads pinned to each replica's CPU limit"))
    gpu_reason = f"{name} is a single {task} model: {call}, batched by Triton on a GPU"
    if not cpu_ok or not is_onnx:
        why = ("hardware.accelerators excludes cpu" if not cpu_ok else
               f"model.format={model.spec.format.value}, not onnx: CPU serving would need an ONNX export")
        return Selection(Archetype.TRITON_MULTI_MODEL, Accelerator.NVIDIA_GPU, (gpu_reason, why))
    env = reference_environment(req)
    cpu = _nongen_monthly_usd(req, env, [model], catalog, accelerator=Accelerator.CPU, limits_for=limits_for)
    gpu = _nongen_monthly_usd(req, env, [model], catalog, accelerator=Accelerator.NVIDIA_GPU, limits_for=limits_for)
    if cpu is not None and (gpu is None or cpu <= gpu):
        versus = "no GPU option meets the SLO" if gpu is None else f"Triton on GPU ${gpu:,.0f}/month"
        return Selection(Archetype.ONNX_CPU, Accelerator.CPU, (
            f"{name} is a small {task} model ({model.weights_gib:.2f} GiB): CPU meets the SLO",
            f"in {env} ONNX Runtime on CPU costs ${cpu:,.0f}/month vs {versus}"))
    versus = "no CPU option meets the SLO" if cpu is None else f"ONNX Runtime on CPU ${cpu:,.0f}/month"
    return Selection(Archetype.TRITON_MULTI_MODEL, Accelerator.NVIDIA_GPU, (
        gpu_reason, f"in {env} Triton on GPU costs ${gpu:,.0f}/month vs {versus}" if gpu is not None
        else f"neither CPU nor GPU meets the SLO in {env}"))
