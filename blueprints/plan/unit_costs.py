"""Unit costs of a plan: USD per 1k requests and, for generative models, per 1M prompt, generated and total tokens.

The figures a buyer compares platforms with. Both fleets are priced on the same traffic, the planned day's pattern
(`blueprints.simulate.fleet.planned_traffic`, what the fleet simulation replays): the expected fleet (the autoscaled
fleet's simulated cost, `expected_monthly_cost_usd`) and the fleet provisioned for the peak all month
(`monthly_cost_usd`). A generative model's cost splits between its prompt and generated tokens by the share of the
replica's busy time its prefill takes (`Predictions.prefill_time_share`); the total-token figure divides the whole
cost by both.
"""

from __future__ import annotations

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import UnitCosts, UnitPrices


def unit_costs(bp: Blueprint, *, mean_rps: float, expected_monthly_usd: float,
               hours_per_month: float) -> UnitCosts | None:
    """`bp`'s unit costs for traffic averaging `mean_rps` requests/s over the planned day, or None without traffic.

    Args:
        bp: a planned blueprint (its predictions' `monthly_cost_usd` and, for generative models,
            `prefill_time_share`; its models' mean prompt and output tokens).
        mean_rps: requests/s averaged over the planned day (all models), or over the week with a weekly shape
            (`blueprints.simulate.fleet.SimulationResult.mean_rps`).
        expected_monthly_usd: the expected fleet's monthly cost, USD.
        hours_per_month: hours the monthly costs are priced over.
    """
    if mean_rps <= 0:
        return None
    p = bp.predictions
    requests = mean_rps * 3600 * hours_per_month
    share = p.prefill_time_share
    traffic = bp.models[0].traffic if share is not None and len(bp.models) == 1 else None
    inputs = requests * traffic.mean_input_tokens if traffic else None
    outputs = requests * traffic.mean_output_tokens if traffic else None

    def prices(monthly: float) -> UnitPrices:
        if inputs is None or outputs is None or share is None:
            return UnitPrices(usd_per_1k_requests=_round(monthly / requests * 1e3))
        return UnitPrices(usd_per_1k_requests=_round(monthly / requests * 1e3),
                          usd_per_million_input_tokens=_round(monthly * share / inputs * 1e6),
                          usd_per_million_output_tokens=_round(monthly * (1 - share) / outputs * 1e6),
                          usd_per_million_tokens=_round(monthly / (inputs + outputs) * 1e6))

    return UnitCosts(requests_per_month=round(requests),
                     million_input_tokens_per_month=inputs and round(inputs / 1e6, 3),
                     million_output_tokens_per_month=outputs and round(outputs / 1e6, 3),
                     expected=prices(expected_monthly_usd), provisioned=prices(p.monthly_cost_usd))


def _round(usd: float) -> float:
    """Four significant figures: a cent per 1M tokens matters at a cent's scale, not at a thousand dollars'."""
    return float(f"{usd:.4g}")


def describe(prices: UnitPrices) -> str:
    """One fleet's unit costs in words: `$0.5633 per 1k requests; per 1M tokens $0.1037 input, $1.463 output,
    $0.3755 total`."""
    text = f"${prices.usd_per_1k_requests:g} per 1k requests"
    if prices.usd_per_million_tokens is not None:
        text += (f"; per 1M tokens ${prices.usd_per_million_input_tokens:g} input, "
                 f"${prices.usd_per_million_output_tokens:g} output, ${prices.usd_per_million_tokens:g} total")
    return text
