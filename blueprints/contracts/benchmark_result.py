"""The benchmark result file: `benchmarks/results/<stack>/<date>.json`, the contract between `blueprint benchmark`
(`blueprints.operate`, which writes it) and calibration (which reads it, below the review: hence here).

One file per benchmark of a deployed stack: the settings it ran with, the image versions, what the plan predicted,
and for each request rate of the sweep the client's own JSON verbatim, as `vllm bench serve --save-result` writes
it (vLLM v0.24.0, `vllm/benchmarks/serve.py`: `main_async` sets the run's setup keys, `benchmark()` returns the
metrics; checked in the v0.24.0 sdist from PyPI, sha256 0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66).

The client's fields, as v0.24.0 writes them without `--save-detailed` (which would add the per-request lists
`input_lens`, `output_lens`, `ttfts`, `itls`, `start_times`, `generated_texts`, `errors`):

- setup: `date` (`%Y%m%d-%H%M%S`), `endpoint_type` and `backend` (the same), `label`, `model_id`, `tokenizer_id`,
  `num_prompts`, `request_rate` (requests/s, or the string `"inf"`), `burstiness`, `max_concurrency`;
- totals: `duration` (s), `completed`, `failed`, `total_input_tokens`, `total_output_tokens`;
- rates: `request_throughput` (requests/s), `request_goodput` (requests/s meeting every `--goodput` SLO, null
  without `--goodput`), `output_throughput` and `total_token_throughput` (tokens/s), `max_output_tokens_per_s`,
  `max_concurrent_requests`, `rtfx` (0 for text);
- per metric M of `--percentile-metrics` (`ttft`, `tpot`, `itl`, `e2el`): `mean_M_ms`, `median_M_ms`, `std_M_ms`
  and `p<P>_M_ms` for each P of `--metric-percentiles` (`p99_ttft_ms`; a fractional P keeps its decimals,
  `p99.9_ttft_ms`). ttft/tpot/itl are written only when the client has a tokenizer.

`cold_start` (optional) is the measured serving pod's cold start, part by part, in the startup model's terms
(`blueprints.contracts.sections.StartupBudget`), read by `blueprints.operate.coldstart` from the Kubernetes API
and the engine's log; `blueprint calibrate` corrects the startup model with it.

`settings.prompts` (optional) identifies the user's prompts a sweep replayed (`--prompts`: sha256, line count, length
statistics, never the content; `dataset_name` custom), and `autoscaling` (optional) the fleet's replica counts during
the sweep (`blueprints.operate.scaling`). Both are absent from files written without them.

A file is refused (BenchmarkError, exit 2) when it is not this format, naming the file and the field.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from blueprints.core.errors import BenchmarkError, format_validation_error, read_text_file
from blueprints.core.yamlio import load_json
from blueprints.core.jsontypes import ClosedModel
from blueprints.requirements.fields import DNS_1123_LABEL

#: This format's version (the wrapper's; the client's own fields follow the pinned vLLM).
RESULT_SCHEMA_VERSION = 1
#: Where results live, relative to the project root: `benchmarks/results/<stack>/<date>.json`.
RESULTS_DIR = Path("benchmarks") / "results"
#: The vLLM release whose `vllm bench serve` fields this format follows.
CLIENT_VLLM_VERSION = "0.24.0"
CLIENT_SOURCE = ("vllm-project/vllm v0.24.0 vllm/benchmarks/serve.py (main_async, benchmark, calculate_metrics), "
                 "PyPI sdist vllm-0.24.0.tar.gz sha256 0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66")
#: Largest result file read, bytes: a sweep of 32 runs without per-request lists is ~100 KB.
MAX_RESULT_FILE_BYTES = 8 * 1024 * 1024
#: Most runs (request rates) in one file.
MAX_RUNS = 32
#: The latency metrics `--percentile-metrics` takes (serve.py add_cli_args).
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
#: Bounds of the client's numbers: a day of requests, tokens and milliseconds (a run is minutes long).
MAX_MS = 86_400_000.0
MAX_TOKENS_TOTAL = 10**12
MAX_RATE = 1e9
#: `p<P>_<metric>_ms`, P an int or a decimal (serve.py process_one_metric: `str(int(p)) if int(p) == p else str(p)`).
#: Most replica-count samples an autoscaling record keeps (changes only, first and last always).
MAX_REPLICA_SAMPLES = 1000
#: Longest measured cold start or part of one, s: a start slower than two hours is a failure, not a start.
MAX_COLD_START_S = 7200.0
#: Seconds the measured parts may add up to beyond the total: the API's timestamps are whole seconds.
COLD_START_SLACK_S = 5.0
#: The startup model's parts (`StartupBudget` fields), as a cold start record and a calibration name them.
STARTUP_PARTS = ("node_provisioning_s", "image_pull_s", "weights_download_s", "model_load_s")
PERCENTILE_KEY = re.compile(r"^p(?P<p>\d{1,2}(\.\d+)?|100)_(?P<metric>ttft|tpot|itl|e2el)_ms$")


class VllmBenchRun(ClosedModel):
    """One run of `vllm bench serve --save-result` (one request rate), its JSON as the client wrote it.

    Keys other than those below and the `p<P>_<metric>_ms` percentiles are refused: this reads v0.24.0's format
    without `--save-detailed`, `--metadata`, ramp-up or speculative decoding.
    """

    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)

    date: str = Field(pattern=r"^\d{8}-\d{6}$", description="when the run ended, %Y%m%d-%H%M%S (client's clock)")
    endpoint_type: str | None = Field(default=None, max_length=64, description="the backend, for compatibility")
    backend: str = Field(max_length=64, description="`--backend`: openai (/v1/completions), openai-chat, ...")
    label: str | None = Field(default=None, max_length=200)
    model_id: str = Field(max_length=200, description="`--model`: the served model name requests carry")
    tokenizer_id: str | None = Field(default=None, max_length=500)
    num_prompts: int = Field(ge=1, le=1_000_000, description="requests sent")
    request_rate: Annotated[float, Field(gt=0, le=MAX_RATE)] | Literal["inf"] = Field(
        description="requests/s asked for (Poisson at burstiness 1), or inf")
    burstiness: float = Field(gt=0, le=1000)
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    duration: float = Field(gt=0, le=86_400, description="s, first request sent to last completed")
    completed: int = Field(ge=0, le=1_000_000)
    failed: int = Field(ge=0, le=1_000_000)
    total_input_tokens: int = Field(ge=0, le=MAX_TOKENS_TOTAL)
    total_output_tokens: int = Field(ge=0, le=MAX_TOKENS_TOTAL)
    request_throughput: float = Field(ge=0, le=MAX_RATE, description="completed requests/s")
    request_goodput: float | None = Field(ge=0, le=MAX_RATE, description="requests/s meeting every --goodput SLO; null without")
    output_throughput: float = Field(ge=0, le=MAX_RATE, description="output tokens/s")
    total_token_throughput: float = Field(ge=0, le=MAX_RATE, description="input + output tokens/s")
    max_output_tokens_per_s: float = Field(ge=0, le=MAX_RATE, description="the busiest second's output tokens")
    max_concurrent_requests: int = Field(ge=0, le=1_000_000, description="the busiest second's requests in flight")
    rtfx: float = Field(ge=0, le=MAX_RATE, description="audio inverse real-time factor; 0 for text")
    mean_ttft_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    median_ttft_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    std_ttft_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    mean_tpot_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    median_tpot_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    std_tpot_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    mean_itl_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    median_itl_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    std_itl_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    mean_e2el_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    median_e2el_ms: float | None = Field(default=None, ge=0, le=MAX_MS)
    std_e2el_ms: float | None = Field(default=None, ge=0, le=MAX_MS)

    @model_validator(mode="after")
    def _percentiles_only(self) -> "VllmBenchRun":
        for key, value in (self.model_extra or {}).items():
            if not PERCENTILE_KEY.match(key):
                raise ValueError(f"unknown key {key!r}: expected the fields of `vllm bench serve --save-result` "
                                 f"(vLLM {CLIENT_VLLM_VERSION}) without --save-detailed, --metadata or ramp-up")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= MAX_MS:
                raise ValueError(f"{key}: expected a non-negative number of milliseconds (at most a day), got "
                                 f"{value!r}")
        if self.completed + self.failed > self.num_prompts:
            raise ValueError(f"completed ({self.completed}) + failed ({self.failed}) exceed num_prompts "
                             f"({self.num_prompts})")
        return self

    def percentile_ms(self, metric: str, p: float) -> float | None:
        """`p<P>_<metric>_ms` (e.g. `percentile_ms("ttft", 95)` reads `p95_ttft_ms`), or None when not recorded."""
        word = str(int(p)) if int(p) == p else str(p)
        value = (self.model_extra or {}).get(f"p{word}_{metric}_ms")
        return float(value) if value is not None else None


class ClientRecord(ClosedModel):
    """The benchmark client: tool, version and image."""

    tool: Literal["vllm bench serve"] = "vllm bench serve"
    vllm_version: str = Field(max_length=40, description="the vLLM release of the client image")
    image: str = Field(max_length=300, description="the client's container image (the stack's pinned vLLM image)")
    source: str = Field(max_length=600, description="where the client's field names were checked")


class TargetRecord(ClosedModel):
    """What was measured: the stack's model, hardware and engine settings, and where the client sent requests."""

    archetype: str = Field(max_length=40)
    model: str = Field(pattern=DNS_1123_LABEL, description="served model name")
    catalog_id: str | None = Field(max_length=100)
    gpu: str | None = Field(max_length=40, description="catalog GPU id (e.g. l40s); null on CPU")
    instance_type: str = Field(max_length=40)
    tensor_parallel_size: int | None = Field(ge=1, le=64)
    engine_image: str = Field(max_length=300, description="the serving engine's pinned image")
    max_num_seqs: int | None = Field(ge=1, le=1_000_000)
    max_num_batched_tokens: int | None = Field(ge=1, le=10_000_000)
    max_model_len: int | None = Field(ge=1, le=10_000_000)
    kv_cache_dtype: str | None = Field(max_length=20)
    replicas_measured: int = Field(ge=1, le=1000, description="replicas the requests reached (1: one pod directly)")
    address: str = Field(max_length=300, description="where requests went: one serving pod's proxy, or the "
                         "endpoint through a signing proxy (SageMaker)")


class PromptsRecord(ClosedModel):
    """The user's prompts file a sweep replayed (`blueprint benchmark --prompts`): what identifies it and its shape,
    never its content."""

    file: str = Field(max_length=255, description="the file's name (not its path)")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="of the file's bytes as given")
    bytes: int = Field(ge=1, le=1 << 30)
    lines: int = Field(ge=1, le=1_000_000, description="requests in the file (non-blank lines)")
    messages_joined: int = Field(default=0, ge=0, le=1_000_000, description="lines whose several chat messages "
                                 "were sent joined into one user message (`--approximate-workload`)")
    prompt_chars_mean: float = Field(ge=0, le=1e8, description="prompt length, characters (the client counts "
                                     "tokens: each run's total_input_tokens)")
    prompt_chars_p50: float = Field(ge=0, le=1e8)
    prompt_chars_p95: float = Field(ge=0, le=1e8)
    max_tokens_mean: float = Field(ge=1, le=1e8, description="output tokens per request (`--ignore-eos`: each "
                                   "request generates its max_tokens)")
    max_tokens_p50: float = Field(ge=1, le=1e8)
    max_tokens_p95: float = Field(ge=1, le=1e8)


class SettingsRecord(ClosedModel):
    """The client settings of the sweep (the same for every run but the rate and its request count)."""

    backend: str = Field(max_length=64)
    endpoint: str = Field(max_length=100, description="request path, e.g. /v1/completions")
    dataset_name: Literal["random", "custom"] = Field(default="random", description="`--dataset-name`: random (the "
                                                      "planned workload) or custom (the user's prompts, `prompts`)")
    random_prefix_len: int = Field(default=0, ge=0, le=1_048_576, description="`--random-prefix-len`: tokens every "
                                   "prompt starts with (the planned cached tokens), before the random part; 0 in "
                                   "files written before it was recorded (none was sent)")
    random_input_len: int = Field(ge=1, le=1_048_576, description="mean of the random part after the prefix, tokens "
                                  "(`--random-input-len` excludes the prefix)")
    random_output_len: int = Field(ge=1, le=1_048_576, description="mean output, tokens")
    random_range_ratio: float = Field(ge=0, lt=1, description="lengths uniform in [len(1-r), len(1+r)]")
    request_rates: list[Annotated[float, Field(gt=0, le=MAX_RATE)]] = Field(min_length=1, max_length=MAX_RUNS, description="requests/s, one run each")
    num_prompts: list[Annotated[int, Field(ge=1, le=1_000_000)]] = Field(min_length=1, max_length=MAX_RUNS, description="requests per run")
    duration_s: float = Field(gt=0, le=86_400, description="each run's planned length, s (num_prompts / rate)")
    burstiness: float = Field(gt=0, le=1000, description="1: Poisson arrivals")
    max_concurrency: int | None = Field(ge=1, le=1_000_000, description="requests in flight at most")
    goodput_ms: dict[Literal["ttft", "tpot", "e2el"], Annotated[float, Field(ge=0, le=MAX_MS)]] = Field(max_length=3, description="per-request SLOs "
                                                                     "of `--goodput`, ms")
    percentile_metrics: list[Literal["ttft", "tpot", "itl", "e2el"]] = Field(min_length=1, max_length=4)
    metric_percentiles: list[Annotated[float, Field(gt=0, le=100)]] = Field(min_length=1, max_length=10)
    seed: int = Field(ge=0, le=2**31 - 1)
    approximations: list[Annotated[str, Field(max_length=1000)]] = Field(
        default_factory=list, max_length=8, description="what of the planned workload the random dataset could not "
        "reproduce, measured anyway (`blueprint benchmark --approximate-workload`); `blueprint calibrate` refuses a "
        "file that lists any")
    prompts: PromptsRecord | None = Field(default=None, description="the user's prompts replayed (`blueprint "
                                          "benchmark --prompts`, dataset custom): the random_* fields are then the "
                                          "planned workload they replaced, not what was sent")

    @model_validator(mode="after")
    def _prompts_with_custom(self) -> "SettingsRecord":
        if (self.dataset_name == "custom") != (self.prompts is not None):
            raise ValueError("dataset_name custom goes with a prompts record, random without one")
        return self


class PlannedRecord(ClosedModel):
    """What the plan predicted for one replica, to compare with the runs."""

    per_replica_peak_rps: float = Field(gt=0, le=MAX_RATE, description="the environment's peak over the planned replicas")
    ttft_p95_ms: float | None = Field(ge=0, le=MAX_MS)
    itl_p95_ms: float | None = Field(ge=0, le=MAX_MS)
    latency_p95_ms: float | None = Field(ge=0, le=MAX_MS)
    per_replica_capacity_rps: float | None = Field(ge=0, le=MAX_RATE, description="requests/s one replica holds within the SLO")


class ReplicaSample(ClosedModel):
    """The serving fleet's size at one moment of the sweep."""

    at: dt.datetime
    run: int | None = Field(ge=0, le=MAX_RUNS, description="the run (rate) under way, 0-based; null: before the "
                            "first or between runs")
    desired: int | None = Field(ge=0, le=100_000, description="replicas the autoscaler asks for (Deployment "
                                "spec.replicas; SageMaker DesiredInstanceCount)")
    ready: int | None = Field(ge=0, le=100_000, description="replicas serving (Deployment status.readyReplicas; "
                              "SageMaker CurrentInstanceCount)")


class AutoscalingRecord(ClosedModel):
    """What the autoscaler did during the sweep (the client sends to one replica; the fleet's scaling is observed,
    not used): replica counts sampled while the sweep ran, each change kept."""

    source: str = Field(max_length=300, description="what was read, e.g. Deployment <ns>/<name> spec.replicas and "
                        "status.readyReplicas")
    min_replicas: int = Field(ge=0, le=100_000)
    max_replicas: int = Field(ge=1, le=100_000)
    samples: list[ReplicaSample] = Field(min_length=1, max_length=MAX_REPLICA_SAMPLES)

    @property
    def most_desired(self) -> int | None:
        """The most replicas the autoscaler asked for during the sweep."""
        seen = [s.desired for s in self.samples if s.desired is not None]
        return max(seen) if seen else None


_Part = Annotated[float, Field(ge=0, le=MAX_COLD_START_S)]


class ColdStartRecord(ClosedModel):
    """The measured serving pod's cold start, s, each part from a named source (None: not measured; see
    `blueprints.operate.coldstart` for each one's source):

    - `node_provisioning_s`: the pod's `PodScheduled` condition `lastTransitionTime` - its
      `metadata.creationTimestamp`, only when its node was created after the pod (`node_launched_for_pod`);
    - `image_pull_s`: the kubelet's `Pulled` event of the serving container ("Successfully pulled image ... in
      <d>"); None when the image was already on the node or the event expired (kube-apiserver `--event-ttl`, 1 h);
    - `weights_download_s`: streamed, vLLM's "Model loading took <GiB> GiB memory and <s> seconds"; copied, the
      weights init container's `state.terminated.finishedAt - startedAt`;
    - `model_load_s`: the pod's `Ready` condition `lastTransitionTime` - the serving container's
      `state.running.startedAt` (less the streamed weights): load, warm-up, API server start, first probe;
    - `engine_init_s`: vLLM's "init engine (profile, create kv cache, warmup model) took <s> s" (compile and CUDA
      graphs), part of `model_load_s`, for the report;
    - `total_s`: `Ready` `lastTransitionTime` - `metadata.creationTimestamp`.
    """

    pod: str = Field(max_length=253)
    node: str = Field(max_length=253)
    pod_created: dt.datetime = Field(description="the pod's metadata.creationTimestamp")
    ready_at: dt.datetime = Field(description="the pod's Ready condition lastTransitionTime")
    node_launched_for_pod: bool = Field(description="the node's creationTimestamp is after the pod's")
    weights_streamed: bool = Field(description="vLLM streamed the weights (Run:ai Model Streamer); false: copied "
                                   "by an init container")
    node_provisioning_s: _Part | None = None
    image_pull_s: _Part | None = None
    weights_download_s: _Part | None = None
    model_load_s: _Part | None = None
    engine_init_s: _Part | None = None
    total_s: float = Field(gt=0, le=MAX_COLD_START_S)

    @model_validator(mode="after")
    def _consistent(self) -> "ColdStartRecord":
        span = (self.ready_at - self.pod_created).total_seconds()
        if abs(span - self.total_s) > COLD_START_SLACK_S:
            raise ValueError(f"total_s {self.total_s:g} is not ready_at - pod_created ({span:g} s)")
        if self.node_provisioning_s is not None and not self.node_launched_for_pod:
            raise ValueError("node_provisioning_s is measured only on a node launched for the pod "
                             "(node_launched_for_pod false)")
        parts = sum(getattr(self, p) or 0.0 for p in STARTUP_PARTS)
        if parts > self.total_s + COLD_START_SLACK_S:
            raise ValueError(f"the parts add up to {parts:g} s, more than total_s {self.total_s:g}")
        if self.engine_init_s is not None and self.model_load_s is not None \
                and self.engine_init_s > self.model_load_s + COLD_START_SLACK_S:
            raise ValueError(f"engine_init_s {self.engine_init_s:g} is part of model_load_s {self.model_load_s:g}")
        if all(getattr(self, p) is None for p in STARTUP_PARTS):
            raise ValueError("no part measured: leave cold_start out")
        return self

    def measured_parts(self) -> dict[str, float]:
        """The startup model's parts that were measured, s."""
        return {p: getattr(self, p) for p in STARTUP_PARTS if getattr(self, p) is not None}


class BenchmarkResultFile(ClosedModel):
    """`benchmarks/results/<stack>/<date>.json`.

    Example (abridged): `{"schema_version": 1, "stack": "chat-assistant-prod", "date": "2026-12-03",
    "measured": true, "client": {...}, "target": {...}, "settings": {...}, "planned": {...}, "runs": [{...}]}`.
    """

    schema_version: Literal[1] = RESULT_SCHEMA_VERSION
    stack: str = Field(max_length=120, pattern=r"^[a-z0-9][-a-z0-9]*$")
    date: dt.date
    measured: bool = Field(description="false for a file constructed by hand (test data), never measured")
    note: str | None = Field(default=None, max_length=2000)
    client: ClientRecord
    target: TargetRecord
    settings: SettingsRecord
    planned: PlannedRecord
    runs: list[VllmBenchRun] = Field(min_length=1, max_length=MAX_RUNS, description="one per request rate, in "
                                     "the order of settings.request_rates")
    cold_start: ColdStartRecord | None = Field(default=None, description="the measured pod's cold start (absent "
                                               "when it could not be read)")
    autoscaling: AutoscalingRecord | None = Field(default=None, description="the fleet's replica counts during "
                                                  "the sweep (absent for a stack that does not scale)")

    @model_validator(mode="after")
    def _runs_match_settings(self) -> "BenchmarkResultFile":
        if len(self.runs) != len(self.settings.request_rates) or \
                len(self.settings.num_prompts) != len(self.settings.request_rates):
            raise ValueError(f"{len(self.runs)} run(s), {len(self.settings.request_rates)} request rate(s) and "
                             f"{len(self.settings.num_prompts)} num_prompts: expected one run per rate")
        for i, (run, rate, prompts) in enumerate(zip(self.runs, self.settings.request_rates,
                                                     self.settings.num_prompts)):
            if run.request_rate != rate or run.num_prompts != prompts:
                raise ValueError(f"runs[{i}] ran at {run.request_rate} requests/s with {run.num_prompts} prompt(s); "
                                 f"settings say {rate} and {prompts}")
        return self


def result_path(root: Path, stack: str, date: dt.date) -> Path:
    """A new file for the stack's benchmark of `date`: `<root>/benchmarks/results/<stack>/<date>.json`, or
    `<date>-2.json`, `-3`, ... when one exists (a day may see several runs)."""
    folder = root / RESULTS_DIR / stack
    path = folder / f"{date.isoformat()}.json"
    n = 2
    while path.exists() and n <= 100:
        path, n = folder / f"{date.isoformat()}-{n}.json", n + 1
    if path.exists():
        raise BenchmarkError(f"{folder}: 100 results of {date.isoformat()} already; remove old ones")
    return path


def result_json(result: BenchmarkResultFile) -> dict[str, Any]:
    """The file's JSON: the wrapper's fields, and each run's keys exactly as the client wrote them (none added)."""
    data = result.model_dump(mode="json")
    for optional in ("cold_start", "autoscaling"):
        if getattr(result, optional) is None:
            data.pop(optional)
    if result.settings.prompts is None:
        data["settings"].pop("prompts")
    data["runs"] = [run.model_dump(mode="json", exclude_unset=True) for run in result.runs]
    return data


def write_result(result: BenchmarkResultFile, path: Path) -> None:
    """Write the file (indented JSON), creating its folder."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result_json(result), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BenchmarkError(f"{path}: cannot write the benchmark result ({exc.strerror})") from None


def load_result(path: Path) -> BenchmarkResultFile:
    """Read and check a result file.

    Raises:
        BenchmarkError: the file is missing, larger than `MAX_RESULT_FILE_BYTES`, not JSON, or not this format
            (the message names the file and the field).
    """
    text = read_text_file(path, BenchmarkError, "benchmark result")
    size = len(text.encode("utf-8"))
    if size > MAX_RESULT_FILE_BYTES:
        raise BenchmarkError(f"{path}: {size:,} bytes; a benchmark result is at most {MAX_RESULT_FILE_BYTES:,} "
                             "(save runs without --save-detailed)")
    try:
        data: Any = load_json(text)
    except json.JSONDecodeError as exc:
        raise BenchmarkError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    try:
        return BenchmarkResultFile.model_validate(data)
    except ValidationError as exc:
        raise BenchmarkError(format_validation_error(exc, source=path, data=data,
                                                     model=BenchmarkResultFile)) from None
