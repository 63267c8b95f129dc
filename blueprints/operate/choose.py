"""`blueprint choose <service> RESULT...`: compare the pilots' measurements on what the plan decides with, and choose.

Each RESULT is a `blueprint benchmark` result file (`blueprints.contracts.benchmark_result`) of a pilot stack of the
service (`<service>-pilot-<k>`, `blueprint pilot`); a finalist is one pilot, measured by one or more files. Per
finalist:

- goodput at the SLO per replica: the highest measured rate of its sweep (ascending, up to the first that misses)
  whose TTFT and ITL p95 meet `slo.ttft_p95_ms` and `slo.itl_p95_ms` and whose failures are at most 1 %
  (`MAX_FAILED_SHARE`, as `blueprint calibrate` fits), requests/s completed over the replicas measured;
- the fleet that goodput implies at the planned peak of the reference environment (the busiest production one, the
  environment the plan and the pilots compare costs on), with the planner's own arithmetic and prices
  (`blueprints.plan.choice.measured_fleet`), and its unit costs as the plan prices its provisioned fleet
  (`blueprints.plan.unit_costs`: the production stack config's planned requests per month);
- p50/p95/p99 TTFT and ITL of the run at the planned load per replica (the lowest measured rate at or above the
  peak over that fleet, else the highest), and the measured pod's cold start.

The cheapest finalist meeting the SLO is chosen (cost per 1M tokens follows the monthly cost at the same traffic).

Refused (ChoiceError, exit 2, naming the file and the field): a file that is not a result file; a result of a stack
that is not a pilot of the service; a workload other than the pilot's (served model, prefix, lengths, range ratio,
engine image, instance type, tensor parallel degree: `blueprints.operate.workload.planned_workload`); a result dated
before its pilot stack config was written (`servingblueprints:planned.as_of`); finalists measured on different
requests (the planned random workload on one, the user's prompts on another, or two different prompts files:
`settings.prompts.sha256`); an expired pilot (`pilot.expires` before now); results of fewer than two finalists; a finalist with more than 1 % of its requests failed (reported as
failed first, never chosen).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from blueprints.catalog import Catalog
from blueprints.contracts.benchmark_result import BenchmarkResultFile, VllmBenchRun, load_result
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import PILOT_EXPIRES_FORMAT, Archetype
from blueprints.contracts.stackconfig import plan_record_of, read_stack_config, stack_config_path
from blueprints.core.errors import (
    BenchmarkError, CalibrationError, ChoiceError, RequirementsError, StackConfigError, read_text_file,
)
from blueprints.core.yamlio import load_yaml
from blueprints.operate.calibrate import MAX_FAILED_SHARE, calibrate
from blueprints.operate.workload import planned_workload, workload_mismatch
from blueprints.plan.builders.context import PlanContext
from blueprints.plan.choice import measured_fleet
from blueprints.plan.selection import reference_environment
from blueprints.plan.stability import Hardware, hardware_of
from blueprints.plan.unit_costs import unit_costs
from blueprints.requirements.choice import (
    MAX_CHOICE_FINALISTS, MAX_CHOICE_RESULTS, Choice, ChoiceBasis, ChosenCandidate, LatencyPercentiles,
    MeasuredFinalist, ResultEvidence, with_choice,
)
from blueprints.requirements.service import Requirements, load_requirements

#: Most result files one `choose` reads.
MAX_RESULTS = MAX_CHOICE_FINALISTS * MAX_CHOICE_RESULTS


@dataclass(frozen=True)
class Finalist:
    """One pilot and the result files that measured it, each with its project-relative path and sha256."""

    bp: Blueprint
    config_path: Path
    requirements: str
    results: list[tuple[Path, BenchmarkResultFile, ResultEvidence]]

    @property
    def hardware(self) -> Hardware:
        found = hardware_of(self.bp.model_dump(mode="json"))
        assert found is not None
        return found

    def runs(self) -> list[tuple[Path, int, VllmBenchRun, int]]:
        """Every run, ascending by rate: (its file, its index there, the run, replicas measured)."""
        found = [(path, i, run, r.target.replicas_measured)
                 for path, r, _ in self.results for i, run in enumerate(r.runs)]
        return sorted(found, key=lambda x: float("inf") if x[2].request_rate == "inf" else float(x[2].request_rate))


@dataclass
class Comparison:
    """What `choose` found: each finalist's record (verdict and figures), the choice (None when nothing can be chosen,
    with `refusal` saying why) and notes for the report."""

    finalists: list[MeasuredFinalist]
    environment: str
    slo: tuple[float, float]
    choice: Choice | None
    refusal: str | None = None
    notes: list[str] = field(default_factory=list)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _relative(path: Path, root: Path | None) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix() if root is not None else path.as_posix()
    except ValueError:
        return path.as_posix()


def read_finalists(service: str, files: list[Path], *, stacks_dir: Path, root: Path | None,
                   now: dt.datetime) -> list[Finalist]:
    """Each pilot the files measured, in pilot order, after refusing bad input (module docstring).

    Raises:
        ChoiceError: naming the file and the field.
    """
    if not 1 <= len(files) <= MAX_RESULTS:
        raise ChoiceError(f"RESULT: give 2-{MAX_RESULTS} result files (one or more per finalist), got {len(files)}")
    by_stack: dict[str, list[tuple[Path, BenchmarkResultFile, ResultEvidence]]] = {}
    pilots: dict[str, tuple[Blueprint, Path, dt.date, str]] = {}
    for path in files:
        try:
            result = load_result(path)
        except BenchmarkError as exc:
            raise ChoiceError(f"{exc} (expected a `blueprint benchmark` result file, benchmarks/results/<stack>/"
                              "<date>.json)") from None
        if not result.stack.startswith(f"{service}-pilot-"):
            raise ChoiceError(f"{path}: stack: {result.stack!r} is not a pilot of {service} ({service}-pilot-<k>, "
                              f"`blueprint pilot`); choose compares the pilots' results")
        if result.stack not in pilots:
            pilots[result.stack] = _pilot(result.stack, stacks_dir, now)
        bp, config, as_of, _ = pilots[result.stack]
        _check_result(path, result, bp, config, as_of)
        evidence = ResultEvidence(file=_relative(path, root), sha256=_sha256(path), date=result.date)
        if any(e.sha256 == evidence.sha256 for found in by_stack.values() for _, _, e in found):
            raise ChoiceError(f"{path}: the same file (sha256 {evidence.sha256[:12]}...) given twice; give each once")
        by_stack.setdefault(result.stack, []).append((path, result, evidence))
    _same_requests([(path, result) for found in by_stack.values() for path, result, _ in found])
    if len(by_stack) < 2:
        raise ChoiceError(f"{', '.join(map(str, files))}: stack: every result measures {next(iter(by_stack))}; "
                          "choose compares at least two finalists: benchmark another pilot "
                          "(`blueprint benchmark <service>-pilot-<k>`) and pass its result too")
    for stack, found in by_stack.items():
        if len(found) > MAX_CHOICE_RESULTS:
            raise ChoiceError(f"{found[-1][0]}: {stack} has {len(found)} result files; at most {MAX_CHOICE_RESULTS}")
    ordered = sorted(by_stack, key=lambda s: pilots[s][0].pilot.candidate)  # type: ignore[union-attr]
    return [Finalist(pilots[s][0], pilots[s][1], pilots[s][3], by_stack[s]) for s in ordered]


def _pilot(stack: str, stacks_dir: Path, now: dt.datetime) -> tuple[Blueprint, Path, dt.date, str]:
    """The pilot's blueprint, stack config path, plan date and requirements file (project-relative); ChoiceError
    when it is no pilot or has expired."""
    path = stack_config_path(stacks_dir, stack)
    try:
        bp = read_stack_config(path)
        record = plan_record_of((load_yaml(read_text_file(path, StackConfigError, "stack config")) or {})
                                .get("config") or {}, source=str(path))
    except StackConfigError as exc:
        raise ChoiceError(f"{exc} (the pilot stack config the result names; run `blueprint pilot` again or pass "
                          "results of the pilots there)") from None
    if bp.pilot is None or record is None:
        raise ChoiceError(f"{path}: pilot: {stack} is not a pilot stack (`blueprint pilot` writes its `pilot` "
                          "section and plan record)")
    expires = dt.datetime.strptime(bp.pilot.expires, PILOT_EXPIRES_FORMAT).replace(tzinfo=dt.timezone.utc)
    if expires < now:
        raise ChoiceError(f"{path}: pilot.expires: {bp.pilot.expires} is past (now {now:%Y-%m-%dT%H:%MZ}): the pilot "
                          "expired, and its stack may already be destroyed or replaced; pilot again (`blueprint pilot` "
                          "--hours long enough to benchmark and choose) and benchmark the new pilots")
    return bp, path, record.as_of, record.requirements


def _check_result(path: Path, result: BenchmarkResultFile, bp: Blueprint, config: Path, as_of: dt.date) -> None:
    """ChoiceError when the result measured something else than its pilot as planned, or before it was planned."""
    if result.date < as_of:
        raise ChoiceError(f"{path}: date: {result.date} is before the pilot stack config {config} was written "
                          f"(servingblueprints:planned.as_of {as_of}): it measured an earlier pilot; benchmark "
                          f"{bp.stack} as planned now")
    w = planned_workload(bp)
    s, t = result.settings, result.target
    replica = (("target.engine_image", t.engine_image, w.engine_image),
               ("target.instance_type", t.instance_type, bp.compute.instance_type),
               ("target.tensor_parallel_size", t.tensor_parallel_size, getattr(bp.engine, "tensor_parallel_size", None)
                or getattr(bp.engine, "tensor_parallel_degree", None)))
    mismatch = workload_mismatch(result, w) or next(((name, measured, planned) for name, measured, planned in replica
                                                     if measured != planned), None)
    if mismatch is not None:
        name, measured, planned = mismatch
        raise ChoiceError(f"{path}: {name}: measured {measured!r}, the pilot {bp.stack} is planned with "
                          f"{planned!r} ({config}): the finalists are compared on the pilot's own workload and "
                          f"replica; benchmark it with `blueprint benchmark {bp.stack}`")
    if s.approximations:
        raise ChoiceError(f"{path}: settings.approximations: measured with --approximate-workload "
                          f"({s.approximations[0]}): not the planned workload; benchmark a workload the random dataset "
                          "reproduces")


def _requests_of(result: BenchmarkResultFile) -> str:
    """What a sweep sent: the planned random workload, or the user's prompts file (`--prompts`) by its sha256."""
    prompts = result.settings.prompts
    return "the planned random workload" if prompts is None else f"the prompts file sha256 {prompts.sha256}"


def _same_requests(results: list[tuple[Path, BenchmarkResultFile]]) -> None:
    """ChoiceError unless every result sent the same requests: all the planned workload, or all one prompts file."""
    first_path, first = results[0]
    for path, result in results[1:]:
        if _requests_of(result) != _requests_of(first):
            raise ChoiceError(f"{path}: settings.prompts: it sent {_requests_of(result)}, {first_path} sent "
                              f"{_requests_of(first)}: finalists are compared on the same requests; benchmark every "
                              "pilot with the same `--prompts` file, or every one without it")


def _failed_share(run: VllmBenchRun) -> float:
    return run.failed / run.num_prompts


def _meets(run: VllmBenchRun, slo: tuple[float, float], path: Path, index: int) -> bool:
    ttft, itl = run.percentile_ms("ttft", 95), run.percentile_ms("itl", 95)
    if ttft is None or itl is None:
        raise ChoiceError(f"{path}: runs[{index}].p95_{'ttft' if ttft is None else 'itl'}_ms: not recorded; "
                          "benchmark with `blueprint benchmark`, which records the 95th percentiles")
    return ttft <= slo[0] and itl <= slo[1] and _failed_share(run) <= MAX_FAILED_SHARE


def goodput_rps(finalist: Finalist, slo: tuple[float, float]) -> float | None:
    """Requests/s per replica within the SLO: the highest rate (ascending, up to the first miss) whose p95s meet it,
    completed requests/s over the replicas measured; None when none does."""
    best = None
    for path, index, run, replicas in finalist.runs():
        if not _meets(run, slo, path, index):
            break
        best = max(best or 0.0, run.request_throughput / replicas)
    return best


def _at_load(finalist: Finalist, load_rps: float) -> VllmBenchRun:
    """The run at the planned load per replica: the lowest rate at or above it, else the highest measured."""
    runs = [(run, replicas) for _, _, run, replicas in finalist.runs()]
    for run, replicas in runs:
        if run.request_rate == "inf" or float(run.request_rate) / replicas >= load_rps - 1e-9:
            return run
    return runs[-1][0]


def _percentiles(run: VllmBenchRun, metric: str) -> LatencyPercentiles:
    return LatencyPercentiles(p50=_r(run.percentile_ms(metric, 50) or getattr(run, f"median_{metric}_ms")),
                              p95=_r(run.percentile_ms(metric, 95)), p99=_r(run.percentile_ms(metric, 99)))


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else float(f"{value:.{digits}g}")


def candidate_of(bp: Blueprint) -> ChosenCandidate:
    """The candidate a pilot stack runs."""
    hw = hardware_of(bp.model_dump(mode="json"))
    assert hw is not None and hw.tensor_parallel_size is not None
    managed = hw.archetype is Archetype.SAGEMAKER_ENDPOINT
    return ChosenCandidate(archetype=hw.archetype.value, engine=None if managed else hw.engine,  # type: ignore[arg-type]
                           instance_type=hw.instance_type, tensor_parallel_size=hw.tensor_parallel_size,
                           kv_cache_dtype=None if managed else hw.kv_cache_dtype,  # type: ignore[arg-type]
                           precision=bp.model.precision)


def compare(req: Requirements, finalists: list[Finalist], *, production: Blueprint, catalog: Catalog,
            ctx: PlanContext, today: dt.date, calibrations: dict[str, str] | None = None) -> Comparison:
    """Each finalist's verdict and figures, and the choice: the cheapest meeting the SLO.

    Args:
        req: the service's requirements (its SLO targets, its reference environment's peak).
        finalists: from `read_finalists`.
        production: the reference environment's planned stack config (its planned requests per month price the unit
            costs, as the plan prices its own).
        catalog: from `load_catalog()`.
        ctx: the plan context of the requirements (their platforms and guardrails: the fleet's nodes).
        today: the choice's date.
        calibrations: per pilot stack, the calibration written from its runs (project-relative path).

    Returns:
        The comparison; its `choice` None with `refusal` when a finalist failed (more than 1 % of its requests) or
        fewer than one meets the SLO.
    """
    env = reference_environment(req)
    slo_ttft = req.slo.ttft_p95_ms or production.slo.ttft_p95_ms
    slo_itl = req.slo.itl_p95_ms or production.slo.itl_p95_ms
    assert slo_ttft is not None and slo_itl is not None, "a generative model's SLO has TTFT and ITL targets"
    slo = (slo_ttft, slo_itl)
    units = production.predictions.unit_costs
    if units is None:
        raise ChoiceError(f"{production.stack}: predictions.unit_costs: not planned; re-plan the service "
                          "(`blueprint plan`) so its planned traffic prices the finalists")
    mean_rps = units.requests_per_month / (3600 * catalog.hours_per_month)
    records, failed = [], []
    for f in finalists:
        sent = sum(run.num_prompts for _, _, run, _ in f.runs())
        lost = sum(run.failed for _, _, run, _ in f.runs())
        worst_path, worst_index, worst, _ = max(f.runs(), key=lambda x: _failed_share(x[2]))
        failed_pct = 100 * lost / sent
        common = dict(stack=f.bp.stack, candidate=candidate_of(f.bp), results=[e for _, _, e in f.results],
                      failed_pct=round(failed_pct, 3),
                      cold_start_s=max((r.cold_start.total_s for _, r, _ in f.results if r.cold_start), default=None),
                      calibration=(calibrations or {}).get(f.bp.stack))
        if lost / sent > MAX_FAILED_SHARE:
            failed.append(f"{worst_path}: runs[{worst_index}].failed: {f.bp.stack} failed {lost} of {sent} requests "
                          f"({failed_pct:.2g} %; this run {worst.failed} of {worst.num_prompts}), more than "
                          f"{MAX_FAILED_SHARE:.0%}: a failing server's timings are not its capacity, so it is reported "
                          "as failed and nothing is chosen; find why (the pod's events and log) and benchmark it "
                          "again")
            records.append(MeasuredFinalist(verdict="failed", **common))
            continue
        rate = goodput_rps(f, slo)
        if rate is None:
            records.append(MeasuredFinalist(verdict="misses-slo", **common))
            continue
        replicas, monthly, peak = measured_fleet(req, env, f.hardware, rate, catalog, ctx)
        run = _at_load(f, peak / replicas)
        priced = production.model_copy(update={"predictions": production.predictions.model_copy(update={
            "monthly_cost_usd": monthly, "prefill_time_share": f.bp.predictions.prefill_time_share})})
        costs = unit_costs(priced, mean_rps=mean_rps, expected_monthly_usd=monthly,
                           hours_per_month=catalog.hours_per_month)
        p = costs.provisioned if costs is not None else None
        records.append(MeasuredFinalist(
            verdict="meets-slo", goodput_rps_per_replica=_r(rate), replicas_at_peak=replicas,
            monthly_usd=round(monthly, 2), usd_per_1k_requests=p and p.usd_per_1k_requests,
            usd_per_million_input_tokens=p and p.usd_per_million_input_tokens,
            usd_per_million_output_tokens=p and p.usd_per_million_output_tokens,
            usd_per_million_tokens=p and p.usd_per_million_tokens, ttft_ms=_percentiles(run, "ttft"),
            itl_ms=_percentiles(run, "itl"), **common))
    comparison = Comparison(records, env, slo, None)
    meeting = [r for r in records if r.verdict == "meets-slo"]
    if failed:
        comparison.refusal = "; ".join(failed)
        return comparison
    if not meeting:
        comparison.refusal = (f"{', '.join(r.stack for r in records)}: runs: no finalist met TTFT p95 <= {slo[0]:g} ms "
                              f"and ITL p95 <= {slo[1]:g} ms at any measured rate; nothing to choose (the SLO, or "
                              "other finalists)")
        return comparison
    best = min(meeting, key=lambda r: (r.monthly_usd, [x.stack for x in records].index(r.stack)))
    records = [r.model_copy(update={"verdict": "chosen"}) if r is best else r for r in records]
    spec, traffic, _, _ = req.model_entries()[0]
    basis = ChoiceBasis(model=spec.id or spec.served_name, mean_input_tokens=traffic.mean_input_tokens,
                        mean_output_tokens=traffic.mean_output_tokens,
                        shared_prefix_tokens=traffic.shared_prefix_tokens, sessions=traffic.sessions,
                        ttft_p95_ms=slo[0], itl_p95_ms=slo[1])
    comparison.finalists = records
    comparison.choice = Choice(decided=today, environment=env, candidate=best.candidate, basis=basis,
                               finalists=records)
    return comparison


def calibrate_finalists(finalists: list[Finalist], *, project_root: Path | None, stacks_dir: Path,
                        today: dt.date) -> tuple[dict[str, str], list[str]]:
    """A calibration per vLLM finalist from its result files, as `blueprint calibrate` fits and writes it
    (`blueprints.operate.calibrate.calibrate`), so the next plan sizes that replica with the measured capacity:
    (per pilot stack, the calibration's project-relative path; why each other finalist was not calibrated: another
    engine, or calibrate's own refusal, e.g. constructed data bound for the project's calibrations)."""
    written, notes = {}, []
    for f in finalists:
        if f.bp.archetype is not Archetype.VLLM_GPU or f.bp.engine.kind != "vllm":
            notes.append(f"{f.bp.stack}: not calibrated: the capacity model is calibrated for vLLM replicas only "
                         f"({f.bp.engine.kind} on {f.bp.archetype.value}); its fleet above is sized with its measured "
                         "goodput, the plan's with the model's prediction")
            continue
        try:
            done = calibrate(f.bp, [p for p, _, _ in f.results], project_root=project_root, stacks_dir=stacks_dir,
                             today=today)
        except CalibrationError as exc:
            notes.append(f"{f.bp.stack}: not calibrated: {exc}")
            continue
        written[f.bp.stack] = _relative(done.path, project_root)
    return written, notes


def write_choice(path: Path, choice: Choice) -> None:
    """Write `choice:` into the requirements file, every other byte kept (`with_choice`), after checking that the
    file as written loads (`load_requirements` of the new text), through a temporary file and a rename.

    Raises:
        ChoiceError: the file cannot be read or written, or would not load (the message says why).
    """
    text = with_choice(read_text_file(path, ChoiceError, "requirements file"), choice)
    tmp = path.with_name(f".{path.name}.choice.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        try:
            load_requirements(tmp)
        except RequirementsError as exc:
            raise ChoiceError(f"{path}: choice: the file with the choice would not load ({exc}); nothing was "
                              "written") from None
        tmp.replace(path)
    except OSError as exc:
        raise ChoiceError(f"{path}: cannot write the choice ({exc.strerror})") from None
    finally:
        tmp.unlink(missing_ok=True)
