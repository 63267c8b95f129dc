"""Policies on service workloads: non-root containers, no model control, allowed registries, no system namespaces,
NetworkPolicies, and public endpoints only with TLS, source ranges and the authenticating proxy."""

from __future__ import annotations

import pytest

from test_policy_support import gpu_deployment, main_container, policy_resource, resource_violations, stack_violations

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
LB = "service.beta.kubernetes.io/aws-load-balancer-"
CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"


def test_a_non_root_container_without_capabilities_passes():
    assert resource_violations("containers-run-as-non-root", DEPLOYMENT, gpu_deployment()) == []


def test_run_as_non_root_may_come_from_the_pod():
    d = gpu_deployment(securityContext={"runAsNonRoot": True})
    del main_container(d)["securityContext"]["runAsNonRoot"]
    assert resource_violations("containers-run-as-non-root", DEPLOYMENT, d) == []


@pytest.mark.parametrize("change, problem", [
    ({"runAsNonRoot": None}, "may run as root (runAsNonRoot is unset"),
    ({"runAsUser": 0}, "runs as UID 0 (root)"),
    ({"capabilities": {"drop": ["NET_RAW"]}}, "keeps the runtime's default Linux capabilities"),
    ({"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}, "adds capabilities ['SYS_ADMIN']"),
])
def test_a_container_that_may_run_as_root_or_keeps_capabilities_is_flagged(change, problem):
    d = gpu_deployment()
    sc = main_container(d)["securityContext"]
    sc.update(change)
    if sc.get("runAsNonRoot") is None:
        del sc["runAsNonRoot"]
    [message] = resource_violations("containers-run-as-non-root", DEPLOYMENT, d, name="vllm")
    assert message.startswith("container 'vllm' of Deployment 'vllm' ") and problem in message


@pytest.mark.parametrize("args", [["--model-control-mode=none"], [], ["--model-repository=/models"]])
def test_triton_without_model_control_passes(args):
    d = gpu_deployment()
    main_container(d).update(command=["tritonserver"], args=args)
    assert resource_violations("model-control-disabled", DEPLOYMENT, d) == []


@pytest.mark.parametrize("args", [["--model-control-mode=explicit"], ["--model-control-mode", "poll"],
                                  ["--load-model=embedder"]])
def test_triton_with_model_control_is_flagged(args):
    d = gpu_deployment()
    main_container(d).update(command=["tritonserver"], args=args)
    [message] = resource_violations("model-control-disabled", DEPLOYMENT, d, name="triton")
    assert "enables model control" in message and "--model-control-mode=none" in message


def test_vllm_runtime_lora_updates_are_flagged():
    d = gpu_deployment()
    main_container(d)["env"] = [{"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"}]
    [message] = resource_violations("model-control-disabled", DEPLOYMENT, d)
    assert "LoRA adapters at run time" in message


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "nvcr.io/nvidia/tritonserver:25.10-py3",
                                   "public.ecr.aws/aws-cli/aws-cli:2.31.13", "envoyproxy/envoy:distroless-v1.37.6",
                                   "docker.io/vllm/vllm-openai@sha256:" + "a" * 64])
def test_images_from_the_catalogs_registries_pass(image):
    d = gpu_deployment()
    main_container(d)["image"] = image
    assert resource_violations("images-from-allowed-registries", DEPLOYMENT, d) == []


def test_an_image_from_another_registry_is_flagged_unless_its_ecr_account_is_allowed():
    d = gpu_deployment()
    main_container(d)["image"] = "ghcr.io/someone/vllm:0.11"
    [message] = resource_violations("images-from-allowed-registries", DEPLOYMENT, d, name="vllm")
    assert "comes from 'ghcr.io/someone'" in message and "allowedRegistries" in message
    main_container(d)["image"] = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:0.11"
    assert resource_violations("images-from-allowed-registries", DEPLOYMENT, d)
    assert resource_violations("images-from-allowed-registries", DEPLOYMENT, d,
                               config={"ecrAccountIds": ["123456789012"]}) == []


def test_the_default_registries_cover_every_image_the_project_pins():
    from blueprints.core import defaults
    from policies.rules import RULES_BY_NAME
    from policies.workloads import registry_allowed

    config = RULES_BY_NAME["images-from-allowed-registries"].with_defaults(None)
    pinned = [defaults.VLLM_IMAGE, defaults.TRITON_IMAGE, defaults.ONNXRUNTIME_IMAGE, defaults.AWS_CLI_IMAGE,
              defaults.ENVOY_IMAGE, defaults.HF_DOWNLOAD_IMAGE]
    assert [i for i in pinned if not registry_allowed(i, config)] == []


@pytest.mark.parametrize("namespace", ["kube-system", "default", None])
def test_a_workload_in_a_system_namespace_is_flagged(namespace):
    d = gpu_deployment()
    if namespace is None:
        del d["metadata"]["namespace"]
    else:
        d["metadata"]["namespace"] = namespace
    [message] = resource_violations("no-workloads-in-system-namespaces", DEPLOYMENT, d)
    assert "shared with the cluster's own components" in message
    assert resource_violations("no-workloads-in-system-namespaces", DEPLOYMENT, gpu_deployment()) == []


def labelled(deployment: dict, labels: dict) -> dict:
    deployment["spec"]["template"]["metadata"]["labels"] = labels
    return deployment


def network_policy(selector: dict, types: list[str], name: str = "np", namespace: str = "serving"):
    return policy_resource(POLICY, {"metadata": {"name": name, "namespace": namespace},
                                    "spec": {"podSelector": selector, "policyTypes": types}}, name=name)


def test_a_workload_selected_for_ingress_and_egress_passes():
    d = policy_resource(DEPLOYMENT, labelled(gpu_deployment(), {"app": "vllm"}), name="vllm")
    deny = network_policy({}, ["Ingress", "Egress"], "deny")
    assert stack_violations("workloads-have-network-policy", [d, deny]) == []
    split = [network_policy({"matchLabels": {"app": "vllm"}}, ["Ingress"], "in"),
             network_policy({"matchExpressions": [{"key": "app", "operator": "In", "values": ["vllm"]}]}, ["Egress"])]
    assert stack_violations("workloads-have-network-policy", [d, *split]) == []


@pytest.mark.parametrize("policies, missing", [
    ([], "ingress and egress"),
    ([("matchLabels", {"app": "other"}, ["Ingress", "Egress"], "serving")], "ingress and egress"),
    ([("matchLabels", {"app": "vllm"}, ["Ingress"], "serving")], "egress"),
    ([("matchLabels", {}, ["Ingress", "Egress"], "elsewhere")], "ingress and egress"),
])
def test_a_workload_without_a_network_policy_is_flagged(policies, missing):
    d = policy_resource(DEPLOYMENT, labelled(gpu_deployment(), {"app": "vllm"}), name="vllm")
    found = stack_violations("workloads-have-network-policy",
                             [d, *(network_policy({k: v}, t, namespace=ns) for k, v, t, ns in policies)])
    assert [m.split(":")[0] for _, m in found] == ["Deployment 'vllm'"]
    assert f"restricts its pods' {missing}," in found[0][1]


def lb_service(*, scheme="internet-facing", cert=CERT, ranges=("203.0.113.0/24",), target="api", legacy=False):
    annotations = {} if legacy else {f"{LB}type": "external", f"{LB}nlb-target-type": "ip", f"{LB}scheme": scheme}
    if cert:
        annotations |= {f"{LB}ssl-cert": cert, f"{LB}ssl-ports": "443"}
    spec = {"type": "LoadBalancer", "selector": {"app": "vllm"},
            "ports": [{"name": "api", "port": 443, "targetPort": target}]}
    if ranges:
        spec["loadBalancerSourceRanges"] = list(ranges)
    return policy_resource(SERVICE, {"metadata": {"name": "vllm", "namespace": "serving", "annotations": annotations},
                                     "spec": spec}, name="vllm")


def proxied_deployment():
    d = labelled(gpu_deployment(), {"app": "vllm"})
    main_container(d)["ports"] = [{"name": "http", "containerPort": 8000}]
    d["spec"]["template"]["spec"]["containers"].append(
        {"name": "auth-proxy", "image": "envoyproxy/envoy:distroless-v1.37.6",
         "ports": [{"name": "api", "containerPort": 8080}]})
    return policy_resource(DEPLOYMENT, d, name="vllm")


def test_a_public_endpoint_with_tls_source_ranges_and_the_proxy_passes():
    assert stack_violations("public-endpoint-protected", [lb_service(), proxied_deployment()]) == []
    internal = lb_service(scheme="internal", cert=None, ranges=(), target="http")
    assert stack_violations("public-endpoint-protected", [internal, proxied_deployment()]) == []


@pytest.mark.parametrize("service, problem", [
    (dict(cert=None), "no TLS certificate"),
    (dict(ranges=()), "no source ranges"),
    (dict(target="http"), "reaches container(s) ['vllm'] directly, not an authenticating proxy"),
    (dict(target=9999), "reaches no container of this stack"),
])
def test_a_public_endpoint_without_tls_ranges_or_the_proxy_is_flagged(service, problem):
    [(urn, message)] = stack_violations("public-endpoint-protected", [lb_service(**service), proxied_deployment()])
    assert message.startswith("Service 'vllm' is internet-facing with ") and problem in message


def test_a_load_balancer_outside_the_controller_defaults_to_internet_facing():
    legacy = lb_service(cert=None, legacy=True)
    assert "no TLS certificate" in stack_violations("public-endpoint-protected", [legacy, proxied_deployment()])[0][1]


# --- off AWS load balancers: a NodePort, a MetalLB LoadBalancer, an Ingress (edge and existing clusters) ------------

INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SCOPE = "servingblueprints.io/exposure-scope"
TLS_SECRET = "servingblueprints.io/tls-secret"


def edge_service(*, kind="NodePort", scope="public", tls="kiosk-tls", policy="Local", ranges=("203.0.113.0/24",)):
    annotations = {SCOPE: scope, **({TLS_SECRET: tls} if tls else {})}
    spec = {"type": kind, "selector": {"app": "vllm"}, "externalTrafficPolicy": policy,
            "ports": [{"name": "api", "port": 443, "targetPort": "api"}]}
    if kind == "LoadBalancer" and ranges:
        spec["loadBalancerSourceRanges"] = list(ranges)
    return policy_resource(SERVICE, {"metadata": {"name": "vllm", "namespace": "serving", "annotations": annotations},
                                     "spec": spec}, name="vllm")


def tls_proxied_deployment(secret="kiosk-tls"):
    d = proxied_deployment().props
    d = dict(d)
    d["spec"]["template"]["spec"]["volumes"] = [{"name": "proxy-tls", "secret": {"secretName": secret}}]
    return policy_resource(DEPLOYMENT, d, name="vllm")


def ingress(*, scope="public", tls=True, ranges=True):
    annotations = {SCOPE: scope, **({"nginx.ingress.kubernetes.io/whitelist-source-range": "203.0.113.0/24"}
                                    if ranges else {})}
    spec = {"ingressClassName": "nginx", "rules": [{"host": "kiosk.example", "http": {"paths": [{
        "path": "/", "pathType": "Prefix", "backend": {"service": {"name": "vllm", "port": {"name": "api"}}}}]}}]}
    if tls:
        spec["tls"] = [{"hosts": ["kiosk.example"], "secretName": "kiosk-tls"}]
    return policy_resource(INGRESS, {"metadata": {"name": "vllm", "namespace": "serving", "annotations": annotations},
                                     "spec": spec}, name="vllm-ingress")


def test_a_public_nodeport_or_metallb_service_with_proxy_tls_and_client_addresses_passes():
    for kind in ("NodePort", "LoadBalancer"):
        assert stack_violations("public-endpoint-protected",
                                [edge_service(kind=kind), tls_proxied_deployment()]) == [], kind
    internal = edge_service(scope="internal", tls=None, policy="Cluster")
    assert stack_violations("public-endpoint-protected", [internal, proxied_deployment()]) == []


@pytest.mark.parametrize("service, deployment, problem", [
    (dict(tls=None), None, "no TLS: no servingblueprints.io/tls-secret Secret mounted"),
    (dict(), "other-secret", "no TLS: no servingblueprints.io/tls-secret Secret mounted"),
    (dict(policy="Cluster"), None, "externalTrafficPolicy is not Local"),
    (dict(kind="LoadBalancer", ranges=()), None, "no source ranges (spec.loadBalancerSourceRanges)"),
])
def test_a_public_endpoint_off_aws_without_tls_or_client_addresses_is_flagged(service, deployment, problem):
    resources = [edge_service(**service), tls_proxied_deployment(deployment or "kiosk-tls")]
    [(urn, message)] = stack_violations("public-endpoint-protected", resources)
    assert "is internet-facing with" in message and problem in message and "exposure.tls_secret_name" in message


def test_a_public_ingress_needs_tls_source_ranges_and_the_proxy_behind_it():
    backend = edge_service(kind="ClusterIP", scope="public", tls=None)
    assert stack_violations("public-endpoint-protected", [ingress(), backend, proxied_deployment()]) == []
    [(urn, message)] = stack_violations("public-endpoint-protected",
                                        [ingress(tls=False, ranges=False), backend, proxied_deployment()])
    assert "no TLS (spec.tls" in message and "no source ranges (the ingress controller's" in message
    engine = policy_resource(SERVICE, {"metadata": {"name": "vllm", "namespace": "serving"}, "spec": {
        "type": "ClusterIP", "selector": {"app": "vllm"}, "ports": [{"name": "api", "port": 80, "targetPort": "http"}]}},
        name="vllm")
    [(urn, message)] = stack_violations("public-endpoint-protected", [ingress(), engine, proxied_deployment()])
    assert "reaches container(s) ['vllm'] directly" in message
    assert stack_violations("public-endpoint-protected",
                            [ingress(scope="internal", tls=False, ranges=False), backend, proxied_deployment()]) == []
