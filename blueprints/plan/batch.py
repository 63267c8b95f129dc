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
environment's (`environments.<env>.spot`, never in production), as for any service. SageMaker batch transform and
asynchronous inference are not planned (docs/how-to/batch.md says why).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Callable

from blueprints.catalog import load_catalog
from blueprints.core import bounds
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Archetype, BatchPlan, KedaCron
from blueprints.core.errors import RequirementsError, SizingError
from blueprints.plan.engines import with_token_prices
from blueprints.plan.unit_costs import unit_costs
from blueprints.requirements.hosting import OperationsPreference
from blueprints.requirements.model import Batch
from blueprints.requirements.service import Requirements
from blueprints.simulate.batch import BatchReplay, replay_batch

#: Most plans of one environment while its replayed day finishes after the deadline (each raises the rate by how
#: late it was; the second plan nearly always fits, the capacity model's throughput being the replay's).
MAX_PLANS = 4


def batch_requirements(req: Requirements, rate_per_s: float) -> Requirements:
    """`req` as a steady stream at `rate_per_s` requests/s (before `traffic_scale`), self-hosted (with preference
    `any`), with no budget (it applies to the run's hours, `batch_predictions`, not to the fleet all month): what the
    option search sizes. Not re-validated: only the rate, the preference and the budget change."""
    traffic = req.model_entries()[0][1].model_copy(update={"peak_requests_per_s": rate_per_s})
    update: dict = ({"traffic": traffic} if req.traffic is not None else
                    {"model": req.model.model_copy(update={"traffic": traffic})})  # type: ignore[union-attr]
    update["budget"] = req.budget.model_copy(update={"max_monthly_usd": None})
    if req.operations.preference is OperationsPreference.ANY:
        update["operations"] = req.operations.model_copy(update={"preference": OperationsPreference.SELF_HOSTED})
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
    """Plan each environment of a batch service.

    The replayed day must end by the run's shortest real length (`Batch.shortest_run_s`): the cron end is a local time,
    so a run spanning the spring-forward change is an hour shorter that night, and a fleet planned on the nominal
    deadline with less than that hour to spare would miss it once a year. The rationale names that night.

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
            (batch-deadline-holds-request).
        SizingError: no plan finishes by the deadline within `MAX_PLANS` tries.
    """
    batch, traffic = req.batch, req.model_entries()[0][1]
    assert batch is not None
    deadline_s, night = batch.shortest_run_s(today=as_of)
    planned = []
    for env in names:
        requests = traffic.batch_requests_per_day * req.environments[env].traffic_scale  # type: ignore[operator]
        nominal = traffic.batch_rate_per_s * batch.deadline_hours * 3600 / deadline_s  # the work over the shortest run
        shortest = (deadline_s, night)
        rate, _, _ = _search(req, env, lambda fixed: size(fixed, env, False), nominal, requests=requests,
                             shortest=shortest)  # the requirements' rate, from a fresh plan
        _, bp, replay = _search(req, env, lambda fixed: size(fixed, env, True), rate, requests=requests,
                                shortest=shortest)  # the existing hardware kept at that rate, where it still is
        done = finish(bp, lambda sized, r=replay: batch_predictions(sized, batch, r, shortest=shortest))
        budget = req.budget.max_monthly_usd
        if budget is not None and done.batch.monthly_cost_usd > budget:  # type: ignore[union-attr]
            raise SizingError(f"environments.{env}: the batch's run, {done.batch.replicas} replica(s) of "  # type: ignore[union-attr]
                              f"{done.compute.instance_type} for {done.batch.run_hours:g} h a day, costs "  # type: ignore[union-attr]
                              f"${done.batch.monthly_cost_usd:,.0f}/month, above budget.max_monthly_usd="  # type: ignore[union-attr]
                              f"{budget:,.0f}; raise the budget (it is the cheapest run finishing by the deadline)")
        planned.append(done)
    return planned


def _search(req: Requirements, env: str, size: Callable[[Requirements], Blueprint], rate: float, *,
            requests: float, shortest: tuple[float, dt.date | None]) -> tuple[float, Blueprint, BatchReplay]:
    """From `rate`, requests/s, size the environment `env` (`size`) and replay its day of `requests` until it ends
    within the shortest run (`shortest`: its seconds and its night, `Batch.shortest_run_s`), raising the rate by how
    late it was; returns the rate, the sized blueprint and its replay.

    Raises:
        RequirementsError: not on vllm-gpu (batch-service), or the deadline holds no request
            (batch-deadline-holds-request, checked when the first sizing fails).
        SizingError: still late after `MAX_PLANS` plans (feasible-plan), or the option search's own.
    """
    batch, (deadline_s, night) = req.batch, shortest
    assert batch is not None
    for attempt in range(MAX_PLANS):
        try:
            bp = size(batch_requirements(req, rate))
        except SizingError:
            if attempt == 0:  # a deadline too short for any replica may be why: say so rather than the fleet
                _check_deadline(batch, size(batch_requirements(req, bounds.MIN_PEAK_REQUESTS_PER_S)),
                                deadline_s=deadline_s, night=night)
            raise
        if bp.archetype is not Archetype.VLLM_GPU:
            raise RequirementsError(f"environments.{env}: a batch is planned on vllm-gpu (GPU nodes), not "
                                    f"{bp.archetype.value}; allow nvidia-gpu in hardware.accelerators and plan "
                                    "on the shared platform's or an existing cluster", rule="batch-service")
        replay = replay_batch(bp, requests=requests)
        spare_s = _check_deadline(batch, bp, replay, deadline_s=deadline_s, night=night)
        if replay.completion_s <= deadline_s:
            return rate, bp, replay
        # Late: the work needs (completion - start - latency) of serving at this fleet and has spare_s.
        rate *= (replay.completion_s - replay.start_s - replay.request_latency_s) / spare_s * 1.001
    raise SizingError(f"environments.{env}: the batch's replayed day ends {replay.completion_s / 3600:.2f} h "
                      f"after the window's start, beyond traffic.batch.deadline_hours="
                      f"{batch.deadline_hours:g}{_shorter(deadline_s, night)} after {MAX_PLANS} plans; raise "
                      "deadline_hours or hardware.allowed_instance_families", rule="feasible-plan")


def _shorter(deadline_s: float, night: dt.date | None) -> str:
    """`, X h of real time on the run starting <night> (the clocks skip ahead)`, or nothing when no night is shorter."""
    return "" if night is None else (f", {deadline_s / 3600:g} h of real time on the run starting {night} (the "
                                     "clocks skip ahead for daylight saving time)")


def _check_deadline(batch: Batch, bp: Blueprint, replay: BatchReplay | None = None, *, deadline_s: float,
                    night: dt.date | None) -> float:
    """The seconds the deadline leaves after a replica of `bp` starts and serves one request (`replay`, default
    `bp`'s own replay of one request), on the shortest night (`deadline_s`, shorter than `deadline_hours` on `night`).

    Raises:
        RequirementsError: none are left (batch-deadline-holds-request), naming the least deadline that holds them.
    """
    replay = replay or replay_batch(bp, requests=1)
    spare_s = deadline_s - replay.start_s - replay.request_latency_s
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
    plan = BatchPlan(requests_per_day=round(replay.requests, 3), deadline_hours=batch.deadline_hours,
                     window_start_hour=batch.window.start_hour, window_hours=batch.window.hours,  # type: ignore[union-attr]
                     timezone=batch.window.timezone, run_hours=run_hours,  # type: ignore[union-attr]
                     replicas=replay.replicas, requests_per_s_per_replica=round(replay.requests_per_s_per_replica, 4),
                     start_s=replay.start_s, request_latency_s=round(replay.request_latency_s, 2),
                     completion_hours=round(replay.completion_s / 3600, 3), monthly_cost_usd=monthly, keda_cron=cron)
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


def describe_batch(plan: BatchPlan) -> str:
    """A batch run in words: `completes in 5.61 h of 6 h deadline; 3 replica(s) 6 h a day from 22:00 Europe/Berlin
    (KEDA cron '0 22 * * *' to '0 4 * * *' Europe/Berlin, none outside), $1,845/month`."""
    when = f"{plan.schedule()}, none outside" if plan.keda_cron else "always on"
    return (f"completes in {plan.completion_hours:.2f} h of {plan.deadline_hours:g} h deadline; "
            f"{plan.replicas} replica(s) {plan.run_hours:g} h a day from {plan.window_start_hour:02d}:00 "
            f"{plan.timezone} ({when}), ${plan.monthly_cost_usd:,.0f}/month")
