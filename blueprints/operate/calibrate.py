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
  only the served model: the GPU, engine and flags are the stack config's, the mean lengths the run's totals over
  its completed requests, the range ratio the one `blueprint benchmark` runs for the stack.

Every run is checked where it enters: the model (and GPU, engine image, tensor parallel degree) must be the stack's,
at most `MAX_FAILED_SHARE` of its requests failed, at least `MIN_COMPLETED` completed, one replica measured,
Poisson arrivals (`--burstiness 1`), TTFT and ITL recorded; otherwise CalibrationError (exit 2) naming the file,
the field and the fix. A run whose client concurrency cap was reached (`max_concurrent_requests` = its
`max_concurrency`) is left out, with the reason: its requests queued in the client, which an open-loop replay
does not model (TTFT starts when the client sends, serve.py:962-966 and lib/endpoint_request_func.py:197).

A result file of ours that recorded the measured pod's cold start (`cold_start`, `blueprints.operate.coldstart`)
also corrects the startup model (`startup_fit`): per part, the median over the files of measured / the startup
model's prediction for the stack (`blueprints.plan.startup.vllm_startup`, uncalibrated), each ratio within
`STARTUP_FACTOR_BOUNDS` or CalibrationError naming the file and the field.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from blueprints.capacity.correction import FIGURES, SATURATED_SHARE, Fit, MeasuredRun, ReplicaSetup, fit
from blueprints.catalog import load_catalog
from blueprints.contracts.benchmark_result import (
    MAX_RESULT_FILE_BYTES, STARTUP_PARTS, ColdStartRecord, VllmBenchRun, load_result,
)
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.calibration_file import (
    STARTUP_FACTOR_BOUNDS, CalibrationFile, CalibrationKey, CalibrationSource, FigureRow, MeasuredWith,
    ResidualError, StartupCorrection, StartupPartFit, calibration_dir, calibration_yaml,
)
from blueprints.contracts.consistency import model_architecture
from blueprints.contracts.sections import Archetype, VllmEngine
from blueprints.core.errors import BenchmarkError, CalibrationError, format_validation_error
from blueprints.contracts.weights import streams_format
from blueprints.operate.workload import planned_workload
from blueprints.plan.startup import vllm_startup

#: Largest share of a run's requests that may have failed for it to be fitted (a failing server's timings are not
#: its capacity).
MAX_FAILED_SHARE = 0.05
#: Fewest completed requests a run needs to be fitted (the medians of fewer are noise).
MIN_COMPLETED = 20
#: Most result files one calibration reads.
MAX_FILES = 20
#: The engine flags a result file records; every file of one calibration must share them.
FLAG_FIELDS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "kv_cache_dtype")


@dataclass(frozen=True)
class CalibrationResult:
    """What `calibrate` wrote: the file, its content and the fit."""

    path: Path
    file: CalibrationFile
    fit: Fit


def _error(path: Path, field: str, message: str) -> CalibrationError:
    return CalibrationError(f"{path}: {field}: {message}")


def _setup(bp: Blueprint, target: dict[str, Any] | None) -> tuple[ReplicaSetup, MeasuredWith]:
    """The measured replica: the stack config's model and engine, with a result file's recorded flags."""
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
    setup = ReplicaSetup(arch=arch, gpu=catalog.gpu(bp.compute.gpu), precision=bp.model.precision,
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


def _check_run(path: Path, where: str, run: VllmBenchRun, max_concurrency: int | None) -> str | None:
    """Refuse a run that cannot be fitted (CalibrationError); the reason it is left out, or None to fit it."""
    requests = run.completed + run.failed
    if requests and run.failed / requests > MAX_FAILED_SHARE:
        raise _error(path, f"{where}.failed", f"{run.failed} of {requests} requests failed, more than "
                     f"{MAX_FAILED_SHARE:.0%}: the server was failing, not measuring its capacity; fix the errors "
                     "and benchmark again, or leave this file out")
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


def _measured_run(label: str, run: VllmBenchRun, *, input_len: int, output_len: int, range_ratio: float) -> MeasuredRun:
    rate = None if run.request_rate == "inf" else float(run.request_rate)
    return MeasuredRun(label=label, request_rate=rate,
                       num_prompts=run.num_prompts, input_len=input_len, output_len=output_len,
                       range_ratio=range_ratio, output_tokens_per_s=run.output_throughput,
                       median_ttft_ms=float(run.median_ttft_ms),  # type: ignore[arg-type]
                       median_itl_ms=float(run.median_itl_ms),  # type: ignore[arg-type]
                       saturated=rate is None or run.request_throughput < SATURATED_SHARE * rate)


def _read_json(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_RESULT_FILE_BYTES:
            raise CalibrationError(f"{path}: {size:,} bytes; a result file is at most {MAX_RESULT_FILE_BYTES:,} "
                                   "(save runs without --save-detailed)")
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot read the result file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise CalibrationError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None


def _ours(path: Path, shown: str, bp: Blueprint, key: CalibrationKey, *,
          constructed: bool) -> tuple[CalibrationSource, list[MeasuredRun], dict[str, Any], ColdStartRecord | None]:
    try:
        result = load_result(path)
    except BenchmarkError as exc:
        raise CalibrationError(str(exc)) from None
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
    s = result.settings
    runs, left_out = [], []
    for i, run in enumerate(result.runs):
        why = _check_run(path, f"runs[{i}]", run, s.max_concurrency)
        if why:
            left_out.append(why)
            continue
        runs.append(_measured_run(f"{shown} runs[{i}]", run, input_len=s.random_input_len,
                                  output_len=s.random_output_len, range_ratio=s.random_range_ratio))
    source = CalibrationSource(file=shown, stack=result.stack, date=result.date,
                               measured=result.measured and not constructed, format="benchmark-result",
                               runs_used=len(runs), left_out=left_out)
    return source, runs, t.model_dump(), result.cold_start


def _raw(path: Path, shown: str, data: Any, bp: Blueprint, *,
         constructed: bool) -> tuple[CalibrationSource, list[MeasuredRun]]:
    try:
        run = VllmBenchRun.model_validate(data)
    except ValidationError as exc:
        raise CalibrationError(format_validation_error(exc, source=path, data=data)
                               + f"\n(expected `vllm bench serve --save-result` JSON of vLLM 0.24.0, or a "
                               "`blueprint benchmark` result file)") from None
    if run.model_id != bp.model.name:
        raise _error(path, "model_id", f"{run.model_id!r} is not the stack's: {bp.stack} serves {bp.model.name!r}; "
                     "calibrate with the stack this run measured")
    why = _check_run(path, "run", run, None)
    try:
        date = dt.datetime.strptime(run.date, "%Y%m%d-%H%M%S").date()
    except ValueError:
        raise _error(path, "date", f"{run.date!r} is not a date (%Y%m%d-%H%M%S)") from None
    ratio = planned_workload(bp).range_ratio
    runs = [] if why else [_measured_run(
        f"{shown}", run, input_len=max(1, round(run.total_input_tokens / max(1, run.completed))),
        output_len=max(1, round(run.total_output_tokens / max(1, run.completed))), range_ratio=ratio)]
    labelled = (run.label or "").upper().startswith("CONSTRUCTED")
    source = CalibrationSource(file=shown, stack=bp.stack, date=date, measured=not (constructed or labelled),
                               format="vllm-bench-serve", runs_used=len(runs), left_out=[why] if why else [])
    return source, runs


def calibrate(bp: Blueprint, files: list[Path], *, project_root: Path | None, stacks_dir: Path,
              out_dir: Path | None = None, constructed: bool = False) -> CalibrationResult:
    """Fit the stack's runs and write the calibration file.

    Args:
        bp: the stack's blueprint (its stack config).
        files: result files, ours or `vllm bench serve --save-result` JSON, 1-`MAX_FILES`.
        project_root: paths are recorded relative to it (as given when None).
        stacks_dir: the project's stack config folder; the file goes to `<stacks_dir>/calibration/`.
        out_dir: write there instead (a calibration of constructed data may only go elsewhere).
        constructed: the files are constructed, not measured (also when a result file says `measured: false` or a
            client run's `label` starts with CONSTRUCTED).

    Raises:
        CalibrationError: a stack the capacity model cannot calibrate, a file of another model, GPU, engine or
            tensor parallel degree, a run with too many failures or too few requests, no run left to fit, or
            constructed data bound for the project's calibrations (the message names file, field and fix).
    """
    key = calibratable(bp)
    if not 1 <= len(files) <= MAX_FILES:
        raise CalibrationError(f"RESULT.json: give 1-{MAX_FILES} result files, got {len(files)}")
    sources, runs, target, starts = [], [], None, []
    for path in files:
        shown = _shown(path, project_root)
        data = _read_json(path)
        if isinstance(data, dict) and "schema_version" in data and "runs" in data:
            source, found, theirs, cold = _ours(path, shown, bp, key, constructed=constructed)
            if cold is not None:
                starts.append((path, source.date, cold))
            flags = {f: theirs[f] for f in FLAG_FIELDS}
            if target is not None and flags != {f: target[f] for f in FLAG_FIELDS}:
                raise _error(path, "target", f"engine flags {flags} differ from those of {sources[0].file} "
                             f"({ {f: target[f] for f in FLAG_FIELDS} }): one calibration fits runs of one replica "
                             "configuration; calibrate them separately")
            target = theirs
        else:
            source, found = _raw(path, shown, data, bp, constructed=constructed)
        sources.append(source)
        runs += found
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
    setup, flags = _setup(bp, target)
    result = fit(setup, tuple(runs))
    file = CalibrationFile(
        key=key, step_time=result.correction.step_time, ttft_floor=result.correction.ttft_floor,
        at_bound=list(result.at_bound), sources=sources, measured_with=flags,  # type: ignore[arg-type]
        fitted_on=(f"{len(runs)} run(s) replayed through the replica model; minimised the sum of |ln(predicted / "
                   f"measured)| over {', '.join(name for name, _ in FIGURES)} (throughput of saturated runs only)"),
        residual_before=ResidualError(median=round(result.median_abs_error(after=False), 4),
                                      max=round(result.max_abs_error(after=False), 4)),
        residual_after=ResidualError(median=round(result.median_abs_error(after=True), 4),
                                     max=round(result.max_abs_error(after=True), 4)),
        figures=[FigureRow(run=r.run, figure=r.figure, measured=round(r.measured, 3),  # type: ignore[arg-type]
                           before=round(r.before, 3), after=round(r.after, 3)) for r in result.residuals],
        startup=startup_fit(bp, starts))
    path = folder / key.file_name()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(calibration_yaml(file), encoding="utf-8")
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot write the calibration ({exc.strerror})") from None
    return CalibrationResult(path, file, result)


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
