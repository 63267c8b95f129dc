"""Weights delivery to pods: the S3 -> local-disk init container, its volume, and the sizes both follow the model.

Every replica copies its model from the stack's model store with the pod's own IAM identity (EKS Pod Identity or
IRSA; never static keys) into a node-local `emptyDir`: no ReadWriteOnce volume is shared between replicas, so a
second replica and a rolling update never wait on a volume attachment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pulumi

from blueprints.core import defaults
from blueprints.contracts import weights
from blueprints.contracts.placement import copy_resources, gib_quantity
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Archetype, ServedModel
from blueprints.requirements.model import MODEL_FILE
from blueprints.contracts.weights import MODELS_MOUNT
from components.weights_storage import MODELS_PREFIX


#: A Kubernetes quantity in whole GiB, rounded up: 14.96 -> `15Gi` (`blueprints.contracts.placement.gib_quantity`).
gi = gib_quantity


def weights_volume_gib(models: list[ServedModel]) -> float:
    """Local disk for the models' weights (`blueprints.contracts.weights.weights_volume_gib`), GiB."""
    return weights.weights_volume_gib(m.weights_gib for m in models)


def fetch_memory_gib(models: list[ServedModel]) -> float:
    """Memory of the copy step (`blueprints.contracts.weights.fetch_memory_gib`), GiB."""
    return weights.fetch_memory_gib(m.weights_gib for m in models)


def region_env(region: str) -> list[dict[str, str]]:
    """Explicit region for every AWS SDK/CLI in the pod: a bucket in another region fails without it."""
    return [{"name": "AWS_REGION", "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region}]


def models_volume(models: list[ServedModel]) -> dict:
    """The node-local `emptyDir` the weights are copied into, capped at the models' size."""
    return {"name": "models", "emptyDir": {"sizeLimit": gi(weights_volume_gib(models))}}


#: Where a Hugging Face repository keeps a model's ONNX export (the Hub's layout for ONNX exports: Optimum and
#: transformers.js write `onnx/model.onnx`, external data beside it). [assumption] per repository: the copy below
#: handles both this and a flat prefix.
HF_ONNX_FOLDER = "onnx"
#: After each copy: when the file the Triton backend loads (`$3`, e.g. `model.onnx`) is not in the version folder but
#: in its Hugging Face subfolder, move that subfolder's files up (external data files stay beside the model). A
#: prefix copied whole into `<name>/1/` from a Hugging Face layout otherwise leaves `1/onnx/model.onnx`, which the
#: onnxruntime backend never finds.
REPOSITORY_LAYOUT = (f'if [ -n "$3" ] && [ ! -e "$2/1/$3" ] && [ -e "$2/1/{HF_ONNX_FOLDER}/$3" ]; then '
                     f'mv "$2/1/{HF_ONNX_FOLDER}/"* "$2/1/" || exit 1; fi')


#: The copy of a model whose backend loads one file (`$3`, `loaded_file`) takes only that file, its external data and
#: the model's `config.pbtxt`, from the version folder or its Hugging Face `onnx/` subfolder. Triton's onnxruntime
#: backend (r25.10 src/onnxruntime.cc L403-428, `LoadModel`) opens `<repository>/<version>/<default_model_filename,
#: else model.onnx>` by path (`OnnxLoader::LoadSession(is_path=true)`, L982-983), and ONNX Runtime reads external data
#: files beside it by the names the graph gives: Optimum's `model.onnx_data`, PyTorch's `model.onnx.data`, hence
#: `$3*`. Everything else in the prefix (other ONNX variants such as `model_quantized.onnx`, safetensors, PyTorch or
#: TensorFlow copies of a Hugging Face export) stays in the store. awscli applies filters in order, the last match
#: deciding (`--exclude "*"` first).
LOADED_FILE_FILTERS = ('--exclude "*" --include config.pbtxt --include "1/$3*" '
                       f'--include "1/{HF_ONNX_FOLDER}/$3*"')


def loaded_file(bp: Blueprint, model: ServedModel) -> str:
    """The file a Triton-repository archetype's backend loads from the model's version folder (`MODEL_FILE`), or ""
    when the server reads the whole folder (vLLM, the python backend)."""
    repository = bp.archetype in (Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU)
    return MODEL_FILE.get(model.format, "") if repository else ""


def fetch_weights_container(bp: Blueprint, bucket_name: pulumi.Input[str], models: list[ServedModel]) -> dict:
    """Init container: `aws s3 sync s3://<bucket>/models/<name>/ /models/<name>` for each model, with the pod's role
    (only `config.pbtxt` and the loaded file with its external data when the backend loads one file:
    `LOADED_FILE_FILTERS`), then that file moved into the version folder from a Hugging Face layout
    (`REPOSITORY_LAYOUT`).

    Memory and ephemeral-storage limits are sized from the models (the copied files land in the `models` emptyDir,
    which is charged to the pod's ephemeral storage). Its security context comes with the pod's hardening
    (`components.hardening`).
    """
    script_args: list[pulumi.Input[str]] = []
    for m in models:
        script_args += [pulumi.Output.concat("s3://", bucket_name, f"/{MODELS_PREFIX}/{m.name}/"),
                        f"{MODELS_MOUNT}/{m.name}", loaded_file(bp, m)]
    # One `aws s3 sync` per model, through `sh -c` with positional parameters (no string templating of the values):
    # only the loaded file's (`LOADED_FILE_FILTERS`) when the backend loads one file, else the whole prefix.
    sync = 'aws s3 sync "$1" "$2" --no-progress --only-show-errors'
    loop = (f'while [ "$#" -gt 2 ]; do if [ -n "$3" ]; then {sync} {LOADED_FILE_FILTERS} || exit 1; '
            f'else {sync} || exit 1; fi; {REPOSITORY_LAYOUT}; shift 3; done')
    return s3_copy_container("fetch-weights", bp, loop=loop, args=script_args,
                             requests=copy_resources(m.weights_gib for m in models), volume="models",
                             mount=MODELS_MOUNT)


def s3_copy_container(name: str, bp: Blueprint, *, loop: str, args: list[pulumi.Input[str]],
                      requests: dict[str, str], volume: str, mount: str) -> dict:
    """An init container that copies from the model store with the AWS CLI: `loop` (a `sh -c` script over its
    positional `args`, so no value is templated into the script) with the pod's role and an explicit region,
    `requests` as its requests and limits (CPU limit 2), writing into `volume` at `mount`."""
    return {
        "name": name,
        "image": defaults.AWS_CLI_IMAGE,
        "command": ["/bin/sh", "-c", loop, name],
        "args": args,
        "env": region_env(bp.region),
        "resources": {"requests": requests, "limits": {**requests, "cpu": "2"}},
        "volumeMounts": [{"name": volume, "mountPath": mount}],
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
