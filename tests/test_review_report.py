"""The review report: plan.md for a PR comment, the baseline diff with its cost delta, CRD checks, exit codes."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.review.diff import diff_reports, flatten
from blueprints.review.manifests import validate_manifest
from blueprints.review.preview import PolicyVerdict, run_preview
from blueprints.review.report.stack import mermaid_diagram, render_markdown
from tests.conftest import ROOT, write_stacks

runner = CliRunner()


@pytest.fixture(scope="module")
def previewed(tmp_path_factory, chat_prod):
    """The chat assistant's prod plan written as `blueprint plan` would, previewed once for the module."""
    folder = tmp_path_factory.mktemp("stacks")
    write_stacks([chat_prod], folder)
    return run_preview("chat-assistant-prod", stacks_dir=folder, program=ROOT / "__main__.py")


@pytest.fixture()
def report(previewed):
    """A copy of the module's preview that a test may change."""
    return copy.deepcopy(previewed)


def test_flatten_gives_dotted_paths():
    assert flatten({"a": {"b": [1, {"c": 2}]}, "d": {}}) == {"a.b[0]": 1, "a.b[1].c": 2, "d": {}}


def test_baseline_diff_reports_a_replica_change_and_its_cost_delta(report):
    base = report.to_json()
    head = json.loads(json.dumps(base))
    dep = next(r for r in head["resources"] if r["type"] == "kubernetes:apps/v1:Deployment")
    dep["inputs"]["spec"]["replicas"] = base_replicas = dep["inputs"]["spec"]["replicas"]
    dep["inputs"]["spec"]["replicas"] = base_replicas + 2
    head["predictions"]["monthly_cost_usd"] = base["predictions"]["monthly_cost_usd"] + 2 * 1358.53
    diff = diff_reports(base, head)
    assert diff.added == [] and diff.removed == []
    [change] = diff.changed
    assert change.type == "kubernetes:apps/v1:Deployment"
    [setting] = change.settings
    assert (setting.path, setting.before, setting.after) == ("spec.replicas", base_replicas, base_replicas + 2)
    assert diff.cost_delta_usd == 2717.06


def test_baseline_diff_reports_added_and_removed_resources(report):
    base = report.to_json()
    head = json.loads(json.dumps(base))
    removed = head["resources"].pop(0)
    head["resources"].append({"type": "aws:kms/key:Key", "name": "k", "parent": None, "inputs": {}})
    diff = diff_reports(base, head)
    assert diff.removed == [(removed["type"], removed["name"])]
    assert diff.added == [("aws:kms/key:Key", "k")]


def test_markdown_is_a_pr_comment_with_marker_cost_and_diagram(report):
    text = render_markdown(report)
    assert text.startswith("<!-- servingblueprints-preview:chat-assistant-prod -->")
    assert "passes all checks" in text
    assert f"**{report.blueprint.predictions.monthly_cost_usd:,.2f}**" in text
    assert "```mermaid\nflowchart LR" in text
    assert "| aws:s3/bucket:Bucket" in text


def test_markdown_shows_policy_violations_as_blocking(report):
    report.policy_verdicts.append(PolicyVerdict("images-pinned", "mandatory", "x-deployment", "image has no tag"))
    text = render_markdown(report)
    assert "**has blocking problems**" in text
    assert "| mandatory | images-pinned | x-deployment | image has no tag |" in text
    assert not report.clean


def test_diagram_links_service_to_deployment_to_bucket(report):
    diagram = mermaid_diagram(report)
    assert "clients --> n_Service_chat_assistant_prod_server_service" in diagram
    assert "n_Service_chat_assistant_prod_server_service --> n_Deployment_chat_assistant_prod_server_deployment" in diagram
    assert ("n_Deployment_chat_assistant_prod_server_deployment -->|weights| n_Bucket_chat_assistant_prod_weights_bucket"
            in diagram)
    assert "n_Deployment_chat_assistant_prod_server_deployment -->|runs on| n_NodePool_chat_assistant_prod_node_pool" \
        in diagram


SCALED_OBJECT = {
    "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "chat"},
    "spec": {"scaleTargetRef": {"name": "chat-vllm"}, "minReplicaCount": 2, "maxReplicaCount": 10,
             "triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://prometheus:9090",
                                                              "query": "sum(vllm:num_requests_waiting)",
                                                              "threshold": "5"}}]},
}


def test_scaled_object_structure_is_checked():
    assert validate_manifest(SCALED_OBJECT) == []
    broken = json.loads(json.dumps(SCALED_OBJECT))
    broken["spec"]["maxReplicas"] = 10
    broken["spec"]["triggers"][0]["metadata"]["threshold"] = 5
    assert validate_manifest(broken) == [
        "spec: Additional properties are not allowed ('maxReplicas' was unexpected)",
        "spec.triggers.0.metadata.threshold: 5 is not of type 'string'",
    ]


def test_prometheus_rule_needs_alert_or_record():
    rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": {"name": "r"},
            "spec": {"groups": [{"name": "slo", "rules": [{"alert": "TTFTHigh", "expr": "x > 1", "for": "5m"}]}]}}
    assert validate_manifest(rule) == []
    rule["spec"]["groups"][0]["rules"][0].pop("alert")
    assert len(validate_manifest(rule)) == 1


def test_unknown_custom_resource_is_reported_not_passed():
    problems = validate_manifest({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert problems == ["no schema for example.com/v1/Widget in Kubernetes 1.31"]


def test_invalid_manifest_makes_preview_exit_1_and_still_write_the_report(tmp_path, chat_prod, monkeypatch):
    _project(tmp_path, chat_prod, monkeypatch)
    (tmp_path / "__main__.py").write_text(
        (ROOT / "__main__.py").read_text() + "\nimport pulumi_kubernetes as k8s\n"
        "k8s.core.v1.ConfigMap('bad', metadata={'name': 'bad'}, data={'a': 1})\n")
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--out", "review"])
    assert result.exit_code == 1
    assert "1 invalid manifest(s)" in result.output
    assert "ConfigMap/bad" in (tmp_path / "review" / "plan.md").read_text()


def test_bad_baseline_exits_2(tmp_path, chat_prod, monkeypatch):
    _project(tmp_path, chat_prod, monkeypatch)
    (tmp_path / "base.json").write_text("[1, 2]")
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--baseline", "base.json"])
    assert result.exit_code == 2 and "not a preview report" in result.output


def test_baseline_flag_prints_the_diff(tmp_path, chat_prod, monkeypatch):
    _project(tmp_path, chat_prod, monkeypatch)
    assert runner.invoke(app, ["preview", "chat-assistant-prod", "--out", "base"]).exit_code == 0
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--baseline", "base/plan.json", "--json"])
    assert result.exit_code == 0
    diff = json.loads(result.stdout)["diff"]
    assert diff["changed"] == [] and diff["monthly_cost_usd"]["delta"] == 0


def _project(tmp_path, chat_prod, monkeypatch):
    write_stacks([chat_prod], tmp_path / "stacks")
    (tmp_path / "__main__.py").write_text((ROOT / "__main__.py").read_text())
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "stacks" / "Pulumi.chat-assistant-prod.yaml"


def test_bundled_example_passes_every_mandatory_policy(tmp_path, chat_prod, monkeypatch):
    _project(tmp_path, chat_prod, monkeypatch)
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--json"])
    assert result.exit_code == 0, result.output
    assert [v for v in json.loads(result.stdout)["policy_verdicts"] if v["level"] == "mandatory"] == []


@pytest.mark.parametrize(("stack", "old", "new", "policy"), [
    ("chat-assistant-prod", "cost-center: cc-4711", "cost-centre: cc-4711", "required-tags"),
    ("chat-assistant-prod", "capacity_type: on-demand", "capacity_type: spot", "StackConfigError"),
])
def test_stack_config_edited_to_break_a_rule_exits_1_naming_it(tmp_path, chat_prod, monkeypatch, stack, old, new,
                                                                policy):
    _project(tmp_path, chat_prod, monkeypatch)
    path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    result = runner.invoke(app, ["preview", stack, "--out", "review"])
    assert policy in result.output
    if policy == "StackConfigError":  # the Blueprint model refuses spot in production before any policy runs
        assert result.exit_code == 2 and "does not run on spot capacity" in result.output
        return
    assert result.exit_code == 1, result.output
    assert f"| mandatory | {policy} |" in (tmp_path / "review" / "plan.md").read_text()


@pytest.mark.parametrize(("stack", "old", "new", "names"), [
    # Below the requirements the stack was planned from: refused before any policy runs.
    ("chat-assistant-prod", "image: vllm/vllm-openai:v0.24.0", "image: vllm/vllm-openai:latest",
     ["servingblueprints:blueprint.engine.image", "the catalog pins"]),
    ("platform-prod-us-east-1", "audit_logging: true\n    audit_log_retention_days: 365", "audit_logging: false",
     ["servingblueprints:platform.audit_logging", "chat-assistant-prod", "compliance.audit_logging"]),
])
def test_stack_config_edited_below_its_requirements_exits_2_naming_the_field(tmp_path, chat_prod, monkeypatch, stack,
                                                                            old, new, names):
    _project(tmp_path, chat_prod, monkeypatch)
    path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    result = runner.invoke(app, ["preview", stack])
    assert result.exit_code == 2, result.output
    for name in names:
        assert name in result.output, result.output


def test_missing_policy_config_exits_2(tmp_path, chat_prod, monkeypatch):
    _project(tmp_path, chat_prod, monkeypatch)
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--policy-config", "nope.json"])
    assert result.exit_code == 2 and "cannot read policy config" in result.output


def test_baseline_of_another_stack_exits_2(tmp_path, chat_prod, monkeypatch):
    _project(tmp_path, chat_prod, monkeypatch)
    assert runner.invoke(app, ["preview", "chat-assistant-prod", "--out", "base"]).exit_code == 0
    data = json.loads((tmp_path / "base" / "plan.json").read_text())
    data["stack"] = "chat-assistant-dev"
    (tmp_path / "base" / "plan.json").write_text(json.dumps(data))
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--baseline", "base/plan.json"])
    assert result.exit_code == 2 and "a report of stack 'chat-assistant-dev', not 'chat-assistant-prod'" in result.output


def test_program_warnings_go_into_the_report_and_secrets_print_as_placeholders(tmp_path, chat_prod, monkeypatch):
    _project(tmp_path, chat_prod, monkeypatch)
    result = runner.invoke(app, ["preview", "chat-assistant-prod", "--out", "review"])
    assert "set before `pulumi up`: servingblueprints:hfToken" in result.output  # a gated model's token
    assert "kubeconfig=[secret]" in result.output
    assert "### Warnings" in (tmp_path / "review" / "plan.md").read_text()


def test_a_private_stack_is_checked_as_private_whatever_the_environment_file_says(tmp_path, monkeypatch):
    from blueprints.review.stack import review_stack

    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    program = tmp_path / "program.py"
    program.write_text((ROOT / "__main__.py").read_text() + "\nimport pulumi_kubernetes as k8s\n"
                       "k8s.core.v1.Service('public', metadata={'name': 'public', 'namespace': 'serving'},\n"
                       "    spec={'type': 'LoadBalancer', 'ports': [{'port': 80}]})\n")
    config = ROOT / "policies" / "config" / "prod.json"
    assert json.loads(config.read_text())["private-endpoints"]["privateOnly"] is False
    report = review_stack("regulated-assistant-prod", stacks_dir=tmp_path / "stacks", program=program,
                          policy_config=config)
    [verdict] = [v for v in report.policy_verdicts if v.policy == "private-endpoints"]
    assert verdict.level == "mandatory" and verdict.resource.endswith("::public")
    clean = review_stack("regulated-assistant-prod", stacks_dir=tmp_path / "stacks", program=ROOT / "__main__.py",
                         policy_config=config)
    assert clean.policy_verdicts == []


def test_a_changed_dashboard_shows_an_excerpt_not_its_whole_json(report):
    """Found in a new-user trial: an ITL change rewrote the dashboard ConfigMap and plan.md printed its 8 KB JSON
    before and after in the replacement warning and in every row of the change table (146,502 characters, beyond
    what a pull-request comment holds)."""
    from blueprints.review.changes import SHOWN_CHARS

    base = report.to_json()
    head = json.loads(json.dumps(base))
    dashboard = next(r for r in head["resources"] if r["type"] == "kubernetes:core/v1:ConfigMap"
                     and r["name"].endswith("-dashboard"))
    [key] = dashboard["inputs"]["data"]
    whole = dashboard["inputs"]["data"][key]
    assert len(whole) > 10 * SHOWN_CHARS
    dashboard["inputs"]["data"][key] = whole.replace("false", "true", 1)
    text = render_markdown(report, diff=diff_reports(base, head))
    [row] = [line for line in text.splitlines() if f"`data.{key}`" in line]
    assert f"({len(repr(whole)):,} characters)" in row and whole not in row
    assert max(len(line) for line in text.splitlines()) < 4 * SHOWN_CHARS + 200


def test_a_report_beyond_a_comment_s_limit_leaves_out_the_resource_table_first(report, monkeypatch):
    import blueprints.review.report.stack as report_module

    full = render_markdown(report)
    table = full.index("<details>")
    monkeypatch.setattr(report_module, "MAX_COMMENT_CHARS", table + 200)
    text = render_markdown(report)
    assert len(text) <= table + 200 and "<details>" not in text
    assert "The resource table" in text and "plan.json has all of it" in text
    monkeypatch.setattr(report_module, "MAX_COMMENT_CHARS", 3000)
    text = render_markdown(report)
    assert len(text) <= 3000 and text.endswith("plan.json has all of it._\n")
