"""Planning on an edge cluster: replicas, vCPUs, ONNX Runtime threads and replicas per node sized against the declared
owned nodes (and refused, naming the shortfall, when they cannot carry the peak); owned hardware priced as such;
scaling and monitoring from the declared add-ons; images built for the nodes' architecture."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blueprints.core import defaults
from blueprints.contracts.sections import FIXED_REPLICAS
from blueprints.core.errors import SizingError
from blueprints.requirements.service import Requirements
from blueprints.requirements.exposure import ExposureVia
from blueprints.simulate.fleet import simulate
from tests.conftest import examples, plan_env
from tests.test_edge_requirements import EDGE_NODES, NEW_USER_EDGE, edge


def planned(data: dict, env: str = "shop"):
    return plan_env(Requirements.model_validate(data), env)


@pytest.fixture(scope="module")
def bp():
    return planned(NEW_USER_EDGE)


def test_the_new_users_file_plans_onnx_on_the_owned_nodes(bp):
    nodes = NEW_USER_EDGE["hardware"]["edge_nodes"]
    assert bp.archetype.value == "onnx-cpu" and bp.platform.kind == "edge-cluster"
    c = bp.compute
    assert c.instance_type is None and c.owned_nodes == nodes["count"]
    assert (c.vcpus_per_node, c.memory_gib_per_node, c.cpu_arch.value) == (nodes["vcpus"], nodes["memory_gib"],
                                                                           nodes["cpu_arch"])
    assert bp.storage is None and bp.network.exposed_by is None
    assert bp.network.exposure.via is ExposureVia.NODE_PORT  # nothing declared: no Ingress, no load balancer


def test_replicas_and_threads_fit_the_declared_nodes(bp):
    c, nodes = bp.compute, NEW_USER_EDGE["hardware"]["edge_nodes"]
    # a replica's vCPUs are whole cores of the node's allocatable share, and its ONNX Runtime threads are exactly those
    assert c.cpu_per_replica <= math.floor(nodes["vcpus"] * defaults.NODE_ALLOCATABLE_CPU_FRACTION)
    assert bp.engine.intra_op_threads == c.cpu_per_replica
    assert c.replicas_per_node * c.memory_gib_per_replica <= nodes["memory_gib"]
    # the autoscaler's maximum plus the rolling update's extra replica fit on the owned nodes
    assert bp.rollout_surge == defaults.SURGE_REPLICAS
    assert math.ceil((bp.autoscaling.max_replicas + bp.rollout_surge) / c.replicas_per_node) <= c.owned_nodes
    assert bp.startup.node_provisioning_s == 0  # owned nodes are never launched


def test_owned_hardware_is_priced_as_owned_never_as_ec2(bp):
    [line] = bp.predictions.cost_lines
    assert line.item.startswith("owned edge nodes") and line.monthly_usd == 0  # no monthly cost given
    assert not any(name in line.item for name in ("c7g", "c7i", "m7i", "xlarge"))
    assert any("no monthly cost per node given" in r and "shown as $0" in r for r in bp.rationale)
    assert not any("list prices" in r for r in bp.rationale)
    monthly = 95
    priced = planned(edge(hardware={"edge_nodes": {**EDGE_NODES, "monthly_usd_per_node": monthly}}))
    [line] = priced.predictions.cost_lines
    nodes_used = math.ceil(priced.compute.replicas / priced.compute.replicas_per_node)
    assert line.quantity == nodes_used and line.monthly_usd == pytest.approx(nodes_used * monthly, abs=0.01)
    assert priced.predictions.monthly_cost_usd == line.monthly_usd
    # owned nodes cost the same busy or idle: the simulation expects the peak cost
    assert simulate(priced, days=1).expected_monthly_usd == priced.predictions.monthly_cost_usd


def test_a_fixed_replica_count_without_metrics_server_and_a_cpu_hpa_with_it(bp):
    a = bp.autoscaling
    assert a.metric == FIXED_REPLICAS and a.min_replicas == a.max_replicas == max(1, bp.compute.replicas)
    assert any("a fixed count of" in r and "declares no metrics-server" in r for r in bp.rationale)
    full = planned(edge(operations={"platform": "edge-cluster", "cluster_addons": ["metrics-server"]}))
    # two nodes of one replica each: the second keeps room for a rolling update, so nothing is left to scale into
    assert full.autoscaling.metric == FIXED_REPLICAS and any("the owned nodes hold no more" in r
                                                             for r in full.rationale)
    hpa = planned(edge(operations={"platform": "edge-cluster", "cluster_addons": ["metrics-server"]},
                       hardware={"edge_nodes": {**EDGE_NODES, "count": 4}}))
    assert hpa.autoscaling.metric == "cpu" and hpa.autoscaling.max_replicas > hpa.autoscaling.min_replicas
    slots = hpa.compute.owned_nodes * hpa.compute.replicas_per_node - defaults.SURGE_REPLICAS
    assert hpa.autoscaling.max_replicas <= slots and hpa.rollout_surge == defaults.SURGE_REPLICAS
    assert any("CPU HorizontalPodAutoscaler" in r for r in hpa.rationale)


def test_monitoring_only_where_prometheus_is_declared(bp):
    assert bp.monitored is False
    assert any("no ServiceMonitor, PrometheusRule or dashboard" in r for r in bp.rationale)
    with_prometheus = planned(edge(operations={"platform": "edge-cluster",
                                               "cluster_addons": ["kube-prometheus-stack"]}))
    assert with_prometheus.monitored is True


def test_the_plan_says_what_the_operator_provides(bp):
    [provide] = [r for r in bp.rationale if r.startswith("the operator provides:")]
    ra = bp.roles_anywhere
    assert ra.certificate_secret == "kiosk-intent-roles-anywhere" and ra.certificate_common_name == bp.stack
    for needed in ("servingblueprints:kubeconfig", ra.certificate_secret, f"subject CN {bp.stack}",
                   "servingblueprints:rolesAnywhereCaBundle"):
        assert needed in provide


def test_nodes_short_of_the_peak_are_refused_naming_the_shortfall():
    nodes = {**EDGE_NODES, "count": 1}
    data = edge(hardware={"edge_nodes": nodes}, traffic={"peak_requests_per_s": 400, "mean_input_tokens": 64})
    with pytest.raises(SizingError) as caught:
        planned(data)
    message = str(caught.value)
    # derive the shortfall from the unconstrained plan: replicas at that shape plus the surge, over the one node
    need = int(message.split(" node(s) of ")[0].rsplit(" ", 1)[-1])
    assert "hardware.edge_nodes.count is 1" in message and f"add {need - 1} node(s)" in message and need > 1
    assert f"raise hardware.edge_nodes.count to >= {need}" in message  # proven: planned again with it
    applied = planned({**data, "hardware": {"edge_nodes": {**nodes, "count": need}}})
    assert applied.compute.replicas <= need * applied.compute.replicas_per_node


def test_max_replicas_beyond_the_nodes_names_two_fixes_each_of_which_plans():
    data = edge(operations={"platform": "edge-cluster", "cluster_addons": ["metrics-server", "kube-prometheus-stack"]},
                environments={"prod": {"region": "eu-west-1", "max_replicas": 50}})
    with pytest.raises(SizingError) as caught:
        planned(data, "prod")
    lower, more = caught.value.groups
    assert [f.field for (f,) in (lower, more)] == ["environments.prod.max_replicas", "hardware.edge_nodes.count"]
    slots = lower[0].value
    assert planned({**data, "environments": {"prod": {"region": "eu-west-1", "max_replicas": slots}}},
                   "prod").autoscaling.max_replicas == slots
    count = more[0].value
    assert planned({**data, "hardware": {"edge_nodes": {**data["hardware"]["edge_nodes"], "count": count}}},
                   "prod").autoscaling.max_replicas == 50


def test_a_single_owned_node_full_at_the_peak_rolls_out_one_replica_at_a_time():
    # 4 vCPUs hold one replica of 3 (the only shape whose vCPUs // share counts the replicas it holds)
    one = planned(edge(hardware={"edge_nodes": {**EDGE_NODES, "count": 1, "vcpus": 4}}, slo={"latency_p95_ms": 150}))
    assert one.compute.replicas == one.autoscaling.max_replicas == one.compute.replicas_per_node
    assert one.rollout_surge == 0  # no room for an extra replica: maxSurge 0, maxUnavailable 1
    assert any("a rolling update replaces one replica at a time" in r for r in one.rationale)
    from components.rollout import deployment_rollout

    assert deployment_rollout(one)["strategy"]["rolling_update"] == {"max_surge": 0, "max_unavailable": 1}


def test_nodes_that_cannot_hold_one_replica_are_refused_naming_the_field():
    with pytest.raises(SizingError, match=r"hardware.edge_nodes.memory_gib=1 cannot hold one replica"):
        planned(edge(hardware={"edge_nodes": {**EDGE_NODES, "memory_gib": 1}}))
    with pytest.raises(SizingError, match=r"hardware.edge_nodes.vcpus=1 leaves no whole vCPU"):
        planned(edge(hardware={"edge_nodes": {**EDGE_NODES, "vcpus": 1}}))
    with pytest.raises(SizingError, match=r"slo.latency_p95_ms\) on hardware.edge_nodes"):
        planned(edge(slo={"latency_p95_ms": 2}))


def test_max_replicas_beyond_the_nodes_is_refused():
    data = edge(operations={"platform": "edge-cluster", "cluster_addons": ["metrics-server"]},
                environments={"shop": {"region": "eu-west-1", "max_replicas": 50}})
    with pytest.raises(SizingError, match=r"environments.shop.max_replicas=50: .* lower max_replicas to <= "):
        planned(data)


def test_an_image_without_a_build_for_the_nodes_architecture_is_refused(monkeypatch):
    monkeypatch.setattr(defaults, "ONNXRUNTIME_IMAGE", "vllm/vllm-openai:v0.24.0")  # catalogued x86_64 only
    with pytest.raises(SizingError) as caught:
        planned(NEW_USER_EDGE)
    message = str(caught.value)
    assert "engine image vllm/vllm-openai:v0.24.0 is built for x86_64 only" in message
    assert "cannot start on arm64 nodes" in message and "hardware.edge_nodes.cpu_arch" in message
    x86 = planned(edge(hardware={"edge_nodes": {**EDGE_NODES, "cpu_arch": "x86_64"}}))
    assert x86.engine.image == "vllm/vllm-openai:v0.24.0"


def test_an_https_source_needs_no_aws_identity():
    sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    bp = planned(edge(model={**NEW_USER_EDGE["model"], "weights_uri": "https://models.shop.example/intent/model.onnx",
                             "sha256": sha}))
    assert bp.roles_anywhere is None and bp.model.sha256 == sha
    assert any(f"refuses it unless its SHA-256 is {sha}" in r for r in bp.rationale)


def test_the_edge_exposure_follows_the_declared_ingress_controller():
    bp = planned(edge(operations={"platform": "edge-cluster", "cluster_addons": ["traefik"]},
                      exposure={"hostname": "intent.shop.internal", "tls_secret_name": "intent-tls"}))
    exposure = bp.network.exposure
    assert exposure.via is ExposureVia.INGRESS and bp.network.exposed_by == "traefik"
    assert (exposure.ingress_class_name, exposure.ingress_namespace) == ("traefik", "traefik")
    assert bp.serving_port == defaults.PLAIN_PORT  # TLS ends at the Ingress
    lb = planned(edge(operations={"platform": "edge-cluster", "cluster_addons": ["metallb"]},
                      exposure={"via": "load-balancer", "tls_secret_name": "intent-tls"}))
    assert lb.network.exposed_by == "metallb" and lb.proxy_terminates_tls and lb.serving_port == defaults.TLS_PORT


@st.composite
def edge_requirements(draw) -> dict:
    nodes = {"count": draw(st.integers(1, 6)), "vcpus": draw(st.sampled_from([2, 4, 8, 16, 32, 64])),
             "memory_gib": draw(st.sampled_from([2, 4, 8, 16, 64])),
             "cpu_arch": draw(st.sampled_from(["x86_64", "arm64"])),
             "monthly_usd_per_node": draw(st.one_of(st.none(), st.floats(0, 2000))),
             "gflops_per_vcpu": draw(st.one_of(st.none(), st.floats(5, 200)))}
    addons = draw(st.lists(st.sampled_from(["metrics-server", "kube-prometheus-stack", "traefik"]), unique=True))
    return edge(hardware={"edge_nodes": nodes},
                traffic={"peak_requests_per_s": draw(st.floats(0.1, 300)),
                         "mean_input_tokens": draw(st.integers(8, 512))},
                slo={"latency_p95_ms": draw(st.floats(20, 1000))},
                operations={"platform": "edge-cluster", "cluster_addons": addons},
                environments={"dev": {"region": "eu-west-1", "traffic_scale": draw(st.floats(0.05, 1.0))},
                              "shop": {"region": "eu-west-1"}})


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edge_requirements())
def test_every_edge_plan_fits_its_owned_nodes_or_is_refused_with_a_message(data):
    from blueprints.catalog import load_catalog
    from blueprints.core.errors import BlueprintError
    from blueprints.plan.planner import plan
    from tests.conftest import PLAN_DATE

    req = Requirements.model_validate(data)
    try:
        blueprints = plan(req, load_catalog(), as_of=PLAN_DATE)
    except BlueprintError as exc:
        assert "hardware.edge_nodes" in str(exc) or "slo.latency_p95_ms" in str(exc)
        return
    nodes = req.hardware.edge_nodes
    for bp in blueprints:
        c, a = bp.compute, bp.autoscaling
        assert c.owned_nodes == nodes.count and c.instance_type is None and bp.storage is None
        assert bp.engine.intra_op_threads == c.cpu_per_replica
        assert c.replicas_per_node * c.cpu_per_replica <= nodes.vcpus * defaults.NODE_ALLOCATABLE_CPU_FRACTION
        assert c.replicas_per_node * c.memory_gib_per_replica <= nodes.memory_gib
        assert math.ceil((a.max_replicas + bp.rollout_surge) / c.replicas_per_node) <= nodes.count
        assert 1 <= c.replicas <= a.max_replicas
        [line] = bp.predictions.cost_lines
        assert line.item.startswith("owned edge nodes")
        assert line.usd_per_hour == pytest.approx((nodes.monthly_usd_per_node or 0) / 730, abs=1e-4)
        assert (a.metric == "cpu") == ("metrics-server" in req.operations.cluster_addons and a.max_replicas
                                       > a.min_replicas)
        assert bp.monitored == ("kube-prometheus-stack" in req.operations.cluster_addons)
    assert plan(req, load_catalog(), as_of=PLAN_DATE) == blueprints  # deterministic
