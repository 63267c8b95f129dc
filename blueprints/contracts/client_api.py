"""The client API of each engine, and the one rule for the stack output `endpoint`: the URL a client takes as its
base, to which it appends the API's own paths.

- vLLM (OpenAI-compatible): the base ends in `/v1`, as an OpenAI client's `base_url` does; clients append
  `/models`, `/chat/completions`, `/completions` (vLLM v0.24.0 openai/models/api_router.py:20,
  openai/chat_completion/api_router.py:41, openai/completion/api_router.py:35).
- Triton and ONNX Runtime (KServe v2 protocol, kserve/kserve docs predict-api/v2/required_api.md): the base ends
  in `/v2`; clients append `/models/<name>` (metadata), `/models/<name>/ready`, `/models/<name>/infer`.
- SageMaker: the runtime's own API (`https://runtime.sagemaker.<region>.amazonaws.com/endpoints/<name>/invocations`,
  SigV4-signed): no base path; `blueprint verify` and the example request call it per that protocol.

Every place that builds the endpoint (the serving Service's load balancer, Ingress or NodePort, its in-cluster name,
the KEDA HTTP interceptor's proxy name for a service that scales to zero) appends `api_base_path`; every place that
extends it (`blueprint verify`, the example request, clients) appends a path of `client_paths`.
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Archetype

#: The OpenAI-compatible API's base path (an OpenAI client's `base_url` ends in it).
OPENAI_BASE_PATH = "/v1"
#: The KServe v2 protocol's base path (Triton's HTTP endpoint, ONNX Runtime served the same way).
KSERVE_V2_BASE_PATH = "/v2"
#: The OpenAI API's inference paths under its base, by the plan's `traffic.api`.
OPENAI_INFERENCE_PATHS = {"chat": "/chat/completions", "completions": "/completions"}


@dataclass(frozen=True)
class ClientPath:
    """One request a client makes under the endpoint: `method`, `path` (appended to the endpoint, starts with `/`)
    and what it is for."""

    method: str
    path: str
    purpose: str


def api_base_path(bp: Blueprint) -> str:
    """The path the `endpoint` output ends in: `/v1` for vLLM, `/v2` for Triton and ONNX Runtime.

    Raises:
        ValueError: a SageMaker blueprint (its invocation URL is the runtime's own API).
    """
    if bp.archetype is Archetype.VLLM_GPU:
        return OPENAI_BASE_PATH
    if bp.archetype in (Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU):
        return KSERVE_V2_BASE_PATH
    raise ValueError(f"archetype {bp.archetype.value} has no base path: its endpoint is the SageMaker runtime's "
                     "invocation URL")


def model_list_path(bp: Blueprint) -> ClientPath:
    """The cheapest keyed request that names the served model, `blueprint verify`'s: vLLM's `GET /models` (the
    model list), KServe v2 `GET /models/<name>` (the model's metadata)."""
    if bp.archetype is Archetype.VLLM_GPU:
        return ClientPath("GET", "/models", "the served models")
    return ClientPath("GET", f"/models/{bp.model.name}", "model metadata (inputs, outputs)")


def inference_path(bp: Blueprint) -> ClientPath:
    """The request the example calls: vLLM's chat or completions API (the plan's `traffic.api`), KServe v2 infer."""
    if bp.archetype is Archetype.VLLM_GPU:
        api = bp.model.traffic.api if bp.model.traffic is not None else "chat"
        return ClientPath("POST", OPENAI_INFERENCE_PATHS[api], f"OpenAI {api} API")
    return ClientPath("POST", f"/models/{bp.model.name}/infer", "KServe v2 inference")


def client_paths(bp: Blueprint) -> list[ClientPath]:
    """Every request clients make under the endpoint: the model list or metadata, readiness (KServe v2), inference."""
    paths = [model_list_path(bp)]
    if bp.archetype is not Archetype.VLLM_GPU:
        paths.append(ClientPath("GET", f"/models/{bp.model.name}/ready", "whether the model is ready"))
    return [*paths, inference_path(bp)]


def request_url(endpoint: str, path: ClientPath) -> str:
    """`endpoint` (the stack output, ending in the API's base path) extended by one client path."""
    return endpoint.rstrip("/") + path.path
