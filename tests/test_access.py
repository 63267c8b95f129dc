"""Authentication on every self-hosted endpoint: the per-stack API key, its Secret, the proxy's routes, and secrets that
stay secret offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.review.preview import mock_secret_value, run_under_mocks
from components.access import ApiKey, ApiKeyArgs, proxy_config, proxy_routes
from tests.blueprint_builders import onnx_blueprint, triton_blueprint
from tests.request_routing import Request, envoy_managers, envoy_route

ROOT = Path(__file__).resolve().parents[1]
KEY = "k" * 40


def routes_by_path(bp) -> list[tuple[dict, str]]:
    """(match, outcome) per route: `engine`, `engine-grpc`, or the direct response status."""
    return [(r["match"], r["route"]["cluster"] if "route" in r else str(r["direct_response"]["status"]))
            for r in proxy_routes(bp, KEY)]


def test_vllm_proxy_passes_only_the_openai_paths_with_the_key_and_health_without(chat_prod):
    routes = routes_by_path(chat_prod)
    keyed = {"headers": [{"name": "authorization", "string_match": {"safe_regex": {"regex": r"(?i:bearer) \S+"}}},
                         {"name": "authorization", "string_match": {"suffix": f" {KEY}"}}]}
    assert routes[0] == ({"path": "/health"}, "engine")
    assert ({"path": "/v1/chat/completions", **keyed}, "engine") in routes
    assert ({"path_separated_prefix": "/v1/models", **keyed}, "engine") in routes
    assert ({"path": "/v1/chat/completions"}, "401") in routes  # the same path without the key
    assert routes[-1] == ({"prefix": "/"}, "404")  # /invocations, /metrics, /tokenize, /pooling, /score, /rerank...
    served = {m.get("path") or m.get("path_separated_prefix") for m, outcome in routes if outcome == "engine"}
    assert served == {"/health", "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models"}


def test_triton_proxy_keys_http_and_grpc_and_sets_tritons_restricted_header(chat_prod):
    bp = triton_blueprint(chat_prod, gpu=True)
    routes = proxy_routes(bp, KEY)
    grpc = [r for r in routes if r.get("route", {}).get("cluster") == "engine-grpc"]
    assert {r["match"]["path"].rsplit("/", 1)[-1] for r in grpc} == {
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer", "ModelStreamInfer"}
    assert all(r["request_headers_to_add"] == [{"header": {"key": "triton-grpc-protocol-api-key", "value": KEY},
                                                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}] for r in grpc)
    http = [r for r in routes if r.get("route", {}).get("cluster") == "engine" and "headers" in r["match"]]
    assert http and all(r["request_headers_to_add"][0]["header"] == {"key": "api-key", "value": KEY} for r in http)
    assert not any("Repository" in r["match"].get("path", "") for r in routes)
    clusters = {c["name"]: c for c in proxy_config(bp, KEY)["static_resources"]["clusters"]}
    assert "http2_protocol_options" in json.dumps(clusters["engine-grpc"]) and set(clusters) == {"engine", "engine-grpc"}


def test_onnx_proxy_serves_kserve_http_only(chat_prod):
    config = proxy_config(onnx_blueprint(chat_prod), KEY)
    assert [c["name"] for c in config["static_resources"]["clusters"]] == ["engine"]
    [listener] = config["static_resources"]["listeners"]
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert listener["address"]["socket_address"]["port_value"] == 8080
    assert manager["normalize_path"] is True and manager["merge_slashes"] is True
    assert "admin" not in config


def test_the_proxy_route_timeout_outlasts_the_longest_stream(chat_prod):
    timeouts = {r["route"]["timeout"] for r in proxy_routes(chat_prod, KEY) if "route" in r}
    assert len(timeouts) == 1 and int(timeouts.pop().removesuffix("s")) > chat_prod.network.load_balancer_idle_timeout_s


def test_a_generated_key_is_in_the_secret_with_the_proxy_config_and_exported_only_as_a_secret(chat_prod):
    seen: list[dict] = []

    def body():
        key = ApiKey("chat-prod-api-key", ApiKeyArgs(blueprint=chat_prod, namespace="chat-assistant"))
        key.secret.string_data.apply(seen.append)
        return {"api_key": key.api_key}

    run = run_under_mocks(body, stack=chat_prod.stack)
    expected = mock_secret_value("chat-prod-api-key-value", 40)
    assert len(seen) == 1 and seen[0]["api-key"] == expected
    assert f'"suffix": " {expected}"' in seen[0]["envoy.json"]  # the key's header matcher
    assert run.outputs == {"api_key": "[secret]"}
    assert expected not in json.dumps([r.inputs for r in run.records])
    [secret] = run.of_type("kubernetes:core/v1:Secret")
    assert secret.inputs["stringData"] == {"api-key": "[secret]", "envoy.json": "[secret]"}


def test_a_given_key_replaces_the_generated_one(chat_prod):
    import pulumi

    seen: list[dict] = []

    def body():
        key = ApiKey("k", ApiKeyArgs(blueprint=chat_prod, namespace="ns", value=pulumi.Output.secret(OWN_KEY)))
        key.secret.string_data.apply(seen.append)

    run = run_under_mocks(body, stack=chat_prod.stack)
    assert seen[0]["api-key"] == OWN_KEY and not run.of_type("random:index/randomPassword:RandomPassword")


#: A key of the shortest length accepted (`defaults.MIN_API_KEY_CHARS`).
OWN_KEY = "k" * 32


@pytest.mark.parametrize("short", ["", "   ", "k" * 31])
def test_an_empty_or_short_given_key_is_refused_where_it_is_decrypted(chat_prod, short):
    import pulumi

    def body():
        key = ApiKey("k", ApiKeyArgs(blueprint=chat_prod, namespace="ns", value=pulumi.Output.secret(short)))
        return {"key": key.api_key}

    with pytest.raises(Exception, match=r"servingblueprints:apiKey has \d+ characters; an API key needs at least 32"):
        run_under_mocks(body, stack=chat_prod.stack)


def test_a_given_key_with_whitespace_is_refused_where_it_is_decrypted(chat_prod):
    import pulumi

    def body():
        value = pulumi.Output.secret("k" * 20 + " " + "k" * 20)
        key = ApiKey("k", ApiKeyArgs(blueprint=chat_prod, namespace="ns", value=value))
        return {"key": key.api_key}

    with pytest.raises(Exception, match=r"servingblueprints:apiKey holds whitespace"):
        run_under_mocks(body, stack=chat_prod.stack)


def vllm_accepts(authorization: str | None, key: str) -> bool:
    """vLLM v0.24.0's own key check, `AuthenticationMiddleware.verify_token`
    (vllm/entrypoints/serve/utils/server_utils.py:60-74): `scheme, _, param = value.partition(" ")`, the scheme
    compared lower-cased with `bearer`, then `param` equal to the key (compared by SHA-256 digest)."""
    if not authorization:
        return False
    scheme, _, param = authorization.partition(" ")
    return scheme.lower() == "bearer" and param == key


@pytest.fixture(scope="module")
def parsed_managers(chat_prod) -> dict[str, dict]:
    """The vLLM and ONNX Runtime proxies' connection managers, parsed by Envoy's own protobufs."""
    return envoy_managers({"vllm": proxy_config(chat_prod, KEY), "onnx": proxy_config(onnx_blueprint(chat_prod), KEY)})


@pytest.mark.parametrize("authorization", [
    f"Bearer {KEY}", f"bearer {KEY}", f"BEARER {KEY}", f"bEaReR {KEY}",   # accepted by vLLM
    f"Bearer  {KEY}", f"Bearer x {KEY}", f"Bearer {KEY}x", f"Bearer {KEY.upper()}", f"Basic {KEY}", f"Bearer{KEY}",
    f"Bearer {KEY[:-1]}", f"Token {KEY}", f"xBearer {KEY}", f"Bearer {KEY},Bearer {KEY}", "Bearer ", None,
])
def test_the_proxy_admits_exactly_the_authorization_values_vllm_admits(parsed_managers, authorization):
    """Through Envoy's own parse of the bootstrap (xds-protos) and its route table: the scheme in any case, like the
    engine; anything vLLM refuses is 401 at the proxy, on every engine's proxy."""
    headers = {} if authorization is None else {"authorization": authorization}
    for manager, path in ((parsed_managers["vllm"], "/v1/models"), (parsed_managers["onnx"], "/v2/models/m/infer")):
        route = envoy_route(manager, Request("h", path, headers))
        admitted = route.get("route", {}).get("cluster") == "engine"
        assert admitted == vllm_accepts(authorization, KEY), path
        assert admitted or route["direct_response"]["status"] == 401


@pytest.fixture(scope="module")
def preview_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("preview")
    result = CliRunner().invoke(app, ["preview", "chat-assistant-prod", "--out", str(out / "report"),
                                      "--stacks-dir", str(ROOT / "stacks"), "--program", str(ROOT / "__main__.py")])
    json_result = CliRunner().invoke(app, ["preview", "chat-assistant-prod", "--json", "--stacks-dir",
                                           str(ROOT / "stacks"), "--program", str(ROOT / "__main__.py")])
    return out / "report", result, json_result


def test_the_stacks_key_never_reaches_the_report_plan_json_manifests_or_the_terminal(preview_dir):
    report, terminal, as_json = preview_dir
    assert terminal.exit_code == 0 and as_json.exit_code == 0
    key = mock_secret_value("chat-assistant-prod-api-key-value", 40)
    texts = {"terminal": terminal.output, "json": as_json.output, "plan.md": (report / "plan.md").read_text(),
             "plan.json": (report / "plan.json").read_text()}
    texts |= {p.name: p.read_text() for p in (report / "manifests").glob("*.yaml")}
    assert [name for name, text in texts.items() if key in text] == []
    plan = json.loads(texts["plan.json"])
    assert plan["outputs"]["api_key"] == "[secret]"
    [secret] = [m for m in plan["manifests"] if m["kind"] == "Secret" and m["metadata"]["name"].endswith("-api-key")]
    assert secret["stringData"] == {"api-key": "[secret]", "envoy.json": "[secret]"}


def test_a_secret_config_key_stays_masked_in_the_preview(tmp_path):
    for f in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        shutil.copy(f, tmp_path)
    shutil.copytree(ROOT / "stacks" / "requirements", tmp_path / "requirements", dirs_exist_ok=True)
    path = tmp_path / "Pulumi.chat-assistant-prod.yaml"
    path.write_text(path.read_text().replace("config:\n", "config:\n  servingblueprints:apiKey:\n    secure: "
                                             "v1:abc:c2VjcmV0LWNpcGhlcnRleHQ=\n", 1))
    result = CliRunner().invoke(app, ["preview", "chat-assistant-prod", "--json", "--stacks-dir", str(tmp_path),
                                      "--program", str(ROOT / "__main__.py")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["outputs"]["api_key"] == "[secret]"
    assert not [r for r in data["resources"] if r["type"] == "random:index/randomPassword:RandomPassword"]
