"""Write the measured vLLM step-time tables the capacity model reads (blueprints/catalog/step_tables/<gpu>.json).

Usage: make step-tables            (creates .venv-aic from tools/step_tables/requirements.txt, then runs this)
       .venv-aic/bin/python tools/step_tables/refresh.py [--check] [--gpu NAME ...]

Source: NVIDIA AIConfigurator core (`aiconfigurator-core` 0.12.0, Apache-2.0): per-operation GPU latencies measured in
vLLM's own kernels (GEMM, attention, all-reduce, MoE) and its estimator over them. For every catalog text-generation
model (blueprints/catalog/models.yaml, shapes completed by tools/step_tables/hf_configs.yaml), every GPU the library
measured vLLM on (GPUS below), every tensor-parallel degree within the catalog's largest node of that GPU that
divides the model's attention heads, 16-bit or FP8 weights and a 16-bit or FP8 KV cache (FP8 where the GPU has FP8),
it tabulates the three terms one vLLM engine step is composed of (research: aiconfigurator.md section 4):

- `shared_ms[T]`: every GEMM, norm, all-reduce and the logits of a step computing T tokens
  (`EngineHandle.mixed_step_breakdown(T, 0, T, 2)[1]`);
- `decode_attention_ms[B][C]`: attention of B decoding sequences at mean context C
  (`mixed_step_breakdown(1, B, C - 1, 1)[3]`);
- `prefill_attention_ms[P][q]`: attention of one P-token prompt chunk after q cached tokens
  (`mixed_step_breakdown(P + q, 0, P + q, 2, q)[2]`),

All-reduce on PCIe GPUs beyond two (`PCIE_GPUS`, tensor parallel > 2): the library's L40S communication tables were
measured on a node without GPU peer-to-peer (ai-dynamo/aiconfigurator issue 1346: "hangs on L40S (Ada, no GPU P2P)"),
whose NCCL all-reduce bus bandwidth falls from ~20 GB/s at 2 GPUs to ~5 at 4 and ~1.5 at 8 (host-memory copies
across sockets), while a PCIe node with peer-to-peer keeps its bus bandwidth as GPUs are added (the library's RTX PRO
6000 server tables: ~24-25 GB/s at 2, 4 and 8). vLLM runs NCCL there (its custom all-reduce is off on more than two
PCIe-only GPUs: vllm/distributed/device_communicators/custom_all_reduce.py, "not supported on more than two PCIe-only
GPUs"). So the all-reduce terms of those tables (`*_ar_*`, `*_p2p` ops of `mixed_step_breakdown_per_op`) are the
measured two-GPU ones scaled by a ring all-reduce's traffic, 2 (n - 1) / n of the two-GPU one's 1: the bus bandwidth
of a node with peer-to-peer [assumption: AWS documents no g6e topology; /work/scratch research, 2026-12]. The
capacity model states it where a plan rests on it.

On geometric grids (ratio sqrt 2; linear interpolation between them is within 2.8 % of the library's own answer at
the 99th percentile, 5 % at worst, on 1,200 random steps of Llama-3.1-8B on H100), each made non-decreasing along
every axis (a running maximum: the measured kernels dip by a few percent between some neighbouring sizes, and a step
with more work must not take less time). Attention tables shared by several
models (the same heads per rank, head size, layers and KV dtype give the same numbers) are stored once, under the
hash of their values. Values are ms, rounded to 4 significant digits.

Offline by construction: each model's config.json is written to a temporary directory and passed as a path (the
library downloads configs of unknown model ids from huggingface.co otherwise), and the socket module refuses every
connection while this runs. `--check` regenerates in memory and exits 1 when a committed table differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import socket
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "blueprints" / "catalog"
OUT = CATALOG / "step_tables"
SCHEMA_VERSION = 1
AIC_VERSION = "0.12.0"

#: Catalog GPU -> its AIConfigurator system (the engine versions measured on it: `ENGINES`, `VERSION_OVERRIDES`). The A100 40GB has
#: no system of its own (a100_sxm is the 80 GB SXM part, 2,039 GB/s) and L4, A10G and T4 none at all: the roofline
#: serves them.
GPUS = {
    "h100": "h100_sxm",
    "h200": "h200_sxm",
    "l40s": "l40s",
    "a100-80gb": "a100_sxm",
    "b200": "b200_sxm",
    "b300": "b300_sxm",
    "rtx-pro-6000": "rtx_pro_6000_server",
}
#: Engine (blueprints/catalog/engines.yaml name) -> (the library's backend name, the version it measured). The
#: versions are the library's own query defaults (systems/query_versions.yaml `defaults`: trtllm 1.3.0rc20, sglang
#: 0.5.14, vllm 0.24.0), except where `VERSION_OVERRIDES` follows its `overrides` for a system.
ENGINES = {"vllm": ("vllm", "0.24.0"), "sglang": ("sglang", "0.5.14"), "tensorrt-llm": ("trtllm", "1.3.0rc20")}
#: (AIConfigurator system, backend) -> version, from systems/query_versions.yaml `overrides` (a100_sxm: trtllm 1.0.0,
#: sglang 0.5.10, vllm 0.14.0).
VERSION_OVERRIDES = {("a100_sxm", "vllm"): "0.14.0", ("a100_sxm", "sglang"): "0.5.10",
                     ("a100_sxm", "trtllm"): "1.0.0"}
#: GPUs whose GPUs talk over PCIe only (their all-reduce beyond two GPUs is modelled, see the docstring). The RTX PRO
#: 6000 (g7e) is PCIe-only too but stays out: its library tables were measured on a node with peer-to-peer (the
#: docstring's ~24-25 GB/s at 2, 4 and 8 GPUs), and g7e has GPUDirect peer-to-peer (AWS G7e announcement).
PCIE_GPUS = ("l40s",)
#: Weight and KV-cache modes tabulated: the library's GEMMQuantMode / KVCacheQuantMode names.
SIXTEEN_BIT, FP8 = "bfloat16", "fp8"
#: The catalog architecture fields a table is looked up by (blueprints/capacity/measured.py FINGERPRINT: the same).
FINGERPRINT = ("params_b", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "vocab_size",
               "tie_word_embeddings", "experts", "experts_per_token", "shared_params_b")
RATIO = math.sqrt(2)
TOKENS_MAX, BATCH_MAX, CONTEXT_MAX = 65536, 2048, 131072


def grid(high: int) -> list[int]:
    """1, then every integer nearest a power of sqrt 2, up to `high` (inclusive)."""
    values, x = [1], 1.0
    while values[-1] < high:
        x *= RATIO
        v = min(high, int(round(x)))
        if v > values[-1]:
            values.append(v)
    return values


def sig4(value: float) -> float:
    """`value` rounded to 4 significant digits."""
    return float(f"{value:.4g}")


def _refuse_network() -> None:
    def refuse(*_args, **_kwargs):
        raise OSError("tools/step_tables/refresh.py runs offline: a network connection was attempted")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    socket.create_connection = refuse  # type: ignore[assignment]


def hf_config(model_id: str, arch: dict, extra: dict) -> dict:
    """The config.json of a catalog model: its catalog architecture and the fields of hf_configs.yaml."""
    config = {"architectures": [extra["architecture"]], "num_hidden_layers": arch["layers"],
              "hidden_size": arch["hidden_size"], "num_attention_heads": arch["attention_heads"],
              "num_key_value_heads": arch["kv_heads"], "head_dim": arch["head_dim"],
              "intermediate_size": extra["intermediate_size"], "vocab_size": arch["vocab_size"],
              "max_position_embeddings": extra["max_position_embeddings"],
              "tie_word_embeddings": bool(arch.get("tie_word_embeddings", False)), "torch_dtype": "bfloat16"}
    if arch.get("experts"):
        config.update(num_local_experts=arch["experts"], num_experts_per_tok=arch["experts_per_token"])
    return config


def fingerprint(arch: dict) -> dict:
    """The catalog architecture fields a table was generated for (a test checks the catalog still says so)."""
    return {k: arch.get(k, False if k == "tie_word_embeddings" else None) for k in FINGERPRINT}


def tensor_parallel_degrees(max_gpus: int, heads: int) -> list[int]:
    tp, out = 1, []
    while tp <= max_gpus:
        if heads % tp == 0:
            out.append(tp)
        tp *= 2
    return out


def _rising(values: list[float]) -> list[float]:
    """`values` with each one at least the one before (a running maximum)."""
    out, top = [], 0.0
    for v in values:
        top = max(top, v)
        out.append(top)
    return out


def _rising_2d(rows: list[list[float]]) -> list[list[float]]:
    """`rows` non-decreasing along both axes."""
    rows = [_rising(r) for r in rows]
    columns = [_rising(list(c)) for c in zip(*rows)]
    return [list(r) for r in zip(*columns)]


def _allreduce_ms(handle, t: int) -> float:
    """The all-reduce and point-to-point ops of a step computing t tokens, ms."""
    ops = handle.mixed_step_breakdown_per_op(t, 0, t, 2)[0]
    return sum(op[1] for op in ops if "_ar" in op[0] or op[0].endswith("_p2p"))


def tabulate(handle, tokens: list[int], batch: list[int], context: list[int], *,
             two_gpu=None, tensor_parallel: int = 1) -> tuple[list, list, list]:
    """The three terms on the grids, ms, each made non-decreasing along every axis (more tokens, sequences or
    context never take less time; the measured kernels' small dips between neighbouring sizes are levelled). With
    `two_gpu` (the same model's handle at tensor parallel 2), the shared term's all-reduce is the two-GPU one scaled
    to `tensor_parallel` GPUs (PCIe GPUs, see the module docstring)."""
    ring = 2 * (tensor_parallel - 1) / tensor_parallel

    def shared(t: int) -> float:
        total = handle.mixed_step_breakdown(t, 0, t, 2)[1]
        if two_gpu is None:
            return total
        return total - _allreduce_ms(handle, t) + ring * _allreduce_ms(two_gpu, t)

    def decode(b: int, c: int) -> float:
        return handle.mixed_step_breakdown(1, b, max(c - 1, 1), 1)[3]

    def prefill(p: int, q: int) -> float:
        return handle.mixed_step_breakdown(p + q, 0, p + q, 2, q)[2]

    return (_rising([sig4(shared(t)) for t in tokens]),
            _rising_2d([[sig4(decode(b, c)) for c in context] for b in batch]),
            _rising_2d([[sig4(prefill(p, c - 1)) for c in context] for p in tokens]))


def table_path(engine: str, gpu: str) -> Path:
    """Where the tables of `engine` on `gpu` go: step_tables/<engine>/<gpu>.json (blueprints/capacity/measured.py
    reads the same path)."""
    return OUT / engine / f"{gpu}.json"


def build(engine: str, gpu: str, models: dict, extras: dict, max_gpus: int, fp8: bool) -> dict:
    from aiconfigurator_core.sdk.engine import EngineHandle

    system = GPUS[gpu]
    backend, version = ENGINES[engine]
    version = VERSION_OVERRIDES.get((system, backend), version)
    tokens, batch, context = grid(TOKENS_MAX), grid(BATCH_MAX), grid(CONTEXT_MAX)
    attention: dict[str, dict] = {}
    tables, skipped = [], []
    modes = [SIXTEEN_BIT, FP8] if fp8 else [SIXTEEN_BIT]
    with tempfile.TemporaryDirectory() as tmp:
        for model_id, arch in models.items():
            path = Path(tmp) / model_id
            path.mkdir()
            (path / "config.json").write_text(json.dumps(hf_config(model_id, arch, extras[model_id])))
            for tp in tensor_parallel_degrees(max_gpus, arch["attention_heads"]):
                for weights in modes:
                    for kv in modes:
                        moe = {"moe_tp_size": tp, "moe_ep_size": 1} if arch.get("experts") else {}
                        try:
                            handle = EngineHandle.compile(str(path), system, backend, backend_version=version,
                                                          tp_size=tp, gemm_quant_mode=weights,
                                                          kvcache_quant_mode=kv, **moe)
                            two_gpu = None
                            if gpu in PCIE_GPUS and tp > 2:
                                moe2 = {"moe_tp_size": 2, "moe_ep_size": 1} if arch.get("experts") else {}
                                two_gpu = EngineHandle.compile(str(path), system, backend, backend_version=version,
                                                               tp_size=2, gemm_quant_mode=weights,
                                                               kvcache_quant_mode=kv, **moe2)
                            shared, decode, prefill = tabulate(handle, tokens, batch, context, two_gpu=two_gpu,
                                                               tensor_parallel=tp)
                        except Exception as exc:  # the library's data gaps: recorded, not tabulated
                            skipped.append({"model": model_id, "tensor_parallel": tp, "weights": weights,
                                            "kv_cache": kv, "reason": f"{type(exc).__name__}: {exc}"[:300]})
                            continue
                        body = json.dumps([decode, prefill]).encode()
                        key = hashlib.sha1(body).hexdigest()[:12]
                        attention.setdefault(key, {"decode_attention_ms": decode, "prefill_attention_ms": prefill})
                        tables.append({"model": model_id, "architecture": fingerprint(arch), "tensor_parallel": tp,
                                       "weights": weights, "kv_cache": kv, "attention": key, "shared_ms": shared})
                        print(f"{engine} {gpu} {model_id} tp{tp} {weights}/{kv}: decode B=64 C=330 "
                              f"{shared[_index(tokens, 64)] + decode[_index(batch, 64)][_index(context, 331)]:.2f} "
                              f"ms (grid)", file=sys.stderr)
    return {
        "schema_version": SCHEMA_VERSION,
        "gpu": gpu,
        "source": (f"NVIDIA AIConfigurator core (aiconfigurator-core {AIC_VERSION}, Apache-2.0; "
                   f"https://github.com/ai-dynamo/aiconfigurator), system {system}, {backend} {version} per-operation "
                   "measurements (silicon mode): EngineHandle.mixed_step_breakdown terms tabulated by "
                   "tools/step_tables/refresh.py. Derived data, modified (tabulated and rounded"
                   + ("; all-reduce beyond two GPUs scaled from the two-GPU measurement, see refresh.py" if gpu in
                      PCIE_GPUS else "") + "); see NOTICE"),
        "aic_system": system,
        "engine": engine,
        "engine_version": version,
        "grids": {"tokens": tokens, "batch": batch, "context": context},
        "attention": dict(sorted(attention.items())),
        "tables": tables,
        "skipped": skipped,
    }


def _index(values: list[int], x: int) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - x))


def catalog_inputs() -> tuple[dict, dict, dict, dict]:
    """(generative models' architectures, hf_configs extras, largest node per GPU, GPUs with FP8) from the catalog."""
    models = yaml.safe_load((CATALOG / "models.yaml").read_text())["models"]
    generative = {m["id"]: m["architecture"] for m in models if m["task"] == "text-generation"}
    extras = yaml.safe_load((Path(__file__).parent / "hf_configs.yaml").read_text())["models"]
    missing = sorted(set(generative) - set(extras))
    if missing:
        raise SystemExit(f"tools/step_tables/hf_configs.yaml: add {missing} (config.json fields the tables need)")
    instances = yaml.safe_load((CATALOG / "instances.yaml").read_text())["ec2"]
    nodes: dict[str, int] = {}
    for i in instances:
        if i.get("gpu"):
            nodes[i["gpu"]] = max(nodes.get(i["gpu"], 0), i["gpu_count"])
    gpus = yaml.safe_load((CATALOG / "gpus.yaml").read_text())["gpus"]
    fp8 = {g["name"]: g.get("tflops_fp8") is not None for g in gpus}
    return generative, extras, nodes, fp8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed table differs")
    parser.add_argument("--gpu", action="append", choices=sorted(GPUS), help="only these GPUs (repeatable)")
    parser.add_argument("--engine", action="append", choices=sorted(ENGINES), help="only these engines (repeatable)")
    args = parser.parse_args()
    _refuse_network()
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    installed = metadata.version("aiconfigurator-core")
    if installed != AIC_VERSION:
        raise SystemExit(f"aiconfigurator-core {installed} is installed; the tables are for {AIC_VERSION} "
                         "(tools/step_tables/requirements.txt)")
    models, extras, nodes, fp8 = catalog_inputs()
    stale = []
    for engine in args.engine or sorted(ENGINES):
        for gpu in args.gpu or sorted(GPUS):
            table = build(engine, gpu, models, extras, nodes[gpu], fp8[gpu])
            text = json.dumps(table, separators=(",", ":")) + "\n"
            path = table_path(engine, gpu)
            if args.check:
                if not path.exists() or path.read_text() != text:
                    stale.append(str(path.relative_to(OUT)))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)} ({len(text) / 1e6:.2f} MB)")
    if stale:
        print(f"out of date: {', '.join(stale)}; run `make step-tables`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
