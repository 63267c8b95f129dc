"""LoRA adapters on a vLLM pod: the init container that copies them from the stack's model store onto node-local
disk, the volume they land in and its mount in the engine container.

vLLM loads an adapter from a local path only (vllm 0.24.0 lora/utils.py:314-341: an absolute path is used as is;
anything else is taken for a Hugging Face repo id), so the adapters are copied even when the base weights stream
from the store with the Run:ai Model Streamer. The copy runs with the pod's own identity (EKS Pod Identity), as the
weights copy does (`components.weights_delivery`).
"""

from __future__ import annotations

import pulumi

from blueprints.catalog import load_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.consistency import model_architecture
from blueprints.contracts.lora import LORA_MOUNT, ServedAdapter, adapters_volume_gib
from blueprints.contracts.placement import adapters_copy_resources
from components.weights_delivery import s3_copy_container
from components.weights_storage import MODELS_PREFIX

#: The volume the adapters are copied into.
ADAPTERS_VOLUME = "adapters"


def served_adapters(bp: Blueprint) -> list[ServedAdapter]:
    """The adapters `bp`'s vLLM replicas serve (`engine.lora`), none for other engines or without adapters."""
    lora = getattr(bp.engine, "lora", None)
    return list(lora.adapters) if lora is not None else []


def fetch_adapters_container(bp: Blueprint, bucket_name: pulumi.Input[str]) -> dict:
    """Init container: `aws s3 sync s3://<bucket>/models/<adapter>/ /adapters/<adapter>` for each adapter, with the
    pod's role and an explicit region; requests from `blueprints.contracts.placement.adapters_copy_resources`."""
    args: list[pulumi.Input[str]] = []
    for a in served_adapters(bp):
        args += [pulumi.Output.concat("s3://", bucket_name, f"/{MODELS_PREFIX}/{a.name}/"), f"{LORA_MOUNT}/{a.name}"]
    # One `aws s3 sync` per adapter, through `sh -c` with positional parameters (no string templating of the values).
    loop = 'while [ "$#" -gt 1 ]; do aws s3 sync "$1" "$2" --no-progress --only-show-errors || exit 1; shift 2; done'
    return s3_copy_container("fetch-adapters", bp, loop=loop, args=args, requests=adapters_copy_resources(bp) or {},
                             volume=ADAPTERS_VOLUME, mount=LORA_MOUNT)


def adapters_volume(bp: Blueprint) -> dict:
    """The node-local `emptyDir` the adapters are copied into, capped at their size
    (`blueprints.contracts.lora.adapters_volume_gib`)."""
    arch = model_architecture(bp.model.catalog_id, bp.model.architecture, load_catalog())
    return {"name": ADAPTERS_VOLUME, "emptyDir": {"sizeLimit": f"{adapters_volume_gib(arch, bp.engine.lora)}Gi"}}  # type: ignore[union-attr]


def adapters_mount() -> dict:
    """The engine container's read-only mount of the adapters (`--lora-modules name=/adapters/name`)."""
    return {"name": ADAPTERS_VOLUME, "mountPath": LORA_MOUNT, "readOnly": True}
