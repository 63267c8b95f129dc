"""`blueprint` command line: a thin shell that parses, calls the planner or the preview, and renders.

User errors (`BlueprintError`) print as `Type: message` on stderr and exit 2; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Iterator, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from blueprints.core import defaults
from blueprints.core.errors import BlueprintError, read_text_file
from blueprints.requirements.model import Precision, Quantization

HELP = """Plan production model serving from a requirements file, and review it offline.

\b
  blueprint plan stacks/requirements/<service>.yaml   write stacks/Pulumi.<service>-<env>.yaml per environment,
                                                      and the shared platform-<env>-<region> stacks they land on
  blueprint pilot stacks/requirements/<service>.yaml  write pilot stacks of the cheapest distinct finalists, to
                                                      benchmark before production
  blueprint preview <stack>                           run the Pulumi program offline: deployability, signals,
                                                      policy pack
  blueprint simulate <stack>                          replay a day of traffic against a service stack's fleet
  blueprint preflight <stack>                         check the AWS service quotas the stack needs
  blueprint verify <stack>                            after `pulumi up`: endpoint, metrics, scaler, alerts, nodes
  blueprint benchmark <stack> [--dry-run]             after `pulumi up`: the planned workload against one replica
  blueprint calibrate --stack <stack> RESULT.json...  fit the capacity model to a deployed stack's benchmark runs
  blueprint choose <service> RESULT...                choose among the benchmarked pilots; writes `choice:`
  blueprint stacks [--changed FILE]                   the stacks in deploy order (platforms first), for CI
  blueprint estimate --model ID --gpu NAME ...        what-if on the LLM capacity model
  blueprint schema [--platform]                       JSON Schema of requirements files (or platform.yaml)

Exit codes: 0 success; 1 (plan --check) a committed stack config differs from its plan, (preview) invalid
manifests, deployability or signal findings, mandatory policy violations, or a stack config that differs from its
plan, (preflight) a quota below what the
stack needs, (verify) a failed check; 2 bad input (and, for
verify and benchmark, missing credentials, Pulumi CLI or cluster access).
"""

app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode=None)
#: Width when output is piped (CI logs, PR pastes): wide enough that URIs and ARNs are not split (rich uses 80).
PIPED_WIDTH = 200
out = Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
err = Console(stderr=True, width=None if sys.stderr.isatty() else PIPED_WIDTH)


def _print_json(data) -> None:
    """`data` (JSON-serialisable) as JSON indented by 2 on stdout (`--json`): rich's highlighted rendering on a
    terminal; piped (CI, `| jq`, the tests) the same text written directly, because rich lays out every line of a
    large document (seconds for a preview's) only to drop the styles on a pipe."""
    if out.is_terminal:
        out.print_json(json.dumps(data))
    else:
        out.file.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"blueprint (servingblueprints) {version('servingblueprints')}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Plan production model serving from a requirements file, and review it offline."""
    _recover_writes(None)


def _recover_writes(stacks_dir: Optional[Path]) -> None:
    """Finish or undo a stack-config write a kill interrupted (`blueprints.core.journal`) in `stacks_dir` (default:
    the project's, from the working directory), saying what was done, before anything reads the stack configs."""
    from blueprints.core.journal import recover
    from blueprints.core.project import project_paths

    with user_errors():
        folder = stacks_dir if stacks_dir is not None else project_paths().stacks_dir
        for note in recover(folder) if folder.is_dir() else []:
            err.print(f"[yellow]note[/]: {escape(note)}", highlight=False, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a `BlueprintError` into `Type: message` on stderr and exit code 2."""
    try:
        yield
    except BlueprintError as exc:
        err.print(f"[bold red]{type(exc).__name__}[/]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None


def _as_of(value: Optional[str]) -> Optional[dt.date]:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a date; use YYYY-MM-DD, e.g. 2026-12-01") from None


@app.command()
def plan(
    requirements: Optional[list[Path]] = typer.Argument(None, help="Requirements file, e.g. "
                                                        "stacks/requirements/chat-assistant.yaml (one; with --check "
                                                        "any number, default every file of the requirements "
                                                        "folder)."),
    check: bool = typer.Option(False, "--check", help="Write nothing: re-plan the files into memory, each stack as "
                               "of the plan date its stack config records, and compare with the committed stack "
                               "configs. Exit 0 when identical, 1 listing every field that differs, its words, "
                               "and whether it is a hand edit (the file's planned values no longer match the digest "
                               "its plan recorded: change the requirements field named instead) or stale (an input "
                               "changed since: re-plan the file named)."),
    env: Optional[list[str]] = typer.Option(None, "--env", "-e", help="Environment to plan; repeat for several. "
                                            "Default: every environment in the file."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Where to write Pulumi.<stack>.yaml. Default: the "
                                           "project's stack folder (Pulumi.yaml's stackConfigDir, `stacks`), the "
                                           "project found from the requirements file or the working directory."),
    policy_dir: Optional[Path] = typer.Option(None, "--policy-dir", help="Per-environment policy configs "
                                              "(<env>.json, else prod.json or dev.json); each environment is planned "
                                              "within their mandatory guardrails. Default: policies/config of the "
                                              "project (the folder holding Pulumi.yaml, found from the requirements "
                                              "file, else the working directory); missing: exit 2."),
    no_policy: bool = typer.Option(False, "--no-policy", help="Plan without the policy configs' guardrails (the "
                                   "preview may then fail the pack)."),
    as_of: Optional[str] = typer.Option(None, "--as-of", callback=_as_of, metavar="YYYY-MM-DD",
                                        help="Plan date: picks the default Kubernetes version (newest in EKS "
                                        "standard support), its price and support warnings. Default: today."),
    switch_threshold: float = typer.Option(
        defaults.SWITCH_THRESHOLD_PCT, "--switch-threshold", min=0, max=100, metavar="PCT",
        help="Re-planning over an existing stack config keeps its hardware (instance type, tensor parallel degree, "
        "KV-cache dtype) while it stays feasible and costs at most PCT % more than the cheapest option: a switch "
        "replaces the node pool. 0 switches whenever something is cheaper. Range 0-100."),
    as_json: bool = typer.Option(False, "--json", help="Print the blueprints as JSON instead of a table."),
) -> None:
    """Choose the archetype, size it and write one stack config per environment, plus the shared platform stack
    config of each environment and region it lands on (`Pulumi.platform-<env>-<region>.yaml`).

    Each environment gets the cheapest option meeting its SLO within every guardrail of its policy config (instance
    families, GPU quota with the rollout surge, regions, audit logs, spot); when none exists the error names the
    binding constraint. Every requirements file beside this one (and platform.yaml) shapes the shared platforms:
    the strictest compliance of the services on a platform wins. Nothing is written unless every environment plans
    cleanly. Over an existing stack config, its hardware is kept within --switch-threshold of the cheapest, and each
    stack's summary says what changed against it: requirements and plan field by field, predictions before -> after,
    and every change that replaces a resource (`--json`: `review`). Exit 2 on invalid or infeasible requirements.
    """
    if check:
        _check_plans(requirements or None, policy_dir=policy_dir, no_policy=no_policy, as_json=as_json)
        return
    from blueprints.review.changes import Review, platform_replacements, platform_tenants, review_changes
    from blueprints.review.report.stack import print_review
    from blueprints.contracts.stackconfig import (
        recorded_blueprint, recorded_platform, stack_config_path, write_stack_configs,
    )
    from blueprints.workspace import plan_requirements_file
    from blueprints.core.project import project_paths, project_relative

    with user_errors():
        if not requirements or len(requirements) != 1:
            raise BlueprintError(f"plan takes one requirements file (got {len(requirements or [])}); --check takes "
                                 "several")
        requirements = requirements[0]
        project = project_paths(requirements)
        stacks_dir = out_dir if out_dir is not None else project.stacks_dir
        _recover_writes(stacks_dir)
        # The CLI's only clock read: the planner itself is pure and takes the date as an input.
        plan_date = as_of or dt.date.today()
        planned = plan_requirements_file(
            requirements, as_of=plan_date, environments=env,
            policy_dir=policy_dir if policy_dir is not None else (project.policy_dir if project.root else None),
            use_policy=not no_policy, requirements_dir=project.requirements_dir if project.root else None,
            stacks_dir=stacks_dir, switch_threshold_pct=switch_threshold)
        previous = {bp.stack: recorded_blueprint(stack_config_path(stacks_dir, bp.stack)) for bp in planned.blueprints}
        previous_platforms = {p.stack: recorded_platform(stack_config_path(stacks_dir, p.stack))
                              for p in planned.platforms}
        tenants = platform_tenants(planned.platforms, planned.blueprints, previous, stacks_dir)
        platform_source = project.requirements_dir.relative_to(project.root) if project.root else requirements.parent
        paths = write_stack_configs(planned.subjects, stacks_dir, source=project_relative(requirements),
                                    platform_source=platform_source.as_posix(),
                                    cluster_addons=planned.cluster_addons, as_of=plan_date)
    written = dict(zip([s.stack for s in planned.subjects], paths))
    reviews = {bp.stack: review_changes(bp.stack, previous[bp.stack], bp, tenants=tenants)
               for bp in planned.blueprints if previous[bp.stack] is not None}
    reviews |= {p.stack: Review(p.stack, True, platform=True,
                                replacements=platform_replacements(previous_platforms[p.stack], p))
                for p in planned.platforms if previous_platforms[p.stack] is not None}
    if as_json:
        _print_json(
            [{"stack": p.stack, "path": str(written[p.stack]), "platform": p.model_dump(mode="json"),
              "review": reviews[p.stack].to_json() if p.stack in reviews else None}
             for p in planned.platforms]
            + [{"stack": bp.stack, "path": str(written[bp.stack]), "blueprint": bp.model_dump(mode="json"),
                "review": reviews[bp.stack].to_json() if bp.stack in reviews else None}
               for bp in planned.blueprints])
        return
    for warning in planned.warnings:  # the requirements' choice re-opened (`blueprints.plan.choice`)
        err.print(f"[yellow]warning[/]: {escape(warning)}", highlight=False, soft_wrap=True)
    out.print(f"Planned from {requirements}:")
    for platform in planned.platforms:
        out.print(platform_summary(platform))
        if reviews.get(platform.stack) is not None and reviews[platform.stack].replacements:
            print_review(reviews[platform.stack], out, indent="  changed   ")
        out.print(f"  [green]wrote[/]     {written[platform.stack]}")
    for bp in planned.blueprints:
        out.print(summary(bp))
        if bp.stack in reviews:
            print_review(reviews[bp.stack], out, indent="  changed   ")
        out.print(f"  [green]wrote[/]     {written[bp.stack]}" + ("" if bp.stack in reviews else " (new)"))
        if bp.pipeline is not None and bp.pipeline.stacks[-1] == bp.stack:  # after a compound service's last part
            out.print(pipeline_summary(bp))
    out.print("[dim]Each stack config's `rationale` says why; `blueprint preview <stack>` shows what it builds "
              "(platform stacks first: services read their outputs).[/]")


@app.command()
def pilot(
    requirements: Path = typer.Argument(..., help="Requirements file of one text-generation model, e.g. "
                                        "stacks/requirements/chat-assistant.yaml."),
    finalists: int = typer.Option(3, "--finalists", "-n", metavar="N", help="How many of the cheapest distinct "
                                  "candidates (archetype, engine, instance type, tensor parallel degree, KV-cache "
                                  "dtype) to deploy as pilots. Range 1-5."),
    env: Optional[str] = typer.Option(None, "--env", "-e", help="The environment whose platform and policy the "
                                      "pilots take (its stack must be planned). Default: the first non-production "
                                      "environment of the file."),
    hours: int = typer.Option(8, "--hours", metavar="H", help="How long the pilots live, hours: their expiry tag "
                              "(servingblueprints.io/expires) and the cost printed. Range 1-168."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Where to write Pulumi.<service>-pilot-<k>.yaml. "
                                           "Default: the project's stack folder."),
    policy_dir: Optional[Path] = typer.Option(None, "--policy-dir", help="Per-environment policy configs, as for "
                                              "`plan`. Default: policies/config of the project."),
) -> None:
    """Write a pilot stack per finalist, `stacks/Pulumi.<service>-pilot-<k>.yaml`, to benchmark before production.

    The finalists are the cheapest distinct candidates at the reference environment's peak (the busiest production
    one): self-hosted engines and SageMaker where the requirements allow it. Each pilot is planned like any stack
    (the same builders, guardrails, preview and policy checks) on the --env environment's platform, with one
    replica whose peak is what it serves within the SLO, so `blueprint benchmark <service>-pilot-<k>` sweeps it up to
    and past its own capacity; every AWS resource is tagged with its expiry. Prints each pilot's cost for --hours and
    the order to deploy and destroy. `blueprint plan` never rewrites pilot stacks and `plan --check` skips them.
    Exit 2 on bad flags (naming the flag) or a service that is not one text-generation model.
    """
    from blueprints.contracts.stackconfig import stack_config_path, write_stack_configs
    from blueprints.core.project import project_paths, project_relative
    from blueprints.review.stack import policy_config_for
    from blueprints.workspace import pilot_requirements_file

    with user_errors():
        project = project_paths(requirements)
        stacks_dir = out_dir if out_dir is not None else project.stacks_dir
        _recover_writes(stacks_dir)
        # The CLI's clock read: when the pilots expire (the planner takes it as an input).
        now = dt.datetime.now(dt.timezone.utc)
        planned = pilot_requirements_file(
            requirements, now=now, env=env, finalists=finalists, hours=hours,
            policy_dir=policy_dir if policy_dir is not None else (project.policy_dir if project.root else None),
            requirements_dir=project.requirements_dir if project.root else None, stacks_dir=stacks_dir)
        first = planned.pilots[0].blueprint
        home = f"{first.service}-{planned.environment}"
        if not stack_config_path(stacks_dir, home).exists():
            raise BlueprintError(f"--env {planned.environment}: pilots land where {home} does, which is not planned "
                                 f"in {stacks_dir}; run `blueprint plan {requirements}` first")
        paths = write_stack_configs([p.blueprint for p in planned.pilots], stacks_dir,
                                    source=project_relative(requirements), as_of=now.date())
        policy = policy_config_for(planned.environment, production=first.production,
                                   config_dir=policy_dir if policy_dir is not None else project.policy_dir)
    print_pilots(planned, paths, stacks_dir=stacks_dir, asked=finalists, policy=project_relative(policy))


def print_pilots(planned, paths: list[Path], *, stacks_dir: Path, asked: int, policy: str) -> None:
    """`blueprint pilot`'s report: each pilot, what they cost for their hours, the order to deploy and destroy
    (`policy`: the policy config of the pilots' environment)."""
    from blueprints.contracts.sections import PILOT_EXPIRES_TAG

    pilots = planned.pilots
    first = pilots[0].blueprint
    hours = first.pilot.hours
    platforms = list(dict.fromkeys(p.blueprint.platform.stack for p in pilots if p.blueprint.platform.stack))
    out.print(f"Pilots of {first.service} in {planned.environment} ({', '.join(platforms) or 'no platform stack'}), "
              f"the cheapest distinct finalists at {planned.reference_environment}'s peak:", highlight=False)
    for p, path in zip(pilots, paths):
        bp, f = p.blueprint, p.finalist
        out.print(f"  {bp.pilot.candidate}. {bp.stack}: {bp.archetype.value} on {f.hardware.describe()}, "
                  f"engine {bp.engine.kind}", highlight=False)
        out.print(f"     at {planned.reference_environment}: {f.replicas} replica(s), ${f.monthly_usd:,.0f}/month; "
                  f"pilot: {bp.compute.replicas} replica(s) at "
                  f"{bp.model.traffic.peak_requests_per_s / bp.compute.replicas:.3g} requests/s each (one replica's "
                  f"capacity within the SLO), ${p.cost_usd:,.2f} for {hours} h "
                  f"(at most ${p.most_usd:,.2f} if it scales to {bp.autoscaling.max_replicas})", highlight=False)
        out.print(f"     [green]wrote[/] {path}", highlight=False)
    for note in planned.left_out:
        out.print(f"  [yellow]left out[/] {escape(note)}", highlight=False, soft_wrap=True)
    if len(pilots) < asked:
        out.print(f"  [yellow]only {len(pilots)} of --finalists {asked}[/]: the searches reached no more distinct "
                  f"candidates that {planned.environment} can take", highlight=False)
    total = sum(p.cost_usd for p in pilots)
    out.print(f"The pilots cost ${total:,.2f} for {hours} h (nodes x price x hours, fixed items pro rata; the shared "
              f"platform apart) and expire {first.pilot.expires} (tag {PILOT_EXPIRES_TAG}).", highlight=False)
    stale = sorted(path for path in stacks_dir.glob(f"Pulumi.{first.service}-pilot-*.yaml") if path not in paths)
    if stale:
        out.print(f"  [yellow]older pilots[/] {', '.join(str(s) for s in stale)}: destroy their stacks and delete "
                  "the files", highlight=False)
    policy = f"--policy-pack policies --policy-pack-config {policy}"
    out.print("Deploy and destroy in this order:", highlight=False)
    for stack in platforms:
        out.print(f"  pulumi up --stack {stack} {policy}   # the platform, if not up yet", highlight=False)
    for p in pilots:
        out.print(f"  blueprint preflight {p.blueprint.stack}   # the account's quotas with every stack in it",
                  highlight=False)
        out.print(f"  pulumi up --stack {p.blueprint.stack} {policy}", highlight=False)
    for p in pilots:
        out.print(f"  blueprint benchmark {p.blueprint.stack}", highlight=False)
    for p in pilots:
        out.print(f"  pulumi destroy --stack {p.blueprint.stack}   # by {first.pilot.expires}", highlight=False)


def _check_plans(files: Optional[list[Path]], *, policy_dir: Optional[Path], no_policy: bool, as_json: bool) -> None:
    """`plan --check`: every drift of the committed stack configs from their plans; exit 1 when there is any."""
    from dataclasses import replace

    from blueprints.core.project import project_paths
    from blueprints.drift import check_plans

    with user_errors():
        project = project_paths(files[0] if files else None)
        if project.root is None:
            raise BlueprintError("plan --check: no project found (a folder holding Pulumi.yaml) from the files or "
                                 "the working directory")
        if policy_dir is not None:
            project = replace(project, policy_dir=policy_dir)
        drifts = check_plans(files, project, use_policy=not no_policy)
    if as_json:
        _print_json([d.to_json() for d in drifts])
    else:
        _print_drifts(drifts)
        if not drifts:
            err.print("[green]every stack config is what its requirements plan[/]")
    if drifts:
        raise typer.Exit(code=1)


def _print_drifts(drifts: list) -> None:
    """Each difference of a stack config from its plan (`blueprints.drift.Drift`), then how many, by stack."""
    for drift in drifts:
        out.print(escape(drift.message()), highlight=False, soft_wrap=True)
    if drifts:
        stacks = sorted({d.stack for d in drifts})
        err.print(f"[red]{len(drifts)} field(s) of {len(stacks)} stack(s) differ from their plans: "
                  f"{', '.join(stacks)}[/]")


def _source_check(stacks: list[str], project, stacks_dir: Path) -> tuple[list, str | None]:
    """`blueprint plan --check`'s comparison (`blueprints.drift.check_stacks`) for the stacks a preview reviews."""
    from dataclasses import replace

    from blueprints.drift import check_stacks

    with err.status(f"Re-planning {', '.join(stacks)} from its requirements (`blueprint plan --check`)..."):
        return check_stacks(stacks, replace(project, stacks_dir=stacks_dir))


def _report_source_check(stack: str, drifts: list, skipped: str | None) -> None:
    """After a preview's review: the stack configs' drift from their plans (exit 1 when any), or why it was not
    compared."""
    if skipped is not None:
        err.print(f"[yellow]{escape(stack)}: source comparison skipped: {escape(skipped)}[/]")
    elif drifts:
        _print_drifts(drifts)
        err.print(f"[red]{escape(stack)}: the stack config is not what its requirements plan; the review above is of "
                  "the committed file, which `blueprint plan --check` fails[/]")


def _source_check_json(drifts: list, skipped: str | None) -> dict:
    return {"skipped": skipped, "drift": [d.to_json() for d in drifts]}


def platform_summary(platform) -> str:
    """A few lines per platform stack: kind, version, add-ons, the services on it and its cost (rich markup)."""
    from blueprints.contracts.platform import PlatformKind

    warn = "".join(f"\n  [yellow]warning[/]   {escape(w)}" for w in platform.warnings)
    net = platform.network
    built = (f"  cluster   Kubernetes {platform.kubernetes_version}, {platform.system_nodes.count}x "
             f"{platform.system_nodes.instance_type} system nodes, "
             f"{'private' if net.private_endpoint else 'public'} API endpoint\n"
             if platform.kind is PlatformKind.EKS else
             f"  network   {net.existing_vpc.vpc_id if net.existing_vpc else 'a new VPC'}, no cluster; interface "
             f"endpoints: {', '.join(net.interface_endpoints) or '-'}\n")
    return (f"[bold]{platform.stack}[/]  shared platform ({platform.kind.value})  {platform.region}\n" + built +
            f"  add-ons   {', '.join(a.id for a in platform.addons) or '-'}\n"
            f"  serves    {', '.join(platform.services)}\n"
            f"  cost      ${platform.monthly_cost_usd:,.0f}/month (shared){warn}")


def summary(bp) -> str:
    """A few lines per stack: archetype, compute, predictions and cost (rich markup)."""
    c, p, a = bp.compute, bp.predictions, bp.autoscaling
    gpus = f", {c.gpus_per_replica} GPU/replica ({c.gpu})" if c.gpus_per_replica else f", {c.cpu_per_replica:g} vCPU/replica"
    latency = ", ".join(f"{label} {_ms(v)}" for label, v in (("TTFT p95", p.ttft_p95_ms), ("ITL p95", p.itl_p95_ms),
                                                            ("TTFT p99", p.ttft_p99_ms), ("ITL p99", p.itl_p99_ms),
                                                            ("latency p95", p.latency_p95_ms)) if v is not None)
    cost = f"{'~' if p.cost_is_estimate else ''}${p.monthly_cost_usd:,.0f}/month" + (
        " (spot estimate)" if p.cost_is_estimate else "")
    if bp.platform.stack:
        cost += f" + shared {bp.platform.stack}" + (f" (${p.platform_monthly_cost_usd:,.0f}/month for all its "
                                                    "services)" if p.platform_monthly_cost_usd is not None else "")
    return (f"[bold]{bp.stack}[/]  {bp.archetype.value}  {bp.region}\n"
            f"  compute   {c.node_type}{f' ({c.owned_nodes} owned)' if c.owned_nodes else ''}{gpus}; "
            f"{c.replicas} replica(s) at peak, "
            + (f"fixed {a.min_replicas}" if a.metric == "fixed" else
               (f"{a.max_replicas} during the batch run, {a.min_replicas} outside" if bp.batch.keda_cron
                or bp.batch.async_inference else
                f"{a.min_replicas} all day (the batch run)") if bp.batch is not None else
               f"autoscale {a.min_replicas}-{a.max_replicas}")
            + "\n"
            f"  predicts  {latency}; {p.requests_per_s_capacity:g} requests/s capacity\n"
            + _band(bp)
            + f"  cost      {cost}{_expected(p, batch=bp.batch is not None)}" + _batch(bp))


def _batch(bp) -> str:
    """A batch service's run: completion against the deadline, schedule and cost (rich markup), or ''."""
    from blueprints.plan.batch import describe_batch

    return "" if bp.batch is None else f"\n  batch     {escape(describe_batch(bp.batch))}"


def _band(bp) -> str:
    """The predictions' band and, for a production plan sized at its pessimistic edge, what a calibration could save
    (an empty string for a stack without one)."""
    p = bp.predictions
    if p.uncertainty is None:
        return ""
    u = p.uncertainty
    state = "calibrated" if p.capacity_correction else "uncalibrated"
    line = (f"  band      TTFT p95 {_ms(u.ttft_p95_ms.low)}-{_ms(u.ttft_p95_ms.high)}, ITL p95 "
            f"{_ms(u.itl_p95_ms.low)}-{_ms(u.itl_p95_ms.high)} ({state})")
    m = p.capacity_margin
    if m is not None:
        line += (f"; sized at the band's pessimistic edge (the central estimate: {m.central_plan}, "
                 f"${m.central_monthly_usd:,.0f}/month for nodes)")
    elif p.capacity_correction is None:
        line += "; sized at the central estimate"
    return line + "\n"


def pipeline_summary(bp) -> str:
    """A compound service's environment in a few lines: its end-to-end p95, both parts' cost (rich markup)."""
    from blueprints.plan.compound.latency import describe

    return (f"[bold]{bp.pipeline.service}-{bp.environment}[/]  compound service: {' + '.join(bp.pipeline.stacks)}\n"
            f"  end-to-end p95 <= {escape(describe(bp.pipeline))}\n"
            f"  review    `blueprint preview {bp.pipeline.service}-{bp.environment}` (both parts, one report)")


def _expected(p, *, batch: bool = False) -> str:
    """The autoscaler's maximum (what the budget applies to), and the simulation's expected cost and SLO attainment
    beside the peak cost, and the unit costs (rich markup). `batch`: a batch service's run hours, not a simulated
    day, are its expected cost, and it runs no more than its planned replicas."""
    from blueprints.plan.unit_costs import describe as describe_unit_costs

    most = f"\n  at most   ${p.max_monthly_cost_usd:,.0f}/month at the autoscaler's maximum" \
        if p.max_monthly_cost_usd is not None and not batch else ""
    if p.expected_monthly_cost_usd is None:
        return most
    unit = (f"\n  unit cost {escape(describe_unit_costs(p.unit_costs.expected))} (expected; provisioned for the peak: "
            f"{escape(describe_unit_costs(p.unit_costs.provisioned))})" if p.unit_costs is not None else "")
    met = f", SLO met in {p.slo_attainment:.1%} of minutes" if p.slo_attainment is not None else ""
    head = (f"batch run ~${p.expected_monthly_cost_usd:,.0f}/month expected (the same fleet all day "
            f"${p.monthly_cost_usd:,.0f})" if batch else
            f"simulated ~${p.expected_monthly_cost_usd:,.0f}/month expected (peak-provisioned "
            f"${p.monthly_cost_usd:,.0f})")
    return f"{most}\n  {head}{met}{unit}{_engines(p)}"


def _engines(p) -> str:
    """The engine table, one engine a line (rich markup), or '' without one."""
    from blueprints.plan.engines import engine_lines

    if not p.engines:
        return ""
    return "\n  engines   " + "\n            ".join(escape(line) for line in engine_lines(p.engines))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"


@app.command()
def preview(
    stack: str = typer.Argument(..., help="Stack name, e.g. chat-assistant-prod or platform-prod-us-east-1 (reads "
                                "stacks/Pulumi.<stack>.yaml); or <service>-<env> of a compound service, e.g. "
                                "rag-assistant-prod: one review of both its part stacks."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON: stack, archetype, resources (with "
                                 "depends_on), manifests, manifest_problems, deployability, policy_verdicts, "
                                 "predictions, outputs (a compound service: review, pipeline, monthly_cost_usd, "
                                 "quotas, clean and each part's report under parts)."),
    out_path: Optional[Path] = typer.Option(None, "--out", help="Also write plan.md (a PR comment), plan.json and "
                                            "manifests/*.yaml into this folder."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="plan.json from the base branch: lead with "
                                            "what changed (requirements and plan field by field, predictions before "
                                            "-> after, every change that replaces a resource), then resources added, "
                                            "removed and changed, and the cost delta."),
    policy_config: Optional[Path] = typer.Option(None, "--policy-config", help="Policy-config JSON for the policy "
                                                 "pack. Default: policies/config/<environment>.json."),
    stacks_dir: Optional[Path] = typer.Option(None, "--stacks-dir", help="Folder of stack configs. Default: the "
                                              "project's (found from the working directory)."),
    program: Optional[Path] = typer.Option(None, "--program", help="The Pulumi program to run. Default: the "
                                           "project's __main__.py."),
) -> None:
    """Run the Pulumi program offline (Pulumi's mock engine), the deployability checks and the policy pack, and
    report what a service or platform stack would create.

    No cloud credentials or Pulumi CLI needed. A service on a shared platform reads the platform's planned outputs
    (plan the platform first). A compound service's <service>-<env> reviews both part stacks in one report, the
    end-to-end latency first (--out: the service's plan.md and plan.json, each part's report in <stack>/). Exit 0
    when clean; 1 when a manifest is invalid, a deployability check fails (a CRD, controller, node or Pod Security
    level missing), a mandatory policy is violated, or the stack config is not what its requirements plan (the
    report is still printed and written); 2 on bad input.

    With the requirements folder present (`<stacks>/requirements/` holding the file the stack config's
    `servingblueprints:planned.requirements` names), the review ends with `blueprint plan --check`'s comparison for
    the stacks reviewed (the same function): every field that differs, hand edit or stale. Without it (a stack config
    alone) the comparison is skipped, saying why.
    """
    from blueprints.review.diff import diff_reports, load_baseline
    from blueprints.review.compound import part_stacks
    from blueprints.review.report.stack import render_terminal, write_report_dir
    from blueprints.review.stack import baseline_review, review_stack
    from blueprints.core.project import project_paths

    with user_errors():
        project = project_paths(stacks_dir)
        parts = part_stacks(stack, stacks_dir or project.stacks_dir)
    if parts is not None:
        _preview_service(stack, parts, project=project, stacks_dir=stacks_dir or project.stacks_dir,
                         program=program or project.program, policy_config=policy_config, baseline=baseline,
                         out_path=out_path, as_json=as_json)
        return
    with user_errors():
        base = load_baseline(baseline, stack=stack) if baseline is not None else None
        with err.status(f"Running the Pulumi program for {stack} under the mock engine..."):
            report = review_stack(stack, stacks_dir=stacks_dir or project.stacks_dir,
                                  program=program or project.program, policy_config=policy_config,
                                  policy_dir=project.policy_dir, baseline=base)
        diff = diff_reports(base, report.to_json()) if base is not None else None
        review = (baseline_review(report, base, diff, stacks_dir=stacks_dir or project.stacks_dir)
                  if base is not None and diff is not None else None)
        if out_path is not None:
            write_report_dir(report, out_path, diff, review)
        drifts, skipped = _source_check([stack], project, stacks_dir or project.stacks_dir)
    if as_json:
        data = report.to_json()
        if diff is not None and review is not None:
            data["diff"], data["review"] = diff.to_json(), review.to_json()
        data["source_check"] = _source_check_json(drifts, skipped)
        _print_json(data)
    else:
        render_terminal(report, out, diff, review)
        _report_source_check(stack, drifts, skipped)
    if out_path is not None:
        err.print(f"[green]wrote[/] {out_path}/plan.md, plan.json and {len(report.manifests)} manifest(s)")
    if not report.clean:
        err.print(f"[red]{stack}: {len(report.manifest_problems)} invalid manifest(s), "
                  f"{len(report.deployability)} deployability and {len(report.signals)} signal finding(s), "
                  f"{len(report.mandatory_violations)} mandatory policy violation(s)[/]")
    if not report.clean or drifts:
        raise typer.Exit(code=1)


def _preview_service(name: str, parts: list[str], *, project, stacks_dir: Path, program: Path,
                     policy_config: Optional[Path], baseline: Optional[Path], out_path: Optional[Path],
                     as_json: bool) -> None:
    """`preview` of a compound service's environment: both part stacks, one report."""
    from blueprints.review.compound import render_service_terminal, review_service, write_service_report

    with user_errors():
        with err.status(f"Running the Pulumi program for {', '.join(parts)} under the mock engine..."):
            review = review_service(name, parts, stacks_dir=stacks_dir, program=program,
                                    policy_dir=project.policy_dir, policy_config=policy_config, baseline=baseline)
        if out_path is not None:
            write_service_report(review, out_path)
        drifts, skipped = _source_check(parts, project, stacks_dir)
    if as_json:
        _print_json({**review.to_json(), "source_check": _source_check_json(drifts, skipped)})
    else:
        render_service_terminal(review, out)
        _report_source_check(name, drifts, skipped)
    if out_path is not None:
        err.print(f"[green]wrote[/] {out_path}/plan.md, plan.json and each part's report in "
                  f"{', '.join(f'{out_path}/{s}' for s in parts)}")
    if not review.clean:
        for report in review.parts:
            if not report.clean:
                err.print(f"[red]{report.stack}: {len(report.manifest_problems)} invalid manifest(s), "
                          f"{len(report.deployability)} deployability and {len(report.signals)} signal finding(s), "
                          f"{len(report.mandatory_violations)} mandatory policy violation(s)[/]")
    if not review.clean or drifts:
        raise typer.Exit(code=1)


@app.command()
def simulate(
    stack: str = typer.Argument(..., help="Service stack name, e.g. chat-assistant-prod (reads "
                                "stacks/Pulumi.<stack>.yaml)."),
    trace: Optional[Path] = typer.Option(None, "--trace", help="CSV of requests/s per minute (column `rps`, or the "
                                         "last column; a header is allowed). Default: the planned traffic pattern."),
    days: int = typer.Option(1, "--days", min=1, max=90, help="Days of the planned pattern to replay (1-90). "
                             "Default 1. Ignored with --trace."),
    out_path: Optional[Path] = typer.Option(None, "--out", help="Write plot.svg, plot.png and simulation.md (a "
                                            "Mermaid xychart for plan.md) into this folder."),
    as_json: bool = typer.Option(False, "--json", help="Print {stack, days, slo_violation_minutes, "
                                 "slo_longest_violation_minutes, worst_ms {target: ms}, slo_targets_ms, "
                                 "slo_attainment (0-1), expected_monthly_usd, peak_monthly_usd, most_nodes, "
                                 "replica_hours, cold_starts, cold_start_max_s, cold_start_mean_s, "
                                 "worst_queue_requests, scale_ups, scale_downs}."),
    stacks_dir: Optional[Path] = typer.Option(None, "--stacks-dir", help="Folder of stack configs. Default: the "
                                              "project's (found from the working directory)."),
) -> None:
    """Replay traffic against the planned fleet with its autoscaler's real settings and the capacity model; report
    the SLO violations first (minutes over a p95 or p99 target, the longest run, the worst values), then SLO
    attainment, queues, cold starts, replica-hours and the expected monthly cost beside the peak cost. A batch stack
    (`traffic.batch`): its day's run replayed, the completion time against the deadline first (`--json`: requests,
    replicas, requests_per_s_per_replica, start_s, request_latency_s, completion_hours, deadline_hours,
    within_deadline, done_by_hour).

    Exit 2 on a missing or invalid stack config, a platform stack, or an invalid trace.
    """
    from blueprints.review.compound import part_stacks
    from blueprints.simulate.fleet import simulate as run
    from blueprints.simulate.report import summary_markdown, write_plot
    from blueprints.contracts.stackconfig import read_stack_config, stack_config_path
    from blueprints.simulate.traffic import read_trace
    from blueprints.core.project import project_paths

    with user_errors():
        stacks_dir = stacks_dir or project_paths().stacks_dir
        parts = part_stacks(stack, stacks_dir)
        if parts is not None:
            raise BlueprintError(f"{stack} is a compound service's environment: simulate each part's fleet, "
                                 f"`blueprint simulate {parts[0]}` and `blueprint simulate {parts[1]}`")
        bp = read_stack_config(stack_config_path(stacks_dir, stack))
        if bp.batch is not None:
            _simulate_batch(bp, trace=trace, out_path=out_path, as_json=as_json)
            return
        result = run(bp, trace=read_trace(trace) if trace is not None else None, days=days)
        if out_path is not None:
            write_plot(result, out_path / "plot.svg")
            write_plot(result, out_path / "plot.png")
            try:
                (out_path / "simulation.md").write_text(summary_markdown(result), encoding="utf-8")
            except OSError as exc:
                raise BlueprintError(f"{out_path}: cannot write simulation.md ({exc.strerror})") from None
    if as_json:
        typer.echo(json.dumps(result.to_json(), sort_keys=True))
    else:
        data = result.to_json()
        typer.echo(f"SLO: {result.slo_words()}")
        for key in ("slo_violation_minutes", "slo_longest_violation_minutes", "slo_attainment", "expected_monthly_usd",
                    "peak_monthly_usd", "most_nodes", "replica_hours", "cold_starts", "cold_start_max_s",
                    "worst_queue_requests", "scale_ups", "scale_downs"):
            typer.echo(f"{key:<30} {data[key]}")
    if out_path is not None:
        err.print(f"[green]wrote[/] {out_path}/plot.svg, plot.png and simulation.md")


def _simulate_batch(bp, *, trace: Optional[Path], out_path: Optional[Path], as_json: bool) -> None:
    """`blueprint simulate` of a batch stack: its day's run replayed (`blueprints.simulate.batch`), the completion
    against the deadline first."""
    from blueprints.simulate.batch import replay_batch, replay_json

    if trace is not None or out_path is not None:
        raise BlueprintError(f"{bp.stack} is a batch service: `blueprint simulate {bp.stack}` replays its daily run "
                             "(--trace and --out are for interactive traffic's simulated day); drop them")
    data = replay_json(replay_batch(bp, requests=bp.batch.requests_per_day), deadline_hours=bp.batch.deadline_hours)
    if as_json:
        typer.echo(json.dumps(data, sort_keys=True))
        return
    typer.echo(f"batch: completes in {data['completion_hours']:.2f} h of {data['deadline_hours']:g} h deadline"
               + ("" if data["within_deadline"] else " (LATE)"))
    for key in ("requests", "replicas", "requests_per_s_per_replica", "start_s", "request_latency_s", "done_by_hour"):
        typer.echo(f"{key:<30} {data[key]}")


@app.command()
def stacks(
    changed: Optional[Path] = typer.Option(None, "--changed", help="File listing changed paths, one per line "
                                           "(`git diff --name-only`): print only the stacks they affect."),
    stacks_dir: Optional[Path] = typer.Option(None, "--stacks-dir", help="Folder of stack configs. Default: the "
                                              "project's (found from the working directory)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of {stack, kind, service, environment, "
                                 "production, policy_config, platform, runs_on, part, review} (for a CI matrix; "
                                 "`review` is what `blueprint preview` takes: a compound service's parts share one)."),
) -> None:
    """List the stack configs, or only those a change affects, in deploy order: platform stacks first (services read
    their outputs), then services. Used by the pull-request and deploy workflows; `runs_on` names the self-hosted
    runner of a private platform and its services."""
    from blueprints.review.stacks import affected_stacks, list_stacks
    from blueprints.core.project import project_paths

    with user_errors():
        project = project_paths(stacks_dir)
        stacks_dir = stacks_dir or project.stacks_dir
        if not stacks_dir.is_dir():
            raise BlueprintError(f"--stacks-dir {stacks_dir}: no such folder; run from the project folder or pass "
                                 "the folder holding Pulumi.<stack>.yaml files")
        refs = list_stacks(stacks_dir, policy_dir=project.policy_dir)
        if changed is not None:
            lines = read_text_file(changed, BlueprintError, "changed-files list").splitlines()
            root = project.root or Path(".")
            relative = stacks_dir.resolve().relative_to(root.resolve()) if project.root and \
                stacks_dir.resolve().is_relative_to(root.resolve()) else stacks_dir
            refs = affected_stacks(lines, refs, stacks_dir=relative.as_posix(), root=root)
        elif not refs:
            err.print(f"no stack configs (Pulumi.<stack>.yaml) in {stacks_dir}; run `blueprint plan` first")
    if as_json:
        typer.echo(json.dumps([r.to_json() for r in refs], separators=(",", ":")))
    else:
        for ref in refs:
            typer.echo(f"{ref.stack}\t{ref.kind}\t{'production' if ref.production else 'non-production'}\t"
                       f"{ref.policy_config}\t{','.join(ref.runs_on)}")


@app.command()
def preflight(
    stack: str = typer.Argument(..., help="Stack name, e.g. chat-assistant-prod or platform-prod-us-east-1; or "
                                "<service>-<env> of a compound service: both parts' needs added up."),
    stacks_dir: Optional[Path] = typer.Option(None, "--stacks-dir", help="Folder of stack configs. Default: the "
                                              "project's (found from the working directory)."),
    offline: bool = typer.Option(False, "--offline", help="Do not call AWS even when credentials are present: print "
                                 "what to check and the commands to request increases."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of {service_code, quota_code, quota_name, "
                                 "region, needed (every stack of the account in that Region together), stack_needed, "
                                 "stacks, account, unit, why, value, source, ok}."),
) -> None:
    """Check the AWS service quotas a stack needs at full scale (EC2 vCPUs per instance family group, SageMaker
    endpoint instances) against the account, with the Service Quotas API when AWS credentials are present. Quotas
    are per account and Region: each is checked against what every stack of the account (its policy config) needs
    in that Region together (`blueprints.review.account`).

    The policy's `maxGpus` is checked against the GPUs those stacks reach together, and, with credentials, whether
    enough of the platform's zones offer the instance type (a zone spread's minDomains; `blueprints.review.zones`).
    Fresh accounts start with 0 vCPUs for G and P instances in most Regions. Exit 0 when every quota holds (or,
    offline, after printing what to check); 1 when a quota is below what the stack needs, the account's GPUs are
    above maxGpus or too few zones offer the type; 2 on bad input.
    """
    from blueprints.review.account import account_gpu_checks, account_needs
    from blueprints.review.zones import zone_checks
    from blueprints.review.compound import part_stacks
    from blueprints.plan.quota import check_quotas
    from blueprints.contracts.stackconfig import read_config, stack_config_path
    from blueprints.core.project import project_paths

    with user_errors():
        folder = stacks_dir or project_paths(stacks_dir).stacks_dir
        parts = part_stacks(stack, folder)
        if parts is None:
            read_config(stack_config_path(folder, stack))  # exit 2 naming a missing or invalid stack config first
        found = account_needs(parts or [stack], folder)
        needs = [a.total for a in found]
        client_for = None if offline else _service_quotas_client_factory()
        checks = check_quotas(needs, client_for) if client_for is not None else []
        policy = account_gpu_checks(parts or [stack], folder)
        ec2_for = _ec2_client_factory() if client_for is not None else None
        zones = zone_checks(parts or [stack], folder, ec2_for) if ec2_for is not None else []
    if as_json:
        rows = [{**a.to_json(), "value": c.value, "source": c.source, "ok": c.ok} for a, c in zip(found, checks)] \
            if checks else [{**a.to_json(), "value": None, "source": "offline", "ok": None} for a in found]
        typer.echo(json.dumps(rows + [c.to_json() for c in policy]
                              + [{"service_code": "zones", **z.to_json()} for z in zones]))
    elif not needs and not policy:
        out.print(f"{stack} needs no service quota we know of (an existing cluster, or an uncatalogued type)")
    else:
        if not checks:
            out.print(f"[bold]{stack}[/]: no AWS credentials (or --offline); check these quotas:")
        for i, a in enumerate(found):
            n = a.total
            shared = (f" — {a.own.needed:g} for {stack}, {n.needed:g} with every stack of the account "
                      f"({a.account}) in {n.region}: {', '.join(a.stacks)}" if len(a.stacks) > len(parts or [stack])
                      else f" — {escape(n.why)}")
            if not checks:
                out.print(f"  {n.service_code} {n.quota_code} ({escape(n.quota_name)}) in {n.region}: needs >= "
                          f"{n.needed:g} {n.unit}{shared}")
                out.print(f"    check:   {n.get_command()}")
                out.print(f"    request: {n.request_command()}")
                continue
            c = checks[i]
            status = "[green]ok[/]" if c.ok else "[red]too low[/]"
            out.print(f"  {status} {n.service_code} {n.quota_code} ({escape(n.quota_name)}) in {n.region}: "
                      f"{c.value:g} {n.unit} ({c.source}), needs >= {n.needed:g}{shared}")
            if not c.ok:
                out.print(f"    request: {n.request_command()}")
    if not as_json:
        for c in policy:  # the policy's GPU cap, per account and Region like the quotas
            status = "[green]ok[/]" if c.ok else "[red]too high[/]"
            out.print(f"  {status} policy gpu-quota in {c.need.region}: {c.need.needed:g} GPUs of maxGpus "
                      f"{c.value:g} ({escape(c.source)}) — {escape(c.need.why)}")
            if not c.ok:
                out.print("    fix: lower these stacks' max_replicas, or raise maxGpus in the policy config")
        for z in zones:  # the node pool's zones must offer the type (`blueprints.review.zones`)
            status = "[green]ok[/]" if z.ok else "[red]too few zones[/]"
            out.print(f"  {status} {z.stack}: {z.instance_type} is offered in {len(z.offered)} of its platform's "
                      f"zones ({', '.join(z.offered) or 'none'} of {', '.join(z.zones)}), needs {z.needed}")
            if not z.ok:
                out.print(f"    fix: choose another instance family (hardware.allowed_instance_families) or a "
                          f"Region whose zones offer it; check: {z.command()}")
        if client_for is None:
            out.print("  zones: which of the platform's zones offer the instance type is read with AWS credentials "
                      "(DescribeInstanceTypeOfferings by zone ID)")
    if any(c.ok is False for c in [*checks, *policy]) or any(not z.ok for z in zones):
        raise typer.Exit(code=1)


@app.command()
def verify(
    stack: str = typer.Argument(..., help="Service stack name, deployed with `pulumi up`, e.g. chat-assistant-prod."),
    outputs_file: Optional[Path] = typer.Option(None, "--outputs", help="The stack's outputs as `pulumi stack output "
                                                "--json --show-secrets --stack <stack>` prints them. Default: ask "
                                                "the Pulumi CLI."),
    kubeconfig: Optional[Path] = typer.Option(None, "--kubeconfig", help="Kubeconfig of the cluster. Default: the "
                                              "platform stack's `kubeconfig` output (runs `aws eks get-token`)."),
    context: Optional[str] = typer.Option(None, "--context", help="Kubeconfig context. Default: its current one."),
    prometheus_url: Optional[str] = typer.Option(None, "--prometheus-url", help="A Prometheus reachable from here "
                                                 "(e.g. through `kubectl port-forward`). Default: the platform's, "
                                                 "through the Kubernetes API server's service proxy."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="Call this URL instead of the `endpoint` output "
                                           "(e.g. a port-forward to the Service, ending in /v1 or /v2)."),
    as_json: bool = typer.Option(False, "--json", help="Print {stack, archetype, ok, checks: [{check, subject, ok, "
                                 "detail}]}."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Also write the report as markdown (a "
                                            "pull-request comment) to this file."),
    stacks_dir: Optional[Path] = typer.Option(None, "--stacks-dir", help="Folder of stack configs. Default: the "
                                              "project's (found from the working directory)."),
) -> None:
    """Check a deployed service stack: the endpoint answers with its API key and refuses without (over TLS where
    planned); every series its scaler and alerts query exists in Prometheus with recent data (the exact queries of
    its manifests); the ScaledObject/HPA is active with a value in its target's unit range; every PrometheusRule is
    loaded and no SLO alert fires; its NodePool's nodes are Ready. SageMaker: InService, alarms OK, signed requests
    answered and unsigned refused.

    Needs the Pulumi CLI logged in to the stack's backend (or --outputs), and cluster access (the platform's
    kubeconfig output, or --kubeconfig) or, for SageMaker, AWS credentials. Exit 0 when every check passes, 1 when
    one fails, 2 when what it needs is missing (the message says what).
    """
    from blueprints.core.project import project_paths
    from blueprints.operate.report import render_markdown, render_terminal
    from blueprints.operate.run import Access, verify_deployed

    with user_errors():
        project = project_paths(stacks_dir)
        with err.status(f"Checking {stack}..."):
            report = verify_deployed(stack, stacks_dir=stacks_dir or project.stacks_dir, program=project.program,
                                     root=project.root, access=Access(outputs_file=outputs_file,
                                                                      kubeconfig=kubeconfig, context=context,
                                                                      prometheus_url=prometheus_url,
                                                                      endpoint=endpoint))
        if markdown is not None:
            try:
                markdown.write_text(render_markdown(report), encoding="utf-8")
            except OSError as exc:
                raise BlueprintError(f"--markdown {markdown}: cannot write it ({exc.strerror})") from None
    if as_json:
        typer.echo(json.dumps(report.to_json()))
    else:
        render_terminal(report, out)
    if not report.ok:
        raise typer.Exit(code=1)


@app.command()
def benchmark(
    stack: str = typer.Argument(..., help="LLM service stack (vllm-gpu or sagemaker-endpoint), e.g. "
                                "chat-assistant-prod."),
    duration: Optional[int] = typer.Option(None, "--duration", metavar="S", help="Seconds each rate runs (10-1800). "
                                           "Default 120."),
    rates: Optional[str] = typer.Option(None, "--rates", metavar="R1,R2,...", help="Requests/s at one replica, "
                                        "comma-separated (1-12 rates, each > 0 and <= 10x the planned per-replica "
                                        "peak). Default: 0.25, 0.5, 0.75, 1, 1.25 and 1.5x the planned per-replica "
                                        "peak."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the Kubernetes objects (or, for SageMaker, the "
                                 "commands) without a cluster, credentials or Pulumi CLI."),
    approximate_workload: bool = typer.Option(False, "--approximate-workload", help="Measure a planned workload the "
                                              "random dataset cannot reproduce (sessions over several replicas "
                                              "without the router) anyway: the result file lists what was "
                                              "approximated and `blueprint calibrate` refuses it. Default: refuse "
                                              "(exit 2)."),
    prompts: Optional[Path] = typer.Option(None, "--prompts", metavar="FILE.jsonl", help="Replay your own prompts "
                                           "instead of the planned random workload: one JSON object per line with "
                                           "`prompt` (a string) or `messages` (chat messages) and `max_tokens` (the "
                                           "output tokens it generates, below the stack's max_model_len); at most "
                                           "100,000 lines of 1 MiB and 64 MiB in all (1 MiB as the client reads them "
                                           "on Kubernetes: a ConfigMap). The content is never printed or recorded: "
                                           "the result file keeps its sha256 and length statistics. Default: the "
                                           "planned workload."),
    outputs_file: Optional[Path] = typer.Option(None, "--outputs", help="The stack's outputs as `pulumi stack output "
                                                "--json --show-secrets` prints them. Default: ask the Pulumi CLI "
                                                "(a dry run: the preview's stand-ins)."),
    kubeconfig: Optional[Path] = typer.Option(None, "--kubeconfig", help="Kubeconfig of the cluster. Default: the "
                                              "platform stack's `kubeconfig` output."),
    context: Optional[str] = typer.Option(None, "--context", help="Kubeconfig context. Default: its current one."),
    stacks_dir: Optional[Path] = typer.Option(None, "--stacks-dir", help="Folder of stack configs. Default: the "
                                              "project's (found from the working directory)."),
) -> None:
    """Run the planned workload against one replica of a deployed LLM stack with `vllm bench serve` (from the image
    the stack pins): the planned prompt and output lengths and prompt reuse (random dataset; the planned cached
    tokens, shared prefix and sessions' history, as a prefix every prompt shares), a sweep of request rates up to
    and past the planned per-replica peak, goodput against the SLO; write the client's JSON, the settings and image
    versions to benchmarks/results/<stack>/<date>.json (the file `blueprint calibrate` reads).

    vllm-gpu: a Kubernetes Job in the service's namespace on the system nodes, sending to one Ready serving pod's
    authenticating proxy. SageMaker: the client in Docker on this machine through a SigV4 signing proxy on loopback.
    Every run is bounded in requests and time; the Job and its NetworkPolicies are deleted afterwards. Exit 2 on bad
    flags, a stack that is not an LLM stack, a planned workload the random dataset cannot reproduce (without
    --approximate-workload), or missing access.
    """
    import yaml

    from blueprints.core.project import project_paths
    from blueprints.operate.benchmark import printable
    from blueprints.operate.run import (
        Access, parse_rates, prepare_benchmark, run_kubernetes_benchmark, run_sagemaker_benchmark,
    )

    with user_errors():
        project = project_paths(stacks_dir)
        access = Access(outputs_file=outputs_file, kubeconfig=kubeconfig, context=context)
        now = dt.datetime.now(dt.timezone.utc)
        with err.status(f"Preparing the benchmark of {stack}..."):
            run, api = prepare_benchmark(stack, stacks_dir=stacks_dir or project.stacks_dir, program=project.program,
                                         root=project.root, access=access, rates=parse_rates(rates),
                                         duration_s=duration, dry_run=dry_run, now=now,
                                         approximate=approximate_workload, prompts=prompts)
        settings = run.settings
        err.print(f"{stack}: {len(settings.rates)} run(s) of {settings.duration_s} s at "
                  f"{', '.join(f'{r:g}' for r in settings.rates)} requests/s per replica (planned peak "
                  f"{settings.per_replica_peak_rps:g}); {settings.sent}; {settings.total_requests:,} "
                  "requests in all", highlight=False)
        for note in settings.notes:
            err.print(f"[yellow]note[/]: {escape(note)}", highlight=False)
        for what in settings.approximations:
            err.print(f"[yellow]approximate workload[/] (`blueprint calibrate` will refuse the result): "
                      f"{escape(what)}", highlight=False)
        if dry_run:
            if outputs_file is None:
                err.print("dry run: deploy-time names (the model store bucket) are the offline preview's stand-ins; "
                          "--outputs gives the deployed stack's", highlight=False)
            if run.manifests:
                plain = json.loads(json.dumps(printable(run.manifests)))  # no shared objects: no YAML anchors
                typer.echo(yaml.safe_dump_all(plain, sort_keys=False, width=120), nl=False)
            else:
                err.print("through the signing proxy (blueprints/operate/sagemaker.py) on 127.0.0.1:<proxy-port>:")
                for command in run.commands:
                    typer.echo(" ".join(command))
            return
        root = project.root or Path(".")
        if run.manifests:
            run = run_kubernetes_benchmark(run, api, root=root, log=lambda m: err.print(escape(m)),
                                           today=now.date())
        else:
            run = run_sagemaker_benchmark(run, stack=stack, root=root, access=access,
                                          log=lambda m: err.print(escape(m)), today=now.date())
    assert run.result is not None
    for r in run.result.runs:
        out.print(f"  {r.request_rate:g} req/s asked: {r.request_throughput:.3g} done, goodput "
                  f"{r.request_goodput if r.request_goodput is not None else float('nan'):.3g}; TTFT p95 "
                  f"{r.percentile_ms('ttft', 95) or float('nan'):.0f} ms, ITL p95 "
                  f"{r.percentile_ms('itl', 95) or float('nan'):.1f} ms; {r.failed} failed", highlight=False)
    cold = run.result.cold_start
    if cold is not None:
        out.print(f"  cold start of {cold.pod}: {cold.total_s:g} s to Ready; " + ", ".join(
            f"{part.removesuffix('_s')} {seconds:g} s" for part, seconds in cold.measured_parts().items()),
            highlight=False)
    scaled = run.result.autoscaling
    if scaled is not None:
        out.print(f"  autoscaling ({scaled.min_replicas}-{scaled.max_replicas} replicas): at most "
                  f"{scaled.most_desired} asked for over {len(scaled.samples)} sample(s)", highlight=False)
    err.print(f"[green]wrote[/] {run.path}")


@app.command()
def calibrate(
    results: list[Path] = typer.Argument(..., metavar="RESULT.json", help="Result files: `blueprint benchmark`'s "
                                         "(benchmarks/results/<stack>/<date>.json) or the JSON of `vllm bench serve "
                                         "--save-result` (vLLM 0.24.0; not for a stack planned with a shared prefix "
                                         "or sessions: it does not record the prefix it sent), 1-20, each run once."),
    stack: str = typer.Option(..., "--stack", help="The vllm-gpu stack the results measured, e.g. "
                              "chat-assistant-prod: its stack config gives the model, GPU, engine and flags."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Write the calibration to this folder instead of "
                                           "the project's stacks/calibration/ (required for constructed data)."),
    constructed: bool = typer.Option(False, "--constructed", help="The files are constructed, not measured (test "
                                     "data); the calibration says so and stays out of stacks/calibration/."),
    stacks_dir: Optional[Path] = typer.Option(None, "--stacks-dir", help="Folder of stack configs. Default: the "
                                              "project's (found from the working directory)."),
    accept_shift: bool = typer.Option(False, "--accept-shift", help="Write a fit that moves a production stack's "
                                      "capacity beyond its plan's band (refused otherwise): a reviewed decision the "
                                      "calibration records and the next review shows first."),
) -> None:
    """Fit the capacity model's corrections (a factor on step time and one on the TTFT floor) to a deployed stack's
    benchmark runs, by replaying each run through the replica model the planner sizes with, and write them with
    their provenance to stacks/calibration/<model>-<gpu>-<engine>-tp<N>-<precision>.yaml. The next `blueprint plan`
    of any service with that model, GPU, engine image, tensor parallel degree and precision sizes on the corrected
    model and says so; a result file with the measured pod's cold start (`blueprint benchmark` records it) also
    corrects the startup model part by part, and the next plan's cold start, probes, deadlines, cooldowns and warm
    floor follow it. Exit 2, writing nothing, on a file of another model, GPU or engine image, or of another workload
    than the stack is planned with (prefix, lengths, range ratio: benchmark with `blueprint benchmark`), or measured
    with --approximate-workload; a run with over 1 % failed or under 20 completed requests, dated after today, or
    given twice; a fit at a bound of a factor's range or leaving over 25 % median error; a fit that moves a
    production stack's capacity beyond its plan's band, unless --accept-shift; a cold-start part outside 0.2-5x the
    model's; or a bad field (the message names file, field and fix).
    """
    from blueprints.contracts.stackconfig import read_stack_config, stack_config_path
    from blueprints.core.project import project_paths
    from blueprints.operate.calibrate import calibrate as fit_calibration
    from blueprints.contracts.calibration_file import calibration_dir

    with user_errors():
        project = project_paths(stacks_dir)
        folder = stacks_dir or project.stacks_dir
        bp = read_stack_config(stack_config_path(folder, stack))
        with err.status(f"Fitting {stack}'s runs..."):
            done = fit_calibration(bp, results, project_root=project.root, stacks_dir=folder, out_dir=out_dir,
                                   constructed=constructed, accept_shift=accept_shift)
    f = done.file
    for source in f.sources:
        out.print(f"  {source.file}: {source.runs_used} run(s) fitted" + ("" if source.measured else
                                                                          " (constructed, not measured)"),
                  highlight=False)
        for why in source.left_out:
            out.print(f"    {escape(why)}", highlight=False)
    out.print(f"step time x{f.step_time:g}, TTFT floor x{f.ttft_floor:g}; residual error median "
              f"{f.residual_before.median:.0%} -> {f.residual_after.median:.0%}, max {f.residual_before.max:.0%} -> "
              f"{f.residual_after.max:.0%}", highlight=False)
    if f.unpinned:
        err.print("[yellow]note[/]: the runs do not pin the TTFT floor (x1.25 on it moves their median TTFTs by under "
                  "3 %: prefill, not the frontend, makes their first tokens), so it stays x1; a run at a low rate "
                  "with short prompts would pin it", highlight=False)
    if f.accepted_shift is not None:
        err.print(f"[yellow]shift[/]: {f.accepted_shift.words()}", highlight=False)
    if f.startup is not None:
        out.print(f"cold start: {f.startup.words()}; "
                  + ", ".join(f"{p.part.removesuffix('_s')} {p.predicted_s} -> {p.measured_s:g} s (x{p.factor:g}, "
                              f"{p.samples} sample(s))" for p in f.startup.parts), highlight=False)
    if f.key.engine_image != defaults.VLLM_IMAGE:
        err.print(f"[yellow]note[/]: the runs measured {f.key.engine_image}; plans pin {defaults.VLLM_IMAGE}, so "
                  "this calibration applies once they pin that image again", highlight=False)
    what = (f"{f.key.model} on {f.key.gpu} (tensor_parallel_size={f.key.tensor_parallel_size}, "
            f"{f.key.precision.value}, {f.key.engine_image})")
    if done.path.parent.resolve() == calibration_dir(folder).resolve():
        err.print(f"[green]wrote[/] {done.path}; `blueprint plan` now sizes {what} with it", highlight=False)
    else:
        err.print(f"[green]wrote[/] {done.path}; `blueprint plan` reads {calibration_dir(folder)} only, so plans of "
                  f"{what} use it once it is there (constructed data never belongs there)", highlight=False)


@app.command()
def choose(
    service: str = typer.Argument(..., help="The service whose pilots were benchmarked, e.g. chat-assistant."),
    results: list[Path] = typer.Argument(..., metavar="RESULT...", help="`blueprint benchmark` result files of its "
                                         "pilot stacks (benchmarks/results/<service>-pilot-<k>/<date>.json), one or "
                                         "more per finalist, at least two finalists."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Also write choice.md (the table, the chart and the "
                                           "evidence, for the pull request), choice.png and choice.svg there."),
    requirements: Optional[Path] = typer.Option(None, "--requirements", help="The requirements file to write "
                                                "`choice:` into. Default: the one the pilots were planned from "
                                                "(their stack configs' servingblueprints:planned)."),
) -> None:
    """Compare the finalists' measurements on what the plan decides with, choose the cheapest meeting the SLO, and
    write it with its evidence into the requirements file (`choice:`), which the next `blueprint plan` keeps.

    Per finalist: goodput at the SLO per replica (the highest measured rate whose TTFT and ITL p95 meet the targets,
    failures <= 1 %), the fleet it implies at the reference environment's planned peak and its monthly cost (the
    planner's arithmetic and the catalog's prices), cost per 1M tokens (input/output/total) and per 1k requests,
    p50/p95/p99 TTFT and ITL at the planned load per replica, cold start. A vLLM finalist's runs are also fitted as
    `blueprint calibrate` fits them (stacks/calibration/; refused for constructed data, and said). Every other byte
    of the requirements file is kept. Exit 2 (naming the file and the field, writing nothing) on a file that is not a
    result file, a result of another workload, model, image or replica than its pilot's, a result older than its
    pilot stack config, an expired pilot, results of fewer than two finalists, or a finalist with more than 1 % of
    its requests failed (the table is printed first, marking it failed).
    """
    from blueprints.catalog import load_catalog
    from blueprints.contracts.stackconfig import read_stack_config, stack_config_path
    from blueprints.core.errors import ChoiceError
    from blueprints.core.project import project_paths
    from blueprints.operate.choice_report import table, write_report
    from blueprints.operate.choose import calibrate_finalists, compare, read_finalists, write_choice
    from blueprints.plan.builders.context import PlanContext
    from blueprints.plan.selection import reference_environment
    from blueprints.workspace import planning_inputs, project_calibrations

    with user_errors():
        project = project_paths(requirements)
        stacks_dir = project.stacks_dir
        _recover_writes(stacks_dir)
        now = dt.datetime.now(dt.timezone.utc)  # the CLI's clock read: expiry and the choice's date
        finalists = read_finalists(service, results, stacks_dir=stacks_dir, root=project.root, now=now)
        path = requirements if requirements is not None else (project.root or Path(".")) / finalists[0].requirements
        inputs = planning_inputs(path, as_of=now.date(), policy_dir=project.policy_dir if project.root else None,
                                 requirements_dir=project.requirements_dir if project.root else None,
                                 stacks_dir=stacks_dir)
        req = inputs.requirements
        if req.service != service:
            raise ChoiceError(f"{path}: service: {req.service!r}, not {service!r}; pass --requirements of {service}")
        env = reference_environment(req)
        production = read_stack_config(stack_config_path(stacks_dir, f"{service}-{env}"))
        ctx = PlanContext(as_of=now.date(), platforms=inputs.platforms, guardrails=inputs.guardrails,
                          calibrations=project_calibrations(path))
        catalog = load_catalog()

        def compared(calibrations=None):
            return compare(req, finalists, production=production, catalog=catalog, ctx=ctx, today=now.date(),
                           calibrations=calibrations)

        comparison = compared()
        if comparison.choice is not None:
            written, notes = calibrate_finalists(finalists, project_root=project.root, stacks_dir=stacks_dir,
                                                 today=now.date())
            comparison = compared(written)
            comparison.notes = notes
            write_choice(path, comparison.choice)
        reports = write_report(comparison, service, out_dir) if out_dir is not None else []
    out.print(table(comparison, service))
    for note in comparison.notes:
        err.print(f"[yellow]note[/]: {escape(note)}", highlight=False, soft_wrap=True)
    for report in reports:
        err.print(f"[green]wrote[/] {report}", highlight=False)
    if comparison.choice is None:
        with user_errors():
            raise ChoiceError(comparison.refusal or "nothing chosen")
    [chosen] = [f for f in comparison.finalists if f.verdict == "chosen"]
    err.print(f"[green]chose[/] {chosen.stack}: {chosen.candidate.words()}; wrote `choice:` into {path} (the next "
              f"`blueprint plan {path}` keeps it while its evidence holds)", highlight=False, soft_wrap=True)


def _ec2_client_factory():
    """region -> a boto3 EC2 client, or None when boto3 finds no AWS credentials."""
    import boto3

    session = boto3.Session()
    if session.get_credentials() is None:
        return None
    return lambda region: session.client("ec2", region_name=region)


def _service_quotas_client_factory():
    """region -> a boto3 Service Quotas client, or None when boto3 finds no AWS credentials."""
    import boto3

    session = boto3.Session()
    if session.get_credentials() is None:
        return None
    return lambda region: session.client("service-quotas", region_name=region)


class Endpoint(str, Enum):
    """The OpenAI API an estimate's requests call."""

    COMPLETIONS = "completions"
    CHAT = "chat"


class ServingEngine(str, Enum):
    """The LLM serving engines (blueprints/catalog/engines.yaml)."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TENSORRT_LLM = "tensorrt-llm"


class KvCacheDtype(str, Enum):
    """vLLM's --kv-cache-dtype choices the model knows."""

    AUTO = "auto"
    FP8 = "fp8"


#: Bounds of estimate's numeric flags (a what-if should not run for minutes on a typo).
MAX_ARRIVAL_RATE = 1000.0
MAX_ESTIMATE_CONCURRENCY = 4096
#: Most requests `estimate --burst` / `--num-prompts` simulates (a benchmark's run of N prompts).
MAX_ESTIMATE_BURST = 100_000
MAX_ESTIMATE_TOKENS = 1_048_576


@app.command()
def estimate(
    model: Optional[str] = typer.Option(None, "--model", help="Catalog model id, e.g. llama-3.1-8b. Or use "
                                        "--requirements or --architecture."),
    precision: Optional[Precision] = typer.Option(None, "--precision", help="Weight precision. Default bf16 (or the "
                                                  "requirements' model.precision)."),
    quantization: Optional[Quantization] = typer.Option(None, "--quantization", help="How the quantised checkpoint "
                                                        "was made (awq, gptq, fp8, w8a8). Default: what --precision "
                                                        "implies (int4 awq, int8 gptq)."),
    gpu: str = typer.Option(..., "--gpu", help="GPU: t4, a10g, l4, l40s, a100-40gb, a100-80gb, h100, h200, "
                             "b200, b300, rtx-pro-6000."),
    tensor_parallel: int = typer.Option(1, "--tensor-parallel", min=1, max=64, help="GPUs per replica. Default 1."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, max=MAX_ESTIMATE_CONCURRENCY,
                                              help="Closed loop: clients each keeping one request in flight, 1-4096. "
                                              "The default experiment, at 1 client."),
    burst: Optional[int] = typer.Option(None, "--burst", min=1, max=MAX_ESTIMATE_BURST,
                                        help="Burst: this many requests sent at once, 1-100,000 (`vllm bench serve "
                                        "--request-rate inf --num-prompts N`); every one measured, throughput over "
                                        "the makespan."),
    max_concurrency: Optional[int] = typer.Option(None, "--max-concurrency", min=1, max=MAX_ESTIMATE_BURST,
                                                  help="With --burst: at most this many in flight, the next sent as "
                                                  "one completes (`--max-concurrency`); at most the burst."),
    num_prompts: Optional[int] = typer.Option(None, "--num-prompts", min=1, max=MAX_ESTIMATE_BURST,
                                              help="With --arrival-rate: a benchmark's run of this many requests "
                                              "(Poisson arrivals, the given lengths, every request measured) instead "
                                              "of the planner's run."),
    input_tokens: Optional[int] = typer.Option(None, "--input-tokens", min=1, max=MAX_ESTIMATE_TOKENS,
                                               help="Mean prompt length, tokens. Default 512 (or the requirements' "
                                               "traffic.mean_input_tokens)."),
    output_tokens: Optional[int] = typer.Option(None, "--output-tokens", min=1, max=MAX_ESTIMATE_TOKENS,
                                                help="Mean output length, tokens. Default 256 (or the requirements')."),
    requirements: Optional[Path] = typer.Option(None, "--requirements", help="A requirements file: estimate its "
                                                "model (catalog id or architecture), precision, context and traffic "
                                                "lengths; flags given override it."),
    architecture: Optional[Path] = typer.Option(None, "--architecture", help="A YAML file with a model shape "
                                                "(params_b, layers, hidden_size, attention_heads, kv_heads, head_dim; "
                                                "optional vocab_size and MoE fields) for a model outside the catalog."),
    kv_cache_dtype: KvCacheDtype = typer.Option(KvCacheDtype.AUTO, "--kv-cache-dtype", help="KV cache: auto "
                                                "(16-bit) or fp8 (GPUs with FP8: l4, l40s, h100, h200, b200, b300, "
                                                "rtx-pro-6000). Default auto."),
    max_model_len: Optional[int] = typer.Option(None, "--max-model-len", min=1, max=MAX_ESTIMATE_TOKENS,
                                                help="Longest sequence one request may reach, tokens (>= input + "
                                                "output, <= the model's context). Default input + output (or the "
                                                "requirements' max_context_tokens)."),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", min=1, max=MAX_ESTIMATE_CONCURRENCY,
                                               help="vLLM --max-num-seqs: caps max_concurrency and the running "
                                               "requests. Default: vLLM's default for the GPU, no cap on "
                                               "max_concurrency."),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens", min=1,
                                                         max=MAX_ESTIMATE_TOKENS,
                                                         help="vLLM --max-num-batched-tokens: tokens one step "
                                                         "computes at most (>= --max-num-seqs). Default: vLLM's "
                                                         "default for the GPU (8192 on H100/H200, else 2048)."),
    endpoint: Optional[Endpoint] = typer.Option(None, "--endpoint",
                                           help="The API the requests call: completions (/v1/completions, `vllm "
                                           "bench serve`'s default) or chat (/v1/chat/completions: the server renders "
                                           "the chat template, which adds to every TTFT). Default completions (or "
                                           "the requirements' traffic.api)."),
    gpu_memory_utilization: Optional[float] = typer.Option(None, "--gpu-memory-utilization", min=0.1, max=1.0,
                                                           help="vLLM --gpu-memory-utilization, 0.1-1. Default 0.9 "
                                                           "(what the planner sets)."),
    engine: ServingEngine = typer.Option(ServingEngine.VLLM, "--engine", help="The serving engine: its scheduling "
                                         "profile, measured step tables and band (sglang and tensorrt-llm only on "
                                         "GPUs with their measured tables; the memory share defaults to the "
                                         "engine's own). Default vllm."),
    arrival_rate: Optional[float] = typer.Option(None, "--arrival-rate", min=0.0, max=MAX_ARRIVAL_RATE,
                                                 help="Open loop: requests/s arriving at this one replica (above 0; "
                                                 "0 exits 2), simulated as the planner simulates a candidate: "
                                                 "adds ttft_p50_ms, ttft_p95_ms, itl_p50_ms, itl_p95_ms and "
                                                 "e2e_p95_ms."),
    as_json: bool = typer.Option(False, "--json", help="Print {fits, weights_gib, kv_cache_tokens, max_concurrency, "
                                 "capacity_source, regime, ttft_ms, itl_ms, tpot_ms, output_tokens_per_s, "
                                 "requests_per_s} (+ the --arrival-rate percentiles, + makespan_s of a --burst, + "
                                 "min_tensor_parallel when it does not fit)."),
) -> None:
    """What-if: memory fit, KV cache, TTFT, ITL and throughput of one vLLM replica (the planner's capacity model).

    One experiment, as benchmarks run them: a closed loop at --concurrency (the default: every client sends a
    request at once and its next one when the last completes; means after warm-up), a --burst of N requests sent at
    once (optionally --max-concurrency C; every request measured, throughput over the makespan: what `vllm bench
    serve --request-rate inf` prints), or an open loop at --arrival-rate (the planner's run; with --num-prompts a
    benchmark's run). `ttft_ms`, `itl_ms`, `tpot_ms`, `output_tokens_per_s` and `requests_per_s` are that
    experiment's means. With a plan's engine settings (--max-num-seqs, --max-num-batched-tokens, --max-model-len)
    and its per-replica peak as --arrival-rate, the percentiles are the plan's predictions. The replica does not fit
    when its KV cache cannot hold one request at --max-model-len: the figures are then null and `min_tensor_parallel`
    names the smallest degree that fits (null if none within one node). Exit 2 on an unknown model or GPU, a
    tensor-parallel degree vLLM cannot shard the model over, or inconsistent flags (two experiments at once,
    --max-concurrency above the burst or without one, --num-prompts without --arrival-rate).
    """
    from blueprints.contracts.memory import tensor_parallel_problems
    from blueprints.capacity.measured import covered_gpus
    from blueprints.capacity.physics import default_batch_limits, engine_profile, planned_memory_utilization
    from blueprints.capacity.whatif import WhatIf
    from blueprints.catalog.engines import engine_facts
    from blueprints.contracts.memory import weights_gib
    from blueprints.capacity.whatif import estimate as run_estimate
    from blueprints.catalog import load_catalog
    from blueprints.core.errors import SizingError

    with user_errors():
        catalog = load_catalog()
        g = catalog.gpu(gpu)
        arch, limit, context_default, traffic, spec_precision, spec_quant = _estimate_model(model, requirements,
                                                                                            architecture, catalog)
        inp = input_tokens or (traffic.mean_input_tokens if traffic else 512)
        out = output_tokens or (traffic.mean_output_tokens if traffic else 256)
        prec = precision or spec_precision or Precision.BF16
        quant = quantization or (spec_quant if precision in (None, spec_precision) else None)
        if quant is not None and prec not in quant.precisions:
            raise SizingError(f"--quantization {quant.value} comes with --precision "
                              f"{' or '.join(p.value for p in quant.precisions)}, not {prec.value}")
        problems = tensor_parallel_problems(arch, tensor_parallel)
        node_gpus = max((i.gpu_count for i in catalog.ec2.values() if i.gpu == gpu), default=0)
        if node_gpus and tensor_parallel > node_gpus:
            problems.append(f"tensor parallel stays within one node, and the largest {gpu} node has {node_gpus} GPUs")
        if problems:
            raise SizingError(f"--tensor-parallel {tensor_parallel} for {_what(model, requirements, architecture)}: "
                              f"{'; '.join(problems)}")
        context = max_model_len or context_default
        if inp + out > (limit or MAX_ESTIMATE_TOKENS):
            raise SizingError(f"--input-tokens {inp} + --output-tokens {out} exceed "
                              f"{_what(model, requirements, architecture)}'s context of {limit} tokens")
        if context is not None and not inp + out <= context <= (limit or MAX_ESTIMATE_TOKENS):
            raise SizingError(f"--max-model-len {context} must hold one mean request (input + output = {inp + out}) "
                              f"and stay within the model's context ({limit or MAX_ESTIMATE_TOKENS} tokens); pass a "
                              "value between them")
        if kv_cache_dtype is KvCacheDtype.FP8 and not g.supports_fp8:
            fp8_gpus = ", ".join(n for n, c in catalog.gpus.items() if c.supports_fp8)
            raise SizingError(f"--kv-cache-dtype fp8: {g.model} has no FP8 support (compute capability "
                              f"{g.compute_capability:g} < 8.9), so the planner never runs an FP8 KV cache on it; use "
                              f"auto, or an FP8 GPU ({fp8_gpus})")
        seqs = max_num_seqs or default_batch_limits(g, engine_profile(engine_facts(engine.value).profile))[1]
        if max_num_batched_tokens is not None and max_num_batched_tokens < seqs:
            raise SizingError(f"--max-num-batched-tokens {max_num_batched_tokens} is below max_num_seqs {seqs}"
                              f"{'' if max_num_seqs else ' (vLLM default for the GPU)'}: vLLM refuses to start "
                              "(config/scheduler.py, v0.24.0: max_num_batched_tokens must be >= max_num_seqs); raise "
                              "it or lower --max-num-seqs")
        if arrival_rate is not None and arrival_rate <= 0:
            raise SizingError(f"--arrival-rate {arrival_rate:g}: give a rate above 0 requests/s (at most "
                              f"{MAX_ARRIVAL_RATE:g})")
        _one_experiment(concurrency, burst, max_concurrency, arrival_rate, num_prompts)
        profile = engine_profile(engine_facts(engine.value).profile)
        if engine is not ServingEngine.VLLM and gpu not in covered_gpus(engine.value):
            raise SizingError(f"--engine {engine.value} on --gpu {gpu}: no measured {engine_facts(engine.value).display} "
                              f"kernel tables for it (the roofline is fitted on vLLM's points only); use one of "
                              f"{', '.join(covered_gpus(engine.value))}, or --engine vllm")
        memory = gpu_memory_utilization or planned_memory_utilization(
            profile, g, weights_gib_per_gpu=weights_gib(arch, prec) / tensor_parallel,
            tensor_parallel_size=tensor_parallel)[1]
        question = WhatIf(
            arch=arch, gpu=g, node_gpus=node_gpus or tensor_parallel, precision=prec, quantization=quant,
            tensor_parallel_size=tensor_parallel, concurrency=concurrency or 1, input_tokens=inp, output_tokens=out,
            input_tokens_p95=traffic.input_tokens_p95 if traffic and input_tokens is None else None,
            output_tokens_p95=traffic.output_tokens_p95 if traffic and output_tokens is None else None,
            max_model_len=context or inp + out, kv_cache_fp8=kv_cache_dtype is KvCacheDtype.FP8,
            max_num_seqs=max_num_seqs, arrival_rate=arrival_rate,
            pattern=traffic.pattern.value if traffic else "steady", max_num_batched_tokens=max_num_batched_tokens,
            gpu_memory_utilization=memory, burst=burst,
            max_concurrency=max_concurrency, num_prompts=num_prompts,
            chat=(endpoint.value if endpoint else (traffic.api if traffic else "completions")) == "chat",
            engine=engine.value)
        result, run = run_estimate(question)
    if result["capacity_source"].startswith("roofline"):
        err.print(f"[yellow]warning[/]: {result['capacity_source']}: the step times are the bandwidth/FLOPs roofline's, "
                  "whose cross-validated band is wider (`uncertainty`)", highlight=False)
    if run is not None and not run.stable:
        err.print(f"--arrival-rate {arrival_rate:g}: more than this replica can serve; the queue grows without bound, "
                  "so the percentiles describe an overloaded replica until the simulation stopped (add replicas or "
                  "lower the rate)")
    if as_json:
        typer.echo(json.dumps(result))
        return
    for key, value in result.items():
        if key == "uncertainty":  # the band of each prediction: low - high
            typer.echo("uncertainty          (where the measured value lies if the model is off by its p75 error)")
            for name, (low, high) in value.items():
                typer.echo(f"{'  ' + name:<20} {low:g} - {high:g}")
        else:
            typer.echo(f"{key:<20} {value}")


def _one_experiment(concurrency: int | None, burst: int | None, max_concurrency: int | None,
                    arrival_rate: float | None, num_prompts: int | None) -> None:
    """Refuse (SizingError, exit 2) flags that ask for two experiments at once or qualify one not asked for."""
    from blueprints.core.errors import SizingError

    given = [flag for flag, value in (("--concurrency", concurrency), ("--burst", burst),
                                      ("--arrival-rate", arrival_rate)) if value is not None]
    if len(given) > 1:
        raise SizingError(f"{' and '.join(given)}: one experiment at a time: a closed loop (--concurrency), a burst "
                          "(--burst N [--max-concurrency C]) or an open loop (--arrival-rate R [--num-prompts N])")
    if max_concurrency is not None and burst is None:
        raise SizingError(f"--max-concurrency {max_concurrency} caps a burst's requests in flight: give --burst N "
                          "too (a closed loop's clients are --concurrency)")
    if max_concurrency is not None and burst is not None and max_concurrency > burst:
        raise SizingError(f"--max-concurrency {max_concurrency} is above --burst {burst}: at most the burst's "
                          "requests can be in flight; lower it or leave it out")
    if num_prompts is not None and arrival_rate is None:
        raise SizingError(f"--num-prompts {num_prompts} sets an open loop's requests: give --arrival-rate R too (a "
                          "burst's requests are --burst N)")


def _what(model: str | None, requirements: Path | None, architecture: Path | None) -> str:
    return model or (str(requirements) if requirements else str(architecture))


def _estimate_model(model: str | None, requirements: Path | None, architecture: Path | None, catalog):
    """(architecture, context limit or None, max_model_len default or None, traffic or None, precision or None,
    quantization or None) from exactly one of --model, --requirements, --architecture."""
    import yaml

    from blueprints.catalog import Architecture
    from blueprints.core.errors import RequirementsError, SizingError, format_validation_error
    from blueprints.plan.options.search import resolve_models
    from blueprints.requirements.service import load_requirements
    from blueprints.core.yamlio import load_yaml

    given = [name for name, value in (("--model", model), ("--requirements", requirements),
                                      ("--architecture", architecture)) if value is not None]
    if len(given) != 1:
        raise SizingError(f"give exactly one of --model, --requirements or --architecture (got "
                          f"{', '.join(given) or 'none'})")
    if model is not None:
        record = catalog.model(model)
        if not record.task.generative:
            raise SizingError(f"--model {model} is a {record.task.value} model; estimate models text generation "
                              "(vLLM) only")
        return record.architecture, record.max_context_tokens, None, None, None, None
    if requirements is not None:
        req = load_requirements(requirements)
        if req.model is None:
            raise RequirementsError(f"{requirements}: estimate takes a requirements file with one `model`; this one "
                                    "lists `models`")
        try:
            [resolved] = resolve_models(req, catalog)
        except BlueprintError as exc:
            raise type(exc)(f"{requirements}: {exc}") from None
        if not resolved.task.generative:
            raise SizingError(f"{requirements}: model {resolved.spec.served_name} is a {resolved.task.value} model; "
                              "estimate models text generation (vLLM) only")
        limit = catalog.model(req.model.id).max_context_tokens if req.model.id else None
        return (resolved.architecture, limit, resolved.max_context_tokens, resolved.traffic, req.model.precision,
                req.model.quantization_method)
    text = read_text_file(architecture, SizingError, "architecture file")  # type: ignore[arg-type]
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise SizingError(f"{architecture}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if isinstance(data, dict) and isinstance(data.get("architecture"), dict):
        data = data["architecture"]
    if not isinstance(data, dict):
        raise SizingError(f"{architecture}: expected a mapping of architecture fields (params_b, layers, hidden_size, "
                          "attention_heads, kv_heads, head_dim)")
    try:
        return Architecture.model_validate(data), None, None, None, None, None
    except ValidationError as exc:
        raise SizingError(format_validation_error(exc, source=architecture, data=data)) from None  # type: ignore[arg-type]


@app.command()
def schema(
    out_file: Optional[Path] = typer.Option(None, "--out", help="Write to this file instead of stdout."),
    platform: bool = typer.Option(False, "--platform", help="The platform team's platform.yaml instead of a "
                                  "service's requirements file."),
) -> None:
    """Print the requirements file's JSON Schema, or platform.yaml's with --platform (for editor validation, e.g.
    yaml-language-server)."""
    from blueprints.requirements.platform_file import platform_json_schema
    from blueprints.requirements.service import requirements_json_schema

    text = json.dumps(platform_json_schema() if platform else requirements_json_schema(), indent=2,
                      sort_keys=True) + "\n"
    if out_file is None:
        typer.echo(text, nl=False)
    else:
        with user_errors():
            if out_file.suffix != ".json":
                raise BlueprintError(f"--out {out_file}: the schema is JSON; name a .json file (this guards "
                                     "requirements files against being overwritten)")
            try:
                out_file.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise BlueprintError(f"{out_file}: cannot write ({exc.strerror})") from None
        err.print(f"[green]wrote[/] {out_file}")


if __name__ == "__main__":
    app()
