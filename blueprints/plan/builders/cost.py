"""A service plan's cost lines, the budget check and the caveats on its prices.

The nodes (or SageMaker instances) and the service's fixed items (`blueprints.plan.options.search.fixed_cost_items`) as
`CostLine`s; a refusal when the cheapest plan meeting the SLO is over budget.max_monthly_usd, saying what the budget
would buy; notes on prices quoted for another region and on spot estimates. Pure.
"""

from __future__ import annotations

import math

from blueprints.contracts.sections import CostLine
from blueprints.catalog import Catalog
from blueprints.core.errors import SizingError
from blueprints.plan.options.search import service_fixed_monthly_usd, fixed_cost_items, replicas_floor
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


def check_budget(req: Requirements, env: str, catalog: Catalog, *, lines: list[CostLine], what: str, replicas: int,
                 replicas_per_node: int, node_usd_per_hour: float, managed: bool) -> None:
    """Raise when the cheapest plan meeting the SLO costs more than budget.max_monthly_usd.

    The message says by how much, and what the budget would buy: how many replicas, serving what share of the peak.

    Raises:
        SizingError: over budget.
    """
    budget = req.budget.max_monthly_usd
    monthly = sum(line.monthly_usd for line in lines)
    if budget is None or monthly <= budget:
        return
    fixed = service_fixed_monthly_usd(req, env, catalog, managed=managed)
    node_monthly = node_usd_per_hour * catalog.hours_per_month
    affordable = max(0, math.floor((budget - fixed) / node_monthly)) * replicas_per_node
    head = (f"environments.{env}: the cheapest plan meeting the SLO ({what}) costs ${monthly:,.0f}/month, "
            f"${monthly - budget:,.0f} over budget.max_monthly_usd={budget:g}")
    floor = replicas_floor(req, env)
    if affordable >= floor:
        share = affordable / replicas
        raise SizingError(f"{head}. The budget pays for {affordable} of the {replicas} replicas, about {share:.0%} of "
                          f"this environment's peak load: raise budget.max_monthly_usd to >= {math.ceil(monthly)}, "
                          f"or lower environments.{env}.traffic_scale (or traffic.peak_requests_per_s) to "
                          f"<= {share:.0%} of today's, or relax the SLO")
    min_nodes = math.ceil(floor / replicas_per_node)
    raise SizingError(f"{head}. It does not pay for the minimum of {floor} replica(s): {min_nodes} node(s) at "
                      f"${node_monthly:,.0f}/month each ({replicas_per_node} replica(s) per node) plus ${fixed:,.0f}/month "
                      f"of load balancer and keys: raise budget.max_monthly_usd to >= "
                      f"{math.ceil(min_nodes * node_monthly + fixed)}, allow cheaper hardware, or relax the SLO")


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
