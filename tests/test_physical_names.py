"""Physical names (`physical-names`, `blueprints/catalog/names.yaml`): every name a stack gives AWS, Kubernetes or Helm
fits its type, including Pulumi's never-truncated auto-names `<logical>-<7 random>`; the longest names the schemas
allow (a 40-character service, a 20-character environment, a 40-character custom platform) in the longest region
the policies allow (eu-central-1) plan and preview clean."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from blueprints.catalog.names import load_name_catalog
from blueprints.review.deployability.names import aws_name
from blueprints.review.preview import PreviewReport, RegisteredResource
from blueprints.review.deployability.checks import check_deployability
from components.naming import BUCKET, EVENT_RULE, ROLE, bounded, fit
from tests.conftest import ROOT
from tests.kept_apart import reviewed

NAMES = load_name_catalog()


@pytest.fixture(scope="module")
def long_names(tmp_path_factory) -> dict[str, PreviewReport]:
    return reviewed("long-names", tmp_path_factory.mktemp("long-names"))


def _findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=ROOT / "stacks") if f.check == "physical-names"]


def _with(report: PreviewReport, record: RegisteredResource, **changes) -> PreviewReport:
    new = dataclasses.replace(record, **changes)
    return dataclasses.replace(report, resources=[new if r.urn == record.urn else r for r in report.resources])


def _one(report: PreviewReport, type_token: str, contains: str) -> RegisteredResource:
    [record] = [r for r in report.resources if r.type == type_token and contains in r.name]
    return record


def test_the_longest_names_plan_and_preview_clean(long_names):
    assert len(long_names) == 8
    assert max(len(stack) for stack in long_names) == 40 + 1 + 20  # <service>-<environment>
    for stack, report in long_names.items():
        assert report.clean, (stack, [(f.check, f.message) for f in [*report.deployability, *report.signals]],
                              report.manifest_problems, [v.message for v in report.mandatory_violations])


def test_every_aws_name_of_the_longest_stacks_fits_its_type(long_names):
    checked = 0
    for report in long_names.values():
        for record in report.resources:
            found = aws_name(record, NAMES)
            if found is None:
                continue
            rule = NAMES.aws_rule(record.type)
            assert rule.problem(found[0]) is None, (record.type, found)
            checked += 1
    assert checked > 80


def test_karpenters_long_logical_names_are_fitted_within_64_characters(long_names):
    report = long_names["platform-integration-shared-gpu-platform-westeu01"]
    rule = _one(report, "aws:cloudwatch/eventRule:EventRule", "-capacity-reservation")
    role = _one(report, "aws:iam/role:Role", "-controller-role")
    for record in (rule, role):
        name, auto = aws_name(record, NAMES)
        assert auto and len(name) == 64  # the longest logical name (56) plus '-' and 7 random characters
        assert name.startswith("platform-integration-")


def test_an_auto_name_over_the_limit_is_a_finding_naming_the_type_and_its_limit(long_names):
    report = long_names["platform-production-eucentral-eu-central-1"]
    rule = _one(report, "aws:cloudwatch/eventRule:EventRule", "-capacity-reservation")
    unfitted = "platform-production-eucentral-eu-central-1-addons-karpenter-capacity-reservation"
    [message] = _findings(_with(report, rule, name=unfitted))
    assert "EventRule" in message and "88 characters, above the limit of 64" in message
    assert "within 56 characters" in message


def test_an_explicit_name_over_the_limit_or_outside_its_characters_is_a_finding(long_names):
    report = long_names["managed-summarization-endpoint-for-legal-production-eucentral"]
    endpoint = next(r for r in report.resources if r.type == "aws:sagemaker/endpoint:Endpoint")
    for bad, why in (("x" * 64, "64 characters, above the limit of 63"), ("legal-endpoint-", "characters or shape")):
        inputs = {**endpoint.inputs, "name": bad}
        [message] = _findings(_with(report, endpoint, inputs=inputs))
        assert why in message and "shorten name" in message


def test_an_auto_named_bucket_is_lower_cased_and_refused_with_an_underscore(long_names):
    report = long_names["multilingual-customer-support-assistants-production-eucentral"]
    bucket = next(r for r in report.resources if r.type == "aws:s3/bucket:Bucket")
    assert aws_name(dataclasses.replace(bucket, name="Models-A"), NAMES)[0] == "models-a-0000000"
    [message] = _findings(_with(report, bucket, name="models_a"))
    assert "Bucket" in message and "characters or shape" in message


def test_kubernetes_names_labels_containers_and_releases_are_checked(long_names):
    report = long_names["multilingual-customer-support-assistants-production-eucentral"]
    service = next(r for r in report.resources if r.type == "kubernetes:core/v1:Service")
    inputs = copy.deepcopy(service.inputs)
    inputs["metadata"]["name"] = "9-starts-with-a-digit"       # a Service name is an RFC 1035 label
    inputs["metadata"]["labels"]["team"] = "x" * 64
    messages = _findings(_with(report, service, inputs=inputs))
    assert len(messages) == 2
    assert any("metadata.name '9-starts-with-a-digit'" in m for m in messages)
    assert any("metadata.labels.team" in m and "64 characters" in m for m in messages)
    deployment = next(r for r in report.resources if r.type == "kubernetes:apps/v1:Deployment")
    inputs = copy.deepcopy(deployment.inputs)
    inputs["spec"]["template"]["spec"]["containers"][0]["name"] = "Engine"
    [message] = _findings(_with(report, deployment, inputs=inputs))
    assert "container 'Engine'" in message
    platform = long_names["platform-production-eucentral-eu-central-1"]
    release = next(r for r in platform.resources if r.type == "kubernetes:helm.sh/v3:Release")
    [message] = _findings(_with(platform, release, inputs={**release.inputs, "name": "r" * 54}))
    assert "Helm release" in message and "above the limit of 53" in message


def test_every_aws_type_the_program_registers_is_classified_in_the_name_catalog(long_names):
    types = {r.type for report in long_names.values() for r in report.resources
             if r.type.startswith("aws:") and r.custom and not r.read}
    classified = {r.type for r in NAMES.aws} | set(NAMES.unnamed)
    assert types - classified == set()
    assert len(types) > 35


def test_fit_keeps_a_name_that_fits_and_shortens_a_long_one_stably_and_uniquely_keeping_its_suffix():
    assert fit("platform-prod-us-east-1-addons", "lbc-role", ROLE) == "platform-prod-us-east-1-addons-lbc-role"
    component = "platform-production-eucentral-eu-central-1-addons-karpenter"
    fitted = fit(component, "controller-role", ROLE)
    assert len(fitted) == 56 and fitted == fit(component, "controller-role", ROLE)
    assert fitted.startswith("platform-production-") and fitted.endswith("-controller-role")
    assert fitted != fit(component.replace("prod", "stag"), "controller-role", ROLE)
    assert len(fit(component, "bucket", BUCKET)) == 55 and len(fit(component, "x" * 60, EVENT_RULE)) == 56
    assert fit(component, "vpc", "aws:ec2/vpc:Vpc") == f"{component}-vpc"  # a type without a name rule
    assert len(bounded("a" * 70, "aws:sagemaker/endpoint:Endpoint")) == 63
    assert not bounded("a" * 54 + "-" * 16, "aws:sagemaker/endpoint:Endpoint").rstrip("0123456789abcdef").endswith("--")


@pytest.mark.parametrize("rule", NAMES.aws, ids=lambda r: r.type)
def test_every_aws_name_rule_has_a_source_and_a_pattern_its_longest_auto_name_meets(rule):
    assert rule.source and rule.max >= 8
    if rule.autonamed:
        assert rule.problem(NAMES.autoname_of("a" * NAMES.longest_logical(rule), rule)) is None
        assert rule.problem(NAMES.autoname_of("a" * (NAMES.longest_logical(rule) + 1), rule)) is not None
