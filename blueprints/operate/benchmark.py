"""`blueprint benchmark`: the planned workload against one replica of a deployed LLM stack, with `vllm bench serve`.

The client is vLLM's own benchmark (`vllm bench serve`, in the vLLM image a vLLM stack already pins, and the
catalog's pinned vLLM image for SGLang, TensorRT-LLM and SageMaker: `client_image`; its `--save-result` JSON is the
format `blueprint calibrate` reads). Every engine is reached the same way: through the stack's authenticating proxy
(port `api`, forwarding to the engine's own port) with the key the proxy checks, on the planned OpenAI API, which
vLLM, SGLang and trtllm-serve all serve (/v1/completions, /v1/chat/completions; TensorRT-LLM
docs/source/commands/trtllm-serve.rst). `--prompts` replays the user's prompts instead of the random dataset
(`blueprints.operate.prompts`). Options are v0.24.0's
(`vllm/benchmarks/serve.py` `add_cli_args`, `vllm/benchmarks/datasets/datasets.py` `add_dataset_parser`); every
option of the random-dataset sweep also exists in v0.11.0 with the same meaning (checked in both sdists), so that Job
runs on either pin; the `--prompts` options (custom dataset) and `--insecure` are checked at v0.24.0 only, the
release every planned vLLM stack and the client of the other engines pin.

- **Workload**: the one the stack was planned with, as `blueprints.operate.workload.planned_workload` derives it
  (the same function `blueprint calibrate` checks a result file against): the random dataset with the planned
  cached tokens as a prefix every prompt shares (`--random-prefix-len`: the shared prefix and sessions' resent
  history), the rest of the planned mean prompt as the random part (`--random-input-len`, which excludes the prefix
  at v0.24.0), the planned mean output (`--random-output-len`, `--ignore-eos` so outputs run to their drawn length),
  and `--random-range-ratio` r so the random part's p95 is the planned one (at most `workload.MAX_RANGE_RATIO`: the
  planned lognormal's tail beyond 1.81x the mean is not reproduced, and the report says so). What the random
  dataset cannot reproduce is refused (BenchmarkError naming it) unless `approximate` (`--approximate-workload`):
  the result file then lists it (`settings.approximations`) and `blueprint calibrate` refuses it.
- **Rates**: a sweep of Poisson arrival rates (`--request-rate`, `--burstiness 1`) at ONE replica, up to and past
  the planned per-replica peak (the environment's peak over the planned replicas): by default 0.25x to 1.5x of it.
  Requests go to one Ready serving pod's authenticating proxy (its pod IP and the `api` port), not the load
  balancer: the autoscaler cannot spread the sweep over more replicas, the client is next to the replica (its
  network is not the bottleneck) and the numbers are one replica's, which is what the capacity model predicts.
- **Bounds**: each run sends rate x duration requests (`--num-prompts`), at most `MAX_IN_FLIGHT_PER_SEQ` x
  `max_num_seqs` in flight (`--max-concurrency`), and the whole sweep at most `MAX_TOTAL_REQUESTS`; the Job has an
  `activeDeadlineSeconds`, no retries (`backoffLimit: 0`: a retry would measure twice) and a TTL.
- **SLO**: `--goodput ttft:<TTFT p95 target> tpot:<ITL p95 target>` counts the requests meeting both (TPOT, a
  request's mean token gap, stands in for the ITL target: goodput takes per-request values only).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Archetype, VllmEngine
from blueprints.core import defaults
from blueprints.core.errors import BenchmarkError
from blueprints.operate.manifests import StackManifests
from blueprints.contracts.benchmark_result import SettingsRecord
from blueprints.operate.prompts import (
    PROMPTS_DIR_IN_POD, PROMPTS_FILE, ReplayedPrompts, check_configmap_size, load_prompts, repeat_note,
)
from blueprints.operate.workload import ClientWorkload, planned_workload

#: Fractions of the planned per-replica peak the default sweep runs at: below, at and past the peak.
DEFAULT_RATE_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
#: Default length of each run, s.
DEFAULT_DURATION_S = 120
#: Bounds of `--duration` (s per rate): shorter runs see too few requests for a p95; longer ones hold a GPU
#: replica out of its fleet's share for half an hour per rate.
MIN_DURATION_S, MAX_DURATION_S = 10, 1800
#: Most rates in one sweep.
MAX_RATES = 12
#: A rate above this many times the planned per-replica peak measures only the queue (`--rates` bound).
MAX_RATE_OVER_PEAK = 10.0
#: Fewest requests a run sends (a p95 of fewer is one request).
MIN_PROMPTS_PER_RUN = 20
#: Most requests of a whole sweep.
MAX_TOTAL_REQUESTS = 50_000
#: Requests in flight at most, per `max_num_seqs` of the replica: a queue as deep as the batch past saturation.
MAX_IN_FLIGHT_PER_SEQ = 2
#: The client's percentiles and metrics (`--metric-percentiles`, `--percentile-metrics`).
METRIC_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
#: `--ready-check-timeout-sec`: one test request must succeed within this before a run starts, s.
READY_CHECK_TIMEOUT_S = 120
#: Seconds the Job may take beyond its runs' planned durations: a saturated run drains its backlog (up to 2x its
#: duration), each run's start (importing vLLM, the ready check), the tokenizer copy.
PER_RUN_OVERHEAD_S = 90
TOKENIZER_FETCH_S = 300
#: A finished Job and its pod stay this long for `kubectl logs`, then Kubernetes deletes them.
JOB_TTL_S = 3600
#: Client resources: `vllm bench serve` is one asyncio process (tokenising prompts, parsing streams).
CLIENT_CPU, CLIENT_MEMORY = "2", "6Gi"
#: Files the tokenizer needs, copied from the model store's model prefix (never the weights).
TOKENIZER_INCLUDES = ("*.json", "*.model", "*.tiktoken", "*.txt", "*.jinja")
TOKENIZER_EXCLUDES = ("*.safetensors", "*.safetensors.index.json", "*.bin", "*.pt", "*.gguf")
TOKENIZER_DIR, RESULTS_DIR_IN_POD = "/tokenizer", "/results"
#: The UID/GID the benchmark runs as: the serving pods' (vLLM documents none; `[assumption]` as for serving).
RUN_AS = 10001
#: Label of every object `benchmark` creates (they are not Pulumi's: deleted after the run).
MANAGED_BY = "blueprint-benchmark"


@dataclass(frozen=True)
class BenchmarkSettings:
    """One sweep's client settings (all per replica).

    Attributes:
        workload: what the random dataset sends (prefix, random part, output, range ratio; `planned_workload`).
        rates: requests/s of each run, ascending.
        num_prompts: requests of each run (rate x duration, at least `MIN_PROMPTS_PER_RUN`).
        duration_s: each run's planned length, s.
        max_concurrency: requests in flight at most.
        goodput_ms: `--goodput` SLOs, ms (`ttft`, `tpot`, `e2el`).
        per_replica_peak_rps: the planned peak over the planned replicas.
        notes: where the sweep is narrower than the plan (the workload's notes, rates not past the peak), for the
            report.
        prompts: the user's prompts replayed instead of the random dataset (`--prompts`), or None.
    """

    workload: ClientWorkload
    rates: tuple[float, ...]
    num_prompts: tuple[int, ...]
    duration_s: int
    max_concurrency: int | None
    goodput_ms: dict[str, float]
    per_replica_peak_rps: float
    seed: int = 0
    notes: tuple[str, ...] = field(default=())
    prompts: ReplayedPrompts | None = None

    @property
    def sent(self) -> str:
        """What the runs send, in words (counts and lengths, never the prompts)."""
        if self.prompts is not None:
            r = self.prompts.record
            return (f"your {r.lines:,} prompt(s) from {r.file} (sha256 {r.sha256[:12]}...; {r.prompt_chars_mean:g} "
                    f"characters and {r.max_tokens_mean:g} output tokens on average, p95 {r.prompt_chars_p95:g} and "
                    f"{r.max_tokens_p95:g})")
        w = self.workload
        prefix = f"a shared {w.prefix_len}-token prefix + " if w.prefix_len else ""
        return (f"prompts of {prefix}{w.input_len} tokens and outputs of {w.output_len} (means, range ratio "
                f"{w.range_ratio:g})")

    @property
    def approximations(self) -> tuple[str, ...]:
        """What the sweep sends otherwise than planned or given (the workload's, the prompts file's)."""
        return (*self.workload.approximations, *(self.prompts.approximations if self.prompts else ()))

    @property
    def total_requests(self) -> int:
        return sum(self.num_prompts)


def benchmarkable(bp: Blueprint) -> None:
    """Raise BenchmarkError unless the stack serves a text-generation model `vllm bench serve` can drive."""
    if bp.archetype not in (Archetype.VLLM_GPU, Archetype.SAGEMAKER_ENDPOINT) or bp.model.task.value != \
            "text-generation":
        raise BenchmarkError(f"{bp.stack} is a {bp.archetype.value} stack serving {bp.model.task.value}: "
                             "`blueprint benchmark` drives text generation (vllm-gpu, sagemaker-endpoint) with "
                             "`vllm bench serve`; measure Triton models with perf_analyzer")


def _sig3(value: float) -> float:
    return float(f"{value:.3g}")


def benchmark_settings(bp: Blueprint, *, rates: list[float] | None = None, duration_s: int | None = None,
                       approximate: bool = False, prompts: Path | None = None) -> BenchmarkSettings:
    """The sweep for a stack: the planned workload, rates per replica, bounds.

    Args:
        bp: the stack's blueprint (an LLM stack).
        rates: requests/s at one replica, each in (0, `MAX_RATE_OVER_PEAK` x the planned per-replica peak], at most
            `MAX_RATES`. Defaults to `DEFAULT_RATE_FRACTIONS` of the planned per-replica peak.
        duration_s: each run's length, s, `MIN_DURATION_S`-`MAX_DURATION_S`. Defaults to `DEFAULT_DURATION_S`.
        approximate: measure a workload the random dataset cannot reproduce anyway (`--approximate-workload`).
            Defaults to refusing it.
        prompts: a JSONL file of the user's prompts to replay instead of the random dataset
            (`blueprints.operate.prompts`). Defaults to the planned workload.

    Raises:
        BenchmarkError: a stack `vllm bench serve` cannot drive, `--rates` / `--duration` out of bounds (the
            message names the flag, the value and the bound), or a planned workload the random dataset cannot
            reproduce without `approximate` (the message names the field and what cannot be reproduced), or a bad
            prompts file (the message names the file, the line and the field).
    """
    benchmarkable(bp)
    workload = planned_workload(bp)
    replayed = None
    if prompts is not None:
        max_len = getattr(bp.engine, "max_model_len", None) or bp.model.max_context_tokens
        chat = bp.archetype is Archetype.SAGEMAKER_ENDPOINT or workload.api == "chat"  # LMI: the chat schema
        replayed = load_prompts(prompts, max_model_len=max_len, approximate=approximate, chat=chat)
        workload = replace(workload, approximations=(), notes=())  # the file's lengths, not the random dataset's
    if workload.approximations and not approximate:
        raise BenchmarkError(f"{bp.stack}: {'; '.join(workload.approximations)}: the random dataset of `vllm bench "
                             "serve` cannot reproduce the planned workload, so a calibration would correct the model "
                             "with another one; pass --approximate-workload to measure it anyway (the result file "
                             "says so and `blueprint calibrate` refuses it)")
    peak = bp.model.traffic.peak_requests_per_s / max(1, bp.compute.replicas)
    duration = DEFAULT_DURATION_S if duration_s is None else duration_s
    if not MIN_DURATION_S <= duration <= MAX_DURATION_S:
        raise BenchmarkError(f"--duration {duration}: each rate runs {MIN_DURATION_S}-{MAX_DURATION_S} s")
    if rates is None:
        chosen = [_sig3(f * peak) for f in DEFAULT_RATE_FRACTIONS]
    else:
        if not 1 <= len(rates) <= MAX_RATES:
            raise BenchmarkError(f"--rates: give 1-{MAX_RATES} request rates, got {len(rates)}")
        ceiling = MAX_RATE_OVER_PEAK * peak
        for rate in rates:
            if not math.isfinite(rate) or rate <= 0 or rate > ceiling:
                raise BenchmarkError(f"--rates {rate:g}: rates are requests/s at one replica, > 0 and at most "
                                     f"{ceiling:.3g} ({MAX_RATE_OVER_PEAK:g}x the planned per-replica peak "
                                     f"{peak:.3g})")
        chosen = sorted(set(rates))
    num_prompts = tuple(max(MIN_PROMPTS_PER_RUN, math.ceil(r * duration)) for r in chosen)
    if sum(num_prompts) > MAX_TOTAL_REQUESTS:
        raise BenchmarkError(f"--rates/--duration: the sweep would send {sum(num_prompts):,} requests, more than "
                             f"{MAX_TOTAL_REQUESTS:,}; lower the rates or the duration")
    engine = bp.engine
    notes = [*workload.notes, *(repeat_note(replayed, num_prompts) if replayed else ())]
    if max(chosen) <= peak:
        notes.append(f"no rate is past the planned per-replica peak ({peak:.3g} requests/s)")
    seqs = engine.max_num_seqs if isinstance(engine, VllmEngine) else getattr(engine, "max_rolling_batch_size", None)
    goodput = {}
    if bp.slo.ttft_p95_ms:
        goodput["ttft"] = bp.slo.ttft_p95_ms
    if bp.slo.itl_p95_ms:
        goodput["tpot"] = bp.slo.itl_p95_ms
    if bp.slo.latency_p95_ms:
        goodput["e2el"] = bp.slo.latency_p95_ms
    return BenchmarkSettings(
        workload=workload, rates=tuple(chosen), num_prompts=num_prompts, duration_s=duration,
        max_concurrency=MAX_IN_FLIGHT_PER_SEQ * seqs if seqs else None, goodput_ms=goodput,
        per_replica_peak_rps=_sig3(peak), notes=tuple(notes), prompts=replayed)


def _number(value: float) -> str:
    return f"{value:g}"


def client_args(settings: BenchmarkSettings, run: int, *, base_url: str, backend: str, endpoint: str,
                model: str, insecure: bool = False) -> list[str]:
    """`vllm bench serve` arguments of run `run` (0-based) of the sweep; results to `/results/rate-<run>.json`.
    `insecure`: `--insecure` (serve.py:1840, no certificate check: a proxy serving TLS is reached at its pod IP, which
    its certificate does not name)."""
    w = settings.workload
    if settings.prompts is not None:  # the user's prompts, each with its output tokens (blueprints.operate.prompts)
        dataset = ["--dataset-name", "custom", "--dataset-path", f"{PROMPTS_DIR_IN_POD}/{PROMPTS_FILE}",
                   "--custom-output-len", "-1", "--skip-chat-template"]
    else:
        dataset = ["--dataset-name", "random", "--random-prefix-len", str(w.prefix_len),
                   "--random-input-len", str(w.input_len), "--random-output-len", str(w.output_len),
                   "--random-range-ratio", _number(w.range_ratio)]
    args = ["--backend", backend, "--base-url", base_url, "--endpoint", endpoint, "--model", model,
            "--tokenizer", TOKENIZER_DIR, *dataset, "--ignore-eos",
            "--num-prompts", str(settings.num_prompts[run]), "--request-rate", _number(settings.rates[run]),
            "--burstiness", "1", "--seed", str(settings.seed),
            "--percentile-metrics", ",".join(PERCENTILE_METRICS),
            "--metric-percentiles", ",".join(_number(p) for p in METRIC_PERCENTILES),
            "--ready-check-timeout-sec", str(READY_CHECK_TIMEOUT_S), "--disable-tqdm",
            "--save-result", "--result-dir", RESULTS_DIR_IN_POD, "--result-filename", result_file(run)]
    if insecure:
        args.append("--insecure")
    if settings.max_concurrency:
        args += ["--max-concurrency", str(settings.max_concurrency)]
    if settings.goodput_ms:
        args += ["--goodput", *(f"{k}:{_number(v)}" for k, v in settings.goodput_ms.items())]
    return args


def result_file(run: int) -> str:
    return f"rate-{run:02d}.json"


def settings_record(settings: BenchmarkSettings, *, backend: str, endpoint: str) -> SettingsRecord:
    """The settings as the result file records them (with what the workload could not reproduce, if measured
    anyway)."""
    w = settings.workload
    return SettingsRecord(
        backend=backend, endpoint=endpoint, random_prefix_len=w.prefix_len, random_input_len=w.input_len,
        random_output_len=w.output_len, random_range_ratio=w.range_ratio, approximations=list(settings.approximations),
        dataset_name="custom" if settings.prompts else "random",
        prompts=settings.prompts.record if settings.prompts else None,
        request_rates=list(settings.rates), num_prompts=list(settings.num_prompts), duration_s=settings.duration_s,
        burstiness=1.0, max_concurrency=settings.max_concurrency, goodput_ms=dict(settings.goodput_ms),
        percentile_metrics=list(PERCENTILE_METRICS), metric_percentiles=list(METRIC_PERCENTILES), seed=settings.seed)


def client_image(bp: Blueprint) -> str:
    """The image `vllm bench serve` runs from: a vLLM stack's own pinned image (the client of the server's release),
    the catalog's pinned vLLM image (`defaults.VLLM_IMAGE`) for every other engine and SageMaker (the SGLang and
    TensorRT-LLM images carry no vLLM)."""
    engine = bp.engine
    if isinstance(engine, VllmEngine) and engine.kind == "vllm":
        return engine.image
    return defaults.VLLM_IMAGE


def image_version(image: str) -> str:
    """The release of a `vllm/vllm-openai:v0.24.0`-style tag (`0.24.0`); the tag itself otherwise."""
    tag = image.rsplit(":", 1)[-1]
    found = re.match(r"^v?(\d+\.\d+\.\d+)", tag)
    return found.group(1) if found else tag


# --- The Kubernetes Job --------------------------------------------------------------------------------------------

def _labels(bp: Blueprint, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm-bench", "app.kubernetes.io/instance": bp.stack,
            "app.kubernetes.io/component": component, "app.kubernetes.io/part-of": "servingblueprints",
            "app.kubernetes.io/managed-by": MANAGED_BY}


def job_name(bp: Blueprint, now: dt.datetime) -> str:
    """`<workload>-bench-<yymmddhhmm>`, at most 52 characters (a Job's pods carry it in a 63-character label with a
    suffix)."""
    stamp = now.strftime("%y%m%d%H%M")
    return f"{bp.workload_name[:52 - len(stamp) - 7].rstrip('-')}-bench-{stamp}"


def _hardened(container: dict[str, Any]) -> dict[str, Any]:
    return {**container, "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "privileged": False,
        "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"}}}


#: Writable places of a read-only container: HOME and caches, /tmp.
_HOME_ENV = [{"name": "HOME", "value": "/home/bench"}, {"name": "XDG_CACHE_HOME", "value": "/home/bench/.cache"},
             {"name": "HF_HOME", "value": "/home/bench/.cache/huggingface"}]
_HOME_MOUNTS = [{"name": "home", "mountPath": "/home/bench"}, {"name": "tmp", "mountPath": "/tmp"}]
#: Environment variable the Job's client args read the target pod's address from (`$(BENCHMARK_TARGET)`).
TARGET_ENV = "BENCHMARK_TARGET"
#: Stands in for the pod IP in `--dry-run` (no cluster to ask which pod is Ready).
DRY_RUN_TARGET = "<pod-ip: a Ready serving pod, chosen at run time>"


def benchmark_job(sm: StackManifests, settings: BenchmarkSettings, *, name: str, weights_uri: str,
                  target_ip: str) -> dict[str, Any]:
    """The Job: copy the tokenizer from the model store, then one `vllm bench serve` run per rate (init containers
    run one after another), then print the runs' JSON files (the only output of container `results`).

    Non-root, read-only root filesystem, every capability dropped, RuntimeDefault seccomp (the namespace enforces
    Pod Security `restricted`); the serving ServiceAccount (EKS Pod Identity: read of the model prefix); on the
    platform's system nodes (they carry no taint: no toleration needed); the API key from the stack's Secret as
    `OPENAI_API_KEY` (the client sends it as `Authorization: Bearer`).
    """
    bp = sm.blueprint
    image = client_image(bp)
    key = sm.api_key_ref()
    model = bp.model.name
    tls = sm.proxy_serves_tls
    base_url = f"{'https' if tls else 'http'}://$({TARGET_ENV}):{sm.proxy_port}"
    env = [*_HOME_ENV, {"name": TARGET_ENV, "value": target_ip},
           {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": key}},
           {"name": "HF_HUB_OFFLINE", "value": "1"}, {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
           {"name": "DO_NOT_TRACK", "value": "1"}]
    mounts = [*_HOME_MOUNTS, {"name": "tokenizer", "mountPath": TOKENIZER_DIR, "readOnly": True},
              {"name": "results", "mountPath": RESULTS_DIR_IN_POD}]
    if settings.prompts is not None:
        mounts.append({"name": "prompts", "mountPath": PROMPTS_DIR_IN_POD, "readOnly": True})
    resources = {"requests": {"cpu": CLIENT_CPU, "memory": CLIENT_MEMORY},
                 "limits": {"cpu": CLIENT_CPU, "memory": CLIENT_MEMORY}}
    fetch = ["s3", "cp", weights_uri, TOKENIZER_DIR, "--recursive", "--only-show-errors", "--exclude", "*",
             *(a for pattern in TOKENIZER_INCLUDES for a in ("--include", pattern)),
             *(a for pattern in TOKENIZER_EXCLUDES for a in ("--exclude", pattern))]
    init = [_hardened({
        "name": "fetch-tokenizer", "image": sm.fetch_image or defaults.AWS_CLI_IMAGE, "command": ["aws"],
        "args": fetch, "env": [*_HOME_ENV, {"name": "AWS_REGION", "value": bp.region},
                               {"name": "AWS_DEFAULT_REGION", "value": bp.region}],
        "volumeMounts": [*_HOME_MOUNTS, {"name": "tokenizer", "mountPath": TOKENIZER_DIR}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}})]
    for run in range(len(settings.rates)):
        init.append(_hardened({
            "name": f"rate-{run:02d}", "image": image, "command": ["vllm", "bench", "serve"],
            "args": client_args(settings, run, base_url=base_url, backend=settings.workload.backend,
                                endpoint=settings.workload.endpoint, model=model, insecure=tls),
            "env": env, "volumeMounts": mounts, "resources": resources}))
    collect = _hardened({
        "name": "results", "image": image, "command": ["cat"],
        "args": [f"{RESULTS_DIR_IN_POD}/{result_file(run)}" for run in range(len(settings.rates))],
        "volumeMounts": [{"name": "results", "mountPath": RESULTS_DIR_IN_POD, "readOnly": True}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}})
    deadline = bp.startup.image_pull_s + TOKENIZER_FETCH_S + sum(
        2 * settings.duration_s + PER_RUN_OVERHEAD_S for _ in settings.rates)
    pod: dict[str, Any] = {
        "restartPolicy": "Never", "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "fsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": init, "containers": [collect],
        "volumes": [{"name": "home", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "tokenizer", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "results", "emptyDir": {"sizeLimit": "64Mi"}}]}
    if settings.prompts is not None:
        pod["volumes"].append({"name": "prompts", "configMap": {
            "name": prompts_config_map_name(name), "defaultMode": 0o444,
            "items": [{"key": PROMPTS_FILE, "path": PROMPTS_FILE}]}})
    if sm.service_account:
        pod["serviceAccountName"] = sm.service_account
    if sm.system_node_selector:
        pod["nodeSelector"] = sm.system_node_selector
    labels = _labels(bp, "benchmark")
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": sm.namespace, "labels": labels, "annotations": {
                "servingblueprints.io/per-replica-peak-rps": _number(settings.per_replica_peak_rps),
                "servingblueprints.io/request-rates": ",".join(_number(r) for r in settings.rates)}},
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": deadline, "ttlSecondsAfterFinished": JOB_TTL_S,
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def prompts_config_map_name(job: str) -> str:
    return f"{job}-prompts"


def prompts_config_map(sm: StackManifests, settings: BenchmarkSettings, *, name: str) -> dict[str, Any] | None:
    """The ConfigMap the Job mounts the replayed prompts from (read-only, at `PROMPTS_DIR_IN_POD`), or None without
    `--prompts`.

    Raises:
        BenchmarkError: the prompts exceed what a ConfigMap holds (`prompts.CONFIGMAP_MAX_BYTES`).
    """
    if settings.prompts is None:
        return None
    check_configmap_size(settings.prompts)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": prompts_config_map_name(name), "namespace": sm.namespace,
                         "labels": _labels(sm.blueprint, "prompts")},
            "immutable": True, "data": {PROMPTS_FILE: settings.prompts.custom_jsonl}}


def printable(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`objects` as `--dry-run` prints them: a prompts ConfigMap's data replaced by what identifies it (the prompts
    are never printed)."""
    shown = []
    for obj in objects:
        if obj.get("kind") == "ConfigMap" and obj.get("metadata", {}).get("labels", {}).get(
                "app.kubernetes.io/component") == "prompts":
            text = next(iter(obj["data"].values()))
            obj = {**obj, "data": {PROMPTS_FILE: f"<{text.count(chr(10))} request(s), {len(text.encode('utf-8')):,} "
                                                 "bytes: not printed>"}}
        shown.append(obj)
    return shown


def benchmark_network_policies(sm: StackManifests, *, name: str) -> list[dict[str, Any]]:
    """Two NetworkPolicies beside the namespace's default deny (policies add up): the benchmark pod may reach the
    serving pods' proxy port, DNS, the Pod Identity agent and HTTPS (the model store), as the serving pods' own
    policy allows them; the serving pods admit it on the proxy port."""
    bp = sm.blueprint
    bench = _labels(bp, "benchmark")
    selector = {k: bench[k] for k in ("app.kubernetes.io/instance", "app.kubernetes.io/component",
                                      "app.kubernetes.io/name")}
    serving_policy = sm.serving_network_policy() or {"spec": {}}
    egress = [rule for rule in serving_policy["spec"].get("egress", [])]
    egress.append({"to": [{"podSelector": {"matchLabels": sm.pod_selector}}],
                   "ports": [{"protocol": "TCP", "port": sm.proxy_port}]})
    meta = {"namespace": sm.namespace, "labels": _labels(bp, "network")}
    return [
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name, **meta},
         "spec": {"podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress", "Egress"], "ingress": [],
                  "egress": egress}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": f"{name}-in", **meta},
         "spec": {"podSelector": {"matchLabels": sm.pod_selector}, "policyTypes": ["Ingress"],
                  "ingress": [{"from": [{"podSelector": {"matchLabels": selector}}],
                               "ports": [{"protocol": "TCP", "port": sm.proxy_port}]}]}},
    ]
