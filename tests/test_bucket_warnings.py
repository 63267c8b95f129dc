"""An SLO threshold inside one of its histogram's buckets gets a review warning naming the threshold and the bounds
around it: vLLM fixes its buckets (no flag), and `histogram_quantile()` only interpolates inside a bucket."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from blueprints.catalog.metrics import MetricRecord, load_metric_catalog
from blueprints.review.report.stack import render_markdown

VLLM = "vllm/vllm-openai:v0.24.0"


def family(name: str) -> MetricRecord:
    [record] = [m for m in load_metric_catalog().engine_for_image(VLLM).metrics if m.name == name]
    return record


def bucket_lines(report) -> list[str]:
    return [w for w in report.warnings if "histogram_quantile() interpolates" in w]


def test_vllm_buckets_are_recorded_as_the_engine_builds_them():
    ttft = family("vllm:time_to_first_token_seconds").buckets
    itl = family("vllm:inter_token_latency_seconds").buckets
    assert ttft[ttft.index(1.0) + 1] == 2.5 and len(ttft) == 22  # loggers.py:762-785
    assert itl[:4] == (0.01, 0.025, 0.05, 0.075) and len(itl) == 19  # loggers.py:795-815
    assert family("vllm:request_time_per_output_token_seconds").buckets == itl  # loggers.py:825-845


def test_a_threshold_between_bounds_is_bracketed_and_one_on_a_bound_is_not():
    ttft = family("vllm:time_to_first_token_seconds")
    assert ttft.bracket(1.5) == (1.0, 2.5)
    assert ttft.bracket(0.0005) == (0.0, 0.001)
    assert ttft.bracket(2.5) is None and ttft.bracket(1.0) is None  # exact: le="2.5" counts it
    assert ttft.bracket(5000.0) is None  # beyond the last bound: the +Inf bucket, no estimate at all
    assert family("vllm:num_requests_running").bracket(1.5) is None  # a gauge: no buckets


def test_buckets_must_be_a_histograms_ascending_bounds():
    with pytest.raises(ValidationError, match="strictly ascending"):
        MetricRecord(name="x_seconds", type="histogram", unit="seconds", buckets=(1.0, 0.5))
    with pytest.raises(ValidationError, match="strictly ascending"):
        MetricRecord(name="x", type="gauge", unit="seconds", buckets=(1.0,))


def test_chat_assistant_prod_warns_on_its_ttft_slo_and_not_on_its_itl_slo(bundled_previews):
    report = bundled_previews["chat-assistant-prod"]
    slo = report.blueprint.slo
    assert (slo.ttft_p95_ms, slo.itl_p95_ms) == (1500, 50)  # the requirements' SLOs
    [line] = bucket_lines(report)  # 50 ms is ITL's bound 0.05: exact
    assert line.startswith("alert TTFTP95AboveSLO: its threshold 1.5 s lies inside vllm 0.24.0's "
                           "vllm:time_to_first_token_seconds bucket (1, 2.5] s")
    assert "real p95" in line and "(1 s or 2.5 s)" in line
    assert report.clean  # a warning, not a blocking finding
    assert line in render_markdown(report)  # the pull request's review shows it


def test_every_bundled_vllm_slo_inside_a_bucket_is_warned_about_and_no_other(bundled_previews):
    checked = 0
    for stack, report in bundled_previews.items():
        if report.is_platform or report.archetype != "vllm-gpu":
            continue
        expected = set()
        for name, slo_ms, alert in (("vllm:time_to_first_token_seconds", report.blueprint.slo.ttft_p95_ms,
                                     "TTFTP95AboveSLO"),
                                    ("vllm:inter_token_latency_seconds", report.blueprint.slo.itl_p95_ms,
                                     "ITLP95AboveSLO")):
            bracket = family(name).bracket(slo_ms / 1000) if slo_ms else None
            if bracket:
                expected.add(f"alert {alert}: its threshold {slo_ms / 1000:g} s lies inside vllm 0.24.0's {name} "
                             f"bucket ({bracket[0]:g}, {bracket[1]:g}] s")
        assert {line.split(": histogram_quantile")[0] for line in bucket_lines(report)} == expected, stack
        checked += 1
    assert checked >= 5
