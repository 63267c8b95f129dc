"""Measured step time: one vLLM engine step's GPU kernel time from per-operation latencies measured in vLLM's own
kernels (NVIDIA AIConfigurator core 0.12.0), tabulated by `tools/step_tables/refresh.py` into
`blueprints/catalog/step_tables/<engine>/<gpu>.json` (see that script for the terms, grids and the licence; NOTICE beside the
tables).

One step of B decoding sequences at mean context C and a P-token prompt chunk starting after p cached tokens takes

    kernel = shared(B + P) + decode_attention(B, C) + prefill_attention(P, p)

(`shared`: every GEMM, norm, all-reduce and the logits, a function of the tokens computed). Several prompt chunks in one
step arrive as their total P and attention pairs sum(chunk x (start + chunk / 2)); they are read as one chunk of P
tokens with the same pairs (p = pairs / P - P / 2), and when that start would be negative (several prompts from
scratch, a V0 prefill step) as one chunk from scratch scaled by pairs / (P^2 / 2): attention is FLOP-bound there.
Between grid points values are interpolated linearly (bilinearly in two dimensions), and extrapolated linearly beyond
the grids (2,048 sequences, 131,072 tokens of context, 65,536 tokens a step).

Tables exist for the catalog's text-generation models (looked up by their architecture, so an `architecture:` of the
same shape finds them too), 16-bit or FP8 weights (FP8 only on GPUs with FP8 tensor cores) and a 16-bit or FP8 KV
cache, per engine (vLLM, SGLang, TensorRT-LLM: the versions AIConfigurator measured, `tools/step_tables/refresh.py`
ENGINES) on the GPUs the library measured. `lookup` says why anything else has none; the capacity model then uses the roofline (`blueprints.capacity.roofline`). Pure: the tables are package data,
read once per process.
"""

from __future__ import annotations

import bisect
import json
from typing import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources

from blueprints.catalog import Architecture, Gpu
from blueprints.catalog.engines import engine_facts
from blueprints.core.errors import CatalogError
from blueprints.capacity.roofline import kernel_family
from blueprints.requirements.model import Precision, Quantization

#: The architecture fields a table is generated for and looked up by (tools/step_tables/refresh.py FINGERPRINT).
FINGERPRINT = ("params_b", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "vocab_size",
               "tie_word_embeddings", "experts", "experts_per_token", "shared_params_b")
SIXTEEN_BIT, FP8 = "bfloat16", "fp8"


@dataclass(frozen=True)
class MeasuredSteps:
    """The measured kernel-time tables of one replica shape. Build with `lookup()`.

    Attributes:
        key: (GPU, architecture fingerprint, tensor parallel, weights mode, KV-cache mode): what equality means.
        data: what the tables rest on, e.g. `vllm 0.24.0 kernel data (AIConfigurator 0.12.0, h100_sxm)`.
        engine_version: the engine release the kernels were measured in.
    """

    key: tuple
    data: str
    engine_version: str
    tokens: tuple[int, ...] = field(compare=False, repr=False)
    batch: tuple[int, ...] = field(compare=False, repr=False)
    context: tuple[int, ...] = field(compare=False, repr=False)
    prefix: tuple[int, ...] = field(compare=False, repr=False)
    shared_ms: tuple[float, ...] = field(compare=False, repr=False)
    decode_ms: tuple[tuple[float, ...], ...] = field(compare=False, repr=False)
    prefill_ms: tuple[tuple[float, ...], ...] = field(compare=False, repr=False)

    @cached_property
    def kernel_s(self) -> Callable[..., float]:
        """GPU kernel time of one step, s: `kernel_s(decode, decode_context, prefill=0, prefill_pairs=0.0)`
        (arguments as `blueprints.capacity.physics.ReplicaModel.step_s`).

        The simulation's innermost call, so a plain function with the tables bound once that remembers, per token
        count, batch and prompt chunk (they repeat step after step), what does not depend on the context: the shared
        time, and the terms of `_blend` of each grid cell read. `_segment` and `_blend` are written out (the same
        arithmetic in the same order, so the same floats; `tests/test_capacity_measured.py` holds them equal)."""
        shared_ms, tokens, batch, context, prefix = self.shared_ms, self.tokens, self.batch, self.context, self.prefix
        decode_ms, prefill_ms = self.decode_ms, self.prefill_ms
        context_last, prefix_last = len(context) - 2, len(prefix) - 2
        context_width = tuple(b - a for a, b in zip(context, context[1:]))
        prefix_width = tuple(b - a for a, b in zip(prefix, prefix[1:]))
        bisect_left = bisect.bisect_left
        shared_at: dict[int, float] = {}  # tokens -> shared ms
        decode_at: dict[int, tuple] = {}  # batch -> (its row i, t, its cells' terms by column, filled when read)
        prefill_at: dict[int, tuple] = {}  # prompt tokens -> the same
        scratch_at: dict[int, float] = {}  # prompt tokens -> the reading of a chunk from scratch

        def cell(z: tuple[tuple[float, ...], ...], i: int, t: float, j: int) -> tuple[float, float, float]:
            """`_blend`'s terms at row i + t, column j: (a + t (b - a), c - a, a - b - c + d)."""
            a, b, c, d = z[i][j], z[i + 1][j], z[i][j + 1], z[i + 1][j + 1]
            return a + t * (b - a), c - a, a - b - c + d

        def kernel_s(decode: int, decode_context: float, prefill: int = 0, prefill_pairs: float = 0.0) -> float:
            n = decode + prefill
            ms = shared_at.get(n)
            if ms is None:
                i, t = _segment(tokens, n)
                ms = shared_at[n] = shared_ms[i] + t * (shared_ms[i + 1] - shared_ms[i])
            if decode:
                found = decode_at.get(decode)
                if found is None:
                    found = decode_at[decode] = (*_segment(batch, decode), [None] * (context_last + 1))
                i, t, row = found
                x = decode_context / decode
                j = bisect_left(context, x) - 1
                j = 0 if j < 0 else context_last if j > context_last else j
                u = (x - context[j]) / context_width[j]
                terms = row[j]
                if terms is None:
                    terms = row[j] = cell(decode_ms, i, t, j)
                a, ca, k = terms
                ms += a + u * ca + t * u * k
            if prefill:
                found = prefill_at.get(prefill)
                if found is None:
                    found = prefill_at[prefill] = (*_segment(tokens, prefill), [None] * (prefix_last + 1))
                i, t, row = found
                start = prefill_pairs / prefill - prefill / 2
                if start >= 0:
                    j = bisect_left(prefix, start) - 1
                    j = 0 if j < 0 else prefix_last if j > prefix_last else j
                    u = (start - prefix[j]) / prefix_width[j]
                    terms = row[j]
                    if terms is None:
                        terms = row[j] = cell(prefill_ms, i, t, j)
                    a, ca, k = terms
                    ms += a + u * ca + t * u * k
                else:
                    scratch = scratch_at.get(prefill)
                    if scratch is None:
                        scratch = scratch_at[prefill] = _blend(prefill_ms, i, t, 0, 0.0)
                    ms += scratch * prefill_pairs / (prefill * prefill / 2)
            return ms / 1e3

        return kernel_s


def _segment(grid: tuple[int, ...], x: float) -> tuple[int, float]:
    """(i, t): x lies at t between grid[i] and grid[i + 1] (t outside [0, 1] beyond the ends)."""
    i = min(max(bisect.bisect_left(grid, x) - 1, 0), len(grid) - 2)
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


def _blend(z: tuple[tuple[float, ...], ...], i: int, t: float, j: int, u: float) -> float:
    """Bilinear interpolation of z at (i + t, j + u) in grid-cell coordinates."""
    a, b = z[i][j], z[i + 1][j]
    c, d = z[i][j + 1], z[i + 1][j + 1]
    return a + t * (b - a) + u * (c - a) + t * u * (a - b - c + d)


def fingerprint(arch: Architecture) -> tuple:
    """The architecture's `FINGERPRINT` values, as the tables record them."""
    return tuple(getattr(arch, k) for k in FINGERPRINT)


@dataclass(frozen=True)
class _GpuTables:
    data: str
    engine_version: str
    grids: dict
    entries: dict  # (fingerprint, tp, weights, kv) -> (attention key, shared_ms)
    attention: dict  # key -> {"decode_attention_ms", "prefill_attention_ms"}


def _display(engine: str) -> str:
    """How plans name `engine` (engines.yaml `display`)."""
    return engine_facts(engine).display


@lru_cache(maxsize=32)
def _tables(gpu: str, engine: str = "vllm") -> _GpuTables | None:
    """The step tables of `engine` (an engines.yaml name) on `gpu` (a catalog GPU name), or None when none are
    bundled."""
    path = resources.files("blueprints.catalog").joinpath("step_tables", engine, f"{gpu}.json")
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = {}
        for t in raw["tables"]:
            key = (tuple(t["architecture"][k] for k in FINGERPRINT), t["tensor_parallel"], t["weights"],
                   t["kv_cache"])
            entries[key] = (t["attention"], tuple(t["shared_ms"]))
        data = f"{_display(engine)} {raw['engine_version']} kernel data (AIConfigurator 0.12.0, {raw['aic_system']})"
        return _GpuTables(data, raw["engine_version"], raw["grids"], entries, raw["attention"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(f"blueprints/catalog/step_tables/{engine}/{gpu}.json: malformed ({type(exc).__name__}: {exc}); "
                           "regenerate it with `make step-tables`") from None


def covered_gpus(engine: str = "vllm") -> tuple[str, ...]:
    """Catalog GPU names with bundled step tables of `engine`."""
    folder = resources.files("blueprints.catalog").joinpath("step_tables", engine)
    if not folder.is_dir():
        return ()
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))


def measures_fp8_kv(gpu: Gpu, engine: str, engine_version: str) -> bool:
    """Whether the bundled tables of `engine` on `gpu` hold FP8-KV-cache attention measured at `engine_version` (e.g.
    "0.24.0"): the attention kernels that engine runs with an FP8 KV cache on that GPU, whichever backend it
    selects there, timed on the GPU itself (AIConfigurator's silicon data)."""
    tables = _tables(gpu.name, engine)
    return (tables is not None and tables.engine_version == engine_version
            and any(key[3] == FP8 for key in tables.entries))


def weights_mode(precision: Precision, quantization: Quantization | None, gpu: Gpu) -> str | None:
    """The tables' GEMM mode for these weights on `gpu`, or None when the measured data has no such kernels."""
    family = kernel_family(precision, quantization)
    if family == "none" and precision in (Precision.BF16, Precision.FP16):
        return SIXTEEN_BIT
    if family == "fp8" and gpu.supports_fp8:
        return FP8
    return None


@lru_cache(maxsize=512)
def lookup(arch: Architecture, gpu: Gpu, *, precision: Precision, quantization: Quantization | None,
           tensor_parallel_size: int, kv_cache_fp8: bool, engine: str = "vllm") -> tuple[MeasuredSteps | None, str]:
    """The measured tables of this replica shape, or (None, why there are none).

    Returns:
        (steps, "") when tables exist, else (None, a reason a plan can state: no data for the GPU, for the weights'
        kernels, for this architecture or for this tensor-parallel degree).
    """
    tables = _tables(gpu.name, engine)
    name = _display(engine)
    if tables is None:
        return None, f"no measured {name} kernel data for {gpu.model}"
    weights = weights_mode(precision, quantization, gpu)
    if weights is None:
        family = kernel_family(precision, quantization)
        what = {"fp8": f"FP8 weights on {gpu.model} (no FP8 tensor cores: the engine runs them as W8A16)",
                "none": f"{precision.value} weights"}.get(family, f"{family} weights")
        return None, f"no measured {name} kernel data for {what}: the tables cover 16-bit and FP8 GEMMs"
    kv = FP8 if kv_cache_fp8 else SIXTEEN_BIT
    fp = fingerprint(arch)
    entry = tables.entries.get((fp, tensor_parallel_size, weights, kv))
    if entry is None:
        if not any(k[0] == fp for k in tables.entries):
            return None, "no measured step table for this architecture (the tables cover the catalog's models)"
        return None, (f"no measured step table for tensor_parallel_size={tensor_parallel_size} with {weights} weights "
                      f"and a {kv} KV cache on {gpu.model}")
    attention_key, shared = entry
    att = tables.attention[attention_key]
    g = tables.grids
    steps = MeasuredSteps(
        key=(engine, gpu.name, fp, tensor_parallel_size, weights, kv), data=tables.data,
        engine_version=tables.engine_version,
        tokens=tuple(g["tokens"]), batch=tuple(g["batch"]), context=tuple(g["context"]),
        prefix=tuple(c - 1 for c in g["context"]), shared_ms=shared,
        decode_ms=tuple(tuple(r) for r in att["decode_attention_ms"]),
        prefill_ms=tuple(tuple(r) for r in att["prefill_attention_ms"]))
    return steps, ""
