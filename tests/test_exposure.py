"""Exposure in the requirements: internal by default; public only with TLS (an ACM certificate in the stack's region)
and source CIDRs, 0.0.0.0/0 only acknowledged, never with private_only; the plan says who can reach the endpoint."""

from __future__ import annotations

import pytest

from blueprints.requirements.service import Requirements
from blueprints.requirements.exposure import ExposureScope
from test_bad_input import fails, project, write_requirements  # noqa: F401 - the fixture
from tests.conftest import example_data

CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"


def with_exposure(**exposure):
    def mutate(data):
        data["exposure"] = exposure
        data["environments"] = {"prod": {"region": "us-east-1"}}
    return mutate


def test_a_service_without_an_exposure_section_is_internal():
    assert Requirements.model_validate(example_data()).exposure.scope is ExposureScope.INTERNAL


@pytest.mark.parametrize("exposure, message", [
    ({"scope": "public", "allowed_cidrs": ["203.0.113.0/24"]}, "exposure.tls_certificate_arn: scope public needs "
     "tls_certificate_arn"),
    ({"scope": "public", "tls_certificate_arn": CERT}, "scope public needs allowed_cidrs"),
    ({"scope": "public", "tls_certificate_arn": CERT, "allowed_cidrs": ["0.0.0.0/0"]},
     "set acknowledge_open_internet: true"),
    ({"tls_certificate_arn": "arn:aws:iam::123456789012:server-certificate/x"}, "exposure.tls_certificate_arn"),
    ({"allowed_cidrs": ["10.0.0.1/8"]}, "exposure.allowed_cidrs[0]: '10.0.0.1/8' is not an IPv4 network with its host "
     "bits zero"),
    ({"allowed_cidrs": ["10.0.0.0"]}, "exposure.allowed_cidrs[0]: should be an IPv4 CIDR such as 203.0.113.0/24"),
    ({"scope": "everyone"}, "exposure.scope"),
    ({"hostname": "-bad-.example.com"}, "exposure.hostname"),
], ids=["no-tls", "no-cidrs", "open-internet-unacknowledged", "not-acm", "host-bits", "no-prefix", "bad-scope",
        "bad-hostname"])
def test_bad_exposure_exits_2_naming_the_field_and_the_fix(project, exposure, message):  # noqa: F811
    fails(["plan", write_requirements(project, with_exposure(**exposure))], "bad.yaml", message)


def test_public_together_with_private_only_exits_2(project):  # noqa: F811
    def mutate(data):
        with_exposure(scope="public", tls_certificate_arn=CERT, allowed_cidrs=["203.0.113.0/24"])(data)
        data["compliance"]["private_only"] = True
    fails(["plan", write_requirements(project, mutate)], "contradicts compliance.private_only",
          "use exposure.scope: internal")


def test_a_certificate_of_another_region_exits_2(project):  # noqa: F811
    def mutate(data):
        with_exposure(scope="public", tls_certificate_arn=CERT, allowed_cidrs=["203.0.113.0/24"])(data)
        data["environments"] = {"prod": {"region": "us-west-2"}}
    fails(["plan", write_requirements(project, mutate)], "ACM certificate in us-east-1",
          "environments.prod.region: exposure.tls_certificate_arn is an ACM certificate in us-east-1 but this "
          "environment is in us-west-2", "request (or import) the certificate in us-west-2")


def test_an_acknowledged_open_internet_plans_and_the_plan_says_who_can_reach_it(project):  # noqa: F811
    from blueprints.contracts.stackconfig import read_config
    from typer.testing import CliRunner

    from blueprints.cli import app

    path = write_requirements(project, with_exposure(scope="public", tls_certificate_arn=CERT,
                                                     allowed_cidrs=["0.0.0.0/0"], acknowledge_open_internet=True,
                                                     hostname="chat.example.com"))
    result = CliRunner().invoke(app, ["plan", path, "--as-of", "2026-12-01", "--out-dir", str(project / "out")])
    assert result.exit_code == 0, result.output
    [written] = (project / "out").glob("Pulumi.*-prod.yaml")
    bp = read_config(written)
    assert bp.network.exposure.scope is ExposureScope.PUBLIC
    [access] = [r for r in bp.rationale if r.startswith("access:")]
    assert "https://chat.example.com" in access and "the whole internet (acknowledged)" in access
    assert "API key" in access


def test_a_sagemaker_plan_says_it_is_iam_authorised():
    from blueprints.plan.builders.context import access_reasons

    req = Requirements.model_validate(example_data())
    [line] = access_reasons(req, managed=True)
    assert "IAM-authorised" in line and "sagemaker:InvokeEndpoint" in line


def test_every_bundled_load_balancer_is_internal_but_the_public_examples_which_has_tls_ranges_and_a_key():
    from pathlib import Path

    from tests.bundled import bundled_review

    root = Path(__file__).resolve().parents[1]
    schemes = {}
    for path in sorted((root / "stacks").glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi."):-len(".yaml")]
        if stack.startswith("platform-") or stack.startswith("prototype-"):
            continue  # platforms have no serving Service; the prototype is a SageMaker endpoint (IAM-authorised)
        report = bundled_review(stack)
        assert report.clean, stack
        balancers = [m for m in report.manifests if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"]
        if report.blueprint.autoscaling.min_replicas == 0:  # scaled to zero: no load balancer, the KEDA interceptor
            assert balancers == []
            continue
        if not report.blueprint.network.aws_load_balancer:  # the edge example: the shop's Ingress, no AWS
            assert balancers == [] and report.blueprint.platform.kind == "edge-cluster"
            [ingress] = [m for m in report.manifests if m["kind"] == "Ingress"]
            assert ingress["metadata"]["annotations"]["servingblueprints.io/exposure-scope"] == "internal"
            continue
        [svc] = balancers
        annotations = svc["metadata"]["annotations"]
        schemes[stack] = annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"]
        if stack == "partner-api-prod":
            assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"].startswith("arn:aws:acm:")
            assert svc["spec"]["loadBalancerSourceRanges"] == ["198.51.100.0/24", "203.0.113.0/24"]
            assert [m for m in report.manifests if m["kind"] == "Secret" and m["metadata"]["name"] == "partner-api-api-key"]
            assert report.outputs["api_key"] == "[secret]"
            assert report.outputs["endpoint"] == "https://llm.partners.example.com/v1"
    assert {s for s, scheme in schemes.items() if scheme != "internal"} == {"partner-api-prod"}
    from blueprints.contracts.stackconfig import read_config

    subjects = [read_config(path) for path in (root / "stacks").glob("Pulumi.*.yaml")]
    served = {bp.stack for bp in subjects if getattr(bp, "archetype", None) is not None and bp.archetype.value !=
              "sagemaker-endpoint" and bp.autoscaling.min_replicas > 0
              and bp.network.aws_load_balancer}
    assert set(schemes) == served and len(served) >= 8  # every self-hosted stack not scaled to zero has one
    # (edge clusters have the shop's Ingress instead: above)


def test_a_stack_config_cannot_be_public_and_private_only_nor_use_a_certificate_of_another_region(chat_prod):
    from pydantic import ValidationError

    from tests.blueprint_builders import derive

    public = {"scope": "public", "tls_certificate_arn": CERT, "allowed_cidrs": ["203.0.113.0/24"]}
    with pytest.raises(ValidationError, match="contradicts network.private_only"):
        derive(chat_prod, network={"private_only": True, "exposure": public})
    with pytest.raises(ValidationError, match="a load balancer uses an ACM certificate of its own region"):
        derive(chat_prod, network={"exposure": {**public, "tls_certificate_arn": CERT.replace("us-east-1",
                                                                                              "eu-west-1")}})


def test_a_public_service_that_scales_to_zero_exits_2(project):  # noqa: F811
    def mutate(data):
        with_exposure(scope="public", tls_certificate_arn=CERT, allowed_cidrs=["203.0.113.0/24"])(data)
        data["environments"] = {"dev": {"region": "us-east-1", "min_replicas": 0}}
    fails(["plan", write_requirements(project, mutate)], "environments.dev.min_replicas: min_replicas 0 with "
          "exposure.scope public",
          "set min_replicas >= 1 or use exposure.scope: internal")


def test_a_scaled_to_zero_service_admits_the_keda_interceptor_to_the_proxy():
    from tests.blueprint_builders import manifests, run_program
    from tests.conftest import plan_env, requirements_with

    dev = plan_env(requirements_with(), "dev")
    assert dev.autoscaling.min_replicas == 0 and dev.serving_port == 80
    [policy] = [m for m in manifests(run_program(dev))
                if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] == "chat-assistant-vllm"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}}} in \
        policy["spec"]["ingress"][0]["from"]


def test_an_internal_endpoint_with_a_private_certificate_terminates_tls_on_the_internal_nlb(chat_prod):
    """TLS inside the VPC without a public domain: a private certificate (AWS Private CA, issued through ACM) on
    the internal NLB, exactly as a public one on an internet-facing NLB."""
    from blueprints.contracts.blueprint import Blueprint
    from components.exposure import LB_SSL_CERT
    from tests.blueprint_builders import manifests, run_program

    private_cert = "arn:aws:acm:us-east-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"
    data = chat_prod.model_dump(mode="json")
    data["network"]["exposure"].update(tls_certificate_arn=private_cert, hostname="chat.ml.internal")
    bp = Blueprint.model_validate(data)
    [svc] = [m for m in manifests(run_program(bp)) if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"]
    annotations = svc["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert annotations[LB_SSL_CERT] == private_cert
    assert [p["port"] for p in svc["spec"]["ports"]] == [443]
