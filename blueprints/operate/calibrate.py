"""`blueprint calibrate --stack <stack> RESULT.json...`: fit the capacity model's corrections to a deployed stack's
benchmark runs and store them as `stacks/calibration/<key>.yaml` (`blueprints.contracts.calibration_file`), which the
next `blueprint plan` applies to every replica of that model, GPU, engine image, tensor parallel degree and precision.

Reads two formats:
- our benchmark result files (`benchmarks/results/<stack>/<date>.json`, `blueprints.contracts.benchmark_result`):
  the runs of a sweep with the settings they ran with and what was measured (model, GPU, engine flags);
- the JSON `vllm bench serve --save-result` writes for one run (vLLM v0.24.0 vllm/benchmarks/serve.py:2113-2142 the
  setup keys `date`, `model_id`, `num_prompts`, `request_rate`, `burstiness`, `max_concurrency`; :1181-1200 the
  totals and rates `duration`, `completed`, `failed`, `total_input_tokens`, `total_output_tokens`,
  `output_throughput`, `max_concurrent_requests`; :1263-1267 `mean_/median_<metric>_ms`; checked in the PyPI sdist
  vllm-0.24.0.tar.gz, sha256 0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66). Such a file names
  only the served model and records neither the engine image, the prefix nor the range ratio: the GPU, engine and
  flags are the stack config's, the mean lengths the run's totals over its completed requests, the range ratio the
  one `blueprint benchmark` runs for the stack; a stack planned with cached prompt tokens refuses it (its prefix is
  not recorded).

Every run is checked where it enters, and CalibrationError (exit 2) names the file, the field and the fix:
- the replica: the model (and GPU, engine image, tensor parallel degree) must be the stack's, one replica measured;
- the workload: the one the stack is planned with now, as `blueprint benchmark` sends it
  (`blueprints.operate.workload.planned_workload`: served model, prefix, random part, output, range ratio; a file
  `blueprint benchmark` wrote for the stack as planned always matches), none of it approximated
  (`settings.approximations`), and each run's mean prompt and output per completed request within `LENGTH_SIGMAS`
  standard deviations (+ `LENGTH_SLACK`) of what its settings send;
- the run: at most `MAX_FAILED_SHARE` of its requests failed, at least `MIN_COMPLETED` completed, Poisson arrivals
  (`--burstiness 1`), TTFT and ITL recorded, dated no later than today (UTC; a client's own clock up to
  `CLIENT_CLOCK_AHEAD` ahead), and counted once: two runs with the same `run_identity` (date, rate, requests and
  every figure fitted) are one measurement given twice, in two files or in one.
A run whose client concurrency cap was reached (`max_concurrent_requests` = its `max_concurrency`) is left out, with
the reason: its requests queued in the client, which an open-loop replay does not model (TTFT starts when the client
sends, serve.py:962-966 and lib/endpoint_request_func.py:197).

Runs are replayed as the planner models a prefix cache: the prefix every prompt shares is cached (sent once per run
to fill it) and not prefilled, so the replay draws the random part of each prompt only
(`blueprints.capacity.correction`).

The fit is refused (CalibrationError, nothing written) when a factor stops at a bound of its range (`Fit.at_bound`:
the runs are further from the model than a scale can correct: a broken run, or a model wrong in more than scale), or
when the fit leaves more than `MAX_RESIDUAL_AFTER_FIT` of error (`blueprints.capacity.correction`: the median over
the fitted figures of |predicted after the fit / measured - 1|).

A result file of ours that recorded the measured pod's cold start (`cold_start`, `blueprints.operate.coldstart`)
also corrects the startup model (`startup_fit`): per part, the median over the files of measured / the startup
model's prediction for the stack (`blueprints.plan.startup.vllm_startup`, uncalibrated), each ratio within
`STARTUP_FACTOR_BOUNDS` or CalibrationError naming the file and the field.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from blueprints.capacity.correction import (
    FIGURES, MAX_RESIDUAL_AFTER_FIT, SATURATED_SHARE, STEP_TIME_RANGE, TTFT_FLOOR_RANGE, Fit, MeasuredRun,
    ReplicaSetup, fit,
)
from blueprints.capacity.physics import Correction
from blueprints.capacity.planning import LatencyTargets, size_replica
from blueprints.capacity.replica import planned_candidate
from blueprints.catalog import load_catalog
from blueprints.contracts.benchmark_result import (
    MAX_RESULT_FILE_BYTES, STARTUP_PARTS, BenchmarkResultFile, ColdStartRecord, VllmBenchRun, load_result,
)
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.calibration_file import (
    AcceptedShift,
    STARTUP_FACTOR_BOUNDS, CalibrationFile, CalibrationKey, CalibrationSource, FigureRow, MeasuredWith,
    ResidualError, StartupCorrection, StartupPartFit, calibration_dir, calibration_yaml,
)
from blueprints.contracts.consistency import model_architecture
from blueprints.contracts.sections import Archetype, VllmEngine
from blueprints.core.errors import BenchmarkError, CalibrationError, format_validation_error, read_text_file
from blueprints.core.yamlio import load_json
from blueprints.contracts.weights import streams_format
from blueprints.operate.workload import ClientWorkload, planned_workload, workload_mismatch
from blueprints.plan.startup import vllm_startup

#: Largest share of a run's requests that may have failed for it to be fitted (a failing server's timings are not
#: its capacity: a failed request takes no prefill or decode time, so its failures make it look faster).
MAX_FAILED_SHARE = 0.01
#: Fewest completed requests a run needs to be fitted (the medians of fewer are noise).
MIN_COMPLETED = 20
#: Most result files one calibration reads.
MAX_FILES = 20
#: The engine flags a result file records; every file of one calibration must share them.
FLAG_FIELDS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "kv_cache_dtype")
#: A run's mean prompt and output per completed request may be off what its settings send by this many standard
#: deviations of the mean of n uniform draws (len x r / sqrt(3 n)), plus `LENGTH_SLACK` of the length: the client
#: takes the tokenizer's special tokens off the random part (vLLM adds them back) and re-encodes the prompt text
#: (vllm/benchmarks/datasets/utils.py:70-71, datasets.py:759-770), which moves a few tokens.
LENGTH_SIGMAS = 4.0
LENGTH_SLACK = 0.02
#: How far past today (UTC) a client run's date may be: `vllm bench serve` writes its own clock's local time without a
#: zone (UTC+14 at most), so beyond a day it is in the future.
CLIENT_CLOCK_AHEAD = dt.timedelta(days=1)


@dataclass(frozen=True)
class CalibrationResult:
    """What `calibrate` wrote: the file, its content and the fit."""

    path: Path
    file: CalibrationFile
    fit: Fit


def _error(path: Path, field: str, message: str) -> CalibrationError:
    return CalibrationError(f"{path}: {field}: {message}")


def measured_setup(bp: Blueprint, target: dict[str, Any] | None) -> tuple[ReplicaSetup, MeasuredWith]:
    """The replica a calibration replays: the stack config's model and engine, with the engine flags a result file
    recorded (`target`: its `target` record; None: the stack config's flags); (setup, the flags)."""
    engine = bp.engine
    assert isinstance(engine, VllmEngine)
    catalog = load_catalog()
    arch = model_architecture(bp.model.catalog_id, bp.model.architecture, catalog)
    assert arch is not None and bp.compute.gpu is not None
    t = target or {}
    flags = MeasuredWith(max_num_seqs=t.get("max_num_seqs") or engine.max_num_seqs,
                         max_num_batched_tokens=t.get("max_num_batched_tokens") or engine.max_num_batched_tokens,
                         max_model_len=t.get("max_model_len") or engine.max_model_len,
                         kv_cache_dtype=t.get("kv_cache_dtype") or engine.kv_cache_dtype,
                         gpu_memory_utilization=engine.gpu_memory_utilization)
    chat = bp.model.traffic is not None and bp.model.traffic.api == "chat"  # what the benchmark called (checked)
    setup = ReplicaSetup(arch=arch, gpu=catalog.gpu(bp.compute.gpu), precision=bp.model.precision, chat=chat,
                         quantization=bp.model.quantization, tensor_parallel_size=engine.tensor_parallel_size,
                         kv_cache_fp8=flags.kv_cache_dtype == "fp8",
                         gpu_memory_utilization=flags.gpu_memory_utilization, max_num_seqs=flags.max_num_seqs,
                         max_num_batched_tokens=flags.max_num_batched_tokens, max_model_len=flags.max_model_len)
    return setup, flags


def calibratable(bp: Blueprint) -> CalibrationKey:
    """The calibration key of a stack, or CalibrationError when its capacity model takes no calibration."""
    if bp.archetype is not Archetype.VLLM_GPU or not isinstance(bp.engine, VllmEngine):
        raise CalibrationError(f"{bp.stack} is a {bp.archetype.value} stack: calibration corrects the vLLM capacity "
                               "model of vllm-gpu stacks (SageMaker's LMI and the non-generative archetypes are sized "
                               "otherwise)")
    if bp.model.catalog_id is None or bp.compute.gpu is None:
        raise CalibrationError(f"{bp.stack}: model {bp.model.name} is not a catalog model (or runs on no GPU): the "
                               "planner matches calibrations by catalog model id and GPU")
    return CalibrationKey(model=bp.model.catalog_id, gpu=bp.compute.gpu, engine_image=bp.engine.image,
                          tensor_parallel_size=bp.engine.tensor_parallel_size, precision=bp.model.precision)


def run_identity(run: VllmBenchRun) -> tuple[object, ...]:
    """What makes two runs one measurement: the client's end date (to the second), the rate and requests asked, and
    what it measured (completed, failed, duration, token totals, output tokens/s, median TTFT and ITL). Two runs equal
    in all of these are the same run given twice (a file passed twice, a run copied into another file, or the client's
    JSON of a run next to the result file that holds it); its `label` is left out (the client's JSON may carry one)."""
    return (run.date, run.request_rate, run.num_prompts, run.completed, run.failed, run.duration,
            run.total_input_tokens, run.total_output_tokens, run.output_throughput, run.median_ttft_ms,
            run.median_itl_ms)


def _client_date(path: Path, where: str, run: VllmBenchRun, today: dt.date) -> dt.date:
    """The run's date (`%Y%m%d-%H%M%S`, the client's clock), refused when it is after today (CalibrationError)."""
    try:
        date = dt.datetime.strptime(run.date, "%Y%m%d-%H%M%S").date()
    except ValueError:
        raise _error(path, f"{where}.date", f"{run.date!r} is not a date (%Y%m%d-%H%M%S)") from None
    if date > today + CLIENT_CLOCK_AHEAD:
        raise _error(path, f"{where}.date", f"{run.date}: after today ({today.isoformat()}, UTC): a run from the "
                     "future was not measured; fix the date or leave this file out")
    return date


def _check_run(path: Path, where: str, run: VllmBenchRun, max_concurrency: int | None, *,
               today: dt.date) -> str | None:
    """Refuse a run that cannot be fitted (CalibrationError); the reason it is left out, or None to fit it."""
    _client_date(path, where, run, today)
    requests = run.completed + run.failed
    if requests and run.failed / requests > MAX_FAILED_SHARE:
        raise _error(path, f"{where}.failed", f"{run.failed} of {requests} requests failed, more than "
                     f"{MAX_FAILED_SHARE:.0%}: the server was failing, not measuring its capacity (failed requests "
                     "take no time, so the rest look faster); fix the errors and benchmark again, or leave this file "
                     "out")
    if run.completed < MIN_COMPLETED:
        raise _error(path, f"{where}.completed", f"{run.completed} requests completed, fewer than {MIN_COMPLETED}; "
                     "benchmark longer (`blueprint benchmark --duration`) or leave this file out")
    if run.burstiness != 1.0:
        raise _error(path, f"{where}.burstiness", f"{run.burstiness:g}: the replay sends Poisson arrivals "
                     "(`--burstiness 1`); benchmark with burstiness 1")
    for field in ("median_ttft_ms", "median_itl_ms"):
        if getattr(run, field) is None:
            raise _error(path, f"{where}.{field}", "missing: the client recorded no TTFT/ITL (it had no tokenizer, "
                         "or `--percentile-metrics` left them out); benchmark with a tokenizer")
        if not getattr(run, field) > 0:
            raise _error(path, f"{where}.{field}", "0 ms: no token was timed; benchmark again")
    if not run.output_throughput > 0:
        raise _error(path, f"{where}.output_throughput", "0 tokens/s: nothing was generated; benchmark again")
    cap = run.max_concurrency or max_concurrency
    if cap is not None and run.max_concurrent_requests >= cap:
        return (f"{where} at {run.request_rate} requests/s: left out, the client's max_concurrency {cap} was reached "
                "(requests queued in the client, which the open-loop replay does not model)")
    return None


def _check_lengths(path: Path, where: str, run: VllmBenchRun, workload: ClientWorkload, *, source: str) -> None:
    """Refuse a run whose mean prompt or output per completed request is not what `workload` sends (CalibrationError):
    within `LENGTH_SIGMAS` standard deviations of the mean of its draws, plus `LENGTH_SLACK`. `source` names where the
    expected lengths come from (the file's settings, or the stack's plan)."""
    n = max(1, run.completed)
    for field, measured, fixed, drawn in (("total_input_tokens", run.total_input_tokens / n, workload.prefix_len,
                                           workload.input_len),
                                          ("total_output_tokens", run.total_output_tokens / n, 0,
                                           workload.output_len)):
        expected = fixed + drawn
        tolerance = LENGTH_SIGMAS * drawn * workload.range_ratio / math.sqrt(3 * n) + LENGTH_SLACK * expected
        if abs(measured - expected) > tolerance:
            what = "prompt" if field == "total_input_tokens" else "output"
            raise _error(path, f"{where}.{field}", f"{measured:.0f} {what} tokens per completed request; {source} "
                         f"send {expected} on average (+-{tolerance:.0f} at {n} requests): the run measured another "
                         f"workload than {source} record; benchmark with `blueprint benchmark`, which sends the "
                         "planned workload")


def _check_workload(path: Path, result: BenchmarkResultFile, bp: Blueprint, workload: ClientWorkload) -> None:
    """Refuse a result file whose workload is not the one the stack is planned with, as `blueprint benchmark` sends
    it for the stack now (CalibrationError naming the field, the planned and the measured value)."""
    s = result.settings
    if s.prompts is not None:
        raise _error(path, "settings.prompts", f"measured with your prompts ({s.prompts.file}, `blueprint benchmark "
                     "--prompts`): a calibration replays the planned workload's lengths, which these runs did not "
                     f"send; calibrate with `blueprint benchmark {bp.stack}` without --prompts")
    if s.approximations:
        raise _error(path, "settings.approximations", f"measured with --approximate-workload ({s.approximations[0]}): "
                     "the random dataset could not reproduce the planned workload, and a calibration would correct "
                     "the model with another one; calibrate with a benchmark of a workload the random dataset "
                     "reproduces, or leave this file out")
    mismatch = workload_mismatch(result, workload)
    if mismatch is not None:
        field, measured, want = mismatch
        raise _error(path, field, f"measured {measured!r}, planned {want!r}: {bp.stack} is planned with "
                     f"{_workload_words(workload)}, and a fit on another workload would correct the model with "
                     f"it; benchmark with `blueprint benchmark {bp.stack}`, which sends the planned workload")


def _workload_words(w: ClientWorkload) -> str:
    """e.g. `prompts of a 640-token shared prefix and 1960 random tokens (mean), outputs of 350, range ratio 0.9`."""
    prefix = f"a {w.prefix_len}-token shared prefix and " if w.prefix_len else "no shared prefix and "
    return (f"prompts of {prefix}{w.input_len} random tokens (mean), outputs of {w.output_len}, range ratio "
            f"{w.range_ratio:g} (served model {w.model!r})")


def _measured_run(label: str, run: VllmBenchRun, *, input_len: int, output_len: int, range_ratio: float) -> MeasuredRun:
    rate = None if run.request_rate == "inf" else float(run.request_rate)
    return MeasuredRun(label=label, request_rate=rate,
                       num_prompts=run.num_prompts, input_len=input_len, output_len=output_len,
                       range_ratio=range_ratio, output_tokens_per_s=run.output_throughput,
                       median_ttft_ms=float(run.median_ttft_ms),  # type: ignore[arg-type]
                       median_itl_ms=float(run.median_itl_ms),  # type: ignore[arg-type]
                       saturated=rate is None or run.request_throughput < SATURATED_SHARE * rate)


def _read_json(path: Path) -> Any:
    text = read_text_file(path, CalibrationError, "result file")
    size = len(text.encode("utf-8"))
    if size > MAX_RESULT_FILE_BYTES:
        raise CalibrationError(f"{path}: {size:,} bytes; a result file is at most {MAX_RESULT_FILE_BYTES:,} "
                               "(save runs without --save-detailed)")
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None


@dataclass(frozen=True)
class _FileRead:
    """One result file as read: its source record, the runs to fit, every run read (`runs[i]` or `run`, and the run)
    for the duplicate check, and for our format the recorded target (engine flags) and cold start."""

    source: CalibrationSource
    fitted: list[MeasuredRun]
    runs: list[tuple[str, VllmBenchRun]]
    target: dict[str, Any] | None = None
    cold_start: ColdStartRecord | None = None


def _ours(path: Path, shown: str, bp: Blueprint, key: CalibrationKey, workload: ClientWorkload, *,
          constructed: bool, today: dt.date) -> _FileRead:
    try:
        result = load_result(path)
    except BenchmarkError as exc:
        raise CalibrationError(str(exc)) from None
    if result.date > today:
        raise _error(path, "date", f"{result.date.isoformat()}: after today ({today.isoformat()}, UTC): a benchmark "
                     "from the future was not measured; fix the date or leave this file out")
    t = result.target
    for field, theirs, ours in (("stack", result.stack, bp.stack), ("target.catalog_id", t.catalog_id, key.model),
                                ("target.gpu", t.gpu, key.gpu), ("target.engine_image", t.engine_image,
                                                                 key.engine_image),
                                ("target.tensor_parallel_size", t.tensor_parallel_size, key.tensor_parallel_size)):
        if theirs != ours:
            raise _error(path, field, f"{theirs!r} is not the stack's: {bp.stack} has {ours!r}; calibrate with the "
                         "stack this file measured, or re-plan the stack to the hardware it measured")
    if t.replicas_measured != 1:
        raise _error(path, "target.replicas_measured", f"{t.replicas_measured}: the fit is per replica; benchmark "
                     "one serving pod directly (`blueprint benchmark` does)")
    _check_workload(path, result, bp, workload)
    s = result.settings
    runs, left_out = [], []
    for i, run in enumerate(result.runs):
        why = _check_run(path, f"runs[{i}]", run, s.max_concurrency, today=today)
        _check_lengths(path, f"runs[{i}]", run, workload, source="its settings")
        if why:
            left_out.append(why)
            continue
        runs.append(_measured_run(f"{shown} runs[{i}]", run, input_len=s.random_input_len,
                                  output_len=s.random_output_len, range_ratio=s.random_range_ratio))
    source = CalibrationSource(file=shown, stack=result.stack, date=result.date,
                               measured=result.measured and not constructed, format="benchmark-result",
                               runs_used=len(runs), left_out=left_out)
    return _FileRead(source, runs, [(f"runs[{i}]", run) for i, run in enumerate(result.runs)], t.model_dump(),
                     result.cold_start)


def _raw(path: Path, shown: str, data: Any, bp: Blueprint, workload: ClientWorkload, *,
         constructed: bool, today: dt.date) -> _FileRead:
    try:
        run = VllmBenchRun.model_validate(data)
    except ValidationError as exc:
        raise CalibrationError(format_validation_error(exc, source=path, data=data, model=VllmBenchRun)
                               + f"\n(expected `vllm bench serve --save-result` JSON of vLLM 0.24.0, or a "
                               "`blueprint benchmark` result file)") from None
    if run.model_id != workload.model:
        raise _error(path, "model_id", f"{run.model_id!r} is not the stack's: {bp.stack} serves {workload.model!r}; "
                     "calibrate with the stack this run measured")
    if run.backend != workload.backend:
        raise _error(path, "backend", f"{run.backend!r}, planned {workload.backend!r}: {bp.stack}'s clients call "
                     f"{workload.endpoint} (traffic.api {workload.api}), whose serial work per request the plan "
                     f"counts in every TTFT; benchmark with `blueprint benchmark {bp.stack}`, which calls it")
    if workload.prefix_len:
        raise _error(path, "random_prefix_len", f"not recorded: the client's JSON does not say which prefix it sent, "
                     f"and {bp.stack} is planned with {_workload_words(workload)}; benchmark with `blueprint "
                     f"benchmark {bp.stack}`, whose result file records it")
    why = _check_run(path, "run", run, None, today=today)
    _check_lengths(path, "run", run, workload, source=f"{bp.stack}'s plan and `blueprint benchmark`")
    date = _client_date(path, "run", run, today)
    runs = [] if why else [_measured_run(
        f"{shown}", run, input_len=max(1, round(run.total_input_tokens / max(1, run.completed))),
        output_len=max(1, round(run.total_output_tokens / max(1, run.completed))), range_ratio=workload.range_ratio)]
    labelled = (run.label or "").upper().startswith("CONSTRUCTED")
    source = CalibrationSource(file=shown, stack=bp.stack, date=date, measured=not (constructed or labelled),
                               format="vllm-bench-serve", runs_used=len(runs), left_out=[why] if why else [])
    return _FileRead(source, runs, [("run", run)])


def _read(bp: Blueprint, key: CalibrationKey, files: list[Path], *, project_root: Path | None, constructed: bool,
          today: dt.date) -> list[_FileRead]:
    """Every file read and checked (CalibrationError at the first refusal), in order."""
    workload = planned_workload(bp)
    reads: list[_FileRead] = []
    for path in files:
        shown = _shown(path, project_root)
        data = _read_json(path)
        if isinstance(data, dict) and "schema_version" in data and "runs" in data:
            read = _ours(path, shown, bp, key, workload, constructed=constructed, today=today)
            first = next((r for r in reads if r.target is not None), None)
            if first is not None and _flags(read) != _flags(first):
                raise _error(path, "target", f"engine flags {_flags(read)} differ from those of {first.source.file} "
                             f"({_flags(first)}): one calibration fits runs of one replica configuration; calibrate "
                             "them separately")
        else:
            read = _raw(path, shown, data, bp, workload, constructed=constructed, today=today)
        reads.append(read)
    _refuse_duplicates(files, reads)
    return reads


def _flags(read: _FileRead) -> dict[str, Any]:
    """The engine flags a result file of ours recorded (`FLAG_FIELDS`)."""
    return {f: (read.target or {}).get(f) for f in FLAG_FIELDS}


def _refuse_duplicates(files: list[Path], reads: list[_FileRead]) -> None:
    """CalibrationError when one run is given twice (`run_identity`): it would weigh twice in the fit."""
    seen: dict[tuple[object, ...], tuple[int, str]] = {}
    for n, (path, read) in enumerate(zip(files, reads)):
        for where, run in read.runs:
            first = seen.setdefault(run_identity(run), (n, where))
            if first != (n, where):
                twice = "; the same file given twice" if files[first[0]] == path else ""
                raise _error(path, where, f"the run of {reads[first[0]].source.file} {first[1]} again (same date "
                             f"{run.date}, {run.request_rate} requests/s, {run.num_prompts} prompts and the same "
                             f"figures{twice}): a run counted twice weighs twice in the fit; give each run once")


def _refuse_unfit(bp: Blueprint, result: Fit, sources: list[CalibrationSource]) -> None:
    """CalibrationError when the fit cannot be trusted: a factor stopped at a bound of its range, or more than
    `MAX_RESIDUAL_AFTER_FIT` of error left (the median over the fitted figures of |predicted / measured - 1|)."""
    files = ", ".join(s.file for s in sources)
    fix = (f"check the runs (the stack's replica and engine flags, the planned workload, a cache or a cap in "
           f"between) and benchmark again with `blueprint benchmark {bp.stack}`; nothing was written")
    if result.at_bound:
        name = result.at_bound[0]
        value = getattr(result.correction, name)
        lo, hi = {"step_time": STEP_TIME_RANGE, "ttft_floor": TTFT_FLOOR_RANGE}[name]
        side = "lower" if value <= math.sqrt(lo * hi) else "upper"
        raise CalibrationError(
            f"{files}: {name}: the fit stopped at x{value:g}, the {side} bound of its range ({lo:g}-{hi:g}) (step "
            f"time x{result.correction.step_time:g}, TTFT floor x{result.correction.ttft_floor:g}; median error "
            f"{result.median_abs_error(after=False):.0%} before the fit, {result.median_abs_error(after=True):.0%} "
            f"after): a correction at the edge of what a scale may correct hides runs that are broken or measured "
            f"something else, or a model wrong for this replica in more than scale; {fix}")
    left = result.median_abs_error(after=True)
    if left > MAX_RESIDUAL_AFTER_FIT:
        raise CalibrationError(
            f"{files}: residual_after.median: {left:.0%} of error is left after the fit (the median over "
            f"{len(result.residuals)} fitted figures of |predicted / measured - 1|, at most "
            f"{MAX_RESIDUAL_AFTER_FIT:.0%}; step time x{result.correction.step_time:g}, TTFT floor "
            f"x{result.correction.ttft_floor:g}): two factors cannot explain these runs (they disagree with each "
            f"other, or the model is wrong for this replica in more than scale); {fix}")


def calibrate(bp: Blueprint, files: list[Path], *, project_root: Path | None, stacks_dir: Path,
              out_dir: Path | None = None, constructed: bool = False,
              today: dt.date | None = None, accept_shift: bool = False) -> CalibrationResult:
    """Fit the stack's runs and write the calibration file.

    Args:
        bp: the stack's blueprint (its stack config).
        files: result files, ours or `vllm bench serve --save-result` JSON, 1-`MAX_FILES`.
        project_root: paths are recorded relative to it (as given when None).
        stacks_dir: the project's stack config folder; the file goes to `<stacks_dir>/calibration/`.
        out_dir: write there instead (a calibration of constructed data may only go elsewhere).
        constructed: the files are constructed, not measured (also when a result file says `measured: false` or a
            client run's `label` starts with CONSTRUCTED).
        today: the date a result may not be after. Defaults to today in UTC (`blueprint benchmark` dates its
            files in UTC).
        accept_shift: write a fit that moves a production stack's capacity beyond its band (`capacity_shift`),
            recording that it was accepted.

    Raises:
        CalibrationError: a stack the capacity model cannot calibrate; a file of another model, GPU, engine,
            tensor parallel degree or workload than the stack is planned with, or measured with
            --approximate-workload; a run with too many failures or too few requests, dated in the future, or given
            twice; no run left to fit; a fit at a bound of its range or with more than `MAX_RESIDUAL_AFTER_FIT`
            error left; a fit that moves a production stack's capacity beyond its band without `accept_shift`;
            constructed data bound for the project's calibrations (the message names file, field and fix). Nothing is
            written then.
    """
    key = calibratable(bp)
    if not 1 <= len(files) <= MAX_FILES:
        raise CalibrationError(f"RESULT.json: give 1-{MAX_FILES} result files, got {len(files)}")
    today = today if today is not None else dt.datetime.now(dt.timezone.utc).date()
    reads = _read(bp, key, files, project_root=project_root, constructed=constructed, today=today)
    sources = [r.source for r in reads]
    runs = tuple(run for r in reads for run in r.fitted)
    if not runs:
        raise CalibrationError(f"{', '.join(s.file for s in sources)}: no run left to fit ("
                               + "; ".join(w for s in sources for w in s.left_out) + "); benchmark at rates below "
                               "the client's max_concurrency")
    project_dir = calibration_dir(stacks_dir)
    folder = out_dir if out_dir is not None else project_dir
    if not all(s.measured for s in sources) and folder.resolve() == project_dir.resolve():
        raise CalibrationError(f"{project_dir}: {', '.join(s.file for s in sources if not s.measured)}: "
                               "constructed, not measured; a calibration of constructed data would change every real "
                               "plan of this replica: write it elsewhere with --out DIR")
    starts = [(path, r.source.date, r.cold_start) for path, r in zip(files, reads) if r.cold_start is not None]
    startup = startup_fit(bp, starts)
    setup, flags = measured_setup(bp, next((r.target for r in reads if r.target is not None), None))
    result = fit(setup, runs)
    _refuse_unfit(bp, result, sources)
    shift = capacity_shift(bp, result.correction)
    if shift is not None and not accept_shift:
        moved = shift.calibrated_rps / shift.planned_rps - 1
        raise CalibrationError(
            f"{', '.join(s.file for s in sources)}: step_time x{result.correction.step_time:g}, ttft_floor "
            f"x{result.correction.ttft_floor:g} move {bp.stack}'s capacity per replica within the SLO from "
            f"{shift.planned_rps:.3g} to {shift.calibrated_rps:.3g} requests/s ({moved:+.0%}), beyond the plan's band "
            f"of {shift.band:.0%}: the next plan would {'shrink' if moved > 0 else 'grow'} a production fleet by more "
            "than the model's error explains; check the runs (the replica, its load, the client), benchmark again, "
            "and pass --accept-shift to write it as a reviewed decision (the next review shows it first); nothing "
            "was written")
    file = CalibrationFile(
        key=key, step_time=result.correction.step_time, ttft_floor=result.correction.ttft_floor,
        at_bound=list(result.at_bound), unpinned=list(result.unpinned),  # type: ignore[arg-type]
        sources=sources, measured_with=flags,  # type: ignore[arg-type]
        fitted_on=(f"{len(runs)} run(s) replayed through the replica model; minimised the sum of |ln(predicted / "
                   f"measured)| over {', '.join(name for name, _ in FIGURES)} (throughput of saturated runs only)"),
        residual_before=ResidualError(median=round(result.median_abs_error(after=False), 4),
                                      max=round(result.max_abs_error(after=False), 4)),
        residual_after=ResidualError(median=round(result.median_abs_error(after=True), 4),
                                     max=round(result.max_abs_error(after=True), 4)),
        figures=[FigureRow(run=r.run, figure=r.figure, measured=round(r.measured, 3),  # type: ignore[arg-type]
                           before=round(r.before, 3), after=round(r.after, 3)) for r in result.residuals],
        startup=startup, accepted_shift=shift)
    path = folder / key.file_name()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(calibration_yaml(file), encoding="utf-8")
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot write the calibration ({exc.strerror})") from None
    return CalibrationResult(path, file, result)


def capacity_shift(bp: Blueprint, correction: Correction) -> AcceptedShift | None:
    """How a production stack's capacity per replica within its SLO moves from the plan's central estimate (its
    calibration's model, or the uncorrected one: not the margin it was sized with, which is the band's pessimistic
    edge) to the model with `correction`, when by more than the plan's capacity band (`predictions.uncertainty`:
    [c / (1 + b), c / (1 - b)], so b = (high - low) / (high + low)); None when it moves less (a calibration within
    the band the model's error explains), or the stack is not production or has no band."""
    band = bp.predictions.uncertainty
    if not bp.production or band is None:
        return None
    interval = band.requests_per_s_capacity
    b = (interval.high - interval.low) / (interval.high + interval.low) if interval.high + interval.low else 0.0
    targets = LatencyTargets(bp.slo.ttft_p95_ms, bp.slo.itl_p95_ms)
    recorded = bp.predictions.capacity_correction
    central = Correction(recorded.step_time, recorded.ttft_floor) if recorded else Correction()
    rates = []
    for corr in (central, correction):
        found = planned_candidate(bp, corr)
        if found is None:
            return None
        sizing = size_replica(*found, targets)
        rates.append(sizing.max_rps if sizing is not None else 0.0)
    planned, calibrated = rates
    if not planned > 0 or abs(calibrated / planned - 1) <= b:
        return None
    return AcceptedShift(stack=bp.stack, planned_rps=round(planned, 4), calibrated_rps=round(calibrated, 4),
                         band=round(b, 4))


def startup_fit(bp: Blueprint, starts: list[tuple[Path, dt.date, ColdStartRecord]]) -> StartupCorrection | None:
    """The startup model's correction from measured cold starts (one per result file: path, date, record), or None
    without any: per measured part, the median of measured / predicted (the uncalibrated startup model for the
    stack's replica), rounded to 4 decimals.

    Raises:
        CalibrationError: a pod that read its weights otherwise than the stack config says (streamed or copied), or
            a part whose ratio is outside `STARTUP_FACTOR_BOUNDS` (the message names file, field and fix).
    """
    if not starts:
        return None
    assert isinstance(bp.engine, VllmEngine)
    streamed = streams_format(Archetype.VLLM_GPU, bp.model.format)
    predicted = vllm_startup(bp.model, tensor_parallel_size=bp.engine.tensor_parallel_size,
                             gpus_per_node=load_catalog().instance(bp.compute.instance_type).gpu_count).budget
    lo, hi = STARTUP_FACTOR_BOUNDS
    parts = []
    for path, _, cold in starts:
        if cold.weights_streamed != streamed:
            raise _error(path, "cold_start.weights_streamed", f"{str(cold.weights_streamed).lower()}: {bp.stack}'s "
                         f"pods {'stream' if streamed else 'copy'} their weights; calibrate with a benchmark of the "
                         "stack as deployed now")
    for part in STARTUP_PARTS:
        pairs = []
        for path, _, cold in starts:
            measured, want = cold.measured_parts().get(part), getattr(predicted, part)
            if measured is None or not want:
                continue
            if not lo <= measured / want <= hi:
                raise _error(path, f"cold_start.{part}", f"measured {measured:g} s is {measured / want:.3g}x the "
                             f"startup model's {want} s for {bp.stack}, outside {lo:g}-{hi:g}x: such a start is "
                             "broken (a pod waiting for quota or a pull retried), not the model's error; check the "
                             "pod's events and benchmark a fresh pod, or leave this file out")
            pairs.append((measured / want, measured))
        if pairs:
            parts.append(StartupPartFit(part=part, predicted_s=getattr(predicted, part),  # type: ignore[arg-type]
                                        measured_s=round(statistics.median(m for _, m in pairs), 3),
                                        factor=round(statistics.median(r for r, _ in pairs), 4),
                                        samples=len(pairs)))
    return StartupCorrection(weights_streamed=streamed, parts=parts, predicted_total_s=predicted.total_s,
                             measured_total_s=round(statistics.median(c.total_s for _, _, c in starts), 3),
                             samples=len(starts), dates=sorted({d for _, d, _ in starts}))


def _shown(path: Path, root: Path | None) -> str:
    """`path` relative to the project root when inside it."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix() if root is not None else path.as_posix()
    except ValueError:
        return path.as_posix()
