"""A diurnal day in the requirements (`traffic.daily`): the fleet simulation replays it instead of the pattern's canned
wave, and the plan's expected cost and unit costs follow it; bad values exit 2 naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from blueprints.requirements.model import DailyShape
from blueprints.simulate.fleet import planned_traffic
from blueprints.simulate.traffic import MINUTES_PER_DAY, daily_curve, diurnal_level
from tests.conftest import plan_env, requirements_with


def test_a_diurnal_day_runs_at_the_peak_in_its_hours_and_the_trough_outside_with_ramps():
    day = DailyShape(peak_to_trough=3, peak_hours=(9, 17), timezone="America/New_York")
    level = [diurnal_level(m, day) for m in range(MINUTES_PER_DAY)]
    assert level[9 * 60] == level[16 * 60 + 59] == 1.0  # inside [09:00, 17:00)
    assert level[3 * 60] == level[20 * 60] == pytest.approx(1 / 3)
    assert level[8 * 60] == pytest.approx(1 / 3) and level[8 * 60 + 30] == pytest.approx((1 + 1 / 3) / 2)  # ramp up
    assert level[17 * 60 + 30] == pytest.approx((1 + 1 / 3) / 2) and level[18 * 60] == pytest.approx(1 / 3)
    assert level == sorted(level[:9 * 60]) + level[9 * 60:]  # rises monotonically to the peak


def test_peak_hours_may_span_midnight():
    night = DailyShape(peak_to_trough=10, peak_hours=(22, 2))
    assert diurnal_level(23 * 60, night) == diurnal_level(60, night) == 1.0
    assert diurnal_level(12 * 60, night) == pytest.approx(0.1)


def test_the_steady_pattern_on_a_diurnal_day_averages_what_its_hours_hold():
    day = DailyShape(peak_to_trough=4, peak_hours=(8, 20))
    curve = daily_curve("steady", 10.0, daily=day)
    mean = sum(curve) / len(curve)
    # 12 peak hours at 10, 10 trough hours at 2.5, two ramp hours averaging 6.25
    assert mean == pytest.approx((12 * 10 + 10 * 2.5 + 2 * 6.25) / 24, rel=1e-3)
    bursty = daily_curve("bursty", 10.0, daily=day)
    assert max(bursty) == pytest.approx(10.0) and min(bursty) == pytest.approx(2.5)
    assert bursty[14 * 60] == pytest.approx(10.0)  # a burst (and the peak) at the middle of the peak hours


def test_the_plan_simulates_the_diurnal_day_and_its_costs_follow_it():
    flat = plan_env(requirements_with("regulated-assistant"), "prod")
    swing = plan_env(requirements_with("regulated-assistant", traffic={
        "daily": {"peak_to_trough": 5, "peak_hours": [9, 17], "timezone": "Europe/Berlin"}}), "prod")
    assert swing.model.traffic.daily.peak_to_trough == 5
    assert swing.compute.replicas == flat.compute.replicas  # the same peak
    day = planned_traffic(swing)
    assert max(day) == pytest.approx(swing.model.traffic.peak_requests_per_s)
    assert sum(day) < sum(planned_traffic(flat))
    assert swing.predictions.expected_monthly_cost_usd <= flat.predictions.expected_monthly_cost_usd
    assert swing.predictions.unit_costs.requests_per_month < flat.predictions.unit_costs.requests_per_month
    assert any("5x daily swing, peak 09:00-17:00 Europe/Berlin" in r for r in swing.rationale)


@pytest.mark.parametrize(("daily", "field"), [({"peak_to_trough": 0.5}, "peak_to_trough"),
                                              ({"peak_to_trough": 1001}, "peak_to_trough"),
                                              ({"peak_to_trough": 3, "peak_hours": [9, 24]}, "peak_hours"),
                                              ({"peak_to_trough": 3, "peak_hours": [-1, 5]}, "peak_hours"),
                                              ({"peak_to_trough": 3, "peak_hours": [9, 9]}, "peak_hours"),
                                              ({"peak_to_trough": 3, "timezone": "Mars/Olympus"}, "timezone"),
                                              ({"peak_to_trough": 3, "timezone": "localtime"}, "timezone"),
                                              ({"peak_to_trough": 3, "timezone": "posix/UTC"}, "timezone")])
def test_a_bad_daily_shape_is_refused_naming_the_field(daily, field):
    with pytest.raises(ValidationError, match=field):
        requirements_with(traffic={"daily": daily})
