"""The capacity model against published measurements (blueprints/catalog/calibration-points*.yaml), gated like a
regression test on the error it has on points no fit saw: each point predicted with the constants fitted without its
source group (leave one source out, blueprints/capacity/fitting.py), as committed in
blueprints/catalog/capacity-fit.yaml. The tests re-predict every held-out point with the current code (a change to
the model that moves any is caught: re-run `benchmarks/sizing.py --cross-validate --write`), hold the median and p90
|error| of each regime, GPU and of all points (known-off ones included) within the thresholds written here, hold the
committed constants to the fit on every point, and the band plans state to the figures. CI re-runs the fit itself
(`benchmarks/sizing.py --cross-validate --check`)."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from blueprints.capacity.calibration import (
    REGIMES,
    errors_by_regime,
    load_points,
    median_abs_error,
    p90_abs_error,
    parse_points,
    predict,
)
from blueprints.capacity.fitting import (
    CONSTANTS,
    ENGINE_CONSTANTS,
    ENGINE_GRID,
    Fitter,
    committed,
    engine_fit_digest,
    engine_fits,
    engine_held_out,
    fit_digest,
    fitted_points,
    load_engine_fits,
    load_fit_record,
    point_facts,
    predictions,
)
from blueprints.capacity.physics import replica_model
from blueprints.capacity.physics import band_cell
from blueprints.capacity.uncertainty import band_errors, quantile
from blueprints.core import defaults
from blueprints.core.errors import CatalogError
from tests.conftest import ROOT

#: (median, p90) |error| each regime, and all points, may reach held out (known-off points included). Measured
#: 2026-12-07 (issue 34), see the README's table. Lower them when the model improves; never raise them to let a
#: change through.
#: Measured with the committed fit: closed 10.9/54.0 %, open 33.1/66.4 % (20 points, 13 of them from vLLM 0.6.0's
#: blog, whose host time only that group moves, so held out it falls back to the prior), burst 11.8/56.0 %, all
#: 12.1/58.2 %.
THRESHOLDS = {"closed-loop": (0.12, 0.57), "open-loop": (0.35, 0.69), "burst": (0.13, 0.59), "all": (0.13, 0.61)}
#: The median |error| each GPU with more than 20 points may reach held out.
GPU_MEDIAN = 0.22
#: (median, p90) |error| each other engine's published points may reach, predicted with the constants fitted on vLLM's
#: points alone and the engine's own ENGINE_CONSTANTS fitted without the point's source group (`fitting.engine_held_out`).
#: Measured 2026-12-07 (issue 37), with each engine's own KV admission (SGLang's decaying new_token_ratio,
#: TensorRT-LLM's GUARANTEED_NO_EVICT), the performance overview's FP8 KV cache and the fitted chat cost: SGLang
#: 20.3 / 104.3 % over 151 points, TensorRT-LLM 22.7 / 80.4 % over 192 (the issue's 25 % median target).
ENGINE_THRESHOLDS = {"sglang": (0.21, 1.05), "tensorrt-llm": (0.23, 0.81)}


@pytest.fixture(scope="module")
def points(catalog):
    return load_points(catalog)


@pytest.fixture(scope="module")
def record():
    return load_fit_record()


@pytest.fixture(scope="module")
def all_held_out(points, record):
    """Every point held out, of every engine."""
    return record.held_out(points)


@pytest.fixture(scope="module")
def held_out(all_held_out):
    """vLLM's points held out: the gates below are vLLM's (each other engine has its own, `ENGINE_MEDIAN`)."""
    return [c for c in all_held_out if defaults.ENGINE_PROFILES[c.point.engine_profile]["tables"] == "vllm"]


def test_the_committed_fit_was_made_from_these_points_and_constants(points, record):
    assert record.digest == fit_digest(points), ("the points or the fitted constants changed since "
                                                 "blueprints/catalog/capacity-fit.yaml: run benchmarks/sizing.py "
                                                 "--cross-validate --write")
    fitted = fitted_points(points)
    groups = {p.source_group for p in fitted}
    assert {g for g, _, _ in record.folds} == groups and len(groups) >= 15
    assert sum(len(held) for _, _, held in record.folds) == len(fitted)


def test_every_held_out_point_is_what_the_model_predicts_with_its_folds_constants(catalog, points, record):
    facts = {f.point.id: f for f in point_facts(points, catalog)}
    moved = []
    for group, values, held in record.folds:
        chosen = tuple(facts[pid] for pid in held)
        for f, value in zip(chosen, predictions(chosen, catalog, values)):
            if value != pytest.approx(held[f.point.id], rel=1e-6):
                moved.append(f"{f.point.id}: committed {held[f.point.id]:.6g}, now {value:.6g}")
    assert not moved, ("the model's code moved held-out predictions (run benchmarks/sizing.py --cross-validate "
                       f"--write): {moved[:5]}")


def test_a_fold_leaves_its_groups_points_out_of_every_fit(catalog, points, record):
    # A constant moved only by one group's points falls back to its prior when that group is left out.
    fitter = Fitter(points, catalog)
    for c in CONSTANTS:
        groups = {f.point.source_group for f in fitter.moved[c.name] if not f.point.known_off}
        if len(groups) == 1:
            [only] = groups
            [values] = [v for g, v, _ in record.folds if g == only]
            assert values[c.name] == c.prior, c.name


def test_the_committed_constants_are_the_fit_on_every_point(catalog, record):
    assert committed(catalog) == pytest.approx(record.full, rel=1e-9)


@pytest.mark.parametrize("regime", [*REGIMES, "all"])
def test_held_out_error_per_regime_stays_within_its_threshold(held_out, regime):
    found = {r.regime: r for r in errors_by_regime(held_out)}
    median, p90 = THRESHOLDS[regime]
    assert found[regime].median <= median, f"{regime}: median |error| {found[regime].median:.1%} > {median:.1%}"
    assert found[regime].p90 <= p90, f"{regime}: p90 |error| {found[regime].p90:.1%} > {p90:.1%}"


def test_held_out_error_per_gpu_stays_within_its_threshold(held_out):
    by_gpu: dict[str, list] = {}
    for c in held_out:
        by_gpu.setdefault(c.point.args.gpu, []).append(c)
    worse = {g: f"{median_abs_error(cs):.1%}" for g, cs in by_gpu.items()
             if len(cs) > 20 and median_abs_error(cs) > GPU_MEDIAN}
    assert not worse


@pytest.fixture(scope="module")
def engines_held_out(catalog, points):
    return engine_held_out(points, catalog)


def test_the_committed_engine_fits_were_made_from_these_points_and_are_the_profiles_values(catalog, points):
    fits = load_engine_fits()
    assert {f.profile for f in fits} == {c.path[1] for c in ENGINE_CONSTANTS}
    for fit in fits:
        assert fit.digest == engine_fit_digest(points, fit.profile), (
            f"{fit.profile}'s points or constants changed since blueprints/catalog/engine-fit.yaml: run "
            "benchmarks/sizing.py --cross-validate --write")
        assert committed(catalog, ENGINE_CONSTANTS) | fit.full == committed(catalog, ENGINE_CONSTANTS)
        mine = [p for p in points if p.engine_profile == fit.profile]
        assert {g for g, _, _ in fit.folds} == {p.source_group for p in mine}
        assert sorted(pid for _, _, held in fit.folds for pid in held) == sorted(p.id for p in mine)
        for _, values, _ in fit.folds:  # every fold's values are on the grid
            assert all(v in ENGINE_GRID[name] for name, v in values.items())


def test_an_engine_fold_never_sees_its_own_groups_figures(catalog, points):
    # Two small publications per engine: scaling one group's published figures tenfold moves the other group's fold
    # (fitted on the scaled group alone), never the values the scaled group's own fold was fitted with.
    groups = {"sglang-0.5": ("gpustack-perf-lab-qwen3-8b-h100-latency", "gpustack-perf-lab-qwen3-32b-h100"),
              "trtllm-1.x": ("gpustack-perf-lab-qwen3-8b-h100-latency", "gpustack-perf-lab-qwen3-14b-h100")}
    chosen = tuple(p for p in points if p.source_group in groups.get(p.engine_profile, ()))
    scaled = tuple(p.model_copy(update={"value": p.value * 10}) if p.source_group == groups[p.engine_profile][0]
                   else p for p in chosen)
    for before, after in zip(engine_fits(chosen, catalog), engine_fits(scaled, catalog)):
        folds_before, folds_after = ({g: v for g, v, _ in f.folds} for f in (before, after))
        left_out = groups[before.profile][0]
        other = groups[before.profile][1]
        assert folds_before[left_out] == folds_after[left_out]
        assert folds_before[other] != folds_after[other]


def test_each_engines_held_out_point_is_what_its_folds_values_predict(engines_held_out):
    # engine_held_out re-predicts each point with the values fitted without its source group: the committed
    # predictions must be what the code gives now.
    recorded = {pid: v for f in load_engine_fits() for _, _, held in f.folds for pid, v in held.items()}
    moved = [f"{c.point.id}: committed {recorded[c.point.id]:.6g}, now {c.predicted:.6g}"
             for cs in engines_held_out.values() for c in cs
             if c.point.id in recorded and c.predicted != pytest.approx(recorded[c.point.id], rel=1e-6)]
    assert not moved, f"run benchmarks/sizing.py --cross-validate --write: {moved[:5]}"


@pytest.mark.parametrize("engine", sorted(ENGINE_THRESHOLDS))
def test_each_other_engines_points_stay_within_its_threshold_on_constants_fitted_without_them(engine,
                                                                                           engines_held_out):
    rows = engines_held_out[engine]
    assert len(rows) >= 100 and len({c.point.source_group for c in rows}) >= 4
    median, p90 = ENGINE_THRESHOLDS[engine]
    assert median_abs_error(rows) <= median and p90_abs_error(rows) <= p90


def test_plans_state_the_band_and_error_the_held_out_points_show_for_their_step_source(catalog, points,
                                                                                      all_held_out, engines_held_out):
    kinds = {f.point.id: band_cell(defaults.ENGINE_PROFILES[f.profile]["tables"], f.step_source)
             for f in point_facts(points, catalog)}
    assert set(kinds.values()) == set(defaults.CAPACITY_UNCERTAINTY)
    for kind, cell in defaults.CAPACITY_UNCERTAINTY.items():
        rows = [c for c in [*all_held_out, *(c for cs in engines_held_out.values() for c in cs)]
                if kinds[c.point.id] == kind]
        assert cell["points"] == len(rows)
        assert cell["median"] == pytest.approx(median_abs_error(rows), abs=0.005)
        assert cell["p90"] == pytest.approx(p90_abs_error(rows), abs=0.005)
        for family in ("ttft", "itl", "throughput"):
            assert cell[family] == pytest.approx(quantile(band_errors(rows, family)), abs=0.005), (kind, family)


def test_the_known_off_points_are_few_explained_and_counted(held_out):
    listed = [c for c in held_out if c.point.known_off]
    assert len(listed) <= 0.1 * len(held_out)
    assert all(len(c.point.known_off) >= 40 for c in listed)
    assert statistics.median(abs(c.error) for c in listed) > statistics.median(abs(c.error) for c in held_out)


def test_every_point_names_its_source_group_engine_regime_and_definition(points):
    assert len(points) >= 300
    assert {p.regime for p in points} == set(REGIMES)
    for p in points:
        assert p.source and p.source_group and p.engine and p.measurement and p.value > 0
        assert p.engine_profile in defaults.ENGINE_PROFILES


def test_the_pinned_engine_is_fitted_on_releases_of_its_line_and_older_engines_on_their_own(points):
    pinned = {p.engine for p in points if p.engine_profile == defaults.PINNED_ENGINE}
    assert any("0.10" in e for e in pinned) and any("0.11" in e for e in pinned) and any("0.23" in e for e in pinned)
    engines = {p.engine_profile for p in points}
    assert {defaults.PINNED_ENGINE, "vllm-0.6.0", "vllm-0.6.3-offline", "vllm-0.4.3"} <= engines


def test_llmperf_counts_are_corrected_for_its_llama2_tokenizer_not_fitted(catalog, points):
    [itl] = [p for p in points if p.id == "a10g-llama3-8b-c1-itl"]
    assert itl.tokenizer_inflation == 1.15
    uncorrected = itl.model_copy(update={"tokenizer_inflation": 1.0})
    # Counting 15 % more tokens than the model generated makes the published ITL 15 % lower.
    assert predict(itl, catalog) == pytest.approx(predict(uncorrected, catalog) / 1.15, rel=0.03)


def test_a_burst_is_measured_as_the_benchmark_measures_it(catalog, points):
    from blueprints.capacity.calibration import simulate_point

    [rps] = [p for p in points if p.id == "blog060-h100_8b-sharegpt-inf-rps"]
    run = simulate_point(rps, catalog)
    assert run.measured == rps.args.num_prompts == 500  # every prompt of the run, none left out as warm-up
    assert predict(rps, catalog) == pytest.approx(500 / run.duration_s)


def test_a_capped_burst_keeps_at_most_its_concurrency_in_flight(catalog, points):
    from blueprints.capacity.calibration import simulate_point

    [capped] = [p for p in points if p.id == "k8-l4-q05-c8-output"]
    assert capped.regime == "burst" and capped.args.concurrency == 8
    run = simulate_point(capped, catalog)
    assert run.measured == capped.args.num_prompts and run.mean_running <= 8


@pytest.mark.parametrize("gpu", ["a10g", "a100-40gb", "h100", "l40s"])
def test_decode_never_beats_the_bandwidth_floor(catalog, gpu):
    from blueprints.capacity.physics import Correction
    from blueprints.requirements.model import Precision

    arch = catalog.model("llama-3.1-8b").architecture
    g = catalog.gpu(gpu)
    floor_s = (arch.params_b - arch.embedding_params_b / 2) * 1e9 * 2 / (g.bandwidth_gb_per_s * 1e9)
    # Even a calibration that claims steps 5x faster than the model stops at the bytes over the bandwidth.
    fast = replica_model(arch, g, precision=Precision.BF16, tensor_parallel_size=1, correction=Correction(0.2, 1))
    assert fast.step_s(1, 256) >= floor_s * 0.999
    assert replica_model(arch, g, precision=Precision.BF16, tensor_parallel_size=1).step_s(1, 256) > floor_s


def test_planner_never_shards_a_model_over_a_degree_that_does_not_divide_its_heads(catalog):
    from blueprints.plan.options.llm import tp_degrees
    from blueprints.capacity.sizing import tensor_parallel_problems

    qwen = catalog.model("qwen2.5-7b").architecture  # 28 attention heads
    assert tp_degrees(8, qwen, managed=False) == [1, 2, 4]
    assert tp_degrees(8, qwen, managed=True) == []
    assert tensor_parallel_problems(qwen, 4) == []


BAD_POINT = """schema_version: 2
points:
  - {id: good, source: a published benchmark table, source_group: a-table, engine: vllm 0.24.0,
     engine_profile: vllm-0.24, regime: closed-loop, measurement: serving, metric: itl_ms, stat: mean, value: 10,
     args: {model: llama-3.1-8b, precision: bf16, gpu: h100, tensor_parallel: 1, concurrency: 1, input_tokens: 100,
            output_tokens: 100}}
  - {id: typo-gpu, source: a published benchmark table, source_group: a-table, engine: vllm 0.24.0,
     engine_profile: vllm-0.24, regime: open-loop, measurement: serving, metric: itl_ms, stat: mean, value: 10,
     args: {model: llama-3.1-8b, precision: bf16, gpu: h100, tensor_parallel: 1, input_tokens: 100, output_tokens: 100,
            num_prompts: 100, request_rate: -1}}
"""


def test_a_malformed_point_is_refused_naming_the_point_and_the_field(catalog):
    with pytest.raises(CatalogError, match=r"points\[1\] \(typo-gpu\)\.args\.request_rate: .*greater than 0"):
        parse_points(BAD_POINT, source="points.yaml", catalog=catalog)
    unknown = BAD_POINT.replace("request_rate: -1", "request_rate: 2").replace("gpu: h100, tensor_parallel: 1, input",
                                                                               "gpu: h10, tensor_parallel: 1, input")
    with pytest.raises(CatalogError, match=r"points\[1\] \(typo-gpu\)\.args\.gpu: 'h10' is not one of"):
        parse_points(unknown, source="points.yaml", catalog=catalog)
    missing = BAD_POINT.replace("num_prompts: 100, request_rate: -1", "num_prompts: 100")
    with pytest.raises(CatalogError, match=r"points\[1\] \(typo-gpu\): regime open-loop needs args\.request_rate"):
        parse_points(missing, source="points.yaml", catalog=catalog)


@pytest.mark.parametrize("edit, field", [
    ("regime: open-loop", "regime"),
    ("source_group: a-table, engine: vllm 0.24.0,\n     engine_profile: vllm-0.24, regime: open-loop", "source_group"),
], ids=["unknown-regime", "missing-source"])
def test_a_point_with_an_unknown_regime_or_no_source_is_refused_naming_the_field(catalog, edit, field):
    if field == "regime":
        bad = BAD_POINT.replace("regime: open-loop", "regime: sometimes").replace("request_rate: -1",
                                                                                    "request_rate: 2")
    else:
        bad = BAD_POINT.replace("request_rate: -1", "request_rate: 2").replace(
            "source: a published benchmark table, source_group: a-table, engine: vllm 0.24.0,\n"
            "     engine_profile: vllm-0.24, regime: open-loop", "engine: vllm 0.24.0,\n"
            "     engine_profile: vllm-0.24, regime: open-loop")
    with pytest.raises(CatalogError, match=rf"points\[1\] \(typo-gpu\)\.{field}"):
        parse_points(bad, source="points.yaml", catalog=catalog)


def test_the_sizing_benchmark_exits_2_on_a_malformed_calibration_file(tmp_path):
    bad = tmp_path / "points.yaml"
    bad.write_text(BAD_POINT)
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sizing.py"), "--points", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "points[1] (typo-gpu).args.request_rate" in done.stderr and "Traceback" not in done.stderr
