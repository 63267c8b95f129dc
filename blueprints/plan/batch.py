"""A batch service (requirements `traffic.batch`): planned for the lowest cost that finishes its day's work within
its deadline.

One way through: the batch is planned as a steady stream at the rate that finishes the day's work by the deadline,
with no latency target (`batch_requirements`), so the option search (`blueprints.plan.options.llm`) sizes each
candidate replica at its throughput-optimal point (the largest batch its KV cache holds, `max_num_seqs`, loaded to
`defaults.LLM_MAX_UTILIZATION` of its saturated rate) and takes the cheapest instance type and replica count. The
planned fleet's day is then replayed (`blueprints.simulate.batch`: the queue full from the window's start, each
replica a closed loop at `max_num_seqs`, after its cold start); while it finishes after the deadline, the rate is
raised by how late it is and the service planned again, so the replicas are ceil(work / (throughput x the hours the
deadline leaves after the start)).

That search runs as a fresh plan, without the existing stack config's hardware, so the rate it ends at is a
function of the requirements alone; the service is then sized at that rate with the existing hardware kept where it
is still within the threshold (`blueprints.plan.stability`), raising again only if the kept fleet is late. A re-plan
over the stack config a plan wrote (`blueprint plan --check`, `preview`'s gate) thus comes to the same rate and the
same fleet: the search's path (the first rate's hardware may not be the last's) never meets the kept hardware.

The fleet runs from the window's start until the deadline (a KEDA `cron` trigger, `keda_cron`; always on when that
is the whole day), so the expected monthly cost counts the nodes for those hours only. The stack config's
`autoscaling` states that schedule (`BatchPlan.scaling`: 0 outside a cron run on the cron scaler, the planned
replicas in it), so every reader of the autoscaling bounds sees what deploys. Spot capacity is the
environment's (`environments.<env>.spot`, never in production), as for any service.

With `operations.preference: managed` (or `any`, which takes the cheaper) the batch is also planned as a SageMaker
asynchronous endpoint (`BatchPlan.async_inference`), sized through the same path as any SageMaker plan: the day's
requests are queued at the window's start (InvokeEndpointAsync), the planned instances start from zero on the queue
and each takes its batch at once; the last request must *start* within `RequestTTLSeconds` (21,600 s) and each
request finish within `InvocationTimeoutSeconds` (3,600 s). Its cost is the instances' hours: each from its start
until the queue is empty plus the scale-in lag (`defaults.SAGEMAKER_ASYNC_*`). SageMaker batch transform is not
planned (docs/how-to/batch.md says why).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace
from typing import Callable

from blueprints.catalog import load_catalog
from blueprints.core import bounds, defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.consistency import async_output_prefix
from blueprints.contracts.sections import (MAX_CONCURRENT_INVOCATIONS_PER_INSTANCE, Archetype, AsyncInference,
                                           BatchPlan, KedaCron)
from blueprints.core.errors import BlueprintError, RequirementsError, SizingError
from blueprints.plan.engines import with_token_prices
from blueprints.plan.unit_costs import unit_costs
from blueprints.requirements.hosting import OperationsPreference
from blueprints.requirements.model import Batch
from blueprints.requirements.service import Requirements
from blueprints.simulate.batch import BatchReplay, replay_batch

#: Most plans of one environment while its replayed day finishes after the deadline (each raises the rate by how
#: late it was; the second plan nearly always fits, the capacity model's throughput being the replay's).
MAX_PLANS = 4


def batch_requirements(req: Requirements, rate_per_s: float, preference: OperationsPreference) -> Requirements:
    """`req` as a steady stream at `rate_per_s` requests/s (before `traffic_scale`) with `preference` (self-hosted
    or managed: one candidate), with no budget (it applies to the run's hours, `batch_predictions`, not to the fleet
    all month): what the option search sizes. Not re-validated: only the rate, the preference and the budget
    change."""
    traffic = req.model_entries()[0][1].model_copy(update={"peak_requests_per_s": rate_per_s})
    update: dict = ({"traffic": traffic} if req.traffic is not None else
                    {"model": req.model.model_copy(update={"traffic": traffic})})  # type: ignore[union-attr]
    update["budget"] = req.budget.model_copy(update={"max_monthly_usd": None})
    update["operations"] = req.operations.model_copy(update={"preference": preference})
    return req.model_copy(update=update)


def keda_cron(batch: Batch, run_hours: float, replicas: int) -> KedaCron | None:
    """The cron trigger holding `replicas` from the window's start for `run_hours` (`KedaCron.daily`), in the
    window's time zone; None when that is the whole day (always on)."""
    window = batch.window
    return KedaCron.daily(start_hour=window.start_hour, run_hours=run_hours, timezone=window.timezone,  # type: ignore[union-attr]
                          replicas=replicas)


def plan_batch(req: Requirements, names: list[str], *, size: Callable[[Requirements, str, bool], Blueprint],
               finish: Callable[[Blueprint, Callable[[Blueprint], Blueprint]], Blueprint],
               as_of: dt.date) -> list[Blueprint]:
    """Plan each environment of a batch service: self-hosted on vLLM (preference `self-hosted`), on a SageMaker
    asynchronous endpoint (`managed`), or the cheaper of both (`any`; the other's cost in the rationale).

    A self-hosted replayed day must end by the run's shortest real length (`Batch.shortest_run_s`): the cron end is a
    local time, so a run spanning the spring-forward change is an hour shorter that night, and a fleet planned on the
    nominal deadline with less than that hour to spare would miss it once a year. The rationale names that night. (A
    SageMaker asynchronous run has no cron end: it drains its queue whatever the clocks do.)

    Args:
        req: requirements with `traffic.batch`.
        names: the environments to plan.
        size: select, size and price `req` (a steady stream) in one environment (`blueprints.plan.planner._plan_sized`),
            keeping the existing stack config's hardware (True) or as a fresh plan (False).
        finish: the planner's finishing of a sized blueprint, given this module's batch predictions in place of the
            fleet simulation.
        as_of: the plan date, from which the nights ahead are searched for the shortest run.

    Raises:
        RequirementsError: the deadline is shorter than a replica's start and one request's latency
            (batch-deadline-holds-request); on SageMaker, a request longer than InvocationTimeoutSeconds or a volume
            no fleet starts within RequestTTLSeconds (batch-async-limits).
        SizingError: no plan finishes by the deadline within `MAX_PLANS` tries, or the run is over budget.
    """
    batch = req.batch
    assert batch is not None
    preference = req.operations.preference
    kinds = {OperationsPreference.SELF_HOSTED: [OperationsPreference.SELF_HOSTED],
             OperationsPreference.MANAGED: [OperationsPreference.MANAGED]}.get(
        preference, [OperationsPreference.SELF_HOSTED, OperationsPreference.MANAGED])
    shortest_run = batch.shortest_run_s(today=as_of)
    planned = []
    for env in names:
        done, refused = [], []
        for kind in kinds:
            # a SageMaker asynchronous run has no cron end: the nominal deadline holds every night
            shortest = (batch.deadline_hours * 3600, None) if kind is OperationsPreference.MANAGED else shortest_run
            try:
                # the requirements' rate, from a fresh plan; then the existing hardware kept at that rate, where it is
                rate, _, _ = _sized_in_time(req, env, kind, size=lambda f, e: size(f, e, False), shortest=shortest)
                _, bp, replay = _sized_in_time(req, env, kind, size=lambda f, e: size(f, e, True), shortest=shortest,
                                               rate=rate)
                done.append(finish(bp, lambda sized, r=replay, s=shortest: batch_predictions(sized, batch, r,
                                                                                              shortest=s)))
            except BlueprintError as error:
                if len(kinds) == 1:
                    raise
                refused.append((kind, error))
        if not done:  # `any`: neither candidate plans; the self-hosted one's reason first
            raise refused[0][1]
        best = min(done, key=lambda bp: bp.batch.monthly_cost_usd)  # type: ignore[union-attr]
        if len(kinds) > 1:
            best = best.model_copy(update={"rationale": [*best.rationale, _choice_note(best, done, refused)]})
        budget = req.budget.max_monthly_usd
        if budget is not None and best.batch.monthly_cost_usd > budget:  # type: ignore[union-attr]
            b = best.batch
            when = f"({b.schedule()})" if b.async_inference else f"for {b.run_hours:g} h a day"  # type: ignore[union-attr]
            raise SizingError(f"environments.{env}: the batch's run, {best.batch.replicas} replica(s) of "  # type: ignore[union-attr]
                              f"{best.compute.instance_type} {when}, costs "
                              f"${best.batch.monthly_cost_usd:,.0f}/month, above budget.max_monthly_usd="  # type: ignore[union-attr]
                              f"{budget:,.0f}; raise the budget (it is the cheapest run finishing by the deadline)")
        planned.append(best)
    return planned


def _choice_note(best: Blueprint, done: list[Blueprint], refused: list[tuple[OperationsPreference, Exception]]) -> str:
    """Under `operations.preference: any`: both candidates' run costs and which was planned, or why one did not plan."""
    names = {Archetype.VLLM_GPU: "self-hosted vLLM on GPU nodes",
             Archetype.SAGEMAKER_ENDPOINT: "SageMaker asynchronous inference"}
    costs = " against ".join(f"{names[bp.archetype]} ${bp.batch.monthly_cost_usd:,.0f}/month"  # type: ignore[union-attr]
                             for bp in done)
    why = "".join(f"; {names[Archetype.SAGEMAKER_ENDPOINT if kind is OperationsPreference.MANAGED else Archetype.VLLM_GPU]}"
                  f" does not plan ({error})" for kind, error in refused)
    cheaper = ", the cheaper run" if len(done) > 1 else ""
    return f"batch with operations.preference any: {costs}{why}: planned {names[best.archetype]}{cheaper}"


def _sized_in_time(req: Requirements, env: str, kind: OperationsPreference, *,
                   size: Callable[[Requirements, str], Blueprint],
                   shortest: tuple[float, dt.date | None],
                   rate: float | None = None) -> tuple[float, Blueprint, BatchReplay]:
    """One candidate (`kind`: self-hosted or managed) sized so that its replayed day starts its last request in time:
    by the deadline (`shortest`: the run's shortest real length, seconds, and the night it is shorter) less one
    request's latency (self-hosted: it then completes by the deadline) and, on SageMaker, within RequestTTLSeconds of
    the window's start; while it is late, the rate is raised by how late it is and the service sized again (at most
    `MAX_PLANS` times), from `rate` requests/s (default: the day's work over the deadline, or over the TTL on
    SageMaker when that is shorter). Returns the rate it ended at, the sized blueprint and its replay."""
    deadline_s, night = shortest
    batch, traffic = req.batch, req.model_entries()[0][1]
    assert batch is not None
    managed = kind is OperationsPreference.MANAGED
    requests = traffic.batch_requests_per_day * req.environments[env].traffic_scale  # type: ignore[operator]
    # the work over the shortest run; on SageMaker every request must also start within the TTL
    limit_s = min(deadline_s, defaults.SAGEMAKER_ASYNC_REQUEST_TTL_S) if managed else deadline_s
    if rate is None:
        rate = traffic.batch_rate_per_s * batch.deadline_hours * 3600 / limit_s
    archetype = Archetype.SAGEMAKER_ENDPOINT if managed else Archetype.VLLM_GPU
    for attempt in range(MAX_PLANS):
        try:
            bp = size(batch_requirements(req, rate, kind), env)
        except SizingError:
            if attempt == 0:  # a deadline too short for any replica may be why: say so rather than the fleet
                first = size(batch_requirements(req, bounds.MIN_PEAK_REQUESTS_PER_S, kind), env)
                _check_deadline(batch, first, _replay(first, requests=1), deadline_s=deadline_s, night=night)
            raise
        if bp.archetype is not archetype:
            raise RequirementsError(f"environments.{env}: a batch is planned on {archetype.value}, not "
                                    f"{bp.archetype.value}; allow nvidia-gpu in hardware.accelerators"
                                    + ("" if managed else " and plan on the shared platform's or an existing cluster"),
                                    rule="batch-service")
        replay = _replay(bp, requests=requests)
        spare_s = _check_deadline(batch, bp, replay, deadline_s=deadline_s, night=night)
        serving_s = replay.completion_s - replay.start_s - replay.request_latency_s
        if serving_s <= spare_s:
            return rate, bp, replay
        rate *= serving_s / spare_s * 1.001  # late: the work needs serving_s of this fleet and has spare_s
    if managed:
        raise RequirementsError(
            f"environments.{env}: SageMaker asynchronous inference starts the day's last request "
            f"{(replay.completion_s - replay.request_latency_s) / 3600:.2f} h after the window's start with "
            f"{replay.replicas} x {bp.compute.instance_type}, beyond min(traffic.batch.deadline_hours="
            f"{batch.deadline_hours:g} less one request, RequestTTLSeconds {defaults.SAGEMAKER_ASYNC_REQUEST_TTL_S:,} "
            f"s: a queued request expires then) after {MAX_PLANS} plans; lower traffic.batch.requests_per_day (or "
            "tokens_per_day) or set operations.preference: self-hosted", rule="batch-async-limits")
    raise SizingError(f"environments.{env}: the batch's replayed day ends {replay.completion_s / 3600:.2f} h "
                      f"after the window's start, beyond traffic.batch.deadline_hours="
                      f"{batch.deadline_hours:g}{_shorter(deadline_s, night)} after {MAX_PLANS} plans; raise "
                      "deadline_hours or "
                      "hardware.allowed_instance_families", rule="feasible-plan")


def _replay(bp: Blueprint, *, requests: float) -> BatchReplay:
    """`bp`'s replayed run (`replay_batch`). On SageMaker its instances start from zero on the queue: the
    scale-from-zero alarm's delay is added to their cold start, and one request must finish within
    InvocationTimeoutSeconds.

    Raises:
        RequirementsError: on SageMaker, one request's p95 latency exceeds InvocationTimeoutSeconds
            (batch-async-limits), naming the mean lengths.
    """
    replay = replay_batch(bp, requests=requests)
    if bp.archetype is not Archetype.SAGEMAKER_ENDPOINT:
        return replay
    limit_s = defaults.SAGEMAKER_ASYNC_INVOCATION_TIMEOUT_S
    if replay.request_latency_s > limit_s:
        raise RequirementsError(
            f"traffic.mean_output_tokens / traffic.mean_input_tokens: one request takes "
            f"{replay.request_latency_s:,.0f} s at p95 on {bp.compute.instance_type} with its batch full, beyond "
            f"SageMaker asynchronous inference's InvocationTimeoutSeconds limit of {limit_s:,} s; lower "
            "traffic.mean_output_tokens or traffic.mean_input_tokens, or set operations.preference: self-hosted",
            rule="batch-async-limits")
    return replace(replay, start_s=replay.start_s + defaults.SAGEMAKER_ASYNC_SCALE_FROM_ZERO_S)


def _shorter(deadline_s: float, night: dt.date | None) -> str:
    """`, X h of real time on the run starting <night> (the clocks skip ahead)`, or nothing when no night is shorter."""
    return "" if night is None else (f", {deadline_s / 3600:g} h of real time on the run starting {night} (the "
                                     "clocks skip ahead for daylight saving time)")


def _check_deadline(batch: Batch, bp: Blueprint, replay: BatchReplay, *, deadline_s: float,
                    night: dt.date | None) -> float:
    """The seconds the run leaves to serve after a replica of `bp` starts (`replay`): until the deadline (on the
    shortest night: `deadline_s`, shorter than `deadline_hours` on `night`) less one request's latency, and on
    SageMaker at most until RequestTTLSeconds (the last queued request must start by then).

    Raises:
        RequirementsError: none are left (batch-deadline-holds-request), naming the least deadline that holds them.
    """
    last_start_s = deadline_s - replay.request_latency_s
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        last_start_s = min(last_start_s, defaults.SAGEMAKER_ASYNC_REQUEST_TTL_S)
    spare_s = last_start_s - replay.start_s
    if spare_s <= 0:
        least = math.ceil((replay.start_s + replay.request_latency_s + batch.deadline_hours * 3600 - deadline_s) / 36)
        raise RequirementsError(
            f"traffic.batch.deadline_hours={batch.deadline_hours:g} ({deadline_s:,.0f} s{_shorter(deadline_s, night)}) "
            f"is shorter than a replica's start ({replay.start_s:,.0f} s on {bp.compute.instance_type}) and one "
            f"request's latency at its batch ({replay.request_latency_s:,.1f} s): raise deadline_hours to >= "
            f"{least / 100:g}", rule="batch-deadline-holds-request")
    return spare_s


def batch_predictions(bp: Blueprint, batch: Batch, replay: BatchReplay, *,
                      shortest: tuple[float, dt.date | None]) -> Blueprint:
    """`bp` with its batch run (`Blueprint.batch`), the expected monthly cost of running the fleet from the window's
    start to the deadline only, the unit costs of the day's requests, and the plan's sentence; `shortest`: the run's
    shortest real length, seconds, and the night it is shorter than the deadline (`Batch.shortest_run_s`), which the
    sentence names with the margin left that night."""
    catalog = load_catalog()
    p = bp.predictions
    run_hours = batch.deadline_hours
    nodes, fixed = p.cost_lines[0].monthly_usd, sum(line.monthly_usd for line in p.cost_lines[1:])
    monthly = round(nodes * run_hours / 24 + fixed, 2)
    cron = keda_cron(batch, run_hours, replay.replicas)
    asynchronous = None
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:  # paid by the instance-hour, none on a cron schedule
        asynchronous, cron = async_inference(bp, replay), None
        monthly = round(nodes / replay.replicas * asynchronous.instance_hours_per_day / 24 + fixed, 2)
        bp = bp.model_copy(update={"engine": bp.engine.model_copy(update={"initial_instance_count": 1})})
    plan = BatchPlan(requests_per_day=round(replay.requests, 3), deadline_hours=batch.deadline_hours,
                     window_start_hour=batch.window.start_hour, window_hours=batch.window.hours,  # type: ignore[union-attr]
                     timezone=batch.window.timezone, run_hours=run_hours,  # type: ignore[union-attr]
                     replicas=replay.replicas, requests_per_s_per_replica=round(replay.requests_per_s_per_replica, 4),
                     start_s=replay.start_s, request_latency_s=round(replay.request_latency_s, 2),
                     completion_hours=round(replay.completion_s / 3600, 3), monthly_cost_usd=monthly, keda_cron=cron,
                     async_inference=asynchronous)
    # The autoscaler runs the schedule (`BatchPlan.scaling`, one source for every reader): no
    # more than the planned replicas, so the most it can cost is that fleet all month.
    scaling = plan.scaling(bp.autoscaling)
    predictions = p.model_copy(update={"expected_monthly_cost_usd": monthly,
                                       "max_monthly_cost_usd": p.monthly_cost_usd})
    bp = bp.model_copy(update={"autoscaling": scaling})
    costs = unit_costs(bp.model_copy(update={"predictions": predictions}), mean_rps=replay.requests / 86_400,
                       expected_monthly_usd=monthly, hours_per_month=catalog.hours_per_month)
    predictions = predictions.model_copy(update={"unit_costs": costs,
                                                 "engines": with_token_prices(predictions.engines, costs)})
    if asynchronous is not None:
        note = _async_note(bp, plan, replay, monthly)
        return bp.model_copy(update={"predictions": predictions, "batch": plan, "rationale": [*bp.rationale, note]})
    schedule = f"{plan.schedule()}, none outside" if cron else "all day (the deadline is the whole day)"
    note = (f"batch: {replay.requests:,.0f} requests a day within {batch.deadline_hours:g} h of "
            f"{batch.window.start_hour:02d}:00 {batch.window.timezone}; each replica at its throughput-optimal "  # type: ignore[union-attr]
            f"point ({replay.requests_per_s_per_replica:.2f} requests/s with its batch full, one request "
            f"{replay.request_latency_s:.1f} s p95): {replay.replicas} replica(s) for {run_hours:g} h a day "
            f"({schedule}) complete the replayed day in {replay.completion_s / 3600:.2f} h of the "
            f"{batch.deadline_hours:g} h deadline (start {replay.start_s:,.0f} s); about ${monthly:,.0f}/month against "
            f"${p.monthly_cost_usd:,.0f}/month for the same fleet all day")
    shortest_s, night = shortest
    if night is not None:
        note += (f"; the run starting {night} spans the spring-forward change, so its cron end comes after "
                 f"{shortest_s / 3600:g} h of real time, not {batch.deadline_hours:g} h: the fleet is sized to finish "
                 f"within that shortest run ({(shortest_s - replay.completion_s) / 60:,.0f} minutes to spare; a run "
                 "not spanning the change, from another start_hour or in UTC, is planned on the whole deadline)")
    return bp.model_copy(update={"predictions": predictions, "batch": plan, "rationale": [*bp.rationale, note]})


def async_inference(bp: Blueprint, replay: BatchReplay) -> AsyncInference:
    """A SageMaker batch's asynchronous endpoint: each instance takes its batch (`max_rolling_batch_size`, at most
    1,000) at once, target tracking holds one batch queued per instance (so a full queue asks for every planned
    instance), and each instance runs from its start until the queue is empty plus the scale-in lag
    (`defaults.SAGEMAKER_ASYNC_SCALE_IN_LAG_S`, [assumption]): `replay.replicas` x (completion - the scale-from-zero
    delay + the lag) instance-hours a day."""
    batch = min(bp.engine.max_rolling_batch_size or 1, MAX_CONCURRENT_INVOCATIONS_PER_INSTANCE)  # type: ignore[union-attr]
    running_s = replay.completion_s - defaults.SAGEMAKER_ASYNC_SCALE_FROM_ZERO_S + defaults.SAGEMAKER_ASYNC_SCALE_IN_LAG_S
    return AsyncInference(max_concurrent_invocations_per_instance=batch, backlog_target=float(batch),
                          output_prefix=async_output_prefix(bp.stack),
                          instance_hours_per_day=round(replay.replicas * running_s / 3600, 3))


def _async_note(bp: Blueprint, plan: BatchPlan, replay: BatchReplay, monthly: float) -> str:
    """The plan's sentence for a SageMaker asynchronous batch."""
    a = plan.async_inference
    assert a is not None
    last_start_h = (replay.completion_s - replay.request_latency_s) / 3600
    return (f"batch: {replay.requests:,.0f} requests a day queued at {plan.window_start_hour:02d}:00 {plan.timezone} "
            f"on a SageMaker asynchronous endpoint (InvokeEndpointAsync): {replay.replicas} x "
            f"{bp.compute.instance_type} started from zero on the queue (HasBacklogWithoutCapacity; start "
            f"{replay.start_s:,.0f} s with the {defaults.SAGEMAKER_ASYNC_SCALE_FROM_ZERO_S} s alarm), each taking "
            f"{a.max_concurrent_invocations_per_instance} requests at once ({replay.requests_per_s_per_replica:.2f} "
            f"requests/s, one request {replay.request_latency_s:.1f} s p95, within InvocationTimeoutSeconds "
            f"{defaults.SAGEMAKER_ASYNC_INVOCATION_TIMEOUT_S:,} s); the last request starts {last_start_h:.2f} h after "
            f"the window's start (RequestTTLSeconds {defaults.SAGEMAKER_ASYNC_REQUEST_TTL_S:,} s) and the day "
            f"completes in {replay.completion_s / 3600:.2f} h of the {plan.deadline_hours:g} h deadline; "
            f"{a.instance_hours_per_day:,.1f} instance-hours a day with a {defaults.SAGEMAKER_ASYNC_SCALE_IN_LAG_S} s "
            f"scale-in lag each [assumption], about ${monthly:,.0f}/month against "
            f"${bp.predictions.monthly_cost_usd:,.0f}/month for the same instances all day")


def describe_batch(plan: BatchPlan) -> str:
    """A batch run in words: `completes in 5.61 h of 6 h deadline; 3 replica(s) 6 h a day from 22:00 Europe/Berlin
    (KEDA cron '0 22 * * *' to '0 4 * * *' Europe/Berlin, none outside), $1,845/month`."""
    if plan.async_inference is not None:
        return (f"completes in {plan.completion_hours:.2f} h of {plan.deadline_hours:g} h deadline; up to "
                f"{plan.replicas} instance(s) from {plan.window_start_hour:02d}:00 {plan.timezone} "
                f"({plan.schedule()}), ${plan.monthly_cost_usd:,.0f}/month")
    when = f"{plan.schedule()}, none outside" if plan.keda_cron else "always on"
    return (f"completes in {plan.completion_hours:.2f} h of {plan.deadline_hours:g} h deadline; "
            f"{plan.replicas} replica(s) {plan.run_hours:g} h a day from {plan.window_start_hour:02d}:00 "
            f"{plan.timezone} ({when}), ${plan.monthly_cost_usd:,.0f}/month")
