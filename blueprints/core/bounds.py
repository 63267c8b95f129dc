"""Bounds on every number a user gives (requirements files, platform.yaml, hand-edited stack configs), each with its
reason. A field takes its bounds from here (`Field(ge=..., le=...)`); a value outside them exits 2 naming the field.

The bounds keep every input finite and within what can be built: replica counts within what one autoscaler, node
pool or endpoint drives, integers within the int32 a Kubernetes manifest takes, rates and token counts within what the
capacity model computes in milliseconds. The rule for a new field is in the README ("Every input is bounded").
"""

from __future__ import annotations

#: Largest value of a Kubernetes `int32` field (Deployment `replicas`, HPA `maxReplicas`, probe `failureThreshold`,
#: `progressDeadlineSeconds`, KEDA `maxReplicaCount`, ports): the OpenAPI schemas give them `format: int32`.
INT32_MAX = 2**31 - 1

# --- Traffic -------------------------------------------------------------------------------------------------------
#: Lowest peak arrival rate per model and environment (after `traffic_scale`), requests/s: 3.6 an hour. Below it the
#: fleet simulation's minutes see no request, cost per token divides by almost nothing, and no fleet is sized by its
#: peak; serve such a model from a batch job or raise the figure to the load you provision for.
MIN_PEAK_REQUESTS_PER_S = 0.001
#: Highest peak arrival rate per model and environment, requests/s (8.6 billion a day). Above it even the smallest
#: model needs more replicas than one stack scales to (`MAX_REPLICAS`); split the load over several services.
MAX_PEAK_REQUESTS_PER_S = 100_000.0
#: A batch's daily volume (`traffic.batch.requests_per_day`, `tokens_per_day`): at most the highest peak rate for a
#: whole day (8.64 billion requests), and tokens at most that many requests of 2,000 tokens. Below the lowest, the
#: rate it is planned at (`MIN_PEAK_REQUESTS_PER_S`) is checked where it is derived.
MAX_BATCH_REQUESTS_PER_DAY = MAX_PEAK_REQUESTS_PER_S * 86_400
MAX_BATCH_TOKENS_PER_DAY = MAX_BATCH_REQUESTS_PER_DAY * 2_000
#: Shortest batch deadline, hours (36 s): any shorter is below one node's start; the planner refuses one shorter than
#: a replica's start and one request's latency. Longest: a day (a daily batch's deadline never reaches the next one's
#: window).
MIN_BATCH_DEADLINE_HOURS = 0.01
MAX_BATCH_DEADLINE_HOURS = 24.0
#: Lowest and highest share of the peak an environment sees (`environments.<env>.traffic_scale`).
MIN_TRAFFIC_SCALE = 0.001
MAX_TRAFFIC_SCALE = 10.0

# --- Tokens and models ---------------------------------------------------------------------------------------------
#: Longest prompt, output or context, tokens (2^20): eight times the longest context of any catalogued model
#: (131,072); one such sequence of Llama-3.1-8B holds 128 GiB of 16-bit KV cache.
MAX_TOKENS = 1_048_576
#: Shortest context (`max_context_tokens`, `--max-model-len`) a text-generation plan serves, tokens: one KV-cache block
#: row of four 16-token blocks; a shorter context holds no useful prompt.
MIN_CONTEXT_TOKENS = 64
#: Smallest model, billions of parameters (1,000 parameters). Weights round up to `MIN_WEIGHTS_GIB`, never to zero.
MIN_PARAMS_B = 1e-6
#: Largest model, billions of parameters (10 trillion): beyond every GPU node in the catalog at any precision.
MAX_PARAMS_B = 10_000.0
#: Weights are stored in GiB to two decimals and rounded up: a model of a few million parameters weighs 0.01 GiB.
MIN_WEIGHTS_GIB = 0.01
#: Largest weights, GiB: 10 trillion parameters at 4 bytes (FP32) is 37,253 GiB.
MAX_WEIGHTS_GIB = 40_000.0
#: Most models one service serves (`models:`): a Triton estate loads every model on every replica, and the largest
#: generated estate the preview is benchmarked on has 100 (benchmarks/preview.py).
MAX_MODELS = 100
#: Most environments (stacks) in one requirements file.
MAX_ENVIRONMENTS = 20

# --- Latency -------------------------------------------------------------------------------------------------------
#: Lowest latency figure a requirements file may give (SLO targets, a measured latency), ms: predictions are kept in
#: tenths of a millisecond, and no network service answers faster.
MIN_LATENCY_MS = 0.1
#: Highest latency figure, ms (10 minutes): beyond any interactive target; a longer request outlives the load
#: balancer's idle timeout planned here (at most 4,000 s) and SageMaker's 60 s invocation limit: it is a batch job.
MAX_LATENCY_MS = 600_000.0

# --- Replicas and nodes --------------------------------------------------------------------------------------------
#: Most replicas one stack scales to (`min_replicas`, `max_replicas`, the planned peak). One autoscaler drives them and
#: one NodePool holds them plus the rollout surge: with one replica per node that is within the 5,000 nodes and
#: 150,000 pods Kubernetes supports per cluster (kubernetes.io/docs/setup/best-practices/cluster-large), on a cluster
#: the platform shares; a SageMaker endpoint's instances are also capped by the account's per-type endpoint quota
#: (`blueprint preflight` checks it). Well within int32.
MAX_REPLICAS = 1000
#: Most GPUs in one node (the catalog's largest types have 8); tensor parallel stays within one node.
MAX_GPUS_PER_NODE = 16
#: Most vCPUs and GiB of memory in one node (beyond every catalogued type: u7in-32tb.224xlarge has 896 vCPUs).
MAX_VCPUS_PER_NODE = 1024
MAX_MEMORY_GIB_PER_NODE = 32_768.0
#: Fewest CPU cores a serving replica requests: the engines' API server and scheduler need a core, and ONNX Runtime's
#: intra-op threads equal the whole cores of the CPU limit (0 would start one per host core).
MIN_CPU_PER_REPLICA = 1.0
#: Longest part of a cold start (node provisioning, image pull, weights download, model load), s: a day. Each part is
#: at least a second: a zero part makes the startup probe's failureThreshold 0 and the progress deadline 0.
MAX_STARTUP_PART_S = 86_400
#: Most sequences one vLLM replica runs (--max-num-seqs): 64k, far above the KV cache of any GPU at 64 tokens each.
MAX_NUM_SEQS = 65_536

# --- LoRA adapters -------------------------------------------------------------------------------------------------
#: Largest LoRA rank vLLM 0.24.0 serves: its largest --max-lora-rank (`MaxLoRARanks`, vllm/config/lora.py:26;
#: blueprints/catalog/lora.yaml supported_ranks, a test holds them equal).
MAX_LORA_RANK = 512
#: Most LoRA adapters one model declares: each is a sync Job, a local copy and a host-memory slot (--max-cpu-loras).
#: [assumption] a bound against typos, not an engine limit.
MAX_LORA_ADAPTERS = 16

# --- Money ---------------------------------------------------------------------------------------------------------
#: Smallest and largest monthly budget, USD: a budget below a dollar buys nothing; above $100M a month it bounds
#: nothing a stack here can cost (1,000 of the largest nodes at list price are ~$70M).
MIN_BUDGET_USD = 1.0
MAX_BUDGET_USD = 100_000_000.0
#: Largest monthly cost or hourly price a stack config may record, USD (finite and above any plan's).
MAX_COST_USD = 1_000_000_000.0

#: Why a field is bounded, by field name: error messages add it to pydantic's "should be <= N" (`blueprints/core/errors.py`), and
#: `tests/test_input_bounds.py` fails for a number field of an input model without a bound and a reason here.
REASONS: dict[str, str] = {
    "value": "an override's value is a non-negative number within int32; the setting it overrides bounds it further "
             "(checked where the override is applied)",
    "audit_log_retention_days": "one of the retention periods CloudWatch Logs accepts (PutRetentionPolicy), 1 day to "
                                "10 years",
    "peak_requests_per_s": "a peak is 0.001-100,000 requests/s per model: below it no fleet is sized by its peak, "
                           "above it one stack's 1,000 replicas cannot serve it",
    "traffic_scale": "an environment sees 0.001-10x the peak",
    "requests_per_day": "a batch is 1 to 8.64 billion requests a day (100,000 requests/s for a whole day)",
    "tokens_per_day": "a batch is 1 to 17.3 trillion tokens a day (8.64 billion requests of 2,000 tokens)",
    "deadline_hours": "a daily batch's deadline is 0.01-24 hours after its window's start",
    "start_hour": "an hour of the day, 0-23 (local time in the window's timezone)",
    "end_hour": "an hour of the day, 0-23 (local time in the window's timezone)",
    "length_hours": "a window is 1-24 hours long",
    "mean_input_tokens": "token counts are at most 2^20 (8x the longest context in the catalog)",
    "mean_output_tokens": "token counts are at most 2^20 (8x the longest context in the catalog)",
    "input_tokens_p95": "token counts are at most 2^20 (8x the longest context in the catalog)",
    "output_tokens_p95": "token counts are at most 2^20 (8x the longest context in the catalog)",
    "shared_prefix_tokens": "token counts are at most 2^20 (8x the longest context in the catalog)",
    "turns": "a conversation of 2-200 turns (blueprints/requirements/reuse.py MAX_SESSION_TURNS)",
    "max_context_tokens": "a context is 64 tokens (four KV-cache blocks) to 2^20",
    "max_model_len": "a context is 64 tokens (four KV-cache blocks) to 2^20",
    "params_b": "a model has 1,000 parameters to 10 trillion (params_b is in billions)",
    "active_params_b": "a model has 1,000 parameters to 10 trillion (params_b is in billions)",
    "shared_params_b": "a model has 1,000 parameters to 10 trillion (params_b is in billions)",
    "weights_gib": "weights are 0.01 GiB (rounded up) to 40,000 GiB",
    "measured_latency_ms": "a latency is 0.1 ms to 10 minutes: below, no network service answers; above, the "
                           "request outlives the load balancer and SageMaker's limits",
    "ttft_p95_ms": "a latency target is 0.1 ms to 10 minutes",
    "itl_p95_ms": "a latency target is 0.1 ms to 10 minutes",
    "latency_p95_ms": "a latency target is 0.1 ms to 10 minutes",
    "latency_p99_ms": "a latency target is 0.1 ms to 10 minutes",
    "ttft_p99_ms": "a latency target is 0.1 ms to 10 minutes",
    "itl_p99_ms": "a latency target is 0.1 ms to 10 minutes",
    "min_replicas": "one stack scales to at most 1,000 replicas (one autoscaler and node pool; Kubernetes supports "
                    "5,000 nodes per cluster)",
    "max_replicas": "one stack scales to at most 1,000 replicas (one autoscaler and node pool; Kubernetes supports "
                    "5,000 nodes per cluster)",
    "replicas": "one stack scales to at most 1,000 replicas",
    "initial_instance_count": "one stack scales to at most 1,000 replicas",
    "max_monthly_usd": "a budget is $1 to $100M a month",
    "cpu_per_replica": "a serving replica requests at least one whole core (ONNX Runtime threads = whole cores)",
    "node_provisioning_s": "each part of a cold start is at most a day, and at least 1 s except on an edge cluster's "
                           "owned nodes: a zero part zeroes the startup probe and the progress deadline",
    "weights_download_s": "each part of a cold start is 1 s to a day",
    "model_load_s": "each part of a cold start is 1 s to a day",
    "image_pull_s": "each part of a cold start is at most a day",
    "monthly_cost_usd": "a stack costs more than $0 (its serving nodes or instances; $0 only on owned edge nodes) and "
                        "at most $1B a month",
    "max_num_seqs": "at most 65,536 sequences: far beyond any GPU's KV cache",
    "attainment_pct": "a share of minutes, 50-100 %: below half the day a latency target is no target",
    "engine_switch_threshold_pct": "a share of the monthly cost, 0-100 %: 0 plans the cheapest engine whatever it is, "
                                   "100 never leaves vLLM",
    "weekend_factor": "a weekend day's share of a working day's traffic, 0-1: a weekend busier than a working day is "
                      "the working day (the plan sizes the busiest day)",
    "longest_violation_minutes": "a run of minutes within the simulated day, 0-1,440",
    "peak_to_trough": "a daily swing of 1x (flat) to 1,000x: beyond it the overnight rate is below what any fleet sizes",
    "peak_hours": "hours of a day, 0-23",
    "availability_pct": "an availability target is 90-99.99... %: 100 % is no target any fleet meets",
    "layers": "a transformer shape as in config.json, within the largest published models",
    "hidden_size": "a transformer shape as in config.json, within the largest published models",
    "attention_heads": "a transformer shape as in config.json, within the largest published models",
    "kv_heads": "a transformer shape as in config.json, within the largest published models",
    "head_dim": "a transformer shape as in config.json, within the largest published models",
    "vocab_size": "a vocabulary of at most 2 million tokens",
    "intermediate_size": "a transformer shape as in config.json, within the largest published models",
    "rank": "a LoRA rank of 1 to 512, the largest --max-lora-rank vLLM 0.24.0 serves (vllm/config/lora.py:26): "
            "retrain the adapter at a lower rank or merge it into the weights",
    "experts": "a mixture of 2-1,024 routed experts",
    "experts_per_token": "1-64 experts per token",
    "vcpus": "an owned edge node has 1-1,024 vCPUs (the largest servers)",
    "memory_gib": "an owned edge node has at most 24 TiB of memory (the largest servers)",
    "monthly_usd_per_node": "an owned node costs $0-$1M a month",
    "gflops_per_vcpu": "a measured 0-2,000 GFLOP/s per vCPU: above any CPU core's FP32 peak",
    "node_port": "the NodePort range of a default kube-apiserver, 30000-32767",
    "session_duration_s": "IAM Roles Anywhere vends sessions of 900-43,200 s (profile durationSeconds)",
    "pipeline_latency_p95_ms": "an end-to-end budget is at most 10 minutes, well past any interactive answer",
    "count": "system nodes: 2-10, at least two so the controllers survive a node loss; owned edge nodes: 1-1,000",
    # `choice` (blueprint choose writes it; blueprints/requirements/choice.py): figures measured from result files
    # whose own fields are bounded (blueprints/contracts/benchmark_result.py), recorded as evidence.
    "tensor_parallel_size": "GPUs per replica of the chosen candidate, 1-64 (the result file's bound)",
    "goodput_rps_per_replica": "a measured rate, requests/s, within a result file's bound on rates (1e9)",
    "replicas_at_peak": "replicas a measured goodput implies at the planned peak, at most MAX_REPLICAS",
    "monthly_usd": "that fleet's monthly cost, USD, non-negative and below 1e9",
    "usd_per_1k_requests": "a unit cost, USD, non-negative and below 1e9",
    "usd_per_million_input_tokens": "a unit cost, USD, non-negative and below 1e9",
    "usd_per_million_output_tokens": "a unit cost, USD, non-negative and below 1e9",
    "usd_per_million_tokens": "a unit cost, USD, non-negative and below 1e9",
    "p50": "a measured latency percentile, ms, non-negative and below 1e9",
    "p95": "a measured latency percentile, ms, non-negative and below 1e9",
    "p99": "a measured latency percentile, ms, non-negative and below 1e9",
    "failed_pct": "the share of a run's requests that failed, 0-100 %",
    "cold_start_s": "a measured cold start, s, non-negative and below 1e9 (the result file bounds it to 2 h)",
}
