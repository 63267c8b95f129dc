"""Compound services: one requirements file holding a generator LLM and retrieval models (embedding, reranker,
classifier), planned as one stack per part on the same platform.

One archetype per stack stays the rule. A file whose `models:` list one text-generation model beside non-generative
ones is split into two parts, each a complete requirements of its own (so selection, sizing, guardrails, platforms
and stack names treat it as any service):

- `<service>-generator`: the generative model with its own `traffic` and the TTFT/ITL targets, on `vllm-gpu` (or
  `sagemaker-endpoint` when operations prefer managed);
- `<service>-retrieval`: the other models, each with its own `traffic` (a reranker scoring N passages per answer
  states N x the answers' rate), with the request-latency targets, on `triton-multi-model` (or `onnx-cpu` when CPU
  meets the SLO for less). SageMaker serves one model per endpoint, so with `operations.preference: managed` the
  retrieval part is self-hosted.

Every other section (hardware, compliance, exposure, environments, budget) applies to both parts; the budget is
checked against their sum (`blueprints.plan.compound.planner`).
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.contracts.sections import PipelinePart
from blueprints.catalog import Catalog, Task
from blueprints.core.errors import CatalogError, RequirementsError
from blueprints.requirements.service import Requirements
from blueprints.requirements.model import ModelSpec
from blueprints.requirements.hosting import OperationsPreference

#: Longest name of a compound service: its parts' names (`<service>-generator`, `<service>-retrieval`) are service
#: names, at most 40 characters like any (`Requirements.service`), so their stacks, namespaces and labels stay within
#: Kubernetes' 63-character limits exactly as a plain service's do.
MAX_COMPOUND_SERVICE_LEN = 40 - len("-retrieval")


@dataclass(frozen=True)
class ServicePart:
    """One stack-worth of a service: a plain service is its own only part (`part` None).

    Attributes:
        part: the part of a compound service, or None.
        requirements: the part's own requirements (service `<service>-<part>` for a compound service).
        reasons: why the part looks as it does (rationale lines, e.g. managed operations self-hosting retrieval).
    """

    part: PipelinePart | None
    requirements: Requirements
    reasons: tuple[str, ...] = ()


def _model_task(spec: ModelSpec, catalog: Catalog, *, field: str) -> Task:
    """A model entry's task: its own `task`, else its catalog record's. Raises `CatalogError` naming `field`."""
    if spec.task is not None:
        return spec.task
    try:
        return catalog.model(spec.id).task  # type: ignore[arg-type]
    except CatalogError as exc:
        raise CatalogError(f"{field}: {exc}") from None


def service_parts(req: Requirements, catalog: Catalog) -> list[ServicePart]:
    """The stacks-worth a requirements file plans into: itself, or a compound service's generator and retrieval
    parts (generator first).

    Raises:
        RequirementsError: `models:` lists more than one generative model, a compound service's name is too long,
            or `slo.pipeline_latency_p95_ms` is set on a service that is not compound; the message names the field.
        CatalogError: a model id is unknown (naming `models.<i>.id`).
    """
    budget = req.slo.pipeline_latency_p95_ms
    if req.models is None:
        _no_pipeline(budget, "one model (`model:`)")
        return [ServicePart(None, req)]
    tasks = [_model_task(m, catalog, field=f"models.{i}.id") for i, m in enumerate(req.models)]
    generative = [m.served_name for m, t in zip(req.models, tasks) if t.generative]
    if len(generative) > 1:
        raise RequirementsError(f"models: {generative} generate text; a service has at most one generator (a "
                                "compound service pairs one with its retrieval models): keep one here and move the "
                                "others to requirements files of their own", rule="one-generative-model")
    if not generative or len(req.models) == 1:
        _no_pipeline(budget, "no generator beside retrieval models" if not generative else "one model")
        return [ServicePart(None, req)]
    if len(req.service) > MAX_COMPOUND_SERVICE_LEN:
        raise RequirementsError(f"service: {req.service!r} is {len(req.service)} characters; a compound service "
                                f"(a generator and retrieval models) plans stacks {req.service}-generator-<env> and "
                                f"{req.service}-retrieval-<env>, whose part names must stay within 40 characters: "
                                f"shorten it to <= {MAX_COMPOUND_SERVICE_LEN}", rule="compound-service-name-length")
    generator = next(m for m, t in zip(req.models, tasks) if t.generative)
    retrieval = [m for m, t in zip(req.models, tasks) if not t.generative]
    base = req.model_dump()
    slo = req.slo
    # what every part keeps of the service's SLO: availability, and the attainment its warm floor is planned for
    attainment = {"availability_pct": slo.availability_pct, "attainment_pct": slo.attainment_pct,
                  "longest_violation_minutes": slo.longest_violation_minutes}
    gen = Requirements.model_validate({
        **base, "service": f"{req.service}-{PipelinePart.GENERATOR.value}", "models": None,
        "model": generator.model_dump(), "traffic": None,
        "slo": {"ttft_p95_ms": slo.ttft_p95_ms, "itl_p95_ms": slo.itl_p95_ms, "ttft_p99_ms": slo.ttft_p99_ms,
                "itl_p99_ms": slo.itl_p99_ms, **attainment}})
    operations = req.operations
    reasons: tuple[str, ...] = ()
    if operations.preference is OperationsPreference.MANAGED:
        operations = operations.model_copy(update={"preference": OperationsPreference.SELF_HOSTED})
        reasons = ("operations.preference=managed puts the generator on a SageMaker endpoint; SageMaker serves one "
                   "model per endpoint, so the retrieval models are self-hosted on the shared platform",)
    ret = Requirements.model_validate({
        **base, "service": f"{req.service}-{PipelinePart.RETRIEVAL.value}",
        "models": [m.model_dump() for m in retrieval], "operations": operations.model_dump(),
        "slo": {"latency_p95_ms": slo.latency_p95_ms, "latency_p99_ms": slo.latency_p99_ms, **attainment}})
    return [ServicePart(PipelinePart.GENERATOR, gen), ServicePart(PipelinePart.RETRIEVAL, ret, reasons)]


def _no_pipeline(budget: float | None, why: str) -> None:
    if budget is not None:
        raise RequirementsError(f"slo.pipeline_latency_p95_ms is the end-to-end budget of a compound service (one "
                                f"text-generation model beside retrieval models in `models:`); this file has {why}: "
                                "remove it and use slo.ttft_p95_ms / itl_p95_ms (text generation) or "
                                "slo.latency_p95_ms (other models)", rule="pipeline-budget-compound-only")

