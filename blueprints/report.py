"""Render a `PreviewReport`: a rich terminal view, and a folder with plan.json and one YAML file per manifest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from blueprints.manifests import manifest_id, validate_manifest
from blueprints.preview import PreviewReport, RegisteredResource


def key_settings(record: RegisteredResource) -> dict[str, Any]:
    """The few inputs a reviewer checks first, by resource type; top-level scalars for other types."""
    i = record.inputs
    if record.type == "kubernetes:apps/v1:Deployment":
        pod = i.get("spec", {}).get("template", {}).get("spec", {})
        main = (pod.get("containers") or [{}])[0]
        shm = next((v["emptyDir"] for v in pod.get("volumes", []) if v.get("name") == "dshm"), {})
        return {"replicas": i.get("spec", {}).get("replicas"), "image": main.get("image"),
                "nvidia.com/gpu": main.get("resources", {}).get("limits", {}).get("nvidia.com/gpu"),
                "/dev/shm": f"{shm.get('medium', 'disk')} {shm.get('sizeLimit', '')}".strip() if shm else "default 64Mi",
                "node": ",".join(f"{k}={v}" for k, v in pod.get("nodeSelector", {}).items())}
    if record.type == "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration":
        rule = (i.get("rules") or [{}])[0].get("applyServerSideEncryptionByDefault", {})
        return {"sse": rule.get("sseAlgorithm"), "kms key": rule.get("kmsMasterKeyId", "aws/s3")}
    if record.type == "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock":
        return {k: v for k, v in i.items() if k.startswith(("block", "ignore", "restrict"))}
    if record.type == "aws:s3/bucketVersioning:BucketVersioning":
        return {"versioning": i.get("versioningConfiguration", {}).get("status")}
    scalars = {k: v for k, v in i.items() if isinstance(v, (str, int, float, bool)) and k not in ("apiVersion", "kind")
               and len(str(v)) < 80}
    return dict(list(scalars.items())[:4])


def manifest_problems(report: PreviewReport, kubernetes_version: str) -> dict[str, list[str]]:
    """`manifest id -> problems` for every manifest that fails strict schema validation."""
    found = {}
    for obj in report.manifests:
        problems = validate_manifest(obj, kubernetes_version=kubernetes_version)
        if problems:
            found[manifest_id(obj)] = problems
    return found


def render_terminal(report: PreviewReport, console: Console) -> None:
    """Print the component tree with key settings, manifest validity, outputs and the cost lines."""
    bp = report.blueprint
    console.print(f"[bold]Stack[/] {report.stack}  [bold]archetype[/] {report.archetype}  "
                  f"[bold]region[/] {bp.region}  [bold]resources[/] {len(report.resources)}")
    root = Tree(f"[bold]{report.stack}[/]")
    nodes: dict[str | None, Tree] = {None: root}
    pending = list(report.resources)
    while pending:  # parents are registered before children, but place any order safely
        progressed = False
        for record in list(pending):
            if record.parent in nodes or record.parent not in {r.name for r in pending}:
                parent = nodes.get(record.parent, root)
                settings = ", ".join(f"{k}={v}" for k, v in key_settings(record).items() if v not in (None, ""))
                label = f"[cyan]{record.type}[/] {record.name}" + (f" [dim]{settings}[/]" if settings else "")
                nodes[record.name] = parent.add(label)
                pending.remove(record)
                progressed = True
        if not progressed:
            break
    console.print(root)
    problems = manifest_problems(report, bp.platform.kubernetes_version)
    status = "[green]all valid[/]" if not problems else f"[red]{len(problems)} invalid[/]"
    console.print(f"[bold]Kubernetes manifests[/]: {len(report.manifests)} "
                  f"(strict schema, Kubernetes {bp.platform.kubernetes_version}): {status}")
    for ident, msgs in problems.items():
        for msg in msgs:
            console.print(f"  [red]{ident}[/]: {msg}")
    costs = Table(title="Predicted monthly cost (USD)", show_header=True)
    for col in ("item", "qty", "USD/hour", "USD/month"):
        costs.add_column(col, justify="left" if col == "item" else "right")
    for line in bp.predictions.cost_lines:
        costs.add_row(line.item, f"{line.quantity:g}", f"{line.usd_per_hour:.4f}", f"{line.monthly_usd:,.2f}")
    costs.add_row("[bold]total[/]", "", "", f"[bold]{bp.predictions.monthly_cost_usd:,.2f}[/]")
    console.print(costs)
    if report.outputs:
        console.print("[bold]Stack outputs[/]: " + ", ".join(f"{k}={v}" for k, v in report.outputs.items()))


def _file_name(index: int, obj: dict[str, Any]) -> str:
    slug = re.sub(r"[^a-z0-9.-]+", "-", manifest_id(obj).lower()).strip("-")
    return f"{index:02d}-{slug}.yaml"


def write_report_dir(report: PreviewReport, out_dir: Path) -> None:
    """Write `plan.json` (the `--json` report) and `manifests/NN-<kind>-<namespace>-<name>.yaml` into `out_dir`.

    Raises:
        BlueprintError: the folder cannot be written.
    """
    from blueprints.errors import BlueprintError

    try:
        manifests_dir = out_dir / "manifests"
        manifests_dir.mkdir(parents=True, exist_ok=True)
        for stale in manifests_dir.glob("*.yaml"):
            stale.unlink()
        (out_dir / "plan.json").write_text(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
        for index, obj in enumerate(report.manifests, start=1):
            (manifests_dir / _file_name(index, obj)).write_text(yaml.safe_dump(obj, sort_keys=False),
                                                                encoding="utf-8")
    except OSError as exc:
        raise BlueprintError(f"{out_dir}: cannot write the report ({exc.strerror})") from None
