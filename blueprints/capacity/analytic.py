"""The mean-value (analytic) model of one replica: fast, monotone, no randomness.

Used to screen candidates before the simulation (`blueprints.capacity.planning`) and as the closed-loop what-if
`estimate_llm`. In steady state with `n` sequences running of mean prompt I and output O tokens, n/O requests
complete (and arrive) per step, each needing ceil(I / chunk) prefill chunks, so a share f = min(1, n x chunks / O) of
the steps carry a chunk. ITL is the mix of plain and chunk-carrying steps; TTFT is the frontend (latency and serial
work) plus the request's own chunks plus, in a closed loop beyond what the replica runs at once, the wait for a slot
(Little's law). Engines without chunked prefill run each prompt as its own step, which every running sequence waits
through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints.core import defaults
from blueprints.capacity.physics import ReplicaModel, default_batch_limits
from blueprints.catalog import Gpu


@dataclass(frozen=True)
class LlmEstimate:
    """Prediction for one replica (`tensor_parallel_size` GPUs) at a fixed concurrency (closed loop).

    Attributes:
        fits: weights plus one `max_model_len` sequence of KV cache fit in the usable memory.
        weights_gib: weight memory, GiB (whole model, all ranks).
        kv_cache_tokens: tokens of KV cache the replica holds after weights and overhead.
        max_concurrency: sequences of mean length (input + output) that fit at once, capped by max_num_seqs.
        ttft_ms: mean time to first token at this concurrency, ms.
        itl_ms: mean inter-token latency at this concurrency, ms.
        output_tokens_per_s: generated tokens/s of the replica at this concurrency, TTFT included.
        requests_per_s: completed requests/s at this concurrency (Little's law).
    """

    fits: bool
    weights_gib: float
    kv_cache_tokens: int
    max_concurrency: int
    ttft_ms: float
    itl_ms: float
    output_tokens_per_s: float
    requests_per_s: float

    def holds(self, concurrency: int) -> bool:
        """The replica fits in memory and keeps `concurrency` sequences of mean length without preemption."""
        return self.fits and concurrency <= self.max_concurrency


@dataclass(frozen=True)
class MeanValues:
    """Mean-value latencies at `running` sequences (s)."""

    running: int
    itl_s: float
    prefill_s: float
    request_s: float  # one request's service time once admitted: its prefill plus O - 1 token gaps


def mean_values(model: ReplicaModel, *, running: int, input_tokens: float, output_tokens: float,
                max_num_batched_tokens: int) -> MeanValues:
    """Steady-state ITL and prefill time with `running` sequences decoding."""
    n = max(1, running)
    inp, out = max(1.0, input_tokens), max(1.0, output_tokens)
    context = n * (inp + out / 2)
    if model.engine.chunked_prefill:
        chunk = max(1.0, min(inp, max_num_batched_tokens - n))
        chunks = math.ceil(inp / chunk)
        share = min(1.0, n * chunks / out)
        plain = model.step_s(n, context)
        loaded = model.step_s(n, context, int(chunk), chunk * (inp - chunk / 2))
        itl = (1 - share) * plain + share * loaded
        prefill = chunks * model.step_s(n - 1, context, int(chunk), chunk * (inp - chunk / 2))
    else:
        prefill = model.step_s(0, 0.0, int(inp), inp * inp / 2)
        itl = model.step_s(n, context) + n / out * prefill
    return MeanValues(n, itl, prefill, prefill + (out - 1) * itl)


def prefill_time_share(model: ReplicaModel, *, running: int, input_tokens: float, output_tokens: float) -> float:
    """The share (0-1) of a replica's busy time that goes to its requests' prompts, split as prefill-decode
    disaggregation would split it: a prompt's prefill on its own (one step of its tokens) against its O output tokens
    decoded among `running` sequences (O plain steps, each shared by `running`). Not the marginal cost of a chunk in a
    mixed step: while a step is bound by reading the weights, a chunk beside the decoders adds almost nothing (an 8B
    on an L4 at 7 running: 0.04 ms on a 36.9 ms step), which would price prompts at nearly zero. What a plan's unit
    costs split between input and output tokens with (`blueprints.plan.unit_costs`)."""
    n = max(1, running)
    inp, out = max(1.0, input_tokens), max(1.0, output_tokens)
    prefill = model.step_s(0, 0.0, int(inp), inp * inp / 2)
    decode = out * model.step_s(n, n * (inp + out / 2)) / n
    return prefill / (prefill + decode)


def saturation_rps(model: ReplicaModel, *, running: int, input_tokens: float, output_tokens: float,
                   max_num_batched_tokens: int) -> float:
    """Requests/s the replica completes with `running` sequences always busy (its saturated rate)."""
    mv = mean_values(model, running=running, input_tokens=input_tokens, output_tokens=output_tokens,
                     max_num_batched_tokens=max_num_batched_tokens)
    return mv.running / mv.request_s


def estimate_closed_loop(model: ReplicaModel, gpu: Gpu, *, concurrency: int, input_tokens: int, output_tokens: int,
                         max_model_len: int | None = None, max_num_seqs: int | None = None,
                         max_num_batched_tokens: int | None = None) -> LlmEstimate:
    """The mean-value prediction at a fixed concurrency.

    Args:
        model: the replica (`physics.replica_model`).
        gpu: its GPU (for vLLM's default batch limits).
        concurrency: clients, each with one request in flight (>= 1).
        input_tokens, output_tokens: mean per request, tokens.
        max_model_len: longest sequence that must fit, tokens. Defaults to input + output.
        max_num_seqs: `--max-num-seqs`; caps `max_concurrency` and the running sequences. Defaults to no cap
            (`max_concurrency` is then what the KV cache holds).
        max_num_batched_tokens: the step token budget. Defaults to vLLM's for the GPU (or max_model_len for
            engines without chunked prefill).

    Returns:
        An `LlmEstimate`. Latency is computed even when it does not fit (for what-if comparisons).
    """
    need_len = max_model_len or (input_tokens + output_tokens)
    kv = model.kv_cache_tokens
    held = kv // (input_tokens + output_tokens)
    max_conc = min(max_num_seqs, held) if max_num_seqs else held
    if max_num_batched_tokens is None:
        max_num_batched_tokens = (default_batch_limits(gpu, model.engine)[0] if model.engine.chunked_prefill
                                  else max(need_len, defaults.V0_MIN_BATCHED_TOKENS))
    running = max(1, min(concurrency, max_conc)) if max_conc else concurrency
    mv = mean_values(model, running=running, input_tokens=input_tokens, output_tokens=output_tokens,
                     max_num_batched_tokens=max_num_batched_tokens)
    queued = max(0, concurrency - running)
    wait = queued * mv.request_s / running
    latency, serial = model.frontend_s(input_tokens)
    ttft = latency + serial + wait + mv.prefill_s
    request = ttft + (output_tokens - 1) * mv.itl_s
    return LlmEstimate(
        fits=kv >= need_len,
        weights_gib=round(model.weights_gib, 2),
        kv_cache_tokens=kv,
        max_concurrency=max_conc,
        ttft_ms=round(ttft * 1e3, 2),
        itl_ms=round(mv.itl_s * 1e3, 2),
        output_tokens_per_s=round(concurrency * output_tokens / request, 3),
        requests_per_s=round(concurrency / request, 3),
    )
