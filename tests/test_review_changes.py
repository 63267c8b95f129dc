"""The review of a re-plan: requirement, plan and prediction changes before -> after, and the changes that replace a
resource (`blueprints/catalog/replacements.yaml`), at plan time and against a baseline preview."""

from __future__ import annotations

import copy
import fnmatch
import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.contracts.sections import Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog.replacements import Effect, load_replace_rules
from blueprints.review.changes import FieldChange, review_changes
from blueprints.review.report.changes import review_lines, review_markdown
from blueprints.cli import app
from blueprints.review.diff import diff_reports
from blueprints.review.preview import run_preview
from blueprints.review.stack import baseline_review
from blueprints.contracts.stackconfig import read_stack_config
from tests.blueprint_builders import derive
from tests.conftest import ROOT, plan_env, requirements_with, write_stacks

runner = CliRunner()
CHAT_MODEL = "llama-3-1-8b"


@pytest.fixture(scope="module")
def chat_before(chat_prod) -> Blueprint:
    """The chat service's prod plan (the session's `chat_prod`: `plan_env(requirements_with(), "prod")`)."""
    return chat_prod


@pytest.fixture(scope="module")
def chat_more_traffic(chat_before) -> Blueprint:
    """The chat service at 6.5 requests/s instead of 6: the same hardware (checked in the test)."""
    rps = chat_before.model.traffic.peak_requests_per_s + 0.5
    return plan_env(requirements_with(traffic={"peak_requests_per_s": rps}), "prod")


@pytest.fixture(scope="module")
def chat_other_family(chat_before) -> Blueprint:
    """The chat service restricted to the family of the unrestricted plan's next cheapest option (its rationale's
    `next cheapest:` line): another instance type than that plan's (checked in the test)."""
    [line] = [r for r in chat_before.rationale if r.startswith("next cheapest: ")]
    family = line.removeprefix("next cheapest: ").split(".")[0]
    return plan_env(requirements_with(hardware={"allowed_instance_families": [family]}), "prod")


_summarizers: dict[float, Blueprint] = {}


def _summarizer(rps: float) -> Blueprint:
    """The summarizer's pilot plan at `rps`, planned once per rate in this module (a copy each call)."""
    if rps not in _summarizers:
        _summarizers[rps] = plan_env(requirements_with("prototype-summarizer", traffic={"peak_requests_per_s": rps},
                                                       budget={"max_monthly_usd": 20000}), "pilot")
    return _summarizers[rps].model_copy(deep=True)


def _dump(bp: Blueprint) -> dict:
    return bp.model_dump(mode="json")


# --- plan time: the previous stack config's blueprint against the new one ----------------------------------------


def test_a_traffic_change_that_keeps_the_hardware_lists_requirement_and_predictions_and_replaces_nothing(
        chat_before, chat_more_traffic):
    assert chat_more_traffic.compute.instance_type == chat_before.compute.instance_type  # the premise of this pair
    review = review_changes(chat_more_traffic.stack, _dump(chat_before), chat_more_traffic)
    path = f"models.{CHAT_MODEL}.traffic.peak_requests_per_s"
    assert review.requirements == [FieldChange(path, chat_before.model.traffic.peak_requests_per_s,
                                               chat_more_traffic.model.traffic.peak_requests_per_s)]
    by_name = {p.name: p for p in review.predictions}
    for name in ("ttft_p95_ms", "itl_p95_ms", "latency_p95_ms", "requests_per_s_capacity", "monthly_cost_usd",
                 "expected_monthly_cost_usd"):
        before, after = getattr(chat_before.predictions, name), getattr(chat_more_traffic.predictions, name)
        assert (by_name[name].before, by_name[name].after) == (before, after)
        assert by_name[name].delta == pytest.approx(after - before)
    assert review.replacements == []
    assert not any(kind == "warning" for kind, _ in review_lines(review))


def test_an_instance_type_change_warns_that_karpenter_replaces_every_node(chat_before, chat_other_family):
    old, new = chat_before.compute.instance_type, chat_other_family.compute.instance_type
    assert old != new
    review = review_changes(chat_other_family.stack, _dump(chat_before), chat_other_family)
    assert FieldChange("compute.instance_type", old, new) in review.plan
    [drift] = [r for r in review.replacements if r.effect is Effect.DRIFT]
    assert drift.what == "NodePool" and drift.resource_name is None
    assert drift.causes[0] == FieldChange("compute.instance_type", old, new)
    assert drift.summary.startswith(f"instance type {old} -> {new}: NodePool ")
    assert "Karpenter replaces every node (drift)" in drift.summary
    assert ("warning", drift.summary) in review_lines(review)


def test_a_sagemaker_instance_count_change_warns_of_a_blue_green_update_with_both_fleets():
    before, after = _summarizer(0.5), _summarizer(1.0)
    n0, n1 = before.engine.initial_instance_count, after.engine.initial_instance_count
    assert n0 < n1 and before.compute.instance_type == after.compute.instance_type
    review = review_changes(after.stack, _dump(before), after)
    [config] = [r for r in review.replacements if r.what == "endpoint configuration"]
    assert config.effect is Effect.BLUE_GREEN
    assert FieldChange("engine.initial_instance_count", n0, n1) in config.causes
    kind = after.compute.instance_type
    assert f"({n0} x {kind} blue (more if scaled out) + {n1} x {kind} green)" in config.message


def test_an_archetype_change_says_every_resource_is_replaced(chat_before):
    sagemaker = _summarizer(0.5)
    before = {**_dump(chat_before), "service": sagemaker.service, "environment": sagemaker.environment}
    review = review_changes(sagemaker.stack, before, sagemaker)
    [whole] = review.replacements
    assert whole.causes == (FieldChange("archetype", Archetype.VLLM_GPU.value, Archetype.SAGEMAKER_ENDPOINT.value),)
    assert "every resource is replaced" in whole.summary


def test_a_new_model_is_one_requirement_change_not_one_per_field(chat_before):
    added = {**chat_before.model.model_dump(mode="json"), "name": "second", "source_uri": "s3://bucket-b/second/"}
    after = derive(chat_before, models=[chat_before.model.model_dump(mode="json"), added])
    review = review_changes(after.stack, _dump(chat_before), after)
    assert review.requirements == [FieldChange("models.second", None, "s3://bucket-b/second/")]


def test_no_change_prints_no_change(chat_before):
    review = review_changes(chat_before.stack, _dump(chat_before), chat_before)
    assert review.empty and review_lines(review) == []
    assert "No requirement changed." in review_markdown(review)


# --- preview time: the baseline report against this one (mock engine) ---------------------------------------------


def _preview(bp: Blueprint, folder):
    write_stacks([bp], folder)
    return run_preview(bp.stack, stacks_dir=folder, program=ROOT / "__main__.py")


@pytest.fixture(scope="module")
def chat_before_preview(chat_before, tmp_path_factory):
    """`_preview(chat_before, ...)`, run once for the module: each call returns a fresh deep copy (a test may change
    what it gets). The baseline of most preview-time tests here."""
    report = _preview(chat_before, tmp_path_factory.mktemp("chat-before"))
    return lambda: copy.deepcopy(report)


def _baseline_review(before, after: Blueprint, tmp_path):
    """The baseline review of `after` against `before`: a blueprint (previewed here) or its preview's report."""
    base = (before if not isinstance(before, Blueprint) else _preview(before, tmp_path / "base")).to_json()
    head = _preview(after, tmp_path / "head")
    diff = diff_reports(base, head.to_json())
    return diff, baseline_review(head, base, diff)


def test_preview_names_the_node_pool_drift_with_its_cause(chat_before, chat_before_preview, tmp_path):
    old = chat_before.compute.instance_type
    assert old != "g6e.2xlarge"
    after = derive(chat_before, compute={"instance_type": "g6e.2xlarge", "vcpus_per_node": 8,
                                         "memory_gib_per_node": 64.0})
    diff, review = _baseline_review(chat_before_preview(), after, tmp_path)
    [drift] = [r for r in review.replacements if r.effect is Effect.DRIFT]
    assert drift.resource_type == "kubernetes:karpenter.sh/v1:NodePool"
    assert drift.resource_name == f"{after.stack}-node-pool"
    assert (old, "g6e.2xlarge") in drift.values
    assert all(p.startswith("spec.template.") for p in drift.paths)
    assert drift.causes[0] == FieldChange("compute.instance_type", old, "g6e.2xlarge")
    text = review_markdown(review)
    assert "> [!WARNING]" in text and f"NodePool {after.stack}-node-pool" in text
    # The rolling update of the Deployment is a note, not a replacement warning.
    [roll] = [r for r in review.replacements if r.effect is Effect.ROLLOUT]
    assert roll.resource_type == "kubernetes:apps/v1:Deployment"


def test_preview_of_a_behavioural_node_pool_change_replaces_nothing(chat_before, chat_before_preview, tmp_path):
    after = derive(chat_before, autoscaling={"max_replicas": chat_before.autoscaling.max_replicas + 2})
    diff, review = _baseline_review(chat_before_preview(), after, tmp_path)
    [pool] = [c for c in diff.changed if c.type == "kubernetes:karpenter.sh/v1:NodePool"]
    assert {s.path.split(".")[1] for s in pool.settings} == {"limits"}  # the pool changed, its template did not
    assert review.replacements == []
    assert FieldChange("autoscaling.max_replicas", chat_before.autoscaling.max_replicas,
                       after.autoscaling.max_replicas) in review.plan
    assert "No change replaces a resource." in review_markdown(review)


def test_preview_of_a_sagemaker_count_change_replaces_the_endpoint_configuration(tmp_path):
    before, after = _summarizer(0.5), _summarizer(1.0)
    _, review = _baseline_review(before, after, tmp_path)
    [config] = [r for r in review.replacements if r.resource_type.endswith("EndpointConfiguration")]
    assert config.effect is Effect.BLUE_GREEN
    assert ("productionVariants[0].initialInstanceCount" in config.paths
            and (before.engine.initial_instance_count, after.engine.initial_instance_count) in config.values)


@pytest.mark.parametrize("pair", ["instance-type", "behavioural"])
def test_plan_time_warnings_match_what_the_preview_finds(chat_before, chat_before_preview, tmp_path, pair):
    """The plan-time review (blueprint fields each rule is `planned_by`) warns about exactly the replacements the
    preview finds in the resources, for every rule that names its blueprint fields."""
    change = ({"compute": {"instance_type": "g6e.2xlarge", "vcpus_per_node": 8, "memory_gib_per_node": 64.0}}
              if pair == "instance-type" else {"autoscaling": {"max_replicas": 6}})
    after = derive(chat_before, **change)
    planned = review_changes(after.stack, _dump(chat_before), after).replacements
    _, found = _baseline_review(chat_before_preview(), after, tmp_path)
    with_fields = {(r.type, r.effect) for r in load_replace_rules() if r.planned_by}
    assert {(r.resource_type, r.effect) for r in planned} == \
        {(r.resource_type, r.effect) for r in found.replacements if (r.resource_type, r.effect) in with_fields}


def test_an_older_baseline_without_a_blueprint_still_compares_predictions(chat_before_preview):
    base = chat_before_preview().to_json()
    base.pop("blueprint")
    base["predictions"]["monthly_cost_usd"] -= 100.0
    head = chat_before_preview()
    review = baseline_review(head, base, diff_reports(base, head.to_json()))
    assert not review.blueprint_known and review.requirements == []
    [cost] = review.changed_predictions
    assert cost.name == "monthly_cost_usd" and cost.delta == pytest.approx(100.0)
    assert "records no blueprint" in review_markdown(review)


# --- the catalog and the CLI ---------------------------------------------------------------------------------------


def test_every_rule_has_a_source_and_planned_by_names_real_blueprint_fields(chat_before):
    from blueprints.review.changes import _keyed
    from blueprints.review.diff import flatten

    fields = set(flatten(_keyed(_dump(chat_before)))) | set(flatten(_keyed(_dump(_summarizer(0.5)))))
    archetypes = {a.value for a in Archetype}
    for rule in load_replace_rules():
        assert rule.source and set(rule.archetypes) <= archetypes
        for pattern in rule.planned_by:
            assert any(fnmatch.fnmatchcase(f, pattern) for f in fields), f"{rule.type}: {pattern} names no field"


def _project(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "__main__.py").write_text((ROOT / "__main__.py").read_text())
    monkeypatch.chdir(tmp_path)


def test_plan_over_an_existing_stack_config_prints_and_returns_the_review(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    config = tmp_path / "stacks" / "Pulumi.chat-assistant-prod.yaml"
    text = config.read_text()
    planned = read_stack_config(config).compute.instance_type  # what the requirements plan (the committed config)
    assert planned != "g6e.2xlarge"
    old = f"\n      instance_type: {planned}\n"  # compute's (the engine table's rows are indented deeper)
    assert text.count(old) == 1
    config.write_text(text.replace(old, "\n      instance_type: g6e.2xlarge\n"))
    args = ["plan", "stacks/requirements/chat-assistant.yaml", "--env", "prod", "--as-of", "2026-12-01"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"instance type g6e.2xlarge -> {planned}" in result.output
    assert "Karpenter replaces every node (drift)" in result.output
    again = runner.invoke(app, [*args, "--json"])
    [entry] = [e for e in json.loads(again.stdout) if e["stack"] == "chat-assistant-prod"]
    assert entry["review"]["replacements"] == [] and entry["review"]["plan"] == []


def test_preview_with_a_baseline_writes_the_review_into_plan_md_and_plan_json(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    assert runner.invoke(app, ["preview", "chat-assistant-prod", "--out", "base"]).exit_code == 0
    config = tmp_path / "stacks" / "Pulumi.chat-assistant-prod.yaml"
    planned = read_stack_config(config)
    most = planned.autoscaling.max_replicas
    # A hand edit of the maximum states what it costs too (the stack-config check holds it to the nodes it takes).
    node = planned.predictions.cost_lines[0].usd_per_hour * 730
    before_usd, after_usd = planned.predictions.max_monthly_cost_usd, planned.predictions.max_monthly_cost_usd + 2 * node
    edited = config.read_text().replace(f"      max_replicas: {most}\n", f"      max_replicas: {most + 2}\n").replace(
        f"max_monthly_cost_usd: {before_usd}\n", f"max_monthly_cost_usd: {round(after_usd, 2)}\n")
    assert edited != config.read_text()
    config.write_text(edited)
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--baseline", "base/plan.json", "--out", "head"])
    # reviewed and written, then failed: the hand edit is not what the requirements plan (`plan --check`'s gate)
    assert result.exit_code == 1, result.output
    assert f"plan: max replicas {most} -> {most + 2}" in result.output
    assert (f"servingblueprints:blueprint.autoscaling.max_replicas is {most + 2} but the plan gives {most}; hand edit"
            in result.output)
    md = (tmp_path / "head" / "plan.md").read_text()
    assert md.index("### What changed") < md.index("### Changes against the base branch") < md.index("### Plan\n")
    review = json.loads((tmp_path / "head" / "plan.json").read_text())["review"]
    assert {"path": "autoscaling.max_replicas", "before": most, "after": most + 2, "label": "max replicas"} in review["plan"]
    assert review["replacements"] == []


# --- a move to another Region or platform: the whole service is replaced --------------------------------------------


def _moved(before: Blueprint) -> Blueprint:
    """`before` planned into eu-central-1, on that Region's bundled platform."""
    return derive(before, region="eu-central-1", platform={**before.platform.model_dump(mode="json"),
                                                           "stack": "platform-prod-eu-central-1"})


def _assert_move_leads(review, after: Blueprint) -> None:
    move = review.move
    assert move is not None and review.replacements[0] is move and move.effect is Effect.REPLACE
    assert {c.path for c in move.causes} == {"region", "platform.stack"}
    assert f"creates the whole service again on platform-prod-eu-central-1's cluster in {after.region}" in move.message
    for new in ("a new load balancer with a new URL", "the weights bucket in eu-central-1",
                "the weights copied into it again"):
        assert new in move.message
    assert not any(r.effect is Effect.ROLLOUT for r in review.replacements)  # nothing is rolled: all of it is new
    text = review_markdown(review)
    head = text.split("\n\n")[:2]
    assert head[0] == "### What changed" and head[1].startswith("> [!CAUTION]\n> **`pulumi up` replaces the whole "
                                                                 "service**: region us-east-1 -> eu-central-1")
    assert review_lines(review)[0] == ("warning", f"pulumi up replaces the whole service: {move.summary}")


def test_a_region_move_is_the_replacement_of_the_whole_service_at_the_top_of_what_changed(chat_before):
    after = _moved(chat_before)
    review = review_changes(after.stack, _dump(chat_before), after)
    _assert_move_leads(review, after)


def test_a_move_prices_the_platform_it_lands_on_and_says_to_deploy_it_first(chat_before):
    moved = _moved(chat_before)
    after = moved.model_copy(update={"predictions": moved.predictions.model_copy(
        update={"platform_monthly_cost_usd": 532.41})})
    first = review_changes(after.stack, _dump(chat_before), after,
                           tenants={"platform-prod-eu-central-1": (after.stack,)})
    assert ("; it lands on platform platform-prod-eu-central-1 ($532/month, this service its first: a cost this move "
            "adds): deploy that platform stack first (`blueprint preview platform-prod-eu-central-1`, then "
            "`pulumi up -s platform-prod-eu-central-1`), then this service") in first.move.message
    left = chat_before.predictions.platform_monthly_cost_usd
    assert f"; platform platform-prod-us-east-1 (${left:,.0f}/month) keeps running" in first.move.message
    shared = review_changes(after.stack, _dump(chat_before), after, tenants={
        "platform-prod-eu-central-1": ("regulated-assistant-prod", after.stack), "platform-prod-us-east-1": ()})
    assert "($532/month, shared with regulated-assistant-prod)" in shared.move.message
    assert (f"platform-prod-us-east-1 (${left:,.0f}/month) then serves no service (this one was its last): destroy it "
            f"after this service has moved (`pulumi destroy -s platform-prod-us-east-1`), saving ${left:,.0f}/month") \
        in shared.move.message
    cost = next(p for p in shared.predictions if p.name == "platform_monthly_cost_usd")
    assert (cost.before, cost.after) == (left, 532.41)  # the shared platform's cost, before -> after


def test_a_bundled_service_moved_to_another_region_is_reviewed_with_both_platforms_costs_and_the_deploy_order(
        project):
    """regulated-assistant prod, the only service on platform-prod-eu-central-1, moves to eu-west-1 (its platform.yaml
    entry moved with it): `blueprint plan` reviews the move with the new platform's monthly cost (this service its
    first tenant), to deploy that platform before the service, and the old platform's saving once it is destroyed
    after the move (this service was its last)."""
    from blueprints.contracts.stackconfig import read_config

    old_platform = read_config(project / "stacks" / "Pulumi.platform-prod-eu-central-1.yaml")
    assert old_platform.services == ["regulated-assistant-prod"]
    requirements = project / "stacks" / "requirements"
    data = yaml.safe_load((requirements / "regulated-assistant.yaml").read_text())
    data["environments"]["prod"]["region"] = "eu-west-1"
    (requirements / "regulated-assistant.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    platforms = yaml.safe_load((requirements / "platform.yaml").read_text())
    platforms["platforms"]["prod-eu-west-1"] = platforms["platforms"].pop("prod-eu-central-1")
    platforms["platforms"]["prod-eu-west-1"]["runner_label"] = "servingblueprints-eu-west-1-prod"
    (requirements / "platform.yaml").write_text(yaml.safe_dump(platforms, sort_keys=False))
    result = runner.invoke(app, ["plan", "stacks/requirements/regulated-assistant.yaml", "--env", "prod", "--as-of",
                                 "2026-12-01", "--json"])
    assert result.exit_code == 0, result.output
    planned = {entry["stack"]: entry for entry in json.loads(result.output)}
    new_platform = planned["platform-prod-eu-west-1"]["platform"]
    assert planned["platform-prod-eu-west-1"]["review"] is None  # a new platform stack
    assert new_platform["services"] == ["regulated-assistant-prod"]
    review = planned["regulated-assistant-prod"]["review"]
    [move] = [r for r in review["replacements"] if r["what"] == "service"]
    new_usd = planned["regulated-assistant-prod"]["blueprint"]["predictions"]["platform_monthly_cost_usd"]
    assert new_usd == new_platform["monthly_cost_usd"] > 0
    old_usd = old_platform.monthly_cost_usd
    assert (f"it lands on platform platform-prod-eu-west-1 (${new_usd:,.0f}/month, this service its first: a cost "
            "this move adds): deploy that platform stack first (`blueprint preview platform-prod-eu-west-1`, then "
            "`pulumi up -s platform-prod-eu-west-1`), then this service") in move["message"]
    assert (f"platform platform-prod-eu-central-1 (${old_usd:,.0f}/month) then serves no service (this one was its "
            "last): destroy it after this service has moved (`pulumi destroy -s platform-prod-eu-central-1`), saving "
            f"${old_usd:,.0f}/month") in move["message"]
    cost = next(p for p in review["predictions"] if p["name"] == "platform_monthly_cost_usd")
    assert (cost["before"], cost["after"]) == (old_usd, new_usd)


def test_a_previewed_move_knows_who_else_the_platform_it_lands_on_serves(chat_before, chat_before_preview, tmp_path):
    """`blueprint preview --baseline` reads the tenants from the stack configs: the platform landed on is shared with
    the service its stack config lists; the one left has no stack config here, so it is only to be destroyed once no
    service lands on it."""
    after = _moved(chat_before)
    base = chat_before_preview().to_json()
    head = _preview(after, tmp_path / "head")
    review = baseline_review(head, base, diff_reports(base, head.to_json()), stacks_dir=tmp_path / "head")
    assert "platform-prod-eu-central-1 ($" in review.move.message
    assert ", shared with regulated-assistant-prod): deploy that platform stack first" in review.move.message
    assert "; platform platform-prod-us-east-1 ($" in review.move.message
    assert review.move.message.endswith("keeps running: destroy it once no service lands on it")


def test_a_previewed_region_move_names_the_replacement_not_a_rolling_update(chat_before, chat_before_preview, tmp_path):
    from blueprints.review.report.stack import MOVED, render_markdown

    after = _moved(chat_before)
    base, head = chat_before_preview().to_json(), _preview(after, tmp_path / "head")
    again = copy.deepcopy(head)  # the report as previewed, for the markdown
    diff = diff_reports(base, head.to_json())
    review = baseline_review(head, base, diff)
    _assert_move_leads(review, after)
    assert "Rolling updates" not in review_markdown(review)
    # the resources the move recreates are never listed as "changed" beside its warning that all is replaced
    assert diff.changed
    markdown = render_markdown(again, diff, review)
    assert f"| {MOVED} " in markdown and "| changed " not in markdown


# --- a traffic-only change: replica counts, limits and scaler settings, not the pods --------------------------------


def test_a_traffic_only_change_of_a_70b_leaves_its_pod_template_as_it_is(tmp_path):
    """regulated-assistant (Llama-3.1-70B) at 1.2x its peak rate (the same hardware and engine limits; from 1.25x it
    plans p5.48xlarge, which rolls the pods for that reason): the grace period and the load balancer's idle timeout
    follow the SLO, not the predictions at peak, so no pod restarts."""
    base = requirements_with("regulated-assistant")
    before = plan_env(base, "prod")
    rps = base.traffic.peak_requests_per_s * 1.2
    after = plan_env(requirements_with("regulated-assistant", traffic={"peak_requests_per_s": rps}), "prod")
    assert after.compute.instance_type == before.compute.instance_type  # the premise: a traffic-only change
    assert after.engine == before.engine
    assert after.network.load_balancer_idle_timeout_s == before.network.load_balancer_idle_timeout_s
    diff, review = _baseline_review(before, after, tmp_path)
    assert diff.changed  # the scaler's threshold follows the new rate
    touched = {(c.type, s.path) for c in diff.changed for s in c.settings}
    assert not any(path.startswith("spec.template") for kind, path in touched if kind.endswith(":Deployment"))
    assert review.replacements == [] and review.traffic_restart is None


def test_a_traffic_change_that_rolls_the_pods_is_warned_about_with_the_inputs_that_changed(chat_before_preview,
                                                                                         chat_more_traffic, tmp_path):
    """A plan whose pod template carries a traffic-derived value (here a grace period off the idle timeout):
    the review warns that the traffic change restarts every pod, and names the input."""
    idle = chat_more_traffic.network.load_balancer_idle_timeout_s
    after = derive(chat_more_traffic, network={**chat_more_traffic.network.model_dump(mode="json"),
                                               "load_balancer_idle_timeout_s": idle + 60})
    _, review = _baseline_review(chat_before_preview(), after, tmp_path)
    restart = review.traffic_restart
    assert restart is not None and "spec.template.spec.terminationGracePeriodSeconds" in restart.paths
    text = review_markdown(review)
    assert "> **This traffic-only change restarts every pod**: " in text
    assert "spec.template.spec.terminationGracePeriodSeconds" in text.split("**This traffic-only change")[1]
    assert review_lines(review)[0][0] == "warning" and "restarts every pod" in review_lines(review)[0][1]


# --- a platform's create-only cluster settings: the cluster is replaced ---------------------------------------------

DEPLOYER = "arn:aws:iam::123456789012:role/github-deploy"


def _with_deployer(platform, arn):
    access = platform.access.model_copy(update={"deployer_role_arn": arn, "account_id": "123456789012"})
    return platform.model_copy(update={"access": access})


def _platform_preview(platform, folder):
    from blueprints.contracts.stackconfig import write_stack_configs

    write_stack_configs([platform], folder, source="platform.yaml")
    return run_preview(platform.stack, stacks_dir=folder, program=ROOT / "__main__.py")


def test_a_deployer_role_on_an_existing_platform_is_planned_as_a_cluster_replacement_at_the_top():
    from blueprints.review.changes import Review, platform_replacements
    from tests.blueprint_builders import bundled_platform

    before = bundled_platform("platform-dev-us-west-2")
    assert before.access.deployer_role_arn is None
    after = _with_deployer(before, DEPLOYER)
    [replaced] = platform_replacements(before, after)
    assert (replaced.effect, replaced.resource_type) == (Effect.REPLACE, "aws:eks/cluster:Cluster")
    assert replaced.paths == ("accessConfig.bootstrapClusterCreatorAdminPermissions",)
    assert replaced.values == ((True, False),)
    assert [(c.path, c.before, c.after) for c in replaced.causes] == [("access.deployer_role_arn", None, DEPLOYER)]
    review = Review(after.stack, True, platform=True, replacements=[replaced])
    head = review_markdown(review).split("\n\n")[:2]
    assert head[0] == "### What changed" and head[1].startswith(
        "> [!CAUTION]\n> **`pulumi up` replaces the EKS cluster and everything on it**: access.deployer_role_arn none "
        f"-> {DEPLOYER}")
    assert review_lines(review) == [("warning", "pulumi up replaces the EKS cluster and everything on it: "
                                     + replaced.summary)]
    # Another deployer role keeps the creator bootstrap off: its access entry changes, the cluster stays.
    assert platform_replacements(after, _with_deployer(before, DEPLOYER.replace("github-deploy", "ci"))) == []


def test_every_create_only_platform_input_has_a_replace_rule_and_a_new_vpc_cidr_replaces_the_vpc():
    from blueprints.review.changes import platform_replacements
    from tests.blueprint_builders import bundled_platform

    platform = bundled_platform("platform-prod-us-east-1")
    for created in platform.create_only_inputs():
        assert any(r.applies_to(created.type) and r.matches(created.path) and r.effect is Effect.REPLACE
                   for r in load_replace_rules()), created
    moved = platform.model_copy(update={"network": platform.network.model_copy(update={"vpc_cidr": "10.99.0.0/16"})})
    [replaced] = platform_replacements(platform, moved)
    assert (replaced.resource_type, replaced.paths, replaced.values) == (
        "aws:ec2/vpc:Vpc", ("cidrBlock",), (("10.30.0.0/16", "10.99.0.0/16"),))


def test_a_previewed_deployer_role_change_is_the_cluster_replacement_at_the_top_of_what_changed(tmp_path):
    from tests.blueprint_builders import bundled_platform

    before = bundled_platform("platform-dev-us-west-2")
    base = _platform_preview(before, tmp_path / "base").to_json()
    head = _platform_preview(_with_deployer(before, DEPLOYER), tmp_path / "head")
    diff = diff_reports(base, head.to_json())
    review = baseline_review(head, base, diff)
    whole = review.platform_replacement
    assert whole is not None and whole.resource_type == "aws:eks/cluster:Cluster"
    assert whole.paths == ("accessConfig.bootstrapClusterCreatorAdminPermissions",)
    assert review_markdown(review).split("\n\n")[1].startswith(
        "> [!CAUTION]\n> **`pulumi up` replaces the EKS cluster and everything on it**")


#: What `blueprint plan --check` re-plans after the move: the files whose stacks land on the platforms the move touches
#: (the chat assistant's and partner-api, the service the platform left keeps: their stack configs and those
#: platforms'); the full breadth (every file, every stack config, none left unplanned) in `make test-slow`.
MOVE_CHECKED = ["stacks/requirements/chat-assistant.yaml", "stacks/requirements/partner-api.yaml"]


@pytest.mark.parametrize("checked", [MOVE_CHECKED, pytest.param([], marks=pytest.mark.slow)],
                         ids=["the-platforms-touched", "every"])
def test_a_region_move_rewrites_the_platform_left_and_prices_the_new_one(project, checked):
    from typer.testing import CliRunner

    from blueprints.cli import app
    from blueprints.contracts.stackconfig import read_platform_config

    path = project / "stacks" / "requirements" / "chat-assistant.yaml"
    data = yaml.safe_load(path.read_text())
    data["environments"]["prod"]["region"] = "us-west-2"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    runner = CliRunner()
    result = runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml", "--as-of", "2026-12-01"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "it lands on platform platform-prod-us-west-2 ($" in text and "this service its first" in text
    assert "deploy that platform stack first" in text
    assert "; platform platform-prod-us-east-1 keeps serving partner-api-prod, " in text
    left = read_platform_config(project / "stacks" / "Pulumi.platform-prod-us-east-1.yaml")
    assert "chat-assistant-prod" not in left.services and "partner-api-prod" in left.services
    result = runner.invoke(app, ["plan", "--check", *checked])
    assert result.exit_code == 0, result.output  # the stack configs checked, the platform left included, as planned
