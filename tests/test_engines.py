"""Engines as a dimension of the LLM search (vLLM, SGLang, TensorRT-LLM; blueprints/catalog/engines.yaml): the engine
table every self-hosted LLM plan carries, the switch threshold, what each engine renders (command, probes, metrics,
the scaler's and alerts' signals, checked by the preview and by promtool), the policy that restricts them, and the
bad input that names `operations.engines`."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.catalog.engines import engine_facts, load_engine_catalog
from blueprints.cli import app
from blueprints.contracts.stackconfig import write_stack_configs
from blueprints.plan.options.llm import choose_engine
from blueprints.review.stack import review_stack
from tests.conftest import ROOT, example_data, plan_env, requirements_with
from tests.plan_preview import POLICY_DIR, findings, plan_in
from tests.test_alert_rules import _rules, assert_every_alert_fires_when_broken_and_stays_quiet

OTHER_ENGINES = ("sglang", "tensorrt-llm")
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def _high_traffic_chat(**operations):
    """The bundled chat on H100/H200 nodes at 60 requests/s (a budget that does not bind)."""
    return requirements_with(hardware={"allowed_instance_families": ["p5", "p5en"]},
                             traffic={"peak_requests_per_s": 60}, budget={"max_monthly_usd": 500000},
                             operations={"preference": "self-hosted", **operations})


def test_a_high_traffic_chat_on_h100_plans_with_an_engine_table_naming_all_three_engines():
    bp = plan_env(_high_traffic_chat(), "prod")
    rows = {r.engine: r for r in bp.predictions.engines}
    assert list(rows) == ["vllm", "sglang", "tensorrt-llm"]
    for r in rows.values():  # each sized on its own measured tables, priced alike
        assert r.instance_type is not None and r.instance_type.startswith("p5"), r
        assert r.step_times == "measured" and r.monthly_cost_usd > 0 and r.usd_per_million_tokens > 0
        if r.ttft_p95_ms is not None:  # simulated: within the SLO
            assert r.ttft_p95_ms <= bp.slo.ttft_p95_ms and r.itl_p95_ms <= bp.slo.itl_p95_ms
        else:  # beyond the table's reach: its analytic lower bound, stated as such
            assert r.verdict.startswith("at least $") and r.monthly_cost_usd > min(
                x.monthly_cost_usd for x in rows.values() if x.planned) * 1.25
    [planned] = [r for r in rows.values() if r.planned]
    assert planned.engine == bp.engine.kind
    cheapest = min(r.monthly_cost_usd for r in rows.values())
    if planned.engine == "vllm":  # kept unless another is cheaper by more than the threshold
        assert rows["vllm"].monthly_cost_usd * 0.9 <= cheapest + 0.01
    else:
        assert planned.monthly_cost_usd < rows["vllm"].monthly_cost_usd * 0.9
    # priced per 1M tokens of the same planned traffic as the plan's unit costs; as the search sized them (the fleet
    # simulation may add nodes to the planned one afterwards: its cost lines then exceed the row)
    costs = bp.predictions.unit_costs
    tokens = costs.million_input_tokens_per_month + costs.million_output_tokens_per_month
    assert all(r.usd_per_million_tokens == float(f"{r.monthly_cost_usd / tokens:.4g}") for r in rows.values())
    assert planned.monthly_cost_usd <= bp.predictions.monthly_cost_usd + 0.01
    assert any(r.startswith("engines compared (vllm, sglang, tensorrt-llm") for r in bp.rationale)
    assert [r.split(":")[0] for r in bp.rationale if r.startswith("engine ")] == [
        "engine vLLM 0.24.0", "engine SGLang 0.5.14", "engine TensorRT-LLM 1.3.0rc20"]


@pytest.mark.parametrize("threshold, cheaper, planned", [(10, 0.85, "sglang"), (20, 0.85, "vllm"),
                                                          (10, 0.95, "vllm"), (0, 0.999, "sglang")])
def test_another_engine_is_planned_only_when_cheaper_than_vllm_by_more_than_the_threshold(threshold, cheaper, planned):
    def option(usd):
        return SimpleNamespace(monthly_node_usd_per_hour=usd), None

    req = requirements_with(operations={"engine_switch_threshold_pct": threshold})
    finals = {"vllm": option(10.0), "sglang": option(10.0 * cheaper), "tensorrt-llm": option(10.5)}
    assert choose_engine(finals, req) == planned
    assert choose_engine({"sglang": option(3.0), "tensorrt-llm": option(2.0)}, req) == "tensorrt-llm"


class _Reports(dict):
    """The bundled chat's prod stack planned with one engine (`operations.engines: [<engine>]`), written and
    previewed as `blueprint plan` and `blueprint preview` do; each engine's on first use."""

    def __init__(self, factory):
        super().__init__()
        self.factory = factory

    def __missing__(self, engine: str):
        data = example_data("chat-assistant")
        data["operations"] = {**data.get("operations", {}), "engines": [engine]}
        data["environments"] = {"prod": data["environments"]["prod"]}
        if engine == "sglang":  # its default scheduler runs a prompt's prefill alone, pausing every decode (the
            data["slo"] = {**data["slo"], "itl_p95_ms": 250}  # sglang-0.5 profile): the 50 ms ITL is out of reach
        data["budget"] = {**data.get("budget", {}), "max_monthly_usd": 500000}  # its wider band sizes more nodes
        folder = self.factory.mktemp(engine)
        planned = plan_in(data, folder)
        write_stack_configs(planned.subjects, folder / "stacks", source="svc.yaml",
                            cluster_addons=planned.cluster_addons)
        self[engine] = review_stack("chat-assistant-prod", stacks_dir=folder / "stacks",
                                    program=ROOT / "__main__.py", policy_dir=POLICY_DIR)
        return self[engine]


@pytest.fixture(scope="module")
def engine_reports(tmp_path_factory) -> dict:
    return _Reports(tmp_path_factory)


def _server(report) -> dict:
    [deployment] = [r for r in report.resources if r.type == DEPLOYMENT
                    and r.inputs["spec"]["template"]["spec"]["containers"][0]["name"] == report.blueprint.engine.kind]
    return deployment.inputs["spec"]["template"]["spec"]


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_one_engine_renders_its_own_server_and_previews_clean(engine, engine_reports):
    report = engine_reports[engine]
    facts = engine_facts(engine)
    bp = report.blueprint
    assert bp.engine.kind == engine and bp.engine.image == facts.image
    assert report.clean, findings(report)
    pod = _server(report)
    server = pod["containers"][0]
    assert server["command"] == facts.command and server["image"] == facts.image
    args = [str(a) for a in server["args"]]
    for setting, value in (("tensor_parallel_size", bp.engine.tensor_parallel_size),
                           ("max_model_len", bp.engine.max_model_len), ("max_num_seqs", bp.engine.max_num_seqs),
                           ("port", bp.engine.port)):
        assert f"{facts.flag(setting)}={value}" in args, (setting, args)
    assert f"{facts.host.flag}={facts.host.value}" in args  # the probes reach the pod IP
    assert {server[p]["httpGet"]["path"] for p in ("startupProbe", "readinessProbe", "livenessProbe")} == \
        {facts.probes.startup, facts.probes.readiness, facts.probes.liveness}
    monitor = next(r for r in report.resources if r.inputs.get("kind") == "ServiceMonitor"
                   and "router" not in r.inputs["metadata"]["name"])
    assert monitor.inputs["spec"]["endpoints"][0]["path"] == facts.metrics.path
    # the scaler and every engine alert read this engine's own metrics, never vLLM's
    assert bp.autoscaling.metric == facts.signal("running")
    exprs = " ".join(r["expr"] for r in _rules(report))
    assert facts.signal("ttft_seconds") in exprs and facts.signal("kv_cache_usage") in exprs
    assert "vllm:" not in exprs
    scaled = [r for r in report.resources if r.inputs.get("kind") == "ScaledObject"]
    assert scaled and all(facts.signal("running") in str(r.inputs["spec"]["triggers"]) for r in scaled)


def test_trtllm_serve_gets_its_options_file_and_sglang_its_metrics_flag(engine_reports):
    trt = _server(engine_reports["tensorrt-llm"])
    config_maps = [r for r in engine_reports["tensorrt-llm"].resources
                   if r.type == "kubernetes:core/v1:ConfigMap" and r.inputs["metadata"]["name"].endswith(
                       "-engine-options")]
    [options] = [yaml.safe_load(text) for r in config_maps for text in r.inputs["data"].values()]
    # Prometheus text at /prometheus/metrics and the iteration gauges KEDA scales on need both switches
    assert options["return_perf_metrics"] is True and options["enable_iter_perf_stats"] is True
    assert options["kv_cache_config"]["enable_block_reuse"] is True
    flag = engine_facts("tensorrt-llm").extra_flag("options_file")
    path = next(a.split("=", 1)[1] for a in trt["containers"][0]["args"] if str(a).startswith(flag + "="))
    mount = next(m for m in trt["containers"][0]["volumeMounts"] if m["name"] == "engine-options")
    assert path.startswith(mount["mountPath"] + "/")
    sgl = _server(engine_reports["sglang"])["containers"][0]
    assert engine_facts("sglang").metrics.enable_flag in sgl["args"]


@pytest.mark.parametrize("engine", OTHER_ENGINES)
def test_each_engines_alerts_fire_when_broken_and_stay_quiet_while_holding(engine, engine_reports, tmp_path):
    assert_every_alert_fires_when_broken_and_stays_quiet(engine_reports[engine], tmp_path)


def test_every_engine_names_its_signals_in_its_own_metric_catalog():
    from blueprints.catalog.metrics import load_metric_catalog

    catalog = load_metric_catalog()
    for engine in load_engine_catalog().values():
        exporter = catalog.engine_for_image(engine.image)
        assert exporter is not None, engine.name
        names = {m.name for m in exporter.metrics}
        histograms = {m.name for m in exporter.metrics if m.type == "histogram"}
        assert {engine.signal("ttft_seconds"), engine.signal("itl_seconds")} <= histograms
        assert set(engine.signals.values()) <= names, set(engine.signals.values()) - names


runner = CliRunner()


@pytest.mark.parametrize("engines, words", [
    ([], ["operations.engines", "at least 1"]),
    (["tgi"], ["operations.engines", "vllm", "sglang", "tensorrt-llm"]),
    (["vllm", "vllm"], ["operations.engines"]),
])
def test_bad_engine_lists_exit_2_naming_the_field(engines, words, tmp_path, monkeypatch):
    data = example_data("chat-assistant")
    data["operations"] = {**data.get("operations", {}), "engines": engines}
    path = tmp_path / "svc.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["plan", str(path), "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.output, (word, result.output)


def test_an_engine_that_cannot_serve_the_model_is_refused_naming_what_each_serves(tmp_path, monkeypatch):
    data = example_data("chat-assistant")
    data["operations"] = {**data.get("operations", {}), "engines": ["tensorrt-llm"]}
    data["model"] = {**data["model"], "precision": "fp8"}
    path = tmp_path / "svc.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["plan", str(path), "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "operations.engines" in message and "TensorRT-LLM serves no quantised checkpoint" in message
    assert "vLLM serves fp8" in message and "add vllm to operations.engines" in message


def test_a_policy_restricting_engines_narrows_the_search_and_the_pack_refuses_others(engine_reports):
    from blueprints.plan.guardrails import Guardrails
    from policies.gpu import check_engines_allowed
    from policies.resources import Res

    only = Guardrails(source="policies/config/prod.json", allowed_engines=("vllm",))
    req, notes = only.apply(_high_traffic_chat(), "prod")
    assert req.operations.engines == ["vllm"] and "engines-allowed" in notes[0]
    assert only.problems(_high_traffic_chat(engines=["sglang"]), "prod")[0].startswith(
        "environments.prod: operations.engines ['sglang']")
    pod = _server(engine_reports["sglang"])
    res = Res(type=DEPLOYMENT, name="chat", urn="urn", props={"spec": {"template": {"spec": pod}}})
    [finding] = check_engines_allowed(res, {"allowedEngines": ["vllm"]})
    assert "SGLang" in finding and "allowedEngines" in finding
    assert check_engines_allowed(res, {"allowedEngines": ["vllm", "sglang"]}) == []


def test_estimate_sizes_one_replica_on_the_engine_asked_for_and_refuses_one_without_tables():
    import json

    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "32", "--json"]
    vllm = json.loads(runner.invoke(app, args).output)
    sglang = json.loads(runner.invoke(app, [*args, "--engine", "sglang"]).output)
    assert vllm["capacity_source"].startswith("measured vLLM 0.24.0")
    assert sglang["capacity_source"].startswith("measured SGLang 0.5.14")
    # SGLang's own memory share (weights and KV pool, activations outside) holds fewer KV tokens than vLLM's 0.9
    assert sglang["kv_cache_tokens"] < vllm["kv_cache_tokens"] and sglang["ttft_ms"] != vllm["ttft_ms"]
    result = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--engine", "tensorrt-llm"])
    assert result.exit_code == 2 and "no measured TensorRT-LLM kernel tables" in result.output


def test_a_tensorrt_llm_plan_passes_its_own_kv_check_at_the_share_it_was_sized_with():
    """trtllm-serve's --kv_cache_free_gpu_memory_fraction is a share of what the weights leave: the Blueprint's KV
    check reads it as the planner sized it (found by the pilot: 306 sequences checked against 298 at 0.9 of all)."""
    bp = plan_env(requirements_with(operations={"preference": "self-hosted", "engines": ["tensorrt-llm"]}), "dev")
    assert bp.engine.kind == "tensorrt-llm" and bp.engine.gpu_memory_utilization == 0.9
    from blueprints.catalog import load_catalog
    from blueprints.contracts.consistency import _memory_share

    assert _memory_share(bp, load_catalog()) > 0.9  # the weights' share plus 0.9 of the rest
