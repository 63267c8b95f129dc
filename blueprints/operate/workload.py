"""The workload a stack was planned with, as `vllm bench serve`'s random dataset sends it: the one place that says
what `blueprint benchmark` sends for a stack, and what `blueprint calibrate` holds a result file to (a file
`blueprint benchmark` wrote for the stack as planned now always matches it).

What the plan assumed (`blueprints.capacity.planning.traffic_shape`, over the stack config's `model.traffic`): mean
and p95 prompt and output lengths, and prompt reuse (`blueprints.requirements.reuse`). The planner sizes one replica
with the tokens vLLM's prefix cache serves counted as cached (`prefix_cache.sizing_cached_tokens`: the shared prefix
every prompt starts with and, on the replica that served a conversation's previous turn, its resent history; whole
16-token KV blocks) and prefills only the rest: prompts shorter by them, mean and p95 alike.

How the random dataset of the pinned client reproduces it (vLLM v0.24.0, `vllm/benchmarks/datasets/datasets.py`
and `datasets/utils.py`, read in the PyPI wheel vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl, sha256
2d2831aeba311292250df0132dbc4d8e9f42c654536eaec48e6fe58acb1822cf):

- **Prefix**: `--random-prefix-len` P (datasets.py:1943, in `add_random_dataset_base_args`, which
  `add_dataset_parser` adds at :1800; int, default 0; the same flag and meaning in v0.11.0,
  vllm/benchmarks/datasets.py:1175, wheel sha256 3861c75ff2b12e24f6d179ff5c084d791b42ded8675d76c8706697c79f68cd62):
  P random tokens drawn once per run (`RandomDataset.sample`, :634-635) start every prompt (:757). The prompt is P
  plus the random part: `--random-input-len` EXCLUDES the prefix (:760 `total_input_len = prefix_len +
  int(input_len)`; the flag's help: "The total input length is the sum of `random-prefix-len` and a random context
  length sampled from [input_len * (1 - range_ratio), input_len * (1 + range_ratio)]"), and the range ratio draws
  the random part only (utils.py:71-73). So P = the planned cached tokens and `--random-input-len` = the planned
  mean prompt - P: the mean prompt comes out as planned, and after a run's first request every prompt finds its P
  tokens cached, as the plan assumed (P is whole KV blocks; the decode and re-encode of the prompt text,
  datasets.py:759-770, may move the prefix's last token, so up to one block is recomputed).
- **Sessions**: the planner counts a conversation's resent history as cached prompt tokens on the replica that
  served its previous turn, which is how it sizes one replica (session or prefix-aware routing, or one replica);
  the benchmark sends every request to one replica, so the history goes into the prefix. The planner's simulation
  counts only the uncached tokens in the KV cache, as with a shared prefix; where the fleet holds one history per
  conversation, the stack config's consistency check keeps `max_num_seqs` within what the KV cache holds that way.
- **Lengths**: `--random-range-ratio` r so that the random part's p95, len(1 + 0.9 r), is the planned p95 less P
  (default `TOKENS_P95_TO_MEAN` x the mean), at most `MAX_RANGE_RATIO` and so that the longest prompt plus output
  fits `max_model_len`; where it narrows the planned distribution, a note says so (`ClientWorkload.notes`). One
  ratio draws both prompts and outputs.

- **API**: the planned traffic's `api` (requirements `traffic.api`, default chat): the chat endpoint renders the
  model's chat template for every request, which the plan counts in every TTFT, so the client calls the same one:
  `--backend openai-chat --endpoint /v1/chat/completions` or `--backend openai --endpoint /v1/completions`
  (vllm/benchmarks/lib/endpoint_request_func.py:869-872 `ASYNC_REQUEST_FUNCS`; the chat request function refuses a
  URL not ending in chat/completions, :348, and sends the random prompt as one user message; `--ignore-eos` reaches
  both payloads, :132-133).

What it cannot reproduce (`ClientWorkload.approximations`; `blueprint benchmark` refuses unless
`--approximate-workload`, and `blueprint calibrate` refuses a result measured so): conversations over several
replicas without the router (scale to zero: the KEDA HTTP interceptor is in front instead), whose turns find their
history cached on the replica they reach 1/N of the time (`prefix_cache.history_hit_rate`): the fleet serves a mix
of prompts with and without their history cached, where the random dataset's one prefix is cached for every request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from blueprints.capacity.planning import traffic_shape
from blueprints.capacity.prefix_cache import history_hit_rate, planned_reuse, routing_for, sizing_cached_tokens
from blueprints.contracts.benchmark_result import BenchmarkResultFile
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.client_api import OPENAI_BASE_PATH, OPENAI_INFERENCE_PATHS
from blueprints.core import defaults

#: Largest `--random-range-ratio` used: [0.1x, 1.9x] the mean (the dataset requires r < 1).
MAX_RANGE_RATIO = 0.9
#: `vllm bench serve --backend` and `--endpoint` per planned API (module docstring).
CLIENT_API = {api: (backend, OPENAI_BASE_PATH + OPENAI_INFERENCE_PATHS[api])
              for api, backend in (("chat", "openai-chat"), ("completions", "openai"))}


@dataclass(frozen=True)
class ClientWorkload:
    """What the random dataset of `vllm bench serve` sends for a stack (tokens per request).

    Attributes:
        model: the served model name (`--model`; the stack config's `models[0].name`).
        engine_image: the serving engine's image the plan pins (the client runs from it too).
        prefix_len: `--random-prefix-len`: tokens every prompt starts with, the planned cached tokens.
        input_len: `--random-input-len`: mean of the random part after the prefix (the planned mean prompt less
            `prefix_len`).
        output_len: `--random-output-len`: mean output.
        range_ratio: `--random-range-ratio` r: the random part and the output uniform in [len(1-r), len(1+r)].
        notes: where the lengths drawn are narrower than planned (reported, not refused).
        approximations: what of the planned workload the random dataset cannot reproduce (module docstring);
            empty when it reproduces it.
        api: the OpenAI API the planned clients call (`chat` or `completions`).
    """

    model: str
    engine_image: str
    prefix_len: int
    input_len: int
    output_len: int
    range_ratio: float
    notes: tuple[str, ...] = ()
    approximations: tuple[str, ...] = ()
    api: str = "chat"

    @property
    def backend(self) -> str:
        """`--backend` of the client for the planned API."""
        return CLIENT_API[self.api][0]

    @property
    def endpoint(self) -> str:
        """`--endpoint` of the client for the planned API."""
        return CLIENT_API[self.api][1]

    @property
    def prompt_len(self) -> int:
        """The mean prompt sent, tokens: the prefix and the random part's mean (the planned mean prompt)."""
        return self.prefix_len + self.input_len


def range_ratio(mean: int, p95: int | None, *, other_mean: int, max_model_len: int | None,
                prefix_len: int = 0) -> tuple[float, list[str]]:
    """The random dataset's range ratio for a planned mean and p95 of the random part (None: `TOKENS_P95_TO_MEAN` x
    the mean), capped by `MAX_RANGE_RATIO`, by a shortest draw of one token, and so that the longest prompt (the
    `prefix_len` tokens and the random part) plus output fits `max_model_len`; (ratio, notes on what was narrowed)."""
    target = p95 if p95 is not None else defaults.TOKENS_P95_TO_MEAN * mean
    ratio = max(0.0, (target / mean - 1) / 0.9)
    notes = []
    if ratio > MAX_RANGE_RATIO:
        notes.append(f"lengths drawn uniformly up to {1 + MAX_RANGE_RATIO:g}x the mean: the planned p95 "
                     f"({target:.0f} tokens, {target / mean:.2f}x) has a longer tail than the random dataset draws "
                     f"(its p95 is {1 + 0.9 * MAX_RANGE_RATIO:.2f}x)")
        ratio = MAX_RANGE_RATIO
    ratio = min(ratio, 1 - 1 / mean) if mean > 1 else 0.0
    if max_model_len is not None and prefix_len + (mean + other_mean) * (1 + ratio) > max_model_len:
        capped = max(0.0, (max_model_len - prefix_len) / (mean + other_mean) - 1)
        notes.append(f"range ratio {ratio:.2f} -> {capped:.2f}: the longest prompt plus output must fit "
                     f"max_model_len {max_model_len}")
        ratio = capped
    return math.floor(round(ratio * 100, 6)) / 100, notes


def _approximations(bp: Blueprint, prefix_len: int) -> tuple[str, ...]:
    """What the random dataset cannot reproduce of the stack's planned workload (module docstring)."""
    traffic = bp.model.traffic
    assert traffic is not None
    reuse = planned_reuse(traffic)
    replicas = bp.autoscaling.max_replicas
    if reuse.session_turns is None or history_hit_rate(routing_for(reuse, routed=bp.router is not None),
                                                       replicas) >= 1:
        return ()
    return (f"model.traffic.session_turns={reuse.session_turns}: conversations over up to {replicas} replicas "
            f"without the router find their history cached on the replica a turn reaches 1/{replicas} of the time, a "
            "mix of prompts with and without it cached; the random dataset's one prefix is cached for every request "
            f"(sent: the {prefix_len} cached tokens the plan sized one replica with)",)


def planned_workload(bp: Blueprint) -> ClientWorkload:
    """What `blueprint benchmark` sends for a stack's planned workload (module docstring).

    Args:
        bp: an LLM stack (its `model.traffic` set: the planner sets it for every generative model).

    Returns:
        The `ClientWorkload`: model, engine image, prefix, random part, output, range ratio, notes and what cannot be
        reproduced.
    """
    traffic = bp.model.traffic
    assert traffic is not None, f"{bp.stack}: no planned traffic"
    engine = bp.engine
    max_len = getattr(engine, "max_model_len", None) or bp.model.max_context_tokens
    prefix = sizing_cached_tokens(planned_reuse(traffic))
    shape = traffic_shape(traffic.mean_input_tokens, traffic.input_tokens_p95, traffic.mean_output_tokens,
                          traffic.output_tokens_p95, pattern=traffic.pattern, max_model_len=max_len,
                          cached_tokens=prefix)
    ratio, notes = range_ratio(shape.inputs.mean, shape.inputs.p95, other_mean=traffic.mean_output_tokens,
                               max_model_len=getattr(engine, "max_model_len", None), prefix_len=prefix)
    return ClientWorkload(model=bp.model.name, engine_image=engine.image, prefix_len=prefix,
                          input_len=shape.inputs.mean, output_len=traffic.mean_output_tokens, range_ratio=ratio,
                          notes=tuple(notes), approximations=_approximations(bp, prefix), api=traffic.api)


def workload_mismatch(result: BenchmarkResultFile, workload: ClientWorkload) -> tuple[str, Any, Any] | None:
    """The first setting in which a result file's client sent another workload than `workload` (the served model, the
    endpoint, the prefix, the lengths and their range ratio), as (the result file's field, measured, planned); None
    when it sent this one. `blueprint calibrate` and `blueprint choose` refuse such a file naming the field."""
    s = result.settings
    pairs = (("target.model", result.target.model, workload.model),
             ("settings.endpoint", s.endpoint, workload.endpoint),
             ("settings.random_prefix_len", s.random_prefix_len, workload.prefix_len),
             ("settings.random_input_len", s.random_input_len, workload.input_len),
             ("settings.random_output_len", s.random_output_len, workload.output_len),
             ("settings.random_range_ratio", s.random_range_ratio, workload.range_ratio))
    return next(((name, measured, planned) for name, measured, planned in pairs if measured != planned), None)
