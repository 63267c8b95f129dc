"""WeightsSync: one-off Kubernetes Jobs that copy each model's weights from its source into the stack's model store.

- `hf://org/name`: the Job downloads from Hugging Face (token from the Pulumi secret `servingblueprints:hfToken`, put
  in a Kubernetes Secret, never in plain config) into a node-local scratch volume, then `aws s3 sync`s it to
  `s3://<bucket>/models/<name>/`.
- `s3://bucket/prefix/`: the Job runs `aws s3 sync` from the source prefix to the store (S3 server-side copies).

The Jobs run with their own ServiceAccount's identity (read of the sources, write of the models' prefixes only; never
static keys), on CPU/system nodes: they need no GPU, so they neither tolerate the GPU taint nor occupy a GPU node.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from blueprints.core import defaults
from blueprints.catalog import load_catalog
from blueprints.catalog.startup import load_startup_catalog
from blueprints.contracts.consistency import model_architecture
from blueprints.contracts.lora import adapter_gib
from blueprints.contracts.weights import HF_EXCLUDE_PATTERNS, HF_INCLUDE_PATTERNS, sync_job_ephemeral_gib
from blueprints.contracts.sections import Archetype, ServedModel
from blueprints.contracts.blueprint import Blueprint
from components.labels import recommended_labels, selector_labels, sync_account_name
from components.options import child_options
from components.hardening import hardened_pod_spec
from components.network_policy import sync_job_policy
from components.weights_delivery import (
    fetch_memory_gib,
    gi,
    region_env,
)
from components.weights_storage import MODELS_PREFIX

HF_SCHEME = "hf://"
S3_SCHEME = "s3://"
SCRATCH_MOUNT = "/scratch"
HF_TOKEN_KEY = "HF_TOKEN"
#: Sizes hf_xet's chunk cache, bytes (huggingface_hub docs package_reference/environment_variables.md L95-99).
HF_XET_CACHE_ENV = "HF_XET_CHUNK_CACHE_SIZE_BYTES"
#: Assumed sustained Hugging Face download rate for the Job's deadline, GiB/s. [assumption] conservative.
HF_DOWNLOAD_GIB_PER_S = 0.05


def hf_download_command(repo: str, local_dir: str) -> list[str]:
    """The download step's argv: `hf download <repo> --local-dir <dir>`, then one `--include PATTERN` per
    `HF_INCLUDE_PATTERNS` entry and one `--exclude PATTERN` per `HF_EXCLUDE_PATTERNS` entry.

    One value per flag: in huggingface_hub 1.x `hf download` is a Typer command whose `--include`/`--exclude` take
    one value each (huggingface_hub 1.21.0 cli/download.py L79-90, `list[str]` options); `--include a b c` makes
    `b c` positional file names, the CLI then ignores the patterns ("Ignoring `--include` since filenames have been
    explicitly set", L186-189) and fetches no `*.safetensors`. The version the image carries:
    blueprints/catalog/processes.yaml `tools`.
    """
    return ["hf", "download", repo, "--local-dir", local_dir,
            *(arg for pattern in HF_INCLUDE_PATTERNS for arg in ("--include", pattern)),
            *(arg for pattern in HF_EXCLUDE_PATTERNS for arg in ("--exclude", pattern))]


@dataclass(frozen=True)
class AdapterSource:
    """A LoRA adapter (`engine.lora.adapters`) as a sync Job copies it: from `source_uri` into `models/<name>/` of the
    store, beside the models (adapter names are unique and never a model's), sized by
    `blueprints.contracts.lora.adapter_gib`."""

    name: str
    source_uri: str
    weights_gib: float
    source_kms_key_arn: str | None = None


#: What a sync Job copies: a served model's weights or a LoRA adapter.
SyncSource = ServedModel | AdapterSource


def adapter_sources(bp: Blueprint) -> list[AdapterSource]:
    """The blueprint's LoRA adapters as sync sources (none without `engine.lora`)."""
    lora = getattr(bp.engine, "lora", None)
    if lora is None:
        return []
    arch = model_architecture(bp.model.catalog_id, bp.model.architecture, load_catalog())
    return [AdapterSource(a.name, a.source_uri, adapter_gib(arch, a.rank)) for a in lora.adapters]  # type: ignore[arg-type]


def hf_models(bp: Blueprint) -> list[SyncSource]:
    """The blueprint's models and adapters whose files come from the Hugging Face Hub (`hf://org/name`)."""
    return [m for m in synced_models(bp) if m.source_uri.startswith(HF_SCHEME)]


#: Archetypes whose server reads a Triton model repository: weights go into version folder `1/` of the model.
_TRITON_REPOSITORY_ARCHETYPES = (Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU)


def store_prefix(bp: Blueprint, model: SyncSource) -> str:
    """Where a model's weights land in the store: `models/<name>/`, or `models/<name>/1/` (Triton's version folder,
    beside the generated `config.pbtxt`) for Triton-repository archetypes. A source prefix holds one model version."""
    base = f"{MODELS_PREFIX}/{model.name}/"
    return f"{base}1/" if bp.archetype in _TRITON_REPOSITORY_ARCHETYPES else base


def synced_models(bp: Blueprint) -> list[SyncSource]:
    """What Jobs copy into the model store: every model with an `hf://` or `s3://` source, then every LoRA adapter."""
    return [*(m for m in bp.models if m.source_uri.startswith((HF_SCHEME, S3_SCHEME))), *adapter_sources(bp)]


def source_read_statements(models: list[SyncSource]) -> list[dict]:
    """IAM statements reading exactly the `s3://` source prefixes of `models` (none for `hf://` sources), and
    kms:Decrypt on each declared source key (`source_kms_key_arn`), only through S3 (`kms:ViaService`: S3 decrypts a
    KMS-encrypted object for a reader that may use its key; AWS KMS Developer Guide, "kms:ViaService")."""
    statements = []
    for i, m in enumerate(m for m in models if m.source_uri.startswith(S3_SCHEME)):
        bucket, _, prefix = m.source_uri.removeprefix(S3_SCHEME).partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        statements += [
            {"Sid": f"ReadSource{i}", "Effect": "Allow", "Action": ["s3:GetObject"],
             "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*"]},
            {"Sid": f"ListSource{i}", "Effect": "Allow", "Action": ["s3:ListBucket"],
             "Resource": [f"arn:aws:s3:::{bucket}"], "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
        ]
        if m.source_kms_key_arn:
            key_region = m.source_kms_key_arn.split(":")[3]
            statements.append({"Sid": f"DecryptSource{i}", "Effect": "Allow", "Action": ["kms:Decrypt"],
                               "Resource": [m.source_kms_key_arn],
                               "Condition": {"StringEquals": {"kms:ViaService": f"s3.{key_region}.amazonaws.com"}}})
    return statements


def sync_policy_json(write_policy_json: pulumi.Input[str], models: list[SyncSource]) -> pulumi.Output[str]:
    """The sync Jobs' IAM policy: the store's write policy plus reads of the `s3://` sources."""
    def merge(text: str) -> str:
        doc = json.loads(text)
        doc["Statement"] += source_read_statements(models)
        return json.dumps(doc, sort_keys=True)
    return pulumi.Output.from_input(write_policy_json).apply(merge)


def sync_deadline_s(model: SyncSource) -> int:
    """Seconds the Job may run: download at `HF_DOWNLOAD_GIB_PER_S` and upload at the startup model's S3 copy rate
    (`blueprints/catalog/startup.yaml` weights.s3_copy_gib_per_s), x2."""
    download = model.weights_gib / HF_DOWNLOAD_GIB_PER_S if model.source_uri.startswith(HF_SCHEME) else 0
    once = download + model.weights_gib / load_startup_catalog().weights.s3_copy_gib_per_s
    return max(1800, math.ceil(2 * once))


@dataclass
class WeightsSyncArgs:
    """Inputs of `WeightsSync`.

    Args:
        blueprint: the planned stack; one Job per `hf://` or `s3://` model and per LoRA adapter.
        bucket_name: the model store bucket.
        namespace: where the Job runs. Defaults to the blueprint's namespace.
        hf_token: Hugging Face token (a Pulumi secret). Defaults to none: public models only.
        node_selector: where the Job runs: the platform's system nodes (`servingblueprints.io/pool: system`, which
            have the scratch disk for the largest download); None on an existing cluster whose node labels we don't
            know.
    """

    blueprint: Blueprint
    bucket_name: pulumi.Input[str]
    namespace: pulumi.Input[str] | None = None
    hf_token: pulumi.Input[str] | None = None
    node_selector: dict[str, str] | None = None


class WeightsSync(pulumi.ComponentResource):
    """Source -> model store copy Jobs (one per model and per LoRA adapter), their ServiceAccount and (hf://) the HF token Secret.

    Outputs: `service_account_name`, `job_names`.
    """

    def __init__(self, name: str, args: WeightsSyncArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:WeightsSync", name, None, opts)
        bp = args.blueprint
        models = synced_models(bp)
        if not models:
            raise ValueError(f"WeightsSync: no model of {bp.stack} has an {HF_SCHEME} or {S3_SCHEME} source")
        namespace = args.namespace or bp.platform.namespace
        labels = recommended_labels(name="weights-sync", instance=bp.stack, component="weights-sync")
        child = child_options(self, opts)
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa", metadata={"name": sync_account_name(bp.service), "namespace": namespace, "labels": labels},
            automount_service_account_token=False, opts=child)
        # Egress: DNS, the Pod Identity agent and HTTPS anywhere (Hugging Face, S3); no ingress.
        self.network_policy = sync_job_policy(f"{name}-network-policy", bp, namespace=namespace,
                                              selector=selector_labels(labels), opts=child)
        self.token_secret = None
        if args.hf_token is not None and hf_models(bp):
            self.token_secret = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata={"name": f"{bp.service}-hf-token", "namespace": namespace, "labels": labels},
                type="Opaque", string_data={HF_TOKEN_KEY: pulumi.Output.secret(args.hf_token)}, opts=child)
        self.jobs = []
        for model in models:
            deadline = sync_deadline_s(model)
            self.jobs.append(k8s.batch.v1.Job(
                f"{name}-{model.name}",
                metadata={"name": f"{bp.service}-sync-{model.name}"[:63].rstrip("-"), "namespace": namespace,
                          "labels": labels},
                spec=self._job_spec(bp, model, args, labels, deadline),
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{deadline + 600}s", update=f"{deadline + 600}s")))))
        self.service_account_name = self.service_account.metadata.name
        self.job_names = pulumi.Output.all(*[j.metadata.name for j in self.jobs])
        self.register_outputs({"service_account_name": self.service_account_name, "job_names": self.job_names})

    def _job_spec(self, bp: Blueprint, model: SyncSource, args: WeightsSyncArgs, labels: dict[str, str],
                  deadline_s: int) -> dict:
        destination = pulumi.Output.concat("s3://", args.bucket_name, "/", store_prefix(bp, model))
        memory = gi(fetch_memory_gib([model]) + 1)
        if model.source_uri.startswith(HF_SCHEME):
            pod_spec = self._hf_pod(bp, model, destination, memory)
        else:  # s3 -> s3: server-side copies, no local disk
            disk = gi(sync_job_ephemeral_gib(model.weights_gib, from_hugging_face=False))
            resources = {"requests": {"cpu": "1", "memory": memory, "ephemeral-storage": disk},
                         "limits": {"cpu": "2", "memory": memory, "ephemeral-storage": disk}}
            pod_spec = {"containers": [{
                "name": "copy",
                "image": defaults.AWS_CLI_IMAGE,
                "command": ["aws", "s3", "sync"],
                "args": [model.source_uri, destination, "--no-progress", "--only-show-errors"],
                "env": region_env(bp.region),
                "resources": resources,
            }]}
        pod_spec = hardened_pod_spec({"serviceAccountName": self.service_account.metadata.name,
                                      "restartPolicy": "OnFailure", **pod_spec})
        if args.node_selector:
            pod_spec["nodeSelector"] = dict(args.node_selector)
        return {"backoffLimit": 4, "activeDeadlineSeconds": deadline_s,
                "template": {"metadata": {"labels": labels}, "spec": pod_spec}}

    def _hf_pod(self, bp: Blueprint, model: SyncSource, destination: pulumi.Output[str], memory: str) -> dict:
        repo = model.source_uri.removeprefix(HF_SCHEME).strip("/")
        local = f"{SCRATCH_MOUNT}/{model.name}"
        storage = gi(sync_job_ephemeral_gib(model.weights_gib, from_hugging_face=True))
        resources = {"requests": {"cpu": "1", "memory": memory, "ephemeral-storage": storage},
                     "limits": {"cpu": "2", "memory": memory, "ephemeral-storage": storage}}
        download_env = [{"name": "HF_HOME", "value": f"{SCRATCH_MOUNT}/.hf-home"},
                        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
                        # hf_xet's chunk cache (10 GB by default before hf_xet 1.2, blueprints/catalog/processes.yaml)
                        # would share the scratch volume sized for the weights; a one-off download reuses nothing.
                        {"name": HF_XET_CACHE_ENV, "value": "0"},
                        # The CLI asks PyPI for a newer huggingface_hub on every start unless this is set
                        # (huggingface_hub 1.21.0 cli/hf.py main -> _cli_utils.py check_cli_update L995-997).
                        {"name": "HF_HUB_DISABLE_UPDATE_CHECK", "value": "1"}]
        if self.token_secret is not None:
            download_env.append({"name": HF_TOKEN_KEY, "valueFrom": {"secretKeyRef": {
                "name": self.token_secret.metadata.name, "key": HF_TOKEN_KEY}}})
        return {
            "initContainers": [{
                "name": "download",
                "image": defaults.HF_DOWNLOAD_IMAGE,
                # Only what vLLM loads (safetensors, configs, tokenizer): never Meta's `original/*.pth` copy.
                "command": hf_download_command(repo, local),
                "env": download_env,
                "resources": resources,
                "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH_MOUNT}],
            }],
            "containers": [{
                "name": "upload",
                "image": defaults.AWS_CLI_IMAGE,
                "command": ["aws", "s3", "sync"],
                "args": [local, destination, "--exclude", ".cache/*", "--no-progress", "--only-show-errors"],
                "env": region_env(bp.region),
                "resources": resources,
                "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH_MOUNT}],
            }],
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": storage}}],
        }
