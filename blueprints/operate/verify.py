"""`blueprint verify`: what a working deployment must show, checked against the live stack after `pulumi up`.

Kubernetes archetypes:
- `endpoint-authenticated`: the endpoint (stack output `endpoint`) answers a request with the API key (stack output
  `api_key`) and names the stack's model; `endpoint-unauthenticated`: the same request without the key is refused
  (401/403); `endpoint-tls`: over TLS (verified) where the plan has TLS (`blueprints.operate.endpoint`).
- `metric-series`: every series selector of every query the stack deploys (the ScaledObject's triggers, each
  PrometheusRule alert: verbatim from the rendered manifests, `blueprints.operate.manifests`) has series in the
  platform's Prometheus with a sample within its lookback (5 minutes by default): `count(<selector>)`.
- `scaler-ready`: the ScaledObject is Ready and its HPA (`keda-hpa-<name>`) has `ScalingActive` (or the CPU HPA);
  `scaler-value`: the HPA's current value per replica is within the range its target's unit allows (requests
  running per replica: 0 to `max_num_seqs`; CPU utilisation: 0 to 100 % of the request).
- `rules-loaded`: each PrometheusRule group is loaded in Prometheus with every alert, healthy; `alerts-quiet`: none
  of the stack's SLO alerts fires.
- `nodes-ready`: the stack's NodePool is Ready and every node it launched is Ready (at least one while replicas run; a
  batch's replicas judged by its cron schedule at the time of the check: none outside its run).
- `cold-start`: a Ready serving pod's measured cold start (`blueprints.operate.coldstart`) fit the deployed timers:
  pod creation -> Ready within the Deployment's `progressDeadlineSeconds`, container start -> Ready within the
  engine's `startupProbe` (`failureThreshold` x `periodSeconds`); the detail sets it beside the planned start and,
  when they differ by more than `COLD_START_TOLERANCE`, says how to calibrate the startup model.

A batch (`Blueprint.batch`) outside its cron run: `batch-window` fails saying so (0 replicas expected), and the checks
that need a replica (endpoint, metric-series, cold-start) wait for a run; the others judge the schedule.

SageMaker: `endpoint-in-service`, `alarms-ok` (every alarm in state OK), and the signed/unsigned request checks; a
batch's asynchronous endpoint instead `endpoint-asynchronous` (its deployed AsyncInferenceConfig writes where the plan
put the results; no request is sent, one would start its instances), as its queue, not a schedule, runs it.

Each check is a `Check`; the report is 0/1 by whether all pass. Talking to the deployment goes through the clients
handed in, so each check runs offline against stand-ins.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import promql_parser

from blueprints.catalog.engines import engine_facts
from blueprints.contracts.benchmark_result import ColdStartRecord
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import CRON_SCHEDULE, Archetype, VllmEngine
from blueprints.operate.endpoint import Reply, get, probe_url, serves_model, tls_planned
from blueprints.operate.manifests import StackManifests
from blueprints.operate.prometheus import PrometheusApi, PrometheusUnavailable

#: KEDA names the HPA of a ScaledObject `keda-hpa-<name>` unless `advanced.horizontalPodAutoscalerConfig.name` is
#: set (keda.sh docs, ScaledObject spec: "horizontalPodAutoscalerConfig.name ... default keda-hpa-{scaled-object-name}").
KEDA_HPA_PREFIX = "keda-hpa-"
#: Karpenter labels each node with its NodePool (karpenter.sh/v1: `karpenter.sh/nodepool`); its objects carry the
#: root `Ready` condition of awslabs/operatorpkg's status conditions (true when every other condition is).
NODEPOOL_LABEL = "karpenter.sh/nodepool"
#: Slack on a utilisation ceiling: the HPA averages over pods whose usage the kubelet samples.
UTILISATION_SLACK = 1.1
#: A measured cold start this far from the planned one (either way) is worth calibrating the startup model with.
COLD_START_TOLERANCE = 0.25


@dataclass(frozen=True)
class Check:
    """One verified property: `check` is its id (see the module), `subject` what it looked at, `ok` the verdict,
    `detail` the evidence or the problem and its fix."""

    check: str
    subject: str
    ok: bool
    detail: str


@dataclass
class VerifyReport:
    """All checks of one stack; `ok` when every one passed."""

    stack: str
    archetype: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "archetype": self.archetype, "ok": self.ok,
                "checks": [asdict(c) for c in self.checks]}


# --- The endpoint --------------------------------------------------------------------------------------------------

def check_endpoint(bp: Blueprint, endpoint: str, api_key: str, *, fetch: Callable[..., Reply] = get) -> list[Check]:
    """The authenticated, unauthenticated and TLS checks of a Kubernetes archetype's endpoint."""
    url = probe_url(bp, endpoint)
    keyed = fetch(url, api_key=api_key)
    if keyed.status is None:
        internal = "" if endpoint.startswith("https://") or bp.network.exposure.scope.value == "public" else (
            " (an internal endpoint: run verify from inside the platform's VPC, e.g. its deploy runner, or "
            "port-forward the Service and pass --endpoint)")
        checks = [Check("endpoint-authenticated", url, False, f"no answer: {keyed.error}{internal}")]
    elif 200 <= keyed.status < 300 and serves_model(bp, keyed):
        checks = [Check("endpoint-authenticated", url, True, f"{keyed.status} with the API key; serves "
                        f"{bp.model.name}")]
    else:
        checks = [Check("endpoint-authenticated", url, False, f"{keyed.status} with the API key"
                        + ("" if keyed.status >= 300 else f", but the reply does not name {bp.model.name}")
                        + (f": {keyed.error}" if keyed.error else
                           f": {keyed.body[:200].decode('utf-8', 'replace')!r}"))]
    bare = fetch(url, api_key=None)
    if bare.status in (401, 403):
        checks.append(Check("endpoint-unauthenticated", url, True, f"{bare.status} without the API key"))
    elif bare.status is not None and 200 <= bare.status < 300:
        checks.append(Check("endpoint-unauthenticated", url, False, f"{bare.status} WITHOUT the API key: the "
                            "endpoint is open; its pods must be reached only through the authenticating proxy"))
    else:
        checks.append(Check("endpoint-unauthenticated", url, False,
                            f"expected 401 without the API key, got {bare.status or bare.error}"))
    if tls_planned(bp):
        ok = url.startswith("https://") and keyed.status is not None
        checks.append(Check("endpoint-tls", url, ok, "TLS, certificate verified" if ok else
                            "the plan has TLS but " + ("the endpoint is not https" if not url.startswith("https://")
                                                       else f"the TLS connection failed: {keyed.error}")))
    else:
        checks.append(Check("endpoint-tls", url, True, "plain HTTP as planned (no TLS in the plan: "
                            f"{bp.network.exposure.scope.value} endpoint)"))
    return checks


# --- Prometheus ----------------------------------------------------------------------------------------------------

def selectors(expr: str) -> list[str]:
    """Every series selector of a PromQL expression, as the parser renders it (`vllm:x{namespace="a"}`), in order,
    without repeats. ValueError when it does not parse."""
    try:
        tree = promql_parser.parse(expr)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"does not parse: {exc}") from None
    found: list[str] = []

    def walk(node: Any) -> None:
        kind = type(node).__name__
        if kind == "VectorSelector":
            text = str(node)
            if text not in found:
                found.append(text)
        elif kind == "MatrixSelector":
            walk(node.vector_selector)
        elif kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
            walk(node.expr)
        elif kind == "AggregateExpr":
            walk(node.expr)
            if node.param is not None:
                walk(node.param)
        elif kind == "Call":
            for arg in node.args:
                walk(arg)
        elif kind == "BinaryExpr":
            walk(node.lhs)
            walk(node.rhs)

    walk(tree)
    return found


def check_metric_series(sm: StackManifests, prom: PrometheusApi) -> list[Check]:
    """`metric-series`: each selector of each deployed query has recent series."""
    checks = []
    counted: dict[str, float | str] = {}
    for query in sm.queries():
        try:
            found = selectors(query.expr)
        except ValueError as exc:
            checks.append(Check("metric-series", query.source, False, f"{exc}: {query.expr}"))
            continue
        for selector in found:
            if selector not in counted:
                try:
                    samples = prom.query(f"count({selector})")
                    counted[selector] = samples[0].value if samples else 0.0
                except PrometheusUnavailable as exc:
                    counted[selector] = str(exc)
            value = counted[selector]
            if isinstance(value, str):
                checks.append(Check("metric-series", f"{query.source}: {selector}", False, f"query failed: {value}"))
            elif value > 0:
                checks.append(Check("metric-series", f"{query.source}: {selector}", True, f"{value:g} series"))
            else:
                checks.append(Check("metric-series", f"{query.source}: {selector}", False,
                                    f"no series with a recent sample in {prom.where}: the scrape (ServiceMonitor "
                                    f"{sm.blueprint.workload_name}) or the exporter does not provide it, or its "
                                    "labels differ"))
    return checks


def check_rules(sm: StackManifests, prom: PrometheusApi) -> list[Check]:
    """`rules-loaded` per PrometheusRule group, and `alerts-quiet` for the stack's alerts."""
    bp = sm.blueprint
    groups = sm.alert_groups()
    if not groups:
        return []
    try:
        loaded = prom.alerting_rules()
        active = prom.alerts()
    except PrometheusUnavailable as exc:
        return [Check("rules-loaded", name, False, f"cannot read the rules: {exc}") for name in groups]
    checks = []
    ours: set[str] = set()
    for name, alerts in groups.items():
        ours.update(alerts)
        rules = {r.get("name"): r for r in loaded.get(name, [])}
        missing = [a for a in alerts if a not in rules]
        broken = [f"{a} ({rules[a].get('lastError') or rules[a].get('health')})" for a in alerts
                  if a in rules and rules[a].get("health") not in ("ok", "unknown")]
        if name not in loaded:
            checks.append(Check("rules-loaded", name, False, "group not loaded: does the Prometheus select the "
                                "PrometheusRule (its `release` label), and did its admission webhook accept it?"))
        elif missing or broken:
            checks.append(Check("rules-loaded", name, False, "; ".join(
                [f"missing {', '.join(missing)}"] * bool(missing) + [f"unhealthy {', '.join(broken)}"] * bool(broken))))
        else:
            checks.append(Check("rules-loaded", name, True, f"{len(alerts)} alert(s) loaded and healthy"))
    firing = sorted({a["labels"].get("alertname", "?") for a in active if a.get("state") == "firing"
                     and a["labels"].get("alertname") in ours and a["labels"].get("service") == bp.service
                     and a["labels"].get("environment") == bp.environment})
    pending = sorted({a["labels"].get("alertname", "?") for a in active if a.get("state") == "pending"
                      and a["labels"].get("alertname") in ours and a["labels"].get("service") == bp.service})
    checks.append(Check("alerts-quiet", bp.stack, not firing,
                        f"firing: {', '.join(firing)}" if firing else
                        "no SLO alert fires" + (f" (pending: {', '.join(pending)})" if pending else "")))
    return checks


# --- The autoscaler and the nodes ----------------------------------------------------------------------------------

def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _true(obj: dict[str, Any] | None, kind: str) -> tuple[bool, str]:
    cond = _condition(obj or {}, kind)
    if cond is None:
        return False, f"no {kind} condition"
    detail = f"{kind}={cond.get('status')}" + (f" ({cond.get('reason')}: {cond.get('message', '')[:200]})"
                                               if cond.get("status") != "True" else "")
    return cond.get("status") == "True", detail


def scaler_range(bp: Blueprint) -> tuple[float, float | None, str]:
    """(low, high or None, what the unit is) the autoscaler's current value per replica must lie in."""
    metric = bp.autoscaling.metric
    if isinstance(bp.engine, VllmEngine) and metric == engine_facts(bp.engine.kind).signal("running"):
        return 0.0, float(bp.engine.max_num_seqs), f"requests running per replica (0 to max_num_seqs " \
            f"{bp.engine.max_num_seqs})"
    if metric == "cpu":
        return 0.0, 100.0 * UTILISATION_SLACK, "% of the CPU request (limit = request)"
    if metric == CRON_SCHEDULE and bp.batch is not None:  # desiredReplicas over the replicas running (>= 1)
        return 0.0, float(bp.batch.replicas), f"the cron scaler's desiredReplicas per replica (target 1 during the " \
            f"run, 0 outside; {bp.batch.schedule()})"
    return 0.0, None, f"{metric} per replica (not negative)"


def _quantity(value: Any) -> float:
    from kubernetes.utils.quantity import parse_quantity

    return float(parse_quantity(str(value)))


def hpa_current_value(hpa: dict[str, Any]) -> float | None:
    """The first metric's current value of an autoscaling/v2 HPA's status: an external metric's `averageValue`
    (KEDA) or a resource metric's `averageUtilization` (%)."""
    for metric in (hpa.get("status") or {}).get("currentMetrics") or []:
        for source in ("external", "object", "pods", "resource"):
            current = (metric.get(source) or {}).get("current") or {}
            if "averageUtilization" in current:
                return float(current["averageUtilization"])
            for key in ("averageValue", "value"):
                if key in current:
                    return _quantity(current[key])
    return None


#: `read(group, version, plural, namespace, name) -> object`: a custom or built-in object as a dict (namespace None:
#: cluster scoped); raises LookupError when it does not exist.
ObjectReader = Callable[[str, str, str, str | None, str], dict[str, Any]]
#: `list_nodes(label_selector) -> [node dict]`.
NodeLister = Callable[[str], list[dict[str, Any]]]


def check_scaler(sm: StackManifests, read: ObjectReader) -> list[Check]:
    """`scaler-ready` and `scaler-value` for the ScaledObject (and its HPA) or the CPU HPA."""
    bp = sm.blueprint
    so, cpu_hpa = sm.scaled_object, sm.hpa
    checks = []
    if so is not None:
        name = so["metadata"]["name"]
        hpa_name = ((so["spec"].get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get(
            "name") or f"{KEDA_HPA_PREFIX}{name}"
        try:
            live = read("keda.sh", "v1alpha1", "scaledobjects", sm.namespace, name)
            ready, detail = _true(live, "Ready")
            checks.append(Check("scaler-ready", f"ScaledObject {name}", ready, detail))
        except LookupError:
            checks.append(Check("scaler-ready", f"ScaledObject {name}", False, "not found in the cluster"))
    elif cpu_hpa is not None:
        hpa_name = cpu_hpa["metadata"]["name"]
    else:
        return []
    try:
        hpa = read("autoscaling", "v2", "horizontalpodautoscalers", sm.namespace, hpa_name)
    except LookupError:
        return [*checks, Check("scaler-ready", f"HorizontalPodAutoscaler {hpa_name}", False,
                               "not found: KEDA creates it from the ScaledObject")]
    active, detail = _true(hpa, "ScalingActive")
    checks.append(Check("scaler-ready", f"HorizontalPodAutoscaler {hpa_name}", active, detail))
    low, high, unit = scaler_range(bp)
    value = hpa_current_value(hpa)
    if value is None:
        checks.append(Check("scaler-value", f"HorizontalPodAutoscaler {hpa_name}", False,
                            "no current metric value in its status (it cannot read the metric)"))
    else:
        ok = math.isfinite(value) and value >= low and (high is None or value <= high)
        checks.append(Check("scaler-value", f"HorizontalPodAutoscaler {hpa_name}", ok,
                            f"{value:g} (target {bp.autoscaling.target:g}); expected {unit}" +
                            ("" if ok else ": the query and the target are in different units")))
    return checks


def check_nodes(sm: StackManifests, read: ObjectReader, list_nodes: NodeLister, *,
                now: dt.datetime | None = None) -> list[Check]:
    """`nodes-ready`: the NodePool's Ready condition and its nodes' (none on an existing or edge cluster). Nodes must
    run while replicas must: `autoscaling.min_replicas`, or for a batch the replicas its cron schedule holds at `now`
    (timezone-aware; default the current time, UTC): none outside its run."""
    pool = sm.node_pool
    if pool is None:
        return []
    name = pool["metadata"]["name"]
    try:
        live = read("karpenter.sh", "v1", "nodepools", None, name)
    except LookupError:
        return [Check("nodes-ready", f"NodePool {name}", False, "not found in the cluster")]
    ready, detail = _true(live, "Ready")
    checks = [Check("nodes-ready", f"NodePool {name}", ready, detail)]
    nodes = list_nodes(f"{NODEPOOL_LABEL}={name}")
    not_ready = [n["metadata"]["name"] for n in nodes if not _true(n, "Ready")[0]]
    if not nodes:
        bp = sm.blueprint
        if bp.batch is not None:
            at = now or dt.datetime.now(dt.timezone.utc)
            must = bp.batch.replicas_at(at)
            why = (f"outside the batch window ({bp.batch.schedule()}) at {at.isoformat(timespec='minutes')}: 0 "
                   "expected" if must == 0 else f"during the batch run ({bp.batch.schedule()})")
        else:
            must = bp.autoscaling.min_replicas
            why = "scaled to zero" if must == 0 else ""
        checks.append(Check("nodes-ready", f"nodes of {name}", must == 0, "no node launched" + (
            f" ({why})" if must == 0 else f" although {must} replica(s) must run{f' {why}' if why else ''}: check "
            "Karpenter's logs and the NodeClaims")))
    else:
        checks.append(Check("nodes-ready", f"nodes of {name}", not not_ready,
                            f"{len(nodes)} node(s) Ready" if not not_ready else f"not Ready: {', '.join(not_ready)}"))
    return checks


# --- SageMaker -----------------------------------------------------------------------------------------------------

def check_cold_start(sm: StackManifests, measured: ColdStartRecord | str) -> list[Check]:
    """`cold-start`: the measured start against the rendered Deployment's timers (see the module); a pod that gives
    no measurement (`measured` is the reason) passes with the reason, as nothing was out of time."""
    bp = sm.blueprint
    if isinstance(measured, str):
        return [Check("cold-start", bp.workload_name, True, f"not measured: {measured}")]
    deployment = sm.deployment or {}
    deadline = deployment.get("spec", {}).get("progressDeadlineSeconds")
    probe = sm.engine_container.get("startupProbe") or {}
    probe_s = probe.get("failureThreshold", 3) * probe.get("periodSeconds", 10) if probe else None
    in_pod = (measured.model_load_s or 0.0) + ((measured.weights_download_s or 0.0) if measured.weights_streamed
                                               else 0.0)
    late = []
    if deadline is not None and measured.total_s > deadline:
        late.append(f"creation -> Ready {measured.total_s:g} s is past progressDeadlineSeconds {deadline}")
    if probe_s is not None and in_pod > probe_s:
        late.append(f"container start -> Ready {in_pod:g} s is past the startupProbe's {probe_s} s")
    planned = bp.startup.total_s
    parts = ", ".join(f"{p.removesuffix('_s')} {v:g} s (planned {getattr(bp.startup, p)} s)"
                      for p, v in measured.measured_parts().items())
    detail = f"pod {measured.pod}: {measured.total_s:g} s to Ready, planned {planned} s; {parts}"
    if abs(measured.total_s / planned - 1) > COLD_START_TOLERANCE:
        detail += ("; the startup model is off: `blueprint benchmark` records this start and `blueprint calibrate` "
                   "corrects the plan with it")
    return [Check("cold-start", bp.workload_name, not late, "; ".join([*late, detail]))]


def check_sagemaker(bp: Blueprint, outputs: dict[str, Any], sagemaker: Any, cloudwatch: Any,
                    invoke: Callable[[bool], Reply]) -> list[Check]:
    """`endpoint-in-service`, `alarms-ok` and the request checks of a SageMaker endpoint.

    Args:
        sagemaker, cloudwatch: boto3 clients (`describe_endpoint`, `describe_alarms`).
        invoke: `invoke(signed) -> Reply` of a one-token request to the invocation URL, SigV4-signed or not.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    name = outputs["endpoint_name"]
    checks = []
    asynchronous = bp.batch is not None and bp.batch.async_inference is not None
    status: dict = {}
    try:
        status = sagemaker.describe_endpoint(EndpointName=name)
        state = status["EndpointStatus"]
        checks.append(Check("endpoint-in-service", name, state == "InService", state + (
            f": {status.get('FailureReason', '')}" if state != "InService" else "")))
    except (ClientError, BotoCoreError) as exc:
        checks.append(Check("endpoint-in-service", name, False, str(exc)[:300]))
    names = list(outputs.get("alarms") or [])
    try:
        found = {a["AlarmName"]: a for a in cloudwatch.describe_alarms(AlarmNames=names)["MetricAlarms"]} \
            if names else {}
        for alarm in names:
            if alarm not in found:
                checks.append(Check("alarms-ok", alarm, False, "not found in CloudWatch"))
            else:
                state = found[alarm]["StateValue"]
                checks.append(Check("alarms-ok", alarm, state == "OK", state + (
                    f": {found[alarm].get('StateReason', '')[:200]}" if state != "OK" else "")))
    except (ClientError, BotoCoreError) as exc:
        checks.append(Check("alarms-ok", ", ".join(names), False, str(exc)[:300]))
    if asynchronous:  # a batch's queue: InvokeEndpoint is refused, and a request would start its instances
        return [*checks, _async_check(bp, outputs, status)]
    signed = invoke(True)
    url = signed.url
    checks.append(Check("endpoint-authenticated", url, signed.status == 200,
                        f"{signed.status} signed (SigV4, sagemaker:InvokeEndpoint)" if signed.status is not None
                        else f"no answer: {signed.error}"))
    bare = invoke(False)
    checks.append(Check("endpoint-unauthenticated", url, bare.status in (401, 403),
                        f"{bare.status} unsigned" if bare.status is not None else f"no answer: {bare.error}"))
    checks.append(Check("endpoint-tls", url, url.startswith("https://") and signed.status is not None,
                        "TLS (the SageMaker runtime), certificate verified"))
    return checks


def _async_check(bp: Blueprint, outputs: dict[str, Any], status: dict) -> Check:
    """`endpoint-asynchronous`: the deployed endpoint is asynchronous (DescribeEndpoint's `AsyncInferenceConfig`)
    and writes its results where the plan put them, `s3://<model store>/async/<stack>/out/`. No request is sent: a
    batch's endpoint answers InvokeEndpointAsync only, and one request would start its planned instances."""
    a = bp.batch.async_inference  # type: ignore[union-attr]
    want = f"s3://{outputs.get('weights_bucket')}/{a.output_prefix}out/"  # type: ignore[union-attr]
    found = ((status.get("AsyncInferenceConfig") or {}).get("OutputConfig") or {}).get("S3OutputPath")
    return Check("endpoint-asynchronous", outputs["endpoint_name"], found == want,
                 f"asynchronous inference, results in {found}; not invoked (the batch's job queues requests with "
                 "InvokeEndpointAsync from the window's start)" if found == want else
                 f"AsyncInferenceConfig.OutputConfig.S3OutputPath is {found!r}, not {want!r}: the endpoint is not "
                 "the planned asynchronous one; run `pulumi up` for the stack")


def one_token_request(bp: Blueprint) -> bytes:
    """The smallest chat request the LMI container answers (OpenAI chat schema on /invocations)."""
    return json.dumps({"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}).encode()


def verify_kubernetes(sm: StackManifests, outputs: dict[str, Any], *, prom: PrometheusApi | None,
                      read: ObjectReader, list_nodes: NodeLister, fetch: Callable[..., Reply] = get,
                      endpoint: str | None = None, cold_start: ColdStartRecord | str | None = None,
                      now: dt.datetime | None = None) -> VerifyReport:
    """Every check of a Kubernetes archetype's deployed stack.

    Args:
        sm: the stack's rendered manifests (the offline preview's).
        outputs: the stack's outputs, secrets shown (`endpoint`, `api_key`).
        prom: the platform's Prometheus; None when the stack is not monitored (no Prometheus checks).
        read, list_nodes: Kubernetes reads (`blueprints.operate.deployed.object_reader`, `node_lister`).
        fetch: HTTP GET (`blueprints.operate.endpoint.get`).
        endpoint: the URL to call instead of the `endpoint` output (e.g. through a port-forward).
        cold_start: a Ready serving pod's measured cold start, or why there is none (`read_ready_cold_start`);
            None: not checked.
        now: when the check runs (timezone-aware; default the current time): a batch's schedule is judged at it.
    """
    bp = sm.blueprint
    report = VerifyReport(stack=bp.stack, archetype=bp.archetype.value)
    now = now or dt.datetime.now(dt.timezone.utc)
    idle = bp.batch is not None and bp.batch.replicas_at(now) == 0
    if idle:  # nothing serves outside a batch's run: what needs a replica is verified during it
        report.checks.append(Check("batch-window", bp.stack, False, f"outside the batch window "
                                   f"({bp.batch.schedule()}) at {now.isoformat(timespec='minutes')}: 0 replicas "
                                   "expected, so the endpoint, the engine's series and a cold start cannot be checked; "
                                   "run `blueprint verify` again during the run"))
    else:
        report.checks += check_endpoint(bp, endpoint or outputs["endpoint"], outputs["api_key"], fetch=fetch)
        if prom is not None:
            report.checks += check_metric_series(sm, prom)
    report.checks += check_scaler(sm, read)
    if prom is not None:
        report.checks += check_rules(sm, prom)
    report.checks += check_nodes(sm, read, list_nodes, now=now)
    if cold_start is not None and not idle:
        report.checks += check_cold_start(sm, cold_start)
    return report


def verify_sagemaker(bp: Blueprint, outputs: dict[str, Any], *, sagemaker: Any, cloudwatch: Any,
                     invoke: Callable[[bool], Reply]) -> VerifyReport:
    """Every check of a SageMaker endpoint stack (see `check_sagemaker`)."""
    report = VerifyReport(stack=bp.stack, archetype=bp.archetype.value)
    report.checks += check_sagemaker(bp, outputs, sagemaker, cloudwatch, invoke)
    return report


def archetype_verifiable(bp: Blueprint) -> bool:
    """Kubernetes archetypes and SageMaker endpoints are; every archetype is one of them."""
    return bp.archetype in (Archetype.VLLM_GPU, Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU,
                            Archetype.SAGEMAKER_ENDPOINT)
