"""Stable plans: re-planning over an existing stack config keeps its hardware while it stays feasible and within a
tolerance of the cheapest option (`defaults.SWITCH_THRESHOLD_PCT`, `blueprint plan --switch-threshold`).

A change of instance type, tensor parallel degree or KV-cache dtype replaces the node pool and rolls every replica
through a cold start; a forecast that moves by a few percent should not do that for a saving smaller than its own
error. The plan stays a pure function of (requirements, existing stack config, catalog, date): the existing
hardware is an input (`hardware_of` reads it from the stack config's blueprint), and the rationale says what was kept
or why it switched.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from blueprints.contracts.sections import Archetype


@dataclass(frozen=True)
class Hardware:
    """The hardware of a service environment the planner keeps when it can.

    Attributes:
        archetype: the archetype it runs (hardware is kept only within the same archetype).
        instance_type: EC2 or SageMaker (`ml.`) instance type.
        tensor_parallel_size: GPUs per replica of an LLM (vLLM's --tensor-parallel-size, SageMaker's degree).
        kv_cache_dtype: vLLM's --kv-cache-dtype (`auto` or `fp8`).
        cpu_per_replica: vCPUs per replica of a CPU replica shape.
        engine: the self-hosted LLM's serving engine (engines.yaml name: vllm, sglang, tensorrt-llm).
    """

    archetype: Archetype
    instance_type: str
    tensor_parallel_size: int | None = None
    kv_cache_dtype: str | None = None
    cpu_per_replica: float | None = None
    engine: str | None = None

    def describe(self) -> str:
        """e.g. `p5.48xlarge (tensor_parallel_size=2, FP8 KV cache)`."""
        parts = [] if self.engine in (None, "vllm") else [self.engine]
        if self.tensor_parallel_size is not None:
            parts.append(f"tensor_parallel_size={self.tensor_parallel_size}")
        if self.kv_cache_dtype == "fp8":
            parts.append("FP8 KV cache")
        if self.cpu_per_replica is not None:
            parts.append(f"{self.cpu_per_replica:g} vCPU per replica")
        return self.instance_type + (f" ({', '.join(parts)})" if parts else "")


class _Recorded(BaseModel):
    """The few fields of a recorded blueprint that say its hardware (everything else is the plan's to rewrite)."""

    model_config = ConfigDict(extra="ignore")

    class _Compute(BaseModel):
        model_config = ConfigDict(extra="ignore")
        instance_type: str = Field(min_length=1, max_length=40)
        gpus_per_replica: int = Field(ge=0)
        cpu_per_replica: float = Field(gt=0)

    class _Engine(BaseModel):
        model_config = ConfigDict(extra="ignore")
        kind: str | None = None
        tensor_parallel_size: int | None = Field(default=None, ge=1)
        tensor_parallel_degree: int | None = Field(default=None, ge=1)
        kv_cache_dtype: str | None = None

    archetype: Archetype
    compute: _Compute
    engine: _Engine


def hardware_of(blueprint: object) -> Hardware | None:
    """The hardware an existing stack config's `servingblueprints:blueprint` value records, or None when it records
    none the planner can read (then the plan starts afresh and says so)."""
    try:
        rec = _Recorded.model_validate(blueprint)
    except ValidationError:
        return None
    llm = rec.archetype is Archetype.VLLM_GPU or (rec.archetype is Archetype.SAGEMAKER_ENDPOINT
                                                   and rec.engine.tensor_parallel_degree is not None)
    tp = rec.engine.tensor_parallel_size or rec.engine.tensor_parallel_degree
    return Hardware(archetype=rec.archetype, instance_type=rec.compute.instance_type,
                    tensor_parallel_size=tp if llm else None,
                    kv_cache_dtype=(rec.engine.kv_cache_dtype or "auto") if rec.archetype is Archetype.VLLM_GPU
                    else None,
                    cpu_per_replica=rec.compute.cpu_per_replica if not llm and not rec.compute.gpus_per_replica
                    else None,
                    engine=rec.engine.kind if rec.archetype is Archetype.VLLM_GPU else None)


def decide(previous: Hardware, cheapest: Hardware, *, cheapest_usd: float, previous_usd: float | None,
           unavailable: str | None = None, threshold_pct: float) -> tuple[bool, str | None]:
    """Keep the existing stack config's hardware, or switch to the cheapest option's, and the rationale.

    Args:
        previous: the existing stack config's hardware.
        cheapest: the cheapest option's hardware.
        cheapest_usd, previous_usd: each one's peak-provisioned monthly cost of the service (USD); `previous_usd`
            None when `previous` cannot serve now.
        unavailable: why `previous` cannot serve now (no longer allowed, misses the SLO, breaks a constraint).
        threshold_pct: how far above the cheapest the previous hardware may cost and be kept, % (0-100).

    Returns:
        (keep, sentence): keep `previous` or not; the rationale (None when `previous` is the cheapest's hardware).
    """
    if previous == cheapest:
        return False, None
    if unavailable is not None or previous_usd is None:
        return False, (f"switched from {previous.describe()} (the existing stack config) to {cheapest.describe()}: "
                       f"{unavailable or 'it cannot serve now'}; the node pool is replaced")
    above = (previous_usd / cheapest_usd - 1) * 100 if cheapest_usd > 0 else 0.0
    if above <= threshold_pct + 1e-9:
        return True, (f"kept {previous.describe()} from the existing stack config: within {max(above, 0):.1f} % of "
                      f"the cheapest, {cheapest.describe()} (${previous_usd:,.0f} vs ${cheapest_usd:,.0f}/month); "
                      f"--switch-threshold {threshold_pct:g}")
    return False, (f"switched from {previous.describe()} (the existing stack config) to {cheapest.describe()}: "
                   f"the existing hardware would cost {above:.1f} % more (${previous_usd:,.0f} vs ${cheapest_usd:,.0f}"
                   f"/month), beyond --switch-threshold {threshold_pct:g}; the node pool is replaced")
