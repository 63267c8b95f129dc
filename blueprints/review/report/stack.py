"""Render a `PreviewReport` for people: a rich terminal view, and `plan.md` / `plan.json` / `manifests/*.yaml`.

`plan.md` is written to be pasted as a pull-request comment: when a baseline is given, what changed first (the
requirements and the plan field by field, the predictions before -> after, a warning for every change that replaces a
resource: `blueprints.review.changes`) and the resource diff, then policy verdicts, predictions and cost, the architecture
diagram, and every resource.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from blueprints.plan.engines import engine_lines
from tabulate import tabulate

from blueprints.review.changes import SHOWN_CHARS, Review
from blueprints.review.report.changes import review_lines, review_markdown
from blueprints.review.diff import PlanDiff
from blueprints.plan.edge import OWNED_NODES_ITEM
from blueprints.plan.batch import describe_batch
from blueprints.plan.unit_costs import describe as describe_unit_costs
from blueprints.core.errors import BlueprintError, excerpt
from blueprints.review.manifests import manifest_id
from blueprints.review.preview import PreviewReport, RegisteredResource
from blueprints.review.report.platform import platform_diagram, platform_rows
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Archetype
from blueprints.contracts.usage import usage

#: Comment marker so the PR workflow updates one comment per stack instead of adding new ones.
COMMENT_MARKER = "<!-- servingblueprints-preview:{stack} -->"


def key_settings(record: RegisteredResource) -> dict[str, Any]:
    """The few inputs a reviewer checks first, by resource type; top-level scalars for other types."""
    i = record.inputs
    if record.type == "kubernetes:apps/v1:Deployment":
        pod = i.get("spec", {}).get("template", {}).get("spec", {})
        main = (pod.get("containers") or [{}])[0]
        shm = next((v["emptyDir"] for v in pod.get("volumes", []) if v.get("name") == "dshm"), None)
        settings = {"replicas": i.get("spec", {}).get("replicas"), "image": main.get("image"),
                    "nvidia.com/gpu": main.get("resources", {}).get("limits", {}).get("nvidia.com/gpu"),
                    "node": ",".join(f"{k}={v}" for k, v in pod.get("nodeSelector", {}).items())}
        if shm is not None:
            settings["/dev/shm"] = f"{shm.get('medium', 'disk')} {shm.get('sizeLimit', '')}".strip()
        return settings
    if record.type == "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration":
        rule = (i.get("rules") or [{}])[0].get("applyServerSideEncryptionByDefault", {})
        return {"sse": rule.get("sseAlgorithm"), "kms key": rule.get("kmsMasterKeyId", "aws/s3")}
    if record.type == "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock":
        return {k: v for k, v in i.items() if k.startswith(("block", "ignore", "restrict"))}
    if record.type == "aws:s3/bucketVersioning:BucketVersioning":
        return {"versioning": i.get("versioningConfiguration", {}).get("status")}
    if record.type == "aws:eks/nodeGroup:NodeGroup":
        scaling = i.get("scalingConfig", {})
        return {"instanceTypes": ",".join(i.get("instanceTypes", [])), "capacityType": i.get("capacityType"),
                "min-max": f"{scaling.get('minSize')}-{scaling.get('maxSize')}", "amiType": i.get("amiType")}
    scalars = {k: v for k, v in i.items()
               if isinstance(v, (str, int, float, bool)) and k not in ("apiVersion", "kind") and len(str(v)) < 80}
    return dict(list(scalars.items())[:4])


def _settings_text(record: RegisteredResource) -> str:
    return ", ".join(f"{k}={v}" for k, v in key_settings(record).items() if v not in (None, ""))


# --- diagram -------------------------------------------------------------------------------------------------------

def _node_id(record: RegisteredResource) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", f"{record.type.split(':')[-1]}_{record.name}")


_DIAGRAM_TYPES = {
    "kubernetes:core/v1:Service": "Service",
    "kubernetes:apps/v1:Deployment": "Deployment",
    "kubernetes:batch/v1:Job": "Job",
    "aws:s3/bucket:Bucket": "S3 bucket",
    "aws:eks/cluster:Cluster": "EKS cluster",
    "aws:eks/nodeGroup:NodeGroup": "Node group",
    "kubernetes:karpenter.sh/v1:NodePool": "NodePool",
    "kubernetes:helm.sh/v3:Release": "Helm release",
    "aws:sagemaker/endpoint:Endpoint": "SageMaker endpoint",
    "aws:sagemaker/endpointConfiguration:EndpointConfiguration": "Endpoint config",
    "aws:sagemaker/model:Model": "SageMaker model",
}


def mermaid_diagram(report: PreviewReport) -> str:
    """A Mermaid flowchart of the serving path: clients -> entry point -> workloads -> model store / nodes."""
    shown = [r for r in report.resources if r.custom and r.type in _DIAGRAM_TYPES]
    lines = ["flowchart LR", "  clients([clients])"]
    for r in shown:
        label = f"{_DIAGRAM_TYPES[r.type]}<br/>{_display_name(r)}"
        shape = f"[({label})]" if r.type == "aws:s3/bucket:Bucket" else f"[\"{label}\"]"
        lines.append(f"  {_node_id(r)}{shape}")
    by_type: dict[str, list[RegisteredResource]] = {}
    for r in shown:
        by_type.setdefault(r.type, []).append(r)
    entries = by_type.get("aws:sagemaker/endpoint:Endpoint", []) + by_type.get("kubernetes:core/v1:Service", [])
    edges = [("clients", _node_id(r), "") for r in entries]
    for svc in by_type.get("kubernetes:core/v1:Service", []):
        selector = svc.inputs.get("spec", {}).get("selector", {})
        for dep in by_type.get("kubernetes:apps/v1:Deployment", []):
            labels = dep.inputs.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                edges.append((_node_id(svc), _node_id(dep), ""))
    chain = ["aws:sagemaker/endpoint:Endpoint", "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
             "aws:sagemaker/model:Model"]
    for upper, lower in zip(chain, chain[1:]):
        for a in by_type.get(upper, []):
            for b in by_type.get(lower, []):
                edges.append((_node_id(a), _node_id(b), ""))
    readers = by_type.get("kubernetes:apps/v1:Deployment", []) + by_type.get("kubernetes:batch/v1:Job", []) + \
        by_type.get("aws:sagemaker/model:Model", [])
    for reader in readers:
        for bucket in by_type.get("aws:s3/bucket:Bucket", []):
            edges.append((_node_id(reader), _node_id(bucket), "weights"))
    for dep in by_type.get("kubernetes:apps/v1:Deployment", []):
        selector = dep.inputs.get("spec", {}).get("template", {}).get("spec", {}).get("nodeSelector", {})
        wanted = selector.get("node.kubernetes.io/instance-type")
        for group in by_type.get("aws:eks/nodeGroup:NodeGroup", []):
            if wanted and wanted in group.inputs.get("instanceTypes", []):
                edges.append((_node_id(dep), _node_id(group), "runs on"))
        for pool in by_type.get("kubernetes:karpenter.sh/v1:NodePool", []):
            labels = pool.inputs.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
            if selector and labels and all(selector.get(k) == v for k, v in labels.items() if k in selector):
                edges.append((_node_id(dep), _node_id(pool), "runs on"))
    for a, b, label in edges:
        lines.append(f"  {a} -->|{label}| {b}" if label else f"  {a} --> {b}")
    return "\n".join(lines)


def _display_name(r: RegisteredResource) -> str:
    name = r.inputs.get("metadata", {}).get("name") if r.type.startswith("kubernetes:") else None
    return str(name or r.name)


# --- markdown ------------------------------------------------------------------------------------------------------

def _md_table(rows: list[list[Any]], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


#: What a changed resource is called when the whole service moves (`Review.move`): `pulumi up` creates it again where
#: the service now runs, so "changed" would contradict the move's own warning.
MOVED = "replaced (the service moves)"


def diff_markdown(diff: PlanDiff, *, moved: bool = False) -> str:
    """The baseline comparison as markdown: compliance changes first, then the cost delta, then added / removed /
    changed resources."""
    sign = "+" if diff.cost_delta_usd >= 0 else "-"
    parts = ["### Changes against the base branch\n"]
    if diff.compliance:
        parts.append("**Compliance changed** (the requirements this stack is checked against):\n\n" + _md_table(
            [[f"`{c.path}`", repr(c.before), repr(c.after)] for c in diff.compliance],
            ["compliance", "before", "after"]) + "\n")
    parts += [f"Monthly cost: ${diff.cost_before_usd:,.2f} -> "
             f"${diff.cost_after_usd:,.2f} (**{sign}${abs(diff.cost_delta_usd):,.2f}**)\n"]
    if diff.empty:
        parts.append("No resource changes.\n")
    rows = [["added", t, n, ""] for t, n in diff.added] + [["removed", t, n, ""] for t, n in diff.removed]
    for change in diff.changed:
        for s in change.settings:
            rows.append([MOVED if moved else "changed", change.type, change.name,
                         f"`{s.path}`: {excerpt(s.before, limit=SHOWN_CHARS)} -> {excerpt(s.after, limit=SHOWN_CHARS)}"])
    if rows:
        parts.append(_md_table(rows, ["change", "type", "name", "setting"]) + "\n")
    return "\n".join(parts)


def plan_summary(report: PreviewReport) -> list[list[str]]:
    """The plan in a few rows (label, value): compute, scaling, predictions and cost for a service; version, nodes,
    add-ons, services and cost for a platform."""
    if report.is_platform:
        cfg = report.subject
        return [["kind", f"shared platform ({cfg.kind.value}), Kubernetes {cfg.kubernetes_version}"],
                ["system nodes", f"{cfg.system_nodes.count}x {cfg.system_nodes.instance_type}"],
                ["API endpoint", "private" if cfg.network.private_endpoint else "public"],
                ["add-ons", ", ".join(f"{a.id} {a.version}" for a in cfg.addons) or "-"],
                ["services", ", ".join(cfg.services)],
                ["monthly cost", f"${cfg.monthly_cost_usd:,.2f} (shared by its services)"]]
    bp = report.blueprint
    p = bp.predictions
    c = bp.compute
    where = (f"{c.owned_nodes} owned {c.cpu_arch.value} edge node(s) of {c.vcpus_per_node} vCPU / "
             f"{c.memory_gib_per_node:g} GiB" if c.owned_nodes else c.instance_type)
    scaling = (f"fixed at {bp.autoscaling.min_replicas} replica(s) (no autoscaler)" if bp.autoscaling.metric == "fixed"
               else f"{bp.autoscaling.min_replicas}-{bp.autoscaling.max_replicas} on the batch's schedule "
               f"({bp.batch.schedule()})" if bp.batch is not None
               else f"{bp.autoscaling.min_replicas}-{bp.autoscaling.max_replicas} on `{bp.autoscaling.metric}`")
    rows = [["compute", f"{c.replicas} replica(s) on {where}"
             + (f", {c.gpus_per_replica} GPU(s) per replica" if c.gpus_per_replica else "")],
            ["autoscaling", scaling],
            ["monthly cost", f"${p.monthly_cost_usd:,.2f} provisioned for the peak"
             + (" (spot estimate)" if p.cost_is_estimate else "")]]
    if p.max_monthly_cost_usd is not None and bp.batch is None:  # a batch runs its planned replicas, no more
        rows.append(["at most", f"${p.max_monthly_cost_usd:,.2f} at the autoscaler's maximum of "
                     f"{bp.autoscaling.max_replicas} replica(s) (what budget.max_monthly_usd applies to)"])
    if p.expected_monthly_cost_usd is not None:
        rows.append(["expected monthly cost", f"${p.expected_monthly_cost_usd:,.2f} " + (
            "(the batch's run hours only)" if bp.batch is not None else
            f"(fleet simulation of a planned day; `blueprint simulate {bp.stack}`)")])
    if p.slo_attainment is not None:
        rows.append(["SLO attainment", f"{p.slo_attainment:.1%} of minutes within every latency target (p95, and p99 "
                     "where set)"])
    if bp.batch is not None:
        rows.append(["batch", describe_batch(bp.batch)])
    where = (bp.alerting.receiver and f"Alertmanager {bp.alerting.receiver}") or bp.alerting.sns_topic_arn
    rows.append(["alerts to", where or "nobody (no receiver configured)"])
    if bp.platform.stack:
        rows.append(["platform", f"{bp.platform.stack}" + (f" (${p.platform_monthly_cost_usd:,.2f}/month, shared)"
                                                           if p.platform_monthly_cost_usd is not None else "")])
    if bp.pipeline is not None:
        budget = bp.pipeline.latency_p95_budget_ms
        rows.append(["pipeline", f"the {bp.pipeline.part.value} part of compound service {bp.pipeline.service}: "
                     f"end-to-end p95 <= {bp.pipeline.latency_p95_ms:,.1f} ms"
                     + (f" (budget {budget:,.0f} ms)" if budget is not None else "")
                     + f"; `blueprint preview {bp.pipeline.service}-{bp.environment}` reviews both parts"])
    for label, value, unit in (("TTFT p95", p.ttft_p95_ms, "ms"), ("ITL p95", p.itl_p95_ms, "ms"),
                               ("TTFT p99", p.ttft_p99_ms, "ms"), ("ITL p99", p.itl_p99_ms, "ms"),
                               ("latency p95", p.latency_p95_ms, "ms"),
                               ("output tokens/s", p.output_tokens_per_s, ""),
                               ("requests/s capacity", p.requests_per_s_capacity, "")):
        if value is not None:
            rows.append([f"predicted {label}", f"{value:g} {unit}".strip()])
    if p.unit_costs is not None:
        rows.append(["unit costs", f"{describe_unit_costs(p.unit_costs.expected)} with the expected fleet "
                     f"({describe_unit_costs(p.unit_costs.provisioned)} provisioned for the peak all month)"])
    for line in engine_lines(p.engines or []):
        name, _, rest = line.partition(": ")
        rows.append([f"engine {name}", rest])
    if p.uncertainty is not None:
        u = p.uncertainty
        rows.append(["uncertainty", f"TTFT p95 {u.ttft_p95_ms.low:g}-{u.ttft_p95_ms.high:g} ms, ITL p95 "
                     f"{u.itl_p95_ms.low:g}-{u.itl_p95_ms.high:g} ms, capacity {u.requests_per_s_capacity.low:g}-"
                     f"{u.requests_per_s_capacity.high:g} requests/s ({p.uncertainty_source})"])
    if p.capacity_margin is not None:
        m = p.capacity_margin
        rows.append(["sizing margin", f"production without a calibration: sized at the band's pessimistic edge (step "
                     f"time x{m.step_time:g}, TTFT floor x{m.ttft_floor:g}); the central estimate plans "
                     f"{m.central_plan} at ${m.central_monthly_usd:,.0f}/month for nodes: `blueprint benchmark` and "
                     "`blueprint calibrate` can narrow it"])
    if p.capacity_source:
        rows.append(["capacity model", p.capacity_source])
    if p.capacity_correction:
        rows.append(["calibration", p.capacity_correction.summary])
    return rows


def _cost_line_text(c: Any) -> str:
    """One cost line for the console: cloud lines at their hourly price; owned edge nodes at their monthly cost per
    node (the requirements' figure, not a price)."""
    if c.item.startswith(OWNED_NODES_ITEM):
        per_node = c.monthly_usd / c.quantity if c.quantity else 0.0
        return f"{c.item}: {c.quantity:g} x ${per_node:,.2f}/month = ${c.monthly_usd:,.2f}"
    return f"{c.item}: {c.quantity:g} x ${c.usd_per_hour:.4f}/h = ${c.monthly_usd:,.2f}"


def _cost(report: PreviewReport) -> tuple[list, float, bool]:
    """(cost lines, monthly total, is a spot estimate)."""
    if report.is_platform:
        return list(report.subject.cost_lines), report.subject.monthly_cost_usd, False
    p = report.blueprint.predictions
    return list(p.cost_lines), p.monthly_cost_usd, p.cost_is_estimate


#: GitHub's limit on an issue or pull-request comment body, characters (the REST API refuses a longer body:
#: "body is too long (maximum is 65536 characters)").
MAX_COMMENT_CHARS = 65_536


def after_deploy_markdown(bp: Blueprint) -> str:
    """plan.md's "After deploy" section: how to call the endpoint (its URL and key are stack outputs), where it is
    reachable from, the dashboards and alerts (`blueprints.contracts.usage`), and the post-deploy commands."""
    u = usage(bp)
    lines = ["### After deploy\n"]
    if u.api_key_command:
        lines.append(f"- API key (secret stack output `api_key`): `{u.api_key_command}`")
    lines.append(f"- reachable from: {u.reach}")
    lines.append(f"- example request:\n\n  ```bash\n  {u.example_request}\n  ```")
    lines += [f"- {name}: `{how}`" for name, how in u.dashboards.items()]
    lines.append(f"- alerts: {u.alerting}")
    lines.append(f"- check it: `blueprint verify {bp.stack}`" + (
        f"; measure one replica at the planned load: `blueprint benchmark {bp.stack}`"
        if bp.archetype in (Archetype.VLLM_GPU, Archetype.SAGEMAKER_ENDPOINT) else ""))
    return "\n".join(lines) + "\n"


def render_markdown(report: PreviewReport, diff: PlanDiff | None = None, review: Review | None = None) -> str:
    """`plan.md`: a pull-request comment for one stack (a service or a shared platform), led by `review` (what
    changed against the baseline) when given."""
    subject = report.subject
    status = "passes all checks" if report.clean else "**has blocking problems**"
    out = [COMMENT_MARKER.format(stack=report.stack),
           f"## `{report.stack}`: {report.archetype} in {report.region} — {status}\n"]
    if review is not None:
        out.append(review_markdown(review))
    if diff is not None:
        out.append(diff_markdown(diff, moved=review is not None and review.move is not None))
    out.append("### Plan\n\n" + _md_table(plan_summary(report), ["setting", "planned"]) + "\n")
    if report.is_platform:
        out.append("### What the platform runs\n\n" + _md_table(platform_rows(report), ["component", "what",
                                                                                        "version"]) + "\n")
    out.append("Why:\n\n" + "\n".join(f"- {r}" for r in subject.rationale) + "\n")
    if not report.is_platform:
        out.append(after_deploy_markdown(report.blueprint))
    warnings = [*(subject.warnings if report.is_platform else []), *report.warnings]
    if warnings:
        out.append("### Warnings\n\n" + "\n".join(f"- {w}" for w in warnings) + "\n")
    out.append("### Deployability\n")
    if report.deployability:
        out.append(_md_table([[f.check, _short(f.resource), f.message] for f in report.deployability],
                             ["check", "resource", "problem and fix"]) + "\n")
    else:
        out.append("Every custom resource has its CRD, every Service and webhook-guarded object its controller, every "
                   "pod a node it fits on and a Pod Security level that admits it.\n")
    out.append("### Signals\n")
    if report.signals:
        out.append(_md_table([[f.check, _short(f.resource), f.message] for f in report.signals],
                             ["check", "resource", "problem and fix"]) + "\n")
    elif not report.is_platform:
        out.append("Every scaling query, alert and dashboard panel parses, names only metrics its engine and exporter "
                   "versions expose, and compares its threshold in its query's unit.\n")
    else:
        out.append("A platform has no scaling signals or alerts of its own; each service's preview checks its own.\n")
    out.append("### Policy verdicts\n")
    if report.policy_verdicts:
        out.append(_md_table([[v.level, v.policy, _short(v.resource), v.message] for v in report.policy_verdicts],
                             ["level", "policy", "resource", "message"]) + "\n")
    else:
        out.append("No policy violations.\n")
    out.append(f"### Kubernetes manifests\n\n{len(report.manifests)} manifest(s), strictly validated against "
               f"Kubernetes {report.kubernetes_version}"
               + (": all valid.\n" if not report.manifest_problems else ":\n"))
    for ident, msgs in report.manifest_problems.items():
        out.extend(f"- `{ident}`: {m}" for m in msgs)
    lines, total, _ = _cost(report)
    out.append("\n### Cost\n\n" + _md_table(
        [[c.item, f"{c.quantity:g}",
          "owned" if c.item.startswith(OWNED_NODES_ITEM) else f"{c.usd_per_hour:.4f}", f"{c.monthly_usd:,.2f}"]
         for c in lines]
        + [["**total**", "", "", f"**{total:,.2f}**"]],
        ["item", "quantity", "USD/hour", "USD/month"]) + "\n")
    diagram = platform_diagram(report) if report.is_platform else mermaid_diagram(report)
    out.append("### Architecture\n\n```mermaid\n" + diagram + "\n```\n")
    resources = (f"<details><summary>{len(report.resources)} resources</summary>\n\n" + _md_table(
        [[r.type, r.name, r.parent or "", _settings_text(r)] for r in report.resources],
        ["type", "name", "parent", "key settings"]) + "\n\n</details>\n")
    return _within_comment_limit("\n".join(out), resources)


def _within_comment_limit(head: str, resources: str) -> str:
    """plan.md within `MAX_COMMENT_CHARS`: the resource table goes first, then the end of what is left is cut, each
    with a note pointing at plan.json (which keeps everything)."""
    note = "\n_{what} left out: a pull-request comment holds at most {limit:,} characters; plan.json has all of it._\n"
    text = f"{head}\n{resources}"
    if len(text) <= MAX_COMMENT_CHARS:
        return text
    text = head + note.format(what=f"The resource table ({len(resources):,} characters) is", limit=MAX_COMMENT_CHARS)
    if len(text) <= MAX_COMMENT_CHARS:
        return text
    tail = note.format(what="The rest of this report is", limit=MAX_COMMENT_CHARS)
    return text[:MAX_COMMENT_CHARS - len(tail)] + tail


def _short(resource: str) -> str:
    """A resource URN's logical name (verdicts name URNs; stack-wide ones the stack)."""
    return resource.rsplit("::", 1)[-1]


# --- terminal ------------------------------------------------------------------------------------------------------

def render_terminal(report: PreviewReport, console: Console, diff: PlanDiff | None = None,
                    review: Review | None = None) -> None:
    """Print the review against the baseline (when given, briefly), the component tree with key settings, checks,
    predictions and cost lines."""
    console.print(f"[bold]Stack[/] {report.stack}  [bold]archetype[/] {report.archetype}  "
                  f"[bold]region[/] {report.region}  [bold]resources[/] {len(report.resources)}")
    if review is not None:
        print_review(review, console)
    if diff is not None:
        for c in diff.compliance:
            console.print(escape(f"[compliance changed] {c.path}: {excerpt(c.before, limit=SHOWN_CHARS)} -> "
                                   f"{excerpt(c.after, limit=SHOWN_CHARS)}"), style="bold red")
        moved = review is not None and review.move is not None
        console.print(f"[bold]Against baseline[/]: +{len(diff.added)} added, -{len(diff.removed)} removed, "
                      f"~{len(diff.changed)} {MOVED if moved else 'changed'}; monthly cost "
                      f"{diff.cost_delta_usd:+,.2f} USD")
        for change in diff.changed:
            for s in change.settings:
                console.print(escape(f"  ~ {change.type} {change.name}: {s.path}: {excerpt(s.before, limit=SHOWN_CHARS)} -> "
                                       f"{excerpt(s.after, limit=SHOWN_CHARS)}"))
    root = Tree(f"[bold]{report.stack}[/]")
    children: dict[str | None, list[RegisteredResource]] = {}
    for record in report.resources:
        children.setdefault(record.parent_urn, []).append(record)

    def add(branch: Tree, parent_urn: str | None) -> None:
        for record in children.get(parent_urn, []):
            settings = escape(_settings_text(record))
            node = branch.add(f"[cyan]{record.type}[/] {record.name}" + (f" [dim]{settings}[/]" if settings else ""))
            add(node, record.urn)

    add(root, None)
    console.print(root)
    status = "[green]all valid[/]" if not report.manifest_problems else f"[red]{len(report.manifest_problems)} invalid[/]"
    console.print(f"[bold]Kubernetes manifests[/]: {len(report.manifests)} "
                  f"(strict schema, Kubernetes {report.kubernetes_version}): {status}")
    for ident, msgs in report.manifest_problems.items():
        for msg in msgs:
            console.print(f"  [red]{ident}[/]: {escape(msg)}")
    if report.deployability:
        console.print(f"[bold]Deployability[/]: [red]{len(report.deployability)} problem(s)[/]")
        for f in report.deployability:
            console.print(f"  [red]{f.check}[/] on {_short(f.resource)}: {escape(f.message)}")
    else:
        console.print("[bold]Deployability[/]: [green]CRDs, controllers, scheduling and Pod Security all hold[/]")
    if report.signals:
        console.print(f"[bold]Signals[/]: [red]{len(report.signals)} problem(s)[/]")
        for f in report.signals:
            console.print(f"  [red]{f.check}[/] on {_short(f.resource)}: {escape(f.message)}")
    elif not report.is_platform:
        console.print("[bold]Signals[/]: [green]every query names real metrics in its threshold's unit[/]")
    if report.policy_verdicts:
        console.print(f"[bold]Policy verdicts[/]: {len(report.mandatory_violations)} mandatory, "
                      f"{len(report.policy_verdicts) - len(report.mandatory_violations)} advisory")
        for v in report.policy_verdicts:
            colour = "red" if v.level == "mandatory" else "yellow"
            console.print(f"  [{colour}]{v.level}[/] {v.policy} on {_short(v.resource)}: {escape(v.message)}")
    else:
        console.print("[bold]Policy verdicts[/]: [green]no violations[/]")
    for warning in [*(report.subject.warnings if report.is_platform else []), *report.warnings]:
        console.print(f"[yellow]warning[/]: {escape(warning)}")
    lines, total, estimate = _cost(report)
    if not report.is_platform and report.blueprint.predictions.expected_monthly_cost_usd is not None:
        p = report.blueprint.predictions
        most = f", at most ${p.max_monthly_cost_usd:,.2f} at the autoscaler's maximum" \
            if p.max_monthly_cost_usd is not None and report.blueprint.batch is None else ""
        met = f", SLO met in {p.slo_attainment:.1%} of minutes" if p.slo_attainment is not None else ""
        console.print(f"[bold]Expected monthly cost[/]: ${p.expected_monthly_cost_usd:,.2f} ("
                      f"{'batch run hours' if report.blueprint.batch else 'fleet simulation'}; "
                      f"peak-provisioned ${p.monthly_cost_usd:,.2f}{most}){met}")
        if report.blueprint.batch is not None:
            console.print(f"[bold]Batch[/]: {escape(describe_batch(report.blueprint.batch))}")
    console.print(f"[bold]Monthly cost[/]: ${total:,.2f}" + (" (spot estimate)" if estimate else "")
                  + "  " + "; ".join(_cost_line_text(c) for c in lines))
    if not report.is_platform and report.blueprint.platform.stack:
        p = report.blueprint.predictions
        console.print(f"[bold]Shared platform[/]: {report.blueprint.platform.stack}"
                      + (f" (${p.platform_monthly_cost_usd:,.2f}/month for all its services)"
                         if p.platform_monthly_cost_usd is not None else ""))
    if report.outputs:
        console.print("[bold]Stack outputs[/]: " + escape(", ".join(f"{k}={v}" for k, v in report.outputs.items())))


def print_review(review: Review, console: Console, *, indent: str = "") -> None:
    """The review in a few lines (`blueprints.review.report.changes.review_lines`): replacements in bold red, rolling
    updates in yellow; "no change" when nothing changed."""
    lines = review_lines(review)
    if not lines:
        console.print(f"{indent}[dim]no change against the previous plan[/]")
    styles = {"info": "", "warning": "bold red", "note": "yellow"}
    for kind, text in lines:
        console.print(f"{indent}{escape(text)}", style=styles[kind] or None, highlight=False, soft_wrap=True)


# --- files ---------------------------------------------------------------------------------------------------------

def _file_name(index: int, obj: dict[str, Any]) -> str:
    slug = re.sub(r"[^a-z0-9.-]+", "-", manifest_id(obj).lower()).strip("-")
    return f"{index:02d}-{slug}.yaml"


def write_report_dir(report: PreviewReport, out_dir: Path, diff: PlanDiff | None = None,
                     review: Review | None = None) -> None:
    """Write `plan.md`, `plan.json` (the `--json` report, plus `diff` and `review` when given) and
    `manifests/NN-<kind>-<namespace>-<name>.yaml` into `out_dir`.

    Raises:
        BlueprintError: the folder cannot be written.
    """
    data = report.to_json()
    if diff is not None:
        data["diff"] = diff.to_json()
    if review is not None:
        data["review"] = review.to_json()
    try:
        manifests_dir = out_dir / "manifests"
        manifests_dir.mkdir(parents=True, exist_ok=True)
        for stale in manifests_dir.glob("*.yaml"):
            stale.unlink()
        (out_dir / "plan.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (out_dir / "plan.md").write_text(render_markdown(report, diff, review), encoding="utf-8")
        for index, obj in enumerate(report.manifests, start=1):
            (manifests_dir / _file_name(index, obj)).write_text(yaml.safe_dump(obj, sort_keys=False),
                                                                encoding="utf-8")
    except OSError as exc:
        raise BlueprintError(f"{out_dir}: cannot write the report ({exc.strerror})") from None
