"""`blueprint estimate`: the what-if calculator behind the sizing, as JSON or a table; bad names exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.requirements import Precision
from blueprints.sizing import estimate_llm

runner = CliRunner()
KEYS = {"fits", "weights_gib", "kv_cache_tokens", "max_concurrency", "ttft_ms", "itl_ms", "output_tokens_per_s"}
POINT_3 = ["estimate", "--model", "llama-3.1-70b", "--precision", "fp8", "--gpu", "h100", "--tensor-parallel", "2",
           "--concurrency", "1", "--input-tokens", "5000", "--output-tokens", "500"]


def test_json_output_has_exactly_the_documented_keys_and_the_capacity_models_values(catalog):
    result = runner.invoke(app, [*POINT_3, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == KEYS
    est = estimate_llm(catalog.model("llama-3.1-70b").architecture, catalog.gpu("h100"), precision=Precision.FP8,
                       tensor_parallel_size=2, concurrency=1, input_tokens=5000, output_tokens=500)
    assert data == {"fits": True, "weights_gib": est.weights_gib, "kv_cache_tokens": est.kv_cache_tokens,
                    "max_concurrency": est.max_concurrency, "ttft_ms": est.ttft_ms, "itl_ms": est.itl_ms,
                    "output_tokens_per_s": est.output_tokens_per_s}
    assert data["weights_gib"] == pytest.approx(65.75) and data["itl_ms"] == pytest.approx(18.6, rel=0.25)


def test_table_output_names_each_figure():
    result = runner.invoke(app, POINT_3)
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "fits", "weights_gib", "kv_cache_tokens", "max_concurrency", "ttft_ms", "itl_ms", "output_tokens_per_s"]


def test_a_70b_model_does_not_fit_one_24gb_gpu():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-70b", "--gpu", "a10g", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["fits"] is False and data["kv_cache_tokens"] == 0 and data["max_concurrency"] == 0


def test_concurrency_beyond_the_kv_cache_does_not_fit():
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--input-tokens", "8000", "--output-tokens", "1000",
            "--json"]
    small = json.loads(runner.invoke(app, args).stdout)
    big = json.loads(runner.invoke(app, [*args, "--concurrency", str(small["max_concurrency"] + 1)]).stdout)
    assert small["fits"] is True and big["fits"] is False


def test_every_catalog_gpu_name_is_accepted(catalog):
    for name in ("t4", "a10g", "l4", "l40s", "a100-40gb", "a100-80gb", "h100", "h200"):
        result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", name, "--json"])
        assert result.exit_code == 0, name


def test_an_unknown_gpu_exits_2_with_close_matches_and_the_known_names():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h10"])
    assert result.exit_code == 2
    assert "CatalogError: unknown GPU 'h10'; did you mean h100? Known: a100-40gb" in result.stderr
    assert "Traceback" not in result.output


def test_an_unknown_model_exits_2_naming_the_model():
    result = runner.invoke(app, ["estimate", "--model", "llama-9", "--gpu", "h100"])
    assert result.exit_code == 2
    assert "CatalogError: unknown model id 'llama-9'" in result.stderr


def test_an_unknown_precision_exits_2_listing_the_choices():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--precision", "fp9"])
    assert result.exit_code == 2
    assert "'fp9' is not one of" in result.stderr and "'int4'" in result.stderr


def test_a_zero_concurrency_exits_2():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "0"])
    assert result.exit_code == 2


def test_latency_figures_are_null_when_the_replica_does_not_fit():
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-70b", "--gpu", "l4", "--json"])
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and data["fits"] is False
    assert data["ttft_ms"] is None and data["itl_ms"] is None and data["output_tokens_per_s"] is None
    assert data["weights_gib"] > 100


@pytest.mark.parametrize(("tp", "message"), [
    ("3", "tensor_parallel_size=3 must be a power of two"),
    ("16", "tensor_parallel_size=16 must divide the model's 28 attention heads"),
])
def test_a_tensor_parallel_degree_vllm_cannot_use_exits_2(tp, message):
    result = runner.invoke(app, ["estimate", "--model", "qwen2.5-7b", "--gpu", "h100", "--tensor-parallel", tp])
    assert result.exit_code == 2 and message in result.output


def test_version_is_printed():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("blueprint (servingblueprints) ")
