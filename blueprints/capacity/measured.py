"""Measured step time: one vLLM engine step's GPU kernel time from per-operation latencies measured in vLLM's own
kernels (NVIDIA AIConfigurator core 0.12.0), tabulated by `tools/step_tables/refresh.py` into
`blueprints/catalog/step_tables/<gpu>.json` (see that script for the terms, grids and the licence; NOTICE beside the
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
cache, on H100, H200, L40S, B200, B300, RTX PRO 6000 Server Edition (vLLM 0.24.0 measurements) and A100 80GB (vLLM
0.14.0). `lookup` says why anything else has none; the capacity model then uses the roofline
(`blueprints.capacity.roofline`). Pure: the tables are package data, read once per process.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from blueprints.catalog import Architecture, Gpu
from blueprints.core.errors import CatalogError
from blueprints.capacity.roofline import kernel_family
from blueprints.requirements.model import Precision, Quantization

#: The architecture fields a table is generated for and looked up by (tools/step_tables/refresh.py FINGERPRINT).
FINGERPRINT = ("params_b", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "vocab_size",
               "tie_word_embeddings", "experts", "experts_per_token", "shared_params_b")
SIXTEEN_BIT, FP8 = "bfloat16", "fp8"
_PROMPT = 1 << 40  # memo key offset of prompt-token segments (`MeasuredSteps._segments`)


@dataclass(frozen=True)
class MeasuredSteps:
    """The measured kernel-time tables of one replica shape. Build with `lookup()`.

    Attributes:
        key: (GPU, architecture fingerprint, tensor parallel, weights mode, KV-cache mode): what equality means.
        data: what the tables rest on, e.g. `vLLM 0.24.0 kernel data (AIConfigurator 0.12.0, h100_sxm)`.
        vllm_version: the vLLM release the kernels were measured in.
    """

    key: tuple
    data: str
    vllm_version: str
    tokens: tuple[int, ...] = field(compare=False, repr=False)
    batch: tuple[int, ...] = field(compare=False, repr=False)
    context: tuple[int, ...] = field(compare=False, repr=False)
    prefix: tuple[int, ...] = field(compare=False, repr=False)
    shared_ms: tuple[float, ...] = field(compare=False, repr=False)
    decode_ms: tuple[tuple[float, ...], ...] = field(compare=False, repr=False)
    prefill_ms: tuple[tuple[float, ...], ...] = field(compare=False, repr=False)
    #: Segments of the integer axes already looked up: tokens at their count, batches at -B, prompt tokens at
    #: P + `_PROMPT` (a memo, not part of the tables).
    _segments: dict = field(default_factory=dict, compare=False, repr=False)

    def kernel_s(self, decode: int, decode_context: float, prefill: int = 0, prefill_pairs: float = 0.0) -> float:
        """GPU kernel time of one step, s (arguments as `blueprints.capacity.physics.ReplicaModel.step_s`).

        The simulation's innermost call: `_segment` and `_blend` are written out here (the same arithmetic in the same
        order, so the same floats; `tests/test_measured_steps.py` holds them equal)."""
        segments = self._segments
        tokens = decode + prefill
        i, t = segments.get(tokens) or self._cache(self.tokens, tokens)
        shared = self.shared_ms
        ms = shared[i] + t * (shared[i + 1] - shared[i])
        if decode:
            i, t = segments.get(-decode) or self._cache(self.batch, decode, key=-decode)
            grid = self.context
            x = decode_context / decode
            j = bisect.bisect_left(grid, x) - 1
            last = len(grid) - 2
            j = 0 if j < 0 else last if j > last else j
            u = (x - grid[j]) / (grid[j + 1] - grid[j])
            z = self.decode_ms
            row, up = z[i], z[i + 1]
            a, b, c, d = row[j], up[j], row[j + 1], up[j + 1]
            ms += a + t * (b - a) + u * (c - a) + t * u * (a - b - c + d)
        if prefill:
            i, t = segments.get(prefill + _PROMPT) or self._cache(self.tokens, prefill, key=prefill + _PROMPT)
            start = prefill_pairs / prefill - prefill / 2
            if start >= 0:
                grid = self.prefix
                j = bisect.bisect_left(grid, start) - 1
                last = len(grid) - 2
                j = 0 if j < 0 else last if j > last else j
                u = (start - grid[j]) / (grid[j + 1] - grid[j])
                z = self.prefill_ms
                row, up = z[i], z[i + 1]
                a, b, c, d = row[j], up[j], row[j + 1], up[j + 1]
                ms += a + t * (b - a) + u * (c - a) + t * u * (a - b - c + d)
            else:
                ms += _blend(self.prefill_ms, i, t, 0, 0.0) * prefill_pairs / (prefill * prefill / 2)
        return ms / 1e3

    def _cache(self, grid: tuple[int, ...], x: int, *, key: int | None = None) -> tuple[int, float]:
        """The segment of integer `x` on `grid`, remembered under `key` (default `x`): batches and token counts
        repeat step after step."""
        found = _segment(grid, x)
        self._segments[x if key is None else key] = found
        return found


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
    vllm_version: str
    grids: dict
    entries: dict  # (fingerprint, tp, weights, kv) -> (attention key, shared_ms)
    attention: dict  # key -> {"decode_attention_ms", "prefill_attention_ms"}


@lru_cache(maxsize=16)
def _tables(gpu: str) -> _GpuTables | None:
    """The step tables of `gpu` (a catalog GPU name), or None when none are bundled."""
    path = resources.files("blueprints.catalog").joinpath("step_tables", f"{gpu}.json")
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = {}
        for t in raw["tables"]:
            key = (tuple(t["architecture"][k] for k in FINGERPRINT), t["tensor_parallel"], t["weights"],
                   t["kv_cache"])
            entries[key] = (t["attention"], tuple(t["shared_ms"]))
        data = f"vLLM {raw['vllm_version']} kernel data (AIConfigurator 0.12.0, {raw['aic_system']})"
        return _GpuTables(data, raw["vllm_version"], raw["grids"], entries, raw["attention"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(f"blueprints/catalog/step_tables/{gpu}.json: malformed ({type(exc).__name__}: {exc}); "
                           "regenerate it with `make step-tables`") from None


def covered_gpus() -> tuple[str, ...]:
    """Catalog GPU names with bundled step tables."""
    folder = resources.files("blueprints.catalog").joinpath("step_tables")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))


def measures_fp8_kv(gpu: Gpu, vllm_version: str) -> bool:
    """Whether the bundled tables of `gpu` hold FP8-KV-cache attention measured with vLLM `vllm_version` (e.g.
    "0.24.0"): the attention kernels that engine runs with `--kv-cache-dtype fp8` on that GPU, whichever backend it
    selects there, timed on the GPU itself (AIConfigurator's silicon data)."""
    tables = _tables(gpu.name)
    return (tables is not None and tables.vllm_version == vllm_version
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
           tensor_parallel_size: int, kv_cache_fp8: bool) -> tuple[MeasuredSteps | None, str]:
    """The measured tables of this replica shape, or (None, why there are none).

    Returns:
        (steps, "") when tables exist, else (None, a reason a plan can state: no data for the GPU, for the weights'
        kernels, for this architecture or for this tensor-parallel degree).
    """
    tables = _tables(gpu.name)
    if tables is None:
        return None, f"no measured vLLM kernel data for {gpu.model}"
    weights = weights_mode(precision, quantization, gpu)
    if weights is None:
        family = kernel_family(precision, quantization)
        what = {"fp8": f"FP8 weights on {gpu.model} (no FP8 tensor cores: vLLM runs them as W8A16)",
                "none": f"{precision.value} weights"}.get(family, f"{family} weights")
        return None, f"no measured vLLM kernel data for {what}: the tables cover 16-bit and FP8 GEMMs"
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
        key=(gpu.name, fp, tensor_parallel_size, weights, kv), data=tables.data, vllm_version=tables.vllm_version,
        tokens=tuple(g["tokens"]), batch=tuple(g["batch"]), context=tuple(g["context"]),
        prefix=tuple(c - 1 for c in g["context"]), shared_ms=shared,
        decode_ms=tuple(tuple(r) for r in att["decode_attention_ms"]),
        prefill_ms=tuple(tuple(r) for r in att["prefill_attention_ms"]))
    return steps, ""
