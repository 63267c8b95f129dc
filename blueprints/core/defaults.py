"""Named defaults, each with its source. Change one only with a note in the changelog: plans depend on them."""

# --- Capacity model (see blueprints/capacity/) ------------------------------------------------------------------
# The fitted constants are named, bounded and given a prior in blueprints/capacity/fitting.py (CONSTANTS, with the
# points each one moves); `benchmarks/sizing.py --cross-validate --write` fits them on every published point
# (blueprints/catalog/calibration-points*.yaml) and records each source group's held-out predictions in
# blueprints/catalog/capacity-fit.yaml, whose `full` values are the ones below (tests/test_sizing_calibration.py
# holds them equal).
#: --gpu-memory-utilization the planner sets explicitly: 0.90, below vLLM 0.24.0's own default of 0.92 (vllm/config/
#: cache.py:67 at v0.24.0; 0.9 up to 0.19), for headroom.
GPU_MEMORY_UTILIZATION = 0.90
#: Per-GPU memory vLLM needs besides weights and KV cache (activations, CUDA graphs, NCCL buffers), GiB.
#: sizing-facts.md: "activations/CUDA-graph overhead (a few GB)".
ACTIVATION_OVERHEAD_GIB_PER_GPU = 2.0
#: Memory-bandwidth utilisation of a decode step streaming 16-bit weights, on the roofline's GPUs. Public runs:
#: 0.7-0.77 (sizing-facts.md); fitted to the roofline's points.
MBU_SINGLE_GPU_16BIT = 0.765
#: Effective bandwidth of each weight-only or 8-bit kernel family in decode, as a fraction of the 16-bit kernels' (x
#: MBU_SINGLE_GPU_16BIT). AWQ, GPTQ 4-bit and 8-bit fitted to the roofline's quantised points (mostly the Qwen2.5
#: speed benchmark on A100-80GB, vLLM 0.6.3, Marlin kernels): Qwen's GPTQ-Int4 72B reaches only ~0.47 of the 16-bit
#: kernels (16.5 tokens/s on one A100 where streaming its 42 GB at 16-bit efficiency gives ~33). FP8 sits at its
#: upper bound 1.3: the roofline's FP8 points run faster than their bytes at 16-bit MBU allow (the README's "How far
#: to trust the numbers" says so). W8A8 (int8 weights and activations) [assumption] 0.9.
WEIGHT_BANDWIDTH_FACTOR = {"none": 1.0, "awq": 0.929, "gptq-int4": 0.465, "gptq-int8": 1.0, "fp8": 1.3, "w8a8": 0.9}
#: Compute efficiency of weight-only kernels in prefill (dequantising every tile) relative to 16-bit GEMMs. AWQ
#: fitted to Qwen2.5-7B AWQ at 30k-token and 72B AWQ at 14k-token prompts (~1.4x the BF16 prefill); GPTQ 4-bit
#: [assumption] as AWQ; 8-bit weight-only and FP8 W8A16 (GPUs without FP8 tensor cores) [assumption] 0.85.
#: W8A8 and FP8 on FP8 GPUs run native GEMMs: 1.0.
QUANTIZED_PREFILL_FACTOR = {"none": 1.0, "awq": 0.986, "gptq-int4": 0.7, "gptq-int8": 0.85, "fp8": 0.85,
                            "w8a8": 1.0}
#: Model FLOPs utilisation of dense tensor TFLOPS in prefill, where gpus.yaml gives no `prefill_mfu` for the GPU.
#: Public range 0.3-0.7; fitted to the roofline's prefill points on GPUs without a prefill_mfu of their own.
MFU = 0.36
#: Mixture-of-experts GEMMs (vLLM's fused_moe: routing, permutation, grouped GEMM) reach this fraction of dense GEMM
#: efficiency. Issue 13 reports published Mixtral-8x7B prefill (TP2 H100, TP4 L40S) 1.6-1.7x slower than the dense
#: roofline of its active parameters; with the experts 11.3 of its 12.9 B active parameters that is ~0.58.
#: [assumption] until MoE points are in the calibration set.
MOE_GEMM_EFFICIENCY = 0.58
#: Paged-attention KV reads reach this fraction of memory bandwidth: the weights' MBU. [assumption] consistent with the
#: Qwen2.5 30k-token points (7B, 32B, 72B within 2.5 % with it), which read ~1.8-10 GB of context a step.
KV_READ_BANDWIDTH_EFFICIENCY = 0.75
#: Tensor-parallel all-reduces per layer per step (after attention and after the MLP; Megatron-style TP in vLLM).
ALLREDUCES_PER_LAYER = 2
#: Latency of one all-reduce step over NVLink, microseconds: an all-reduce over TP ranks costs 2 x log2(TP) steps
#: (reduce-scatter and all-gather in recursive halving/doubling) plus 2 x (TP - 1)/TP x its bytes over the link.
#: Fitted (blueprints/capacity/fitting.py) to the roofline's tensor-parallel points (Qwen2.5-72B TP2/TP4 on A100).
ALLREDUCE_HOP_US = {"nvlink": 16.1}
#: A PCIe all-reduce step's latency over an NVLink one's [assumption]: NCCL over PCIe without NVLink (vLLM's custom
#: all-reduce needs NVLink or full P2P on more than two GPUs); no published point of the roofline's PCIe GPUs (A10G,
#: L4, T4) runs tensor parallel to fit it.
ALLREDUCE_PCIE_OVER_NVLINK = 2.5
#: The serving engines the model knows. `vllm-0.24` is the pinned image (VLLM_IMAGE, the V1 engine: chunked prefill
#: always on, async scheduling on by default, scheduler and API server in processes of their own); the others are the
#: engines of published measurements, so calibration compares like with like (benchmarks/sizing.py prints every
#: point; the fitted values are blueprints/capacity/fitting.py's CONSTANTS):
#: - chunked_prefill: prefill joins decode steps within max_num_batched_tokens (V1); otherwise prefill steps run
#:   alone, pausing decode (V0 default for max_model_len <= 32k).
#: - scheduler_steps: V0 multi-step scheduling (`--num-scheduler-steps`): the vLLM 0.6.0 post's runs use 10, so new
#:   prompts wait for a window of 10 decode steps to end.
#: - step_overhead_ms: time every step adds to its kernels (input preparation, sampling, the launches CUDA graphs do
#:   not hide), fitted per profile.
#: - frontend_latency_ms: time before the API server handles a request (HTTP, the engine's IPC), overlapping other
#:   requests; frontend_serial_ms and frontend_serial_us_per_token: the API server's serial work per request and per
#:   prompt token (request handling, tokenisation; one process): the TTFT floor that grows with the prompt.
#: - step_us_per_sequence: host time per scheduled sequence per step in series with the GPU (the V1 engine core's
#:   scheduling and output handling between steps); host_us_per_sequence: per running sequence, overlapped with the
#:   GPU (vLLM 0.6.0's multi-step output processing): the step takes the longer of the two.
#: - frontend_chat_serial_ms: what /v1/chat/completions adds to the serial work per request (the chat template).
#: - tables: the engine (blueprints/catalog/engines.yaml) whose measured step tables time its kernels.
#: - kv_reserve_ratio, kv_reserve_floor, kv_reserve_decay_steps: how admission reserves KV cache for outputs to come
#:   (physics.EngineProfile). vLLM: 0, on demand, preempting when the cache runs out. SGLang 0.5.14: a new request
#:   needs its prompt + max_new_tokens free besides new_token_ratio x each running request's remaining max_new_tokens
#:   (srt/managers/schedule_policy.py:508-516, :886-899, :621), the ratio starting at SGLANG_INIT_NEW_TOKEN_RATIO 0.7
#:   x schedule_conservativeness 1.0 (environ.py:287, server_args.py:740-743), decaying by (0.7 - 0.7 x 0.14) / 600
#:   a decode step to 0.098 (environ.py:288-289, scheduler_components/new_token_ratio_tracker.py:21-34,
#:   scheduler.py:3073) and reset when idle (scheduler.py:3474) [simplified: its rise after a retraction,
#:   scheduler.py:3014-3045, and the 4096-token clip of max_new_tokens, schedule_policy.py:62-64, not modelled].
#:   TensorRT-LLM 1.x: 1, GUARANTEED_NO_EVICT, the default capacity scheduler policy of trtllm-serve and trtllm-bench
#:   (engines.yaml), admits a request only if every running one's blocks to completion and its own fit, so it never
#:   evicts.
ENGINE_PROFILES = {
    "vllm-0.24": {"chunked_prefill": True, "scheduler_steps": 1, "step_overhead_ms": 1.18,
                  "prefill_kernel_factor": 1.0, "step_us_per_sequence": 40.0, "host_us_per_sequence": 0.0,
                  "frontend_latency_ms": 20.8, "frontend_serial_ms": 0.475, "frontend_chat_serial_ms": 31.7,
                  "frontend_serial_us_per_token": 1.0, "tables": "vllm", "kv_reserve_ratio": 0.0,
                  "kv_reserve_floor": 0.0, "kv_reserve_decay_steps": 1},
    "vllm-0.6.0": {"chunked_prefill": False, "scheduler_steps": 10, "step_overhead_ms": 0.3,
                   "prefill_kernel_factor": 1.24, "step_us_per_sequence": 0.0, "host_us_per_sequence": 86.6,
                   "frontend_latency_ms": 6.0, "frontend_serial_ms": 0.5, "frontend_chat_serial_ms": 0.0,
                   "frontend_serial_us_per_token": 1.0, "tables": "vllm", "kv_reserve_ratio": 0.0,
                  "kv_reserve_floor": 0.0, "kv_reserve_decay_steps": 1},
    "vllm-0.6.3-offline": {"chunked_prefill": False, "scheduler_steps": 1, "step_overhead_ms": 3.28,
                           "prefill_kernel_factor": 1.0, "step_us_per_sequence": 0.0, "host_us_per_sequence": 0.0,
                           "frontend_latency_ms": 0.0, "frontend_serial_ms": 0.0,
                           "frontend_chat_serial_ms": 0.0, "frontend_serial_us_per_token": 0.0, "tables": "vllm", "kv_reserve_ratio": 0.0,
                  "kv_reserve_floor": 0.0, "kv_reserve_decay_steps": 1},
    "vllm-0.4.3": {"chunked_prefill": False, "scheduler_steps": 1, "step_overhead_ms": 5.03,
                   "prefill_kernel_factor": 1.0, "step_us_per_sequence": 0.0, "host_us_per_sequence": 0.0,
                   "frontend_latency_ms": 6.0, "frontend_serial_ms": 0.5, "frontend_chat_serial_ms": 0.0,
                   "frontend_serial_us_per_token": 1.0, "tables": "vllm", "kv_reserve_ratio": 0.0,
                  "kv_reserve_floor": 0.0, "kv_reserve_decay_steps": 1},
    # SGLang 0.5.x and TensorRT-LLM 1.x (PyTorch backend), the engines of calibration-points-5.yaml: their host-side
    # constants are vllm-0.24's but for the chat endpoint's serial cost, fitted on each engine's own published points
    # (blueprints/capacity/fitting.py ENGINE_CONSTANTS; blueprints/catalog/engine-fit.yaml, leaving one source out);
    # their kernels come from their own measured step tables (`tables`). SGLang runs a prefill batch alone whenever
    # one is ready and decode waits (enable_mixed_chunk False, server_args.py:488; scheduler.py:1689-1691 "Run
    # prefill first if possible", at 0.5.5.post1), so chunked_prefill False; TensorRT-LLM's in-flight batching runs
    # context and generation requests in one step (NVIDIA/TensorRT-LLM docs/source/performance/
    # tuning-max-batch-size-and-max-num-tokens.md), so chunked_prefill True (the planner passes
    # --enable_chunked_prefill).
    "sglang-0.5": {"chunked_prefill": False, "scheduler_steps": 1, "step_overhead_ms": 1.18,
                   "prefill_kernel_factor": 1.0, "step_us_per_sequence": 40.0, "host_us_per_sequence": 0.0,
                   "frontend_latency_ms": 20.8, "frontend_serial_ms": 0.475, "frontend_chat_serial_ms": 10.0,
                   "frontend_serial_us_per_token": 1.0, "tables": "sglang", "kv_reserve_ratio": 0.7,
                   "kv_reserve_floor": 0.098, "kv_reserve_decay_steps": 600},
    "trtllm-1.x": {"chunked_prefill": True, "scheduler_steps": 1, "step_overhead_ms": 1.18,
                   "prefill_kernel_factor": 1.0, "step_us_per_sequence": 40.0, "host_us_per_sequence": 0.0,
                   "frontend_latency_ms": 20.8, "frontend_serial_ms": 0.475, "frontend_chat_serial_ms": 20.0,
                   "frontend_serial_us_per_token": 1.0, "tables": "tensorrt-llm", "kv_reserve_ratio": 1.0,
                   "kv_reserve_floor": 1.0, "kv_reserve_decay_steps": 1},
}
#: The engine profile of VLLM_IMAGE: plans and `estimate` use it.
PINNED_ENGINE = "vllm-0.24"
#: GPUs whose step times come from the measured vLLM kernel tables (blueprints/catalog/step_tables/) where a table
#: covers the replica; the roofline serves the rest. Chosen by the calibration points' error (`benchmarks/sizing.py
#: --sources` prints both sources per GPU; tests/test_sizing_calibration.py holds the choice): see the README, "How far
#: to trust the numbers". GPUs with tables but no published point (H200, L40S, B200, B300, RTX PRO 6000) take the
#: measured source, whose error on the GPUs with points is the one stated.
MEASURED_STEP_GPUS = ("h100", "h200", "l40s", "a100-80gb", "b200", "b300", "rtx-pro-6000")
#: The capacity model's cross-validated error per step source (blueprints/capacity/fitting.py: each published point
#: predicted with the constants fitted without its source group; known-off points included): `points`, the median and
#: p90 |error| over them, and the p75 |error| of each metric family (`ttft`, `itl`: token gaps, `throughput`) over the
#: steady-traffic regimes (uncertainty.BAND_REGIMES): vLLM's per step source, SGLang's and TensorRT-LLM's from their
#: own published points, their ENGINE_CONSTANTS fitted without the point's source group (physics.band_cell): the band
#: every LLM prediction carries and the margin an uncalibrated production plan is sized with
#: (blueprints/capacity/uncertainty.py). tests/test_sizing_calibration.py holds these to the committed fits
#: (blueprints/catalog/capacity-fit.yaml, engine-fit.yaml).
CAPACITY_UNCERTAINTY = {
    "measured": {"points": 208, "median": 0.158, "p90": 0.6, "ttft": 0.525, "itl": 0.221, "throughput": 0.138},
    "roofline": {"points": 116, "median": 0.098, "p90": 0.54, "ttft": 0.449, "itl": 0.324, "throughput": 0.419},
    "sglang": {"points": 151, "median": 0.203, "p90": 1.043, "ttft": 2.272, "itl": 0.176, "throughput": 0.112},
    "tensorrt-llm": {"points": 192, "median": 0.227, "p90": 0.804, "ttft": 1.427, "itl": 0.377, "throughput": 0.35},
}
#: vLLM's KV-cache block, tokens: CacheConfig.DEFAULT_BLOCK_SIZE (vllm/config/cache.py:46 at v0.24.0), which the
#: FlashAttention backend keeps on CUDA (platforms/interface.py:613-625, v1/attention/backend.py:194-202).
KV_BLOCK_TOKENS = 16
#: vLLM V1 defaults for the OpenAI server (vllm/engine/arg_utils.py get_batch_defaults, :2375-2423 at v0.24.0):
#: --max-num-batched-tokens 8192 and --max-num-seqs 1024 on GPUs with >= 70 GiB that are not A100s, else 2048 and 256
#: (unchanged since 0.11; 0.33 adds a 16384/1024 tier for >= 160 GiB).
VLLM_DEFAULT_BATCH = {"large": (8192, 1024), "other": (2048, 256)}
#: V0 engines without chunked prefill: --max-num-batched-tokens = max(max_model_len, 2048) and a 1 % watermark of KV
#: blocks kept free when admitting (vllm 0.4-0.6 config.py / core/block_manager).
V0_MIN_BATCHED_TOKENS = 2048
V0_WATERMARK = 0.01
#: The planner never sets --max-num-seqs above this: vLLM V1 captures CUDA graphs for batches up to
#: min(2 x max_num_seqs, 512) when `max_cudagraph_capture_size` is unset (vllm/config/vllm.py:1684-1692 at v0.24.0),
#: and larger batches run eagerly.
MAX_NUM_SEQS_CAP = 512
#: Default --max-model-len when the requirements leave it open, tokens (the model's own limit if lower).
DEFAULT_MAX_MODEL_LEN = 8192
#: Request lengths: lognormal around each mean, with p95 = this x the mean unless the requirements give
#: traffic.input_tokens_p95 / output_tokens_p95. [assumption] a moderate spread (a prompt of twice the mean is the
#: 95th percentile); set the p95 fields from your logs.
TOKENS_P95_TO_MEAN = 2.0
#: Arrivals per traffic pattern, around the peak mean rate: `steady` is Poisson; `bursty` and `spiky` are Poisson with
#: a rate that alternates between a burst (the mean x the multiplier, for the duration given) and a lull (the rate
#: that keeps the mean): (burst rate multiplier, share of time in bursts, burst duration s). bursty: 10 s at 2x every
#: 40 s; spiky: 5 s at 4x every 50 s. [assumption] bursts of seconds that an autoscaler reacting in minutes cannot
#: absorb, so each replica must; the old fixed headroom (TARGET_UTILIZATION 0.65 / 0.5) is what these imply at
#: second-scale TTFT targets.
ARRIVAL_BURSTS = {"steady": None, "bursty": (2.0, 0.25, 10.0), "spiky": (4.0, 0.1, 5.0)}
#: The replica simulation: seeded, so the same inputs give the same plan. Requests per run: enough for
#: SIMULATION_HORIZON_S of traffic, within the bounds; the first SIMULATION_WARMUP_FRACTION are not measured.
SIMULATION_SEED = 13
SIMULATION_REQUESTS = (300, 800)
SIMULATION_HORIZON_S = 600.0
SIMULATION_WARMUP_FRACTION = 0.1
#: Highest share of a replica's saturated request rate the planner loads it to at peak, whatever the simulated p95
#: says: at the saturation knee a finite simulation understates the queue. [assumption]
LLM_MAX_UTILIZATION = 0.9
#: Re-planning over an existing stack config keeps its hardware (instance type, tensor parallel, KV-cache dtype)
#: while it stays within this share above the cheapest option, %: a switch replaces the node pool (new nodes, a
#: rollout, a cold start) for a saving a forecast's error exceeds. `blueprint plan --switch-threshold`. [assumption]
SWITCH_THRESHOLD_PCT = 5.0
#: Fraction of a non-generative replica's saturated request rate the planner loads it to at peak (headroom for
#: bursts; LLM replicas are sized by the simulated queue instead).
TARGET_UTILIZATION = {"steady": 0.8, "bursty": 0.65, "spiky": 0.5}
#: Replicas at least, per availability target (topology-spread over zones in production).
MIN_REPLICAS_FOR_HIGH_AVAILABILITY = 2
HIGH_AVAILABILITY_PCT = 99.9
#: Zones a high-availability workload spreads over at least: the topology spread constraint's `minDomains`
#: (kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints: with minDomains the scheduler
#: treats fewer eligible domains as global minimum 0, so pods go Pending rather than pile into one zone; stable since
#: Kubernetes 1.30; Karpenter provisions for topology spread constraints, [unverified] including minDomains).
MIN_ZONES_FOR_HIGH_AVAILABILITY = 2

#: Extra replicas a rolling update starts before stopping an old one (maxSurge); node pools leave room for them.
SURGE_REPLICAS = 1
#: Share of a simulated planned day's minutes that must meet the latency targets (p95s, and p99s where set) before the
#: plan stops raising the minimum replicas (`blueprints.plan.scaling.warm_floor`), %, when the requirements set no
#: `slo.attainment_pct`: 99 in production (about 14 minutes a day may miss), 95 elsewhere (about 72). [assumption]
#: holding replicas warm for every burst would provision the peak all day; the plan states the price of each step up.
SLO_ATTAINMENT_PCT = {"production": 99.0, "other": 95.0}
#: The attainments above the planned one whose extra cost the plan states (`blueprints.plan.scaling.warm_floor`), %.
SLO_ATTAINMENT_STEPS_PCT = (99.0, 99.5, 99.9)
#: HPA: no scaling while the usage ratio is within this of 1 (kube-controller-manager
#: --horizontal-pod-autoscaler-tolerance default 0.1).
HPA_TOLERANCE = 0.1

# --- Startup ------------------------------------------------------------------------------------------------------
# The startup model (node launch, image pull, weights, engine start) is catalog data with its sources:
# blueprints/catalog/startup.yaml, read by blueprints/plan/startup.py.

# --- Cluster overhead ------------------------------------------------------------------------------------------
#: Karpenter EC2NodeClass AMI: the AL2023 alias, which resolves the standard, NVIDIA or Neuron variant per instance
#: type. Pinned to an EKS AMI release so a new AMI reaches nodes through a reviewed change (Karpenter v1.14 docs,
#: nodeclasses.md: "pinned to a specific AMI using the format of that AMI's GitHub release tags ... al2023@v20240703").
#: v20260714: awslabs/amazon-eks-ami release whose CHANGELOG lists amazon-eks-node-al2023-{x86_64,arm64}-{standard,
#: nvidia}-<k8s>-v20260714 for Kubernetes 1.30-1.36 (checked 2026-12 at tag v20260724).
KARPENTER_AMI_ALIAS = "al2023@v20260714"
#: CPU architectures each EC2NodeClass alias family resolves AMIs for (Karpenter v1.14 pkg/providers/amifamily:
#: al2023.go reads /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/... for x86_64 (standard,
#: nvidia, neuron) and arm64 (standard, nvidia); bottlerocket.go for x86_64 and arm64, standard and nvidia). Karpenter
#: picks the AMI of each launched instance type's architecture.
AMI_ALIAS_ARCHES = {"al2023": ("x86_64", "arm64"), "bottlerocket": ("x86_64", "arm64")}
#: Root EBS volume of Karpenter GPU nodes, GiB: OS only; kubelet, containerd (images) and pod ephemeral storage go on
#: the instance-store NVMe array (instanceStorePolicy RAID0), which every catalogued GPU type has
#: (`INSTANCE_STORE_GB`, checked by tests/test_catalog.py).
GPU_NODE_ROOT_VOLUME_GIB = 100
#: Smallest root EBS volume of Karpenter CPU nodes (no instance store on c7i/c7g/m7i): OS, images and replicas'
#: ephemeral storage share it. The platform plan grows it, in steps of `NODE_VOLUME_STEP_GIB`, until a node full of
#: the largest CPU-capable service's replicas (`CPU_REPLICAS_PER_NODE`) fits (`blueprints.plan.platforms`).
CPU_NODE_ROOT_VOLUME_GIB = 100
NODE_VOLUME_STEP_GIB = 50

# --- Node disk (ephemeral storage) ----------------------------------------------------------------------------------
#: Share of the kubelet's filesystem kept free: its default hard eviction threshold `nodefs.available<10%`
#: (kubelet --eviction-hard default "imagefs.available<15%,memory.available<100Mi,nodefs.available<10%,
#: nodefs.inodesFree<5%", kubernetes/kubernetes pkg/kubelet/apis/config/v1beta1 defaults.go DefaultEvictionHard;
#: the EKS AL2023 AMI keeps it). Pods are evicted once less is free.
EVICTION_NODEFS_FRACTION = 0.10
#: kube-reserved ephemeral storage of EKS AL2023 nodes, GiB (awslabs/amazon-eks-ami nodeadm/internal/kubelet/
#: config.go withDefaultReservedResources: "ephemeral-storage": "1Gi").
KUBE_RESERVED_EPHEMERAL_GIB = 1
#: The OS's share of a node's root volume, GiB. [assumption] the AL2023 EKS AMI fits Karpenter's 20 GiB default volume
#: (karpenter-provider-aws DefaultEBS for AL2023: 20Gi), half of it in use.
NODE_OS_RESERVE_GIB = 10
#: Disk one pulled serving image takes on a node, GiB. [assumption] vLLM 0.24 and Triton 25.10 images are ~10 GB
#: compressed; containerd keeps the compressed layers and the unpacked snapshot, so about three times that.
SERVING_IMAGE_DISK_GIB = 30
#: Disk the platform's controller images take on a system node, GiB (Karpenter, the load balancer controller, KEDA,
#: kube-prometheus-stack, metrics-server, EKS add-ons). [assumption] a few hundred MB each, compressed.
CONTROLLER_IMAGES_DISK_GIB = 10
#: What a system node's root volume holds besides the sync Jobs' scratch: the OS, the controllers' images and the
#: sync Job's image (`HF_DOWNLOAD_IMAGE`, a serving image), GiB.
SYSTEM_NODE_RESERVE_GIB = NODE_OS_RESERVE_GIB + CONTROLLER_IMAGES_DISK_GIB + SERVING_IMAGE_DISK_GIB
#: What a serving node's kubelet filesystem holds besides the pods' ephemeral storage, GiB: the serving image, plus
#: the OS when that filesystem is the root volume (on an instance-store RAID0 node class the OS stays on the root).
SERVING_NODE_RESERVE_GIB = SERVING_IMAGE_DISK_GIB
SERVING_NODE_ROOT_RESERVE_GIB = NODE_OS_RESERVE_GIB + SERVING_IMAGE_DISK_GIB
#: Scratch every serving replica requests beside its weights, GiB (logs, compile caches, engine files).
REPLICA_SCRATCH_GIB = 10
#: Ephemeral storage of an s3:// -> model store sync Job, GiB: `aws s3 sync` copies server-side, so only its logs.
S3_SYNC_EPHEMERAL_GIB = 1
#: The EKS system node group (CoreDNS, device plugin, KEDA, monitoring agents): type and count, priced from the catalog.
SYSTEM_NODE_INSTANCE_TYPE = "m7i.xlarge"
SYSTEM_NODE_COUNT = 2

# --- Node allocatable (offline scheduling checks, blueprints/review/deployability/nodes.py) ----------------------------------
#: Share of an instance's memory the hypervisor keeps: Karpenter's `vmMemoryOverheadPercent` default 0.075
#: (karpenter-provider-aws settings, VM_MEMORY_OVERHEAD_PERCENT).
VM_MEMORY_OVERHEAD_FRACTION = 0.075
#: Pods per node in the kube-reserved memory formula. [assumption] Kubernetes' default max pods (110); EKS AMIs use
#: the ENI limit, which is lower on small types (so this overestimates the reservation, i.e. errs safe).
MAX_PODS_PER_NODE = 110
#: kube-reserved memory = 11 MiB x max pods + 255 MiB; kubelet hard eviction at 100 MiB (amazon-eks-ami nodeadm
#: kubelet config, "getMemoryMebibytesToReserve"; Karpenter computes the same).
KUBE_RESERVED_MEMORY_MIB_PER_POD = 11
KUBE_RESERVED_MEMORY_BASE_MIB = 255
EVICTION_MEMORY_MIB = 100
#: kube-reserved CPU: 6 % of the first core, 1 % of the second, 0.5 % of the third and fourth, 0.25 % of the rest
#: (amazon-eks-ami nodeadm "getCPUMillicoresToReserve").
KUBE_RESERVED_CPU_FRACTIONS = (0.06, 0.01, 0.005, 0.005)
KUBE_RESERVED_CPU_REST_FRACTION = 0.0025
#: Instance-store NVMe of each GPU instance type, GiB (GB x 10^9 / 2^30), the ephemeral storage of a RAID0 node class.
#: Source: docs.aws.amazon.com/ec2/latest/instancetypes/ (accelerated computing, instance store volumes).
#: [unverified] copied from the AWS instance-type tables, checked 2026-12.
INSTANCE_STORE_GB = {
    "g4dn.xlarge": 125, "g4dn.2xlarge": 225, "g4dn.12xlarge": 900,
    "g5.xlarge": 250, "g5.2xlarge": 450, "g5.4xlarge": 600, "g5.12xlarge": 3800, "g5.48xlarge": 7600,
    "g6.xlarge": 250, "g6.2xlarge": 450, "g6.4xlarge": 600, "g6.12xlarge": 3760, "g6.48xlarge": 7520,
    "g6e.xlarge": 250, "g6e.2xlarge": 450, "g6e.4xlarge": 600, "g6e.12xlarge": 3800, "g6e.48xlarge": 7600,
    "p4d.24xlarge": 8000, "p4de.24xlarge": 8000, "p5.4xlarge": 3840, "p5.48xlarge": 30720, "p5en.48xlarge": 30720,
    # Added 2026-12 from the same tables (instance store specifications): 1 x 1900, 1 x 3800, 2 x 3800, 4 x 3800 and
    # 8 x 3800 GB NVMe SSD.
    "g7e.2xlarge": 1900, "g7e.4xlarge": 1900, "g7e.8xlarge": 1900, "g7e.12xlarge": 3800, "g7e.24xlarge": 7600,
    "g7e.48xlarge": 15200, "p6-b200.48xlarge": 30400, "p6-b300.48xlarge": 30400,
}

# --- Deployment defaults ------------------------------------------------------------------------------------------
#: Pinned serving images. Never `latest`: a tag change must be a reviewed diff. vLLM v0.24.0 (PyPI upload
#: 2026-06-30): the release AIConfigurator's measured kernel tables cover (blueprints/catalog/step_tables/), built on
#: CUDA 13.0.2 (docker/Dockerfile:25), which needs an R580 or newer host driver: the EKS-optimized AL2023 NVIDIA AMIs
#: ship the 580 branch (awslabs/amazon-eks-ami#2470, #2484, #2509). Every flag, metric and default the project uses
#: is checked against its sdist (blueprints/catalog/metrics.yaml; components/vllm_service.py vllm_args).
VLLM_IMAGE = "vllm/vllm-openai:v0.24.0"
#: Image for the init container that copies weights from S3 with the pod's IAM role (IRSA): AWS CLI v2.
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.31.13"
#: Kubernetes namespace for serving workloads.
NAMESPACE = "serving"
#: AWS Application/Network Load Balancer idle timeout default, s; streamed generations outlive it.
AWS_LB_DEFAULT_IDLE_TIMEOUT_S = 60
#: /dev/shm per tensor-parallel rank for NCCL, GiB (vLLM docs recommend --shm-size for TP; 64 MB default is too small).
SHM_GIB_PER_TP_RANK = 2.0

# --- Components: cluster, network, archetype servers (components/) ------------------------------------------------
#: NVIDIA Kubernetes device plugin, static DaemonSet as published in github.com/NVIDIA/k8s-device-plugin
#: (deployments/static/nvidia-device-plugin.yml); v0.18.0 released 2025-10.
NVIDIA_DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"
#: Image of the one-off Hugging Face download step of the weights sync Job: the pinned vLLM image already ships the
#: `huggingface_hub` CLI (`hf download`, huggingface_hub 1.21.0 as resolved at its build: blueprints/catalog/
#: processes.yaml `tools`), so no unpinned `pip install` happens at run time. Kept although it is ~10 GB on a system
#: node: no smaller upstream image with a pinned huggingface_hub could be verified (Hugging Face publishes no
#: versioned CLI image; `ghcr.io/huggingface/hf-transfer` is seen only as `latest`; Docker Hub and GHCR manifests
#: cannot be read from here), and a generic Python image would need that run-time `pip install`.
HF_DOWNLOAD_IMAGE = VLLM_IMAGE
#: CPU architectures `HF_DOWNLOAD_IMAGE` is known to be published for (blueprints/catalog/images.yaml): linux/amd64
#: (vllm-project/vllm#22206, 2025-08: "linux/amd64 is the only build offered"), so the sync Job of an `hf://` model
#: cannot run on Graviton system nodes. v0.24.0's release script also pushes an aarch64 image
#: (.buildkite/scripts/publish-release-images.sh:41-48) [unverified on Docker Hub], not relied on here.
HF_DOWNLOAD_IMAGE_ARCHES = ("x86_64",)
#: EKS managed node group AMI types by (accelerator, CPU architecture) (docs.aws.amazon.com/eks/latest/APIReference/
#: API_Nodegroup.html, amiType: the API spells AL2023_x86_64_STANDARD and AL2023_ARM_64_STANDARD as written here;
#: the CDK enum NodegroupAmiType lists the same AL2023 variants).
EKS_AMI_TYPE = {
    ("nvidia-gpu", "x86_64"): "AL2023_x86_64_NVIDIA",
    ("nvidia-gpu", "arm64"): "AL2023_ARM_64_NVIDIA",
    ("cpu", "x86_64"): "AL2023_x86_64_STANDARD",
    ("cpu", "arm64"): "AL2023_ARM_64_STANDARD",
}
#: VPC address space of a new network; subnets are carved out of it per availability zone.
VPC_CIDR = "10.0.0.0/16"
#: Availability zones a new network spans (at least 2 for EKS; 3 when the region has them).
NETWORK_AZ_COUNT = 3
#: NLB listener TCP idle timeout limits, s (docs.aws.amazon.com/elasticloadbalancing/latest/network/
#: update-idle-timeout.html: 60-6000, default 350). Set via the AWS Load Balancer Controller (>= v2.9.0) annotation
#: `service.beta.kubernetes.io/aws-load-balancer-listener-attributes.TCP-<port>` on TCP listeners only (a TLS
#: listener's is fixed at 350 s, `components.exposure.NLB_TLS_IDLE_TIMEOUT_S`).
NLB_TCP_IDLE_TIMEOUT_MAX_S = 6000
#: Headroom added above the blueprint's longest expected streamed response, s.
LB_IDLE_TIMEOUT_HEADROOM_S = 60
#: Seconds a terminating pod is still sent requests while its endpoints and load-balancer targets deregister
#: (AWS Load Balancer Controller docs, "pod graceful termination": deregistration takes seconds; the KEDA HTTP
#: interceptor and Services follow the endpoints).
DEREGISTRATION_S = 15
#: Seconds a serving container is given after its preStop sleep to exit (vLLM releases its GPUs, Triton unloads its
#: models) before the kubelet kills it. [assumption]
EXIT_MARGIN_S = 30
#: The Deployment field an autoscaler owns (Pulumi property path), set by Pulumi at creation only and then ignored
#: (`ignore_changes`) wherever KEDA or an HPA scales the Deployment. Why: the HPA controller (KEDA drives one) writes
#: `.spec.replicas` through the scale subresource, and "whenever a field's value does change, ownership moves from its
#: current manager to the manager making the change" (kubernetes.io/docs/reference/using-api/server-side-apply/
#: #field-management); Pulumi's next server-side apply of its own value then fails "conflict with
#: kube-controller-manager with subresource scale: .spec.replicas" (pulumi/pulumi-kubernetes#2491, #2569) or, forced
#: (`pulumi.com/patchForce` / `enablePatchForce`, provider/pkg/await/await.go `patchForce`), resets the fleet. With the
#: path ignored, the provider's `handleSSAIgnoreFields` (provider/pkg/await/await.go, unchanged since v4.9.0 #2828,
#: read at the mirror's 94977969, 2026-07-01) drops the field from the apply patch when another manager owns it and
#: we do not, and otherwise re-sends the live value; pulumi-kubernetes recommends ignoreChanges for fields a
#: controller overrides (#2258). Pinned pulumi-kubernetes: 4.34.2 (uv.lock).
AUTOSCALED_REPLICAS_PATH = "spec.replicas"
#: Probe-level `terminationGracePeriodSeconds` of every liveness and startup probe of a container that drains in a
#: preStop hook, s: how long the kubelet waits on that hook when the probe kills the container (then it sends SIGTERM
#: with its 2 s floor, `minimumGracePeriodInSeconds`, and SIGKILL), so a hung or stuck engine restarts within ~3 s
#: instead of after its drain sleep plus `EXIT_MARGIN_S`. The kubelet still runs preStop before a probe kill
#: (pkg/kubelet/kuberuntime/kuberuntime_container.go `killContainer`: `setTerminationGracePeriod` returns the
#: probe's value for reasonStartupProbe / reasonLivenessProbe when set, the pod's otherwise, and a pod being deleted
#: always gets its deletion grace period; `executePreStopHook` waits for the hook at most that grace period, "PreStop
#: hook not completed in grace period"). The field: kubernetes/website content/en/docs/tasks/configure-pod-container/
#: configure-liveness-readiness-startup-probes.md "Probe-level terminationGracePeriodSeconds" (stable 1.28, on by
#: default from 1.25; minimum 1; rejected on readiness probes). Deletion, scale-in and rollouts still drain the
#: whole window: only probe kills use it. A hung engine has nothing worth draining. [assumption] 1 s, the minimum.
PROBE_KILL_GRACE_S = 1
#: CloudWatch log types of the EKS control plane enabled with audit logging (EKS API `ClusterLoggingTypes`).
EKS_CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
#: The EKS cluster's upgrade policy (`upgrade_policy.support_type`, pulumi_aws 7.51.1 eks.ClusterUpgradePolicyArgs:
#: STANDARD | EXTENDED), set explicitly. EXTENDED: at the end of standard support the cluster stays on its version in
#: extended support, billed at the extended price (blueprints/catalog/kubernetes.yaml); STANDARD: EKS upgrades the
#: control plane itself, to a version the pinned add-ons may not support (KEDA 2.20 is tested to 1.35) and past the
#: version the stack config records, which a later `pulumi up` could not move back (EKS never downgrades). The plan
#: states the date the extended price starts and warns before it (docs.aws.amazon.com/eks/latest/userguide/
#: view-upgrade-policy.html; API_UpgradePolicyRequest: "The default value is EXTENDED"; CloudFormation
#: AWS::EKS::Cluster UpgradePolicy: "Update requires: No interruption").
EKS_SUPPORT_TYPE = "EXTENDED"

# --- Non-generative models: Triton and ONNX Runtime (see blueprints/capacity/sizing.py, encoder_* functions) ------------------
#: Fraction of dense tensor TFLOPS a GPU reaches on encoder/CNN forward passes in Triton (TensorRT/ORT-CUDA backends).
#: [assumption] below LLM prefill's 0.45 (MFU above): short sequences and small GEMMs; within the public 0.3-0.7 range.
ENCODER_MFU = 0.35
#: Per-request server time outside the forward pass (HTTP/gRPC, tokenisation, tensor copies), ms. [assumption]
TRITON_REQUEST_OVERHEAD_MS = 2.0
ONNXRUNTIME_REQUEST_OVERHEAD_MS = 1.0
#: p95 request latency / one forward pass: a request may wait for the batch (or request) in flight, then runs in its
#: own. [assumption] conservative.
NONGEN_P95_FACTOR = 2.0
#: Largest Triton max_batch_size the planner sets (powers of two up to this). Triton model-configuration docs start at
#: small batches and raise until the latency budget is reached; 64 bounds activation memory. [assumption]
TRITON_MAX_BATCH_SIZE_CAP = 64
#: The planner takes the smallest batch that keeps this fraction of the largest feasible batch's throughput: bigger
#: batches then buy latency, not capacity. [assumption]
BATCH_THROUGHPUT_FRACTION = 0.9
#: Triton instance_group count per GPU: two instances overlap one batch's copies/pre-processing with the other's
#: compute (Triton optimization docs, "Model Instances"). On CPU one instance with all intra-op threads.
TRITON_GPU_INSTANCES = 2
#: Latency budget used for batching decisions when the requirements set no slo.latency_p95_ms, ms. [assumption]
DEFAULT_NONGEN_LATENCY_P95_MS = 200.0
#: GPU memory per model instance besides weights (CUDA context, workspace, activations at max batch), GiB. [assumption]
ENCODER_ACTIVATION_GIB = 1.0
#: Share of a CPU node's vCPUs given to serving pods (kubelet, system daemons and DaemonSets keep the rest); the vLLM
#: planner uses the same 0.75 for CPU requests on GPU nodes.
NODE_ALLOCATABLE_CPU_FRACTION = 0.75
#: CPU replicas per node the planner considers; each gets an equal share of the allocatable vCPUs (ONNX Runtime
#: intra-op threads = that share). Few large replicas: a transformer forward pass parallelises over threads.
CPU_REPLICAS_PER_NODE = (1, 2, 4, 8)
#: Host memory of an ONNX Runtime replica: weights x this + fixed runtime overhead, GiB. [assumption]
CPU_MEMORY_WEIGHTS_FACTOR = 2.0
CPU_MEMORY_OVERHEAD_GIB = 1.0

# --- Autoscaling and archetype choice -----------------------------------------------------------------------------
#: Minimum scale-in cooldown, s: vLLM production-stack's KEDA default (sizing-facts.md); raised above cold start.
SCALE_IN_COOLDOWN_MIN_S = 360
#: SageMaker real-time invocation processing limit, s (sizing-facts.md: "60 s processing limit"); a non-streamed
#: response must complete within it.
SAGEMAKER_INVOCATION_TIMEOUT_S = 60
#: SageMaker asynchronous inference (a batch on a managed endpoint, `blueprints.plan.batch`), InvokeEndpointAsync's
#: headers: `InvocationTimeoutSeconds` 1-3600 (one request's processing, s) and `RequestTTLSeconds` 60-21600 (how
#: long a queued request waits before it expires, s): botocore 1.44.8 data/sagemaker-runtime/2017-05-13/
#: service-2.json shapes InvocationTimeoutSecondsHeader and RequestTTLSecondsHeader. A batch queued at its window's
#: start must start its last request within the TTL, and each request must finish within the timeout.
SAGEMAKER_ASYNC_INVOCATION_TIMEOUT_S = 3600
SAGEMAKER_ASYNC_REQUEST_TTL_S = 21_600
#: From a queue at zero instances to the planned instances starting, s: the scale-from-zero alarm on
#: HasBacklogWithoutCapacity (Average >= 1 over 2 periods of 60 s, as awsdocs amazon-sagemaker-developer-guide
#: doc_source/async-inference-autoscale.md sets it) firing its step policy. [assumption] the metric is published
#: within that time; the guide gives no publication delay.
SAGEMAKER_ASYNC_SCALE_FROM_ZERO_S = 120
#: After the queue empties, how long each instance keeps running (and is paid for) before target tracking scales it
#: in, s. [assumption] Application Auto Scaling's target tracking scale-in alarm needs 15 one-minute data points below
#: the target (its alarms are not documented in the SageMaker guides stored here): 15 minutes.
SAGEMAKER_ASYNC_SCALE_IN_LAG_S = 900
#: SageMaker ContainerStartupHealthCheckTimeoutInSeconds / ModelDataDownloadTimeoutInSeconds bounds, s (API reference:
#: 60-3600), and the multiple of the predicted duration the planner allows. [assumption] 2x for a slow start.
SAGEMAKER_TIMEOUT_RANGE_S = (60, 3600)
SAGEMAKER_TIMEOUT_SAFETY_FACTOR = 2.0
#: The slowest copy rate, GiB/s, at which a SageMaker endpoint's timers must still hold: SageMaker copies the model data
#: to the instance's ML volume and the container then reads it back, and neither rate is published (the expected
#: copy rate, `weights.s3_copy_gib_per_s` 0.25 GiB/s in blueprints/catalog/startup.yaml, is itself unverified). A
#: quarter of the expected rate (64 MiB/s), below an EBS gp3 volume's 125 MiB/s
#: baseline (docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html) and a single S3 stream: a longer timer
#: costs nothing but a slower failure, a short one fails a healthy endpoint's creation. [assumption]
SAGEMAKER_SLOWEST_GIB_PER_S = 0.25 / 4
#: SageMaker ML storage volume: weights x this + scratch, GiB (VolumeSizeInGB, 1-512). [assumption]
SAGEMAKER_VOLUME_WEIGHTS_FACTOR = 1.5
SAGEMAKER_VOLUME_SCRATCH_GIB = 20
SAGEMAKER_MAX_VOLUME_GIB = 512
#: With operations.preference=any, a single LLM goes to a SageMaker endpoint when its monthly cost is within this
#: fraction of the self-hosted plan's (the service's own cost; the shared platform is not charged to one service): at
#: small load ops simplicity wins. [assumption]
MANAGED_COST_TOLERANCE = 0.10
#: Pinned Triton image (NGC release notes, 25.10); its onnxruntime backend also serves the onnx-cpu archetype, as the
#: maintained ONNX Runtime server (the standalone onnxruntime-server image was retired upstream).
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:25.10-py3"
ONNXRUNTIME_IMAGE = "nvcr.io/nvidia/tritonserver:25.10-py3"

# --- Monitoring -------------------------------------------------------------------------------------------------
#: NVIDIA DCGM exporter Helm chart (github.com/NVIDIA/dcgm-exporter, charts served from its GitHub Pages).
#: [unverified] chart version: check `helm search repo gpu-helm-charts/dcgm-exporter` before the first deploy.
DCGM_EXPORTER_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_EXPORTER_CHART_VERSION = "4.6.0"
#: Prometheus server KEDA queries, when `servingblueprints:prometheusUrl` is not set (kube-prometheus-stack's
#: service in the `monitoring` namespace).
PROMETHEUS_URL = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"

# --- Access and hardening (components/access.py, components/hardening.py) ---------------------------------------
#: The authenticating reverse proxy in every self-hosted serving pod: Envoy's distroless image, which runs as the
#: distroless `nonroot` user (no shell, no entrypoint script that switches users; `envoyproxy/envoy`
#: distribution/docker/Dockerfile-envoy, target `envoy-distroless`: `FROM gcr.io/distroless/base-nossl-debian12:nonroot`,
#: `ENTRYPOINT ["/usr/local/bin/envoy"]`). The tag is listed on Docker Hub for linux/amd64 and linux/arm64
#: (blueprints/catalog/images.yaml).
ENVOY_IMAGE = "envoyproxy/envoy:distroless-v1.37.6"
#: The authenticating proxy's requests (= limits) in every self-hosted serving pod. [assumption] Envoy proxying one
#: engine's requests needs well under a tenth of a core; part of every replica's requests (`contracts.placement`).
PROXY_RESOURCES = {"cpu": "100m", "memory": "128Mi"}
#: Port the proxy listens on inside the pod (plain HTTP/1.1 and h2c; TLS ends at the load balancer).
PROXY_PORT = 8080
#: Load balancer listener ports: 443 with a TLS certificate, 80 without (internal only).
TLS_PORT = 443
PLAIN_PORT = 80
#: Length of the generated per-stack API key (pulumi-random RandomPassword, letters and digits: ~238 bits).
API_KEY_LENGTH = 40
#: The shortest API key a stack accepts (`servingblueprints:apiKey`): 32 random letters and digits hold 32 x log2(62)
#: = 190 bits, above the 128-bit security strength NIST SP 800-57 Part 1 Rev. 5 (Table 4) accepts beyond 2030
#: [assumption: the key is random; a shorter or guessable one is refused where it is decrypted, at deploy time].
MIN_API_KEY_CHARS = 32
#: The header Triton's restricted APIs check (`--http-restricted-api=<apis>:<header>=<value>`; gRPC clients send
#: `triton-grpc-protocol-<header>`, Triton docs customization_guide/inference_protocols.md "Limit Endpoint Access
#: (BETA)", v2.62.0). The proxy sets it on requests it has authenticated.
TRITON_RESTRICTED_HEADER = "api-key"

#: UID/GID for images without a documented user: above 10000, so it never collides with a node's users.
DEFAULT_NON_ROOT_UID = 10001
#: Writable directories every container gets (node-local emptyDirs; the root filesystem is read-only): HOME with its
#: caches (Hugging Face, vLLM, torch compile and Triton kernel caches live under it) and /tmp.
HOME_DIR = "/home/serving"
TMP_DIR = "/tmp"
#: Size cap of each writable directory, GiB (compile and kernel caches; weights live in their own volume).
WRITABLE_DIR_GIB = 4
#: vLLM usage statistics go to stats.vllm.ai unless disabled (vllm/usage/usage_lib.py: `VLLM_NO_USAGE_STATS`,
#: `DO_NOT_TRACK`; read in vllm/envs.py:753-757 at v0.24.0); the serving pods have no business on the internet after
#: their weights are fetched.
VLLM_PRIVACY_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}

# --- Edge clusters (blueprints/plan/owned_nodes.py, components/edge_weights.py) --------------------------------------------------
#: Effective FP32 GFLOP/s per vCPU of ONNX Runtime on an edge cluster's owned nodes when `hardware.edge_nodes`
#: gives none: the catalog's current-generation figures (c7i 60 for x86_64, c7g 40 for arm64). [assumption] owned
#: edge hardware is often older or smaller; measure and set hardware.edge_nodes.gflops_per_vcpu.
EDGE_CPU_GFLOPS_PER_VCPU = {"x86_64": 60.0, "arm64": 40.0}
#: The IAM Roles Anywhere credential helper, run in `serve` mode as a native sidecar of the serving pods on an edge
#: cluster: it signs CreateSession with the pod's certificate and serves the credentials on an IMDSv2-compatible
#: endpoint at 127.0.0.1 (aws_signing_helper/serve.go: LocalHostAddress, DefaultPort 9911; the `serve` command takes
#: the same flags as `credential-process`: --certificate, --private-key, --trust-anchor-arn, --profile-arn, --role-arn,
#: --session-duration, --region; cmd/credentials.go, cmd/serve.go). The official image (multi-arch, distroless) has
#: no shell to copy the binary into the AWS CLI image, and its AL2023-built binary needs a newer glibc than that
#: image's Amazon Linux 2, so the CLI reads it as an IMDS endpoint (AWS_EC2_METADATA_SERVICE_ENDPOINT) instead of a
#: `credential_process`.
CREDENTIAL_HELPER_IMAGE = "public.ecr.aws/rolesanywhere/credential-helper:1.8.1-2026.04.09.16.01"
#: The IAM Roles Anywhere credential helper's requests (= limits), a native sidecar of edge pods with s3:// sources.
#: [assumption] it signs one session per `session_duration_s` and serves a loopback endpoint.
CREDENTIAL_HELPER_RESOURCES = {"cpu": "50m", "memory": "64Mi"}
CREDENTIAL_HELPER_PORT = 9911
#: Kubernetes version from which a restartable init container (`restartPolicy: Always`, a native sidecar) runs
#: beside the later init containers: SidecarContainers beta and on by default in 1.29 (kubernetes.io/docs/concepts/
#: workloads/pods/sidecar-containers).
NATIVE_SIDECAR_MIN_KUBERNETES = "1.29"
#: The download step of `https://` weights on an edge cluster: the curl project's official image (Alpine: `sh`,
#: `sha256sum`), built for amd64 and arm64 (blueprints/catalog/images.yaml).
CURL_IMAGE = "curlimages/curl:8.21.0"
#: Node provisioning on an edge cluster: its nodes exist, nothing is launched.
EDGE_NODE_PROVISIONING_S = 0

# --- NetworkPolicy (components/network_policy.py) -----------------------------------------------------------------
#: EKS Pod Identity agent on every node: `169.254.170.23` port 80 (EKS user guide, pod-id-how-it-works: "the agent
#: ... listens on 169.254.170.23 (IPv4) port 80"); the SDKs fetch credentials from it.
POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
POD_IDENTITY_AGENT_PORT = 80
#: Private address space (RFC 1918): serving pods reach AWS's public endpoints (S3, STS) on 443 but no other private
#: address than their VPC's interface endpoints.
PRIVATE_CIDRS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
#: CoreDNS: `k8s-app: kube-dns` pods in kube-system (EKS CoreDNS add-on labels), port 53 UDP and TCP.
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
