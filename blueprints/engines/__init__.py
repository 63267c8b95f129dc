"""Each LLM serving engine's container: command line, environment, probes, from its catalog facts
(`blueprints/catalog/engines.yaml`). One module per engine renders its arguments (`vllm`, `sglang`,
`tensorrt_llm`); the component (`components.vllm_service`) and the checks read `server_container_spec` only, so
adding an engine is one catalog entry and one module here.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pulumi

from blueprints.catalog.engines import EngineFacts, engine_facts
from blueprints.contracts.sections import VllmEngine
from blueprints.engines import sglang, tensorrt_llm, vllm

#: engines.yaml name -> the module rendering its arguments (`args(engine, facts, model_name, model)`).
MODULES: dict[str, ModuleType] = {"vllm": vllm, "sglang": sglang, "tensorrt-llm": tensorrt_llm}
#: Where every engine's models are copied when they do not stream (components.weights_delivery.MODELS_MOUNT).
ArgsFn = Callable[[VllmEngine, EngineFacts, str, "pulumi.Input[str] | None"], list]


def server_command(engine: VllmEngine, model_name: str,
                   model: pulumi.Input[str] | None = None) -> tuple[list[str], list[pulumi.Input[str]]]:
    """(command, args) of `engine`'s server container.

    Args:
        engine: the planned engine settings (`kind` names the engine).
        model_name: the served model name.
        model: an `s3://` store prefix the weights stream from (engines whose `features.weights.s3_streaming`);
            the local copy under the models mount when omitted.
    """
    facts = engine_facts(engine.kind)
    return list(facts.command), MODULES[engine.kind].args(engine, facts, model_name, model)


def server_env(engine: VllmEngine, api_key_env: Callable[[str], dict]) -> list[dict]:
    """The server's environment: the API key from the Secret under the name the engine reads (`api_key_env(name)`
    renders the secretKeyRef; SGLang's `--api-key` takes it as `$(NAME)`, expanded by the kubelet), then the
    catalog's privacy and offline switches."""
    facts = engine_facts(engine.kind)
    env = [api_key_env(facts.api_key.env)] if facts.api_key is not None and facts.api_key.env else []
    return env + [{"name": k, "value": v} for k, v in sorted(facts.env.items())]


def server_files(engine: VllmEngine) -> dict[str, str]:
    """`{file name: content}` the server reads from a ConfigMap mounted at `files_dir(engine)` (TensorRT-LLM's options
    file); empty for engines configured on the command line alone."""
    options = getattr(MODULES[engine.kind], "options_file", None)
    return options(engine, engine_facts(engine.kind)) if options else {}


def files_dir(engine: VllmEngine) -> str | None:
    """Where `server_files` are mounted (None: no files)."""
    return getattr(MODULES[engine.kind], "OPTIONS_DIR", None)


def probe_paths(engine: VllmEngine) -> dict[str, str]:
    """`{startup, readiness, liveness}` HTTP paths of the engine's health checks."""
    p = engine_facts(engine.kind).probes
    return {"startup": p.startup, "readiness": p.readiness, "liveness": p.liveness}


def container_name(engine: VllmEngine) -> str:
    """The server container's name: the engine's (`vllm`, `sglang`, `tensorrt-llm`)."""
    return engine.kind
