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
import urllib.parse
import urllib.request
from dataclasses import dataclass

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.client_api import model_list_path, request_url
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
    """The keyed request of the stack's engine under its `endpoint` output (which ends in `/v1` or `/v2`,
    `blueprints.contracts.client_api`)."""
    return request_url(endpoint, model_list_path(bp))


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port its scheme's default when absent (RFC 6454's origin)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the request's origin: urllib's own handler copies every header of the request,
    `Authorization` included, into the redirected one whatever host it names (CPython 3.11
    Lib/urllib/request.py:653-685, `HTTPRedirectHandler.redirect_request`: `newheaders = {k: v for k, v in
    req.headers.items() if k.lower() not in CONTENT_HEADERS}`). A redirect to another scheme, host or port is not
    followed: the 3xx reply is the answer, so the API key never reaches another host."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102 - urllib's signature
        if origin(urllib.parse.urljoin(req.full_url, newurl)) != origin(req.full_url):
            return None  # not handled: urllib then raises HTTPError with the 3xx code
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def get(url: str, *, api_key: str | None, context: ssl.SSLContext | None = None) -> Reply:
    """GET `url`, with `Authorization: Bearer <api_key>` when a key is given; TLS verified against the system's
    CA bundle (or `context`). Redirects are followed within `url`'s origin only (`SameOriginRedirects`): one to
    another host comes back as its 3xx status with `error` naming where it pointed."""
    headers = {"Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(url, headers=headers, method="GET")
    opener = urllib.request.build_opener(SameOriginRedirects(), urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(request, timeout=REQUEST_TIMEOUT_S) as reply:
            return Reply(url=url, status=reply.status, body=reply.read(MAX_REPLY_BYTES))
    except urllib.error.HTTPError as exc:
        where = exc.headers.get("Location") if exc.headers is not None and 300 <= exc.code < 400 else None
        return Reply(url=url, status=exc.code, body=exc.read(MAX_REPLY_BYTES),
                     error=f"redirected to {where}, another origin: not followed (the API key is never sent to "
                           "another host)" if where else None)
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
