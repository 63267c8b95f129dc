"""Named defaults, each with its source. Change one only with a note in the changelog: plans depend on them."""

# --- Capacity model (see blueprints/sizing.py) --------------------------------------------------------------------
#: vLLM --gpu-memory-utilization default in releases up to 0.10 (vllm/engine/arg_utils.py); we keep 0.90 for headroom.
GPU_MEMORY_UTILIZATION = 0.90
#: Per-GPU memory vLLM needs besides weights and KV cache (activations, CUDA graphs, NCCL buffers), GiB.
#: sizing-facts.md: "activations/CUDA-graph overhead (a few GB)".
ACTIVATION_OVERHEAD_GIB_PER_GPU = 2.0
#: Memory-bandwidth utilisation in decode, one GPU at 16-bit. Public runs: 0.7-0.77 (sizing-facts.md);
#: 0.75 reproduces calibration points 1 (A100-40GB, 13.3 ms/token) and 2 (H100, 6.5 ms TPOT) within 5 %.
MBU_SINGLE_GPU_16BIT = 0.75
#: Memory-bandwidth utilisation with tensor parallel >= 2 or 8-bit-or-lower weights. Public runs: 0.5-0.6;
#: 0.55 reproduces calibration point 3 (70B FP8, TP2 H100, ITL 18.6 ms) within 10 %.
MBU_PARALLEL_OR_QUANTISED = 0.55
#: Model FLOPs utilisation of dense tensor TFLOPS in prefill. Public range 0.3-0.7; 0.45 reproduces calibration
#: point 3 (TTFT 407 ms for 5000 input tokens) within 5 %.
MFU = 0.45
#: Paged-attention KV reads reach this fraction of raw memory bandwidth in decode (scattered 16-token blocks).
#: [assumption] fitted with PER_SEQUENCE_STEP_MS to calibration points 1 (A100: 6.6x throughput at concurrency 8)
#: and 2 (H100: 10.9 ms TPOT at concurrency 16).
KV_READ_BANDWIDTH_EFFICIENCY = 0.5
#: Host-side time per running sequence per decode step (scheduling, sampling, detokenisation), ms. Same fit.
PER_SEQUENCE_STEP_MS = 0.24
#: API server, tokenisation and scheduling time added to every TTFT, ms. Fitted to calibration point 2 (14 ms TTFT).
SERVER_OVERHEAD_MS = 5.0
#: vLLM --max-num-seqs default (vllm/engine/arg_utils.py); the planner never plans more per replica.
MAX_NUM_SEQS_CAP = 256
#: Default --max-model-len when the requirements leave it open, tokens (the model's own limit if lower).
DEFAULT_MAX_MODEL_LEN = 8192
#: p95 / modelled value. TTFT p95 includes queueing behind other prefills at the planned utilisation; ITL p95
#: includes chunked-prefill interference. [assumption] conservative factors until fitted to measured p95 data.
TTFT_P95_FACTOR = 1.5
ITL_P95_FACTOR = 1.15
#: Fraction of a replica's saturated request rate the planner loads it to at peak (headroom for bursts).
TARGET_UTILIZATION = {"steady": 0.8, "bursty": 0.65, "spiky": 0.5}
#: Replicas at least, per availability target (topology-spread over zones in production).
MIN_REPLICAS_FOR_HIGH_AVAILABILITY = 2
HIGH_AVAILABILITY_PCT = 99.9

# --- Startup budget (see blueprints/startup.py) -------------------------------------------------------------------
#: EKS managed node group: EC2 launch + bootstrap + NVIDIA device plugin ready, s. [unverified] public reports 3-6 min.
GPU_NODE_PROVISIONING_S = 360
CPU_NODE_PROVISIONING_S = 180
#: Image pull at ~100 MB/s from a registry in-region. [unverified] vLLM's image is ~10 GB compressed.
IMAGE_PULL_S = {"vllm": 150, "triton": 150, "onnxruntime": 30, "sagemaker": 0}
#: Sustained S3 -> node copy rate with `aws s3 sync` (parallel parts), GiB/s. [unverified] conservative for 10-25 Gbps.
S3_DOWNLOAD_GIB_PER_S = 0.25
#: Disk -> GPU load rate and fixed warm-up (CUDA graphs, profiling run), GiB/s and s. [unverified]
MODEL_LOAD_GIB_PER_S = 1.0
MODEL_WARMUP_S = 60

# --- Cluster overhead ------------------------------------------------------------------------------------------
#: The EKS system node group (CoreDNS, device plugin, KEDA, monitoring agents): type and count, priced from the catalog.
SYSTEM_NODE_INSTANCE_TYPE = "m7i.xlarge"
SYSTEM_NODE_COUNT = 2

# --- Deployment defaults ------------------------------------------------------------------------------------------
#: Pinned serving images. Never `latest`: a tag change must be a reviewed diff.
VLLM_IMAGE = "vllm/vllm-openai:v0.11.0"
#: Image for the init container that copies weights from S3 with the pod's IAM role (IRSA): AWS CLI v2.
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.31.13"
#: Kubernetes namespace for serving workloads.
NAMESPACE = "serving"
#: AWS Application/Network Load Balancer idle timeout default, s; streamed generations outlive it.
AWS_LB_DEFAULT_IDLE_TIMEOUT_S = 60
#: /dev/shm per tensor-parallel rank for NCCL, GiB (vLLM docs recommend --shm-size for TP; 64 MB default is too small).
SHM_GIB_PER_TP_RANK = 2.0
