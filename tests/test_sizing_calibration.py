"""The capacity model against published measurements (blueprints/catalog/calibration-points.yaml), gated like a
regression test: the median and p90 |error| of each regime (closed loop, open loop at a rate, saturated burst) and of
all points stay within the thresholds written here, over every point and over the points not listed as known off; a
change that makes either worse fails. Every point is within +-35 % unless listed with the reason it is off. The step
source of each GPU is the one closer to its points, and what plans state as their expected error is what the points
show."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from blueprints.capacity.calibration import (
    POINT_TOLERANCE,
    better_source,
    errors_by_regime,
    load_points,
    median_abs_error,
    p90_abs_error,
    parse_points,
    predict,
    source_errors,
)
from blueprints.capacity.measured import covered_gpus
from blueprints.capacity.physics import replica_model
from blueprints.core import defaults
from blueprints.core.errors import CatalogError
from tests.conftest import ROOT

#: (median, p90) |error| each regime may reach, over every point (known-off ones included) and over the points not
#: listed. Measured 2026-12-01 (issue 21): every point closed loop 7.4 % / 52.5 %, open loop 21.4 % / 78.0 %, burst
#: 13.3 % / 48.2 %, all 9.5 % / 62.7 %; unlisted 4.6 / 20.9, 10.5 / 25.3, 10.2 / 24.9, 7.7 / 23.1. Lower them when
#: the model improves; never raise them to let a change through.
THRESHOLDS_ALL = {"closed-loop": (0.085, 0.55), "open-loop": (0.23, 0.80), "burst": (0.14, 0.50), "all": (0.105, 0.65)}
THRESHOLDS_UNLISTED = {"closed-loop": (0.055, 0.23), "open-loop": (0.125, 0.28), "burst": (0.115, 0.27),
                       "all": (0.09, 0.25)}
#: At most this share of the points may be listed as known off.
MAX_LISTED_SHARE = 0.2


@pytest.fixture(scope="module")
def points(catalog):
    return load_points(catalog)


@pytest.fixture(scope="module")
def comparisons(catalog, points):
    from blueprints.capacity.calibration import compare

    return compare(catalog, points)


def test_every_point_names_its_source_engine_regime_and_definition(points):
    assert len(points) >= 78
    assert {p.regime for p in points} == {"closed-loop", "open-loop", "burst"}
    for p in points:
        assert p.source and p.engine and p.measurement and p.value > 0
        assert p.engine_profile in defaults.ENGINE_PROFILES


@pytest.mark.parametrize("listed, thresholds", [(True, THRESHOLDS_ALL), (False, THRESHOLDS_UNLISTED)],
                         ids=["every-point", "unlisted-points"])
def test_median_and_p90_error_per_regime_stay_within_their_thresholds(comparisons, listed, thresholds):
    found = {r.regime: r for r in errors_by_regime(comparisons, known_off=listed)}
    assert set(found) == set(thresholds)
    for regime, (median, p90) in thresholds.items():
        assert found[regime].median <= median, f"{regime}: median |error| {found[regime].median:.1%} > {median:.0%}"
        assert found[regime].p90 <= p90, f"{regime}: p90 |error| {found[regime].p90:.1%} > {p90:.0%}"


def test_each_point_is_within_35_percent_or_listed_with_its_reason(comparisons):
    outside = [f"{c.point.id}: {c.error:+.1%}" for c in comparisons
               if not c.point.known_off and abs(c.error) > POINT_TOLERANCE]
    assert not outside


def test_the_known_off_points_are_few_and_really_off(comparisons):
    listed = [c for c in comparisons if c.point.known_off]
    assert len(listed) <= MAX_LISTED_SHARE * len(comparisons)
    assert all(abs(c.error) > POINT_TOLERANCE for c in listed)  # a listed point the model now fits should be unlisted


def test_plans_state_the_error_the_points_show_for_their_step_source(catalog, comparisons):
    by_source: dict[str, list] = {"measured": [], "roofline": []}
    for c in comparisons:
        a = c.point.args
        model = replica_model(c.point.architecture or catalog.model(a.model).architecture, catalog.gpu(a.gpu),
                              precision=a.precision, quantization=a.quantization,
                              tensor_parallel_size=a.tensor_parallel, kv_cache_fp8=a.kv_cache_dtype == "fp8")
        by_source[model.source.kind].append(c)
    for kind, rows in by_source.items():
        points, listed, median, p90 = defaults.CAPACITY_EXPECTED_ERROR[kind]
        kept = [c for c in rows if not c.point.known_off]
        assert (len(rows), len(rows) - len(kept)) == (points, listed)
        assert median_abs_error(kept) == pytest.approx(median, abs=0.01)
        assert p90_abs_error(kept) == pytest.approx(p90, abs=0.01)


def _fitted() -> frozenset[str]:
    """The points benchmarks/sizing.py's FITS table fits constants to."""
    spec = importlib.util.spec_from_file_location("sizing_benchmark", ROOT / "benchmarks" / "sizing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.FITTED


def test_each_gpu_takes_the_step_source_closer_to_its_held_out_points(catalog, points):
    fitted = _fitted()
    assert "facts2-llama31-8b-h100-c1-itl" in fitted and len(fitted) < len(points) / 2
    for gpu in covered_gpus():
        count, errors = source_errors(catalog, points, gpu, fitted=fitted)
        if gpu in ("h100", "a100-80gb"):
            assert count >= 5  # both have published points the tables cover
        assert (gpu in defaults.MEASURED_STEP_GPUS) == (better_source(errors) == "measured"), (gpu, errors)


def test_llmperf_counts_are_corrected_for_its_llama2_tokenizer_not_fitted(catalog, points):
    [itl] = [p for p in points if p.id == "a10g-llama3-8b-c1-itl"]
    assert itl.tokenizer_inflation == 1.15
    uncorrected = itl.model_copy(update={"tokenizer_inflation": 1.0})
    # Counting 15 % more tokens than the model generated makes the published ITL 15 % lower.
    assert predict(itl, catalog) == pytest.approx(predict(uncorrected, catalog) / 1.15, rel=0.03)


def test_the_pinned_engine_is_calibrated_and_older_engines_are_compared_as_measured(points):
    engines = {p.engine_profile for p in points}
    assert {defaults.PINNED_ENGINE, "vllm-0.6.0", "vllm-0.6.3-offline", "vllm-0.4.3"} <= engines


def test_a_burst_is_measured_as_the_benchmark_measures_it(catalog, points):
    from blueprints.capacity.calibration import simulate_point

    [rps] = [p for p in points if p.id == "blog060-h100_8b-sharegpt-inf-rps"]
    run = simulate_point(rps, catalog)
    assert run.measured == rps.args.num_prompts == 500  # every prompt of the run, none left out as warm-up
    assert predict(rps, catalog) == pytest.approx(500 / run.duration_s)


@pytest.mark.parametrize("gpu", ["a10g", "a100-40gb", "h100", "l40s"])
def test_decode_never_beats_the_bandwidth_floor(catalog, gpu):
    from blueprints.requirements.model import Precision

    arch = catalog.model("llama-3.1-8b").architecture
    g = catalog.gpu(gpu)
    model = replica_model(arch, g, precision=Precision.BF16, tensor_parallel_size=1)
    floor_s = (arch.params_b - arch.embedding_params_b / 2) * 1e9 * 2 / (g.bandwidth_gb_per_s * 1e9)
    assert model.step_s(1, 256) > floor_s


def test_planner_never_shards_a_model_over_a_degree_that_does_not_divide_its_heads(catalog):
    from blueprints.plan.options.llm import tp_degrees
    from blueprints.capacity.sizing import tensor_parallel_problems

    qwen = catalog.model("qwen2.5-7b").architecture  # 28 attention heads
    assert tp_degrees(8, qwen, managed=False) == [1, 2, 4]
    assert tp_degrees(8, qwen, managed=True) == []
    assert tensor_parallel_problems(qwen, 4) == []


BAD_POINT = """schema_version: 2
points:
  - {id: good, source: a published benchmark table, engine: vllm 0.24.0, engine_profile: vllm-0.24,
     regime: closed-loop, measurement: serving, metric: itl_ms, stat: mean, value: 10,
     args: {model: llama-3.1-8b, precision: bf16, gpu: h100, tensor_parallel: 1, concurrency: 1, input_tokens: 100,
            output_tokens: 100}}
  - {id: typo-gpu, source: a published benchmark table, engine: vllm 0.24.0, engine_profile: vllm-0.24,
     regime: open-loop, measurement: serving, metric: itl_ms, stat: mean, value: 10,
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


def test_the_sizing_benchmark_exits_2_on_a_malformed_calibration_file(tmp_path):
    bad = tmp_path / "points.yaml"
    bad.write_text(BAD_POINT)
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sizing.py"), "--points", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "points[1] (typo-gpu).args.request_rate" in done.stderr and "Traceback" not in done.stderr
