"""One vLLM replica's memory, engine step time and frontend time: what the scheduler simulation steps on.

Pure functions of catalog records and the bundled step tables; no other I/O. One engine step (one forward pass over
every scheduled token) takes

    GPU  = max(engine step overhead + in-series host time x sequences + correction.step_time x kernel time,
               the physics floor)
    step = max(GPU, overlapped host time x decoding sequences)

- kernel time: the measured vLLM kernel tables (`blueprints.capacity.measured`) where they cover the GPU, the
  weights' kernels, the architecture and the tensor-parallel degree and the GPU's measured source is chosen
  (`defaults.MEASURED_STEP_GPUS`: by the calibration points' error, `benchmarks/sizing.py --sources`); the roofline
  (`blueprints.capacity.roofline`) otherwise, with the reason. `CapacitySource` records which, for the plan.
- engine step overhead and in-series host time: what the engine adds to every step outside the kernels, a fixed part
  (launches CUDA graphs do not hide, input preparation, sampling) and a part per scheduled sequence (the scheduler
  and the output handling the engine core does between steps) (`EngineProfile`).
- the physics floor: a step reads every weight of the replica's shard and each decoding sequence's KV cache, so it
  never takes less than those bytes over the GPUs' memory bandwidth (a calibration cannot make it faster).
- overlapped host time: work per decoding sequence and step that runs beside the GPU in another process (the API
  server detokenising and streaming each token): a replica never emits tokens faster than that process handles them.
- frontend (`ReplicaModel.frontend_s`): before the scheduler sees a request, a latency (HTTP, the engine's IPC) and
  the API server's serial work on it (request handling, tokenisation, growing with the prompt, and on the chat
  endpoint rendering the chat template): the TTFT floor.
- correction (`Correction`): factors measured for one (model, GPU, engine, tensor parallel) on the deployed stack
  (issue 25's `blueprint calibrate`), applied here and nowhere else; 1 unless given.
The engine's constants are fitted to published measurements of its release line (`blueprints.capacity.fitting`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Literal

from blueprints.core import defaults
from blueprints.catalog import Architecture, Gpu
from blueprints.capacity.measured import MeasuredSteps, lookup
from blueprints.capacity.roofline import RooflineSteps, compute_tflops, kernel_family, roofline_steps
from blueprints.contracts.memory import (
    LoraSlots,
    engine_memory_share,
    kv_bytes_per_token,
    kv_cache_tokens,
    weights_gib,
)
from blueprints.requirements.model import Precision, Quantization

__all__ = ["CapacitySource", "Correction", "EngineProfile", "ReplicaModel", "compute_tflops", "default_batch_limits",
           "engine_profile", "kernel_family", "replica_model", "step_source_kind"]


@dataclass(frozen=True)
class EngineProfile:
    """How one serving-engine release schedules, and what it adds to each step and request (`defaults.ENGINE_PROFILES`).

    Attributes:
        name: profile key, e.g. `vllm-0.24` (the pinned image).
        chunked_prefill: prefill chunks join decode steps (vLLM V1); otherwise prefill steps run alone (V0).
        scheduler_steps: decode steps a V0 engine runs per scheduling decision (`--num-scheduler-steps`, multi-step
            scheduling): new prompts wait for the window to end. 1 for V1.
        step_overhead_s: fixed time every step adds to its kernels, s.
        prefill_kernel_factor: the release's prefill kernel time relative to the measured tables' (or the
            roofline's), for steps that compute prompt tokens: 1 for the kernels measured; an older release's slower
            attention and GEMM kernels (and V0's prefill outside CUDA graphs) above 1.
        step_s_per_sequence: host time per scheduled sequence per step in series with the GPU (the engine core's
            scheduling and output handling between steps), s.
        host_s_per_sequence: host time per decoding sequence per step that overlaps the GPU step in another process
            (a step lasts the longer of the two), s: the API server's detokenising and streaming.
        frontend_latency_s: latency before the API server handles a request (HTTP, the engine's IPC), s.
        frontend_serial_s: the API server's serial work per request (request handling), s.
        frontend_chat_serial_s: what the chat endpoint (/v1/chat/completions) adds to it: rendering the chat
            template, s.
        frontend_serial_s_per_token: the API server's serial work per prompt token (tokenisation), s.
        tables: the engine whose measured step tables time the kernels (engines.yaml name, e.g. `vllm`).
        kv_reserve_ratio: how the scheduler admits against the KV cache. 0: on demand (vLLM: a prompt is admitted
            when its own blocks are free, and a request that later finds none is preempted); above 0: a new request
            is admitted only if the KV cache holds its whole prompt and output besides this share of every running
            request's output still to come (SGLang's new_token_ratio at its start; 1: TensorRT-LLM's
            GUARANTEED_NO_EVICT, which never preempts).
        kv_reserve_floor: the share it decays to, linearly over `kv_reserve_decay_steps` decode steps since the
            replica was last idle (SGLang: 0.7 down to 0.098 over 600 steps); equal to `kv_reserve_ratio` where it
            does not decay.
        kv_reserve_decay_steps: decode steps the decay takes (>= 1).
    """

    name: str
    chunked_prefill: bool
    scheduler_steps: int
    step_overhead_s: float
    prefill_kernel_factor: float
    step_s_per_sequence: float
    host_s_per_sequence: float
    frontend_latency_s: float
    frontend_serial_s: float
    frontend_chat_serial_s: float
    frontend_serial_s_per_token: float
    tables: str = "vllm"
    kv_reserve_ratio: float = 0.0
    kv_reserve_floor: float = 0.0
    kv_reserve_decay_steps: int = 1


def engine_profile(name: str = defaults.PINNED_ENGINE) -> EngineProfile:
    """The `defaults.ENGINE_PROFILES` entry `name` (KeyError for an unknown one: profiles are ours, not user input)."""
    p = defaults.ENGINE_PROFILES[name]
    return EngineProfile(name, bool(p["chunked_prefill"]), int(p["scheduler_steps"]), p["step_overhead_ms"] / 1e3,
                         p["prefill_kernel_factor"], p["step_us_per_sequence"] / 1e6, p["host_us_per_sequence"] / 1e6,
                         p["frontend_latency_ms"] / 1e3, p["frontend_serial_ms"] / 1e3,
                         p["frontend_chat_serial_ms"] / 1e3, p["frontend_serial_us_per_token"] / 1e6,
                         str(p["tables"]), float(p["kv_reserve_ratio"]), float(p["kv_reserve_floor"]),
                         int(p["kv_reserve_decay_steps"]))


@dataclass(frozen=True)
class Correction:
    """Factors measured on a deployed stack for one (model, GPU, engine, tensor parallel), applied to the model's own
    figures: `step_time` x every step's kernel time, `ttft_floor` x the frontend's latency and serial work. The
    identity (1, 1) unless a calibration gives others (issue 25: `blueprint calibrate`)."""

    step_time: float = 1.0
    ttft_floor: float = 1.0


def band_cell(engine: str, step_source: str) -> str:
    """The `defaults.CAPACITY_UNCERTAINTY` cell of a replica: vLLM's by step source (`measured` or `roofline`), any
    other engine's its own (`sglang`, `tensorrt-llm`: measured tables only), from that engine's published points."""
    return step_source if engine == "vllm" else engine


@dataclass(frozen=True)
class CapacitySource:
    """What a replica's step times rest on, for the plan to state.

    Attributes:
        kind: `measured` (vLLM kernel tables) or `roofline`.
        gpu: the GPU's catalog model name, e.g. `NVIDIA H100 80GB SXM`.
        data: the measured tables' provenance (empty for the roofline).
        reason: why the roofline serves this replica (empty when measured).
        engine: the engine whose tables (or, for vLLM, roofline) time it (engines.yaml name).
    """

    kind: Literal["measured", "roofline"]
    gpu: str
    data: str = ""
    reason: str = ""
    engine: str = "vllm"

    def describe(self) -> str:
        """e.g. `measured vLLM 0.24.0 kernel data (AIConfigurator 0.12.0, h100_sxm) for NVIDIA H100 80GB SXM` or
        `roofline, NVIDIA A10G (no measured vLLM kernel data for NVIDIA A10G)`."""
        if self.kind == "measured":
            return f"measured {self.data} for {self.gpu}"
        return f"roofline, {self.gpu} ({self.reason})"

    def summary(self) -> str:
        """`describe()` and the cross-validated error of this source against the published points it times
        (`defaults.CAPACITY_UNCERTAINTY`), as a plan states it."""
        e = defaults.CAPACITY_UNCERTAINTY[band_cell(self.engine, self.kind)]
        return (f"{self.describe()}; error against the {e['points']} published measurements this source times, each "
                f"predicted with constants fitted without its source: median {e['median']:.0%}, p90 {e['p90']:.0%} "
                "(README, How far to trust the numbers)")


@dataclass(frozen=True)
class ReplicaModel:
    """The step-time and frontend model of one replica (seconds, per replica). Build with `replica_model()`;
    `step_s()` is the one step formula the simulation, the analytic screen and the engine limits share.

    Attributes:
        kv_cache_tokens: tokens of KV cache the replica holds.
        weights_gib: weight memory of the whole model, GiB.
        kv_bytes_per_token: KV bytes per token (all layers, one replica).
        engine: the engine profile steps are timed for.
        steps: the kernel-time source (measured tables or roofline).
        source: what `steps` rests on, for the plan.
        correction: calibration factors (identity unless given).
        chat: requests come through the chat endpoint (the API server renders the chat template for each).
    """

    kv_cache_tokens: int
    weights_gib: float
    kv_bytes_per_token: int
    engine: EngineProfile
    steps: MeasuredSteps | RooflineSteps = field(repr=False)
    source: CapacitySource
    frontend_latency_s: float
    correction: Correction = Correction()
    chat: bool = True
    #: The physics floor: (seconds to stream the weights of one shard, seconds per token of context read), at the
    #: GPUs' full memory bandwidth.
    floor_s: tuple[float, float] = (0.0, 0.0)

    def step_s(self, decode: int, decode_context: float, prefill: int = 0, prefill_pairs: float = 0.0) -> float:
        """Wall time of one engine step, s.

        Args:
            decode: sequences decoding one token this step.
            decode_context: their summed context, tokens (KV each reads).
            prefill: prompt tokens this step computes (chunks of one or more requests).
            prefill_pairs: attention (query, context) pairs of those chunks: sum of chunk x (start + chunk / 2).
        """
        return self.step_function(decode, decode_context, prefill, prefill_pairs)

    @cached_property
    def step_function(self) -> Callable[..., float]:
        """`step_s` as a plain function with this replica's constants bound once: the simulation calls it at every
        step, thousands of times a run. The one step formula (`step_s` calls it)."""
        e = self.engine
        kernel_s = self.steps.kernel_s
        factor, overhead, host = e.prefill_kernel_factor, e.step_overhead_s, e.host_s_per_sequence
        in_series = e.step_s_per_sequence
        scale = self.correction.step_time
        weights_floor, context_floor = self.floor_s

        def step_s(decode: int, decode_context: float, prefill: int = 0, prefill_pairs: float = 0.0) -> float:
            kernel = kernel_s(decode, decode_context, prefill, prefill_pairs)
            if prefill:
                kernel *= factor
            gpu = overhead + (decode + (1 if prefill else 0)) * in_series + scale * kernel
            physics = weights_floor + decode_context * context_floor
            if gpu < physics:
                gpu = physics
            floor = decode * host
            return gpu if gpu >= floor else floor

        return step_s

    def frontend_s(self, prompt_tokens: int) -> tuple[float, float]:
        """(latency, serial work) of the frontend for a request of `prompt_tokens`, s: the latency overlaps other
        requests, the serial work queues behind theirs (one API server process)."""
        return self.frontend_function(prompt_tokens)

    @cached_property
    def frontend_function(self) -> Callable[[int], tuple[float, float]]:
        """`frontend_s` as a plain function with this replica's constants bound once: the simulation calls it for
        every request. The one frontend formula (`frontend_s` calls it)."""
        e, f = self.engine, self.correction.ttft_floor
        latency = f * self.frontend_latency_s
        serial = e.frontend_serial_s + (e.frontend_chat_serial_s if self.chat else 0.0)
        per_token = e.frontend_serial_s_per_token

        def frontend_s(prompt_tokens: int) -> tuple[float, float]:
            return latency, f * (serial + prompt_tokens * per_token)

        return frontend_s


def replica_model(arch: Architecture, gpu: Gpu, *, precision: Precision, tensor_parallel_size: int,
                  quantization: Quantization | None = None, kv_cache_fp8: bool = False,
                  gpu_memory_utilization: float = defaults.GPU_MEMORY_UTILIZATION,
                  engine: EngineProfile | None = None, correction: Correction = Correction(),
                  step_source: Literal["auto", "measured", "roofline"] = "auto",
                  lora: LoraSlots | None = None, chat: bool = True) -> ReplicaModel:
    """The step-time model of one replica.

    Args:
        arch: model shape (catalog or explicit).
        gpu: GPU record.
        precision: weight precision.
        tensor_parallel_size: GPUs per replica.
        quantization: quantisation method; defaults to the one `precision` implies.
        kv_cache_fp8: FP8 KV cache (`--kv-cache-dtype fp8`).
        gpu_memory_utilization: fraction of each GPU's memory vLLM may use.
        engine: engine profile; the pinned vLLM by default.
        correction: calibration factors of this (model, GPU, engine, tensor parallel); identity by default.
        step_source: `auto` (the measured tables where they exist and `defaults.MEASURED_STEP_GPUS` chooses them,
            else the roofline), or either one where it exists (`benchmarks/sizing.py --sources` compares them).
        lora: the LoRA slots the replica allocates (their memory leaves the KV cache); none by default.
        chat: requests come through the chat endpoint (the planned traffic's `api`, by default chat); false for the
            completions endpoint (`vllm bench serve`'s default).

    Returns:
        A `ReplicaModel`; its `source` says which step times it uses and, for the roofline, why.
    """
    engine = engine or engine_profile()
    measured, reason = _measured(arch, gpu, precision=precision, quantization=quantization,
                                 tensor_parallel_size=tensor_parallel_size, kv_cache_fp8=kv_cache_fp8,
                                 step_source=step_source, engine=engine.tables)
    if measured is not None and step_source != "roofline":
        steps: MeasuredSteps | RooflineSteps = measured
        source = CapacitySource("measured", gpu.model, data=measured.data, engine=engine.tables)
    else:
        steps = roofline_steps(arch, gpu, precision=precision, tensor_parallel_size=tensor_parallel_size,
                               quantization=quantization, kv_cache_fp8=kv_cache_fp8)
        source = CapacitySource("roofline", gpu.model, reason=reason or "the roofline was asked for",
                                engine=engine.tables)
    return ReplicaModel(
        kv_cache_tokens=kv_cache_tokens(arch, gpu, precision=precision, tensor_parallel_size=tensor_parallel_size,
                                        kv_cache_fp8=kv_cache_fp8, gpu_memory_utilization=gpu_memory_utilization,
                                        lora=lora),
        weights_gib=weights_gib(arch, precision),
        kv_bytes_per_token=kv_bytes_per_token(arch, kv_cache_fp8=kv_cache_fp8, precision=precision),
        engine=engine,
        steps=steps,
        source=source,
        frontend_latency_s=engine.frontend_latency_s,
        correction=correction,
        chat=chat,
        floor_s=physics_floor(arch, gpu, precision=precision, tensor_parallel_size=tensor_parallel_size,
                              kv_cache_fp8=kv_cache_fp8),
    )


def physics_floor(arch: Architecture, gpu: Gpu, *, precision: Precision, tensor_parallel_size: int,
                  kv_cache_fp8: bool) -> tuple[float, float]:
    """(s to stream one shard's weights, s per token of context read) at the GPUs' full memory bandwidth: no step is
    faster than a decode step's weights and KV cache over `gpu.bandwidth_gb_per_s` (the embedding table is looked up,
    not streamed; a tied table is read once, as the output projection). Quantised weights count at their own bytes
    (`precision.bytes_per_param`): a lower bound, whatever the kernels' efficiency."""
    bandwidth = tensor_parallel_size * gpu.bandwidth_gb_per_s * 1e9
    streamed = arch.params_b * 1e9 - (arch.embedding_params_b * 1e9 if arch.vocab_size and not
                                      arch.tie_word_embeddings else 0.0) / 2
    kv = kv_bytes_per_token(arch, kv_cache_fp8=kv_cache_fp8, precision=precision)
    return streamed * precision.bytes_per_param / bandwidth, kv / bandwidth


def _measured(arch: Architecture, gpu: Gpu, *, precision: Precision, quantization: Quantization | None,
              tensor_parallel_size: int, kv_cache_fp8: bool, step_source: str,
              engine: str = "vllm") -> tuple[MeasuredSteps | None, str]:
    measured, reason = lookup(arch, gpu, precision=precision, quantization=quantization,
                              tensor_parallel_size=tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, engine=engine)
    if measured is not None and step_source == "auto" and gpu.name not in defaults.MEASURED_STEP_GPUS:
        return None, f"the roofline is closer to the published points on {gpu.model}"
    return measured, reason


def step_source_kind(arch: Architecture, gpu: Gpu, *, precision: Precision, quantization: Quantization | None,
                     tensor_parallel_size: int, kv_cache_fp8: bool,
                     engine: str = "vllm") -> Literal["measured", "roofline"]:
    """Which step source `replica_model` times this replica with by default (`CapacitySource.kind`), for `engine`'s
    tables."""
    measured, _ = _measured(arch, gpu, precision=precision, quantization=quantization,
                            tensor_parallel_size=tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, step_source="auto",
                            engine=engine)
    return "measured" if measured is not None else "roofline"


def default_batch_limits(gpu: Gpu, engine: EngineProfile | None = None) -> tuple[int, int]:
    """The engine's (max_num_batched_tokens, max_num_seqs) defaults on this GPU, where a run sets neither:

    - vLLM V1 (the default): its OpenAI server's per-GPU defaults (`defaults.VLLM_DEFAULT_BATCH`);
    - SGLang 0.5: chunked_prefill_size 4096 below 60 GiB, 8192 up to 160 GiB, 16384 above, and a request pool of
      2,048 (server_args.py _handle_gpu_memory_settings :743-761, model_runner.py :1565-1574 at 0.5.5.post1; the KV
      cache caps running requests before the pool does);
    - TensorRT-LLM 1.x: max_num_tokens 8192 and max_batch_size 2048 (BuildConfig defaults, engines.yaml).
    """
    tables = engine.tables if engine is not None else "vllm"
    if tables == "sglang":
        return (4096 if gpu.memory_gib < 60 else 8192 if gpu.memory_gib <= 160 else 16384), 2048
    if tables == "tensorrt-llm":
        return 8192, 2048
    large = gpu.memory_gib >= 70 and "a100" not in gpu.name
    return defaults.VLLM_DEFAULT_BATCH["large" if large else "other"]


def default_memory_utilization(engine: EngineProfile, gpu: Gpu, *, weights_gib_per_gpu: float,
                               tensor_parallel_size: int) -> float:
    """The share of each GPU's memory an engine takes for weights and KV cache when a run sets none, in vLLM's sense
    (`gpu_memory_utilization`):

    - vLLM: `defaults.GPU_MEMORY_UTILIZATION`;
    - SGLang 0.5: mem_fraction_static = (capacity - reserved) / capacity, reserved = max(512 + 1.5 x chunked prefill
      + 2 x cuda_graph_max_bs (256; 512 above 160 GiB) + TP x 128, 10,240) MiB above 60 GiB, else 5,120 MiB
      [simplified below 60 GiB] (server_args.py :788-829 at 0.5.5.post1): 0.835 on an 80 GB H100, 0.907 on an H200;
    - TensorRT-LLM 1.x: the KV cache takes 0.9 of the memory left after the weights (free_gpu_memory_fraction).
    """
    capacity_mib = gpu.memory_gib * 1024
    if engine.tables == "sglang":
        chunk, _ = default_batch_limits(gpu, engine)
        graphs = 512 if gpu.memory_gib > 160 else 256
        reserved = max(512 + 1.5 * chunk + 2 * graphs + tensor_parallel_size * 128, 10240) \
            if gpu.memory_gib > 60 else 5120
        return round((capacity_mib - reserved) / capacity_mib, 3)
    if engine.tables == "tensorrt-llm":
        free = max(0.0, gpu.memory_gib - weights_gib_per_gpu)
        return round(min(0.98, (weights_gib_per_gpu + 0.9 * free) / gpu.memory_gib), 3)
    return defaults.GPU_MEMORY_UTILIZATION


def planned_memory_utilization(engine: EngineProfile, gpu: Gpu, *, weights_gib_per_gpu: float,
                               tensor_parallel_size: int) -> tuple[float, float]:
    """(the value the planner passes the engine's memory flag, the share of each GPU's memory the capacity model
    sizes the KV cache with, in vLLM's sense):

    - vLLM: `defaults.GPU_MEMORY_UTILIZATION` both (--gpu-memory-utilization);
    - SGLang: its own default --mem-fraction-static (`default_memory_utilization`): weights and KV pool only, the
      activations and CUDA graphs reserved outside it, so vLLM's 0.9 would leave them too little;
    - TensorRT-LLM: --kv_cache_free_gpu_memory_fraction 0.9, the KV cache's share of the memory the weights leave.
    """
    if engine.tables == "tensorrt-llm":
        return 0.9, memory_share(engine, 0.9, gpu, weights_gib_per_gpu=weights_gib_per_gpu)
    value = default_memory_utilization(engine, gpu, weights_gib_per_gpu=weights_gib_per_gpu,
                                       tensor_parallel_size=tensor_parallel_size)
    return value, value


def memory_share(engine: EngineProfile, flag: float, gpu: Gpu, *, weights_gib_per_gpu: float) -> float:
    """`contracts.memory.engine_memory_share` for an engine profile (its tables name the engine)."""
    return engine_memory_share(engine.tables, flag, gpu, weights_gib_per_gpu=weights_gib_per_gpu)
