"""`blueprint calibrate`: benchmark runs -> the capacity model's correction factors -> the next plan.

Every result file here is constructed, not measured (marked so: `measured: false`, or a client `label` starting with
CONSTRUCTED); calibrations built from them go to tmp_path, never to stacks/calibration/.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blueprints.capacity.correction import (
    STEP_TIME_RANGE, TTFT_FLOOR_RANGE, MeasuredRun, ReplicaSetup, fit, predicted, replay,
)
from blueprints.capacity.physics import Correction
from blueprints.capacity.replica import replica_model
from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.contracts.calibration_file import (
    Calibration, CalibrationFile, Calibrations, calibration_dir, load_calibrations, parse_calibration,
)
from blueprints.contracts.consistency import model_architecture
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.core.errors import CalibrationError
from blueprints.review.report.stack import plan_summary
from blueprints.workspace import plan_requirements_file
from tests.benchmark_standins import model_result_file, model_runs
from tests.conftest import PLAN_DATE, ROOT

STACK = "chat-assistant-prod"
RESULT = ROOT / "tests/data/benchmark-results/chat-assistant-prod/2026-12-03.json"
# the client's own JSON of one of the bundled file's runs, named after its rate (which follows the plan)
(RAW,) = (ROOT / "tests/data/benchmark-results/vllm-bench-serve").glob("openai-chat-*qps-llama-3-1-8b-*.json")
REQUIREMENTS = ROOT / "stacks/requirements/chat-assistant.yaml"
runner = CliRunner()
#: The requests runs[2] of the bundled result file sent, and failures among them: 5 %, and the fewest above the 1 %
#: `blueprint calibrate` allows.
SENT = json.loads(RESULT.read_text())["runs"][2]["num_prompts"]
MANY_FAILED, FEW_FAILED = math.ceil(0.05 * SENT), SENT // 100 + 1
#: The stack's GPU, and another one.
GPU = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml").compute.gpu
OTHER_GPU = "l40s" if GPU == "h100" else "h100"


def _bp():
    return read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")


def _per_replica_peak(bp) -> float:
    """The stack's planned per-replica peak, requests/s: its peak over its planned replicas."""
    return bp.model.traffic.peak_requests_per_s / bp.compute.replicas


def _setup(bp) -> ReplicaSetup:
    catalog = load_catalog()
    e = bp.engine
    return ReplicaSetup(arch=model_architecture(bp.model.catalog_id, bp.model.architecture, catalog),
                        gpu=catalog.gpu(bp.compute.gpu), precision=bp.model.precision,
                        quantization=bp.model.quantization, tensor_parallel_size=e.tensor_parallel_size,
                        kv_cache_fp8=e.kv_cache_dtype == "fp8", gpu_memory_utilization=e.gpu_memory_utilization,
                        max_num_seqs=e.max_num_seqs, max_num_batched_tokens=e.max_num_batched_tokens,
                        max_model_len=e.max_model_len)


def _calibrate(*args: str, stack: str = STACK):
    return runner.invoke(app, ["calibrate", "--stack", stack, "--stacks-dir", str(ROOT / "stacks"), *args])


def _words(result) -> str:
    return " ".join(result.output.split())


def test_the_fit_recovers_known_factors_from_runs_the_model_generated(tmp_path):
    truth = Correction(step_time=1.6, ttft_floor=1.4)
    setup = _setup(_bp())
    runs = []
    for rate in (1.0, 2.5, 4.0):
        probe = MeasuredRun("r", rate, 120, 1200, 300, 0.9, 1.0, 1.0, 1.0)
        result = replay(setup, probe, truth)
        runs.append(MeasuredRun(f"{rate}", rate, 120, 1200, 300, 0.9, predicted(result, "output_tokens_per_s"),
                                predicted(result, "median_ttft_ms"), predicted(result, "median_itl_ms"),
                                saturated=result.measured / result.duration_s < 0.9 * rate))
    found = fit(setup, tuple(runs))
    assert found.correction.step_time == pytest.approx(1.6, rel=0.02)
    assert found.correction.ttft_floor == pytest.approx(1.4, rel=0.05)
    assert found.median_abs_error(after=False) > 0.2  # the uncorrected model is far off these runs
    assert found.max_abs_error(after=True) < 0.04  # the TTFT floor within 3 % (two rounds of golden sections)
    assert found.at_bound == ()


def test_recorded_vllm_bench_serve_results_are_read_in_v0_24_0_format(tmp_path):
    # the client's own JSON of each run of a model-generated sweep, labelled CONSTRUCTED as the bundled one is: two
    # runs below the planned per-replica peak, 120 s each (240 and 720 requests: in shorter runs the Poisson arrivals
    # and the last requests' latency alone can bring the lightest below SATURATED_SHARE of its rate), and one far past
    # what the replica serves, 30 s (720 requests: held back at any length, 0.54-0.58 of its rate at 20 s to 120 s)
    bp = _bp()
    peak = _per_replica_peak(bp)
    below = model_runs(STACK, Correction(1.1, 1.0), rates=tuple(round(f * peak, 3) for f in (0.3, 0.9)),
                       duration_s=120)["runs"]
    (past,) = model_runs(STACK, Correction(1.1, 1.0), rates=(round(3.6 * peak, 3),), duration_s=30)["runs"]
    sweep = [*below, {**past, "date": "20261203-120000"}]  # dated as the sweep's third run
    files = []
    for i, run in enumerate(sweep):
        files.append(tmp_path / f"openai-chat-{run['request_rate']}qps-llama-3-1-8b-{run['date']}.json")
        files[-1].write_text(json.dumps({**run, "label": "CONSTRUCTED: the capacity model's replay"}))
    result = _calibrate(*map(str, files), "--out", str(tmp_path / "cal"))
    assert result.exit_code == 0, result.output
    (written,) = (tmp_path / "cal").glob("*.yaml")
    assert written.name == f"llama-3.1-8b-{bp.compute.gpu}-v0.24.0-tp1-bf16.yaml"  # the stack's GPU
    (file,) = [c.file for c in load_calibrations(tmp_path / "cal").entries]
    assert [(s.format, s.measured, s.runs_used, s.date.isoformat()) for s in file.sources] == [
        ("vllm-bench-serve", False, 1, "2026-12-03")] * 3  # their label says CONSTRUCTED
    measured = {(r.run, r.figure): r.measured for r in file.figures}
    first = sweep[0]
    assert measured[(files[0].as_posix(), "median_itl_ms")] == round(first["median_itl_ms"], 3)
    assert measured[(files[0].as_posix(), "median_ttft_ms")] == round(first["median_ttft_ms"], 3)
    held_back = [(f.as_posix(), "output_tokens_per_s") in measured for f in files]
    assert held_back == [r["request_throughput"] < 0.9 * r["request_rate"] for r in sweep]
    assert held_back == [False, False, True]  # 3.6x the peak asked, far less done: its throughput is the replica's
    assert file.step_time == pytest.approx(1.1, rel=0.02) and file.at_bound == []


def test_a_result_file_is_fitted_and_a_capped_run_is_left_out(tmp_path):
    data = model_runs(STACK, Correction(1.2, 1.0), rates=(1.0, 2.5, 4.0, 6.0))
    cap = data["settings"]["max_concurrency"]
    data["runs"][3]["max_concurrent_requests"] = cap  # the client's cap reached: requests queued in the client
    data["runs"][1].update(completed=149, failed=1)  # 1 of 150 failed: 0.67 %, at most 1 %: fitted
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    result = _calibrate(str(path), "--out", str(tmp_path / "cal"))
    assert result.exit_code == 0, result.output
    file = load_calibrations(tmp_path / "cal").entries[0].file
    (source,) = file.sources
    assert source.runs_used == 3 and not source.measured
    assert "runs[3]" in source.left_out[0] and f"max_concurrency {cap} was reached" in source.left_out[0]
    assert file.residual_after.median <= 0.02 < file.residual_before.median
    assert file.step_time == pytest.approx(1.2, rel=0.02)
    assert file.measured_with.max_num_seqs == data["target"]["max_num_seqs"]  # the measured flags


def test_a_half_speed_result_makes_the_next_plan_cost_more_and_say_why(tmp_path):
    out = tmp_path / "cal"
    peak = _per_replica_peak(_bp())
    half = model_result_file(tmp_path, STACK, Correction(2.0, 1.0),
                             rates=tuple(round(f * peak, 3) for f in (0.7, 1.75, 2.8, 4.2)))
    result = _calibrate(str(half), "--out", str(out), "--constructed", "--accept-shift")
    assert result.exit_code == 0, result.output
    cals = load_calibrations(out, relative_to=tmp_path)
    assert cals.entries[0].file.step_time == pytest.approx(2.0, rel=0.03)
    before = {bp.environment: bp for bp in _plan(Calibrations()).blueprints}["prod"]
    after = {bp.environment: bp for bp in _plan(cals).blueprints}["prod"]
    assert after.planned_monthly_usd > before.planned_monthly_usd  # the planned peak (not a cooldown's overshoot)
    # At half speed the calibrated hardware needs more replicas (its capacity per replica falls), enough that it
    # costs more than the runner-up the uncalibrated plan named by more than --switch-threshold: the next plan is
    # that runner-up, at its price.
    (runner_up,) = [re.fullmatch(r"next cheapest: (\S+) at \$([\d,]+)/month for GPU nodes", r)
                    for r in before.rationale if r.startswith("next cheapest: ")]
    assert after.compute.instance_type == runner_up[1] != before.compute.instance_type
    nodes = after.predictions.cost_lines[0]  # the planned peak's nodes (the cost line: the simulated day's peak)
    assert f"{after.planned_nodes * nodes.usd_per_hour * load_catalog().hours_per_month:,.0f}" == runner_up[2]
    (switch,) = [r for r in after.rationale if r.startswith(f"switched from {before.compute.instance_type} ")]
    kept, moved = re.search(r"the existing hardware would cost [\d.]+ % more \(\$([\d,]+) vs \$([\d,]+)/month\), "
                            r"beyond --switch-threshold 5; the node pool is replaced", switch).groups()
    assert moved == f"{after.planned_monthly_usd:,.0f}" and float(kept.replace(",", "")) > 1.05 * float(
        moved.replace(",", ""))
    assert float(kept.replace(",", "")) > before.planned_monthly_usd  # the calibrated H100 needs more nodes
    # the calibration that applies to the hardware it leaves, and what it changed
    assert f"({before.compute.instance_type} calibrated on 2026-12-03 runs of chat-assistant-prod (constructed, not " \
           "measured): capacity per replica " in switch and "(step time x2, TTFT floor x" in switch


def _plan(calibrations: Calibrations):
    return plan_requirements_file(REQUIREMENTS, as_of=PLAN_DATE, policy_dir=ROOT / "policies/config",
                                  stacks_dir=ROOT / "stacks", calibrations=calibrations)


def _calibration(step_time: float, ttft_floor: float = 1.0) -> Calibrations:
    data = {"key": {"model": "llama-3.1-8b", "gpu": "l40s", "engine_image": "vllm/vllm-openai:v0.24.0",
                    "tensor_parallel_size": 1, "precision": "bf16"},
            "step_time": step_time, "ttft_floor": ttft_floor,
            "sources": [{"file": "tests/data/benchmark-results/chat-assistant-prod/2026-12-03.json",
                         "stack": STACK, "date": "2026-12-03", "measured": False, "format": "benchmark-result",
                         "runs_used": 5}],
            "measured_with": {"max_num_seqs": 71, "max_num_batched_tokens": 512, "max_model_len": 8192,
                              "kv_cache_dtype": "auto", "gpu_memory_utilization": 0.9},
            "fitted_on": "constructed for this test", "residual_before": {"median": 0.3, "max": 0.5},
            "residual_after": {"median": 0.05, "max": 0.1},
            "figures": [{"run": "runs[0]", "figure": "median_itl_ms", "measured": 26.8, "before": 25.4,
                         "after": 26.8}]}
    return Calibrations((Calibration("stacks/calibration/x.yaml", CalibrationFile.model_validate(data)),))


def test_the_plan_uses_a_matching_calibration_and_says_so_in_rationale_and_plan_md():
    plain = {bp.environment: bp for bp in _plan(Calibrations()).blueprints}
    faster = {bp.environment: bp for bp in _plan(_calibration(0.8)).blueprints}
    prod, dev = faster["prod"], faster["dev"]
    # A calibrated L40S needs no production margin: cheaper than the uncalibrated plan, sized at the band's
    # pessimistic edge.
    assert plain["prod"].predictions.capacity_margin is not None
    assert plain["prod"].predictions.capacity_correction is None
    assert prod.compute.gpu == "l40s" and prod.predictions.capacity_correction is not None
    assert prod.predictions.capacity_margin is None and prod.planned_monthly_usd < plain["prod"].planned_monthly_usd
    assert prod.predictions.capacity_correction.step_time == 0.8
    summary = prod.predictions.capacity_correction.summary
    was, now = summary.split("capacity per replica ")[1].split(" tok/s")[0].split(" -> ")
    assert float(now.replace(",", "")) > float(was.replace(",", ""))
    assert summary in prod.rationale
    rows = dict(plan_summary(types.SimpleNamespace(is_platform=False, blueprint=prod, subject=prod)))
    assert rows["calibration"] == summary
    # dev runs on g5 (A10G): no calibration matches, and its plan is the uncalibrated one
    assert dev.predictions.capacity_correction is None
    assert dev.model_dump() == plain["dev"].model_dump()


def test_the_recorded_correction_is_what_the_review_and_fleet_replay():
    bp = {b.environment: b for b in _plan(_calibration(0.8)).blueprints}["prod"]
    stripped = bp.model_copy(update={"predictions": bp.predictions.model_copy(update={"capacity_correction": None})})
    assert replica_model(bp).capacity_rps > 1.1 * replica_model(stripped).capacity_rps


def test_an_uncalibrated_plan_writes_no_correction_key_and_a_calibrated_one_does():
    bp = _bp()
    assert "capacity_correction" not in bp.model_dump(mode="json")["predictions"]
    calibrated = {b.environment: b for b in _plan(_calibration(0.8)).blueprints}["prod"]
    assert calibrated.model_dump(mode="json")["predictions"]["capacity_correction"]["step_time"] == 0.8


def _edited(tmp_path: Path, source: Path, edit) -> Path:
    data = json.loads(source.read_text())
    edit(data)
    path = tmp_path / source.name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("edit", "words"), [
    (lambda d: d["target"].update(catalog_id="qwen2.5-7b"),
     ["target.catalog_id", "'qwen2.5-7b'", "'llama-3.1-8b'"]),
    (lambda d: d["target"].update(gpu=OTHER_GPU), ["target.gpu", f"'{OTHER_GPU}'", f"'{GPU}'"]),
    (lambda d: d.update(stack="chat-assistant-dev"), ["stack", "chat-assistant-dev", STACK]),
    (lambda d: d["runs"][2].update(completed=SENT - MANY_FAILED, failed=MANY_FAILED),
     ["runs[2].failed", f"{MANY_FAILED} of {SENT} requests failed"]),
    (lambda d: d["runs"][2].update(completed=SENT - FEW_FAILED, failed=FEW_FAILED),
     ["runs[2].failed", f"{FEW_FAILED} of {SENT} requests failed, more than 1%", "failed requests take no time"]),
    # the workload the stack is planned with, as `blueprint benchmark` sends it (chat-assistant-prod: no prefix,
    # 1,200 and 300 tokens, range ratio 0.9)
    (lambda d: d["settings"].update(random_prefix_len=48_000), ["settings.random_prefix_len: measured 48000, "
                                                                "planned 0", "prompts of no shared prefix and 1200 "
                                                                "random tokens", "`blueprint benchmark "
                                                                "chat-assistant-prod`, which sends the planned"]),
    (lambda d: d["settings"].update(random_input_len=2000), ["settings.random_input_len: measured 2000, planned "
                                                             "1200"]),
    (lambda d: d["settings"].update(random_output_len=100), ["settings.random_output_len: measured 100, planned "
                                                             "300"]),
    (lambda d: d["settings"].update(random_range_ratio=0.5), ["settings.random_range_ratio: measured 0.5, planned "
                                                              "0.9"]),
    (lambda d: d["target"].update(model="llama-3-1-8b-instruct"), ["target.model: measured 'llama-3-1-8b-instruct', "
                                                                   "planned 'llama-3-1-8b'"]),
    (lambda d: d["target"].update(engine_image="vllm/vllm-openai:v0.11.0"),
     ["target.engine_image", "'vllm/vllm-openai:v0.11.0' is not the stack's"]),
    (lambda d: d["settings"].update(approximations=["model.traffic.session_turns=4: ..."]),
     ["settings.approximations: measured with --approximate-workload (model.traffic.session_turns=4"]),
    # runs whose token totals are not what their settings sent (settings edited after the run)
    (lambda d: d["runs"][0].update(total_input_tokens=2 * d["runs"][0]["total_input_tokens"]),
     ["runs[0].total_input_tokens: ", "prompt tokens per completed request; its settings send 1200 on average (+-"]),
    (lambda d: d["runs"][4].update(total_output_tokens=100 * d["runs"][4]["completed"]),
     ["runs[4].total_output_tokens: 100 output tokens per completed request"]),
    (lambda d: d["runs"][1].update(completed=12), ["runs[1].completed", "12 requests completed, fewer than 20"]),
    (lambda d: d["runs"][0].update(median_ttft_ms=-1), ["runs[0].median_ttft_ms", "greater than or equal to 0 (got -1)"]),
    (lambda d: d["runs"][0].pop("median_itl_ms"), ["runs[0].median_itl_ms", "missing"]),
    (lambda d: [r.update(max_concurrent_requests=d["settings"]["max_concurrency"]) for r in d["runs"]],
     ["no run left to fit"]),
])
def test_a_bad_result_file_exits_2_naming_file_field_and_fix(tmp_path, edit, words):
    path = _edited(tmp_path, RESULT, edit)
    result = _calibrate(str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "CalibrationError" in result.output and str(path.name) in result.output
    for w in words:
        assert w in result.output
    assert not (tmp_path / "out").exists()


def test_a_raw_run_of_another_model_exits_2_naming_both(tmp_path):
    path = _edited(tmp_path, RAW, lambda d: d.update(model_id="mistral-7b"))
    result = _calibrate(str(path), "--out", str(tmp_path))
    assert result.exit_code == 2
    assert "model_id" in result.output and "'mistral-7b'" in result.output and "'llama-3-1-8b'" in result.output


def test_not_json_and_an_unknown_key_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = _calibrate(str(bad), "--out", str(tmp_path))
    assert result.exit_code == 2 and "not JSON (line 1" in result.output
    extra = _edited(tmp_path, RAW, lambda d: d.update(input_lens=[1, 2]))
    result = _calibrate(str(extra), "--out", str(tmp_path))
    assert result.exit_code == 2 and "input_lens" in result.output and "--save-detailed" in result.output


def test_constructed_data_is_refused_in_the_projects_calibrations(tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / f"Pulumi.{STACK}.yaml").write_text((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    result = runner.invoke(app, ["calibrate", "--stack", STACK, "--stacks-dir", str(stacks), str(RESULT)])
    assert result.exit_code == 2 and "constructed, not measured" in result.output and "--out DIR" in result.output
    assert not calibration_dir(stacks).exists()


def test_a_sagemaker_stack_is_not_calibrated(tmp_path):
    result = runner.invoke(app, ["calibrate", "--stack", "prototype-summarizer-pilot", "--stacks-dir",
                                 str(ROOT / "stacks"), str(RESULT), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "prototype-summarizer-pilot is a sagemaker-endpoint stack" in result.output
    assert "calibration corrects the vLLM capacity model of vllm-gpu stacks" in result.output


@pytest.mark.parametrize(("edit", "words"), [
    (lambda t: t.replace("step_time: 0.8", "step_time: 7.0"), ["step_time", "less than or equal to 5"]),
    (lambda t: t.replace("precision: bf16", "precision: bf17"), ["key.precision"]),
    (lambda t: t + "extra: 1\n", ["extra: unknown field"]),
])
def test_a_bad_calibration_file_is_refused_naming_file_and_field(tmp_path, edit, words):
    from blueprints.contracts.calibration_file import calibration_yaml

    file = _calibration(0.8).entries[0].file
    path = tmp_path / file.key.file_name()
    path.write_text(edit(calibration_yaml(file)))
    with pytest.raises(CalibrationError) as info:
        load_calibrations(tmp_path)
    assert str(path) in str(info.value)
    for w in words:
        assert w in str(info.value)


def test_a_calibration_file_named_after_another_key_is_refused(tmp_path):
    from blueprints.contracts.calibration_file import calibration_yaml

    (tmp_path / "other.yaml").write_text(calibration_yaml(_calibration(0.8).entries[0].file))
    with pytest.raises(CalibrationError, match="llama-3.1-8b-l40s-v0.24.0-tp1-bf16.yaml; rename it"):
        load_calibrations(tmp_path)


def test_result_files_of_different_engine_flags_are_not_fitted_together(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    second = _edited(other, RESULT, lambda d: d["target"].update(max_num_seqs=64))
    result = _calibrate(str(RESULT), str(second), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "target" in result.output and "'max_num_seqs': 64" in result.output and "calibrate them separately" \
        in result.output


def _faster(tmp_path: Path, times: float) -> Path:
    """The bundled result file's sweep (its rates, the model's replay at step time x1.1) in 30 s runs, every latency
    (`*_ms`) divided by `times`, marked measured. (30 s, not the bundled file's 120 s: a fit to latencies 5x shorter
    stops at the same bound, step time x0.209 against the bundled file's x0.203, in a quarter of the replays.)"""
    rates = tuple(json.loads(RESULT.read_text())["settings"]["request_rates"])
    data = model_runs(STACK, Correction(1.1, 1.0), rates=rates, duration_s=30)
    data.update(measured=True, note=f"CONSTRUCTED for a test: the model's replay at step time x1.1, latencies / "
                f"{times:g}, marked measured")
    for run in data["runs"]:
        run.update({k: v / times for k, v in run.items() if k.endswith("_ms") and v is not None})
    path = tmp_path / "faster.json"
    path.write_text(json.dumps(data))
    return path


# The client's JSON of one run in the default run (a fit of 2 s); the bundled result file's five 120 s runs (10 s) in
# `make test-slow`.
@pytest.mark.parametrize("path", [RAW, pytest.param(RESULT, marks=pytest.mark.slow)], ids=["raw", "result"])
def test_the_bundled_constructed_results_are_the_models_replay_and_fit_back_within_the_band(tmp_path, path):
    # tests/data/benchmark-results: the capacity model's replay of chat-assistant-prod's plan at step time x1.1
    result = _calibrate(str(path), "--out", str(tmp_path / "cal"))
    assert result.exit_code == 0, result.output
    file = load_calibrations(tmp_path / "cal").entries[0].file
    assert file.step_time == pytest.approx(1.1, rel=0.03) and file.at_bound == []
    assert file.residual_after.median < 0.03 and file.accepted_shift is None  # within the plan's band


def test_a_run_5x_faster_than_the_model_marked_measured_is_refused_and_the_next_plan_is_unchanged(tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / f"Pulumi.{STACK}.yaml").write_text((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    path = _faster(tmp_path, 5)
    result = runner.invoke(app, ["calibrate", "--stack", STACK, "--stacks-dir", str(stacks), str(path)])
    assert result.exit_code == 2, result.output
    words = _words(result)
    step, floor = (float(x) for x in re.search(r"step time x([\d.]+), TTFT floor x([\d.]+)", words).groups())
    assert step < 0.3 and floor == TTFT_FLOOR_RANGE[0]  # latencies 5x shorter: the floor at its lower bound
    # the refusal names the first factor at a bound (the step time when both are)
    name, (lo, hi) = (("step_time", STEP_TIME_RANGE) if step <= STEP_TIME_RANGE[0] * 1.01 else
                      ("ttft_floor", TTFT_FLOOR_RANGE))
    assert f"faster.json: {name}: the fit stopped at x{lo:g}, the lower bound of its range ({lo:g}-{hi:g})" in words
    assert "`blueprint benchmark chat-assistant-prod`; nothing was written" in words
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 3  # one message
    assert not calibration_dir(stacks).exists()
    found = load_calibrations(calibration_dir(stacks))
    assert found.entries == ()
    prod = {bp.environment: bp for bp in _plan(found).blueprints}["prod"]
    committed = _bp()
    assert prod.model_dump() == committed.model_dump()  # the next plan is the committed one
    # what the refusal prevented: the factors the fit stopped at would have shrunk the fleet at peak
    shrunk = {bp.environment: bp for bp in _plan(_calibration(step, floor)).blueprints}["prod"]
    assert shrunk.planned_monthly_usd < 0.5 * prod.planned_monthly_usd


def test_a_fit_that_leaves_more_than_a_quarter_of_the_error_is_refused(tmp_path):
    peak = _per_replica_peak(_bp())
    rates = tuple(round(f * peak, 3) for f in (0.35, 0.7, 1.05, 1.4, 1.75))
    # 25 s runs (59 to 292 requests): the contradiction is the 1.7x put on the figures, not in how long they ran (40 %
    # to 45 % of the error is left at 25 s to 120 s); each run's throughput is clear of SATURATED_SHARE by over 1 %
    data = model_runs(STACK, Correction(1.0, 1.0), rates=rates, duration_s=25)
    for run, factor in zip(data["runs"], (1.7, 1.7, 1.0, 1 / 1.7, 1 / 1.7)):  # runs that contradict each other
        run.update(median_itl_ms=run["median_itl_ms"] * factor, median_ttft_ms=run["median_ttft_ms"] * factor)
    path = tmp_path / "contradicting.json"
    path.write_text(json.dumps(data))
    result = _calibrate(str(path), "--out", str(tmp_path / "cal"))
    assert result.exit_code == 2, result.output
    words = _words(result)
    found = re.search(r"contradicting\.json: residual_after\.median: (\d+)% of error is left after the fit "
                      r"\(the median over (\d+) fitted figures of \|predicted / measured - 1\|, at most 25%; "
                      r"step time x([\d.]+), TTFT floor x([\d.]+)\): two factors cannot explain these runs", words)
    assert found, words
    left, figures, step, floor = int(found[1]), int(found[2]), float(found[3]), float(found[4])
    assert left > 25
    # every run's median TTFT and ITL, and the output tokens/s of a run the replica held back
    assert figures == sum(2 + (r["request_throughput"] < 0.9 * r["request_rate"]) for r in data["runs"])
    assert STEP_TIME_RANGE[0] < step < STEP_TIME_RANGE[1] and TTFT_FLOOR_RANGE[0] < floor < TTFT_FLOOR_RANGE[1]
    assert "stopped at" not in words  # not at a bound: the factors alone would not have caught it
    assert not (tmp_path / "cal").exists()


def test_a_run_counted_twice_is_refused(tmp_path):
    shown = RESULT.relative_to(ROOT)  # as the calibration records it
    runs = json.loads(RESULT.read_text())["runs"]
    twice = _calibrate(str(RESULT), str(RESULT), "--out", str(tmp_path / "cal"))
    assert twice.exit_code == 2
    first = runs[0]
    assert f"{RESULT}: runs[0]: the run of {shown} runs[0] again (same date {first['date']}, " \
           f"{first['request_rate']} requests/s, {first['num_prompts']} prompts and the same figures; the same file " \
           "given twice): a run counted twice weighs twice in the fit; give each run once" in _words(twice)
    # the client's JSON of a run next to the result file that holds it (its label aside, the same run)
    raw = json.loads(RAW.read_text())
    (held,) = [i for i, r in enumerate(runs) if r["date"] == raw["date"]]
    both = _calibrate(str(RESULT), str(RAW), "--out", str(tmp_path / "cal"))
    assert both.exit_code == 2
    assert f"{RAW.name}: run.date" not in _words(both)
    assert f"{RAW.name}: run: the run of {shown} runs[{held}] again" in _words(both)
    # two runs of one file
    data = model_runs(STACK, Correction(1.0, 1.0), rates=(1.0, 2.0, 3.0))
    data["runs"][1] = data["runs"][0]
    data["settings"]["request_rates"][1], data["settings"]["num_prompts"][1] = 1.0, data["runs"][0]["num_prompts"]
    path = tmp_path / "copied.json"
    path.write_text(json.dumps(data))
    within = _calibrate(str(path), "--out", str(tmp_path / "cal"))
    assert within.exit_code == 2
    assert f"copied.json: runs[1]: the run of {path} runs[0] again" in _words(within)
    assert not (tmp_path / "cal").exists()


def test_a_result_dated_after_today_is_refused(tmp_path):
    from blueprints.operate.calibrate import calibrate

    bp, out = _bp(), tmp_path / "cal"
    path = model_result_file(tmp_path, STACK, Correction(1.0, 1.0), rates=(1.0, 2.0, 6.0))  # dated 2026-12-03
    with pytest.raises(CalibrationError) as refused:
        calibrate(bp, [path], project_root=None, stacks_dir=ROOT / "stacks", out_dir=out, today=dt.date(2026, 12, 2))
    assert str(refused.value) == (f"{path}: date: 2026-12-03: after today (2026-12-02, UTC): a benchmark from the "
                                  "future was not measured; fix the date or leave this file out")
    data = json.loads(path.read_text())
    data["runs"][1]["date"] = "20261205-110000"  # the client's clock, two days ahead
    ahead = tmp_path / "ahead.json"
    ahead.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=r"ahead.json: runs\[1\].date: 20261205-110000: after today "
                                               r"\(2026-12-03, UTC\)"):
        calibrate(bp, [ahead], project_root=None, stacks_dir=ROOT / "stacks", out_dir=out, today=dt.date(2026, 12, 3))
    assert not out.exists()
    data["runs"][1]["date"] = "20261204-110000"  # a day ahead: a client clock in a zone east of UTC
    ahead.write_text(json.dumps(data))
    done = calibrate(bp, [ahead], project_root=None, stacks_dir=ROOT / "stacks", out_dir=out,
                     today=dt.date(2026, 12, 3))
    assert done.path.exists() and done.file.step_time == pytest.approx(1.0, rel=0.02)
    # the command takes today's date (UTC)
    data["date"] = "2099-01-01"
    ahead.write_text(json.dumps(data))
    result = _calibrate(str(ahead), "--out", str(tmp_path / "cli"))
    assert result.exit_code == 2 and "date: 2099-01-01: after today" in _words(result)


def test_a_stack_planned_with_a_prefix_refuses_runs_without_it_and_fits_what_blueprint_benchmark_sends(tmp_path):
    stack = "rag-assistant-generator-dev"  # traffic.shared_prefix_tokens 640 of a 2,600-token mean prompt
    # what `blueprint benchmark` sent before it reproduced prompt reuse: the whole mean prompt random, nothing cached
    data = json.loads(RESULT.read_text())
    data["stack"] = stack
    gen = read_stack_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    data["target"].update(model="generator", gpu=gen.compute.gpu, instance_type=gen.compute.instance_type,
                          max_num_seqs=gen.engine.max_num_seqs, max_num_batched_tokens=gen.engine.max_num_batched_tokens)
    data["settings"].update(random_input_len=2600, random_output_len=350)
    old = tmp_path / "no-prefix.json"
    old.write_text(json.dumps(data))
    result = _calibrate(str(old), "--out", str(tmp_path / "cal"), stack=stack)
    assert result.exit_code == 2
    assert "no-prefix.json: settings.random_prefix_len: measured 0, planned 640: rag-assistant-generator-dev is " \
           "planned with prompts of a 640-token shared prefix and 1960 random tokens (mean), outputs of 350, range " \
           "ratio 0.9 (served model 'generator'), and a fit on another workload would correct the model with " \
           "it; benchmark with `blueprint benchmark rag-assistant-generator-dev`, which sends the planned workload" \
           in _words(result)
    # the client's own JSON does not record the prefix it sent
    raw = _calibrate(str(_edited(tmp_path, RAW, lambda d: d.update(model_id="generator"))), "--out",
                     str(tmp_path / "cal"), stack=stack)
    assert raw.exit_code == 2 and "random_prefix_len: not recorded" in _words(raw)
    # what `blueprint benchmark` writes for the stack now: fitted, each run replayed on its uncached part
    path = model_result_file(tmp_path, stack, Correction(1.5, 1.0), rates=(0.4, 1.0, 2.0, 3.0), duration_s=120)
    settings = json.loads(path.read_text())["settings"]
    assert (settings["random_prefix_len"], settings["random_input_len"]) == (640, 1960)
    done = _calibrate(str(path), "--out", str(tmp_path / "cal"), stack=stack)
    assert done.exit_code == 0, done.output
    file = load_calibrations(tmp_path / "cal").entries[0].file
    assert file.step_time == pytest.approx(1.5, rel=0.02) and file.at_bound == []


def test_a_fit_moving_a_production_stacks_capacity_beyond_its_band_needs_accept_shift_and_is_reviewed_first(tmp_path):
    from blueprints.operate.calibrate import capacity_shift
    from blueprints.review.changes import review_changes
    from blueprints.review.report.changes import review_lines, review_markdown

    bp = _bp()
    assert bp.production and bp.predictions.capacity_margin is not None  # sized at the band's pessimistic edge
    # Runs 30 % faster than the central estimate: the capacity per replica within the SLO rises beyond the band, and
    # the next plan would shrink a production fleet by more than the model's error explains. 30 s runs (60 to 360
    # requests) fit back x0.7 as 120 s runs do, and the shift is computed from the fitted factors alone.
    path = model_result_file(tmp_path, STACK, Correction(0.7, 1.0), rates=(2.0, 5.0, 8.0, 12.0), duration_s=30)
    refused = _calibrate(str(path), "--out", str(tmp_path / "cal"))
    assert refused.exit_code == 2, refused.output
    words = _words(refused)
    assert f"move {STACK}'s capacity per replica within the SLO from" in words and "beyond the plan's band of 14%" \
        in words and "--accept-shift" in words and "nothing was written" in words
    assert not (tmp_path / "cal").exists()
    accepted = _calibrate(str(path), "--out", str(tmp_path / "cal"), "--accept-shift")
    assert accepted.exit_code == 0, accepted.output
    [written] = (tmp_path / "cal").iterdir()
    shift = parse_calibration(written.read_text(), source=str(written)).accepted_shift
    assert shift is not None and shift.stack == STACK and shift.band == pytest.approx(0.14, abs=0.005)
    assert shift.calibrated_rps > shift.planned_rps * (1 + shift.band)
    # A calibration the band explains (the central estimate itself) needs no decision.
    assert capacity_shift(bp, Correction(1.0, 1.0)) is None
    # The next plan carries the decision, and its review shows it before anything else.
    replanned = {b.environment: b for b in _plan(Calibrations((Calibration(str(written), parse_calibration(
        written.read_text(), source=str(written))),))).blueprints}["prod"]
    assert replanned.predictions.capacity_correction.accepted_shift == shift.words()
    review = review_changes(STACK, bp.model_dump(mode="json"), replanned)
    assert review.capacity_shift == shift.words()
    assert review_lines(review)[0] == ("warning", "a calibration moves the capacity beyond the plan's band: "
                                       + shift.words())
    assert review_markdown(review).split("\n")[2] == "> [!IMPORTANT]"  # right under the heading


def test_a_floor_the_runs_cannot_see_stays_x1_and_the_file_says_so():
    # An L40S replica with 1,200-token prompts in 256-token chunks: prefill makes the first token, the frontend only
    # a few per cent of it, so x1.25 on the TTFT floor moves the runs' median TTFTs by under FLOOR_MIN_EFFECT. A
    # fitted floor there was noise (x1.61 for a true x1.4 on noise-free runs): it stays x1 and the fit says so.
    import dataclasses

    from blueprints.capacity.correction import FLOOR_MIN_EFFECT, _floor_effect

    setup = dataclasses.replace(_setup(read_stack_config(ROOT / "stacks" / "Pulumi.partner-api-prod.yaml")),
                                max_num_seqs=42, max_num_batched_tokens=256)
    truth = Correction(step_time=1.6, ttft_floor=1.4)
    runs = []
    for rate in (0.36, 0.72, 1.07, 1.43):
        result = replay(setup, MeasuredRun("r", rate, 120, 1200, 300, 0.9, 1.0, 1.0, 1.0), truth)
        runs.append(MeasuredRun(f"{rate}", rate, 120, 1200, 300, 0.9, predicted(result, "output_tokens_per_s"),
                                predicted(result, "median_ttft_ms"), predicted(result, "median_itl_ms"),
                                saturated=result.measured / result.duration_s < 0.9 * rate))
    assert _floor_effect(setup, tuple(runs), 1.6) < FLOOR_MIN_EFFECT
    found = fit(setup, tuple(runs))
    assert found.unpinned == ("ttft_floor",) and found.correction.ttft_floor == 1.0
    assert found.correction.step_time == pytest.approx(1.6, rel=0.02)
    assert found.max_abs_error(after=True) < 0.06  # the floor's few per cent of TTFT left unexplained
    # The bundled H100 replica's frontend is a large part of its TTFT: there the runs pin it.
    h100 = _setup(_bp())
    assert _floor_effect(h100, tuple(runs), 1.6) > FLOOR_MIN_EFFECT


def test_calibrate_says_when_the_runs_do_not_pin_the_ttft_floor_and_records_it(tmp_path, monkeypatch):
    # The plumbing: with a threshold no floor reaches, the bundled runs leave it unpinned (the threshold itself is
    # proven on a prefill-bound replica above).
    import blueprints.capacity.correction as correction

    monkeypatch.setattr(correction, "FLOOR_MIN_EFFECT", 10.0)
    peak = _per_replica_peak(_bp())
    runs = model_result_file(tmp_path, STACK, Correction(1.1, 1.4), rates=tuple(round(f * peak, 3) for f in
                                                                                (0.25, 0.5, 0.75, 1.0)))
    result = _calibrate(str(runs), "--out", str(tmp_path / "cal"), "--constructed", "--accept-shift")
    assert result.exit_code == 0, result.output
    assert "the runs do not pin the TTFT floor" in _words(result) and "so it stays x1" in _words(result)
    [written] = load_calibrations(tmp_path / "cal", relative_to=tmp_path).entries
    assert written.file.unpinned == ["ttft_floor"] and written.file.ttft_floor == 1.0
    assert "unpinned:\n- ttft_floor" in (tmp_path / "cal" / written.path.rsplit("/", 1)[-1]).read_text()


def test_calibrate_says_whether_plans_will_read_what_it_wrote(tmp_path):
    peak = _per_replica_peak(_bp())
    rates = tuple(round(f * peak, 3) for f in (0.25, 0.5, 0.75, 1.0))
    runs = model_result_file(tmp_path, STACK, Correction(1.05, 1.0), rates=rates)
    elsewhere = _calibrate(str(runs), "--out", str(tmp_path / "cal"), "--constructed")
    assert elsewhere.exit_code == 0, elsewhere.output
    assert f"`blueprint plan` reads {calibration_dir(ROOT / 'stacks')} only" in _words(elsewhere)
    assert "now sizes" not in elsewhere.output
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / f"Pulumi.{STACK}.yaml").write_text((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    # the same runs at the same path, marked measured as a real run's file is: the same fit (`fit` remembers it by
    # the runs, each labelled with its file's path), so only where the calibration goes differs
    data = json.loads(runs.read_text())
    runs.write_text(json.dumps({**data, "measured": True, "note": "CONSTRUCTED for a test, marked measured"}))
    result = runner.invoke(app, ["calibrate", "--stack", STACK, "--stacks-dir", str(stacks), str(runs)])
    assert result.exit_code == 0, result.output
    assert "`blueprint plan` now sizes llama-3.1-8b on h100" in _words(result)
    assert len(list(calibration_dir(stacks).glob("*.yaml"))) == 1
