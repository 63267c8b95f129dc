"""One startup budget: how long a replica takes from an empty node to ready.

Every timer that must outlast a cold start derives from `startup_budget()`: startup probes, the Deployment's
`progressDeadlineSeconds`, autoscaler cooldowns and SageMaker's startup/download timeouts. Defaults and their
sources are in `blueprints.core.defaults` (GPU_NODE_PROVISIONING_S, IMAGE_PULL_S, S3_DOWNLOAD_GIB_PER_S,
MODEL_LOAD_GIB_PER_S, MODEL_WARMUP_S).
"""

from __future__ import annotations

import math

from blueprints.core import defaults
from blueprints.contracts.sections import StartupBudget


def startup_budget(*, weights_gib: float, engine_kind: str, gpu: bool, owned_nodes: bool = False) -> StartupBudget:
    """Cold-start budget of one replica.

    Args:
        weights_gib: total weights the replica downloads and loads, GiB.
        engine_kind: `vllm`, `triton`, `onnxruntime` or `sagemaker` (selects the image pull time).
        gpu: the replica runs on a GPU node (slower node provisioning).
        owned_nodes: an edge cluster's owned nodes: none is launched (`defaults.EDGE_NODE_PROVISIONING_S`).
            Defaults to False.

    Returns:
        A `StartupBudget` in whole seconds: node provisioning, image pull, S3 download at
        `S3_DOWNLOAD_GIB_PER_S`, and load at `MODEL_LOAD_GIB_PER_S` plus `MODEL_WARMUP_S`.
    """
    return StartupBudget(
        node_provisioning_s=(defaults.EDGE_NODE_PROVISIONING_S if owned_nodes else
                             defaults.GPU_NODE_PROVISIONING_S if gpu else defaults.CPU_NODE_PROVISIONING_S),
        image_pull_s=defaults.IMAGE_PULL_S[engine_kind],
        weights_download_s=math.ceil(weights_gib / defaults.S3_DOWNLOAD_GIB_PER_S),
        model_load_s=math.ceil(weights_gib / defaults.MODEL_LOAD_GIB_PER_S) + defaults.MODEL_WARMUP_S,
    )
