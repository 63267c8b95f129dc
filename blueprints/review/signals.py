"""Signals, proven offline: every PromQL expression a stack renders parses, names only metrics its engine and
exporter versions expose, and compares its threshold in the unit of its query.

Run by the preview next to the deployability checks (`blueprints.review.stack`); each finding makes `blueprint preview`
exit 1. Reads what the program registered: KEDA ScaledObject triggers, PrometheusRule alerts, Grafana dashboard
ConfigMaps and CloudWatch alarms, against the metric catalog (`blueprints/catalog/metrics.yaml`) and the signals
table (`blueprints.catalog.signals`). Expressions are parsed with `promql-parser` (the Rust promql-parser crate's Python
bindings); units follow `blueprints.catalog.units`:

- `promql-syntax`: an expression does not parse;
- `metric-unknown`: a series is not exposed by the stack's engine version or an exporter its cluster runs (a close
  match is suggested), or a CloudWatch metric is not in its namespace or not published by the stack's kind of
  SageMaker endpoint (real-time, or asynchronous: an `asyncInferenceConfig` on its EndpointConfiguration;
  `published_by` in the metric catalog);
- `metric-misuse`: a counter used without `rate()`/`increase()`, `rate()` of a gauge, `histogram_quantile()` of
  something other than a histogram's buckets;
- `unit-mismatch`: a trigger's target (per replica with `AverageValue`) or an alert's threshold is not in the unit
  of its query (the signals table says which unit each target is in), or `+`/`-` of different units;
- `signal-unknown`: a trigger or alert the signals table has no row for;
- `scrape-job`: a `job` label matcher names no job this stack's scrapes produce (prometheus-operator labels a
  ServiceMonitor's targets `job=<the scraped Service's name>`; an add-on exporter's own job is in the metric catalog);
- `activation-at-zero`: a ScaledObject with `minReplicaCount: 0` has no trigger whose signal exists while no pod
  runs (the engine's metrics vanish with its last pod): it would never wake.

`bucket_warnings` adds review warnings (not findings): an alert threshold strictly inside one of its histogram's
buckets, which `histogram_quantile()` can only interpolate.
"""

from __future__ import annotations

import difflib
import re
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import promql_parser

from blueprints.catalog.addons import load_platform_catalog
from blueprints.catalog.metrics import Exporter, MetricCatalog, load_metric_catalog
from blueprints.review.preview import PreviewReport, RegisteredResource, SignalFinding
from blueprints.catalog.signals import SIGNALS, alert_row, engine_of
from blueprints.contracts.stackconfig import cluster_addons_of, stack_config_path
from blueprints.catalog.units import DIMENSIONLESS, PER_SECOND, REPLICA, Unit, describe, parse_unit

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
INTERCEPTOR_ROUTE = "kubernetes:http.keda.sh/v1beta1:InterceptorRoute"
METRIC_ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
ENDPOINT_CONFIGURATION = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
HTTP_ADD_ON = "keda-http-add-on"
#: Functions that keep their argument's unit and kind.
_PRESERVING = {"abs", "ceil", "floor", "round", "clamp", "clamp_min", "clamp_max", "sort", "sort_desc",
               "label_replace", "label_join", "avg_over_time", "max_over_time", "min_over_time", "last_over_time",
               "quantile_over_time", "sum_over_time"}


@dataclass
class _Value:
    """What an expression evaluates to, as far as units go."""

    unit: Unit | None  # None: unknown (an unknown metric was reported already)
    kind: str = "gauge"  # gauge | counter | bucket | scalar
    scalar: float | None = None
    metrics: set[str] = field(default_factory=set)
    exporters: set[str] = field(default_factory=set)


class _Analysis:
    """Walks one parsed expression, inferring units and collecting problems."""

    def __init__(self, catalog: MetricCatalog, exporters: list[Exporter]) -> None:
        self.catalog = catalog
        self.exporters = exporters
        self.problems: list[tuple[str, str]] = []  # (check, message)
        self.jobs: list[tuple[str, str, str]] = []  # (metric, matcher op, value) of every `job` label matcher

    def value(self, node: Any) -> _Value:
        kind = type(node).__name__
        if kind == "NumberLiteral":
            return _Value(DIMENSIONLESS, "scalar", scalar=float(node.val))
        if kind in ("ParenExpr", "UnaryExpr"):
            return self.value(node.expr)
        if kind == "VectorSelector":
            return self.selector(node)
        if kind == "MatrixSelector":
            return self.selector(node.vector_selector)
        if kind == "SubqueryExpr":
            return self.value(node.expr)
        if kind == "Call":
            return self.call(node)
        if kind == "AggregateExpr":
            return self.aggregate(node)
        if kind == "BinaryExpr":
            return self.binary(node)
        return _Value(None)

    def selector(self, node: Any) -> _Value:
        name = node.name
        for matcher in node.matchers.matchers:
            if matcher.name == "job":
                self.jobs.append((name or "", str(matcher.op).rsplit(".", 1)[-1], matcher.value))
        if name is None:
            return _Value(None)
        series = self.catalog.series(name, self.exporters)
        if series is None:
            self.unknown(name)
            return _Value(None, metrics={name})
        metric = series.metric
        unit = metric.unit_of if series.part != "count" else metric.count_unit
        kind = {"bucket": "bucket", "sum": "counter", "count": "counter"}.get(series.part, metric.type)
        # A summary's own series are its quantiles (gauges); a histogram has none but its buckets, sum and count.
        kind = "gauge" if kind in ("info", "summary") else "counter" if kind == "histogram" else kind
        return _Value(unit, kind, metrics={name}, exporters={series.exporter.exporter})

    def unknown(self, name: str) -> None:
        known = self.catalog.series_names(self.exporters)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        others = [e.exporter for e in self.catalog.exporters if e not in self.exporters
                  and self.catalog.series(name, [e]) is not None]
        where = ", ".join(f"{e.exporter} {e.version}" for e in self.exporters)
        hint = (f"; did you mean {close[0]!r}?" if close else
                f"; it comes from {others[0]}, which this stack's cluster does not run" if others else "")
        self.problems.append(("metric-unknown", f"metric {name!r} is not exposed by {where}{hint}"))

    def call(self, node: Any) -> _Value:
        name = node.func.name
        args = [self.value(a) for a in node.args]
        vectors = [a for a in args if a.kind != "scalar"] or [_Value(DIMENSIONLESS, "scalar")]
        arg = vectors[-1]
        merged = _merge_names(args)
        if name in ("rate", "irate", "increase"):
            if arg.kind == "gauge" and arg.unit is not None:
                self.problems.append(("metric-misuse", f"{name}() of gauge {sorted(arg.metrics)}: rate() is for "
                                      "counters; use deriv() or the gauge itself"))
            if arg.kind == "bucket":  # a bucket's rate keeps the histogram's observation unit for the quantile
                return _Value(arg.unit, "bucket", **merged)
            unit = None if arg.unit is None else arg.unit if name == "increase" else arg.unit * PER_SECOND
            return _Value(unit, "gauge", **merged)
        if name == "histogram_quantile":
            if arg.kind != "bucket" and arg.unit is not None:
                self.problems.append(("metric-misuse", f"histogram_quantile() of {sorted(arg.metrics)}, which are "
                                      "not a histogram's _bucket series"))
            return _Value(arg.unit, "gauge", **merged)
        if name in ("deriv", "delta", "idelta"):
            return _Value(None if arg.unit is None else (arg.unit * PER_SECOND if name == "deriv" else arg.unit),
                          "gauge", **merged)
        if name in ("absent", "absent_over_time", "count_over_time", "changes", "resets", "vector", "scalar"):
            return _Value(DIMENSIONLESS, "gauge", **merged)
        if name in ("time", "timestamp"):
            return _Value(parse_unit("seconds"), "gauge", **merged)
        if name in _PRESERVING:
            self.counter_used(arg, f"{name}()")
            return _Value(arg.unit, arg.kind, **merged)
        return _Value(None, "gauge", **merged)

    def aggregate(self, node: Any) -> _Value:
        inner = self.value(node.expr)
        op = str(node.op).lower()
        if op in ("count", "count_values"):
            return _Value(DIMENSIONLESS, "gauge", metrics=inner.metrics, exporters=inner.exporters)
        if inner.kind != "bucket":
            self.counter_used(inner, f"{op}()")
        return _Value(inner.unit, inner.kind, metrics=inner.metrics, exporters=inner.exporters)

    def counter_used(self, value: _Value, where: str) -> None:
        if value.kind == "counter" and value.unit is not None:
            self.problems.append(("metric-misuse", f"counter {sorted(value.metrics)} used in {where} without rate() "
                                  "or increase(): its raw value only grows"))
            value.kind = "gauge"  # report once

    def binary(self, node: Any) -> _Value:
        left, right = self.value(node.lhs), self.value(node.rhs)
        op = str(node.op).split()[0]
        merged = _merge_names([left, right])
        for side in (left, right):
            self.counter_used(side, f"'{op}'")
        if op in (">", "<", ">=", "<=", "==", "!="):
            return _Value(left.unit, left.kind, scalar=right.scalar, **merged)
        if op in ("and", "or", "unless"):
            return _Value(left.unit, left.kind, **merged)
        if left.unit is None or right.unit is None:
            return _Value(None, "gauge", **merged)
        if op in ("+", "-"):
            if left.kind != "scalar" and right.kind != "scalar" and not left.unit.same_as(right.unit):
                self.problems.append(("unit-mismatch", f"'{op}' of {describe(left.unit)} and "
                                      f"{describe(right.unit)}"))
            return _Value(left.unit if left.kind != "scalar" else right.unit, "gauge", **merged)
        if op == "*":
            if right.kind == "scalar" and right.scalar is not None:
                return _Value(left.unit.scaled(right.scalar), left.kind if left.kind == "scalar" else "gauge", **merged)
            if left.kind == "scalar" and left.scalar is not None:
                return _Value(right.unit.scaled(left.scalar), "gauge", **merged)
            return _Value(left.unit * right.unit, "gauge", **merged)
        if op == "/":
            if right.kind == "scalar" and right.scalar:
                return _Value(left.unit.scaled(1 / right.scalar), "gauge", **merged)
            return _Value(left.unit / right.unit, "gauge", **merged)
        return _Value(None, "gauge", **merged)


def _merge_names(values: list[_Value]) -> dict[str, set[str]]:
    return {"metrics": set().union(*(v.metrics for v in values)) if values else set(),
            "exporters": set().union(*(v.exporters for v in values)) if values else set()}


def _parse(expr: str) -> tuple[Any | None, str | None]:
    try:
        return promql_parser.parse(expr), None
    except (ValueError, TypeError) as exc:
        return None, str(exc)


def _name(record: RegisteredResource) -> str:
    meta = record.inputs.get("metadata") or {}
    return f"{record.type.rsplit(':', 1)[-1]} '{meta.get('name') or record.name}'"


@dataclass
class _Stack:
    report: PreviewReport
    catalog: MetricCatalog
    exporters: list[Exporter]
    engine: str | None
    #: `job` label values the stack's series can carry: the Services its ServiceMonitors select (prometheus-operator's
    #: default `job` is the Service's name) and the add-on exporters' own jobs (`metrics.yaml` `job`).
    jobs: set[str] = field(default_factory=set)
    findings: list[SignalFinding] = field(default_factory=list)

    def add(self, check: str, record: RegisteredResource, message: str) -> None:
        self.findings.append(SignalFinding(check, record.urn, f"{_name(record)}: {message}"))

    def analyse(self, record: RegisteredResource, expr: str, what: str) -> tuple[Any, _Value | None]:
        tree, error = _parse(expr)
        if tree is None:
            self.add("promql-syntax", record, f"{what} does not parse as PromQL ({error}): {expr}")
            return None, None
        analysis = _Analysis(self.catalog, self.exporters)
        value = analysis.value(tree)
        analysis.counter_used(value, "the expression's result")
        for check, message in analysis.problems:
            self.add(check, record, f"{what}: {message}; fix the query in blueprints/contracts/observability.py or the stack "
                     "config's autoscaling.metric")
        for metric, op, job in analysis.jobs:
            if not any(op == "Equal" and job == known or op == "Re" and re.fullmatch(job, known)
                       or op in ("NotEqual", "NotRe") for known in self.jobs):
                self.add("scrape-job", record, (
                    f"{what}: {metric}{{job{'=' if op == 'Equal' else '=~'}\"{job}\"}} names a job no scrape of this "
                    f"stack produces (prometheus-operator sets job to the scraped Service's name; jobs here: "
                    f"{', '.join(sorted(self.jobs)) or 'none'}): it matches nothing and never fires or scales; "
                    "name the metrics Service (Blueprint.metrics_service_name)"))
        return tree, value


def stack_exporters(report: PreviewReport, catalog: MetricCatalog, stacks_dir: Path = Path("stacks")
                    ) -> tuple[list[Exporter], str | None]:
    """The metric exporters a service stack's series can come from: its engine at the pinned image's version, and
    the exporters of the add-ons its cluster runs (the platform's, or an existing cluster's declared ones)."""
    if report.is_platform:
        return [], None
    bp = report.blueprint
    exporters = []
    engine = catalog.engine_for_image(bp.engine.image) if hasattr(bp.engine, "image") else None
    if engine is not None:
        exporters.append(engine)
    router = catalog.engine_for_image(bp.router.image) if bp.router is not None else None
    if router is not None:
        exporters.append(router)
    addons = set()
    if report.platform is not None:
        addons = {a.id for a in report.platform.addons}
    elif bp.platform.kind in ("existing-cluster", "edge-cluster"):
        path = stack_config_path(stacks_dir, report.stack)
        addons = set(cluster_addons_of(path) or []) if path.exists() else set()
    exporters += [e for e in catalog.exporters if e.addon is not None and e.addon in addons]
    return exporters, engine_of(bp.archetype.value, getattr(bp.engine, "kind", None))


def check_signals(report: PreviewReport, *, stacks_dir: Path = Path("stacks")) -> list[SignalFinding]:
    """Every signal finding of an offline preview (see the module docstring), in resource order.

    Args:
        report: the offline preview.
        stacks_dir: where the stack configs are (an existing cluster's declared add-ons are read from its file).
    """
    if report.is_platform:
        return []
    catalog = load_metric_catalog()
    exporters, engine = stack_exporters(report, catalog, stacks_dir)
    stack = _Stack(report, catalog, exporters, engine, jobs=scraped_jobs(report) | {e.job for e in exporters if e.job})
    bp = report.blueprint
    if hasattr(bp.engine, "image") and bp.archetype.value != "sagemaker-endpoint" and \
            catalog.engine_for_image(bp.engine.image) is None and engine not in ("onnxruntime", None):
        stack.findings.append(SignalFinding("metric-unknown", report.stack, f"no metric catalog for image "
                                            f"{bp.engine.image}: add its metric names to "
                                            "blueprints/catalog/metrics.yaml"))
    routes = {(r.inputs.get("metadata") or {}).get("name") for r in report.resources if r.type == INTERCEPTOR_ROUTE}
    for record in report.resources:
        if record.type == SCALED_OBJECT:
            _check_scaled_object(stack, record, routes)
        elif record.type == PROMETHEUS_RULE:
            _check_rules(stack, record)
        elif record.type == CONFIG_MAP and ((record.inputs.get("metadata") or {}).get("labels") or {}).get(
                "grafana_dashboard") == "1":
            _check_dashboard(stack, record)
        elif record.type == METRIC_ALARM:
            _check_alarm(stack, record)
    return stack.findings


#: Comparisons an alert's threshold follows (promql-parser's operator names).
_COMPARISONS = {">", ">=", "<", "<="}


def bucket_warnings(report: PreviewReport, *, stacks_dir: Path = Path("stacks")) -> list[str]:
    """A warning for every alert that compares a `histogram_quantile()` with a threshold lying strictly between two
    of the histogram's bucket bounds (`metrics.yaml` `buckets`, at the engine's pinned version): Prometheus
    interpolates linearly inside the bucket, so the alert judges an estimate that can sit anywhere between the two
    bounds whatever the real quantile is. The engine fixes its buckets (vLLM has no flag for them), so the review
    names the threshold and the bracketing bounds; it is not a finding (the preview still passes)."""
    if report.is_platform:
        return []
    catalog = load_metric_catalog()
    exporters, _ = stack_exporters(report, catalog, stacks_dir)
    warnings = []
    for record in report.resources:
        if record.type != PROMETHEUS_RULE:
            continue
        for group in (record.inputs.get("spec") or {}).get("groups") or []:
            for rule in group.get("rules") or []:
                tree, _ = _parse(rule.get("expr", ""))
                if (type(tree).__name__ != "BinaryExpr" or str(tree.op) not in _COMPARISONS
                        or type(tree.lhs).__name__ != "Call" or tree.lhs.func.name != "histogram_quantile"
                        or type(tree.rhs).__name__ != "NumberLiteral"):
                    continue
                threshold = float(tree.rhs.val)
                quantile = tree.lhs.args[0].val if type(tree.lhs.args[0]).__name__ == "NumberLiteral" else None
                for name in sorted(_Analysis(catalog, exporters).value(tree.lhs).metrics):
                    series = catalog.series(name, exporters)
                    bracket = series.metric.bracket(threshold) if series and series.part == "bucket" else None
                    if bracket is None:
                        continue
                    low, high = bracket
                    family, exporter = series.metric.name, series.exporter
                    unit = " s" if series.metric.unit == "seconds" else f" {series.metric.unit}"
                    what = f"p{quantile * 100:g}" if quantile is not None else "quantile"
                    warnings.append(
                        f"alert {rule.get('alert') or rule.get('record')}: its threshold {threshold:g}{unit} lies "
                        f"inside {exporter.exporter} {exporter.version}'s {family} bucket ({low:g}, {high:g}]{unit}: "
                        "histogram_quantile() interpolates linearly there, so the alert can fire while the real "
                        f"{what} is just above {low:g}{unit} or stay silent until it nears {high:g}{unit}; the "
                        f"engine's buckets are fixed, so set the SLO on a bucket bound ({low:g}{unit} or "
                        f"{high:g}{unit}) or read this alert as approximate")
    return warnings


def scraped_jobs(report: PreviewReport) -> set[str]:
    """The `job` label of every target the stack's ServiceMonitors scrape: the name of each Service of the monitor's
    namespace its selector matches and that has one of its endpoints' named ports (prometheus-operator's default
    jobLabel), or that Service's `spec.jobLabel` label value when the monitor sets one."""
    services = [r.inputs for r in report.resources if r.type == "kubernetes:core/v1:Service"]
    jobs = set()
    for monitor in (r.inputs for r in report.resources if r.type == SERVICE_MONITOR):
        namespace = (monitor.get("metadata") or {}).get("namespace")
        spec = monitor.get("spec") or {}
        wanted = ((spec.get("selector") or {}).get("matchLabels") or {}).items()
        ports = {e.get("port") for e in spec.get("endpoints") or []}
        for service in services:
            meta = service.get("metadata") or {}
            labels = meta.get("labels") or {}
            named_ports = {p.get("name") for p in (service.get("spec") or {}).get("ports") or []}
            # A selected Service without the endpoint's named port yields no target.
            if meta.get("namespace") == namespace and wanted <= labels.items() and ports & named_ports:
                jobs.add(str(labels.get(spec["jobLabel"], meta.get("name"))) if spec.get("jobLabel") else
                         str(meta.get("name")))
    return jobs


def _check_scaled_object(stack: _Stack, record: RegisteredResource, routes: set[str]) -> None:
    spec = record.inputs.get("spec") or {}
    wakes = False
    scaler_address = load_platform_catalog().addon(HTTP_ADD_ON).endpoints["external-scaler"]
    for trigger in spec.get("triggers") or []:
        meta = trigger.get("metadata") or {}
        if trigger.get("type") == "cron":  # its metric is the clock's (cron_scaler.go L123-151): no pod needed
            wakes = True
            continue
        if trigger.get("type") == "external-push":
            if meta.get("scalerAddress") == scaler_address and meta.get("interceptorRoute") in routes:
                wakes = True
            continue
        if trigger.get("type") != "prometheus":
            continue
        tree, value = stack.analyse(record, meta.get("query", ""), "trigger query")
        if value is None:
            continue
        if value.exporters and all(_present_at_zero(stack, e) for e in value.exporters):
            wakes = True
        if value.unit is None:
            continue
        rows = [r for r in _scaling_rows(value.metrics)]
        if not rows:
            stack.add("signal-unknown", record, f"the trigger reads {sorted(value.metrics)}, which no scaling signal "
                      "in blueprints/catalog/signals.py names, so its target's unit is unknown; scale on a signal of the "
                      "table (autoscaling.metric)")
            continue
        per = REPLICA if trigger.get("metricType", "AverageValue") == "AverageValue" else DIMENSIONLESS
        compared = value.unit / per
        expected = rows[0].target
        if not compared.same_as(expected):
            stack.add("unit-mismatch", record, f"threshold {meta.get('threshold')} is in {rows[0].target_unit} "
                      f"({rows[0].name}, blueprints/catalog/signals.py) but the query ({trigger.get('metricType')}) gives "
                      f"{describe(compared)}: {meta.get('query')}")
    if spec.get("minReplicaCount", 1) == 0 and not wakes:
        stack.add("activation-at-zero", record, "minReplicaCount is 0 but no trigger reads a signal that exists "
                  "while no pod runs (the engine's metrics vanish with its last pod), so it never wakes; add the KEDA "
                  "HTTP add-on's external-push trigger and InterceptorRoute, or keep minReplicaCount >= 1")


def _present_at_zero(stack: _Stack, exporter: str) -> bool:
    return any(e.exporter == exporter and e.present_at_zero for e in stack.catalog.exporters)


def _scaling_rows(metrics: set[str]):
    return [s for s in SIGNALS if s.kind == "scaling" and s.metric in metrics]


def _check_rules(stack: _Stack, record: RegisteredResource) -> None:
    for group in (record.inputs.get("spec") or {}).get("groups") or []:
        for rule in group.get("rules") or []:
            name, expr = rule.get("alert") or rule.get("record"), rule.get("expr", "")
            tree, value = stack.analyse(record, expr, f"alert {name}")
            if tree is None or value is None:
                continue
            row = alert_row(stack.engine or "", name) if rule.get("alert") else None
            if row is None:
                stack.add("signal-unknown", record, f"alert {name} has no row in blueprints/catalog/signals.py, so its "
                          "threshold's unit is unknown; add one")
                continue
            if type(tree).__name__ != "BinaryExpr" or value.scalar is None:
                stack.add("unit-mismatch", record, f"alert {name}: expected `<query> <comparison> <threshold>`, got "
                          f"{expr}")
                continue
            if value.unit is not None and not value.unit.same_as(row.target):
                stack.add("unit-mismatch", record, f"alert {name}: threshold {value.scalar:g} is in "
                          f"{row.target_unit} (blueprints/catalog/signals.py) but its query gives {describe(value.unit)}: "
                          f"{expr}")


def _check_dashboard(stack: _Stack, record: RegisteredResource) -> None:
    for body in (record.inputs.get("data") or {}).values():
        try:
            dashboard = json.loads(body)
        except (TypeError, ValueError):
            continue
        for panel in dashboard.get("panels") or []:
            for target in panel.get("targets") or []:
                stack.analyse(record, target.get("expr", ""), f"panel {panel.get('title')!r}")


def _check_alarm(stack: _Stack, record: RegisteredResource) -> None:
    inputs = record.inputs
    namespace, metric = inputs.get("namespace"), inputs.get("metricName")
    found = stack.catalog.cloudwatch_metric(namespace, metric)
    if found is None:
        known = [m.name for ns in stack.catalog.cloudwatch if ns.namespace == namespace for m in ns.metrics]
        close = difflib.get_close_matches(metric or "", known, n=1, cutoff=0.75)
        stack.add("metric-unknown", record, f"CloudWatch metric {namespace}/{metric} is not in the catalog"
                  + (f"; did you mean {close[0]!r}?" if close else ""))
        return
    kind = "asynchronous" if any(r.type == ENDPOINT_CONFIGURATION and r.inputs.get("asyncInferenceConfig")
                                 for r in stack.report.resources) else "real-time"
    if kind not in found.published_by:
        stack.add("metric-unknown", record, f"CloudWatch metric {namespace}/{metric} is published by "
                  f"{' and '.join(found.published_by)} endpoints only, not this stack's {kind} endpoint: the alarm "
                  "would never see a data point (blueprints/catalog/metrics.yaml published_by)")
    name = (inputs.get("name") or "").removeprefix(f"{stack.report.stack}-")
    row = alert_row("sagemaker", name)
    if row is None:
        stack.add("signal-unknown", record, f"alarm {name} has no row in blueprints/catalog/signals.py")
    elif not parse_unit(found.unit).same_as(row.target):
        stack.add("unit-mismatch", record, f"alarm {name}: threshold {inputs.get('threshold')} is in "
                  f"{row.target_unit} but {metric} is in {found.unit}")
    threshold = inputs.get("threshold")
    if isinstance(threshold, (int, float)) and not math.isfinite(threshold):
        stack.add("unit-mismatch", record, f"alarm {name}: threshold {threshold} is not a number")
