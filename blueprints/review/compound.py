"""One review for a compound service's environment: both part stacks, with the end-to-end view first.

`blueprint preview <service>-<environment>` of a compound service (`blueprints.plan.compound.parts`) runs each part stack's own
review (`blueprints.review.stack.review_stack`: the program under the mock engine, deployability, signals, the policy pack with the
environment's config), verifies that both stack configs record the same pipeline and that it follows from their
predictions (`blueprints.plan.compound.latency.check_parts`), and renders one report: the stages and their composed p95 against the budget,
the parts side by side with the service's cost and the quotas they need together, then each part's own report.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from tabulate import tabulate

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Pipeline, PipelinePart
from blueprints.review.changes import Review
from blueprints.review.diff import PlanDiff, diff_reports
from blueprints.core.errors import BlueprintError, read_text_file
from blueprints.core.yamlio import load_json
from blueprints.plan.compound.latency import RULE, check_parts, describe
from blueprints.review.preview import PreviewReport
from blueprints.plan.quota import QuotaNeed, quota_needs, summed_needs
from blueprints.review.report.changes import review_markdown
from blueprints.review.report.stack import COMMENT_MARKER, render_markdown, render_terminal, write_report_dir
from blueprints.contracts.stackconfig import read_stack_config, stack_config_path

#: The parts of a compound service, in the order they are reviewed (the generator first, as in `Pipeline.stacks`).
PARTS = (PipelinePart.GENERATOR, PipelinePart.RETRIEVAL)


def part_stacks(name: str, stacks_dir: Path) -> list[str] | None:
    """The part stacks a review name `<service>-<environment>` stands for, or None when `name` is a stack of its own
    or no compound service's parts are planned under it.

    Example: `rag-assistant-prod` -> [`rag-assistant-generator-prod`, `rag-assistant-retrieval-prod`].
    """
    if stack_config_path(stacks_dir, name).exists():
        return None
    for cut in (i for i, ch in enumerate(name) if ch == "-"):
        service, env = name[:cut], name[cut + 1:]
        stacks = [f"{service}-{part.value}-{env}" for part in PARTS]
        if all(stack_config_path(stacks_dir, s).is_file() for s in stacks):
            return stacks
    return None


@dataclass
class ServiceReview:
    """Both parts' reviews of one environment of a compound service, and its pipeline (the generator's record)."""

    name: str
    pipeline: Pipeline
    parts: list[PreviewReport]
    diffs: list[PlanDiff | None]
    #: Each part's review against the baseline (`blueprints.review.stack.baseline_review`); None without one.
    reviews: list[Review | None] = field(default_factory=list)
    #: The baseline's pipeline (its generator's record), when the baseline records one.
    base_pipeline: Pipeline | None = None

    @property
    def clean(self) -> bool:
        return all(r.clean for r in self.parts)

    @property
    def blueprints(self) -> list[Blueprint]:
        return [r.blueprint for r in self.parts]

    @property
    def monthly_cost_usd(self) -> float:
        return round(sum(bp.predictions.monthly_cost_usd for bp in self.blueprints), 2)

    def quota_needs(self) -> list[QuotaNeed]:
        """The service quotas both parts need together at full scale (`service_quota_needs`)."""
        return service_quota_needs(self.blueprints)

    def to_json(self) -> dict[str, Any]:
        """`{"review", "service", "environment", "pipeline", "monthly_cost_usd", "usd_per_1k_requests" (expected, end
        to end: `service_usd_per_1k_requests`), "quotas", "clean", "parts": [each part's plan.json, with its `diff`
        when a baseline was given]}`."""
        parts = []
        for report, diff, review in zip(self.parts, self.diffs, self.reviews or [None] * len(self.parts)):
            data = report.to_json()
            if diff is not None:
                data["diff"] = diff.to_json()
            if review is not None:
                data["review"] = review.to_json()
            parts.append(data)
        return {"review": self.name, "service": self.pipeline.service, "environment": self.parts[0].environment,
                "pipeline": self.pipeline.model_dump(mode="json", exclude={"part"}),
                "monthly_cost_usd": self.monthly_cost_usd, "usd_per_1k_requests": service_usd_per_1k_requests(self),
                "quotas": [n.to_json() for n in self.quota_needs()],
                "clean": self.clean, "parts": parts}


def service_quota_needs(parts: list[Blueprint]) -> list[QuotaNeed]:
    """The service quotas a compound service's parts need together at full scale: quotas are per account and Region,
    so needs of the same quota in the same Region add up (each `why` names its stack)."""
    return summed_needs([(bp.stack, need) for bp in parts for need in quota_needs(bp)])


def review_service(name: str, stacks: list[str], *, stacks_dir: Path, program: Path, policy_dir: Path,
                   policy_config: Path | None = None, baseline: Path | None = None) -> ServiceReview:
    """Review both part stacks of `name` (`part_stacks`), each with its environment's policy config.

    Raises:
        StackConfigError: a part's stack config is invalid, or the parts' pipeline records disagree (re-plan).
        BlueprintError: as `blueprints.review.stack.review_stack`; the baseline is not a report of these parts.
    """
    from blueprints.review.stack import baseline_review, review_stack

    base = load_service_baseline(baseline, name, stacks) if baseline is not None else {}
    # Before running anything: both parts record one pipeline, and it follows from their predictions.
    pipeline = check_parts(*(read_stack_config(stack_config_path(stacks_dir, s)) for s in stacks))
    reports = [review_stack(s, stacks_dir=stacks_dir, program=program, policy_config=policy_config,
                            policy_dir=policy_dir) for s in stacks]
    diffs = [diff_reports(base[r.stack], r.to_json()) if r.stack in base else None for r in reports]
    reviews = [baseline_review(r, base[r.stack], d, stacks_dir=stacks_dir) if d is not None else None
               for r, d in zip(reports, diffs)]
    return ServiceReview(name, pipeline, reports, diffs, reviews, _base_pipeline(base))


def _base_pipeline(base: dict[str, dict[str, Any]]) -> Pipeline | None:
    """The pipeline the baseline's parts record (the first that records a valid one), or None."""
    for report in base.values():
        recorded = (report.get("blueprint") or {}).get("pipeline") if isinstance(report.get("blueprint"), dict) else None
        if isinstance(recorded, dict):
            try:
                return Pipeline.model_validate(recorded)
            except ValueError:
                continue
    return None


def load_service_baseline(path: Path, name: str, stacks: list[str]) -> dict[str, dict[str, Any]]:
    """The base branch's reports of these parts by stack: a plan.json written by `blueprint preview <service>-<env>`
    (its `parts`), or one part's own plan.json. A part absent from it (new on this branch) has no baseline, nor has
    any part when the base branch's report of `name` is of a plain stack (the service became compound).

    Raises:
        BlueprintError: the file is missing, not JSON, or a report of something else.
    """
    text = read_text_file(path, BlueprintError, "baseline report")
    try:
        data = load_json(text)
    except json.JSONDecodeError as exc:
        raise BlueprintError(f"{path}: baseline is not JSON ({exc.msg} at line {exc.lineno})") from None
    reports = data.get("parts") if isinstance(data, dict) and "parts" in data else [data]
    if not isinstance(reports, list) or not all(isinstance(r, dict) and isinstance(r.get("resources"), list)
                                                 for r in reports):
        raise BlueprintError(f"{path}: not a preview report; pass a plan.json written by `blueprint preview --out`")
    found = {r.get("stack"): r for r in reports if r.get("stack") in stacks}
    if not found and name not in (data.get("review"), data.get("stack")):
        raise BlueprintError(f"{path}: baseline is a report of {data.get('review') or data.get('stack')!r}, not of "
                             f"{name} ({', '.join(stacks)}); pass the base branch's plan.json of {name}")
    return found


# --- rendering -----------------------------------------------------------------------------------------------------

def _md_table(rows: list[list[str]], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _stage_rows(review: ServiceReview) -> list[list[str]]:
    stacks = {r.blueprint.pipeline.part: r.stack for r in review.parts}  # type: ignore[union-attr]
    rows = []
    for s in review.pipeline.stages:
        what = "time to first token" if s.measure == "ttft" else "request latency"
        calls = f"{s.calls_per_request}" + (f" ({s.rounds} rounds of batches)" if s.rounds > 1 else "")
        rows.append([f"`{s.model}`", f"{s.part.value} (`{stacks[s.part]}`)", what, calls,
                     f"{s.latency_p95_ms:,.1f} ms", f"{s.stage_p95_ms:,.1f} ms"])
    budget = review.pipeline.latency_p95_budget_ms
    rows.append(["**end-to-end**", "", "", "", "", f"**{review.pipeline.latency_p95_ms:,.1f} ms**"
                 + (f" (budget {budget:,.0f} ms)" if budget is not None else " (no budget set)")])
    return rows


def _part_rows(review: ServiceReview) -> list[list[str]]:
    rows = []
    for r in review.parts:
        bp = r.blueprint
        p = bp.predictions
        expected = f"${p.expected_monthly_cost_usd:,.2f}" if p.expected_monthly_cost_usd is not None else "-"
        per_1k = f"${p.unit_costs.expected.usd_per_1k_requests:g}" if p.unit_costs is not None else "-"
        rows.append([bp.pipeline.part.value, f"`{r.stack}`", bp.archetype.value,  # type: ignore[union-attr]
                     f"{bp.compute.replicas}x {bp.compute.instance_type}, autoscaling {bp.autoscaling.min_replicas}-"
                     f"{bp.autoscaling.max_replicas}", f"${p.monthly_cost_usd:,.2f}", expected, per_1k,
                     "passes" if r.clean else "**blocking problems**"])
    end_to_end = service_usd_per_1k_requests(review)
    rows.append(["**service**", "", "", "", f"**${review.monthly_cost_usd:,.2f}**", "",
                 "-" if end_to_end is None else f"**${end_to_end:.4g}** end to end", ""])
    return rows


def service_usd_per_1k_requests(review: ServiceReview) -> float | None:
    """A compound service's expected cost per 1k of its own requests, USD: every part's expected monthly cost over
    the generator's requests (one per end-to-end request; a retrieval part serves `calls_per_request` of its own for
    each). None when a part has no expected cost."""
    generator = next(r.blueprint for r in review.parts
                     if r.blueprint.pipeline.part is PipelinePart.GENERATOR)  # type: ignore[union-attr]
    costs = [r.blueprint.predictions.expected_monthly_cost_usd for r in review.parts]
    if generator.predictions.unit_costs is None or any(c is None for c in costs):
        return None
    return sum(costs) / generator.predictions.unit_costs.requests_per_month * 1e3  # type: ignore[arg-type]


def _stage_key(stage) -> tuple[str, str]:
    return stage.part.value, stage.model


def _latency_change_rows(review: ServiceReview) -> list[list[str]]:
    """Each stage's share of the end-to-end p95 and the end-to-end p95, baseline -> now (a stage on one side only
    shows `-` on the other)."""
    before = {_stage_key(s): s for s in review.base_pipeline.stages} if review.base_pipeline else {}
    after = {_stage_key(s): s for s in review.pipeline.stages}

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f} ms"

    def change(old: float | None, new: float | None) -> str:
        return "-" if old is None or new is None else ("=" if round(new - old, 1) == 0 else f"{new - old:+,.1f} ms")

    rows = []
    for key in list(after) + [k for k in before if k not in after]:
        old = before[key].stage_p95_ms if key in before else None
        new = after[key].stage_p95_ms if key in after else None
        rows.append([f"`{key[1]}`", key[0], ms(old), ms(new), change(old, new)])
    old_total = review.base_pipeline.latency_p95_ms if review.base_pipeline else None
    rows.append(["**end-to-end**", "", ms(old_total), f"**{ms(review.pipeline.latency_p95_ms)}**",
                 change(old_total, review.pipeline.latency_p95_ms)])
    return rows


def _changes_markdown(review: ServiceReview) -> str:
    """`### What changed` for the service: the end-to-end p95 and each stage's share, baseline -> now, then each
    part's own "What changed" (`blueprints.review.report.changes.review_markdown`), one heading level down."""
    out = ["### What changed\n",
           "**End-to-end latency p95** (each stage's share, baseline -> now):\n\n"
           + _md_table(_latency_change_rows(review), ["model", "part", "before", "after", "change"]) + "\n"]
    for report, part_review in zip(review.parts, review.reviews):
        part = report.blueprint.pipeline.part.value  # type: ignore[union-attr]
        if part_review is None:
            out.append(f"#### {part} part (`{report.stack}`)\n\nNew on this branch: the baseline has no report of it.\n")
            continue
        body = review_markdown(part_review).replace("### What changed\n", "", 1)
        out.append(f"#### {part} part (`{report.stack}`)\n{body}")
    return "\n".join(out)


def _platform_line(review: ServiceReview) -> str:
    bp = review.parts[0].blueprint
    platforms = sorted({r.blueprint.platform.stack for r in review.parts if r.blueprint.platform.stack})
    if not platforms:
        return ""
    cost = bp.predictions.platform_monthly_cost_usd
    return (f"Both parts land on the shared platform `{'`, `'.join(platforms)}`"
            + (f" (${cost:,.2f}/month for all its services, not included above)" if cost is not None else "") + ".")


def _demoted(markdown: str) -> str:
    """A part's plan.md inside the service's: its comment marker dropped, its headings one level down."""
    lines = [line for line in markdown.splitlines() if not line.startswith("<!-- servingblueprints-preview:")]
    return "\n".join(re.sub(r"^(#{2,5}) ", r"#\1 ", line) for line in lines)


def service_markdown(review: ServiceReview) -> str:
    """plan.md for a compound service's environment: one pull-request comment covering both parts."""
    status = "passes all checks" if review.clean else "**has blocking problems**"
    first = review.parts[0]
    out = [COMMENT_MARKER.format(stack=review.name),
           f"## `{review.name}`: compound service {review.pipeline.service} ({len(review.parts)} parts) in "
           f"{first.region} — {status}\n"]
    if any(r is not None for r in review.reviews):
        out.append(_changes_markdown(review))
    out += ["### End-to-end latency\n\n" + _md_table(_stage_rows(review), ["model", "part (stack)", "the pipeline waits "
                                                                          "for", "calls per request", "p95 per call",
                                                                          "adds"]) + "\n",
           f"Rule: {RULE}.\n",
           "### Parts\n\n" + _md_table(_part_rows(review), ["part", "stack", "archetype", "compute",
                                                            "monthly (peak)", "monthly (expected)",
                                                            "per 1k requests (expected)", "review"]) + "\n"]
    platform = _platform_line(review)
    if platform:
        out.append(platform + "\n")
    needs = review.quota_needs()
    if needs:
        out.append("Service quotas both parts need together (`blueprint preflight <stack>` checks each):\n\n"
                   + _md_table([[f"{n.service_code} {n.quota_code}", n.quota_name, n.region, f"{n.needed:g} {n.unit}"]
                                for n in needs], ["quota", "name", "region", "needed"]) + "\n")
    for report, diff in zip(review.parts, review.diffs):
        out.append(_demoted(render_markdown(report, diff)))
    return "\n".join(out)


def render_service_terminal(review: ServiceReview, console: Console) -> None:
    """Each part's terminal report, then the service's end-to-end view and cost."""
    for report, diff, part_review in zip(review.parts, review.diffs, review.reviews or [None] * len(review.parts)):
        render_terminal(report, console, diff, part_review)
        console.print()
    console.print(f"[bold]Service[/] {review.name}  [bold]compound[/] "
                  + " + ".join(f"{r.stack} ({r.archetype})" for r in review.parts))
    console.print(f"[bold]End-to-end p95[/]: {escape(describe(review.pipeline))}")
    if review.base_pipeline is not None:
        old, new = review.base_pipeline.latency_p95_ms, review.pipeline.latency_p95_ms
        console.print(f"[bold]End-to-end p95, baseline -> now[/]: {old:,.1f} ms -> {new:,.1f} ms ({new - old:+,.1f} ms)")
    console.print(f"[dim]{escape(RULE)}[/]")
    console.print(f"[bold]Monthly cost, both parts[/]: ${review.monthly_cost_usd:,.2f} ("
                  + ", ".join(f"{r.blueprint.pipeline.part.value} ${r.monthly_cost_usd:,.2f}"  # type: ignore[union-attr]
                              for r in review.parts) + ")")
    platform = _platform_line(review)
    if platform:
        console.print(escape(platform.replace("`", "")))
    for n in review.quota_needs():
        console.print(f"[bold]Quota, both parts[/]: {n.service_code} {n.quota_code} ({escape(n.quota_name)}) in "
                      f"{n.region} >= {n.needed:g} {n.unit}")


def write_service_report(review: ServiceReview, out_dir: Path) -> None:
    """Write `plan.md` and `plan.json` (the service's) into `out_dir`, and each part's own report (plan.md,
    plan.json, manifests/) into `out_dir/<stack>/`.

    Raises:
        BlueprintError: the folder cannot be written.
    """
    for report, diff, part_review in zip(review.parts, review.diffs, review.reviews or [None] * len(review.parts)):
        write_report_dir(report, out_dir / report.stack, diff, part_review)
    try:
        (out_dir / "plan.json").write_text(json.dumps(review.to_json(), indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
        (out_dir / "plan.md").write_text(service_markdown(review), encoding="utf-8")
    except OSError as exc:
        raise BlueprintError(f"{out_dir}: cannot write the report ({exc.strerror})") from None
