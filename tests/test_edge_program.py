"""The program on an edge cluster: no AWS load balancer, no Pod Identity, no model store, no EC2 price; IAM Roles
Anywhere scoped to the model prefix; replicas and threads that fit the declared nodes; Ingress / NodePort / MetalLB
exposure with TLS and the API key; monitoring and autoscaling only from declared add-ons. An EKS-backed existing
cluster keeps its NLB and Pod Identity."""

from __future__ import annotations

import json
import math
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from blueprints.core import defaults
from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.preview import run_preview
from blueprints.review.report.stack import render_markdown, render_terminal
from blueprints.contracts.stackconfig import write_stack_configs
from components.access import PROXY_TLS_DIR, proxy_config
from tests.blueprint_builders import manifests, pod_spec, run_program
from tests.bundled import bundled_review
from tests.conftest import ROOT
from tests.test_edge_planning import planned
from tests.test_edge_requirements import NEW_USER_EDGE, edge

EDGE = "edge-classifier-prod"
AWS_LB = "service.beta.kubernetes.io/aws-load-balancer-"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
EDGE_CONFIG = {"servingblueprints:kubeconfig": "apiVersion: v1", "servingblueprints:rolesAnywhereCaBundle": CA}
runner = CliRunner()


def run_edge(bp):
    return run_program(bp, extra_config=EDGE_CONFIG, secret_keys=["servingblueprints:kubeconfig"])


@pytest.fixture(scope="module")
def report():
    return bundled_review(EDGE)


def _types(report) -> set[str]:
    return {r.type for r in report.resources}


def _one(report, type_token: str):
    [record] = [r for r in report.resources if r.type == type_token]
    return record


def _manifest(report, kind: str) -> dict:
    [obj] = [m for m in report.manifests if m["kind"] == kind and not m["metadata"]["name"].endswith("-metrics")]
    return obj


def test_the_bundled_edge_example_previews_clean(report):
    assert report.clean, (report.deployability, report.policy_verdicts, report.manifest_problems)
    assert report.blueprint.platform.kind == "edge-cluster"


def test_no_aws_load_balancer_pod_identity_model_store_or_ec2_price(report):
    for m in report.manifests:
        assert not [k for k in (m["metadata"].get("annotations") or {}) if k.startswith(AWS_LB)], m["metadata"]
        assert "elbv2.k8s.aws/pod-readiness-gate-inject" not in (m["metadata"].get("labels") or {})
    assert not [m for m in report.manifests if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"]
    types = _types(report)
    assert "aws:eks/podIdentityAssociation:PodIdentityAssociation" not in types
    assert "aws:s3/bucket:Bucket" not in types and not [t for t in types if t.startswith("aws:kms/")]
    lines = report.blueprint.predictions.cost_lines
    assert not [line.item for line in lines for name in load_catalog().ec2 if name in line.item]
    [line] = lines
    assert line.item.startswith("owned edge nodes")
    # the bundled file declares $95 a node: the nodes the peak uses, at that price
    used = math.ceil(report.blueprint.compute.replicas / report.blueprint.compute.replicas_per_node)
    assert line.monthly_usd == pytest.approx(used * 95, abs=0.01)
    # rendered as owned hardware at the monthly figure, never at an hourly price
    console = Console(record=True, width=300)
    render_terminal(report, console)
    cost_text = [t for t in console.export_text().splitlines() if t.startswith("Monthly cost")][0]
    assert f"x ${95:,.2f}/month" in cost_text and "/h" not in cost_text
    assert re.search(r"\|\s*owned\s*\|", render_markdown(report))
    # the pods never reach the EKS Pod Identity agent: their NetworkPolicy has no egress to it
    policy = [m for m in report.manifests if m["kind"] == "NetworkPolicy"
              and m["metadata"]["name"] == report.blueprint.workload_name][0]
    assert defaults.POD_IDENTITY_AGENT_CIDR not in json.dumps(policy["spec"]["egress"])


def test_roles_anywhere_trusts_only_the_anchor_and_the_planned_certificate(report):
    bp = report.blueprint
    anchor = _one(report, "aws:rolesanywhere/trustAnchor:TrustAnchor")
    assert anchor.inputs["source"]["sourceType"] == "CERTIFICATE_BUNDLE"
    assert anchor.inputs["source"]["sourceData"]["x509CertificateData"].startswith("-----BEGIN CERTIFICATE-----")
    role = _one(report, "aws:iam/role:Role")
    [statement] = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "rolesanywhere.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:SetSourceIdentity", "sts:TagSession"]
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == [report.outputs["roles_anywhere_trust_anchor_arn"]]
    assert statement["Condition"]["StringEquals"] == {
        "aws:PrincipalTag/x509Subject/CN": bp.roles_anywhere.certificate_common_name}
    profile = _one(report, "aws:rolesanywhere/profile:Profile")
    assert profile.inputs["roleArns"] == [report.outputs["serving_role_arn"]]
    assert profile.inputs["durationSeconds"] == bp.roles_anywhere.session_duration_s


def test_the_role_only_reads_the_model_prefix(report):
    bucket, _, prefix = report.blueprint.model.source_uri.removeprefix("s3://").partition("/")
    policy = json.loads(_one(report, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert actions == {"s3:GetObject", "s3:ListBucket"}  # read-only
    [get] = [s for s in policy["Statement"] if s["Action"] == ["s3:GetObject"]]
    assert get["Resource"] == [f"arn:aws:s3:::{bucket}/{prefix}*"]
    [listing] = [s for s in policy["Statement"] if s["Action"] == ["s3:ListBucket"]]
    assert listing["Resource"] == [f"arn:aws:s3:::{bucket}"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}*"]}}


def test_pods_get_credentials_from_the_signing_helper_with_the_operators_certificate(report):
    bp = report.blueprint
    pod = _manifest(report, "Deployment")["spec"]["template"]["spec"]
    helper, fetch = pod["initContainers"]
    assert helper["image"] == defaults.CREDENTIAL_HELPER_IMAGE and helper["restartPolicy"] == "Always"
    args = helper["args"]
    assert args[0] == "serve"
    flags = dict(zip(args[1::2], args[2::2]))
    assert flags["--trust-anchor-arn"] == report.outputs["roles_anywhere_trust_anchor_arn"]
    assert flags["--profile-arn"] == report.outputs["roles_anywhere_profile_arn"]
    assert flags["--role-arn"] == report.outputs["serving_role_arn"]
    assert flags["--certificate"].endswith("/tls.crt") and flags["--private-key"].endswith("/tls.key")
    [cert] = [v for v in pod["volumes"] if v["name"] == "roles-anywhere-certificate"]
    assert cert["secret"]["secretName"] == bp.roles_anywhere.certificate_secret
    env = {e["name"]: e.get("value") for e in fetch["env"]}
    assert env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] == f"http://127.0.0.1:{flags['--port']}"
    assert bp.model.source_uri in fetch["command"]
    assert "AWS_ACCESS_KEY_ID" not in json.dumps(report.manifests)  # never static keys


def test_replicas_and_threads_fit_the_declared_nodes(report):
    bp = report.blueprint
    pod = _manifest(report, "Deployment")["spec"]["template"]["spec"]
    engine = pod["containers"][0]
    limit = engine["resources"]["limits"]["cpu"]
    assert {"name": "OMP_NUM_THREADS", "value": limit} in engine["env"]
    assert int(limit) == bp.engine.intra_op_threads == bp.compute.cpu_per_replica
    assert int(limit) <= math.floor(bp.compute.vcpus_per_node * defaults.NODE_ALLOCATABLE_CPU_FRACTION)
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "arm64"}  # only the owned nodes' architecture
    hpa = _manifest(report, "HorizontalPodAutoscaler")  # metrics-server is declared
    slots = bp.compute.owned_nodes * bp.compute.replicas_per_node
    assert hpa["spec"]["maxReplicas"] + bp.rollout_surge <= slots and bp.rollout_surge == defaults.SURGE_REPLICAS
    rolling = _manifest(report, "Deployment")["spec"]["strategy"]["rollingUpdate"]
    assert rolling == {"maxSurge": defaults.SURGE_REPLICAS, "maxUnavailable": 0}


def test_the_ingress_terminates_tls_and_only_its_controller_reaches_the_proxy(report):
    exposure = report.blueprint.network.exposure
    ingress = _manifest(report, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "traefik"
    assert ingress["spec"]["tls"] == [{"secretName": exposure.tls_secret_name, "hosts": [exposure.hostname]}]
    assert report.outputs["endpoint"] == f"https://{exposure.hostname}/v2"
    service = [m for m in report.manifests if m["kind"] == "Service"
               and m["metadata"]["name"] == report.blueprint.workload_name][0]
    assert service["spec"]["type"] == "ClusterIP"
    policy = [m for m in report.manifests if m["kind"] == "NetworkPolicy"
              and m["metadata"]["name"] == report.blueprint.workload_name][0]
    [proxy_rule] = [r for r in policy["spec"]["ingress"] if r["ports"] == [{"port": defaults.PROXY_PORT,
                                                                            "protocol": "TCP"}]]
    assert proxy_rule["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": exposure.ingress_namespace}}}]


def test_monitoring_objects_only_with_a_declared_prometheus(report):
    # The bundled production stack declares kube-prometheus-stack (production is monitored); a non-production
    # cluster without it gets none.
    assert {r.type for r in report.resources if r.type.startswith("kubernetes:monitoring.coreos.com/")} == {
        "kubernetes:monitoring.coreos.com/v1:ServiceMonitor", "kubernetes:monitoring.coreos.com/v1:PrometheusRule"}
    run = run_edge(planned(NEW_USER_EDGE))
    assert not [r for r in run.records if r.type.startswith("kubernetes:monitoring.coreos.com/")]
    assert not [m for m in manifests(run) if m["kind"] == "ConfigMap" and "dashboard" in m["metadata"]["name"]]


def test_a_new_users_edge_file_plans_and_previews_with_exit_0(tmp_path, monkeypatch):
    import shutil

    import yaml

    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    (tmp_path / "stacks" / "requirements").mkdir(parents=True)
    (tmp_path / "stacks" / "requirements" / "kiosk-intent.yaml").write_text(yaml.safe_dump(NEW_USER_EDGE))
    monkeypatch.chdir(tmp_path)
    planned_ = runner.invoke(app, ["plan", "stacks/requirements/kiosk-intent.yaml", "--as-of", "2026-12-01"])
    assert planned_.exit_code == 0, planned_.output
    result = runner.invoke(app, ["preview", "kiosk-intent-shop", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    types = {r["type"] for r in data["resources"]}
    assert "aws:rolesanywhere/profile:Profile" in types and "aws:eks/podIdentityAssociation:PodIdentityAssociation" \
        not in types
    kinds = {m["kind"] for m in data["manifests"]}
    assert "HorizontalPodAutoscaler" not in kinds and "ServiceMonitor" not in kinds  # nothing declared
    [service] = [m for m in data["manifests"] if m["kind"] == "Service"
                 and m["metadata"]["name"] == "kiosk-intent-onnxruntime"]
    assert service["spec"]["type"] == "NodePort"


def test_a_nodeport_with_a_tls_secret_is_served_by_the_proxy_over_tls():
    bp = planned(edge(exposure={"via": "node-port", "node_port": 30443, "tls_secret_name": "kiosk-tls",
                                "allowed_cidrs": ["10.42.0.0/16"]}))
    run = run_edge(bp)
    [service] = [m for m in manifests(run) if m["kind"] == "Service" and m["metadata"]["name"] == bp.workload_name]
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"][0]["nodePort"] == 30443 and service["spec"]["ports"][0]["port"] == 443
    assert service["spec"]["externalTrafficPolicy"] == "Local"  # the NetworkPolicy sees the clients' addresses
    assert service["metadata"]["annotations"]["servingblueprints.io/tls-secret"] == "kiosk-tls"
    pod = pod_spec(run)
    [proxy] = [c for c in pod["containers"] if c["name"] == "auth-proxy"]
    assert {"name": "proxy-tls", "mountPath": PROXY_TLS_DIR, "readOnly": True} in proxy["volumeMounts"]
    [tls] = [v for v in pod["volumes"] if v["name"] == "proxy-tls"]
    assert tls["secret"]["secretName"] == "kiosk-tls"
    chain = proxy_config(bp, "k" * 40)["static_resources"]["listeners"][0]["filter_chains"][0]
    certs = chain["transport_socket"]["typed_config"]["common_tls_context"]["tls_certificates"]
    assert certs == [{"certificate_chain": {"filename": f"{PROXY_TLS_DIR}/tls.crt"},
                      "private_key": {"filename": f"{PROXY_TLS_DIR}/tls.key"}}]
    assert run.outputs["endpoint"] == "https://<node-address>:30443/v2"
    policy = [m for m in manifests(run) if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] == bp.workload_name][0]
    [proxy_rule] = [r for r in policy["spec"]["ingress"] if r["ports"][0]["port"] == defaults.PROXY_PORT]
    assert proxy_rule["from"] == [{"ipBlock": {"cidr": "10.42.0.0/16"}}]
    # without TLS the proxy speaks plain HTTP and has no certificate
    plain = planned(edge(exposure={"via": "node-port"}))
    assert "transport_socket" not in proxy_config(plain, "k")["static_resources"]["listeners"][0]["filter_chains"][0]


def test_a_metallb_load_balancer_has_no_aws_annotations_and_its_preview_needs_metallb_declared(tmp_path):
    bp = planned(edge(operations={"platform": "edge-cluster", "cluster_addons": ["metallb"]},
                      exposure={"via": "load-balancer"}))
    run = run_edge(bp)
    [service] = [m for m in manifests(run) if m["kind"] == "Service" and m["metadata"]["name"] == bp.workload_name]
    assert service["spec"]["type"] == "LoadBalancer" and service["spec"]["externalTrafficPolicy"] == "Local"
    assert not [k for k in service["metadata"]["annotations"] if k.startswith(AWS_LB)]
    assert service["spec"]["loadBalancerSourceRanges"] == sorted(defaults.PRIVATE_CIDRS)
    assert run.outputs["endpoint"].startswith("http://192.168.50.")  # MetalLB's address from its pool (mocked)
    for declared, findings in ((["metallb"], 0), (["traefik"], 1)):
        folder = tmp_path / "-".join(declared)
        write_stack_configs([bp], folder, source="kiosk.yaml", cluster_addons={bp.stack: declared})
        (folder / f"Pulumi.{bp.stack}.yaml").write_text(
            (folder / f"Pulumi.{bp.stack}.yaml").read_text() + "  servingblueprints:rolesAnywhereCaBundle: |\n"
            + "".join(f"    {line}\n" for line in CA.splitlines()))
        found = check_deployability(run_preview(bp.stack, stacks_dir=folder, program=ROOT / "__main__.py"),
                                    stacks_dir=folder)
        assert len(found) == findings, found
        if findings:
            assert found[0].check == "addon-installed" and "needs add-on metallb" in found[0].message


def test_an_https_source_is_downloaded_and_checked_without_any_aws_resource():
    sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    url = "https://models.shop.example/intent/model.onnx"
    bp = planned(edge(model={**NEW_USER_EDGE["model"], "weights_uri": url, "sha256": sha}))
    run = run_program(bp, extra_config={"servingblueprints:kubeconfig": "apiVersion: v1"},
                      secret_keys=["servingblueprints:kubeconfig"])
    assert not [r.type for r in run.records if r.type.startswith("aws:")]  # no AWS account needed at all
    [fetch] = pod_spec(run)["initContainers"]
    assert fetch["image"] == defaults.CURL_IMAGE
    command = fetch["command"]
    assert url in command and sha in command and f"/models/{bp.model.name}/1/model.onnx" in command
    assert "sha256sum -c -" in command[2] and "--proto =https" in command[2]


def test_a_customer_managed_source_key_is_decrypted_only_through_s3_by_the_roles_anywhere_role():
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    bp = planned(edge(model={**NEW_USER_EDGE["model"], "weights_kms_key_arn": key}))
    assert bp.model.source_kms_key_arn == key
    assert any(f"kms:Decrypt on {key} only through S3" in r for r in bp.rationale)
    assert not [r for r in bp.rationale if r.startswith("weights: ")]  # no model store: the edge sentence says it
    run = run_edge(bp)
    [policy] = [json.loads(r.inputs["policy"]) for r in run.records if r.type == "aws:iam/rolePolicy:RolePolicy"]
    [decrypt] = [s for s in policy["Statement"] if s["Action"] == ["kms:Decrypt"]]
    assert decrypt["Resource"] == [key]
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "s3.eu-west-1.amazonaws.com"}}


def test_a_new_source_on_an_edge_cluster_warns_of_no_sync_job_replacement():
    """The review of a re-plan: an edge cluster has no sync Job, so a changed source replaces none (an existing
    cluster's review still warns that its Job copies the weights again)."""
    from blueprints.review.changes import review_changes

    before = planned(NEW_USER_EDGE)
    after = planned(edge(model={**NEW_USER_EDGE["model"], "weights_uri": "s3://store-models/kiosk-intent-v2/"}))
    review = review_changes(after.stack, before.model_dump(mode="json"), after)
    assert [c for c in review.requirements if "weights_uri" in c.path or "source_uri" in c.path]
    assert not [r for r in review.replacements if r.what == "weights sync Job"]
    existing = {"operations": {"platform": "existing-cluster", "cluster_addons": [
                    "aws-load-balancer-controller", "kube-prometheus-stack", "metrics-server"]},
                "hardware": {"edge_nodes": None, "accelerators": ["cpu"], "allowed_instance_families": ["c7g"]}}
    old = planned(edge(**existing))
    new = planned(edge(**existing, model={**NEW_USER_EDGE["model"],
                                           "weights_uri": "s3://store-models/kiosk-intent-v2/"}))
    assert [r for r in review_changes(new.stack, old.model_dump(mode="json"), new).replacements
            if r.what == "weights sync Job"]


def test_owned_nodes_that_cannot_hold_the_autoscaler_fail_the_preview(tmp_path):
    from tests.test_deployability import _copy_stacks, _edit_config

    stacks = _copy_stacks(tmp_path, EDGE)

    def widen(config):
        config["servingblueprints:blueprint"]["autoscaling"]["max_replicas"] = 9
    _edit_config(stacks, EDGE, widen)
    report = run_preview(EDGE, stacks_dir=stacks, program=ROOT / "__main__.py")
    [finding] = [f for f in check_deployability(report, stacks_dir=stacks) if f.check == "owned-nodes"]
    # nine replicas leave no room on three nodes, so the rollout surges none: still nine pods for three nodes
    assert "may run 9 replicas plus 0 surge" in finding.message and "counts 3" in finding.message


def test_a_replica_larger_than_an_owned_node_is_unschedulable(tmp_path):
    from tests.test_deployability import _copy_stacks, _edit_config

    stacks = _copy_stacks(tmp_path, EDGE)

    def whole_node(config):
        bp = config["servingblueprints:blueprint"]
        bp["compute"]["cpu_per_replica"] = bp["compute"]["vcpus_per_node"]
        bp["engine"]["intra_op_threads"] = bp["compute"]["vcpus_per_node"]
    _edit_config(stacks, EDGE, whole_node)
    report = run_preview(EDGE, stacks_dir=stacks, program=ROOT / "__main__.py")
    found = [f for f in check_deployability(report, stacks_dir=stacks) if f.check == "schedulable"]
    assert found and "the edge cluster's 3 owned arm64 node(s)" in found[0].message


def test_a_hand_edited_image_without_an_arm64_build_is_refused_with_exit_2(tmp_path, monkeypatch):
    import shutil

    from tests.test_deployability import _copy_stacks, _edit_config

    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    stacks = _copy_stacks(tmp_path / "stacks", EDGE)
    _edit_config(stacks, EDGE, lambda config: config["servingblueprints:blueprint"]["engine"].update(
        image="vllm/vllm-openai:v0.24.0"))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["preview", EDGE, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "vllm/vllm-openai:v0.24.0 is built for x86_64 only" in result.output and "Traceback" not in result.output


def test_an_eks_backed_existing_cluster_keeps_its_nlb_pod_identity_and_model_store():
    report = bundled_review("support-sentiment-prod")
    assert report.clean and report.blueprint.platform.kind == "existing-cluster"
    [service] = [m for m in report.manifests if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"]
    assert service["metadata"]["annotations"][f"{AWS_LB}scheme"] == "internal"
    types = _types(report)
    assert "aws:s3/bucket:Bucket" in types and not [t for t in types if t.startswith("aws:rolesanywhere/")]
    assert report.blueprint.compute.instance_type.startswith("c7g.")
    assert report.blueprint.predictions.cost_lines[0].item == f"CPU nodes ({report.blueprint.compute.instance_type})"
