"""The SigV4 signing proxy that lets `vllm bench serve` (which sends OpenAI requests with a bearer key) drive a
SageMaker endpoint: against a stand-in of the SageMaker runtime on loopback that checks the signature and answers
`InvokeEndpointWithResponseStream` with a real AWS event stream (application/vnd.amazon.eventstream framing)."""

from __future__ import annotations

import binascii
import json
import struct
import urllib.request
from typing import Any

import pytest
from botocore.credentials import Credentials

from blueprints.operate.sagemaker import ProxyTarget, SigningProxy, invoke, lmi_chat_request
from tests.operate_standins import _Quiet, _Server

REGION, ENDPOINT = "us-east-1", "prototype-summarizer-pilot"
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


def event(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total and headers length, CRC32), string headers (type 7), payload,
    message CRC32 (the framing botocore.eventstream parses)."""
    encoded = b"".join(struct.pack("!B", len(k)) + k.encode() + b"\x07" + struct.pack("!H", len(v)) + v.encode()
                       for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack("!I", binascii.crc32(body))


def payload_part(data: bytes) -> bytes:
    return event({":event-type": "PayloadPart", ":content-type": "application/octet-stream",
                  ":message-type": "event"}, data)


CHUNKS = [json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                      "choices": [{"index": 0, "delta": {"content": t}}]}) for t in ("Hello", " there", "!")]


class FakeRuntime(_Server):
    """`POST /endpoints/<name>/invocations-response-stream` (and `/invocations`): 403 without a SigV4 Authorization
    header for service sagemaker; else an event stream of LMI's JSON lines, the second split across two parts."""

    def __init__(self, *, fail_midway: bool = False) -> None:
        self.seen: list[dict[str, Any]] = []
        runtime = self

        class Handler(_Quiet):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                auth = self.headers.get("Authorization") or ""
                runtime.seen.append({"path": self.path, "auth": auth, "body": json.loads(body)})
                if f"/{REGION}/sagemaker/aws4_request" not in auth or not auth.startswith("AWS4-HMAC-SHA256"):
                    self.reply(403, json.dumps({"message": "Missing Authentication Token"}).encode())
                    return
                if self.path.endswith("/invocations"):
                    self.reply(200, json.dumps({"choices": [{"message": {"content": "pong"}}]}).encode())
                    return
                lines = [c.encode() + b"\n" for c in CHUNKS]
                parts = [payload_part(lines[0]), payload_part(lines[1][:20]), payload_part(lines[1][20:])]
                if fail_midway:
                    parts.append(event({":message-type": "exception", ":exception-type": "ModelStreamError"},
                                       b'{"Message": "model failed"}'))
                parts.append(payload_part(lines[2]))
                stream = b"".join(parts)
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                self.send_header("Content-Length", str(len(stream)))
                self.end_headers()
                self.wfile.write(stream)

        super().__init__(Handler)


def chat(port: int) -> bytes:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions", method="POST",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3,
                         "stream": True}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.headers["Content-Type"] == "text/event-stream"
        return reply.read()


def test_the_proxy_signs_and_turns_the_event_stream_into_server_sent_events():
    with FakeRuntime() as runtime, SigningProxy(ProxyTarget(runtime.url, ENDPOINT, REGION, CREDENTIALS)) as proxy:
        body = chat(proxy.port)
    assert body == b"".join(b"data: " + c.encode() + b"\n\n" for c in CHUNKS) + b"data: [DONE]\n\n"
    (seen,) = runtime.seen
    assert seen["path"] == f"/endpoints/{ENDPOINT}/invocations-response-stream"
    assert seen["auth"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert seen["body"]["max_tokens"] == 3 and "max_completion_tokens" not in seen["body"]


def test_a_stream_error_ends_the_stream_without_done():
    with FakeRuntime(fail_midway=True) as runtime, \
            SigningProxy(ProxyTarget(runtime.url, ENDPOINT, REGION, CREDENTIALS)) as proxy:
        body = chat(proxy.port)
    assert b"[DONE]" not in body and body.count(b"data: ") == 2  # the client counts the request as failed


def test_signed_requests_are_answered_and_unsigned_refused():
    with FakeRuntime() as runtime:
        url = f"{runtime.url}/endpoints/{ENDPOINT}/invocations"
        signed = invoke(url, b'{"messages": [], "max_tokens": 1}', credentials=CREDENTIALS, region=REGION)
        bare = invoke(url, b'{"messages": [], "max_tokens": 1}', credentials=None, region=REGION)
    assert (signed.status, bare.status) == (200, 403)
    assert invoke("http://127.0.0.1:9/endpoints/x/invocations", b"{}", credentials=None, region=REGION).status is None


def test_lmi_reads_max_tokens_not_max_completion_tokens():
    assert json.loads(lmi_chat_request(b'{"max_completion_tokens": 7, "messages": []}')) == {
        "messages": [], "max_tokens": 7}
    with pytest.raises(json.JSONDecodeError):
        lmi_chat_request(b"not json")
