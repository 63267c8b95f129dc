"""SageMaker endpoints are IAM-authorised: every request is SigV4-signed for `sagemaker:InvokeEndpoint`. `vllm bench
serve` sends OpenAI requests with a bearer key and cannot sign, and no `--backend` of v0.24.0 speaks SageMaker
(`ASYNC_REQUEST_FUNCS` in vllm/benchmarks/lib/endpoint_request_func.py: openai, openai-chat, embeddings and
pooling backends only). So the same client runs against a small signing proxy on loopback (`SigningProxy`), which:

- takes the client's OpenAI chat request (`--backend openai-chat`, any path), renames `max_completion_tokens` to
  the `max_tokens` LMI's chat schema reads (docs.djl.ai LMI "Chat Completions API Schema": on SageMaker,
  /invocations treats a body with `messages` as a chat completions request),
- signs it (botocore `SigV4Auth`, service `sagemaker`, the caller's credentials) and sends it to the runtime's
  `InvokeEndpointWithResponseStream` (`POST /endpoints/<name>/invocations-response-stream`), whose body is an AWS
  event stream of `PayloadPart` events carrying the container's bytes,
- decodes the event stream (botocore `EventStreamBuffer`) as it arrives and re-frames LMI's JSON lines
  (`_jsonlines_chat_output_formatter`: one `chat.completion.chunk` per line) as the server-sent events the client
  parses (`data: <json>` and a blank line, then `data: [DONE]`), flushing each one at once, so TTFT and ITL are
  measured as tokens leave the endpoint (plus the proxy's loopback hop).

It signs with whoever runs it: the caller needs `sagemaker:InvokeEndpoint` on the endpoint. `verify`'s signed and
unsigned requests use `invoke` below.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from blueprints.operate.endpoint import MAX_REPLY_BYTES, REQUEST_TIMEOUT_S, Reply

#: The SageMaker runtime's streaming invocation path (API reference, InvokeEndpointWithResponseStream).
STREAM_PATH = "/endpoints/{name}/invocations-response-stream"
#: Seconds one streamed request may take (SageMaker's own limit for a streamed response is 8 minutes).
STREAM_TIMEOUT_S = 480
#: Largest request body the proxy accepts, bytes (a 100k-token prompt is ~400 KB).
MAX_REQUEST_BYTES = 8 * 1024 * 1024


def runtime_url(region: str) -> str:
    """`https://runtime.sagemaker.<region>.amazonaws.com`."""
    return f"https://runtime.sagemaker.{region}.amazonaws.com"


def signed_headers(url: str, body: bytes, *, credentials: Any, region: str,
                   headers: dict[str, str]) -> dict[str, str]:
    """`headers` plus the SigV4 signature of a POST of `body` to `url` for service `sagemaker`."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, "sagemaker", region).add_auth(request)
    return dict(request.headers.items())


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urllib.parse.urlsplit(url)
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return conn_type(parts.netloc, timeout=timeout), path


def invoke(url: str, body: bytes, *, credentials: Any | None, region: str) -> Reply:
    """POST `body` (JSON) to an invocation URL, SigV4-signed with `credentials`, or unsigned when None."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if credentials is not None:
        headers = signed_headers(url, body, credentials=credentials, region=region, headers=headers)
    try:
        conn, path = _connection(url, REQUEST_TIMEOUT_S)
        try:
            conn.request("POST", path, body=body, headers=headers)
            reply = conn.getresponse()
            return Reply(url=url, status=reply.status, body=reply.read(MAX_REPLY_BYTES))
        finally:
            conn.close()
    except OSError as exc:
        return Reply(url=url, status=None, error=str(exc) or type(exc).__name__)


def lmi_chat_request(body: bytes) -> bytes:
    """The client's OpenAI chat request as LMI's chat schema reads it: `max_completion_tokens` -> `max_tokens`."""
    data = json.loads(body)
    if "max_completion_tokens" in data and "max_tokens" not in data:
        data["max_tokens"] = data.pop("max_completion_tokens")
    return json.dumps(data).encode()


@dataclass(frozen=True)
class ProxyTarget:
    """Where the proxy sends requests: the runtime (`base_url`, e.g. `runtime_url(region)`), the endpoint, the
    signing region and credentials (botocore `Credentials`)."""

    base_url: str
    endpoint_name: str
    region: str
    credentials: Any


class _Handler(BaseHTTPRequestHandler):
    server: "SigningProxy"
    protocol_version = "HTTP/1.0"  # one request per connection; the body ends when the connection closes

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        return

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self.send_error(413, f"request over {MAX_REQUEST_BYTES} bytes")
            return
        try:
            body = lmi_chat_request(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            self.send_error(400, "expected an OpenAI chat completions JSON body")
            return
        self.server.relay(body, self)


class SigningProxy(ThreadingHTTPServer):
    """A loopback HTTP server (one thread per request) relaying the client's requests to a SageMaker endpoint,
    signed, and its event stream back as server-sent events. Use as a context manager: it serves in a daemon thread
    from `__enter__` and is shut down on `__exit__`.

    Example:
        with SigningProxy(ProxyTarget(runtime_url("us-east-1"), "my-endpoint", "us-east-1", creds)) as proxy:
            ...  # vllm bench serve --backend openai-chat --base-url http://127.0.0.1:{proxy.port}
    """

    daemon_threads = True

    def __init__(self, target: ProxyTarget, *, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.target = target
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server_address[1]

    def __enter__(self) -> "SigningProxy":
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def relay(self, body: bytes, handler: BaseHTTPRequestHandler) -> None:
        """Send one signed streaming request and write its payload to `handler` as server-sent events."""
        from botocore.eventstream import EventStreamBuffer, ParserError

        target = self.target
        url = target.base_url.rstrip("/") + STREAM_PATH.format(name=urllib.parse.quote(target.endpoint_name))
        headers = signed_headers(url, body, credentials=target.credentials, region=target.region,
                                 headers={"Content-Type": "application/json"})
        conn, path = _connection(url, STREAM_TIMEOUT_S)
        try:
            conn.request("POST", path, body=body, headers=headers)
            upstream = conn.getresponse()
            if upstream.status != 200:
                handler.send_response(upstream.status)
                handler.send_header("Content-Type", upstream.getheader("Content-Type") or "application/json")
                handler.end_headers()
                handler.wfile.write(upstream.read(MAX_REPLY_BYTES))
                return
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.end_headers()
            events, lines = EventStreamBuffer(), _Lines()
            while chunk := upstream.read1(65536):
                events.add_data(chunk)
                for message in events:
                    kind = message.headers.get(":message-type")
                    if kind != "event":  # an exception event: ModelStreamError, InternalStreamFailure
                        raise ParserError(f"{message.headers.get(':exception-type')}: {message.payload[:200]!r}")
                    if message.headers.get(":event-type") == "PayloadPart":
                        for line in lines.feed(message.payload):
                            handler.wfile.write(b"data: " + line + b"\n\n")
                            handler.wfile.flush()
            for line in lines.rest():
                handler.wfile.write(b"data: " + line + b"\n\n")
            handler.wfile.write(b"data: [DONE]\n\n")
        except (OSError, ParserError):
            return  # the client sees the stream end early and counts the request as failed
        finally:
            conn.close()


class _Lines:
    """Splits a byte stream into complete, non-empty lines (LMI's JSON lines may split across PayloadParts)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [line.strip() for line in lines if line.strip()]

    def rest(self) -> list[bytes]:
        line, self._buffer = self._buffer.strip(), b""
        return [line] if line else []
