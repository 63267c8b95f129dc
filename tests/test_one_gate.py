"""One gate (issue 36): `blueprint preview` runs `blueprint plan --check`'s source comparison for the stacks it reviews
(`blueprints.drift.check_stacks`, one function for both), so an edit only the comparison sees fails the preview too;
`plan --check` tells a hand edit from a stale plan and shows the differing words."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.stackconfig import read_config
from blueprints.core.project import ProjectPaths, project_paths
from blueprints.drift import check_stacks, word_diff
from blueprints.review.stacks import list_stacks
from tests.conftest import ROOT
from tests.test_hand_edits import edit_config, edits, platform, service

runner = CliRunner()

#: Edits of generated stack configs that the review's own checks allow (each a value the schema and the floors
#: accept) but that are not what the requirements plan: before the one gate, only `plan --check` saw them.
#: (id, stack previewed, stack edited, edit, the field the drift names)
CHECK_ONLY_EDITS = [
    ("weights-of-another-model", "chat-assistant-prod", "chat-assistant-prod",
     service("models.0.source_uri", "hf://mistralai/Mistral-7B-Instruct-v0.3"), "models[0].source_uri"),
    ("weights-from-an-outside-bucket", "chat-assistant-prod", "chat-assistant-prod",
     service("models.0.source_uri", "s3://someone-elses-bucket/llama-3.1-8b/"), "models[0].source_uri"),
    ("keda-target-x0.001", "chat-assistant-prod", "chat-assistant-prod", service("autoscaling.target", 0.0377),
     "autoscaling.target"),
    ("one-day-cooldown", "chat-assistant-prod", "chat-assistant-prod", service("autoscaling.cooldown_s", 86400),
     "autoscaling.cooldown_s"),
    ("engine-port-22", "chat-assistant-prod", "chat-assistant-prod", service("engine.port", 22), "engine.port"),
    # (a service's `production: false` in prod is refused by the floors at preview: exit 2, tests/test_hand_edits.py)
    ("platform-production-false", "platform-prod-us-east-1", "platform-prod-us-east-1", platform("production", False),
     "platform.production"),
    ("compound-part-cooldown", "rag-assistant-prod", "rag-assistant-retrieval-prod",
     service("autoscaling.cooldown_s", 86400), "autoscaling.cooldown_s"),
    ("prod-audit-log-retention-1-day", "platform-prod-eu-central-1", "platform-prod-eu-central-1",
     platform("audit_log_retention_days", 1), "audit_log_retention_days"),
    ("public-vpc-cidr", "platform-prod-us-east-1", "platform-prod-us-east-1",
     platform("network.vpc_cidr", "8.8.0.0/16"), "network.vpc_cidr"),
    ("another-accounts-id", "platform-prod-us-east-1", "platform-prod-us-east-1", edits(
        platform("access.account_id", "999999999999"), platform("access.other_account_ids", ["888888888888"])),
     "access.account_id"),
]


#: The edits `make test` runs (each previews twice and re-plans the whole project): a service's, a platform's and a
#: compound part's under its service's preview; `make test-slow` runs the others.
REPRESENTATIVE = {"weights-of-another-model", "platform-production-false", "compound-part-cooldown"}


@pytest.mark.parametrize(("review", "stack", "edit", "field"), [
    pytest.param(*c[1:], id=c[0], marks=() if c[0] in REPRESENTATIVE else pytest.mark.slow)
    for c in CHECK_ONLY_EDITS])
def test_an_edit_plan_check_fails_fails_the_preview_naming_the_field_and_the_same_drift(
        project, review, stack, edit, field, monkeypatch):
    edit_config(project, stack, edit)
    _run_each_program_once(monkeypatch)  # the terminal preview below reviews the files the JSON one did
    result = runner.invoke(app, ["preview", review, "--json"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    shown = json.loads(result.stdout)["source_check"]
    assert shown["skipped"] is None
    assert shown["drift"], shown
    assert any(field in d["field"] for d in shown["drift"]), shown["drift"]
    assert {d["cause"] for d in shown["drift"]} == {"hand edit"}
    # the same comparison as the CI gate: plan --check lists exactly these differences for the stack
    check = runner.invoke(app, ["plan", "--check", "--json"])
    assert check.exit_code == 1, check.output
    assert [d for d in json.loads(check.stdout) if d["stack"] == stack] == shown["drift"]
    terminal = runner.invoke(app, ["preview", review])
    assert terminal.exit_code == 1
    assert field in terminal.output and "hand edit" in terminal.output
    assert "differ from their plans" in terminal.output


def _run_each_program_once(monkeypatch) -> None:
    """From now on in this test, a preview's program run (`run_preview`, which `review_stack` calls) of the same stack
    over stack configs of the same bytes is made once and handed out as copies: the rest of each preview (the floors,
    the policies, the source comparison, the output) runs in full each time."""
    import blueprints.review.stack as review

    runs: dict = {}
    real = review.run_preview

    def run_preview(stack: str, *, stacks_dir: Path, program: Path):
        files = tuple((p.name, p.read_bytes()) for p in sorted(Path(stacks_dir).glob("Pulumi.*.yaml")))
        key = (stack, Path(stacks_dir).resolve(), Path(program).resolve(), files)
        if key not in runs:
            runs[key] = real(stack, stacks_dir=stacks_dir, program=program)
        return copy.deepcopy(runs[key])

    monkeypatch.setattr(review, "run_preview", run_preview)


@pytest.mark.parametrize("review", ["chat-assistant-prod", "rag-assistant-prod", "platform-prod-eu-central-1"])
def test_a_bundled_service_compound_service_and_platform_preview_clean_with_the_comparison(project, review):
    result = runner.invoke(app, ["preview", review, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["source_check"] == {"skipped": None, "drift": []}


def test_every_bundled_stack_a_preview_reviews_is_what_its_requirements_plan():
    project = project_paths(ROOT / "stacks")
    reviews: dict[str, list[str]] = {}
    for ref in list_stacks(ROOT / "stacks", policy_dir=ROOT / "policies" / "config"):
        reviews.setdefault(ref.review, []).append(ref.stack)
    assert len(reviews) >= 15
    for review, stacks in reviews.items():
        assert check_stacks(stacks, project) == ([], None), review


def test_a_stack_config_previewed_without_its_requirements_folder_says_the_comparison_was_skipped(tmp_path):
    stacks = tmp_path / "alone"
    stacks.mkdir()
    for stack in ("chat-assistant-prod", "platform-prod-us-east-1"):
        shutil.copy(ROOT / "stacks" / f"Pulumi.{stack}.yaml", stacks)
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    drifts, skipped = check_stacks(["chat-assistant-prod"],
                                   ProjectPaths(tmp_path, stacks, ROOT / "__main__.py", ROOT / "policies" / "config"))
    assert drifts == []
    assert "stacks/requirements/chat-assistant.yaml" in skipped and "is not there" in skipped
    assert "`blueprint plan --check` in the project compares it" in skipped


def test_a_preview_of_stack_configs_outside_any_project_says_the_comparison_was_skipped(tmp_path):
    for f in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        shutil.copy(f, tmp_path)
    shutil.copytree(ROOT / "stacks" / "requirements", tmp_path / "requirements")
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--stacks-dir", str(tmp_path), "--program",
                                 str(ROOT / "__main__.py")])
    assert result.exit_code == 0, result.output
    assert "source comparison skipped" in result.output and "is in no project (no Pulumi.yaml" in result.output


def test_a_stack_config_that_records_no_plan_is_not_compared_and_says_why(project):
    edit_config(project, "chat-assistant-prod", lambda config: config.pop("servingblueprints:planned"))
    drifts, skipped = check_stacks(["chat-assistant-prod"], project_paths(project / "stacks"))
    assert drifts == [] and "records no plan (servingblueprints:planned)" in skipped


# --- stale or hand edit, and the differing words -------------------------------------------------------------------


def _check(*files: str) -> list[dict]:
    result = runner.invoke(app, ["plan", "--check", *files, "--json"])
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def test_a_requirements_change_after_planning_is_stale_naming_the_file_to_re_plan(project):
    path = project / "stacks" / "requirements" / "chat-assistant.yaml"
    path.write_text(path.read_text().replace("owner: ml-platform\n", "owner: ml-serving\n", 1))
    found = _check("stacks/requirements/chat-assistant.yaml")
    assert {(d["stack"], d["field"]) for d in found} == {
        ("chat-assistant-dev", "servingblueprints:blueprint.tags.owner"),
        ("chat-assistant-prod", "servingblueprints:blueprint.tags.owner")}
    for drift in found:
        assert drift["cause"] == "stale"
        assert drift["fix"].startswith("stale: re-plan stacks/requirements/chat-assistant.yaml ")
        assert "hand edit" not in drift["fix"]
    text = runner.invoke(app, ["plan", "--check", "stacks/requirements/chat-assistant.yaml"]).output
    assert 'tags.owner is "ml-platform" but the plan gives "ml-serving"; stale: re-plan' in text


def _newcomers(project: Path) -> list[str]:
    """Copies of the small chat-assistant requirements, renamed, landing in every bundled environment: on each
    bundled platform (its environment and Region), one environment per file (a file names an environment once)."""
    data = yaml.safe_load((project / "stacks" / "requirements" / "chat-assistant.yaml").read_text())
    places = sorted({(p.environment, p.region) for p in map(read_config, (project / "stacks").glob(
        "Pulumi.platform-*.yaml"))})
    files: list[dict[str, dict]] = []
    for env, region in places:
        target = next((f for f in files if env not in f), None)
        if target is None:
            files.append(target := {})
        target[env] = {"region": region, "traffic_scale": 1.0 if env == "prod" else 0.1}
    names = []
    for i, environments in enumerate(files):
        name = f"newcomer-{i}"
        regions = sorted({e["region"] for e in environments.values()})
        (project / "stacks" / "requirements" / f"{name}.yaml").write_text(yaml.safe_dump(
            {**data, "service": name, "environments": environments,
             "compliance": {**data["compliance"], "regions_allowed": regions}}, sort_keys=False))
        names.append(name)
    return names


def test_a_new_service_plans_in_every_bundled_environment_and_leaves_every_other_stack_as_planned(project):
    """Issue 36's check: the bundled policies leave room for a newcomer's first service on every bundled platform
    (no environment's GPU quota is already full), and a service's stack configs depend on its own requirements and
    its platform only, so planning it (on shared platforms, in shared accounts) leaves `plan --check` clean for
    every other stack."""
    before = {p.name: p.read_text() for p in (project / "stacks").glob("Pulumi.*.yaml")}
    landed = set()
    for name in _newcomers(project):
        planned = runner.invoke(app, ["plan", f"stacks/requirements/{name}.yaml", "--as-of", "2026-12-01"])
        assert planned.exit_code == 0, planned.output
        for path in (project / "stacks").glob(f"Pulumi.{name}-*.yaml"):
            bp = read_config(path)
            landed.add((bp.environment, bp.region))
            assert not [r for r in bp.rationale if "maxGpus" in r], bp.rationale  # room, not a cap
    platforms = {(p.environment, p.region) for p in map(read_config, (project / "stacks").glob(
        "Pulumi.platform-*.yaml"))}
    assert landed == platforms and len(platforms) == 5
    changed = {n for n, text in before.items() if (project / "stacks" / n).read_text() != text}
    assert changed <= {f"Pulumi.platform-{env}-{region}.yaml" for env, region in platforms}  # no other team's
    checked = runner.invoke(app, ["plan", "--check"])
    assert checked.exit_code == 0, checked.output


def test_a_requirements_change_is_stale_and_shows_the_differing_words(project):
    path = project / "stacks" / "requirements" / "partner-api.yaml"
    text = path.read_text()
    path.write_text(text.replace("mean_output_tokens: ", "mean_output_tokens: 1", 1))  # 10x longer answers
    found = _check("stacks/requirements/partner-api.yaml")
    assert found and all(d["cause"] == "stale" for d in found)
    assert all(d["fix"].startswith("stale: re-plan stacks/requirements/partner-api.yaml") for d in found)
    long = [d for d in found if isinstance(d["committed"], str) and len(d["committed"]) > 80]
    assert long  # the output length is named in long rationale lines
    for d in long:  # a long value shows the words that differ, not two excerpts of the same start
        assert "{+" in d["words"] and "[-" in d["words"]


def test_a_platform_file_change_makes_the_platform_stale_naming_a_service_to_re_plan(project):
    path = project / "stacks" / "requirements" / "platform.yaml"
    data = yaml.safe_load(path.read_text())
    data["platforms"]["prod-eu-central-1"]["audit_log_retention_days"] = 3288
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    found = _check("stacks/requirements/regulated-assistant.yaml")
    assert [(d["stack"], d["field"], d["committed"], d["planned"], d["cause"]) for d in found] == [
        ("platform-prod-eu-central-1", "servingblueprints:platform.audit_log_retention_days", 2557, 3288, "stale"),
        ("platform-prod-eu-central-1", "servingblueprints:platform.rationale[5]", "audit logs kept 2557 days",
         "audit logs kept 3288 days", "stale")]
    assert all(d["fix"].startswith("stale: re-plan a service landing on prod-eu-central-1") for d in found)


def test_a_policy_config_change_is_stale_not_a_hand_edit_and_a_removed_line_is_one_difference(project):
    # A tight dev account (8 GPUs, the rag-assistant stacks hold 6) caps chat-assistant-dev at 1 replica
    # (tests/test_account_gpus.py); 8 more GPUs lift the cap: the committed file is what its plan wrote, the policy
    # config changed since.
    path = project / "policies" / "config" / "dev.json"
    data = json.loads(path.read_text())
    data["gpu-quota"]["maxGpus"] = 8
    path.write_text(json.dumps(data))
    planned = runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml", "--env", "dev", "--as-of",
                                  "2026-12-01"])
    assert planned.exit_code == 0, planned.output
    data["gpu-quota"]["maxGpus"] += 8
    path.write_text(json.dumps(data))
    found = _check("stacks/requirements/chat-assistant.yaml")
    assert {d["stack"] for d in found} == {"chat-assistant-dev"}
    assert {d["cause"] for d in found} == {"stale"}
    by_field = {d["field"]: d for d in found}
    assert (by_field["servingblueprints:blueprint.autoscaling.max_replicas"]["committed"],
            by_field["servingblueprints:blueprint.autoscaling.max_replicas"]["planned"]) == (1, 2)
    # the rationale line naming the cap is gone: one difference, not every later line shifted by one index
    lines = [d for d in found if ".rationale[" in d["field"]]
    removed = [d for d in lines if d["planned"] is None]
    assert len(removed) == 1 and removed[0]["committed"].startswith("autoscaling max capped at 1 replicas")
    assert len(lines) <= 5, [d["field"] for d in lines]  # the lines whose words changed, none merely moved
    committed = yaml.safe_load((project / "stacks" / "Pulumi.chat-assistant-dev.yaml").read_text())
    assert len(committed["config"]["servingblueprints:blueprint"]["rationale"]) > 15


def test_a_hand_edit_of_a_stale_file_is_called_a_hand_edit(project):
    path = project / "stacks" / "requirements" / "chat-assistant.yaml"
    path.write_text(path.read_text().replace("owner: ml-platform\n", "owner: ml-serving\n", 1))
    edit_config(project, "chat-assistant-prod", service("autoscaling.cooldown_s", 86400))
    found = {d["field"]: d for d in _check("stacks/requirements/chat-assistant.yaml") if d["stack"] ==
             "chat-assistant-prod"}
    cooldown = "servingblueprints:blueprint.autoscaling.cooldown_s"
    assert set(found) == {"servingblueprints:blueprint.tags.owner", cooldown}
    assert {d["cause"] for d in found.values()} == {"hand edit"}
    assert found[cooldown]["fix"].startswith("hand edit (its planned values")


def test_a_file_without_a_digest_is_neither_called_a_hand_edit_nor_stale(project):
    edit_config(project, "chat-assistant-prod", edits(
        lambda config: config["servingblueprints:planned"].pop("digest"), service("autoscaling.cooldown_s", 86400)))
    found = {d["field"]: d for d in _check("stacks/requirements/chat-assistant.yaml")}
    assert set(found) == {"servingblueprints:planned.digest", "servingblueprints:blueprint.autoscaling.cooldown_s"}
    assert {d["cause"] for d in found.values()} == {"unknown"}
    assert all(d["fix"].startswith("a hand edit or stale (the file records no digest") for d in found.values())


@pytest.mark.parametrize(("before", "after", "shown"), [
    ("shared by 5 stacks in us-east-1", "shared by 6 stacks in us-east-1", "shared by [-5-]{+6+} stacks in us-east-1"),
    ("a b c d e f g h i j k l", "a b c d e f X h i j k l", "... c d e f [-g-]{+X+} h i j k ..."),
    ("one two", "one two three", "one two {+three+}"),
    ("one two three", "two three", "[-one-] two three"),
    ("x  y", "x y", '(only the whitespace differs: "x  y" -> "x y")'),
])
def test_the_word_diff_shows_the_words_that_differ_with_a_little_context(before, after, shown):
    assert word_diff(before, after) == shown



def test_a_hand_edited_prediction_says_re_plan_and_an_overridable_setting_names_overrides(project):
    path = project / "stacks" / "Pulumi.chat-assistant-prod.yaml"
    data = yaml.safe_load(path.read_text())
    bp = data["config"]["servingblueprints:blueprint"]
    bp["predictions"]["unit_costs"]["expected"]["usd_per_1k_requests"] = 0.0001
    bp["autoscaling"]["target"] = round(bp["autoscaling"]["target"] / 1000, 4)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    fixes = {d["field"].split(".", 1)[1]: d["fix"] for d in _check("stacks/requirements/chat-assistant.yaml")}
    prediction = fixes["predictions.unit_costs.expected.usd_per_1k_requests"]
    assert prediction.endswith("re-plan stacks/requirements/chat-assistant.yaml") and "overrides" not in prediction
    assert "put an intended value in its `overrides:` section" in fixes["autoscaling.target"]
