"""The measured vLLM step tables (blueprints/catalog/step_tables/, blueprints/capacity/measured.py): what they cover,
that they match the catalog they were generated from, how a step reads them, and why a replica gets the roofline."""

from __future__ import annotations

import importlib.util
import json
from importlib import resources

import pytest

from blueprints.capacity.measured import FINGERPRINT, covered_gpus, fingerprint, lookup
from blueprints.capacity.physics import replica_model
from blueprints.requirements.model import Precision, Quantization

TABLES = resources.files("blueprints.catalog").joinpath("step_tables")


ENGINES = ("vllm", "sglang", "tensorrt-llm")
#: The catalog GPUs AIConfigurator 0.12.0 measured every engine on.
GPUS = ("a100-80gb", "b200", "b300", "h100", "h200", "l40s", "rtx-pro-6000")


def _raw(gpu: str, engine: str = "vllm") -> dict:
    return json.loads(TABLES.joinpath(engine, f"{gpu}.json").read_text())


def test_the_tables_cover_the_gpus_the_library_measured_each_engine_on():
    """The versions are AIConfigurator 0.12.0's query defaults (systems/query_versions.yaml), a100_sxm's overrides."""
    versions = {e: {g: _raw(g, e)["engine_version"] for g in covered_gpus(e)} for e in ENGINES}
    current = {"vllm": "0.24.0", "sglang": "0.5.14", "tensorrt-llm": "1.3.0rc20"}
    a100 = {"vllm": "0.14.0", "sglang": "0.5.10", "tensorrt-llm": "1.0.0"}
    for engine in ENGINES:
        assert versions[engine] == {**{g: current[engine] for g in GPUS}, "a100-80gb": a100[engine]}, engine
    assert all(_raw(g, e)["engine"] == e for e in ENGINES for g in covered_gpus(e))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("gpu", GPUS)
def test_every_table_was_generated_for_a_catalog_model_as_the_catalog_describes_it(catalog, gpu, engine):
    shapes = {fingerprint(m.architecture): m.id for m in catalog.models.values() if m.task.generative}
    raw = _raw(gpu, engine)
    tables = raw["tables"]
    # Only the library's own data gaps are skipped (the A100 vLLM 0.14 data has no context attention for
    # Qwen2.5-0.5B's 14 heads of 64): the roofline serves those, naming why.
    assert tables and all(s["reason"].startswith("PerfDataNotAvailableError") for s in raw["skipped"])
    for t in tables:
        assert tuple(t["architecture"][k] for k in FINGERPRINT) in shapes, t["model"]
        assert shapes[tuple(t["architecture"][k] for k in FINGERPRINT)] == t["model"]
        assert t["attention"] in raw["attention"] and len(t["shared_ms"]) == len(raw["grids"]["tokens"])
    # Every catalog text-generation model has a 16-bit single-GPU table (or TP2 where TP1 is not listed), unless the
    # library measured nothing for it.
    assert set(shapes.values()) == {t["model"] for t in tables} | {s["model"] for s in raw["skipped"]}


def test_the_tables_carry_their_licence_and_attribution():
    notice = TABLES.joinpath("NOTICE").read_text()
    assert "AIConfigurator" in notice and "Apache License" in notice and "aiconfigurator-core 0.12.0" in notice
    assert "Apache License" in TABLES.joinpath("LICENSE").read_text()
    assert all("Apache-2.0" in _raw(g, e)["source"] for e in ENGINES for g in covered_gpus(e))


def test_planning_reads_the_tables_without_the_library_installed():
    assert importlib.util.find_spec("aiconfigurator_core") is None


def test_a_step_on_a_grid_point_is_the_tabulated_value(catalog):
    steps, _ = lookup(catalog.model("llama-3.1-8b").architecture, catalog.gpu("h100"), precision=Precision.BF16,
                      quantization=None, tensor_parallel_size=1, kv_cache_fp8=False)
    assert steps is not None
    b, c = steps.batch.index(64), steps.context.index(362)
    assert steps.kernel_s(64, 64 * 362) * 1e3 == pytest.approx(steps.shared_ms[steps.tokens.index(64)]
                                                               + steps.decode_ms[b][c])
    # AIConfigurator's own decode_step_latency(64, 330, 1) for this model on H100 is 8.246 ms (research note,
    # aiconfigurator.md section 5); the composed terms agree within the decode path's logits difference.
    assert steps.kernel_s(64, 64 * 331) * 1e3 == pytest.approx(8.246, rel=0.03)


def test_a_step_grows_with_the_batch_the_context_and_the_prompt_chunk(catalog):
    steps, _ = lookup(catalog.model("llama-3.1-8b").architecture, catalog.gpu("h100"), precision=Precision.BF16,
                      quantization=None, tensor_parallel_size=1, kv_cache_fp8=False)
    assert steps.kernel_s(16, 16 * 500) < steps.kernel_s(128, 128 * 500) < steps.kernel_s(128, 128 * 4000)
    assert steps.kernel_s(64, 64 * 500) < steps.kernel_s(64, 64 * 500, 512, 512 * 256) < \
        steps.kernel_s(64, 64 * 500, 2048, 2048 * 1024)
    # A later chunk of the same prompt attends to more context than its first one.
    assert steps.kernel_s(0, 0, 2048, 2048 * 1024) < steps.kernel_s(0, 0, 2048, 2048 * (6144 + 1024))


@pytest.mark.parametrize("gpu, kw, reason", [
    ("a10g", {}, "no measured vLLM kernel data for NVIDIA A10G"),
    ("h100", {"precision": Precision.INT4, "quantization": Quantization.AWQ}, "awq weights"),
    ("a100-80gb", {"precision": Precision.FP8}, "FP8 weights on NVIDIA A100 80GB SXM (no FP8 tensor cores"),
])
def test_a_replica_the_tables_do_not_cover_gets_the_roofline_and_the_reason(catalog, gpu, kw, reason):
    kw.setdefault("precision", Precision.BF16)
    model = replica_model(catalog.model("llama-3.1-8b").architecture, catalog.gpu(gpu), tensor_parallel_size=1, **kw)
    assert model.source.kind == "roofline" and reason in model.source.reason
    assert model.source.describe().startswith(f"roofline, {catalog.gpu(gpu).model} (")


def test_an_architecture_outside_the_catalog_gets_the_roofline_and_says_why(catalog):
    arch = catalog.model("llama-3.1-8b").architecture.model_copy(update={"layers": 30, "params_b": 7.5})
    model = replica_model(arch, catalog.gpu("h100"), precision=Precision.BF16, tensor_parallel_size=1)
    assert model.source.kind == "roofline"
    assert model.source.reason == "no measured step table for this architecture (the tables cover the catalog's models)"


def test_a_covered_replica_records_its_measured_source(catalog):
    model = replica_model(catalog.model("llama-3.1-70b").architecture, catalog.gpu("h100"), precision=Precision.FP8,
                          tensor_parallel_size=2, kv_cache_fp8=True)
    assert model.source.kind == "measured"
    assert model.source.describe() == ("measured vLLM 0.24.0 kernel data (AIConfigurator 0.12.0, h100_sxm) for "
                                       "NVIDIA H100 80GB SXM")


@pytest.mark.parametrize("gpu", ["a100-80gb", "h100", "h200", "l40s"])
def test_no_table_has_a_step_that_takes_less_time_for_more_work(gpu):
    raw = _raw(gpu)
    rising = lambda values: all(a <= b for a, b in zip(values, values[1:]))  # noqa: E731
    assert all(rising(t["shared_ms"]) for t in raw["tables"])
    for tables in raw["attention"].values():
        for grid in tables.values():
            assert all(rising(row) for row in grid) and all(rising(list(col)) for col in zip(*grid))


@pytest.mark.parametrize("gpu, model, tp, kv_fp8", [("h100", "llama-3.1-8b", 1, False), ("l40s", "llama-3.1-8b", 1, True),
                                                    ("h200", "llama-3.1-70b", 4, False)])
def test_a_step_is_the_bilinear_reading_of_its_segments_on_and_off_the_grids(catalog, gpu, model, tp, kv_fp8):
    """`kernel_s` writes `_segment` and `_blend` out for speed: the same floats, bit for bit, inside the grids, beyond
    both ends and on grid points, whether a segment was looked up before or not."""
    from blueprints.capacity.measured import _blend, _segment

    steps, why = lookup(catalog.model(model).architecture, catalog.gpu(gpu), precision=Precision.BF16,
                        quantization=None, tensor_parallel_size=tp, kv_cache_fp8=kv_fp8)
    assert steps is not None, why

    def reference(decode, context, prefill=0, pairs=0.0):
        i, t = _segment(steps.tokens, decode + prefill)
        ms = steps.shared_ms[i] + t * (steps.shared_ms[i + 1] - steps.shared_ms[i])
        if decode:
            i, t = _segment(steps.batch, decode)
            j, u = _segment(steps.context, context / decode)
            ms += _blend(steps.decode_ms, i, t, j, u)
        if prefill:
            i, t = _segment(steps.tokens, prefill)
            start = pairs / prefill - prefill / 2
            if start >= 0:
                j, u = _segment(steps.prefix, start)
                ms += _blend(steps.prefill_ms, i, t, j, u)
            else:
                ms += _blend(steps.prefill_ms, i, t, 0, 0.0) * pairs / (prefill * prefill / 2)
        return ms / 1e3

    cases = [(1, 1.0), (1, 3.0e5), (64, 64 * 362.0), (37, 37 * 911.5), (4096, 4096 * 2.0e5), (3, 3 * 0.5),
             (24, 24 * 1500.0, 488, 488 * 744.0), (0, 0.0, 2048, 2048 * 1024.0), (0, 0.0, 70000, 70000 * 9.0e4),
             (5, 5 * 700.0, 900, 2.0 * 450 * 450 / 2)]  # the last: two prompts from scratch (start < 0)
    for _ in range(2):  # the second pass reads the remembered segments
        assert [steps.kernel_s(*c) for c in cases] == [reference(*c) for c in cases]
