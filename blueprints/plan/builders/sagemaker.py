"""The SageMaker real-time endpoint builder (sagemaker-endpoint): an LLM on LMI (sized by
`blueprints.plan.builders.llm`) or non-generative models on Triton (`blueprints.plan.builders.nongen`), with the endpoint's timers
and volume derived from one startup budget. Pure.
"""

from __future__ import annotations

import math

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype, Autoscaling, SageMakerEngine, StartupBudget
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Catalog
from blueprints.core.errors import SizingError
from blueprints.plan.options.search import ResolvedModel
from blueprints.requirements.service import Requirements
from blueprints.requirements.hosting import Accelerator
from blueprints.plan.selection import Selection, sagemaker_engine
from blueprints.catalog.signals import planned_target
from blueprints.plan.startup import startup_estimate
from blueprints.plan.builders.context import (
    PlanContext, access_reasons, autoscaling_bounds, common_fields, cooldown_s, served_model,
)
from blueprints.plan.builders.cost import check_budget, cost_lines, cost_notes
from blueprints.plan.builders.llm import llm_compute, llm_plan, llm_predictions
from blueprints.plan.builders.nongen import nongen_compute, nongen_option, nongen_predictions


def sagemaker_timers(model_names: str, weights: float) -> tuple[StartupBudget, int, int, int]:
    """The startup budget and the SageMaker timers derived from it: (budget, startup health-check timeout, download
    timeout, volume GiB). Raises SizingError when a timer exceeds SageMaker's limits."""
    startup = startup_estimate(weights_gib=weights, engine_kind="sagemaker", gpu=True).budget
    low, high = defaults.SAGEMAKER_TIMEOUT_RANGE_S
    health = math.ceil(defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR * startup.pod_start_s)
    download = math.ceil(defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR * startup.weights_download_s)
    volume = math.ceil(weights * defaults.SAGEMAKER_VOLUME_WEIGHTS_FACTOR + defaults.SAGEMAKER_VOLUME_SCRATCH_GIB)
    if max(health, download) > high or volume > defaults.SAGEMAKER_MAX_VOLUME_GIB:
        raise SizingError(f"{model_names}: {weights:.0f} GiB of weights need a {health} s startup health check and "
                          f"{volume} GiB of volume, beyond SageMaker's {high} s / {defaults.SAGEMAKER_MAX_VOLUME_GIB} GiB "
                          "limits; set operations.preference: self-hosted (vllm-gpu) or lower model.precision")
    return startup, max(low, health), max(low, download), volume


def plan_sagemaker(req: Requirements, env: str, models: list[ResolvedModel], catalog: Catalog,
                    selection: Selection, ctx: PlanContext) -> Blueprint:
    model = models[0]
    served = served_model(model, req, env)
    image = catalog.sagemaker_image(sagemaker_engine(models)).uri(req.environments[env].region)
    startup, health_s, download_s, volume = sagemaker_timers(served.name, served.weights_gib)
    timers = (f"startup health check {health_s} s and model download {download_s} s "
              f"({defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR:g}x the {startup.pod_start_s} s predicted download + load), "
              f"{volume} GiB volume")
    if model.task.generative:
        llm = llm_plan(req, env, model, catalog, ctx, managed=True)
        best = llm.best
        inst, replicas, rps_per_instance = best.instance, best.replicas, best.sizing.max_rps
        compute = llm_compute(req, env, best, served, managed=True)
        engine = SageMakerEngine(image=image, initial_instance_count=replicas,
                                 container_startup_health_check_timeout_s=health_s,
                                 model_data_download_timeout_s=download_s, volume_size_gib=volume,
                                 tensor_parallel_degree=best.tensor_parallel_size,
                                 max_model_len=model.max_context_tokens, max_rolling_batch_size=best.concurrency)
        sized = llm.reasons
    else:
        option, sized = nongen_option(req, env, models, catalog, ctx, archetype=Archetype.SAGEMAKER_ENDPOINT,
                                       accelerator=Accelerator.NVIDIA_GPU)
        inst, replicas = option.instance, option.replicas
        rps_per_instance = option.requests_per_s_capacity / replicas
        compute = nongen_compute(req, env, option, [served], managed=True)
        engine = SageMakerEngine(image=image, initial_instance_count=replicas,
                                 container_startup_health_check_timeout_s=health_s,
                                 model_data_download_timeout_s=download_s, volume_size_gib=volume)
    lines = cost_lines(req, env, catalog, what="SageMaker instances", instance_type=inst.instance_type, nodes=replicas,
                        usd_per_hour=inst.usd_per_hour, managed=True)
    check_budget(req, env, catalog, lines=lines, what=f"sagemaker-endpoint, {replicas}x {inst.instance_type}",
                 replicas=replicas, replicas_per_node=1, node_usd_per_hour=inst.usd_per_hour, managed=True)
    floor, ceiling, _ = autoscaling_bounds(req, env, replicas, can_scale_to_zero=False)
    notes = cost_notes(req, env, catalog, managed=True)
    if req.environments[env].min_replicas == 0:
        notes.append(f"environments.{env}.min_replicas=0 raised to 1: a SageMaker real-time endpoint keeps one "
                     "instance")
    if model.task.generative:
        predictions = llm_predictions(req, env, model, llm, lines, catalog, managed=True)
    else:
        predictions = nongen_predictions(req, env, option, lines, managed=True)
    return Blueprint(
        **common_fields(req, env, ctx, managed=True, idle_timeout_s=defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S),
        archetype=Archetype.SAGEMAKER_ENDPOINT, models=[served], compute=compute, engine=engine, startup=startup,
        autoscaling=Autoscaling(
            min_replicas=floor, max_replicas=ceiling, metric="SageMakerVariantInvocationsPerInstance",
            target=planned_target(rps_per_instance * defaults.SAGEMAKER_INVOCATIONS_SAFETY_FACTOR * 60),
            cooldown_s=cooldown_s(startup)),
        predictions=predictions,
        rationale=[*selection.reasons, *sized, f"SageMaker timers from one startup budget: {timers}",
                   *access_reasons(req, managed=True), *notes],
    )
