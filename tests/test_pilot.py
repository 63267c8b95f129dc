"""`blueprint pilot`: pilot stacks of the cheapest distinct finalists, each planned like any stack on its environment's
platform (one replica whose peak is its capacity within the SLO, an expiry tag), previewed clean by the same review,
left alone by `plan --check`; bad flags exit 2 naming the flag."""

from __future__ import annotations

import datetime as dt
import re
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.sections import PILOT_EXPIRES_TAG
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.core.project import project_paths
from blueprints.drift import check_plans, check_stacks
from blueprints.plan.platforms import standalone_platform_file
from blueprints.plan.stability import hardware_of
from blueprints.requirements.service import load_requirements
from blueprints.review.stack import review_stack
from tests.conftest import CHAT_EXAMPLE, PLAN_DATE, ROOT
from tests.kept_apart import project_skeleton
from tests.plan_preview import findings

runner = CliRunner()


@pytest.fixture(scope="module")
def piloted(tmp_path_factory):
    """A project holding the bundled chat assistant alone, planned (`blueprint plan`), then piloted with three
    finalists (`blueprint pilot`): (project root, the pilot command's result)."""
    root = tmp_path_factory.mktemp("pilot")
    folder = project_skeleton(root)
    path = folder / "chat-assistant.yaml"
    shutil.copy(CHAT_EXAMPLE, path)
    platform = standalone_platform_file(load_requirements(path))
    (folder / "platform.yaml").write_text(yaml.safe_dump(platform.model_dump(mode="json", exclude_defaults=True)))
    planned = runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat()])
    assert planned.exit_code == 0, planned.output
    result = runner.invoke(app, ["pilot", str(path), "--finalists", "3", "--hours", "8"])
    return root, result


def _pilots(root):
    return {p.name: read_stack_config(p) for p in sorted((root / "stacks").glob("Pulumi.chat-assistant-pilot-*.yaml"))}


def test_pilot_writes_three_distinct_finalists_each_one_replica_at_its_capacity_with_an_expiry(piloted):
    root, result = piloted
    assert result.exit_code == 0, result.output
    pilots = _pilots(root)
    assert list(pilots) == [f"Pulumi.chat-assistant-pilot-{k}.yaml" for k in (1, 2, 3)]
    hardware = {hardware_of(bp.model_dump(mode="json")) for bp in pilots.values()}
    assert len(hardware) == 3  # distinct (instance type, degree, KV-cache dtype, engine)
    expires = {bp.pilot.expires for bp in pilots.values()}
    assert len(expires) == 1
    [when] = expires
    ahead = dt.datetime.strptime(when, "%Y-%m-%dT%H:%MZ").replace(tzinfo=dt.timezone.utc) - dt.datetime.now(
        dt.timezone.utc)
    assert dt.timedelta(hours=7, minutes=50) < ahead <= dt.timedelta(hours=8, minutes=1)
    dev = read_stack_config(root / "stacks" / "Pulumi.chat-assistant-dev.yaml")
    for k, bp in enumerate(pilots.values(), 1):
        assert bp.stack == f"chat-assistant-pilot-{k}" and bp.pilot.candidate == k and bp.pilot.finalists == 3
        assert bp.environment == "dev" and bp.platform.stack == dev.platform.stack
        assert bp.platform.namespace == bp.stack != dev.platform.namespace
        assert bp.tags[PILOT_EXPIRES_TAG] == when and bp.pilot.hours == 8
        # one replica planned at a replica's capacity within the SLO in dev: it carries the peak, and the benchmark's
        # sweep (to 1.5x the per-replica peak, at one pod) runs past the capacity the pilot's plan predicts
        peak, capacity = bp.model.traffic.peak_requests_per_s, bp.predictions.requests_per_s_capacity
        assert bp.compute.replicas == 1 and bp.autoscaling.min_replicas == 1
        assert peak <= capacity + 1e-3 < 1.5 * peak
        assert any(r.startswith(f"pilot {k} of 3: the cheapest distinct candidate no. ") for r in bp.rationale)
        assert any(when in r and "pulumi destroy --stack" in r for r in bp.rationale)
    # the cheapest at prod first, as the report says
    monthly = [float(m.replace(",", "")) for m in re.findall(r"at prod: \d+ replica\(s\), \$([\d,]+)/month",
                                                              result.output)]
    assert len(monthly) == 3 and monthly == sorted(monthly)


def test_pilot_prints_the_cost_for_its_hours_and_the_order_to_deploy_and_destroy(piloted):
    root, result = piloted
    pilots = list(_pilots(root).values())
    costs = [float(c.replace(",", "")) for c in re.findall(r"\$([\d,.]+) for 8 h \(at most", result.output)]
    # nodes x price x hours, fixed items pro rata
    assert costs == [pytest.approx(bp.planned_monthly_usd * 8 / 730, abs=0.01) for bp in pilots]
    total = float(re.search(r"The pilots cost \$([\d,.]+) for 8 h", result.output)[1].replace(",", ""))
    assert total == pytest.approx(sum(costs), abs=0.02)
    lines = [line.strip() for line in result.output.splitlines()]
    order = [i for i, line in enumerate(lines) if line.startswith(("pulumi up", "pulumi destroy"))]
    stacks = [lines[i].split("--stack ")[1].split()[0] for i in order]
    platform = pilots[0].platform.stack
    assert stacks == [platform, *(bp.stack for bp in pilots), *(bp.stack for bp in pilots)]
    assert all(lines[i].startswith("pulumi destroy") for i in order[-3:])


def test_every_pilot_stack_previews_clean_under_the_same_review_as_any_stack(piloted):
    root, _ = piloted
    for name, bp in _pilots(root).items():
        report = review_stack(bp.stack, stacks_dir=root / "stacks", program=ROOT / "__main__.py",
                              policy_dir=root / "policies" / "config")
        assert report.clean, (name, findings(report))
        # the pilot's own NodePool and namespace beside the dev stack's
        pools = [m for m in report.manifests if m.get("kind") == "NodePool"]
        assert [p["metadata"]["name"] for p in pools] == [bp.stack]


def test_plan_check_leaves_the_pilot_stacks_alone_and_the_preview_says_it_skips_their_source_comparison(piloted):
    root, _ = piloted
    project = project_paths(root / "stacks" / "requirements" / "chat-assistant.yaml")
    assert check_plans(None, project) == []  # the plan's stacks as planned, the pilots not reported as orphans
    drifts, skipped = check_stacks(["chat-assistant-pilot-1"], project)
    assert drifts == [] and "is a pilot stack (`blueprint pilot`)" in skipped


@pytest.mark.parametrize("args, flag", [
    (["--finalists", "0"], "--finalists 0"), (["--finalists", "6"], "--finalists 6"), (["--hours", "0"], "--hours 0"),
    (["--hours", "169"], "--hours 169"), (["--env", "qa"], "--env qa"),
])
def test_a_bad_flag_exits_2_naming_it(piloted, args, flag):
    root, _ = piloted
    before = sorted(p.name for p in (root / "stacks").iterdir())
    result = runner.invoke(app, ["pilot", str(root / "stacks" / "requirements" / "chat-assistant.yaml"), *args])
    assert result.exit_code == 2 and flag in result.output, result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in (root / "stacks").iterdir()) == before


@pytest.mark.parametrize("service", ["support-sentiment", "rag-assistant"])
def test_a_service_other_than_one_text_generation_model_is_refused_saying_what_pilots_are_for(project, service):
    result = runner.invoke(app, ["pilot", f"stacks/requirements/{service}.yaml"])
    assert result.exit_code == 2, result.output
    assert "pilots compare the finalists of one text-generation model" in result.output
    assert not list((project / "stacks").glob(f"Pulumi.{service}-pilot-*.yaml"))


def test_a_managed_service_pilots_its_sagemaker_finalist_which_previews_clean(project):
    """prototype-summarizer (operations.preference managed): SageMaker's LMI finalists only, on its `pilot`
    environment (non-production), each an endpoint of its own named after the pilot stack."""
    result = runner.invoke(app, ["pilot", "stacks/requirements/prototype-summarizer.yaml", "--hours", "4"])
    assert result.exit_code == 0, result.output
    pilots = _pilots_of(project, "prototype-summarizer")
    assert pilots and all(bp.archetype.value == "sagemaker-endpoint" for bp in pilots)
    if len(pilots) < 3:
        assert f"only {len(pilots)} of --finalists 3" in result.output
    for bp in pilots:
        assert bp.compute.instance_type.startswith("ml.") and bp.pilot.hours == 4
        report = review_stack(bp.stack, stacks_dir=project / "stacks", program=ROOT / "__main__.py")
        assert report.clean, findings(report)
        [endpoint] = [r for r in report.resources if r.type == "aws:sagemaker/endpoint:Endpoint"]
        assert endpoint.inputs["name"] == bp.stack and endpoint.inputs["tags"][PILOT_EXPIRES_TAG] == bp.pilot.expires


def _pilots_of(root, service):
    return [read_stack_config(p) for p in sorted((root / "stacks").glob(f"Pulumi.{service}-pilot-*.yaml"))]


def test_pilots_in_a_production_environment_keep_its_warm_floor_each_replica_at_its_capacity(project):
    """--env prod (99.9 %: 2 warm replicas): the pilots meet the production floors the preview holds them to, each
    replica planned at one replica's capacity, and they preview clean, on another engine (TensorRT-LLM) too."""
    path = project / "stacks" / "requirements" / "chat-assistant.yaml"
    data = yaml.safe_load(path.read_text())
    data["operations"] = {**data.get("operations", {}), "engines": ["tensorrt-llm"]}
    data["budget"] = {**data.get("budget", {}), "max_monthly_usd": 500000}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["pilot", "stacks/requirements/chat-assistant.yaml", "--env", "prod",
                                 "--finalists", "2"])
    assert result.exit_code == 0, result.output
    pilots = _pilots_of(project, "chat-assistant")
    assert len(pilots) == 2 and {bp.engine.kind for bp in pilots} == {"tensorrt-llm"}
    for bp in pilots:
        assert bp.production and bp.compute.replicas == bp.autoscaling.min_replicas == 2
        per_replica = bp.model.traffic.peak_requests_per_s / bp.compute.replicas
        assert per_replica <= bp.predictions.requests_per_s_capacity / 2 + 1e-3 < 1.5 * per_replica
        report = review_stack(bp.stack, stacks_dir=project / "stacks", program=ROOT / "__main__.py")
        assert report.clean, (bp.stack, findings(report))
