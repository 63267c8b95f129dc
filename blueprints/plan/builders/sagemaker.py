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
from blueprints.contracts.consistency import invocations_one_instance_reaches
from blueprints.plan.scaling import target_within
from blueprints.plan.startup import startup_estimate
from blueprints.plan.builders.context import (
    PlanContext, access_reasons, autoscaling_bounds, common_fields, cooldown_s, served_model,
)
from blueprints.plan.builders.cost import budget_ceiling, cost_lines, cost_notes
from blueprints.plan.builders.llm import llm_compute, llm_plan, llm_predictions
from blueprints.plan.builders.nongen import nongen_compute, nongen_option, nongen_predictions


def sagemaker_timer_floors(weights_gib: float) -> tuple[int, int]:
    """(startup health check, model download) timeouts, s, that still hold at the slowest copy rate
    (`defaults.SAGEMAKER_SLOWEST_GIB_PER_S`): the download copies the weights to the ML volume; the health check
    waits while the container reads them back and starts, the startup model's load and warm-up for an endpoint
    (`blueprints.plan.startup.startup_estimate`, `model_load_s`), doubled."""
    copy_s = math.ceil(weights_gib / defaults.SAGEMAKER_SLOWEST_GIB_PER_S)
    load_s = startup_estimate(weights_gib=weights_gib, engine_kind="sagemaker", gpu=True).budget.model_load_s
    return copy_s + math.ceil(defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR * load_s), copy_s


def sagemaker_timers(model_names: str, weights: float) -> tuple[StartupBudget, int, int, int]:
    """The startup budget and the SageMaker timers derived from it: (budget, startup health-check timeout, download
    timeout, volume GiB). Raises SizingError when a timer exceeds SageMaker's limits."""
    startup = startup_estimate(weights_gib=weights, engine_kind="sagemaker", gpu=True).budget
    low, high = defaults.SAGEMAKER_TIMEOUT_RANGE_S
    health, download = sagemaker_timer_floors(weights)
    health = max(health, math.ceil(defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR * startup.pod_start_s))
    download = max(download, math.ceil(defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR * startup.weights_download_s))
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
    timers = (f"startup health check {health_s} s and model download {download_s} s (the longer of "
              f"{defaults.SAGEMAKER_TIMEOUT_SAFETY_FACTOR:g}x the {startup.pod_start_s} s predicted download + load and "
              f"the copy at {defaults.SAGEMAKER_SLOWEST_GIB_PER_S * 1024:.0f} MiB/s, a quarter of the expected rate), "
              f"{volume} GiB volume")
    if model.task.generative:
        llm = llm_plan(req, env, model, catalog, ctx, managed=True)
        best = llm.best
        inst, replicas = best.instance, best.replicas
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
        compute = nongen_compute(req, env, option, [served], managed=True)
        engine = SageMakerEngine(image=image, initial_instance_count=replicas,
                                 container_startup_health_check_timeout_s=health_s,
                                 model_data_download_timeout_s=download_s, volume_size_gib=volume)
    lines = cost_lines(req, env, catalog, what="SageMaker instances", instance_type=inst.instance_type, nodes=replicas,
                        usd_per_hour=inst.usd_per_hour, managed=True)
    floor, ceiling, _ = autoscaling_bounds(req, env, replicas, can_scale_to_zero=False)
    ceiling, most_usd, notes = budget_ceiling(
        req, env, catalog, lines=lines, what=f"sagemaker-endpoint, {replicas}x {inst.instance_type}",
        replicas=replicas, ceiling=ceiling, per_node=1, nodes_for=lambda n: n, unit="instance")
    notes += cost_notes(req, env, catalog, managed=True)
    if req.environments[env].min_replicas == 0:
        notes.append(f"environments.{env}.min_replicas=0 raised to 1: a SageMaker real-time endpoint keeps one "
                     "instance")
    if model.task.generative:
        predictions = llm_predictions(req, env, model, llm, lines, managed=True, max_monthly_usd=most_usd)
    else:
        predictions = nongen_predictions(req, env, option, lines, managed=True, max_monthly_usd=most_usd)
    per_minute = served.traffic.peak_requests_per_s / replicas * 60
    return Blueprint(
        **common_fields(req, env, ctx, managed=True, idle_timeout_s=defaults.AWS_LB_DEFAULT_IDLE_TIMEOUT_S),
        archetype=Archetype.SAGEMAKER_ENDPOINT, models=[served], compute=compute, engine=engine, startup=startup,
        autoscaling=Autoscaling(
            min_replicas=floor, max_replicas=ceiling, metric="SageMakerVariantInvocationsPerInstance",
            # Invocations per instance per minute at the planned peak share: target tracking then holds exactly
            # the planned instances at the peak (the replicas are sized at the highest rate meeting the SLO, so no
            # safety factor on top: with one of 0.5 the peak ran twice the planned fleet). At most what one instance
            # reaches: an endpoint sized at its capacity rounds up past it (24.5 of 24.477, 53.3 of 53.223).
            target=target_within(per_minute, invocations_one_instance_reaches(predictions.requests_per_s_capacity,
                                                                              replicas)),
            cooldown_s=cooldown_s(startup)),
        predictions=predictions,
        rationale=[*selection.reasons, *sized, f"SageMaker timers from one startup budget: {timers}",
                   *access_reasons(req, managed=True), *notes],
    )
