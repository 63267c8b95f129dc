"""Prompt reuse (issue 27, part A): `traffic.shared_prefix_tokens` and `traffic.sessions` plan vLLM's prefix caching,
the capacity model's cache hits and, over several replicas, the production-stack router behind the authenticating
proxy. The kept-apart pair `tests/data/prompt-reuse` is one agent planned with and without its declared reuse."""

from __future__ import annotations

import pytest

from blueprints.capacity.prefix_cache import PromptReuse, cached_prompt_tokens, history_hit_rate
from blueprints.catalog.router import load_router_catalog
from blueprints.core import defaults
from blueprints.requirements.reuse import SESSION_HEADER, new_turn_tokens, sequences_held
from blueprints.review.preview import PreviewReport
from tests.conftest import plan_env, requirements_with
from tests.kept_apart import reviewed

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SERVICE = "kubernetes:core/v1:Service"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"


@pytest.fixture(scope="module")
def agents(tmp_path_factory) -> dict[str, PreviewReport]:
    return reviewed("prompt-reuse", tmp_path_factory.mktemp("prompt-reuse"))


def _named(report: PreviewReport, type_token: str, name: str) -> dict:
    [inputs] = [r.inputs for r in report.resources if r.type == type_token
                and (r.inputs.get("metadata") or {}).get("name") == name]
    return inputs


def _container(deployment: dict, name: str) -> dict:
    [c] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


# --- the capacity model's cache hits --------------------------------------------------------------------------------


def test_the_new_tokens_of_a_turn_follow_from_the_mean_prompt_the_prefix_and_the_answers():
    # 3 turns of u new tokens and 300-token answers after an 800-token prefix: prompts 800+u, 800+2u+300,
    # 800+3u+600, mean 800 + 2u + 300 = 1200 -> u = 50.
    assert new_turn_tokens(1200, 300, 800, 3) == 50
    assert PromptReuse(1200, 300, 800, 3).history_tokens == 350


def test_session_history_hits_one_in_n_with_round_robin_and_always_with_session_routing():
    reuse = PromptReuse(1200, 300, 800, 3)
    assert history_hit_rate("roundrobin", 4) == 0.25
    # 800 + 350 / 4 = 887.5 -> 880 (whole 16-token blocks); with routing 800 + 350 = 1150 -> 1136.
    assert cached_prompt_tokens(reuse, routing="roundrobin", replicas=4) == 880
    assert cached_prompt_tokens(reuse, routing="session", replicas=4) == 1136
    # The shared prefix is cached on every replica whatever the routing.
    shared_only = PromptReuse(1200, 300, 800)
    assert cached_prompt_tokens(shared_only, routing="roundrobin", replicas=4) == 800
    assert cached_prompt_tokens(PromptReuse(1200, 300), routing="session", replicas=4) == 0


def test_the_shared_prefix_is_held_once_in_the_kv_cache_not_per_sequence():
    assert sequences_held(100_000, request_tokens=1500, shared_prefix_tokens=0) == 66
    # (100,000 - 800) // (1500 - 800): the prefix's blocks are shared by every sequence.
    assert sequences_held(100_000, request_tokens=1500, shared_prefix_tokens=800) == 141


def test_the_agent_with_reuse_predicts_a_lower_ttft_than_the_same_agent_without(agents):
    from blueprints.capacity.planning import candidate, run_at_rate
    from blueprints.capacity.replica import planned_candidate

    reuse = agents["support-agent-prod"].blueprint
    plain = agents["support-agent-plain-prod"].blueprint
    # Each plan, sized to its SLO at the least cost: fewer replicas with reuse, and a lower predicted TTFT p95.
    assert reuse.predictions.ttft_p95_ms < plain.predictions.ttft_p95_ms
    assert reuse.compute.replicas < plain.compute.replicas
    # By how much the reuse itself lowers it: the plain agent's replica (engine limits and all) at its share of the
    # peak, prefilling whole prompts against the cached ones the reuse plan counts (256 of 4,000 tokens to prefill).
    replica, whole = planned_candidate(plain)
    _, cached = planned_candidate(reuse)
    assert (whole.cached_tokens, cached.cached_tokens) == (0, 3744)
    same_replica = candidate(replica.model, replica.gpu, replica.tensor_parallel_size, replica.kv_cache_fp8,
                             replica.config, cached)
    share = plain.model.traffic.peak_requests_per_s / plain.compute.replicas
    without, with_reuse = run_at_rate(replica, whole, share), run_at_rate(same_replica, cached, share)
    assert without.stable and with_reuse.stable
    assert any(f"TTFT p50/p95 {without.ttft_ms.p50:.0f}/{without.ttft_ms.p95:.0f} ms" in r
               for r in plain.rationale)  # the run the plain plan was sized on
    assert with_reuse.ttft_ms.p95 < without.ttft_ms.p95 / 5  # 279 ms vs 1,928 ms when written
    # u = (2 (4000 - 3000) - 3 x 250) / 5 = 250 new tokens a turn: 3000 + 750 history cached, 3744 in whole blocks.
    assert any("counts 3744 of the 4000 mean prompt tokens as cached" in r for r in reuse.rationale)


# --- what the plan and the program render ---------------------------------------------------------------------------


def test_reuse_over_several_replicas_plans_prefix_caching_and_the_session_router(agents):
    report = agents["support-agent-prod"]
    bp = report.blueprint
    assert bp.autoscaling.max_replicas > 1 and bp.engine.enable_prefix_caching
    assert bp.router is not None and bp.router.routing_logic == "session" and bp.router.session_key == SESSION_HEADER
    engine = _container(_named(report, DEPLOYMENT, bp.workload_name), "vllm")
    assert "--enable-prefix-caching" in engine["args"]
    router = _named(report, DEPLOYMENT, "support-agent-router")
    assert router["spec"]["replicas"] == 2
    container = _container(router, "router")
    assert container["image"] == load_router_catalog().image and not container["image"].endswith(":latest")
    assert {"--routing-logic=session", f"--session-key={SESSION_HEADER}", f"--k8s-port={defaults.PROXY_PORT}",
            "--service-discovery=k8s", "--k8s-namespace=support-agent"} <= set(container["args"])
    assert container["securityContext"]["runAsNonRoot"] and container["securityContext"]["runAsUser"] > 0
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert router["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    role = _named(report, ROLE, "support-agent-router")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert _named(report, PDB, "support-agent-router")["spec"]["minAvailable"] == 1
    assert report.manifest_problems == {} and report.deployability == [] and report.signals == []
    assert [v for v in report.policy_verdicts if v.enforcement == "mandatory"] == []


def test_a_shared_prefix_alone_is_routed_by_prefix_and_a_service_without_reuse_gets_no_router(agents):
    req = requirements_with(traffic={"shared_prefix_tokens": 800})  # the chat assistant with a shared prompt
    bp = plan_env(req, "prod")
    assert bp.router is not None and bp.router.routing_logic == "prefixaware" and bp.router.session_key is None
    assert "--routing-logic=prefixaware" in bp.router.args
    plain = agents["support-agent-plain-prod"]
    assert plain.blueprint.router is None and not plain.blueprint.engine.enable_prefix_caching
    assert not [r for r in plain.resources if r.type == ROLE]
    assert "--enable-prefix-caching" not in _container(_named(plain, DEPLOYMENT, plain.blueprint.workload_name),
                                                       "vllm")["args"]


# --- the router stays behind the authenticating proxy ---------------------------------------------------------------


def test_the_router_pod_serves_clients_through_the_authenticating_proxy(agents):
    report = agents["support-agent-prod"]
    bp = report.blueprint
    router = _named(report, DEPLOYMENT, "support-agent-router")
    proxy = _container(router, "auth-proxy")
    assert proxy["ports"][0]["containerPort"] == defaults.PROXY_PORT
    labels = router["spec"]["template"]["metadata"]["labels"]
    client = _named(report, SERVICE, bp.workload_name)
    assert client["spec"]["selector"].items() <= labels.items()  # clients reach the router's pods
    assert client["spec"]["ports"][0]["targetPort"] == "api"  # on the proxy's port


def test_only_the_router_reaches_the_engine_pods_and_only_through_their_proxy(agents):
    report = agents["support-agent-prod"]
    bp = report.blueprint
    router_labels = _named(report, DEPLOYMENT, "support-agent-router")["spec"]["selector"]["matchLabels"]
    engine = _named(report, POLICY, bp.workload_name)["spec"]
    by_port = {rule["ports"][0]["port"]: rule["from"] for rule in engine["ingress"]}
    # The proxy port admits the router's pods only: no address range, no other namespace.
    assert by_port[defaults.PROXY_PORT] == [{"podSelector": {"matchLabels": router_labels}}]
    # The engine's own port (vLLM, whose key check skips /metrics, /tokenize, ...) only Prometheus reaches.
    assert by_port[bp.engine.port] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}]
    router = _named(report, POLICY, "support-agent-router")["spec"]
    engine_selector = _named(report, DEPLOYMENT, bp.workload_name)["spec"]["selector"]["matchLabels"]
    in_namespace = [rule for rule in router["egress"]  # peers in the router's own namespace (DNS names kube-system)
                    if any("podSelector" in peer and "namespaceSelector" not in peer for peer in rule["to"])]
    [to_engines] = in_namespace
    assert to_engines == {"to": [{"podSelector": {"matchLabels": engine_selector}}],
                          "ports": [{"port": defaults.PROXY_PORT, "protocol": "TCP"}]}
    # Nothing the router's policy allows reaches the engine's unauthenticated port inside the cluster.
    assert all(p["port"] != bp.engine.port for rule in in_namespace for p in rule["ports"])


def test_the_router_is_scraped_apart_and_alerts_when_it_is_down(agents):
    report = agents["support-agent-prod"]
    monitors = [r.inputs for r in report.resources if r.type == "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"]
    assert {m["metadata"]["name"] for m in monitors} == {"support-agent-vllm", "support-agent-router"}
    [rules] = [r.inputs for r in report.resources if r.type == "kubernetes:monitoring.coreos.com/v1:PrometheusRule"]
    alerts = {rule["alert"]: rule for group in rules["spec"]["groups"] for rule in group["rules"]}
    assert alerts["RouterDown"]["expr"] == ('kube_deployment_status_replicas_available{namespace="support-agent", '
                                            'deployment="support-agent-router"} < 1')
    assert alerts["RouterDown"]["labels"]["severity"] == "page"
    # Engine queries name the engine's job: the router's gauges reuse vLLM's names.
    assert 'job="support-agent-vllm-metrics"' in alerts["QueueBuildingUp"]["expr"]
