"""What an engine module checks before rendering: the planned settings use only what its catalog entry serves."""

from __future__ import annotations

import pulumi

from blueprints.catalog.engines import EngineFacts
from blueprints.contracts.sections import VllmEngine


def local_weights_only(engine: VllmEngine, facts: EngineFacts, model: pulumi.Input[str] | None) -> None:
    """Refuse what the planner never plans on this engine (engines.yaml `features`): streamed weights (`model`, an
    `s3://` prefix) on an engine that reads only local disk, LoRA adapters on one that serves none here.

    Raises:
        ValueError: naming the engine and the feature (a hand-edited stack config; `blueprint plan` never writes it).
    """
    if model is not None and not facts.features.weights.s3_streaming:
        raise ValueError(f"{facts.display} reads the weights from local disk here (engines.yaml features.weights)")
    if engine.lora is not None and not facts.features.lora.supported:
        raise ValueError(f"LoRA adapters are not planned on {facts.display} (engines.yaml features.lora)")
