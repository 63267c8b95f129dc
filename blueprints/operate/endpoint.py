"""The endpoint's HTTP checks: an authenticated request is answered, an unauthenticated one refused, over TLS where
planned.

What is asked: the cheapest request each engine's proxy guards with the API key (`components.access`): vLLM's
`GET <endpoint>/models` (`/v1/models`, whose answer lists the served model), Triton's and ONNX Runtime's KServe v2
model metadata `GET <endpoint>/models/<model>` (`/v2/models/<name>`). Refused means 401 or 403; any 2xx without the
key is an open endpoint.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Archetype
from blueprints.core.yamlio import load_json

#: Seconds one request may take (an LLM's /v1/models answers in milliseconds; a cold scale-to-zero replica is
#: not what this checks).
REQUEST_TIMEOUT_S = 15
#: Bytes of a reply read.
MAX_REPLY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Reply:
    """One HTTP exchange: `status` (None when no answer came), the reply body (bytes, at most `MAX_REPLY_BYTES`),
    and `error` (why nothing came: connection refused, TLS verification, timeout)."""

    url: str
    status: int | None
    body: bytes = b""
    error: str | None = None


def probe_url(bp: Blueprint, endpoint: str) -> str:
    """The keyed request of the stack's engine under its `endpoint` output (which ends in `/v1` or `/v2`)."""
    base = endpoint.rstrip("/")
    if bp.archetype is Archetype.VLLM_GPU:
        return f"{base}/models"
    return f"{base}/models/{bp.model.name}"


def get(url: str, *, api_key: str | None, context: ssl.SSLContext | None = None) -> Reply:
    """GET `url`, with `Authorization: Bearer <api_key>` when a key is given; TLS verified against the system's
    CA bundle (or `context`)."""
    headers = {"Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S, context=context) as reply:  # noqa: S310
            return Reply(url=url, status=reply.status, body=reply.read(MAX_REPLY_BYTES))
    except urllib.error.HTTPError as exc:
        return Reply(url=url, status=exc.code, body=exc.read(MAX_REPLY_BYTES))
    except urllib.error.URLError as exc:
        return Reply(url=url, status=None, error=str(exc.reason))
    except OSError as exc:  # timeouts, resets
        return Reply(url=url, status=None, error=str(exc) or type(exc).__name__)


def serves_model(bp: Blueprint, reply: Reply) -> bool:
    """Whether an authenticated reply names the stack's model (`data[].id` of /v1/models; `name` of KServe v2
    model metadata)."""
    try:
        data = load_json(reply.body if isinstance(reply.body, str) else reply.body.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    if not isinstance(data, dict):
        return False
    if bp.archetype is Archetype.VLLM_GPU:
        return any(isinstance(m, dict) and m.get("id") == bp.model.name for m in data.get("data") or [])
    return data.get("name") == bp.model.name


def tls_planned(bp: Blueprint) -> bool:
    """Whether clients reach the endpoint over TLS: a public endpoint (the NLB terminates it with the ACM
    certificate) or a TLS Secret off AWS load balancers."""
    exposure = bp.network.exposure
    return bool(exposure.tls)
