"""Blueprints of every archetype for component tests, derived from the planned chat-assistant blueprint.

The planner does not produce triton/onnx/sagemaker blueprints yet; these builders change only what an archetype
needs and validate the result with the same `Blueprint` model the program uses.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from blueprints import defaults
from blueprints.blueprint import Blueprint
from blueprints.preview import MockRun, run_under_mocks
from blueprints.stackconfig import config_values

#: A pinned SageMaker Hugging Face TGI image (ECR in us-east-1), as the planner would write it.
TGI_IMAGE = ("763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:"
             "2.4.0-tgi2.4.0-gpu-py311-cu124-ubuntu22.04")


def derive(base: Blueprint, **changes: Any) -> Blueprint:
    """`base` with top-level sections replaced (dict values merge one level into the section), re-validated."""
    data = base.model_dump(mode="json")
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict) and key != "engine":
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return Blueprint.model_validate(data)


def _model(name: str, weights_gib: float, *, fmt: str = "onnx", task: str = "classification") -> dict:
    return {"name": name, "catalog_id": None, "task": task, "format": fmt, "precision": "fp16",
            "source_uri": f"s3://models-in/{name}/", "params_b": 0.1, "weights_gib": weights_gib,
            "max_context_tokens": 512}


CPU_COMPUTE = {"accelerator": "cpu", "instance_type": "c7i.2xlarge", "gpu": None, "gpus_per_node": 0,
               "gpus_per_replica": 0, "vcpus_per_node": 8, "memory_gib_per_node": 16.0, "cpu_per_replica": 3.0,
               "memory_gib_per_replica": 6.0, "ephemeral_storage_gib_per_replica": 10.0, "replicas": 2,
               "capacity_type": "on-demand", "cpu_arch": "x86_64"}


def triton_blueprint(base: Blueprint, *, gpu: bool = True) -> Blueprint:
    """Two ONNX models on Triton, on the base's GPU node (or on CPU nodes)."""
    kind = "KIND_GPU" if gpu else "KIND_CPU"
    engine = {"kind": "triton", "image": defaults.TRITON_IMAGE, "models": [
        {"name": "ranker", "backend": "onnxruntime", "max_batch_size": 32, "max_queue_delay_microseconds": 500,
         "instance_kind": kind, "instance_count": 2},
        {"name": "embedder", "backend": "onnxruntime", "max_batch_size": 0, "max_queue_delay_microseconds": 0,
         "instance_kind": kind, "instance_count": 1}]}
    changes: dict[str, Any] = {"archetype": "triton-multi-model", "engine": engine,
                               "models": [_model("ranker", 1.5), _model("embedder", 0.8)]}
    if not gpu:
        changes["compute"] = CPU_COMPUTE
    return derive(base, **changes)


def onnx_blueprint(base: Blueprint, *, arch: str = "x86_64", cpu: float = 3.0, platform: str = "eks") -> Blueprint:
    """One ONNX model on CPU nodes of `arch`, `cpu` cores per replica (threads = the CPU limit)."""
    instance = "c7i.2xlarge" if arch == "x86_64" else "c7g.2xlarge"
    return derive(base, archetype="onnx-cpu", models=[_model("fraud-scorer", 0.4)],
                  compute={**CPU_COMPUTE, "instance_type": instance, "cpu_arch": arch, "cpu_per_replica": cpu},
                  engine={"kind": "onnxruntime", "image": defaults.ONNXRUNTIME_IMAGE,
                          "intra_op_threads": int(cpu), "inter_op_threads": 1, "port": 8001},
                  platform={**base.platform.model_dump(mode="json"), "kind": platform,
                            "stack": base.platform.stack if platform == "eks" else None})


def sagemaker_blueprint(base: Blueprint, *, weights_gib: float = 14.96, private_only: bool = False,
                        instance_type: str = "ml.g5.2xlarge") -> Blueprint:
    """The base's LLM (weights of `weights_gib`) on a SageMaker real-time endpoint, with the timers and volume the
    planner derives from the startup budget for that size (`blueprints.planner.sagemaker_timers`)."""
    from blueprints.planner import sagemaker_timers

    _, health_s, download_s, volume = sagemaker_timers(base.model.name, weights_gib)
    model = {**base.model.model_dump(mode="json"), "weights_gib": weights_gib}
    return derive(base, archetype="sagemaker-endpoint", models=[model],
                  compute={**base.compute.model_dump(mode="json"), "instance_type": instance_type},
                  engine={"kind": "sagemaker", "image": TGI_IMAGE, "initial_instance_count": 2,
                          "container_startup_health_check_timeout_s": health_s,
                          "model_data_download_timeout_s": download_s, "volume_size_gib": volume},
                  network={"private_only": private_only},
                  # A private endpoint uses its platform's VPC; otherwise it lands on no platform.
                  platform={**base.platform.model_dump(mode="json"), "kind": "sagemaker",
                            "stack": base.platform.stack if private_only else None})


def bundled_platform(stack: str):
    """The bundled examples' planned platform `stack` (`platform-<env>-<region>`), as `blueprint plan` writes it."""
    from blueprints.workspace import plan_platform_set
    from tests.conftest import EXAMPLES, PLAN_DATE

    platforms = {p.stack: p for p in plan_platform_set(EXAMPLES, as_of=PLAN_DATE)}
    return platforms[stack]


def run_program(bp: Blueprint, *, extra_config: dict[str, str] | None = None,
                secret_keys: list[str] | None = None, platform=None) -> MockRun:
    """Run the real program (`components.program.main`) for `bp` under the mock engine. A service on a platform reads
    `platform`'s planned outputs (default: the bundled examples' platform of that name) through its StackReference."""
    from blueprints.platform import PlatformOutputs, planned_outputs
    from blueprints.preview import StackOutputs
    from components.program import main

    config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config_values(bp).items()}
    config.update(extra_config or {})
    references = {}
    if bp.platform.stack is not None:
        platform = platform or bundled_platform(bp.platform.stack)
        references[platform.stack] = StackOutputs(planned_outputs(platform).model_dump(mode="json"),
                                                  PlatformOutputs.SECRET_FIELDS)
    return run_under_mocks(main, stack=bp.stack, config=config, secret_keys=secret_keys, stack_references=references)


def run_component(body: Callable[[], Any], bp: Blueprint) -> MockRun:
    """Run one component's construction under the mock engine."""
    return run_under_mocks(body, stack=bp.stack, config={"aws:region": bp.region})


def manifests(run: MockRun) -> list[dict]:
    """Kubernetes manifests of a run (apiVersion/kind/metadata + spec), as the preview builds them."""
    from blueprints.preview import is_manifest, manifest

    return [manifest(r) for r in run.records if is_manifest(r)]


def pod_spec(run: MockRun, kind: str = "Deployment") -> dict:
    [obj] = [m for m in manifests(run) if m["kind"] == kind]
    return obj["spec"]["template"]["spec"]


def run_platform(platform) -> MockRun:
    """Run the real program for a platform stack config (`PlatformConfig`) under the mock engine."""
    from components.program import main

    config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config_values(platform).items()}
    secrets = []
    if platform.alerting.receiver is not None:  # the receiver's URL, a secret the deployer sets
        config["servingblueprints:alertReceiverUrl"] = "https://hooks.slack.com/services/T000/B000/XXXX"
        secrets.append("servingblueprints:alertReceiverUrl")
    return run_under_mocks(main, stack=platform.stack, config=config, secret_keys=secrets)
