"""The SLO attainment a buyer signs: `slo.attainment_pct` and `slo.longest_violation_minutes` plan the warm floor, the
plan prices each step up, and a target out of reach is refused naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from blueprints.contracts.sections import StartupBudget
from blueprints.core.errors import RequirementsError
from blueprints.plan.builders.context import cooldown_s
from blueprints.plan.scaling import warm_floor
from blueprints.simulate.fleet import simulate
from tests.blueprint_builders import derive
from tests.conftest import l40s_chat, plan_env, requirements_with

#: A start slow enough (645 s) that bursts outpace it: the warm floor has to rise (tests/test_simulation.py).
SLOW_START = StartupBudget(node_provisioning_s=360, image_pull_s=150, weights_download_s=60, model_load_s=75)


def _slow(bp, **slo):
    """`bp` with a slow start, its floor back at production's availability floor (2), and `slo`'s settings."""
    return bp.model_copy(update={
        "startup": SLOW_START, "slo": bp.slo.model_copy(update=slo),
        "autoscaling": bp.autoscaling.model_copy(update={"cooldown_s": cooldown_s(SLOW_START), "min_replicas": 2})})


@pytest.fixture(scope="module")
def busy_chat():
    bp = plan_env(l40s_chat(), "prod")
    assert bp.compute.replicas > bp.autoscaling.min_replicas
    return bp


def test_the_default_attainment_is_higher_in_production():
    req = requirements_with()
    assert plan_env(req, "prod").slo.attainment_pct == 99
    assert plan_env(req, "dev").slo.attainment_pct == 95


def test_a_higher_attainment_keeps_more_replicas_warm_and_each_floor_is_the_lowest_that_meets_it(busy_chat):
    floors = {}
    for pct in (95.0, 99.0, 99.9):
        bp, run, note = warm_floor(_slow(busy_chat, attainment_pct=pct))
        floor = bp.autoscaling.min_replicas
        assert run.slo_attainment * 100 >= pct and floor > 2
        below = simulate(derive(bp, autoscaling={"min_replicas": floor - 1}))
        assert below.slo_attainment * 100 < pct  # one fewer warm misses it
        assert f"(goal {pct:g} % of minutes, slo.attainment_pct)" in note
        floors[pct] = (floor, run.expected_monthly_usd)
    assert floors[95.0][0] < floors[99.0][0] <= floors[99.9][0]
    assert floors[95.0][1] < floors[99.0][1]


def test_the_plan_prices_each_step_up_in_warm_replicas_and_dollars(busy_chat):
    bp, run, note = warm_floor(_slow(busy_chat, attainment_pct=95.0))
    assert "; each step up (slo.attainment_pct): 99 % of minutes +$" in note
    higher, at_99, _ = warm_floor(_slow(busy_chat, attainment_pct=99.0))
    extra = at_99.expected_monthly_usd - run.expected_monthly_usd
    assert f"99 % of minutes +${extra:,.0f}/month ({higher.autoscaling.min_replicas} warm)" in note


def test_a_longest_violation_limit_can_raise_the_floor_beyond_the_attainment(busy_chat):
    bp, run, _ = warm_floor(_slow(busy_chat, attainment_pct=95.0))
    assert run.slo_longest_violation_minutes > 1  # the 95 % floor still misses runs of minutes
    limited, limited_run, note = warm_floor(_slow(busy_chat, attainment_pct=95.0, longest_violation_minutes=1))
    assert limited_run.slo_longest_violation_minutes <= 1
    assert limited.autoscaling.min_replicas > bp.autoscaling.min_replicas
    assert "with no miss longer than 1 minute(s)" in note


def test_an_attainment_the_peaks_replicas_cannot_reach_is_refused_only_when_the_requirements_set_it(busy_chat):
    # a TTFT target just under what a replica reaches at its peak share: the busiest minutes miss with every replica warm
    tight = busy_chat.predictions.ttft_p95_ms * 0.9
    slow = _slow(busy_chat, attainment_pct=99.9, longest_violation_minutes=0, ttft_p95_ms=tight)
    top = simulate(slow.model_copy(update={"autoscaling": slow.autoscaling.model_copy(
        update={"min_replicas": slow.compute.replicas})}))  # model_copy: a stack config would refuse the tight target
    assert top.slo_attainment < 0.999
    _, _, note = warm_floor(slow)  # a default goal: stated, not refused
    assert "the peak share per replica, not the autoscaler, misses" in note
    with pytest.raises(RequirementsError, match="slo.attainment_pct and slo.longest_violation_minutes: even the "
                       f"peak's {slow.compute.replicas} replicas kept warm") as err:
        warm_floor(slow, goal_is_set=True)
    assert err.value.rule == "slo-attainment-reachable"


def test_a_scale_to_zero_environment_that_misses_a_set_attainment_is_refused_naming_min_replicas():
    dev = plan_env(requirements_with(), "dev")
    assert dev.autoscaling.min_replicas == 0 and dev.predictions.slo_attainment < 1
    with pytest.raises(RequirementsError, match="set environments.dev.min_replicas >= 1"):
        warm_floor(dev.model_copy(update={"slo": dev.slo.model_copy(update={"attainment_pct": 100.0})}),
                   goal_is_set=True)


@pytest.mark.parametrize(("slo", "field"), [({"attainment_pct": 100.5}, "attainment_pct"),
                                            ({"attainment_pct": 49}, "attainment_pct"),
                                            ({"longest_violation_minutes": -1}, "longest_violation_minutes"),
                                            ({"longest_violation_minutes": 1441}, "longest_violation_minutes")])
def test_attainment_fields_out_of_bounds_are_refused(slo, field):
    with pytest.raises(ValidationError, match=field):
        requirements_with(slo=slo)


def test_no_miss_at_all_with_bursty_traffic_and_scale_to_zero_is_refused_when_read():
    with pytest.raises(ValidationError, match="longest-violation|environments.dev.min_replicas 0"):
        requirements_with(slo={"longest_violation_minutes": 0}, traffic={"pattern": "bursty"},
                          environments={"dev": {"region": "us-west-2", "min_replicas": 0},
                                        "prod": {"region": "us-east-1"}})


def test_a_set_attainment_the_requirements_own_minimum_misses_is_refused_naming_both():
    """chat-assistant dev scales to zero (environments.dev.min_replicas: 0, so the plan keeps that floor): its cold
    starts miss 8 minutes of the day, so 100 % of minutes is out of reach at that floor."""
    req = requirements_with(slo={"attainment_pct": 100})
    assert req.environments["dev"].min_replicas == 0
    with pytest.raises(RequirementsError, match=r"slo.attainment_pct: environments.dev.min_replicas=0 keeps the "
                       r"simulated day within the p95 targets in 99.\d% of minutes .* raise environments.dev."
                       r"min_replicas") as err:
        plan_env(req, "dev")
    assert err.value.rule == "slo-attainment-reachable"
    assert plan_env(requirements_with(slo={"attainment_pct": 99}), "dev").predictions.slo_attainment >= 0.99


def test_no_miss_with_spiky_traffic_names_the_spiky_pattern():
    with pytest.raises(ValidationError, match="0 with spiky traffic and environments.dev.min_replicas 0"):
        requirements_with(slo={"longest_violation_minutes": 0}, traffic={"pattern": "spiky"})


def test_a_tight_ttft_p99_target_costs_violation_minutes_and_raises_the_warm_floor(busy_chat):
    """The simulated day judges each minute against the p99 targets too: a TTFT p99 target just above what a replica
    reaches at its peak share (10 % above) holds at the peak but not in the minutes bursts outpace the autoscaler, so
    the same fleet misses more minutes and the floor planned for the same attainment keeps more replicas warm."""
    from blueprints.capacity.replica import replica_model

    peak_share = sum(m.traffic.peak_requests_per_s for m in busy_chat.models) / busy_chat.compute.replicas
    p99_at_peak = replica_model(busy_chat).at(peak_share).latency_ms["ttft_p99_ms"]
    assert p99_at_peak > busy_chat.slo.ttft_p95_ms  # so the p99 target below is a valid one (at least the p95's)
    p95_only = _slow(busy_chat, attainment_pct=95.0)
    with_p99 = _slow(busy_chat, attainment_pct=95.0, ttft_p99_ms=round(p99_at_peak * 1.1))
    before, after = simulate(p95_only), simulate(with_p99)
    assert after.slo_violation_minutes > before.slo_violation_minutes
    assert after.slo_longest_violation_minutes >= before.slo_longest_violation_minutes
    assert after.slo_attainment < before.slo_attainment
    assert set(after.worst_ms) == {"ttft_p95_ms", "itl_p95_ms", "ttft_p99_ms"}
    assert after.worst_ms["ttft_p99_ms"] >= after.worst_ms["ttft_p95_ms"]
    assert after.violations().startswith(f"p95 or p99 over target in {after.slo_violation_minutes:,} of 1,440")
    assert f"TTFT p99 {after.worst_ms['ttft_p99_ms']:,.0f} ms (target {round(p99_at_peak * 1.1):,} ms)" \
        in after.violations()
    low, low_run, _ = warm_floor(p95_only)
    high, high_run, note = warm_floor(with_p99)
    assert high.autoscaling.min_replicas > low.autoscaling.min_replicas
    assert high_run.slo_attainment >= 0.95 and "meets the p95 and p99 targets in" in note
    below = simulate(derive(high, autoscaling={"min_replicas": high.autoscaling.min_replicas - 1}))
    assert below.slo_attainment < 0.95  # one fewer warm misses the p99-judged goal
