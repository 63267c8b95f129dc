"""Fleet simulation: replay traffic against a planned fleet with its autoscaler's real settings, and report the SLO
violations (minutes, longest run, worst latencies) and attainment, queues, cold starts, replica-hours and the expected
monthly cost beside the peak-provisioned one.

A fluid model in steps of the autoscaler's polling interval (15 s on Kubernetes: KEDA's `pollingInterval` and the
HPA's default sync period; 60 s on SageMaker, whose metrics are per minute):

- **Traffic**: requests/s per minute (`blueprints.simulate.traffic`); what the ready replicas cannot serve joins a backlog
  that drains, first in first out, when capacity frees up. With no ready replica, requests are held (by the KEDA HTTP
  interceptor on a scale-to-zero stack) until one is ready.
- **Replicas** (`blueprints.capacity.replica`): capacity, p95 (and an LLM's p99) latencies at their share of the
  traffic, and the value of the scaling signal; the backlog adds its wait to TTFT (or request latency).
- **SLO**: a minute is within the SLO when every latency target (`slo_targets`: the p95 targets and, when the SLO
  sets them, an LLM's p99 targets) is met at every autoscaler step of it; the attainment, the violation minutes and
  the longest run of them all count such minutes.
- **Kubernetes autoscaler** (KEDA -> HPA): the signal averaged over the last minute (`avg_over_time(...[1m])`),
  `desired = ceil(total / target)` for `AverageValue` (HPA algorithm; no change within the 10 % tolerance),
  the HTTP add-on's concurrency trigger besides it on a scale-to-zero stack, scale-up at most 2 pods per 60 s,
  scale-down to the highest recommendation of the last `cooldown_s` at most 1 pod per 60 s, clamped to min/max;
  1 -> 0 after `cooldown_s` without activity, 0 -> 1 when a trigger is active (the queue metric alone is absent at
  zero: without the interceptor nothing wakes the fleet).
- **Nodes** (Karpenter, placed as `Blueprint.placement` places them): a new pod goes to the zone with the fewest pods
  (the zone spread) and takes a free slot on a node there, or launches a node there; it is ready after the whole
  startup budget (node provisioning, image pull, download, load), on a node with a free slot after the download and
  load; an empty node is removed after the NodePool's `consolidateAfter` (= `cooldown_s`).
- **SageMaker** (target tracking on InvocationsPerInstance): scale out after 3 consecutive minutes above the target,
  in after 15 minutes below 90 % of it, with the scale-in cooldown; new instances ready after the startup budget
  (Application Auto Scaling target tracking alarms, [assumption] the documented defaults).

Cost: node (or instance) hours at the plan's node price (its first cost line's monthly price per node, so that the
planned fleet running all month costs exactly the planned peak) plus the plan's fixed monthly items;
`peak_monthly_usd` is the largest fleet provisioned all month: the plan's peak (`monthly_cost_usd`), or the most
nodes the autoscaler ran (`most_nodes`) when it ran more, as it may for a cooldown after a burst, so it is never below
the expected cost. An edge cluster's owned nodes cost the same busy or idle: its expected cost is the peak cost. A
stack without an autoscaler (`fixed`) keeps its replicas.

Week: with a weekly shape (requirements `traffic.weekly`), the planned day is a working day; each other kind of day
(the weekend at `weekend_factor` of the traffic) is replayed too, and the expected monthly cost and the mean rate are
the week's, each day weighted by how many a week has. The SLO figures (attainment, violations, cold starts) are the
working day's: the busiest, which the plan is sized for.
"""

from __future__ import annotations

import math
from collections import deque
from collections import Counter
from dataclasses import asdict, dataclass, field, replace

from blueprints.catalog.engines import running_signals
from blueprints.core import defaults
from blueprints.core.freshstack import fresh_stack
from blueprints.contracts.sections import FIXED_REPLICAS, Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.capacity.replica import CURVE_LATENCIES, ReplicaModel, replica_model
from blueprints.simulate.traffic import MINUTES_PER_DAY, daily_curve

#: Polling interval of the Kubernetes autoscalers, s (components.autoscaling.KEDA_POLLING_INTERVAL_S; the HPA's
#: --horizontal-pod-autoscaler-sync-period default is 15 s).
K8S_STEP_S = 15
SAGEMAKER_STEP_S = 60
HPA_TOLERANCE = defaults.HPA_TOLERANCE
#: The scalers' behavior in components.autoscaling: up 2 pods / 60 s, down 1 pod / 60 s.
SCALE_UP_PODS_PER_MIN = 2
SCALE_DOWN_PODS_PER_MIN = 1
#: SageMaker target tracking alarms: datapoints (minutes) above the target before scale-out, below 90 % before
#: scale-in. [assumption] Application Auto Scaling's documented target-tracking alarm defaults.
SAGEMAKER_OUT_MINUTES = 3
SAGEMAKER_IN_MINUTES = 15
SAGEMAKER_IN_FRACTION = 0.9
HOURS_PER_MONTH = 730


@dataclass
class SimulationResult:
    """What a simulation reports (`--json` keys), plus per-minute series for plots.

    `slo_violation_minutes`: minutes in which any latency went over its target (`slo_targets`: p95s, and an LLM's p99s
    when set) at any autoscaler step (requests held with no ready replica count, at the wait until one is ready);
    `slo_longest_violation_minutes`: the longest run of such minutes; `worst_ms`: per target (`ttft_p95_ms`,
    `itl_p95_ms`, `ttft_p99_ms`, `itl_p99_ms` or `latency_p95_ms`) the highest value any minute reached, ms, against
    `slo_targets_ms`; `slo_attainment`: share (0-1) of minutes with every target met (1 - violation minutes /
    minutes); `worst_queue_requests`: most requests waiting beyond what the replicas run; `cold_starts`: times a
    request found no ready replica (scale from zero), with their longest and mean wait; `replica_hours`: replica time
    over the simulated period; `most_nodes`: most nodes (SageMaker: instances) running at once; `mean_rps`: the mean
    arrival rate, requests/s, and `expected_monthly_usd` the expected cost, USD/month, both of the week when a weekly
    shape applies (then `working_day_monthly_usd` is a working day's cost at a month's rate; else None).
    """

    stack: str
    days: float
    slo_attainment: float
    slo_violation_minutes: int
    slo_longest_violation_minutes: int
    worst_ms: dict[str, float]
    slo_targets_ms: dict[str, float]
    expected_monthly_usd: float
    peak_monthly_usd: float
    replica_hours: float
    cold_starts: int
    cold_start_max_s: float
    cold_start_mean_s: float
    worst_queue_requests: float
    scale_ups: int
    scale_downs: int
    most_nodes: int = 0
    mean_rps: float = 0.0
    working_day_monthly_usd: float | None = None
    minutes: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("minutes")
        for key in ("slo_attainment", "days"):
            data[key] = round(data[key], 4)
        for key in ("expected_monthly_usd", "peak_monthly_usd", "replica_hours", "cold_start_max_s",
                    "cold_start_mean_s", "worst_queue_requests", "working_day_monthly_usd"):
            data[key] = round(data[key], 2) if data[key] is not None else None
        data["mean_rps"] = round(data["mean_rps"], 4)
        data["worst_ms"] = {k: round(v, 1) for k, v in self.worst_ms.items()}
        return data

    @property
    def percentiles(self) -> str:
        """The percentiles its targets set, in words: "p95", or "p95 and p99" (`percentiles_of`)."""
        return percentiles_of(self.slo_targets_ms)

    @property
    def over_target(self) -> str:
        """What a violation minute is, in words: "p95 over target", or "p95 or p99 over target"."""
        return f"{percentiles_of(self.slo_targets_ms, joiner=' or ')} over target"

    def violations(self) -> str | None:
        """The violations in words, leading the report when there are any (None when every minute met every
        target): how many minutes, the longest run, and each target's worst value against it, with units.
        Example: `p95 over target in 71 of 1,440 minutes (longest run 9 minutes): worst TTFT p95 11,567 ms (target
        1,500 ms), ITL p95 47.6 ms (target 50 ms)` (with p99 targets: `p95 or p99 over target ...`)."""
        if not self.slo_violation_minutes:
            return None
        minutes = round(self.days * MINUTES_PER_DAY)
        worst = ", ".join(f"{_LABELS.get(k, k)} {_ms(v)} (target {_ms(self.slo_targets_ms[k])})"
                          for k, v in self.worst_ms.items())
        return (f"{self.over_target} in {self.slo_violation_minutes:,} of {minutes:,} minutes (longest run "
                f"{self.slo_longest_violation_minutes:,} minutes): worst {worst}")

    def slo_words(self) -> str:
        """The violations (`violations`), or that every minute met every target: "every minute met every p95 target"
        (or "p95 and p99 target")."""
        return self.violations() or f"every minute met every {self.percentiles} target"


_LABELS = {"ttft_p95_ms": "TTFT p95", "itl_p95_ms": "ITL p95", "ttft_p99_ms": "TTFT p99", "itl_p99_ms": "ITL p99",
           "latency_p95_ms": "request latency p95"}


def percentiles_of(targets: dict[str, float], *, joiner: str = " and ") -> str:
    """The percentiles a set of targets (keyed like `slo_targets`) sets, in words: "p95", "p99" or "p95 and p99"
    ("p95" when there is none)."""
    return joiner.join(sorted({key.split("_")[-2] for key in targets}) or ["p95"])


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"


def planned_traffic(bp: Blueprint, *, days: int = 1, factors: tuple[float, ...] | None = None) -> list[float]:
    """The blueprint's traffic for `days` days: each model's daily curve at its planned peak, summed; `factors`: per
    model with traffic (in order), the share of it this kind of day carries (`week_days`; default all 1)."""
    total = [0.0] * (days * MINUTES_PER_DAY)
    for j, model in enumerate(m for m in bp.models if m.traffic is not None):
        share = factors[j] if factors is not None else 1.0
        for i, rps in enumerate(daily_curve(model.traffic.pattern, model.traffic.peak_requests_per_s, days=days,
                                            daily=model.traffic.daily)):
            total[i] += rps * share
    return total


def week_days(bp: Blueprint) -> Counter[tuple[float, ...]]:
    """The kinds of day in a week and how many of each (they sum to 7): per model with traffic, the share of its
    planned day's traffic that day carries (`WeeklyShape.day_factors`; 1 without a weekly shape)."""
    shapes = [m.traffic.weekly for m in bp.models if m.traffic is not None]
    return Counter(tuple(s.day_factors()[day] if s is not None else 1.0 for s in shapes) for day in range(7))


def slo_targets(bp: Blueprint) -> dict[str, float]:
    """The latency targets a minute must meet, ms, keyed like `LoadPoint.latency_ms`: an LLM's TTFT and ITL p95 and,
    when the SLO sets them, p99 targets (the load curve's simulated p99s against them); otherwise the request
    latency's p95 target (`latency_p95_ms`, else `latency_p99_ms` held against the p95: the non-generative replica
    model predicts a p95 only)."""
    slo = bp.slo
    if replica_model(bp).generative:
        return {k: getattr(slo, k) for k in CURVE_LATENCIES if getattr(slo, k)}
    target = slo.latency_p95_ms or slo.latency_p99_ms
    if target is None and bp.predictions.latency_p95_ms is not None:
        target = bp.predictions.latency_p95_ms * 1.5  # generative on SageMaker without a curve: the alarm's bound
    return {"latency_p95_ms": target} if target else {}


@dataclass
class _Pod:
    ready_at: float
    node: "_Node"


@dataclass
class _Node:
    zone: int
    pods: int
    empty_since: float | None = None


class _Fleet:
    """Pods on nodes, placed as Karpenter places them (`Blueprint.placement`): a new pod goes to the zone with the
    fewest pods and takes a free slot on a node there or launches a node there; empty nodes go after a delay."""

    def __init__(self, bp: Blueprint, start: int) -> None:
        placement = bp.placement
        self.per_node = placement.per_new_node
        self.zones = placement.zone_domains
        self.budget = bp.startup
        self.consolidate_s = bp.autoscaling.cooldown_s
        self.pods: list[_Pod] = []
        self.nodes: list[_Node] = []
        self.most_nodes = 0
        self.emptied = False  # some node may be empty (tick has nodes to consolidate)
        self._starting = math.inf  # the soonest ready_at still ahead when `_ready` was counted
        self._ready = -1  # pods ready as last counted; -1: count again
        self._counted_at = -math.inf
        for _ in range(start):
            self.add(-1e9)

    def _zone_pods(self, zone: int) -> int:
        return sum(n.pods for n in self.nodes if n.zone == zone)

    def add(self, now: float) -> None:
        zone = min(range(self.zones), key=lambda z: (self._zone_pods(z), z))
        node = next((n for n in self.nodes if n.zone == zone and n.pods < self.per_node), None)
        if node is None:
            node = _Node(zone=zone, pods=0)
            self.nodes.append(node)
            self.most_nodes = max(self.most_nodes, len(self.nodes))
            ready = now + self.budget.total_s
        else:
            ready = now + self.budget.pod_start_s
        node.pods += 1
        node.empty_since = None
        self.pods.append(_Pod(ready_at=ready, node=node))
        self._ready = -1

    def remove(self, now: float) -> None:
        # Not-yet-ready pods go first (the ReplicaSet deletes unready pods before ready ones), then one in the zone
        # holding the most (the ReplicaSet prefers pods co-located with more of its replicas).
        self.pods.sort(key=lambda p: (-p.ready_at, -self._zone_pods(p.node.zone), p.node.pods))
        pod = self.pods.pop(0)
        pod.node.pods -= 1
        if pod.node.pods == 0:
            pod.node.empty_since = now
            self.emptied = True
        self._ready = -1

    def tick(self, now: float) -> None:
        if self.emptied:  # nodes left empty by a removal: those past consolidateAfter go
            self.nodes = [n for n in self.nodes if not (n.pods == 0 and n.empty_since is not None
                                                        and now - n.empty_since >= self.consolidate_s)]
            self.emptied = any(n.pods == 0 for n in self.nodes)

    def ready(self, now: float) -> int:
        if self._ready < 0 or now >= self._starting or now < self._counted_at:  # pods changed, or one came up
            self._counted_at = now
            self._ready = sum(1 for p in self.pods if p.ready_at <= now)
            self._starting = min((p.ready_at for p in self.pods if p.ready_at > now), default=math.inf)
        return self._ready

    def next_ready(self, now: float) -> float:
        """When the next pod is ready: the soonest starting pod's, else a cold start from now."""
        return min((p.ready_at for p in self.pods if p.ready_at > now), default=now + self.budget.total_s)


def simulate(bp: Blueprint, *, trace: list[float] | None = None, days: int = 1) -> SimulationResult:
    """Replay `trace` (requests/s per minute; default: `days` days of the planned traffic, and with a weekly shape
    the week's other kinds of day, see the module docstring) against the fleet.

    Deterministic: the same blueprint and trace always give the same result.
    """
    if trace is not None:
        return _replay(bp, trace)
    working = _replay(bp, planned_traffic(bp, days=days))
    week = week_days(bp)
    ones = tuple(1.0 for _ in next(iter(week)))
    if set(week) == {ones}:
        return working
    runs = {kind: working if kind == ones else _replay(bp, planned_traffic(bp, days=days, factors=kind))
            for kind in week}
    return replace(working, working_day_monthly_usd=working.expected_monthly_usd,
                   expected_monthly_usd=sum(n * runs[kind].expected_monthly_usd for kind, n in week.items()) / 7,
                   mean_rps=sum(n * runs[kind].mean_rps for kind, n in week.items()) / 7)


@fresh_stack  # a loop over every minute and pod of the day (blueprints.core.freshstack)
def _replay(bp: Blueprint, rps: list[float]) -> SimulationResult:
    """`simulate` over one trace."""
    model = replica_model(bp)
    targets = slo_targets(bp)
    sagemaker = bp.archetype is Archetype.SAGEMAKER_ENDPOINT
    step = SAGEMAKER_STEP_S if sagemaker else K8S_STEP_S
    a = bp.autoscaling
    # Start warm for the first minute's load, as the plan sizes it (at zero when idle and allowed).
    first = rps[0] if rps else 0.0
    planned_rps = bp.predictions.requests_per_s_capacity / max(1, bp.compute.replicas)  # per replica, within SLO
    start = max(a.min_replicas, min(a.max_replicas, math.ceil(first / planned_rps - 1e-9)))
    fleet = _Fleet(bp, start)
    node_usd_per_month = bp.predictions.cost_lines[0].unit_monthly_usd(HOURS_PER_MONTH)
    fixed_monthly = sum(line.monthly_usd for line in bp.predictions.cost_lines[1:])
    state = _Scaler(bp, model)
    backlog = 0.0
    held_since: float | None = None
    cold_waits: list[float] = []
    node_seconds = replica_seconds = 0.0
    bad_minutes = run = longest = 0
    worst = {key: 0.0 for key in targets}
    worst_queue = 0.0
    series: dict[str, list[float]] = {"rps": [], "replicas": [], "p95_ms": [], "slo_ms": []}
    slo_key = next(iter(targets), None)
    for minute, arrival in enumerate(rps):
        minute_ok = True
        minute_p95 = 0.0
        for sub in range(60 // step):
            now = minute * 60.0 + sub * step
            fleet.tick(now)
            ready = fleet.ready(now)
            capacity = ready * model.capacity_rps
            if ready == 0:
                if arrival > 0 or backlog > 0:
                    held_since = now if held_since is None else held_since
                backlog += arrival * step
                point = None
            else:
                if held_since is not None:
                    cold_waits.append(now - held_since)
                    held_since = None
                served = min(capacity, arrival + backlog / step)
                backlog = max(0.0, backlog + (arrival - capacity) * step)
                point = model.at(served / ready)
            worst_queue = max(worst_queue, backlog)
            wait_s = backlog / capacity if capacity > 0 else math.inf
            if arrival > 0 or backlog > 0:
                for key, target in targets.items():
                    if point is None:  # held with no ready replica: at least the wait until one is ready
                        value = (fleet.next_ready(now) - (held_since if held_since is not None else now)) * 1e3
                    else:
                        value = point.latency_ms[key] + (wait_s * 1e3 if not key.startswith("itl_") else 0.0)
                    minute_ok = minute_ok and value <= target
                    worst[key] = max(worst[key], value)
                    if key == slo_key:
                        minute_p95 = max(minute_p95, value)
            # what the autoscaler reads this step
            running = (point.running * ready) if point else 0.0
            pending = (point.pending * ready if point else 0.0) + backlog
            state.observe(now, ready=ready, pods=len(fleet.pods), running=running, pending=pending,
                          in_flight=running + pending, arrival=arrival)
            desired = state.desired(now, len(fleet.pods))
            while len(fleet.pods) < desired:
                fleet.add(now)
            while len(fleet.pods) > desired:
                fleet.remove(now)
            node_seconds += len(fleet.nodes) * step
            replica_seconds += len(fleet.pods) * step
        run = 0 if minute_ok else run + 1
        bad_minutes, longest = bad_minutes + (not minute_ok), max(longest, run)
        series["rps"].append(arrival)
        series["replicas"].append(float(len(fleet.pods)))
        series["p95_ms"].append(minute_p95 if math.isfinite(minute_p95) else -1.0)
        series["slo_ms"].append(targets.get(slo_key, 0.0) if slo_key else 0.0)
    if held_since is not None:  # still waiting when the trace ends
        cold_waits.append(len(rps) * 60.0 - held_since)
    hours = len(rps) / 60
    expected = node_seconds / 3600 / hours * node_usd_per_month + fixed_monthly if hours else 0.0
    peak = max(bp.predictions.monthly_cost_usd, fleet.most_nodes * node_usd_per_month + fixed_monthly)
    if bp.compute.owned_nodes is not None:
        expected = peak  # owned nodes cost the same whether busy or idle
    return SimulationResult(
        stack=bp.stack, days=len(rps) / MINUTES_PER_DAY, slo_attainment=1 - bad_minutes / len(rps) if rps else 1.0,
        slo_violation_minutes=bad_minutes, slo_longest_violation_minutes=longest, worst_ms=worst,
        slo_targets_ms=dict(targets),
        expected_monthly_usd=expected, peak_monthly_usd=peak, most_nodes=fleet.most_nodes,
        replica_hours=replica_seconds / 3600, cold_starts=len(cold_waits),
        cold_start_max_s=max(cold_waits, default=0.0),
        cold_start_mean_s=sum(cold_waits) / len(cold_waits) if cold_waits else 0.0,
        worst_queue_requests=worst_queue,
        scale_ups=state.ups, scale_downs=state.downs, mean_rps=sum(rps) / len(rps) if rps else 0.0, minutes=series)


class _Scaler:
    """The autoscaler's decisions (see the module docstring): KEDA/HPA on Kubernetes, target tracking on SageMaker."""

    def __init__(self, bp: Blueprint, model: ReplicaModel) -> None:
        self.bp = bp
        self.a = bp.autoscaling
        self.model = model
        self.kind = ("sagemaker" if bp.archetype is Archetype.SAGEMAKER_ENDPOINT
                     else "fixed" if self.a.metric == FIXED_REPLICAS
                     else "cpu" if self.a.metric == "cpu" else "keda")
        self.times: deque[float] = deque()  # the 1-minute window: when each signal was observed
        self.signals: deque[float] = deque()  # and the signals, summed each step
        self.in_flight = 0.0  # requests in flight at the last observation
        # KEDA on an LLM engine's running requests, else pending
        self.running_signal = self.a.metric in running_signals()
        self.recommendations: deque[tuple[float, int]] = deque()
        self.last_up = self.last_down = -1e9
        self.last_active = -1e9
        self.above = self.below = 0
        self.ups = self.downs = 0
        self.ready = 0
        self.pods = 0

    def observe(self, now: float, *, ready: int, pods: int, running: float, pending: float, in_flight: float,
                arrival: float) -> None:
        self.ready, self.pods = ready, pods
        if self.kind == "fixed":
            signal = 0.0
        elif self.kind == "keda":
            signal = running if self.running_signal else pending
        elif self.kind == "cpu":
            signal = min(ready * 100.0, arrival / self.model.capacity_rps * 100.0) if ready else 0.0
        else:
            signal = arrival * 60.0  # invocations per minute, all instances
        self.times.append(now)
        self.signals.append(signal)
        self.in_flight = in_flight
        while self.times and self.times[0] <= now - 60:
            self.times.popleft()
            self.signals.popleft()
        if in_flight > 0 or arrival > 0:
            self.last_active = now

    def desired(self, now: float, current: int) -> int:
        a = self.a
        signal = sum(self.signals) / len(self.signals)
        if self.kind == "fixed":
            return a.max_replicas  # no autoscaler: the Deployment's replica count
        if self.kind == "sagemaker":
            return self._target_tracking(now, current, signal)
        in_flight = self.in_flight
        if current == 0:
            wakes = a.min_replicas == 0 and a.interceptor_concurrency_target is not None and in_flight > 0
            return self._step(now, current, 1) if wakes else 0
        if self.ready == 0:
            return current  # pods starting: the metric is absent (HPA holds)
        if self.kind == "cpu":
            ratio = signal / (self.ready * a.target)
            want = current if abs(ratio - 1) <= HPA_TOLERANCE else math.ceil(self.ready * ratio)
        else:
            ratio = signal / (current * a.target)
            want = current if abs(ratio - 1) <= HPA_TOLERANCE else math.ceil(signal / a.target)
            if a.interceptor_concurrency_target:  # the HPA's second metric, with the same tolerance
                http_ratio = in_flight / (current * a.interceptor_concurrency_target)
                if abs(http_ratio - 1) > HPA_TOLERANCE:
                    want = max(want, math.ceil(in_flight / a.interceptor_concurrency_target))
        floor = a.min_replicas if a.min_replicas else 1
        want = max(floor, min(a.max_replicas, want))
        self.recommendations.append((now, want))
        while self.recommendations and self.recommendations[0][0] < now - a.cooldown_s:
            self.recommendations.popleft()
        if want < current:
            want = max(r for _, r in self.recommendations)  # scale-down stabilisation window
        if a.min_replicas == 0 and current >= 1 and now - self.last_active >= a.cooldown_s:
            want = 0  # KEDA: no trigger active for cooldownPeriod
        return self._step(now, current, want)

    def _step(self, now: float, current: int, want: int) -> int:
        if want > current:
            want = min(want, current + SCALE_UP_PODS_PER_MIN) if now - self.last_up >= 60 or current == 0 else current
            if want > current:
                self.last_up, self.ups = now, self.ups + 1
        elif want < current:
            if want == 0:
                self.downs += 1
                return 0
            want = max(want, current - SCALE_DOWN_PODS_PER_MIN) if now - self.last_down >= 60 else current
            if want < current:
                self.last_down, self.downs = now, self.downs + 1
        return want

    def _target_tracking(self, now: float, current: int, per_minute: float) -> int:
        a = self.a
        per_instance = per_minute / max(1, current)
        self.above = self.above + 1 if per_instance > a.target else 0
        self.below = self.below + 1 if per_instance < SAGEMAKER_IN_FRACTION * a.target else 0
        want = current
        if self.above >= SAGEMAKER_OUT_MINUTES and now - self.last_up >= 60:
            want = min(a.max_replicas, math.ceil(per_minute / a.target))
        elif self.below >= SAGEMAKER_IN_MINUTES and now - self.last_down >= a.cooldown_s:
            want = max(max(1, a.min_replicas), math.ceil(per_minute / a.target), current - 1)
        if want > current:
            self.last_up, self.ups, self.above = now, self.ups + 1, 0
        elif want < current:
            self.last_down, self.downs, self.below = now, self.downs + 1, 0
        return want
