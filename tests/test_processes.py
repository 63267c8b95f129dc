"""Processes as they really run (`blueprints/catalog/processes.yaml`; checks `probe-reachable`, `drain-before-sigterm`,
`proxy-timeouts`, `writable-paths`, `scratch-caches`): every container against its image's listen addresses, SIGTERM
behaviour, writes, keep-alive and caches, per image and version."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from blueprints.catalog.images import load_image_catalog
from blueprints.catalog.processes import load_process_catalog, process_facts
from blueprints.contracts.proxy import drain_window_s, proxy_config, request_timeout_s, upstream_idle_timeout_s
from blueprints.core import defaults
from blueprints.review.deployability import processes
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.preview import PreviewReport, RegisteredResource
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"


@pytest.fixture(scope="module")
def chat() -> PreviewReport:
    return bundled_review("chat-assistant-prod")


@pytest.fixture(scope="module")
def triton() -> PreviewReport:
    return bundled_review("search-relevance-prod")


@pytest.fixture(scope="module")
def edge() -> PreviewReport:
    return bundled_review("edge-classifier-prod")


def _findings(report: PreviewReport, check: str) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == check]


def _workload(report: PreviewReport, kind: str = "Deployment") -> RegisteredResource:
    [record] = [r for r in report.resources if r.type.endswith(f":{kind}") and r.type.startswith("kubernetes:")
                and not r.name.endswith("-router-deployment")]  # the serving workload, not the router
    return record


def _edit_pod(report: PreviewReport, edit, kind: str = "Deployment") -> PreviewReport:
    record = _workload(report, kind)
    inputs = copy.deepcopy(record.inputs)
    edit(inputs["spec"]["template"]["spec"])
    new = dataclasses.replace(record, inputs=inputs)
    return dataclasses.replace(report, resources=[new if r.urn == record.urn else r for r in report.resources])


def _container(spec: dict, name: str, key: str = "containers") -> dict:
    return next(c for c in spec[key] if c["name"] == name)


def _pod(report: PreviewReport) -> dict:
    return _workload(report).inputs["spec"]["template"]["spec"]


def test_the_request_path_sleeps_the_drain_window_before_sigterm(chat):
    bp = chat.blueprint
    window = drain_window_s(bp)
    assert window == defaults.DEREGISTRATION_S + request_timeout_s(bp) == 15 + bp.network.load_balancer_idle_timeout_s + 60
    pod = _pod(chat)
    for name in ("vllm", "auth-proxy"):
        assert _container(pod, name)["lifecycle"] == {"preStop": {"sleep": {"seconds": window}}}
    assert pod["terminationGracePeriodSeconds"] == window + defaults.EXIT_MARGIN_S
    assert _findings(chat, "drain-before-sigterm") == []


def test_a_proxy_or_engine_that_stops_at_once_without_a_long_enough_sleep_is_a_finding(chat):
    def old_design(spec):  # the engine slept 15 s; the proxy not at all
        _container(spec, "vllm")["lifecycle"] = {"preStop": {"sleep": {"seconds": 15}}}
        del _container(spec, "auth-proxy")["lifecycle"]
    messages = _findings(_edit_pod(chat, old_design), "drain-before-sigterm")
    assert len(messages) == 2
    assert any("'auth-proxy'" in m and "stops at once on SIGTERM" in m and "sleeps 0 s" in m for m in messages)
    assert any("'vllm'" in m and "sleeps 15 s" in m and f"{drain_window_s(chat.blueprint)} s" in m for m in messages)
    short_grace = _findings(_edit_pod(chat, lambda spec: spec.update(terminationGracePeriodSeconds=60)),
                            "drain-before-sigterm")
    assert len(short_grace) == 2 and all("terminationGracePeriodSeconds 60" in m for m in short_grace)


def test_a_process_that_drains_may_sleep_the_deregistration_and_drain_the_longest_request(triton):
    facts = process_facts(triton.blueprint.engine.image)
    assert facts.sigterm == "drains" and facts.drain_flag == "--exit-timeout-secs" and facts.drain_default_s == 30
    longest = request_timeout_s(triton.blueprint)

    def short_sleep(exit_timeout: int | None):
        def edit(spec):
            engine = _container(spec, "triton")
            engine["lifecycle"] = {"preStop": {"sleep": {"seconds": defaults.DEREGISTRATION_S}}}
            if exit_timeout is not None:
                engine["args"] = [*engine["args"], f"--exit-timeout-secs={exit_timeout}"]
        return edit
    [message] = _findings(_edit_pod(triton, short_sleep(None)), "drain-before-sigterm")
    assert "drains on SIGTERM for 30 s" in message and f"drain {longest} s" in message
    assert _findings(_edit_pod(triton, short_sleep(longest)), "drain-before-sigterm") == []


def test_an_image_the_process_catalog_does_not_know_is_a_finding(chat):
    edited = _edit_pod(chat, lambda spec: _container(spec, "vllm").update(image="vllm/vllm-openai:v0.99.0"))
    messages = _findings(edited, "drain-before-sigterm")
    assert any("v0.99.0" in m and "processes.yaml does not describe" in m for m in messages)


def test_no_probe_targets_the_loopback_only_credential_helper(edge):
    pod = _pod(edge)
    helper = _container(pod, "aws-credentials", "initContainers")
    assert process_facts(helper["image"]).loopback_only
    assert not any(k in helper for k in processes.PROBES)
    assert _findings(edge, "probe-reachable") == []
    probed = _edit_pod(edge, lambda spec: _container(spec, "aws-credentials", "initContainers").update(
        startupProbe={"tcpSocket": {"port": defaults.CREDENTIAL_HELPER_PORT}, "periodSeconds": 2}))
    [message] = _findings(probed, "probe-reachable")
    assert "'aws-credentials'" in message and "127.0.0.1 only" in message and "never passes" in message


def test_a_probe_reaches_sglang_only_when_its_host_option_opens_the_port(chat):
    # SGLang binds --host, default 127.0.0.1 (server_args.py:528 at 0.5.14): the engine container probed on its port
    # is unreachable until the args give --host 0.0.0.0 (processes.yaml address_flag).
    def sglang(*host: str):
        def edit(spec: dict) -> None:
            _container(spec, "vllm").update(image="lmsysorg/sglang:v0.5.14", command=["python3", "-m",
                                            "sglang.launch_server"], args=["--model-path", "/models/x", *host])
        return edit

    facts = process_facts("lmsysorg/sglang:v0.5.14")
    assert facts.loopback_only and facts.listens[0].address_flag == "--host"
    messages = _findings(_edit_pod(chat, sglang()), "probe-reachable")
    assert messages and all("'vllm'" in m and "127.0.0.1 only" in m for m in messages)
    assert _findings(_edit_pod(chat, sglang("--host=127.0.0.1")), "probe-reachable") == messages
    assert _findings(_edit_pod(chat, sglang("--host", "0.0.0.0")), "probe-reachable") == []


def test_the_download_waits_for_the_helpers_credentials_instead(edge):
    fetch = next(c for c in _pod(edge)["initContainers"] if c["name"].startswith("fetch-"))
    script = fetch["command"][2]
    assert "until aws configure export-credentials" in script and script.index("until") < script.index("s3 sync")


def test_the_proxy_waits_as_long_as_the_longest_response_and_drops_idle_engine_connections_first(chat):
    bp = chat.blueprint
    config = proxy_config(bp, "k" * 40)
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert manager["stream_idle_timeout"] == f"{request_timeout_s(bp)}s"
    options = config["static_resources"]["clusters"][0]["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
    keep_alive = process_facts(bp.engine.image).keep_alive_s
    assert keep_alive == 5 and options["common_http_protocol_options"]["idle_timeout"] == f"{keep_alive - 1}s"
    assert upstream_idle_timeout_s(bp) == 4
    assert _findings(chat, "proxy-timeouts") == []


def test_envoys_defaults_are_findings(chat, monkeypatch):
    def envoy_defaults(bp, key):  # the proxy as it was: Envoy's 300 s stream idle and 1 h upstream idle
        config = proxy_config(bp, key)
        manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        del manager["stream_idle_timeout"]
        for cluster in config["static_resources"]["clusters"]:
            del cluster["typed_extension_protocol_options"]
        return config
    monkeypatch.setattr(processes, "proxy_config", envoy_defaults)
    network = chat.blueprint.network.model_copy(update={"load_balancer_idle_timeout_s": 394})
    long_stream = dataclasses.replace(chat, subject=chat.blueprint.model_copy(update={"network": network}))
    messages = _findings(long_stream, "proxy-timeouts")
    assert any("stream quiet for 300 s" in m and "394 s" in m for m in messages)
    assert any("for 3600 s" in m and "closes one after 5 s" in m and "503" in m for m in messages)


def test_an_engine_keep_alive_below_the_proxys_idle_timeout_is_a_finding(chat):
    edited = _edit_pod(chat, lambda spec: _container(spec, "vllm")["env"].append(
        {"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "2"}))
    [message] = _findings(edited, "proxy-timeouts")
    assert "for 4 s" in message and "after 2 s" in message


def test_a_write_under_a_read_only_root_needs_a_volume(chat):
    assert _findings(chat, "writable-paths") == []
    edited = _edit_pod(chat, lambda spec: _container(spec, "vllm").update(volumeMounts=[
        m for m in _container(spec, "vllm")["volumeMounts"] if m["name"] != "home"]))
    messages = _findings(edited, "writable-paths")
    assert messages and all("'vllm'" in m and "/home/serving" in m for m in messages)


def test_the_download_disables_hf_xets_chunk_cache_on_its_scratch_volume(chat):
    assert _findings(chat, "scratch-caches") == []
    job = _workload(chat, "Job")
    download = _container(job.inputs["spec"]["template"]["spec"], "download", "initContainers")
    assert {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"} in download["env"]

    def default_cache(spec):  # on the v0.11.0 image, whose hf_xet fills a 10 GB chunk cache unless told not to
        container = _container(spec, "download", "initContainers")
        container["env"] = [e for e in container["env"] if e["name"] != "HF_XET_CHUNK_CACHE_SIZE_BYTES"]
        container["image"] = "vllm/vllm-openai:v0.11.0"
    [message] = _findings(_edit_pod(chat, default_cache, kind="Job"), "scratch-caches")
    assert "10 GB cache" in message and "'scratch'" in message and "HF_XET_CHUNK_CACHE_SIZE_BYTES=0" in message


def test_every_image_the_program_runs_is_described_for_both_vllm_pins():
    described = set(load_process_catalog())
    assert set(load_image_catalog()) <= described
    assert {"vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.24.0"} <= described
    for image in ("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.24.0"):
        facts = process_facts(image)
        assert (facts.sigterm, facts.keep_alive_s, facts.keep_alive_env) == ("aborts", 5,
                                                                             "VLLM_HTTP_TIMEOUT_KEEP_ALIVE")
    assert process_facts(defaults.CREDENTIAL_HELPER_IMAGE).loopback_only
    assert not process_facts("vllm/vllm-openai:v0.11.0").loopback_only
