"""Weights delivery to pods: the S3 -> local-disk init container, its volume, and the sizes both follow the model.

Every replica copies its model from the stack's model store with the pod's own IAM identity (EKS Pod Identity or
IRSA; never static keys) into a node-local `emptyDir`: no ReadWriteOnce volume is shared between replicas, so a
second replica and a rolling update never wait on a volume attachment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import pulumi

from blueprints.core import defaults
from blueprints.contracts import weights
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import ServedModel
from components.weights_storage import MODELS_PREFIX

MODELS_MOUNT = "/models"


def gi(value: float) -> str:
    """A Kubernetes quantity in whole GiB, rounded up: 14.96 -> `15Gi`."""
    return f"{math.ceil(value)}Gi"


def weights_volume_gib(models: list[ServedModel]) -> float:
    """Local disk for the models' weights (`blueprints.contracts.weights.weights_volume_gib`), GiB."""
    return weights.weights_volume_gib(m.weights_gib for m in models)


def fetch_memory_gib(models: list[ServedModel]) -> float:
    """Memory limit of the copy step: 1 GiB plus 1 GiB per 32 GiB of weights, at most 4 GiB.

    `aws s3 sync` keeps up to 10 concurrent 8 MiB parts per file in memory; dirty page cache of the written files is
    charged to the container's cgroup, so large models get more room before the kernel throttles or OOM-kills.
    """
    return min(4.0, 1 + math.ceil(sum(m.weights_gib for m in models) / 32))


def region_env(region: str) -> list[dict[str, str]]:
    """Explicit region for every AWS SDK/CLI in the pod: a bucket in another region fails without it."""
    return [{"name": "AWS_REGION", "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region}]


def models_volume(models: list[ServedModel]) -> dict:
    """The node-local `emptyDir` the weights are copied into, capped at the models' size."""
    return {"name": "models", "emptyDir": {"sizeLimit": gi(weights_volume_gib(models))}}


def fetch_weights_container(bp: Blueprint, bucket_name: pulumi.Input[str], models: list[ServedModel]) -> dict:
    """Init container: `aws s3 sync s3://<bucket>/models/<name>/ /models/<name>` for each model, with the pod's role.

    Memory and ephemeral-storage limits are sized from the models (the copied files land in the `models` emptyDir,
    which is charged to the pod's ephemeral storage). Its security context comes with the pod's hardening
    (`components.hardening`).
    """
    script_args: list[pulumi.Input[str]] = []
    for m in models:
        script_args += [pulumi.Output.concat("s3://", bucket_name, f"/{MODELS_PREFIX}/{m.name}/"),
                        f"{MODELS_MOUNT}/{m.name}"]
    # One `aws s3 sync` per model, through `sh -c` with positional parameters (no string templating of the values).
    loop = 'while [ "$#" -gt 1 ]; do aws s3 sync "$1" "$2" --no-progress --only-show-errors || exit 1; shift 2; done'
    memory = gi(fetch_memory_gib(models))
    storage = gi(weights_volume_gib(models))
    return {
        "name": "fetch-weights",
        "image": defaults.AWS_CLI_IMAGE,
        "command": ["/bin/sh", "-c", loop, "fetch-weights"],
        "args": script_args,
        "env": region_env(bp.region),
        "resources": {"requests": {"cpu": "1", "memory": memory, "ephemeral-storage": storage},
                      "limits": {"cpu": "2", "memory": memory, "ephemeral-storage": storage}},
        "volumeMounts": [{"name": "models", "mountPath": MODELS_MOUNT}],
    }


class WeightsDelivery(Protocol):
    """How a serving pod gets its models into `MODELS_MOUNT`: its init containers and the volumes they use (the
    `models` emptyDir among them). `StoreDelivery` (the stack's model store, EKS Pod Identity) or
    `components.edge_weights.EdgeDelivery` (an edge cluster's sources, IAM Roles Anywhere or a checksum)."""

    def init_containers(self, bp: Blueprint, models: list[ServedModel]) -> list[dict]: ...

    def volumes(self, bp: Blueprint, models: list[ServedModel]) -> list[dict]: ...


@dataclass
class StoreDelivery:
    """From the stack's model store bucket with the pod's own identity (EKS Pod Identity): one init container."""

    bucket_name: pulumi.Input[str]

    def init_containers(self, bp: Blueprint, models: list[ServedModel]) -> list[dict]:
        return [fetch_weights_container(bp, self.bucket_name, models)]

    def volumes(self, bp: Blueprint, models: list[ServedModel]) -> list[dict]:
        return [models_volume(models)]

    def model_uri(self, model: ServedModel) -> pulumi.Output[str]:
        """`s3://<bucket>/models/<name>`: the store prefix an engine streams from (the form vLLM's docs give,
        docs/models/extensions/runai_model_streamer.md: `vllm serve s3://core-llm/Llama-3-8b`)."""
        return pulumi.Output.concat("s3://", self.bucket_name, f"/{MODELS_PREFIX}/{model.name}")
