"""The proxy's Envoy configuration parses strictly as Envoy's v3 Bootstrap (xds-protos: Envoy's data-plane-api as
Python protobufs, in the tools virtualenv `make test` creates): every field name and enum value is Envoy's own."""

from __future__ import annotations

import json
import subprocess

from components.access import proxy_config
from tests.blueprint_builders import onnx_blueprint, triton_blueprint
from tests.cli_tools import tools_python

PARSE = """
import json, sys
from google.protobuf import json_format
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2  # noqa: F401
from envoy.extensions.filters.http.router.v3 import router_pb2  # noqa: F401
from envoy.extensions.access_loggers.stream.v3 import stream_pb2  # noqa: F401
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2  # noqa: F401
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2  # noqa: F401
for name, config in json.load(sys.stdin).items():
    json_format.ParseDict(config, bootstrap_pb2.Bootstrap())  # raises on any unknown field or enum value
    print(name)
"""


def parse(configs: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(tools_python()), "-c", PARSE], input=json.dumps(configs), capture_output=True,
                          text=True, timeout=120)


def test_every_engines_proxy_configuration_is_a_valid_envoy_bootstrap(chat_prod):
    configs = {"vllm": proxy_config(chat_prod, "k" * 40),
               "triton": proxy_config(triton_blueprint(chat_prod, gpu=True), "k" * 40),
               "onnxruntime": proxy_config(onnx_blueprint(chat_prod), "k" * 40)}
    result = parse(configs)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["vllm", "triton", "onnxruntime"]


def test_a_misspelt_field_fails_the_parse(chat_prod):
    config = proxy_config(chat_prod, "k" * 40)
    config["static_resources"]["clusters"][0]["conect_timeout"] = "2s"
    result = parse({"vllm": config})
    assert result.returncode != 0 and "conect_timeout" in result.stderr


def test_the_proxy_serving_tls_itself_is_a_valid_envoy_bootstrap():
    from tests.test_edge_planning import planned
    from tests.test_edge_requirements import edge

    bp = planned(edge(exposure={"via": "node-port", "tls_secret_name": "kiosk-tls"}))
    assert bp.proxy_terminates_tls
    result = parse({"tls": proxy_config(bp, "k" * 40)})
    assert result.returncode == 0, result.stderr
    broken = proxy_config(bp, "k" * 40)
    chain = broken["static_resources"]["listeners"][0]["filter_chains"][0]
    chain["transport_socket"]["typed_config"]["common_tls_context"]["tls_params"]["tls_minimum_protocol_version"] = \
        "TLSv1_9"
    result = parse({"tls": broken})
    assert result.returncode != 0 and "TLSv1_9" in result.stderr
