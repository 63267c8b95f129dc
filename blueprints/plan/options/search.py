"""The models an option search sizes, and what the LLM and non-generative searches share: peak rates, replica
floors, spot pricing, a service's fixed costs and the instance types hardware and policy allow.

Pure: the same `Requirements` and `Catalog` always give the same answers. The searches themselves are
`blueprints.plan.options.llm` (vllm-gpu, sagemaker-endpoint) and `blueprints.plan.options.nongen` (triton-multi-model,
onnx-cpu, sagemaker-endpoint); why neither finds an option is `blueprints.plan.options.infeasible`. Sizing physics lives in
`blueprints.capacity.sizing` and `blueprints.capacity`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blueprints.core import defaults
from blueprints.catalog import Architecture, Catalog, Gpu, InstanceType, Task
from blueprints.plan.owned_nodes import OwnedNodeShape, owned_node_shape
from blueprints.plan.guardrails import SearchLimits
from blueprints.requirements.service import Requirements
from blueprints.requirements.model import ModelSpec, Traffic, context_tokens
from blueprints.requirements.hosting import Accelerator, Platform
from blueprints.capacity.physics import Correction, step_source_kind
from blueprints.capacity.uncertainty import Band, band_for, from_residuals, margin
from blueprints.capacity.sizing import weights_gib
from blueprints.contracts.calibration_file import Calibration, Calibrations


@dataclass(frozen=True)
class ResolvedModel:
    """A requirements model entry joined with its catalog record; `path` is where it is in the file (`model`, or
    `models[1] (reranker)`), for messages; `calibrations` the project's (`stacks/calibration/`), which correct the
    capacity model of a replica they match (`calibration`)."""

    spec: ModelSpec
    traffic: Traffic
    architecture: Architecture
    task: Task
    max_context_tokens: int
    catalog_gflops_per_request: float | None = None
    catalog_decoder_params_b: float | None = None
    path: str = "model"
    calibrations: Calibrations = field(default_factory=Calibrations, compare=False)

    @property
    def weights_gib(self) -> float:
        return weights_gib(self.architecture, self.spec.precision)

    def calibration(self, gpu: str, tensor_parallel_size: int, *, managed: bool) -> Calibration | None:
        """The calibration of this catalog model on `gpu` (catalog id) at `tensor_parallel_size` with the pinned vLLM
        image and the model's precision; none on SageMaker (another engine) or for a model outside the catalog."""
        if managed or not self.spec.id:
            return None
        return self.calibrations.find(model=self.spec.id, gpu=gpu, engine_image=defaults.VLLM_IMAGE,
                                      tensor_parallel_size=tensor_parallel_size, precision=self.spec.precision)

    def correction(self, gpu: Gpu, tensor_parallel_size: int, *, managed: bool, production: bool,
                   kv_cache_fp8: bool = False, engine: str = "vllm") -> Correction:
        """The capacity model's correction for that replica: its calibration (`calibration`: measured on the pinned
        vLLM, so for vLLM replicas only); without one, in a production environment, the margin that sizes at the
        pessimistic edge of the model's cross-validated band (`blueprints.capacity.uncertainty.margin`); else the
        identity."""
        found = self.calibration(gpu.name, tensor_parallel_size, managed=managed) if engine == "vllm" else None
        if found:
            return Correction(found.file.step_time, found.file.ttft_floor)
        if production:
            return margin(self.band(gpu, tensor_parallel_size, managed=managed, kv_cache_fp8=kv_cache_fp8,
                                    engine=engine))
        return Correction()

    def band(self, gpu: Gpu, tensor_parallel_size: int, *, managed: bool, kv_cache_fp8: bool = False,
             engine: str = "vllm") -> Band:
        """How far this replica's predictions may be off: its calibration's residual (vLLM), else the
        cross-validated band of the step source that times it (`blueprints.capacity.uncertainty`)."""
        found = self.calibration(gpu.name, tensor_parallel_size, managed=managed) if engine == "vllm" else None
        if found:
            rows = {f: [abs(r.after / r.measured - 1) for r in found.file.figures if r.figure == f]
                    for f in ("median_ttft_ms", "median_itl_ms", "output_tokens_per_s")}
            return from_residuals(rows["median_ttft_ms"], rows["median_itl_ms"], rows["output_tokens_per_s"],
                                  source=f"calibration {found.path}: the residual |error| after its fit")
        kind = step_source_kind(self.architecture, gpu, precision=self.spec.precision,
                                quantization=self.spec.quantization_method,
                                tensor_parallel_size=tensor_parallel_size, kv_cache_fp8=kv_cache_fp8, engine=engine)
        return band_for(kind, engine)


def resolve_models(req: Requirements, catalog: Catalog) -> list[ResolvedModel]:
    """Join each requested model with the catalog. `Requirements` has already checked each against the catalog (ids,
    context limits, the requests a context holds: `blueprints.requirements.rules`)."""
    out = []
    for index, (spec, traffic) in enumerate(req.served_models()):
        record = catalog.model(spec.id) if spec.id else None
        arch = spec.architecture or record.architecture  # type: ignore[union-attr]
        task = spec.task or record.task  # type: ignore[union-attr]
        wanted, _ = context_tokens(spec)
        from_catalog = record is not None and spec.architecture is None
        out.append(ResolvedModel(spec, traffic, arch, task, wanted,
                                 record.gflops_per_request if from_catalog else None,  # type: ignore[union-attr]
                                 record.decoder_params_b if from_catalog else None,  # type: ignore[union-attr]
                                 path=req.model_path(index)))
    return out


# --- shared helpers ------------------------------------------------------------------------------------------------


def peak_rps(req: Requirements, env: str, model: ResolvedModel) -> float:
    """This environment's peak request rate for `model`, requests/s."""
    return model.traffic.peak_requests_per_s * req.environments[env].traffic_scale


def replicas_floor(req: Requirements, env: str) -> int:
    """Fewest replicas an environment runs: its min_replicas (at least 1), 2 in production at >= 99.9 %, else 1."""
    spec = req.environments[env]
    if spec.min_replicas is not None:
        return max(1, spec.min_replicas)
    if req.is_production(env) and req.slo.availability_pct >= defaults.HIGH_AVAILABILITY_PCT:
        return defaults.MIN_REPLICAS_FOR_HIGH_AVAILABILITY
    return 1


def strict_zone_spread(req: Requirements, env: str) -> bool:
    """Whether the environment's replicas must spread over zones (DoNotSchedule with minDomains): high availability
    in production, as `Blueprint.strict_zone_spread` records it."""
    return req.is_production(env) and req.slo.availability_pct >= defaults.HIGH_AVAILABILITY_PCT


def price_factor(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> float:
    """On-demand = 1; spot (never on SageMaker real-time endpoints) = the catalog's estimated spot factor."""
    return catalog.spot_price_factor if req.environments[env].spot and not managed else 1.0


def fixed_cost_items(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> list[tuple[str, float, float]]:
    """What a service stack pays besides its serving nodes, as (item, quantity, USD/hour per unit): the load balancer
    of a Kubernetes archetype on a shared EKS platform, and its model store's customer-managed KMS key. The cluster,
    its system nodes, NAT gateways and VPC endpoints belong to the shared platform stack, whose cost the plan reports
    beside (`blueprints.plan.platforms`). Usage-based charges (data processed, LCUs, requests, S3 storage) are not
    included."""
    items: list[tuple[str, float, float]] = []
    if not managed and req.operations.platform is Platform.EKS:  # an existing cluster provisions its own
        items.append(("network load balancer", 1, catalog.network_load_balancer_usd_per_hour))
    if req.compliance.customer_managed_kms:
        items.append(("KMS key (model store, customer-managed)", 1,
                      catalog.kms_key_usd_per_month / catalog.hours_per_month))
    return items


def service_fixed_monthly_usd(req: Requirements, env: str, catalog: Catalog, *, managed: bool) -> float:
    """Monthly sum of `fixed_cost_items`: what the service costs before its first serving node."""
    return sum(qty * usd for _, qty, usd in fixed_cost_items(req, env, catalog, managed=managed)) \
        * catalog.hours_per_month


def _families_ok(req: Requirements, inst: InstanceType) -> bool:
    families = set(req.hardware.allowed_instance_families)
    return not families or inst.family in families


def edge_nodes(req: Requirements, catalog: Catalog) -> OwnedNodeShape | None:
    """The edge cluster's owned node shape (`blueprints.plan.owned_nodes`), or None off an edge cluster."""
    nodes = req.hardware.edge_nodes
    if req.operations.platform is not Platform.EDGE_CLUSTER or nodes is None:
        return None
    return owned_node_shape(nodes, hours_per_month=catalog.hours_per_month)


def gflops_per_vcpu(inst: InstanceType, catalog: Catalog) -> float:
    """Effective FP32 GFLOP/s per vCPU: the edge nodes' own figure, else the catalog's for the instance family."""
    return inst.gflops_per_vcpu if isinstance(inst, OwnedNodeShape) else catalog.cpu_gflops(inst)


def gpu_instances(req: Requirements, catalog: Catalog, *, managed: bool,
                  limits: SearchLimits = SearchLimits()) -> list[InstanceType]:
    """GPU instance types allowed by hardware.accelerators, allowed_instance_families and the environment's policy
    (`limits`; SageMaker's types if managed); none on an edge cluster (its owned nodes are CPU nodes)."""
    if Accelerator.NVIDIA_GPU not in req.hardware.accelerators or edge_nodes(req, catalog) is not None:
        return []
    table = catalog.sagemaker if managed else catalog.ec2
    return [i for i in table.values() if i.gpu_count and _families_ok(req, i) and limits.allows(i)]


def cpu_instances(req: Requirements, catalog: Catalog, *, limits: SearchLimits = SearchLimits()) -> list[InstanceType]:
    """CPU-only EC2 types allowed by accelerators, families, cpu_arch and the environment's policy (none if `cpu` is
    not an accelerator); on an edge cluster, its owned node shape (no instance type to allow)."""
    if Accelerator.CPU not in req.hardware.accelerators:
        return []
    owned = edge_nodes(req, catalog)
    if owned is not None:
        return [owned]
    arch = req.hardware.cpu_arch
    return [i for i in catalog.ec2.values() if not i.gpu_count and _families_ok(req, i) and limits.allows(i)
            and (arch is None or i.cpu_arch == arch.value)]
