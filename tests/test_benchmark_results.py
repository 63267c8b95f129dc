"""The benchmark result file (`benchmarks/results/<stack>/<date>.json`): the recorded file in the pinned vLLM's
`vllm bench serve --save-result` format loads, and anything else is refused naming the file and the field."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from blueprints.core.errors import BenchmarkError
from blueprints.contracts.benchmark_result import (
    LATENCY_METRICS, MAX_RESULT_FILE_BYTES, VllmBenchRun, load_result, result_json, result_path,
)
from tests.conftest import ROOT

RECORDED = ROOT / "tests" / "data" / "benchmark-results" / "chat-assistant-prod" / "2026-12-03.json"
#: The keys v0.24.0's `vllm bench serve --save-result` writes for a generation run without --save-detailed,
#: --metadata or ramp-up (vllm/benchmarks/serve.py main_async and benchmark()), for
#: `--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,95,99`.
CLIENT_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
    "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
    "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
    "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "std")),
    *(f"p{p}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for p in (50, 90, 95, 99))}


def recorded_json() -> dict:
    return json.loads(RECORDED.read_text())


def test_the_recorded_file_is_in_the_clients_exact_format_and_says_it_was_constructed():
    result = load_result(RECORDED)
    assert result.measured is False and result.note.startswith("CONSTRUCTED, NOT MEASURED")
    assert result.client.vllm_version == "0.24.0" and "serve.py" in result.client.source
    for run in recorded_json()["runs"]:
        assert set(run) == CLIENT_KEYS
        assert run["completed"] + run["failed"] == run["num_prompts"]
        assert run["request_goodput"] <= run["request_throughput"]
    assert result_json(result) == recorded_json()  # read and written back unchanged


def test_a_file_written_before_the_prefix_was_recorded_reads_as_no_prefix_and_no_approximation(tmp_path):
    data = recorded_json()
    assert data["settings"]["random_prefix_len"] == 0 and data["settings"]["approximations"] == []
    del data["settings"]["random_prefix_len"], data["settings"]["approximations"]
    old = load_result(write(tmp_path, data))
    assert old.settings.random_prefix_len == 0 and old.settings.approximations == []
    bad = recorded_json()
    bad["settings"]["random_prefix_len"] = -1
    with pytest.raises(BenchmarkError, match="settings.random_prefix_len"):
        load_result(write(tmp_path, bad))


def test_percentiles_are_read_by_metric_and_percentile():
    run = load_result(RECORDED).runs[3]
    assert run.percentile_ms("ttft", 95) == recorded_json()["runs"][3]["p95_ttft_ms"]
    assert run.percentile_ms("ttft", 99.9) is None
    assert set(LATENCY_METRICS) == {"ttft", "tpot", "itl", "e2el"}


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["runs"][0].update(spec_decode_acceptance_rate=0.7), "runs[0]: unknown key 'spec_decode_acceptance_rate'"),
    (lambda d: d["runs"][0].update(p95_ttft_ms="fast"), "runs[0]: p95_ttft_ms: expected a non-negative number"),
    (lambda d: d["runs"][0].pop("request_goodput"), "runs[0].request_goodput"),
    (lambda d: d["runs"][0].update(completed=10_000), "exceed num_prompts"),
    (lambda d: d["runs"].pop(), "5 run(s), 6 request rate(s)"),
    (lambda d: d["runs"][1].update(request_rate=9.0), "runs[1] ran at 9.0 requests/s"),
    (lambda d: d.update(schema_version=2), "schema_version"),
    (lambda d: d["settings"].update(random_range_ratio=1.0), "settings.random_range_ratio"),
    (lambda d: d["runs"][0].update(duration=float("nan")), "runs[0].duration"),
])
def test_a_file_not_in_the_format_is_refused_naming_the_field(tmp_path, edit, message):
    data = recorded_json()
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(BenchmarkError) as exc:
        load_result(path)
    assert str(path) in str(exc.value) and message in str(exc.value)


def test_unreadable_files_are_refused_with_the_reason(tmp_path):
    with pytest.raises(BenchmarkError, match="not JSON"):
        load_result(write(tmp_path, "{not json"))
    with pytest.raises(BenchmarkError, match="cannot read"):
        load_result(tmp_path / "missing.json")
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_RESULT_FILE_BYTES + 1))
    with pytest.raises(BenchmarkError, match="at most"):
        load_result(big)


def test_a_run_as_the_client_writes_it_without_our_wrapper_validates():
    run = dict(recorded_json()["runs"][0])
    assert VllmBenchRun.model_validate(run).model_dump(mode="json", exclude_unset=True) == run


def test_result_paths_never_overwrite_a_days_earlier_run(tmp_path):
    day = dt.date(2026, 12, 3)
    first = result_path(tmp_path, "chat-assistant-prod", day)
    assert first == tmp_path / "benchmarks" / "results" / "chat-assistant-prod" / "2026-12-03.json"
    first.parent.mkdir(parents=True)
    first.write_text("{}")
    assert result_path(tmp_path, "chat-assistant-prod", day).name == "2026-12-03-2.json"


def test_every_number_of_the_format_is_bounded():
    from blueprints.contracts.benchmark_result import BenchmarkResultFile
    from tests.test_input_bounds import _bounded, numbers

    found = numbers(BenchmarkResultFile.model_json_schema())
    assert len(found) > 30
    assert [name for name, node in found if not _bounded(node)] == []
