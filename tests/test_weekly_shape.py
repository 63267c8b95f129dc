"""A weekly shape (issue 39 item 3): `traffic.weekly: {weekend_factor, weekend_days}` makes the planned day a working
day and the weekend a quieter copy of it; the monthly expected cost (and the unit costs from it) is the week's,
each kind of day simulated and weighted by how many a week has, while the SLO stays planned for the working day."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.blueprint import Blueprint
from blueprints.requirements.model import WeeklyShape
from blueprints.simulate.fleet import planned_traffic, simulate, week_days
from tests.conftest import example_data, l40s_chat, plan_env, requirements_with

runner = CliRunner()


def _weekly(bp: Blueprint, **shape) -> Blueprint:
    model = bp.models[0]
    traffic = model.traffic.model_copy(update={"weekly": WeeklyShape(**shape)})
    return bp.model_copy(update={"models": [model.model_copy(update={"traffic": traffic}), *bp.models[1:]]})


def test_a_week_is_five_working_days_and_two_weekend_days_unless_the_days_are_named():
    assert WeeklyShape(weekend_factor=0.4).day_factors() == (1, 1, 1, 1, 1, 0.4, 0.4)
    assert WeeklyShape(weekend_factor=0.5, weekend_days=["friday", "saturday"]).day_factors() == (
        1, 1, 1, 1, 0.5, 0.5, 1)


def test_the_expected_cost_is_the_week_s_each_day_weighted(chat_prod):
    bp = _weekly(chat_prod, weekend_factor=0.4)
    assert week_days(bp) == {(1.0,): 5, (0.4,): 2} and week_days(chat_prod) == {(1.0,): 7}
    working = simulate(chat_prod)
    weekend = simulate(bp, trace=[r * 0.4 for r in planned_traffic(chat_prod)])
    week = simulate(bp)
    assert week.working_day_monthly_usd == working.expected_monthly_usd and working.working_day_monthly_usd is None
    assert week.expected_monthly_usd == pytest.approx((5 * working.expected_monthly_usd
                                                       + 2 * weekend.expected_monthly_usd) / 7)
    assert weekend.expected_monthly_usd <= working.expected_monthly_usd
    assert week.mean_rps == pytest.approx(working.mean_rps * (5 + 2 * 0.4) / 7)
    # the SLO figures stay the working day's (the busiest, which the plan is sized for)
    assert (week.slo_attainment, week.slo_violation_minutes) == (working.slo_attainment, working.slo_violation_minutes)
    assert simulate(_weekly(chat_prod, weekend_factor=1.0)).expected_monthly_usd == working.expected_monthly_usd


def test_a_plan_with_quiet_weekends_expects_less_and_prices_the_week_s_requests():
    """chat-assistant on L40S at 12 requests/s (it scales): weekends at 20 % lower the expected monthly cost; the
    peak, the replicas and the SLO are the working day's."""
    plain = plan_env(l40s_chat(), "prod")
    req = requirements_with(hardware={"allowed_instance_families": ["g6e"]},
                            traffic={"peak_requests_per_s": 12, "weekly": {"weekend_factor": 0.2}})
    weekly = plan_env(req, "prod")
    p, q = plain.predictions, weekly.predictions
    assert (weekly.compute.replicas, q.monthly_cost_usd) == (plain.compute.replicas, p.monthly_cost_usd)
    assert q.expected_monthly_cost_usd < p.expected_monthly_cost_usd
    assert weekly.models[0].traffic.weekly == WeeklyShape(weekend_factor=0.2)  # written to the stack config
    # per 1k requests: the week's cost over the week's requests (5.4 working days' worth of 7)
    per_request = q.unit_costs.expected.usd_per_1k_requests / p.unit_costs.expected.usd_per_1k_requests
    assert per_request == pytest.approx(q.expected_monthly_cost_usd / p.expected_monthly_cost_usd / (5.4 / 7),
                                        rel=0.01)
    [note] = [r for r in weekly.rationale if r.startswith("fleet simulation of a planned day")]
    assert "traffic), weighted over a week with saturday, sunday at 20% of a working day's traffic: " in note
    assert (f"about ${q.expected_monthly_cost_usd:,.0f}/month expected (a working day alone: "
            f"${p.expected_monthly_cost_usd:,.0f}/month) against") in note


@pytest.mark.parametrize(("weekly", "words"), [
    ({"weekend_factor": 1.5}, ["traffic.weekly.weekend_factor", "less than or equal to 1"]),
    ({"weekend_factor": -0.1}, ["traffic.weekly.weekend_factor"]),
    ({}, ["traffic.weekly.weekend_factor"]),
    ({"weekend_factor": 0.4, "weekend_days": ["saturday", "saturday"]}, ["traffic.weekly.weekend_days",
                                                                         "names a day twice"]),
    ({"weekend_factor": 0.4, "weekend_days": []}, ["traffic.weekly.weekend_days"]),
    ({"weekend_factor": 0.4, "weekend_days": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                                              "sunday"]}, ["traffic.weekly.weekend_days"]),
    ({"weekend_factor": 0.4, "weekend_days": ["caturday"]}, ["traffic.weekly.weekend_days"]),
    ({"weekend_factor": 0.4, "weekdays": ["monday"]}, ["traffic.weekly.weekdays"]),
])
def test_a_bad_weekly_shape_exits_2_naming_the_field(project, weekly, words):
    data = example_data()
    data["service"] = "chat-draft"
    data["traffic"]["weekly"] = weekly
    path = project / "stacks" / "requirements" / "chat-draft.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["plan", str(path), "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    shown = " ".join(result.output.split())
    assert "Traceback" not in shown
    for word in words:
        assert word in shown, shown
