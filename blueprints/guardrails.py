"""An environment's guardrails from its policy config, applied while planning so a plan never fails the policy pack
it will be checked against: the instance families it may use (`instance-types-allowed`) and the GPUs a stack may
reach at full scale (`gpu-quota`). Pure: the CLI reads `policies/config/<env>.json` and passes these in."""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints import defaults
from blueprints.blueprint import Archetype, Blueprint, nodes_for
from blueprints.errors import RequirementsError, SizingError
from blueprints.requirements import Requirements


@dataclass(frozen=True)
class Guardrails:
    """Limits of one environment.

    Attributes:
        source: the policy-config file they come from (named in messages).
        allowed_instance_families: families the environment allows; None when the policy is disabled.
        max_gpus: GPUs a stack may reach at full scale (node pool max x GPUs per node); None when disabled.
    """

    source: str
    allowed_instance_families: tuple[str, ...] | None
    max_gpus: int | None

    def restrict(self, req: Requirements, env: str) -> Requirements:
        """`req` with `hardware.allowed_instance_families` narrowed to what the environment allows.

        Raises:
            RequirementsError: the requirements' families and the environment's have nothing in common.
        """
        if self.allowed_instance_families is None:
            return req
        allowed = set(self.allowed_instance_families)
        wanted = req.hardware.allowed_instance_families
        families = sorted(f for f in wanted if f in allowed) if wanted else sorted(allowed)
        if not families:
            raise RequirementsError(
                f"environments.{env}: hardware.allowed_instance_families {wanted} and the environment's policy "
                f"({self.source}, instance-types-allowed) {sorted(allowed)} have no family in common; allow one in "
                "either")
        hardware = req.hardware.model_copy(update={"allowed_instance_families": families})
        return req.model_copy(update={"hardware": hardware})

    def cap(self, bp: Blueprint) -> Blueprint:
        """`bp` with its autoscaling maximum lowered so the GPU node pool stays within `max_gpus`.

        Raises:
            SizingError: even the replicas the peak needs exceed the quota.
        """
        gpus_per_node = bp.compute.gpus_per_node
        if self.max_gpus is None or not gpus_per_node or bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
            return bp
        if bp.node_pool_max_nodes * gpus_per_node <= self.max_gpus:
            return bp
        max_nodes = self.max_gpus // gpus_per_node
        zones = bp.platform.zones or 1
        cap = max_nodes * bp.compute.replicas_per_node - defaults.SURGE_REPLICAS
        while cap > 0 and nodes_for(cap + defaults.SURGE_REPLICAS, bp.compute.replicas_per_node, zones=zones) > max_nodes:
            cap -= 1  # zone spread: replicas per zone round up to whole nodes
        need = max(bp.compute.replicas, bp.autoscaling.min_replicas, 1)
        if cap < need:
            gpus = nodes_for(need + defaults.SURGE_REPLICAS, bp.compute.replicas_per_node, zones=zones) * gpus_per_node
            raise SizingError(
                f"environments.{bp.environment}: the peak needs {need} replica(s) of {bp.compute.instance_type} "
                f"({gpus} GPUs with the rollout surge) but {self.source} (gpu-quota) allows maxGpus={self.max_gpus}; "
                "raise maxGpus, lower traffic_scale, or relax the SLO")
        autoscaling = bp.autoscaling.model_copy(update={"max_replicas": cap})
        reason = (f"autoscaling max capped at {cap} replicas so the GPU node pool stays within maxGpus="
                  f"{self.max_gpus} ({self.source}, gpu-quota)")
        return bp.model_copy(update={"autoscaling": autoscaling, "rationale": [*bp.rationale, reason]})
