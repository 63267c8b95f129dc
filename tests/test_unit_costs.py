"""Unit costs: USD per 1k requests and per 1M input, output and total tokens, from the expected fleet and the planned
traffic (the peak-provisioned fleet beside it), in the plan, its output, the review and the change review."""

from __future__ import annotations

import pytest

from blueprints.capacity.analytic import prefill_time_share
from blueprints.capacity.physics import replica_model
from blueprints.plan.unit_costs import describe
from blueprints.review.changes import prediction_changes
from blueprints.review.report.changes import delta, value
from blueprints.simulate.fleet import planned_traffic
from blueprints.requirements.model import Precision
from tests.conftest import plan_env, requirements_with

HOURS = 730


def _requests_per_month(bp) -> float:
    day = planned_traffic(bp)
    return sum(day) / len(day) * 3600 * HOURS


def test_unit_costs_price_the_planned_days_traffic_with_the_expected_fleet_and_the_peaks_beside_it():
    bp = plan_env(requirements_with("regulated-assistant"), "prod")
    p, u = bp.predictions, bp.predictions.unit_costs
    assert p.expected_monthly_cost_usd < p.monthly_cost_usd  # the autoscaled day costs less than the peak all month
    requests = _requests_per_month(bp)
    assert u.requests_per_month == pytest.approx(requests, rel=1e-6)
    assert u.expected.usd_per_1k_requests == pytest.approx(p.expected_monthly_cost_usd / requests * 1e3, rel=1e-3)
    assert u.provisioned.usd_per_1k_requests == pytest.approx(p.monthly_cost_usd / requests * 1e3, rel=1e-3)
    assert u.expected.usd_per_1k_requests < u.provisioned.usd_per_1k_requests


def test_a_generative_plans_cost_splits_between_input_and_output_tokens_and_adds_up():
    bp = plan_env(requirements_with(), "prod")
    p, u = bp.predictions, bp.predictions.unit_costs
    traffic = bp.models[0].traffic
    inputs, outputs = u.million_input_tokens_per_month * 1e6, u.million_output_tokens_per_month * 1e6
    assert inputs == pytest.approx(u.requests_per_month * traffic.mean_input_tokens, rel=1e-6)
    assert outputs == pytest.approx(u.requests_per_month * traffic.mean_output_tokens, rel=1e-6)
    for prices, monthly in ((u.expected, p.expected_monthly_cost_usd), (u.provisioned, p.monthly_cost_usd)):
        split = (prices.usd_per_million_input_tokens * inputs + prices.usd_per_million_output_tokens * outputs) / 1e6
        assert split == pytest.approx(monthly, rel=2e-3)  # the two shares are the whole cost
        assert prices.usd_per_million_tokens == pytest.approx(monthly / (inputs + outputs) * 1e6, rel=1e-3)
        assert prices.usd_per_million_input_tokens == pytest.approx(monthly * p.prefill_time_share / inputs * 1e6,
                                                                    rel=1e-3)
    assert 0.05 < p.prefill_time_share < 0.5  # 1,200-token prompts, 300-token answers: decode takes most of it


def test_non_generative_plans_have_a_cost_per_1k_requests_and_no_token_prices():
    bp = plan_env(requirements_with("search-relevance"), "prod")
    u = bp.predictions.unit_costs
    assert bp.predictions.prefill_time_share is None
    assert u.million_input_tokens_per_month is None and u.expected.usd_per_million_tokens is None
    assert u.expected.usd_per_1k_requests == pytest.approx(
        bp.predictions.expected_monthly_cost_usd / _requests_per_month(bp) * 1e3, rel=1e-3)


def test_prompts_take_a_larger_share_of_the_replicas_time_as_they_grow_against_the_output(catalog):
    model = replica_model(catalog.model("llama-3.1-8b").architecture, catalog.gpu("l40s"), precision=Precision.BF16,
                          tensor_parallel_size=1)
    shares = [prefill_time_share(model, running=8, input_tokens=n, output_tokens=256) for n in (128, 1024, 8192)]
    assert shares == sorted(shares) and shares[0] < 0.1 < shares[-1] < 1
    # more sequences share each decode step, so a prompt's own prefill is a larger share of what one request costs
    assert prefill_time_share(model, running=64, input_tokens=1024, output_tokens=256) > shares[1]


def test_the_plan_output_and_the_review_state_the_unit_costs(chat_prod):
    from blueprints.cli import _expected

    text = describe(chat_prod.predictions.unit_costs.expected)
    assert text.startswith(f"${chat_prod.predictions.unit_costs.expected.usd_per_1k_requests:g} per 1k requests; "
                           "per 1M tokens $")
    assert text in _expected(chat_prod.predictions)


def test_the_change_review_lists_unit_costs_with_their_deltas(chat_prod):
    after = chat_prod.predictions.model_dump(mode="json")
    before = chat_prod.predictions.model_copy(update={"unit_costs": chat_prod.predictions.unit_costs.model_copy(
        update={"expected": chat_prod.predictions.unit_costs.expected.model_copy(
            update={"usd_per_1k_requests": 0.5, "usd_per_million_tokens": 0.25})})}).model_dump(mode="json")
    changes = {c.label: c for c in prediction_changes(before, after)}
    per_1k = changes["cost per 1k requests (expected fleet)"]
    now = chat_prod.predictions.unit_costs.expected.usd_per_1k_requests
    assert (per_1k.before, per_1k.after) == (0.5, now)
    assert value(per_1k, 0.003501) == "$0.003501"  # a unit cost keeps its digits below a dollar
    assert delta(per_1k).startswith(f"+{now - 0.5:.4g} USD" if now > 0.5 else f"-{0.5 - now:.4g} USD")
    assert "cost per 1M input tokens (expected fleet)" in changes
