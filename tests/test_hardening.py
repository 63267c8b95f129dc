"""Pod hardening and NetworkPolicies: every serving and job container non-root with its image's UID/GID, read-only
root with writable HOME and /tmp, no escalation or capabilities, seccomp RuntimeDefault, no service-account token;
namespaces `restricted` with the reason; default deny plus the allowed traffic."""

from __future__ import annotations

import pytest

from blueprints.review.deployability.pod_security import pod_security_violations
from components.hardening import hardened_pod_spec, image_user
from tests.blueprint_builders import manifests, run_program, triton_blueprint

MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


@pytest.fixture(scope="module")
def chat_run(chat_prod):
    return run_program(chat_prod)


@pytest.fixture(scope="module")
def triton_run(chat_prod):
    return run_program(triton_blueprint(chat_prod, gpu=True))


def pods(run):
    found = {}
    for m in manifests(run):
        if m["kind"] in ("Deployment", "Job"):
            found[m["metadata"]["name"]] = m["spec"]["template"]["spec"]
    return found


@pytest.mark.parametrize("image, user", [("vllm/vllm-openai:v0.11.0", (10001, 10001)),
                                         ("nvcr.io/nvidia/tritonserver:25.10-py3", (1000, 1000)),
                                         ("envoyproxy/envoy:distroless-v1.37.6", (65532, 65532)),
                                         ("public.ecr.aws/aws-cli/aws-cli:2.31.13", (10001, 10001))])
def test_each_image_runs_as_its_documented_user_or_the_default_non_root_one(image, user):
    assert image_user(image) == user


def test_every_serving_and_job_container_is_hardened(chat_run, triton_run):
    seen = set()
    for run in (chat_run, triton_run):
        for name, pod in pods(run).items():
            assert pod["automountServiceAccountToken"] is False, name
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for c in pod.get("initContainers", []) + pod["containers"]:
                sc = c["securityContext"]
                assert (sc["runAsUser"], sc["runAsGroup"]) == image_user(c["image"]) and sc["runAsUser"] != 0
                assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False
                assert sc["capabilities"] == {"drop": ["ALL"]} and sc["readOnlyRootFilesystem"] is True
                env = {e["name"]: e.get("value") for e in c.get("env", [])}
                assert env["HOME"] == "/home/serving" and {"/home/serving", "/tmp"} <= {
                    m["mountPath"] for m in c["volumeMounts"]}
                seen.add(c["image"].split(":")[0])
            assert pod_security_violations(pod, "restricted") == []
    assert {"vllm/vllm-openai", "envoyproxy/envoy", "public.ecr.aws/aws-cli/aws-cli",
            "nvcr.io/nvidia/tritonserver"} <= seen
    accounts = [m for m in manifests(chat_run) if m["kind"] == "ServiceAccount"]
    assert accounts and all(a["automountServiceAccountToken"] is False for a in accounts)


def test_a_root_container_is_rejected_by_the_restricted_level():
    pod = hardened_pod_spec({"containers": [{"name": "c", "image": "vllm/vllm-openai:v0.11.0"}]})
    pod["containers"][0]["securityContext"]["runAsUser"] = 0
    assert "container 'c' runs as UID 0" in pod_security_violations(pod, "restricted")


def test_the_namespace_is_restricted_with_the_reason_beside_the_label(chat_run):
    [ns] = [m for m in manifests(chat_run) if m["kind"] == "Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert "non-root" in ns["metadata"]["annotations"]["servingblueprints.io/pod-security-reason"]


def test_every_workload_is_selected_by_a_default_deny_and_its_own_policy(chat_run, chat_prod):
    policies = {m["metadata"]["name"]: m["spec"] for m in manifests(chat_run) if m["kind"] == "NetworkPolicy"}
    assert policies["chat-assistant-default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    serving = policies["chat-assistant-vllm"]
    proxy, metrics = serving["ingress"]
    assert proxy["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert proxy["from"] == [{"ipBlock": {"cidr": "10.30.0.0/16"}}]  # the platform VPC (platform.yaml vpc_cidr): the NLB's addresses
    assert metrics == {"from": [MONITORING], "ports": [{"port": chat_prod.engine.port, "protocol": "TCP"}]}
    dns, agent, https = serving["egress"]
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert agent == {"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}], "ports": [{"port": 80, "protocol": "TCP"}]}
    assert https["to"][0] == {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8", "172.16.0.0/12",
                                                                          "192.168.0.0/16"]}}
    sync = policies["chat-assistant-weights-sync"]
    assert sync["ingress"] == [] and sync["egress"][-1] == {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
                                                            "ports": [{"port": 443, "protocol": "TCP"}]}


def test_the_allowed_cidrs_reach_the_proxy_with_client_ips_preserved(chat_prod):
    from tests.blueprint_builders import derive

    bp = derive(chat_prod, network={"exposure": {"allowed_cidrs": ["192.168.10.0/24"]}})
    run = run_program(bp)
    [policy] = [m for m in manifests(run) if m["metadata"]["name"] == "chat-assistant-vllm"
                and m["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.30.0.0/16"}},
                                                    {"ipBlock": {"cidr": "192.168.10.0/24"}}]
    [svc] = [m for m in manifests(run) if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"]
    assert svc["spec"]["loadBalancerSourceRanges"] == ["192.168.10.0/24"]
