"""Set 5 of the calibration points (blueprints/catalog/calibration-points-5.yaml): published SGLang and TensorRT-LLM
measurements. They load through the same parser as every set, each names the publication it was read from (its
repository, commit, file and line) and its group, and runs on an engine profile of its own engine."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from blueprints.capacity.calibration import load_points, load_points_file
from tests.conftest import ROOT

POINTS = ROOT / "blueprints" / "catalog" / "calibration-points-5.yaml"
#: owner/name@40-hex commit:path:Lline, then optionally the table cell or CSV column in parentheses.
SOURCE = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}:[\w./-]+:L\d+( \(.+\))?$")


@pytest.fixture(scope="module")
def points(catalog):
    return load_points_file(POINTS, catalog)


def test_set_5_loads_and_is_part_of_the_bundled_points(catalog, points):
    bundled = {p.id for p in load_points(catalog)}
    assert {p.id for p in points} <= bundled


def test_every_point_names_its_source_line_and_group(points):
    for p in points:
        assert SOURCE.match(p.source), (p.id, p.source)
        assert p.source_group and p.engine and p.note, p.id
    # One group per publication: a group never mixes repositories.
    repos = {}
    for p in points:
        repos.setdefault(p.source_group, set()).add(p.source.split("@")[0])
    assert all(len(r) == 1 for r in repos.values()), repos


def test_each_engine_has_at_least_30_points_on_its_own_profile(points):
    profiles = Counter(p.engine_profile for p in points)
    assert set(profiles) == {"sglang-0.5", "trtllm-1.x"}
    assert min(profiles.values()) >= 30
    for p in points:
        assert p.engine.startswith({"sglang-0.5": "sglang 0.", "trtllm-1.x": "tensorrt-llm"}[p.engine_profile]), p.id


def test_trtllm_bench_points_are_bursts_of_the_pages_request_counts(points):
    bench = [p for p in points if p.source_group == "trtllm-perf-overview"]
    assert len(bench) == 40
    for p in bench:
        assert p.regime == "burst" and p.metric == "output_tokens_per_s" and p.args.concurrency is None
        assert p.args.input_tokens_p95 is None and p.args.output_tokens_p95 is None  # --input-stdev 0 --output-stdev 0
    # perf-overview.md's $num_requests table: 30000 requests at 128/128, 1000 at 20000/2000.
    assert {p.args.num_prompts for p in bench if p.args.input_tokens == 128 and p.args.output_tokens == 128} == {30000}
    assert {p.args.num_prompts for p in bench if p.args.input_tokens == 20000} == {1000}
