"""A discrete-event simulation of one vLLM replica's scheduler, stepping on the replica's step time
(`blueprints.capacity.physics.ReplicaModel.step_s`: measured vLLM kernel tables or the roofline).

What it models (vLLM V1's `Scheduler.schedule`, and V0's for the engines of older measurements):
- Every step first advances the running requests in admission order: each decoding request by one token, a
  partially prefilled prompt by the rest of the `max_num_batched_tokens` budget (chunked prefill, at most one
  partial prompt at a time). Then, if nothing was preempted, waiting requests are admitted first-come first-served
  while the token budget, `max_num_seqs` and the free KV-cache blocks allow; a prompt that does not fit the budget is
  chunked over later steps.
- Admission against the KV cache follows the engine profile's `kv_reserve_ratio`: vLLM's on demand (the prompt's
  blocks free), or reserving (SGLang, TensorRT-LLM): a request's whole prompt and output must fit besides that share
  of every running request's output still to come (decaying to `kv_reserve_floor` over the decode steps since the
  replica was last idle), so the engine seldom (SGLang) or never (TensorRT-LLM's GUARANTEED_NO_EVICT) preempts.
- KV cache in 16-token blocks: a request holds ceil(computed tokens / 16) blocks. When a step cannot allocate the
  blocks its requests need, the most recently admitted running request is preempted (vLLM's recompute mode: its
  blocks are freed, it goes back to the front of the queue and later recomputes its prompt and the tokens it had
  generated).
- Without chunked prefill (engine profiles of vLLM 0.4-0.6), a step either prefills the admissible waiting prompts
  (up to the token budget, keeping a 1 % watermark of blocks free) while decoding pauses, or decodes every running
  request.
- Each step lasts `ReplicaModel.step_s` of its decode sequences, their context and its prefill tokens. A token is
  emitted at the end of the step that computes it: TTFT ends with the step finishing the prompt, each later token's
  gap (ITL) is the time since that request's previous token. A request reaches the scheduler after the frontend's
  latency and its share of the API server's serial work (`ReplicaModel.frontend_s`: request handling and tokenisation,
  one request at a time), so requests sent together reach it one after another; TTFT and request latency count from
  the send.
- V0 engines with multi-step scheduling (`EngineProfile.scheduler_steps` > 1, vLLM 0.6's `--num-scheduler-steps`)
  decode in windows of that many steps: a prompt waiting is prefilled only when the window ends, and a request whose
  last token falls inside a window keeps its slot (and is seen to finish) until the window ends.
Runs of identical decode steps between events (an arrival, a completion, the KV cache filling) are advanced in one go
with their summed duration (the step time is linear in the context that grows by one token per sequence each step), so
a run costs a few microseconds per request rather than per token. Deterministic: no clock, no unseeded randomness.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from itertools import accumulate

from blueprints.core import defaults
from blueprints.core.freshstack import fresh_stack
from blueprints.capacity.physics import ReplicaModel
from blueprints.capacity.workload import Requests

_BLOCK = defaults.KV_BLOCK_TOKENS  # n tokens occupy ceil(n / _BLOCK) KV-cache blocks, written -(-n // _BLOCK)


@dataclass(frozen=True)
class SchedulerConfig:
    """The engine flags the simulation honours.

    Attributes:
        max_num_seqs: `--max-num-seqs`, running requests at most.
        max_num_batched_tokens: `--max-num-batched-tokens`, tokens one step computes at most.
        kv_cache_blocks: KV-cache blocks of `defaults.KV_BLOCK_TOKENS` tokens the replica holds.
    """

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_blocks: int


@dataclass(frozen=True)
class Percentiles:
    """A latency distribution, ms."""

    p50: float
    p95: float
    p99: float
    mean: float


@dataclass(frozen=True)
class SimulationResult:
    """What one simulated run measured after warm-up.

    Attributes:
        ttft_ms: time to first token per request (frontend + queueing + prefill).
        itl_ms: gaps between consecutive tokens of a request, over all tokens (what vLLM's
            `vllm:inter_token_latency_seconds` histogram observes).
        tpot_ms: time per output token of each request after its first, (latency - TTFT) / (tokens - 1), over the
            requests of more than one token (`vllm bench serve`'s TPOT).
        e2e_ms: request latency, arrival to last token.
        requests_per_s: completed requests/s.
        output_tokens_per_s: generated tokens/s.
        mean_running: time-averaged decoding sequences.
        preemptions: requests preempted (KV cache exhausted).
        stable: False when the offered load exceeds the replica: the queue outgrew its limit (the run stopped
            early), or when the last request arrived more than 20 + 5 % of the requests were still waiting or more
            were in the replica than Little's law allows at the latency of those done (a batch growing without
            bound), or when the run stopped at a p95 it had already missed (`simulate`'s `stop_above_ms`). The
            latencies then describe an overloaded replica, or the requests done so far.
        measured: requests measured.
        duration_s: from the first measured request's send to the last one's completion, s (a benchmark's wall
            time: its throughput is requests / duration).
        output_tokens: tokens the measured requests generated.
        input_tokens: prompt tokens of the measured requests.
    """

    ttft_ms: Percentiles
    itl_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    requests_per_s: float
    output_tokens_per_s: float
    mean_running: float
    preemptions: int
    stable: bool
    measured: int
    duration_s: float
    output_tokens: int
    input_tokens: int = 0


def _percentiles(values: list[float]) -> Percentiles:
    if not values:
        return Percentiles(math.inf, math.inf, math.inf, math.inf)
    data = sorted(values)

    def q(p: float) -> float:
        pos = p * (len(data) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(data) - 1)
        return data[lo] + (data[hi] - data[lo]) * (pos - lo)

    return Percentiles(round(q(0.5), 3), round(q(0.95), 3), round(q(0.99), 3), round(sum(data) / len(data), 3))


def _weighted_percentiles(values: list[float], weights: list[float]) -> Percentiles:
    total = sum(weights)
    if not values or total <= 0:
        return Percentiles(math.inf, math.inf, math.inf, math.inf)
    order = sorted(range(len(values)), key=values.__getitem__)
    marks = [0.5 * total, 0.95 * total, 0.99 * total]
    found: list[float] = []
    acc = 0.0
    for i in order:
        acc += weights[i]
        while marks and acc >= marks[0] - 1e-9:
            found.append(values[i])
            marks.pop(0)
        if not marks:
            break
    while len(found) < 3:
        found.append(values[order[-1]])
    mean = sum(v * w for v, w in zip(values, weights)) / total
    return Percentiles(round(found[0], 3), round(found[1], 3), round(found[2], 3), round(mean, 3))


@fresh_stack  # its loop calls the step function millions of times (blueprints.core.freshstack)
def simulate(model: ReplicaModel, config: SchedulerConfig, shapes: Requests, *, arrivals: list[float] | None = None,
             concurrency: int | None = None, warmup: int = 0, queue_limit: int | None = None,
             stop_above_ms: tuple[float | None, float | None] = (None, None),
             starts: list[float] | None = None) -> SimulationResult:
    """Run one replica over a workload.

    Args:
        model: the replica's step-time model (its engine profile decides chunked prefill).
        config: scheduler limits and KV blocks.
        shapes: prompt and output tokens per request, in arrival order.
        arrivals: open loop: each request's arrival time, s (non-decreasing), one per request.
        concurrency: closed loop instead: this many clients, all sending their first request at time 0 (or at
            `starts`, one time per client) and each its next one when its previous one completes.
        warmup: requests (in arrival order) excluded from the statistics.
        queue_limit: stop and report `stable=False` when more requests than this wait.
        stop_above_ms: (TTFT, request latency) p95 targets, ms (None: none), for a search that only asks whether a
            run meets them (open loop only): stop and report `stable=False` once so many measured requests have
            finished at least 0.001 ms above a target that the p95 must exceed it (the 0.001: the p95 is rounded to
            3 decimals). A run that meets them runs to its end, so its result is the one without them.

    Returns:
        A `SimulationResult`.
    """
    prompt, out = shapes.input_tokens, shapes.output_tokens
    n_req = len(prompt)
    closed = arrivals is None
    if closed:
        if not concurrency:
            raise ValueError("give arrivals (open loop) or concurrency (closed loop)")
        issued = min(concurrency, n_req)
        sends = list(starts[:issued]) if starts else [0.0] * issued
        arrival = sends + [math.inf] * (n_req - issued)
    else:
        arrival = list(arrivals)  # type: ignore[arg-type]
        issued = n_req
    # After the frontend's latency the API server handles requests one at a time (request handling, tokenisation)
    # before the engine sees them, so requests sent together reach the scheduler one after another.
    frontend_s = model.frontend_function
    frontend = [frontend_s(p) for p in prompt]
    ready = [math.inf] * n_req
    frontend_free = 0.0
    for i in range(issued):
        frontend_free = ready[i] = max(arrival[i] + frontend[i][0], frontend_free) + frontend[i][1]
    scheduled = issued  # requests whose arrival time is known
    chunked = model.engine.chunked_prefill
    window_steps = 1 if chunked else model.engine.scheduler_steps
    window = 0  # V0 multi-step: decode steps left in the current scheduling window
    mns, mnbt = config.max_num_seqs, config.max_num_batched_tokens
    free = config.kv_cache_blocks
    watermark = 0 if chunked else int(defaults.V0_WATERMARK * config.kv_cache_blocks)
    # 0: admit on demand (vLLM); else reserve outputs (SGLang, TensorRT-LLM), a share decaying from the last idle step
    ratio0, floor = model.engine.kv_reserve_ratio, model.engine.kv_reserve_floor
    decay = (ratio0 - floor) / model.engine.kv_reserve_decay_steps
    idle_g = 0  # G when the replica was last idle
    step_s = model.step_function

    computed = [0] * n_req
    gen = [0] * n_req
    base = [0] * n_req
    end = [0] * n_req  # a decoder's heap key: the step count G at which it has generated its last token
    version = [0] * n_req
    first_t = [math.nan] * n_req
    finish_t = [math.nan] * n_req
    last_t = [0.0] * n_req
    waiting: deque[int] = deque()
    running: list[int] = []
    heap: list[tuple[int, int, int]] = []
    counts = [0] * _BLOCK
    sum_base = 0
    sum_end = 0
    n_dec = 0
    partial = -1
    G = 0
    t = 0.0
    next_arr = 0
    t_measure = 0.0 if warmup <= 0 or warmup >= n_req or closed else ready[warmup]
    measuring = warmup <= 0
    itl_v: list[float] = []
    itl_w: list[float] = []
    busy_seq_s = 0.0
    preemptions = 0
    stable = True
    finished = 0
    stall = 0.0  # V0: prefill time decoders waited through since their last decode step
    joined_stall: list[float] = []  # V0: stall already elapsed when each newly joined decoder got its first token
    limit = queue_limit if queue_limit is not None else math.inf
    backlog_limit = 20 + n_req // 20
    first = max(0, warmup) if warmup < n_req else 0
    # A stable open-loop run measures every request from `first`, and its p95 is at least the int(0.95 (n - 1))-th
    # smallest of their n values: once `must_miss` of them are at or above a stop target, the p95 is too.
    measured_n = n_req - first
    stop_ttft, stop_e2e = (math.inf if ms is None or closed else ms + 1e-3 for ms in stop_above_ms)
    must_miss = measured_n - int(0.95 * (measured_n - 1)) if measured_n > 0 else math.inf
    slow_ttft = slow_e2e = 0

    def overloaded() -> bool:
        """At the last arrival: more than 20 + 5 % of the run still waiting, or more requests in the replica than
        Little's law gives for the rate and the latency of those already done (the batch grew without bound)."""
        if len(waiting) > backlog_limit:
            return True
        done = [finish_t[i] - arrival[i] for i in range(n_req) if not math.isnan(finish_t[i])]
        if not done or t <= 0:
            return False
        in_system = n_req - len(done)
        return in_system > 20 + 2 * (n_req / t) * (sum(done) / len(done))

    def join_or_finish(i: int) -> None:
        """The step computing request i's last prompt token ended at t: emit a token."""
        nonlocal sum_base, sum_end, n_dec
        if gen[i] == 0:
            first_t[i] = t
        elif measuring:
            itl_v.append(t - last_t[i])
            itl_w.append(1.0)
        gen[i] += 1
        last_t[i] = t
        if gen[i] >= out[i]:
            finish(i, decoder=False)
            return
        b = computed[i] - G
        base[i] = b
        counts[b % _BLOCK] += 1
        sum_base += b
        n_dec += 1
        end[i] = G + out[i] - gen[i]
        sum_end += end[i]
        heapq.heappush(heap, (end[i], i, version[i]))
        if not chunked:
            joined_stall.append(stall)

    def finish(i: int, *, decoder: bool) -> None:
        nonlocal sum_base, sum_end, n_dec, free, finished, issued, scheduled, frontend_free, slow_ttft, slow_e2e
        free += -(-(base[i] + G if decoder else computed[i]) // _BLOCK)
        if decoder:
            counts[base[i] % _BLOCK] -= 1
            sum_base -= base[i]
            sum_end -= end[i]
            n_dec -= 1
        running.remove(i)
        gen[i] = out[i]
        finish_t[i] = t
        finished += 1
        if i >= first:
            slow_ttft += (first_t[i] - arrival[i]) * 1e3 >= stop_ttft
            slow_e2e += (t - arrival[i]) * 1e3 >= stop_e2e
        if closed and issued < n_req:  # the client sends its next request now
            arrival[issued] = t
            frontend_free = ready[issued] = max(t + frontend[issued][0], frontend_free) + frontend[issued][1]
            issued += 1
            scheduled = issued

    def preempt_tail() -> int:
        """Preempt the most recently admitted running request; return how many of this step's decoder blocks it
        no longer needs (1 if it was a decoder due for a new block)."""
        nonlocal sum_base, sum_end, n_dec, free, partial, preemptions
        v = running.pop()
        preemptions += 1
        saved = 0
        if v == partial:
            free += -(-computed[v] // _BLOCK)
            partial = -1
        else:
            c = base[v] + G
            free += -(-c // _BLOCK)
            if base[v] % _BLOCK == (-G) % _BLOCK:
                saved = 1
            counts[base[v] % _BLOCK] -= 1
            sum_base -= base[v]
            sum_end -= end[v]
            n_dec -= 1
            version[v] += 1
            last_t[v] = t
        computed[v] = 0
        waiting.appendleft(v)
        return saved

    def finish_decoders() -> None:
        while heap and heap[0][0] <= G:
            _, i, ver = heapq.heappop(heap)
            if ver == version[i] and gen[i] < out[i]:
                finish(i, decoder=True)

    def decoder_blocks(steps: int) -> int:
        """New blocks the decoders need over the next `steps` steps (each crosses a block every 16 tokens)."""
        # the decoders at G + j mod 16 == 0 for j < steps mod 16: counts[g], counts[g - 1], ... (cyclic), g = -G mod 16
        used = (steps // _BLOCK) * n_dec
        r = steps % _BLOCK
        if r:
            g = (-G) % _BLOCK
            used += sum(counts[g - r + 1:g + 1]) if r <= g + 1 else sum(counts[:g + 1]) + sum(counts[g - r + 1:])
        return used

    def run_partial_steps() -> int:
        """Advance through the steps in which the partial prompt takes the whole budget left after the decoders (so
        nothing else is admitted), up to the next completion or the KV cache filling; return how many (0: none worth
        batching, take the full step)."""
        nonlocal free, t, busy_seq_s
        p = partial
        chunk = mnbt - n_dec
        c0 = computed[p]
        k = (prompt[p] + gen[p] - c0 - 1) // chunk  # full-budget steps before the one that finishes the prompt
        while heap and heap[0][2] != version[heap[0][1]]:
            heapq.heappop(heap)
        if heap:
            k = min(k, heap[0][0] - G)

        def used_by(steps: int) -> int:
            return decoder_blocks(steps) - (-(c0 + steps * chunk) // _BLOCK) + (-c0 // _BLOCK)

        if k < 2:
            return 0
        used = used_by(k)
        if used > free:
            lo, hi = 0, k
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if used_by(mid) <= free:
                    lo = mid
                else:
                    hi = mid - 1
            if lo < 2:
                return 0
            k, used = lo, used_by(lo)
        ctx0 = sum_base + n_dec * G
        d0 = step_s(n_dec, ctx0, chunk, chunk * (c0 + chunk / 2))
        dk = step_s(n_dec, ctx0 + n_dec * (k - 1), chunk, chunk * (c0 + (k - 1) * chunk + chunk / 2))
        span = k * (d0 + dk) / 2
        free -= used
        computed[p] = c0 + k * chunk
        t += span
        busy_seq_s += n_dec * span
        if measuring and n_dec:
            w = n_dec * k / 2
            itl_v.append(d0 + (dk - d0) * 0.25)
            itl_w.append(w)
            itl_v.append(d0 + (dk - d0) * 0.75)
            itl_w.append(w)
        return k

    def reserved(pending: int = 0) -> int:
        """Blocks an admission must leave free for the running requests (0 when admitting on demand): `ratio` of
        the output tokens each has still to generate, and the rest of the partial prompt beyond `pending` (this
        step's chunk of it, allocated apart)."""
        if not ratio0:
            return 0
        ratio = max(floor, ratio0 - decay * (G - idle_g))
        rest = ratio * (sum_end - n_dec * G)
        if partial >= 0:
            rest += ratio * (out[partial] - gen[partial]) + prompt[partial] + gen[partial] - computed[partial] - pending
        return math.ceil(rest / _BLOCK)

    def admission_blocks(h: int, chunk: int) -> int:
        """Blocks request h needs free to be admitted with `chunk` prompt tokens this step: the chunk's (on demand),
        or its whole prompt and output (reserving)."""
        return -(-(prompt[h] + out[h]) // _BLOCK) if ratio0 else -(-chunk // _BLOCK)

    def admissible_head(need: int, budget: int) -> bool:
        """Whether this step could admit the head of the queue (V0 admits before decoding, so ignores `need`; a V0
        multi-step window admits nothing until it ends)."""
        if not waiting or len(running) >= mns or budget <= 0 or (window and n_dec):
            return False
        h = waiting[0]
        tokens = prompt[h] + gen[h]
        if chunked:
            return admission_blocks(h, min(tokens, budget)) <= free - need - reserved()
        return tokens <= budget and free - admission_blocks(h, tokens) - reserved() >= watermark

    while True:
        while next_arr < scheduled and ready[next_arr] <= t:
            waiting.append(next_arr)
            next_arr += 1
            if next_arr == n_req and not closed and overloaded():
                stable = False
        if not measuring and (issued > warmup if closed else t >= t_measure):
            measuring = True
        if not running:
            idle_g = G
            if not waiting:
                if next_arr >= scheduled:
                    break
                t = ready[next_arr]
                continue
        if len(waiting) > limit or slow_ttft >= must_miss or slow_e2e >= must_miss:
            stable = False
            break
        need = counts[(-G) % _BLOCK] if n_dec else 0

        # ---- a run of identical decode steps (no prompt work possible until the next event) ----------------------
        budget0 = (mnbt - n_dec) if chunked else mnbt
        if partial < 0 and n_dec and need <= free and stall == 0.0 and not admissible_head(need, budget0):
            while heap and heap[0][2] != version[heap[0][1]]:
                heapq.heappop(heap)
            # A multi-step window runs to its end even past completions (their slots free when it ends).
            k = heap[0][0] - G if heap and window_steps == 1 else 1 << 30
            cycles, rest = divmod(free, n_dec)
            # the steps j < 16 whose new blocks (the decoders at G + j mod 16 == 0) still fit what `rest` leaves
            g = (-G) % _BLOCK
            j = bisect_right(list(accumulate(counts[g::-1] + counts[:g:-1])), rest)
            k = max(1, min(k, cycles * _BLOCK + j))
            if waiting and decay and G - idle_g < model.engine.kv_reserve_decay_steps:
                k = min(k, _BLOCK)  # the reserved share decays: the head of the queue may fit a few steps on
            if window_steps > 1:  # V0 multi-step: stop where the window ends, to admit what waits
                window = window or window_steps
                k = min(k, window)
            ctx0 = sum_base + n_dec * G
            d0 = step_s(n_dec, ctx0)
            dk = step_s(n_dec, ctx0 + n_dec * (k - 1)) if k > 1 else d0
            slope = (dk - d0) / (k - 1) if k > 1 else 0.0
            if next_arr < scheduled and not waiting and len(running) < mns:
                gap = ready[next_arr] - t
                if k * (d0 + dk) / 2 > gap:  # stop at the first step boundary at or after the arrival
                    if slope > 0:
                        a, b = slope / 2, d0 - slope / 2
                        kk = math.ceil((-b + math.sqrt(b * b + 4 * a * gap)) / (2 * a) - 1e-9)
                    else:
                        kk = math.ceil(gap / d0 - 1e-9)
                    k = max(1, min(k, kk))
                    dk = d0 + slope * (k - 1)
            span = k * (d0 + dk) / 2
            free -= decoder_blocks(k)
            t += span
            busy_seq_s += n_dec * span
            if measuring:
                w = n_dec * k / 2
                itl_v.append(d0 + (dk - d0) * 0.25)
                itl_w.append(w)
                itl_v.append(d0 + (dk - d0) * 0.75)
                itl_w.append(w)
            G += k
            if window_steps > 1:
                window -= k
            if not window:
                finish_decoders()
            continue

        # ---- a run of steps that decode and push one long prompt on by the whole token budget each ---------------
        if (chunked and partial >= 0 and mnbt > n_dec
                and (prompt[partial] + gen[partial] - computed[partial] - 1) // (mnbt - n_dec) >= 2):
            k = run_partial_steps()
            if k:
                G += k
                finish_decoders()
                continue

        if chunked:
            # ---- vLLM V1: decoders, the partial prompt, then new prompts within the token budget ----------------
            budget = mnbt - n_dec
            pf_chunk = pf_need = 0
            if partial >= 0:
                pf_chunk = min(prompt[partial] + gen[partial] - computed[partial], max(budget, 0))
                pf_need = (-computed[partial] // _BLOCK) - (-(computed[partial] + pf_chunk) // _BLOCK)
            preempted = False
            while need + pf_need > free and running:
                was_partial = running[-1] == partial
                need -= preempt_tail()
                if was_partial:
                    pf_chunk = pf_need = 0
                preempted = True
            budget -= pf_chunk
            prefill = pf_chunk
            pairs = pf_chunk * (computed[partial] + pf_chunk / 2) if partial >= 0 else 0.0
            admitted: list[tuple[int, int]] = []
            if not preempted:
                held = reserved(pf_chunk)  # blocks kept for the running requests, and for those admitted below
                while waiting and len(running) < mns and budget > 0:
                    h = waiting[0]
                    chunk = min(prompt[h] + gen[h], budget)
                    nb = -(-chunk // _BLOCK)
                    admit = admission_blocks(h, chunk)
                    if admit > free - need - pf_need - held:
                        break
                    held += admit - nb
                    waiting.popleft()
                    running.append(h)
                    free -= nb
                    budget -= chunk
                    prefill += chunk
                    pairs += chunk * chunk / 2
                    admitted.append((h, chunk))
            if not n_dec and not prefill:
                if not waiting:
                    break
                stable = False  # a prompt that can never fit the KV cache
                break
            free -= need + pf_need
            dt = step_s(n_dec, sum_base + n_dec * G, prefill, pairs)
            t += dt
            busy_seq_s += n_dec * dt
            if measuring and n_dec:
                itl_v.append(dt)
                itl_w.append(float(n_dec))
            G += 1
            if partial >= 0:
                p = partial
                computed[p] += pf_chunk
                if computed[p] >= prompt[p] + gen[p]:
                    partial = -1
                    join_or_finish(p)
            for h, chunk in admitted:
                computed[h] = chunk
                if chunk >= prompt[h] + gen[h]:
                    join_or_finish(h)
                else:
                    partial = h
            if heap and heap[0][0] <= G:  # a decoder is done (most steps finish none)
                finish_decoders()
            continue

        # ---- V0 without chunked prefill: a prefill step (decode pauses) or a decode step --------------------------
        batch: list[int] = []
        tokens = 0
        blocks_left = free
        held = reserved()
        while waiting and len(running) + len(batch) < mns and not (window and n_dec):
            h = waiting[0]
            tok = prompt[h] + gen[h]
            nb = -(-tok // _BLOCK)
            admit = admission_blocks(h, tok)
            if tokens + tok > mnbt or blocks_left - admit - held < watermark:
                break
            held += admit - nb
            waiting.popleft()
            batch.append(h)
            tokens += tok
            blocks_left -= nb
        if batch:
            window = 0  # a prefill step ends the multi-step window
            free = blocks_left
            dt = step_s(0, 0.0, tokens, sum((prompt[h] + gen[h]) ** 2 for h in batch) / 2)
            t += dt
            stall += dt
            for h in batch:
                running.append(h)
                computed[h] = prompt[h] + gen[h]
                join_or_finish(h)
            continue
        if not n_dec:
            stable = False  # nothing runs and the head of the queue can never be admitted
            break
        while need > free and n_dec:
            need -= preempt_tail()
        if not n_dec:
            continue
        free -= need
        window = (window or window_steps) - 1
        dt = step_s(n_dec, sum_base + n_dec * G)
        t += dt
        busy_seq_s += n_dec * dt
        if measuring:
            newer = len(joined_stall)
            if n_dec - newer > 0:
                itl_v.append(dt + stall)
                itl_w.append(float(n_dec - newer))
            for s0 in joined_stall:
                itl_v.append(dt + stall - s0)
                itl_w.append(1.0)
        stall = 0.0
        joined_stall.clear()
        G += 1
        if not window:
            finish_decoders()

    done = [i for i in range(first, n_req) if not math.isnan(finish_t[i])]
    ttft = [(first_t[i] - arrival[i]) * 1e3 for i in done]
    e2e = [(finish_t[i] - arrival[i]) * 1e3 for i in done]
    tpot = [(finish_t[i] - first_t[i]) * 1e3 / (out[i] - 1) for i in done if out[i] > 1]
    duration = max((finish_t[i] for i in done), default=t) - (arrival[first] if first < n_req else 0.0)
    if not stable:  # still waiting: their TTFT is at least the time waited so far
        ttft += [(t - arrival[i]) * 1e3 for i in waiting if i >= first]
    mean_out = sum(out[i] for i in done) / len(done) if done else 0.0
    if closed:
        rps = concurrency / (sum(e2e) / len(e2e) / 1e3) if e2e else 0.0  # Little's law, no think time
    else:
        window = (arrival[n_req - 1] - arrival[first]) if n_req - 1 > first else 0.0
        rps = (n_req - 1 - first) / window if window > 0 else 0.0
    return SimulationResult(
        ttft_ms=_percentiles(ttft), itl_ms=_weighted_percentiles([v * 1e3 for v in itl_v], itl_w),
        tpot_ms=_percentiles(tpot), e2e_ms=_percentiles(e2e), requests_per_s=round(rps, 4),
        output_tokens_per_s=round(rps * mean_out, 3),
        mean_running=round(busy_seq_s / t, 3) if t > 0 else 0.0, preemptions=preemptions, stable=stable,
        measured=len(done), duration_s=round(duration, 6), output_tokens=sum(out[i] for i in done),
        input_tokens=sum(prompt[i] for i in done))
