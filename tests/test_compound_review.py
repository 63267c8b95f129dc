"""One review for a compound service's environment: `blueprint preview <service>-<env>` previews both part stacks
and leads with the end-to-end view (the bundled rag-assistant's committed stack configs)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.stackconfig import read_stack_config
from tests.bundled import PROGRAM, STACKS_DIR, bundled_review
from tests.conftest import ROOT

runner = CliRunner()
PARTS = ["rag-assistant-generator-prod", "rag-assistant-retrieval-prod"]


@pytest.fixture(scope="module", autouse=True)
def bundled_parts():
    """Each part's `review_stack` over the committed stacks, as the compound preview asks for it (the project's
    stacks, program and policy configs, no baseline: the service's baseline is diffed after), served by
    `tests.bundled.bundled_review` (this worker's one real review of it, a copy each call): the previews here run the
    program once per part. Any other review (an edited copy of the stacks) runs `review_stack` itself."""
    import blueprints.review.stack as review

    real = review.review_stack
    for stack in PARTS:  # reviewed before the patch below is in effect (tests/bundled.py)
        bundled_review(stack)

    def served(stack, *, stacks_dir=Path("stacks"), program=Path("__main__.py"), policy_config=None,
               policy_dir=review.POLICY_CONFIG_DIR, baseline=None):
        if (stack in PARTS and (stacks_dir, program, policy_config, policy_dir, baseline)
                == (STACKS_DIR, PROGRAM, None, ROOT / "policies" / "config", None)):
            return bundled_review(stack)
        return real(stack, stacks_dir=stacks_dir, program=program, policy_config=policy_config,
                    policy_dir=policy_dir, baseline=baseline)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(review, "review_stack", served)
        yield


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """`blueprint preview rag-assistant-prod --out DIR` over the committed stacks: (result, DIR)."""
    out = tmp_path_factory.mktemp("review")
    result = runner.invoke(app, ["preview", "rag-assistant-prod", "--out", str(out), "--stacks-dir",
                                 str(ROOT / "stacks")])
    return result, out


def test_one_preview_reviews_both_parts_and_exits_0(reviewed):
    result, out = reviewed
    assert result.exit_code == 0, result.output
    data = json.loads((out / "plan.json").read_text())
    assert [p["stack"] for p in data["parts"]] == PARTS
    assert data["clean"] is True and data["review"] == "rag-assistant-prod"
    for stack in PARTS:  # each part's own report beside the service's
        assert json.loads((out / stack / "plan.json").read_text())["stack"] == stack
        assert list((out / stack / "manifests").glob("*.yaml"))


def test_the_review_leads_with_the_end_to_end_latency_and_the_services_cost(reviewed):
    _, out = reviewed
    markdown = (out / "plan.md").read_text()
    generator, retrieval = (read_stack_config(ROOT / "stacks" / f"Pulumi.{s}.yaml") for s in PARTS)
    assert markdown.startswith("<!-- servingblueprints-preview:rag-assistant-prod -->")
    assert markdown.index("### End-to-end latency") < markdown.index("### Parts") < markdown.index(f"`{PARTS[0]}`: ")
    for stage in generator.pipeline.stages:
        assert f"| `{stage.model}` " in markdown and f"{stage.stage_p95_ms:,.1f} ms" in markdown
    assert f"**{generator.pipeline.latency_p95_ms:,.1f} ms** (budget " in markdown
    total = generator.predictions.monthly_cost_usd + retrieval.predictions.monthly_cost_usd
    assert f"**${total:,.2f}**" in markdown
    assert markdown.count("<!-- servingblueprints-preview:") == 1  # one pull-request comment for both parts
    assert "#### Plan" in markdown  # each part's report, one heading level down


def test_the_review_states_the_services_end_to_end_cost_per_1k_requests(reviewed):
    _, out = reviewed
    generator, retrieval = (read_stack_config(ROOT / "stacks" / f"Pulumi.{s}.yaml") for s in PARTS)
    expected = generator.predictions.expected_monthly_cost_usd + retrieval.predictions.expected_monthly_cost_usd
    per_1k = expected / generator.predictions.unit_costs.requests_per_month * 1e3  # one generator call per request
    assert json.loads((out / "plan.json").read_text())["usd_per_1k_requests"] == pytest.approx(per_1k, rel=1e-9)
    assert f"**${per_1k:.4g}** end to end" in (out / "plan.md").read_text()
    # the retrieval part serves several calls per request: per its own request it costs less than per the service's
    assert retrieval.predictions.unit_costs.requests_per_month > generator.predictions.unit_costs.requests_per_month


def test_a_baseline_of_the_same_review_diffs_each_part(reviewed, tmp_path):
    _, out = reviewed
    result = runner.invoke(app, ["preview", "rag-assistant-prod", "--json", "--baseline", str(out / "plan.json"),
                                 "--stacks-dir", str(ROOT / "stacks")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [p["diff"]["monthly_cost_usd"]["delta"] for p in data["parts"]] == [0, 0]
    assert [p["diff"]["changed"] for p in data["parts"]] == [[], []]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"stack": "chat-assistant-prod", "resources": []}))
    result = runner.invoke(app, ["preview", "rag-assistant-prod", "--baseline", str(other), "--stacks-dir",
                                 str(ROOT / "stacks")])
    assert result.exit_code == 2 and "not of rag-assistant-prod" in result.output, result.output


def test_parts_recording_different_pipelines_are_refused_before_running_anything(tmp_path):
    stacks = tmp_path / "stacks"
    shutil.copytree(ROOT / "stacks", stacks, ignore=shutil.ignore_patterns("requirements"))
    path = stacks / f"Pulumi.{PARTS[1]}.yaml"
    data = yaml.safe_load(path.read_text())
    pipeline = data["config"]["servingblueprints:blueprint"]["pipeline"]
    pipeline["latency_p95_budget_ms"] = pipeline["latency_p95_budget_ms"] + 100  # a hand edit of one part
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["preview", "rag-assistant-prod", "--stacks-dir", str(stacks)])
    assert result.exit_code == 2, result.output
    assert "record different pipelines" in result.output and "blueprint plan" in result.output


def test_a_hand_edited_budget_below_the_planned_p95_fails_the_stack_config(tmp_path):
    path = tmp_path / f"Pulumi.{PARTS[0]}.yaml"
    data = yaml.safe_load((ROOT / "stacks" / path.name).read_text())
    pipeline = data["config"]["servingblueprints:blueprint"]["pipeline"]
    pipeline["latency_p95_budget_ms"] = pipeline["latency_p95_ms"] - 10
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["preview", PARTS[0], "--stacks-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "servingblueprints:blueprint.pipeline" in result.output
    assert f"misses latency_p95_budget_ms={pipeline['latency_p95_budget_ms']:g}" in result.output


def test_a_part_previewed_alone_names_its_service_review(reviewed):
    _, out = reviewed
    part = (out / PARTS[1] / "plan.md").read_text()
    assert "| pipeline " in part and "the retrieval part of compound service rag-assistant" in part
    assert "`blueprint preview rag-assistant-prod` reviews both parts" in part


def test_preflight_of_a_compound_service_adds_up_both_parts_quotas():
    from blueprints.plan.quota import quota_needs

    result = runner.invoke(app, ["preflight", "rag-assistant-prod", "--offline", "--json", "--stacks-dir",
                                 str(ROOT / "stacks")])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    [need] = [r for r in rows if r["service_code"] == "ec2"]  # both parts run on G instances in us-east-1: one quota
    [gpus] = [r for r in rows if r["service_code"] == "policy"]  # one maxGpus row for the account in us-east-1
    assert all(f"{s} " in gpus["why"] for s in PARTS) and gpus["region"] == "us-east-1"
    parts = [quota_needs(read_stack_config(ROOT / "stacks" / f"Pulumi.{s}.yaml")) for s in PARTS]
    assert need["quota_code"] == parts[0][0].quota_code == parts[1][0].quota_code
    assert need["stack_needed"] == parts[0][0].needed + parts[1][0].needed
    assert set(PARTS) <= set(need["stacks"]) and all(s in need["why"] for s in PARTS)
    assert need["needed"] >= need["stack_needed"]  # with the account's other stacks in us-east-1 (tests/test_quota.py)


def test_simulate_of_a_compound_service_names_its_part_stacks():
    result = runner.invoke(app, ["simulate", "rag-assistant-prod", "--stacks-dir", str(ROOT / "stacks")])
    assert result.exit_code == 2, result.output
    assert all(f"blueprint simulate {s}" in result.output for s in PARTS)


def test_a_baseline_review_has_what_changed_for_both_parts_and_the_end_to_end_latency(reviewed, tmp_path):
    """A baseline whose generator was planned at another ITL target, 50 ms slower end to end through its TTFT stage:
    the service's review leads with "What changed": the end-to-end p95 and the stage before -> after, and each part's
    own changes (the generator's requirement, the retrieval part's none)."""
    _, out = reviewed
    base = json.loads((out / "plan.json").read_text())
    generator = base["parts"][0]["blueprint"]
    itl = generator["slo"]["itl_p95_ms"]
    generator["slo"]["itl_p95_ms"] = itl + 10
    for part in base["parts"]:
        pipeline = part["blueprint"]["pipeline"]
        stage = next(s for s in pipeline["stages"] if s["part"] == "generator")
        stage["stage_p95_ms"] += 50
        pipeline["latency_p95_ms"] += 50
    now = read_stack_config(ROOT / "stacks" / f"Pulumi.{PARTS[0]}.yaml").pipeline
    (tmp_path / "base.json").write_text(json.dumps(base))
    result = runner.invoke(app, ["preview", "rag-assistant-prod", "--out", str(tmp_path / "out"), "--baseline",
                                 str(tmp_path / "base.json"), "--stacks-dir", str(ROOT / "stacks")])
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "out" / "plan.md").read_text()
    changed = re.sub(r" +", " ", markdown[markdown.index("### What changed"):markdown.index("### End-to-end latency")])
    assert (f"| **end-to-end** | | {now.latency_p95_ms + 50:,.1f} ms | **{now.latency_p95_ms:,.1f} ms** | -50.0 ms |"
            in changed)
    stage = next(s for s in now.stages if s.part.value == "generator")
    assert f"| `{stage.model}` | generator | {stage.stage_p95_ms + 50:,.1f} ms |" in changed
    assert f"#### generator part (`{PARTS[0]}`)" in changed and f"#### retrieval part (`{PARTS[1]}`)" in changed
    gen, ret = changed.split("#### retrieval part")
    assert f"| `slo.itl_p95_ms` | {itl + 10:g}" in gen
    assert "No requirement changed." in ret
    data = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert data["parts"][0]["review"]["requirements"] == [{"path": "slo.itl_p95_ms", "before": itl + 10,
                                                           "after": itl, "label": "slo.itl_p95_ms"}]
    assert "End-to-end p95, baseline -> now" in runner.invoke(app, [
        "preview", "rag-assistant-prod", "--baseline", str(tmp_path / "base.json"), "--stacks-dir",
        str(ROOT / "stacks")]).output
