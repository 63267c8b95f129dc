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
#: Zones a high-availability workload spreads over at least: the topology spread constraint's `minDomains`
#: (kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints: with minDomains the scheduler
#: treats fewer eligible domains as global minimum 0, so pods go Pending rather than pile into one zone; stable since
#: Kubernetes 1.30; Karpenter provisions for topology spread constraints, [unverified] including minDomains).
MIN_ZONES_FOR_HIGH_AVAILABILITY = 2

#: Extra replicas a rolling update starts before stopping an old one (maxSurge); node pools leave room for them.
SURGE_REPLICAS = 1

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
#: Karpenter EC2NodeClass AMI: the AL2023 alias, which resolves the standard, NVIDIA or Neuron variant per instance
#: type. Pinned to an EKS AMI release so a new AMI reaches nodes through a reviewed change (Karpenter v1.14 docs,
#: nodeclasses.md: "pinned to a specific AMI using the format of that AMI's GitHub release tags ... al2023@v20240703").
#: v20260714: awslabs/amazon-eks-ami release whose CHANGELOG lists amazon-eks-node-al2023-{x86_64,arm64}-{standard,
#: nvidia}-<k8s>-v20260714 for Kubernetes 1.30-1.36 (checked 2026-12 at tag v20260724).
KARPENTER_AMI_ALIAS = "al2023@v20260714"
#: Root EBS volume of Karpenter GPU nodes, GiB: OS only; kubelet, containerd and pod ephemeral storage go on the
#: instance-store NVMe array (instanceStorePolicy RAID0), which every catalogued GPU family has.
GPU_NODE_ROOT_VOLUME_GIB = 100
#: Root EBS volume of Karpenter CPU nodes (no instance store on c7i/c7g/m7i): images plus replicas' ephemeral
#: storage, GiB. [assumption] the CPU archetypes serve models of a few GiB.
CPU_NODE_ROOT_VOLUME_GIB = 100
#: The EKS system node group (CoreDNS, device plugin, KEDA, monitoring agents): type and count, priced from the catalog.
SYSTEM_NODE_INSTANCE_TYPE = "m7i.xlarge"
SYSTEM_NODE_COUNT = 2

# --- Node allocatable (offline scheduling checks, blueprints/deployability.py) ------------------------------------
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
}

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

# --- Components: cluster, network, archetype servers (components/) ------------------------------------------------
#: NVIDIA Kubernetes device plugin, static DaemonSet as published in github.com/NVIDIA/k8s-device-plugin
#: (deployments/static/nvidia-device-plugin.yml); v0.18.0 released 2025-10.
NVIDIA_DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"
#: Image of the one-off Hugging Face download step of the weights sync Job: the pinned vLLM image already ships the
#: `huggingface_hub` CLI (`hf download`), so no unpinned `pip install` happens at run time.
HF_DOWNLOAD_IMAGE = VLLM_IMAGE
#: EKS managed node group AMI types (docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html, amiType).
EKS_AMI_TYPE = {
    ("nvidia-gpu", "x86_64"): "AL2023_x86_64_NVIDIA",
    ("nvidia-gpu", "arm64"): "AL2023_ARM_64_NVIDIA",
    ("cpu", "x86_64"): "AL2023_x86_64_STANDARD",
    ("cpu", "arm64"): "AL2023_ARM_64_STANDARD",
}
#: Root volume of the system node group, GiB, before the weights sync Job's scratch space is added.
SYSTEM_NODE_DISK_GIB = 50
#: Root volume of a workload node besides the replicas' ephemeral storage (OS, images: vLLM ~10 GB compressed), GiB.
WORKLOAD_NODE_BASE_DISK_GIB = 100
#: VPC address space of a new network; subnets are carved out of it per availability zone.
VPC_CIDR = "10.0.0.0/16"
#: Availability zones a new network spans (at least 2 for EKS; 3 when the region has them).
NETWORK_AZ_COUNT = 3
#: AWS services reached through interface VPC endpoints when a stack is private-only (plus an S3 gateway endpoint).
INTERFACE_ENDPOINT_SERVICES = ("ecr.api", "ecr.dkr", "sts", "sagemaker.runtime")
#: NLB listener TCP idle timeout limits, s (docs.aws.amazon.com/elasticloadbalancing/latest/network/
#: update-idle-timeout.html: 60-6000, default 350). Set via the AWS Load Balancer Controller (>= v2.9.0) annotation
#: `service.beta.kubernetes.io/aws-load-balancer-listener-attributes.TCP-<port>`.
NLB_TCP_IDLE_TIMEOUT_MAX_S = 6000
#: Headroom added above the blueprint's longest expected streamed response, s.
LB_IDLE_TIMEOUT_HEADROOM_S = 60
#: CloudWatch log types of the EKS control plane enabled with audit logging (EKS API `ClusterLoggingTypes`).
EKS_CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]

# --- Non-generative models: Triton and ONNX Runtime (see blueprints/sizing.py, encoder_* functions) ------------------
#: Fraction of dense tensor TFLOPS a GPU reaches on encoder/CNN forward passes in Triton (TensorRT/ORT-CUDA backends).
#: [assumption] below LLM prefill's 0.45 (MFU above): short sequences and small GEMMs; within the public 0.3-0.7 range.
ENCODER_MFU = 0.35
#: Per-request server time outside the forward pass (HTTP/gRPC, tokenisation, tensor copies), ms. [assumption]
TRITON_REQUEST_OVERHEAD_MS = 2.0
ONNXRUNTIME_REQUEST_OVERHEAD_MS = 1.0
#: p95 request latency / one forward pass: a request may wait for the batch (or request) in flight, then runs in its
#: own. [assumption] conservative, like TTFT_P95_FACTOR for LLMs.
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
#: SageMakerVariantInvocationsPerInstance target = max requests/s per instance x this x 60 (AWS SageMaker autoscaling
#: docs, "safety factor 0.5", as quoted in sizing-facts.md).
SAGEMAKER_INVOCATIONS_SAFETY_FACTOR = 0.5
#: SageMaker real-time invocation processing limit, s (sizing-facts.md: "60 s processing limit"); a non-streamed
#: response must complete within it.
SAGEMAKER_INVOCATION_TIMEOUT_S = 60
#: SageMaker ContainerStartupHealthCheckTimeoutInSeconds / ModelDataDownloadTimeoutInSeconds bounds, s (API reference:
#: 60-3600), and the multiple of the predicted duration the planner allows. [assumption] 2x for a slow start.
SAGEMAKER_TIMEOUT_RANGE_S = (60, 3600)
SAGEMAKER_TIMEOUT_SAFETY_FACTOR = 2.0
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
#: `ENTRYPOINT ["/usr/local/bin/envoy"]`). Tag seen pinned in public manifests (2026); verify it before the first
#: deploy with `docker manifest inspect`. [unverified] tag
ENVOY_IMAGE = "envoyproxy/envoy:distroless-v1.37.2"
#: Port the proxy listens on inside the pod (plain HTTP/1.1 and h2c; TLS ends at the load balancer).
PROXY_PORT = 8080
#: Load balancer listener ports: 443 with a TLS certificate, 80 without (internal only).
TLS_PORT = 443
PLAIN_PORT = 80
#: Length of the generated per-stack API key (pulumi-random RandomPassword, letters and digits: ~238 bits).
API_KEY_LENGTH = 40
#: The header Triton's restricted APIs check (`--http-restricted-api=<apis>:<header>=<value>`; gRPC clients send
#: `triton-grpc-protocol-<header>`, Triton docs customization_guide/inference_protocols.md "Limit Endpoint Access
#: (BETA)", v2.62.0). The proxy sets it on requests it has authenticated.
TRITON_RESTRICTED_HEADER = "api-key"

#: The user (UID, GID) each pinned image runs as, where its image documents one; images without a user run as
#: `DEFAULT_NON_ROOT_UID` with a writable HOME and cache (an emptyDir), never as root.
#: - Triton 25.10: user `triton-server`, UID/GID 1000 (server v2.62.0 build.py; docs customization_guide/deploy.md
#:   "Run as a Non-Root User"); the image has no USER line, so the pod must set it.
#: - Envoy distroless: distroless `nonroot`, UID/GID 65532 (GoogleContainerTools/distroless base images, "nonroot"
#:   tag). [unverified] UID read from distroless' documentation, not the image
#: - vLLM v0.11.0 and aws-cli 2.31.13: no USER (root by default; vLLM docs: "designed to be run under the root user");
#:   both run as any UID given writable HOME/cache directories.
IMAGE_USERS = {
    "nvcr.io/nvidia/tritonserver": (1000, 1000),
    "envoyproxy/envoy": (65532, 65532),
}
#: UID/GID for images without a documented user: above 10000, so it never collides with a node's users.
DEFAULT_NON_ROOT_UID = 10001
#: Writable directories every container gets (node-local emptyDirs; the root filesystem is read-only): HOME with its
#: caches (Hugging Face, vLLM, torch compile and Triton kernel caches live under it) and /tmp.
HOME_DIR = "/home/serving"
TMP_DIR = "/tmp"
#: Size cap of each writable directory, GiB (compile and kernel caches; weights live in their own volume).
WRITABLE_DIR_GIB = 4
#: vLLM usage statistics go to stats.vllm.ai unless disabled (vllm/usage/usage_lib.py: `VLLM_NO_USAGE_STATS`,
#: `DO_NOT_TRACK`); the serving pods have no business on the internet after their weights are fetched.
VLLM_PRIVACY_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}

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
