"""A private SageMaker endpoint alone on its platform (issue 35): the platform is network-only (the VPC's interface
endpoints, no cluster, so no Kubernetes API to make private: `network.private_endpoint` false, no runner), and both
stacks plan and preview clean. The kept-apart folder `tests/data/private-sagemaker` is planned and reviewed as
`blueprint plan` and `blueprint preview` do."""

from __future__ import annotations

import pytest

from blueprints.contracts.platform import PlatformKind
from blueprints.plan.floors import platform_floor_problems
from blueprints.review.preview import PreviewReport
from blueprints.review.stack import service_floors
from blueprints.contracts.stackconfig import read_stack_config, stack_config_path
from tests.kept_apart import reviewed

PLATFORM, SERVICE = "platform-prod-eu-central-1", "private-summarizer-prod"
ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> tuple[dict[str, PreviewReport], object]:
    tmp = tmp_path_factory.mktemp("private-sagemaker")
    return reviewed("private-sagemaker", tmp), tmp / "stacks"


def test_a_private_sagemaker_service_alone_plans_a_network_only_platform_and_both_preview_clean(planned):
    reports, _ = planned
    assert sorted(reports) == [PLATFORM, SERVICE]
    platform = reports[PLATFORM].subject
    assert platform.kind is PlatformKind.NETWORK
    assert platform.network.private_endpoint is False and platform.runner_label is None
    for stack, report in reports.items():
        assert report.clean, (stack, report.deployability, report.signals, report.mandatory_violations,
                              report.manifest_problems)
    endpoints = {r.inputs["serviceName"] for r in reports[PLATFORM].resources if r.type == ENDPOINT}
    assert "com.amazonaws.eu-central-1.sagemaker.runtime" in endpoints


def test_a_network_only_platform_without_the_sagemaker_runtime_endpoint_is_below_its_private_service(planned):
    reports, stacks_dir = planned
    platform = reports[PLATFORM].subject
    path = stack_config_path(stacks_dir, SERVICE)
    floors = service_floors(read_stack_config(path), path, stacks_dir=stacks_dir)
    assert platform_floor_problems(platform, [(SERVICE, floors)]) == []
    kept = [e for e in platform.network.interface_endpoints if e != "sagemaker.runtime"]
    network = platform.network.model_copy(update={"interface_endpoints": kept})
    [problem] = platform_floor_problems(platform.model_copy(update={"network": network}), [(SERVICE, floors)])
    assert "compliance.private_only" in problem.message and SERVICE in problem.message
