"""`blueprint calibrate`: benchmark runs -> the capacity model's correction factors -> the next plan.

Every result file here is constructed, not measured (marked so: `measured: false`, or a client `label` starting with
CONSTRUCTED); calibrations built from them go to tmp_path, never to stacks/calibration/.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blueprints.capacity.correction import MeasuredRun, ReplicaSetup, fit, predicted, replay
from blueprints.capacity.physics import Correction
from blueprints.capacity.replica import replica_model
from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.contracts.calibration_file import (
    Calibration, CalibrationFile, Calibrations, calibration_dir, load_calibrations,
)
from blueprints.contracts.consistency import model_architecture
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.core.errors import CalibrationError
from blueprints.review.report.stack import plan_summary
from blueprints.workspace import plan_requirements_file
from tests.conftest import PLAN_DATE, ROOT

STACK = "chat-assistant-prod"
RESULT = ROOT / "tests/data/benchmark-results/chat-assistant-prod/2026-12-03.json"
RAW = ROOT / "tests/data/benchmark-results/vllm-bench-serve/openai-3.33qps-llama-3-1-8b-20261203-132139.json"
REQUIREMENTS = ROOT / "stacks/requirements/chat-assistant.yaml"
runner = CliRunner()


def _bp():
    return read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")


def _setup(bp) -> ReplicaSetup:
    catalog = load_catalog()
    e = bp.engine
    return ReplicaSetup(arch=model_architecture(bp.model.catalog_id, bp.model.architecture, catalog),
                        gpu=catalog.gpu(bp.compute.gpu), precision=bp.model.precision,
                        quantization=bp.model.quantization, tensor_parallel_size=e.tensor_parallel_size,
                        kv_cache_fp8=e.kv_cache_dtype == "fp8", gpu_memory_utilization=e.gpu_memory_utilization,
                        max_num_seqs=e.max_num_seqs, max_num_batched_tokens=e.max_num_batched_tokens,
                        max_model_len=e.max_model_len)


def _synthetic_result(tmp_path: Path, truth: Correction, *, rates=(1.0, 2.5, 4.0, 6.0), prompts=150) -> Path:
    """A result file (constructed) whose runs are the model's own replay with `truth`, in the recorded format."""
    bp = _bp()
    setup = _setup(bp)
    data = json.loads(RESULT.read_text())
    template = data["runs"][0]
    e = bp.engine
    data["target"].update(gpu=bp.compute.gpu, max_num_seqs=e.max_num_seqs, kv_cache_dtype=e.kv_cache_dtype,
                          max_num_batched_tokens=e.max_num_batched_tokens, max_model_len=e.max_model_len)
    s = data["settings"]
    s.update(request_rates=list(rates), num_prompts=[prompts] * len(rates), max_concurrency=10_000)
    runs = []
    for rate in rates:
        run = MeasuredRun("synthetic", rate, prompts, s["random_input_len"], s["random_output_len"],
                          s["random_range_ratio"], 1.0, 1.0, 1.0)
        result = replay(setup, run, truth)
        runs.append({**template, "request_rate": rate, "num_prompts": prompts, "completed": prompts, "failed": 0,
                     "max_concurrency": 10_000, "max_concurrent_requests": 50,
                     "duration": result.duration_s, "request_throughput": result.measured / result.duration_s,
                     "output_throughput": predicted(result, "output_tokens_per_s"),
                     "median_ttft_ms": predicted(result, "median_ttft_ms"),
                     "median_itl_ms": predicted(result, "median_itl_ms")})
    data["runs"] = runs
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps(data))
    return path


def _calibrate(*args: str):
    return runner.invoke(app, ["calibrate", "--stack", STACK, "--stacks-dir", str(ROOT / "stacks"), *args])


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
    assert found.max_abs_error(after=True) < 0.02
    assert found.at_bound == ()


def test_a_recorded_vllm_bench_serve_result_is_read_in_v0_24_0_format(tmp_path):
    result = _calibrate(str(RAW), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    (written,) = tmp_path.glob("*.yaml")
    assert written.name == "llama-3.1-8b-l40s-v0.24.0-tp1-bf16.yaml"
    (file,) = [c.file for c in load_calibrations(tmp_path).entries]
    (source,) = file.sources
    assert (source.format, source.measured, source.runs_used, source.date.isoformat()) == (
        "vllm-bench-serve", False, 1, "2026-12-03")  # its label says CONSTRUCTED
    measured = {r.figure: r.measured for r in file.figures}
    raw = json.loads(RAW.read_text())
    assert measured["median_itl_ms"] == raw["median_itl_ms"]
    assert measured["median_ttft_ms"] == raw["median_ttft_ms"]
    assert "output_tokens_per_s" not in measured  # 3.02 of 3.33 requests/s done: not held back, so not fitted


def test_a_result_file_is_fitted_and_a_capped_run_is_left_out(tmp_path):
    result = _calibrate(str(RESULT), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    file = load_calibrations(tmp_path).entries[0].file
    (source,) = file.sources
    assert source.runs_used == 5 and not source.measured
    assert source.left_out and "runs[5]" in source.left_out[0] and "max_concurrency 142" in source.left_out[0]
    assert file.residual_after.median <= file.residual_before.median
    assert file.measured_with.max_num_seqs == 71  # the measured flags, not today's plan


def test_a_half_speed_result_makes_the_next_plan_cost_more_and_say_why(tmp_path):
    out = tmp_path / "cal"
    result = _calibrate(str(_synthetic_result(tmp_path, Correction(2.0, 1.0))), "--out", str(out), "--constructed")
    assert result.exit_code == 0, result.output
    cals = load_calibrations(out, relative_to=tmp_path)
    assert cals.entries[0].file.step_time == pytest.approx(2.0, rel=0.03)
    before = {bp.environment: bp for bp in _plan(Calibrations()).blueprints}["prod"]
    after = {bp.environment: bp for bp in _plan(cals).blueprints}["prod"]
    assert after.planned_monthly_usd > 1.2 * before.planned_monthly_usd  # the planned peak (not a cooldown's overshoot)
    (switch,) = [r for r in after.rationale if r.startswith("switched from g6e.xlarge")]
    assert "the calibration of 2026-12-03 runs of chat-assistant-prod (constructed, not measured) applies to " \
           "g6e.xlarge: step time x2" in switch  # the existing hardware no longer meets the SLO, and why


def _plan(calibrations: Calibrations):
    return plan_requirements_file(REQUIREMENTS, as_of=PLAN_DATE, policy_dir=ROOT / "policies/config",
                                  stacks_dir=ROOT / "stacks", calibrations=calibrations)


def _calibration(step_time: float) -> Calibrations:
    data = {"key": {"model": "llama-3.1-8b", "gpu": "l40s", "engine_image": "vllm/vllm-openai:v0.24.0",
                    "tensor_parallel_size": 1, "precision": "bf16"},
            "step_time": step_time, "ttft_floor": 1.0,
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
    assert prod.compute.gpu == "l40s" and prod.predictions.capacity_correction is not None
    assert prod.predictions.capacity_correction.step_time == 0.8
    assert prod.predictions.requests_per_s_capacity / prod.compute.replicas > \
        plain["prod"].predictions.requests_per_s_capacity / plain["prod"].compute.replicas
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
    (lambda d: d["target"].update(gpu="h100"), ["target.gpu", "'h100'", "'l40s'"]),
    (lambda d: d.update(stack="chat-assistant-dev"), ["stack", "chat-assistant-dev", STACK]),
    (lambda d: d["runs"][2].update(completed=270, failed=30), ["runs[2].failed", "30 of 300 requests failed"]),
    (lambda d: d["runs"][1].update(completed=12), ["runs[1].completed", "12 requests completed, fewer than 20"]),
    (lambda d: d["runs"][0].update(median_ttft_ms=-1), ["runs[0].median_ttft_ms", "greater than or equal to 0 (got -1)"]),
    (lambda d: d["runs"][0].pop("median_itl_ms"), ["runs[0].median_itl_ms", "missing"]),
    (lambda d: [r.update(max_concurrent_requests=142) for r in d["runs"]], ["no run left to fit"]),
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
