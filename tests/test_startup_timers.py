"""Start timers that hold at the slowest copy rate planned for (check `startup-timers`): a SageMaker endpoint's model
download and startup health check had 2x of an unverified 0.25 GiB/s (a 70B: 542 s and 798 s), so a slower copy
failed a healthy endpoint's creation; they now also cover the copy at a quarter of that rate."""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest

from blueprints.core import defaults
from blueprints.catalog.startup import load_startup_catalog
from blueprints.plan.startup import startup_estimate
from blueprints.plan.builders.sagemaker import sagemaker_timer_floors, sagemaker_timers
from blueprints.review.deployability.checks import check_deployability
from blueprints.review.deployability.timers import ENDPOINT_CONFIGURATION
from blueprints.review.preview import PreviewReport
from tests.conftest import ROOT
from tests.bundled import bundled_review

STACKS = ROOT / "stacks"
#: Llama 3.1 70B at FP8: the weights the issue's 542 s / 798 s were planned for.
WEIGHTS_70B_GIB = 67.75


@pytest.fixture(scope="module")
def pilot() -> PreviewReport:
    return bundled_review("prototype-summarizer-pilot")


def _findings(report: PreviewReport) -> list[str]:
    return [f.message for f in check_deployability(report, stacks_dir=STACKS) if f.check == "startup-timers"]


def test_the_timers_cover_the_copy_at_the_slowest_rate():
    assert defaults.SAGEMAKER_SLOWEST_GIB_PER_S == load_startup_catalog().weights.s3_copy_gib_per_s / 4
    _, health, download, _ = sagemaker_timers("llama-70b", WEIGHTS_70B_GIB)
    copy_s = math.ceil(WEIGHTS_70B_GIB / defaults.SAGEMAKER_SLOWEST_GIB_PER_S)
    assert download == copy_s == 1084 > 542
    load_s = startup_estimate(weights_gib=WEIGHTS_70B_GIB, engine_kind="sagemaker", gpu=True).budget.model_load_s
    assert health == copy_s + 2 * load_s > 798
    assert (health, download) == sagemaker_timer_floors(WEIGHTS_70B_GIB)


def test_the_bundled_endpoint_s_timers_hold_and_preview_clean(pilot):
    bp = pilot.blueprint
    health, download = sagemaker_timer_floors(bp.model.weights_gib)
    assert bp.engine.container_startup_health_check_timeout_s >= health
    assert bp.engine.model_data_download_timeout_s >= download
    assert _findings(pilot) == []


def test_the_old_timers_are_a_finding(pilot):
    """2x the predicted 54 s download and 128 s start at 0.25 GiB/s: what the pilot was planned with before."""
    [record] = [r for r in pilot.resources if r.type == ENDPOINT_CONFIGURATION]
    inputs = copy.deepcopy(record.inputs)
    inputs["productionVariants"][0].update(containerStartupHealthCheckTimeoutInSeconds=256,
                                           modelDataDownloadTimeoutInSeconds=108)
    new = dataclasses.replace(record, inputs=inputs)
    report = dataclasses.replace(pilot, resources=[new if r.urn == record.urn else r for r in pilot.resources])
    messages = _findings(report)
    assert len(messages) == 2
    health, download = sagemaker_timer_floors(pilot.blueprint.model.weights_gib)  # the floors the plan keeps
    assert (health, download) == (364, 216)  # 13.49 GiB at 64 MiB/s; + 2x the startup model's 74 s load
    assert any("model download timeout is 108 s" in m and f"need {download} s" in m for m in messages)
    assert any("startup health check timeout is 256 s" in m and f"need {health} s" in m for m in messages)
