"""A service plan's cost lines, the budget check and the caveats on its prices.

The nodes (or SageMaker instances) and the service's fixed items (`blueprints.plan.options.search.fixed_cost_items`) as
`CostLine`s; the budget, which applies to the most the autoscaler can run (`budget_ceiling`: the maximum is capped at
what budget.max_monthly_usd pays for, and the plan refused only when its planned peak does not fit, saying what the
budget would buy); notes on prices quoted for another region and on spot estimates. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from blueprints.contracts.sections import CostLine
from blueprints.catalog import Catalog
from blueprints.core.errors import SizingError
from blueprints.plan.hints import budget_fix
from blueprints.plan.options.search import fixed_cost_items, replicas_floor
from blueprints.requirements.service import Requirements


def _line(item: str, quantity: float, usd_per_hour: float, catalog: Catalog) -> CostLine:
    return CostLine(item=item, quantity=quantity, usd_per_hour=round(usd_per_hour, 4),
                    monthly_usd=round(quantity * usd_per_hour * catalog.hours_per_month, 2))


def cost_lines(req: Requirements, env: str, catalog: Catalog, *, what: str, instance_type: str, nodes: int,
                usd_per_hour: float, managed: bool) -> list[CostLine]:
    """The nodes (or SageMaker instances), then the service's fixed items (`blueprints.plan.options.search.fixed_cost_items`: load balancer,
    keys; their sum is `blueprints.plan.options.search.service_fixed_monthly_usd`). The shared platform's cost is its own stack's."""
    spot = ", spot" if req.environments[env].spot and not managed else ""
    lines = [_line(f"{what} ({instance_type}{spot})", nodes, usd_per_hour, catalog)]
    lines += [_line(item, qty, usd, catalog) for item, qty, usd in fixed_cost_items(req, env, catalog, managed=managed)]
    return lines


def budget_ceiling(req: Requirements, env: str, catalog: Catalog, *, lines: list[CostLine], what: str, replicas: int,
                   ceiling: int, per_node: int, nodes_for: Callable[[int], int],
                   unit: str = "node") -> tuple[int, float, list[str]]:
    """The autoscaler's maximum within budget.max_monthly_usd, what that maximum costs a month, and the plan's sentence
    when the budget capped it.

    The budget applies to the most the autoscaler can run: `nodes_for(ceiling)` nodes (placed as the scheduler places
    them) at the price of the nodes' cost line, plus the service's fixed items (the other lines). Over it, the maximum is capped at the most replicas
    the budget pays for; the planned peak (`lines`) must fit, else the plan is refused.

    Args:
        lines: the planned peak's cost lines (`cost_lines`).
        what: the planned fleet, e.g. `vllm-gpu, 6x g6e.xlarge`.
        replicas: the planned peak's replicas; `ceiling`: the autoscaler's maximum before the budget.
        per_node: replicas per node (for the message); `nodes_for`: nodes a replica count takes.
        unit: what a node is called (`instance` on SageMaker).

    Raises:
        SizingError: the planned peak costs more than the budget; the message names budget.max_monthly_usd, the
            fleet and its price, and what the budget would buy.
    """
    budget = req.budget.max_monthly_usd
    # As the cost lines price them: the nodes at the line's rounded hourly price, plus the fixed lines.
    fixed = sum(line.monthly_usd for line in lines[1:])
    node_monthly = lines[0].usd_per_hour * catalog.hours_per_month

    def cost(n: int) -> float:
        return round(nodes_for(n) * node_monthly, 2) + fixed

    most = round(cost(ceiling), 2)
    monthly = sum(line.monthly_usd for line in lines)
    if budget is None or most <= budget:
        return ceiling, most, []
    if monthly > budget:
        _refuse(req, env, budget=budget, monthly=monthly, what=what, replicas=replicas, per_node=per_node,
                fixed=fixed, node_monthly=node_monthly, cost=cost)
    capped = max(n for n in range(replicas, ceiling + 1) if cost(n) <= budget)
    note = (f"autoscaling max capped at {capped} replica(s) (from {ceiling}): budget.max_monthly_usd={budget:g} "
            f"applies to the most the autoscaler can run, and {capped} replica(s) take {nodes_for(capped)} {unit}(s), "
            f"${cost(capped):,.0f}/month, where {ceiling} would take {nodes_for(ceiling)}, ${most:,.0f}/month; the "
            f"planned peak ({what}) costs ${monthly:,.0f}/month")
    return capped, round(cost(capped), 2), [note]


def _refuse(req: Requirements, env: str, *, budget: float, monthly: float, what: str, replicas: int, per_node: int,
            fixed: float, node_monthly: float, cost: Callable[[int], float]) -> None:
    """The refusal when the planned peak itself is over budget: by how much, and what the budget would buy."""
    affordable = max((n for n in range(0, replicas + 1) if cost(n) <= budget), default=0)
    head = (f"environments.{env}: the cheapest plan meeting the SLO ({what}) costs ${monthly:,.0f}/month, "
            f"${monthly - budget:,.0f} over budget.max_monthly_usd={budget:g}")
    floor = replicas_floor(req, env)
    if affordable >= floor:
        share = affordable / replicas
        fix = budget_fix(monthly)
        raise SizingError(f"{head}. The budget pays for {affordable} of the {replicas} replicas, about {share:.0%} of "
                          f"this environment's peak load: {fix.text}, "
                          f"or lower environments.{env}.traffic_scale (or traffic.peak_requests_per_s) to "
                          f"<= {share:.0%} of today's, or relax the SLO", fixes=(fix,))
    need = cost(floor)
    min_nodes = round((need - fixed) / node_monthly) if node_monthly else 0
    fix = budget_fix(monthly)
    raise SizingError(f"{head}. It does not pay for the minimum of {floor} replica(s): {min_nodes} node(s) at "
                      f"${node_monthly:,.0f}/month each ({per_node} replica(s) per node) plus ${fixed:,.0f}/month "
                      f"of load balancer and keys: {fix.text} for the planned peak (>= {math.ceil(need)} for that "
                      "minimum alone), allow cheaper hardware, or relax the SLO", fixes=(fix,))


def cost_notes(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> list[str]:
    """Caveats on the cost: prices quoted for another region, spot estimates, spot not offered (none for an edge
    cluster's owned hardware, which has no list price)."""
    if req.hardware.edge_nodes is not None and not managed:
        return []
    region = req.environments[env].region
    notes = [] if region == catalog.price_region else [
        f"costs use the catalog's {catalog.price_region} list prices; {region} prices differ, so "
        "check them before relying on the budget"]
    return notes + _spot_notes(req, env, managed=managed)


def _spot_notes(req: Requirements, env: str, *, managed: bool) -> list[str]:
    if not req.environments[env].spot:
        return []
    if managed:
        return ["environments.{}.spot is ignored: SageMaker real-time endpoints run on-demand only".format(env)]
    return ["spot capacity: prices are estimates (on-demand x catalog spot_price_factor) and nodes can be reclaimed"]
