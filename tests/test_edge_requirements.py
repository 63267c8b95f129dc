"""Edge-cluster requirements: every new field is bounded and a bad value exits 2 naming the file, the field and the
fix; what an edge cluster cannot do (GPUs, an undeclared load balancer, hf:// sources...) is refused the same way;
every field is in `blueprint schema`."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.core.errors import RequirementsError
from blueprints.requirements.service import Requirements, load_requirements
from blueprints.requirements.exposure import NODE_PORT_RANGE

runner = CliRunner()

#: An edge-cluster requirements file as a new user writes it: the model, the load, the SLO, the nodes they own.
NEW_USER_EDGE = {
    "service": "kiosk-intent",
    "owner": "store-ops",
    "cost_center": "cc-4100",
    "model": {"id": "distilbert-sst2", "format": "onnx", "precision": "fp32",
              "weights_uri": "s3://store-models/kiosk-intent/"},
    "traffic": {"peak_requests_per_s": 10, "mean_input_tokens": 64},
    "slo": {"latency_p95_ms": 100},
    "hardware": {"edge_nodes": {"count": 2, "vcpus": 8, "memory_gib": 16, "cpu_arch": "arm64"}},
    "operations": {"platform": "edge-cluster"},
    "environments": {"shop": {"region": "eu-west-1"}},  # not production: its cluster may run no Prometheus
}


def edge(**changes) -> dict:
    """`NEW_USER_EDGE` with sections merged one level deep (None deletes a key)."""
    data = copy.deepcopy(NEW_USER_EDGE)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        elif isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def refused(tmp_path, data: dict, *messages: str) -> str:
    """`blueprint plan` of `data` exits 2 with every message, the file's name and no traceback."""
    (tmp_path / "Pulumi.yaml").write_text("name: servingblueprints\n")  # a project of its own
    path = tmp_path / "stacks" / "requirements" / "edge.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["plan", str(path), "--no-policy", "--out-dir", str(tmp_path / "out"),
                                 "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert str(path.name) in result.output
    for message in messages:
        assert message in result.output, result.output
    assert not (tmp_path / "out").exists()  # nothing written
    return result.output


def test_the_new_users_file_loads(tmp_path):
    path = tmp_path / "edge.yaml"
    path.write_text(yaml.safe_dump(NEW_USER_EDGE))
    req = load_requirements(path)
    assert req.hardware.edge_nodes.count == 2 and req.operations.declared_addons == []


EDGE_NODES = NEW_USER_EDGE["hardware"]["edge_nodes"]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("count", 0, "greater than or equal to 1"), ("count", 1001, "less than or equal to 1000"),
    ("vcpus", 0, "greater than or equal to 1"), ("vcpus", 1025, "less than or equal to 1024"),
    ("memory_gib", 0, "greater than 0"), ("memory_gib", 30_000, "less than or equal to 24576"),
    ("cpu_arch", "riscv64", "'x86_64' or 'arm64'"),
    ("monthly_usd_per_node", -1, "greater than or equal to 0"),
    ("gflops_per_vcpu", 0, "greater than 0"), ("gflops_per_vcpu", 5000, "less than or equal to 2000"),
    ("cores", 8, "unknown field"),
])
def test_edge_node_fields_are_bounded(tmp_path, field, value, message):
    refused(tmp_path, edge(hardware={"edge_nodes": {**EDGE_NODES, field: value}}),
            f"hardware.edge_nodes.{field}", message)


@pytest.mark.parametrize(("section", "field", "value", "message"), [
    ("exposure", "node_port", NODE_PORT_RANGE[0] - 1, "greater than or equal to 30000"),
    ("exposure", "node_port", NODE_PORT_RANGE[1] + 1, "less than or equal to 32767"),
    ("exposure", "via", "gateway", "'load-balancer', 'ingress' or 'node-port'"),
    ("exposure", "tls_secret_name", "Not_A_Secret", "exposure.tls_secret_name"),
    ("exposure", "ingress_class_name", "-nginx", "exposure.ingress_class_name"),
    ("exposure", "ingress_namespace", "Kube-System", "exposure.ingress_namespace"),
])
def test_exposure_fields_are_bounded(tmp_path, section, field, value, message):
    extra = {"via": "ingress"} if field.startswith("ingress") else {"via": "node-port"} if field == "node_port" else {}
    refused(tmp_path, edge(**{section: {**extra, field: value}}), f"{section}.{field}", message)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("session_duration_s", 899, "greater than or equal to 900"),
    ("session_duration_s", 43_201, "less than or equal to 43200"),
    ("certificate_secret", "Bad Secret", "should be "),
    ("certificate_common_name", "x" * 65, "at most 64 characters"),
    ("acm_pca_arn", "arn:aws:acm:eu-west-1:123456789012:certificate/x", "should be "),
])
def test_roles_anywhere_fields_are_bounded(tmp_path, field, value, message):
    refused(tmp_path, edge(operations={"platform": "edge-cluster", "roles_anywhere": {field: value}}),
            f"operations.roles_anywhere.{field}", message)


@pytest.mark.parametrize(("model", "message"), [
    ({"weights_uri": "https://models.shop.example/intent/model.onnx"}, "needs `sha256`"),
    ({"sha256": "a" * 64}, "`sha256` checks an https:// download"),
    ({"weights_uri": "https://models.shop.example/intent/model.onnx", "sha256": "A" * 64}, "model.sha256"),
    ({"weights_uri": "ftp://models.shop.example/model.onnx"}, "model.weights_uri"),
])
def test_weights_checksums_are_checked_where_they_enter(tmp_path, model, message):
    refused(tmp_path, edge(model={**NEW_USER_EDGE["model"], **model}), message)


@pytest.mark.parametrize(("changes", "messages"), [
    ({"hardware": {"accelerators": ["nvidia-gpu"], "edge_nodes": EDGE_NODES}},
     ("hardware.accelerators: ['nvidia-gpu']", "are CPU nodes", "add cpu")),
    ({"hardware": None}, ("needs hardware.edge_nodes",)),
    ({"hardware": {"edge_nodes": EDGE_NODES, "cpu_arch": "x86_64"}}, ("hardware.cpu_arch: x86_64 contradicts",)),
    ({"hardware": {"edge_nodes": EDGE_NODES, "allowed_instance_families": ["c7g"]}},
     ("hardware.allowed_instance_families: restricts EC2 types",)),
    ({"operations": {"platform": "edge-cluster", "preference": "managed"}}, ("operations.preference: managed",)),
    ({"compliance": {"customer_managed_kms": True}}, ("compliance.customer_managed_kms",)),
    ({"environments": {"dev": {"region": "eu-west-1", "spot": True}}}, ("environments.dev.spot",)),
    ({"model": {**NEW_USER_EDGE["model"], "weights_uri": "hf://distilbert/distilbert-base-uncased"}},
     ("model.weights_uri: an edge cluster has no model store", "https:// URL")),
    ({"exposure": {"tls_certificate_arn": "arn:aws:acm:eu-west-1:123456789012:certificate/"
                                          "0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"}},
     ("exposure.tls_certificate_arn", "exposure.tls_secret_name")),
    ({"operations": {"platform": "edge-cluster", "cluster_addons": ["aws-load-balancer-controller"]}},
     ("run only on AWS", "metallb")),
    ({"operations": {"platform": "edge-cluster", "roles_anywhere": {}},
      "model": {**NEW_USER_EDGE["model"], "weights_uri": "https://x.example/m.onnx", "sha256": "a" * 64}},
     ("operations.roles_anywhere: reads s3:// sources",)),
    ({"model": {**NEW_USER_EDGE["model"], "format": "safetensors", "weights_uri": "https://x.example/m.safetensors",
                "sha256": "a" * 64}},
     ("model.format: safetensors: an https:// source is one file", "give an s3:// prefix")),
])
def test_what_an_edge_cluster_cannot_do_is_refused_naming_the_field(tmp_path, changes, messages):
    refused(tmp_path, edge(**changes), *messages)


def test_edge_settings_off_an_edge_cluster_are_refused(tmp_path):
    data = edge(operations={"platform": "existing-cluster"})
    refused(tmp_path, data, "hardware.edge_nodes: edge_nodes describes an edge cluster's owned nodes")
    data = edge(hardware=None, operations={"platform": "eks", "roles_anywhere": {}})
    refused(tmp_path, data, "roles_anywhere gives an edge cluster's pods AWS credentials")
    data = edge(hardware=None, operations={"platform": "eks"},
                model={**NEW_USER_EDGE["model"], "weights_uri": "https://x.example/m.onnx", "sha256": "a" * 64})
    refused(tmp_path, data, "an https:// source is for edge clusters")


def test_text_generation_on_an_edge_cluster_is_refused_naming_the_gpus_the_nodes_lack(tmp_path):
    data = edge(model={"id": "llama-3.1-8b", "weights_uri": "s3://store-models/llama/"}, slo={},
                traffic={"peak_requests_per_s": 1, "mean_input_tokens": 64})
    refused(tmp_path, data, "llama-3-1-8b generate text, which needs GPUs", "hardware.edge_nodes are CPU nodes",
            "operations.platform eks or existing-cluster")


@pytest.mark.parametrize(("exposure", "addons", "messages"), [
    ({"via": "load-balancer"}, [], ("exposure.via load-balancer needs a LoadBalancer implementation", "metallb",
                                    "node-port or ingress")),
    ({"via": "ingress"}, ["metrics-server"], ("exposure.via ingress needs an ingress controller",
                                              "traefik (class traefik)")),
    ({"via": "ingress", "ingress_class_name": "nginx"}, ["traefik"], ("ingress_class_name 'nginx' is served by no",)),
    ({"via": "ingress"}, ["traefik", "ingress-nginx"], ("set exposure.ingress_class_name",)),
    ({"via": "ingress", "allowed_cidrs": ["10.20.0.0/16"]}, ["traefik"], ("traefik cannot restrict a plain Ingress",)),
    ({"via": "load-balancer", "tls_secret_name": "tls"}, ["metallb"], ()),
    ({"via": "node-port", "scope": "public", "allowed_cidrs": ["203.0.113.0/24"]}, [],
     ("scope public needs tls_certificate_arn or tls_secret_name",)),
])
def test_an_exposure_needing_an_add_on_the_cluster_does_not_declare_is_refused(tmp_path, exposure, addons, messages):
    data = edge(exposure=exposure, operations={"platform": "edge-cluster", "cluster_addons": addons})
    if not messages:  # the control: metallb declared, TLS by a Secret the proxy serves
        Requirements.model_validate(data)
        return
    refused(tmp_path, data, *messages)


def test_an_existing_cluster_that_declares_add_ons_must_declare_its_load_balancer(tmp_path):
    data = edge(hardware=None, operations={"platform": "existing-cluster", "cluster_addons": ["metrics-server"]})
    with pytest.raises(Exception, match="needs a LoadBalancer implementation"):
        Requirements.model_validate(data)
    # ...and one that declares nothing is judged by the preview, as before
    Requirements.model_validate(edge(hardware=None, operations={"platform": "existing-cluster"}))


def test_every_new_field_is_in_blueprint_schema(tmp_path):
    out = tmp_path / "schema.json"
    assert runner.invoke(app, ["schema", "--out", str(out)]).exit_code == 0
    schema = json.loads(out.read_text())
    defs = schema["$defs"]
    nodes = defs["EdgeNodes"]["properties"]
    assert (nodes["count"]["minimum"], nodes["count"]["maximum"]) == (1, 1000)
    assert (nodes["vcpus"]["minimum"], nodes["vcpus"]["maximum"]) == (1, 1024)
    assert nodes["memory_gib"]["exclusiveMinimum"] == 0 and nodes["memory_gib"]["maximum"] == 24_576
    assert set(defs["EdgeNodes"]["required"]) == {"count", "vcpus", "memory_gib", "cpu_arch"}
    assert {"monthly_usd_per_node", "gflops_per_vcpu"} <= set(nodes)
    ra = defs["RolesAnywhere"]["properties"]
    assert (ra["session_duration_s"]["minimum"], ra["session_duration_s"]["maximum"]) == (900, 43_200)
    exposure = defs["Exposure"]["properties"]
    assert {"via", "ingress_class_name", "ingress_namespace", "node_port", "tls_secret_name"} <= set(exposure)
    port = next(s for s in exposure["node_port"]["anyOf"] if s.get("type") == "integer")
    assert (port["minimum"], port["maximum"]) == NODE_PORT_RANGE
    assert set(defs["ExposureVia"]["enum"]) == {"load-balancer", "ingress", "node-port"}
    assert "edge-cluster" in defs["Platform"]["enum"]
    assert "sha256" in defs["ModelSpec"]["properties"]
    # the schema accepts the new user's file and rejects what the loader rejects on bounds
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    assert not list(validator.iter_errors(NEW_USER_EDGE))
    bad = edge(hardware={"edge_nodes": {**EDGE_NODES, "count": 0}})
    assert list(validator.iter_errors(bad))
    with pytest.raises(RequirementsError):
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(bad))
        load_requirements(path)


def test_every_kubernetes_version_accepted_runs_the_credential_helper_as_a_native_sidecar():
    from blueprints.core import defaults
    from blueprints.catalog.addons import load_platform_catalog

    def minor(version: str) -> int:
        return int(version.split(".")[1])

    oldest = min(load_platform_catalog().versions, key=minor)
    assert minor(oldest) >= minor(defaults.NATIVE_SIDECAR_MIN_KUBERNETES)
