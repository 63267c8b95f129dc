"""Nothing weakens without a reviewed change: hand edits of generated stack configs, each kept apart, make the edited
stack's preview exit 1 or 2 naming the field, and `blueprint plan --check` exit 1 naming the stack; platforms belong
to the platform team (a service never changes one), and a changed platform reviews its services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.review.stacks import affected_stacks, list_stacks
from tests.conftest import ROOT

runner = CliRunner()
EU_CERT = "arn:aws:acm:eu-central-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"
US_CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"


def edit_config(project: Path, stack: str, edit) -> None:
    """Apply `edit` to the `config:` map of a committed stack config, as someone editing the file would."""
    path = project / "stacks" / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["config"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def at(key: str, path: str, value) -> callable:
    """An edit setting `path` (dots; list indexes as numbers) below config key `key` to `value`."""
    def edit(config: dict) -> None:
        node = config[key]
        *parents, last = path.split(".")
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(last) if isinstance(node, list) else last] = value
    return edit


def edits(*steps) -> callable:
    def edit(config: dict) -> None:
        for step in steps:
            step(config)
    return edit


def service(path: str, value) -> callable:
    return at("servingblueprints:blueprint", path, value)


def platform(path: str, value) -> callable:
    return at("servingblueprints:platform", path, value)


def plain(key: str, value) -> callable:
    def edit(config: dict) -> None:
        config[key] = value
    return edit


PUBLIC = {"scope": "public", "allowed_cidrs": ["0.0.0.0/0"], "acknowledge_open_internet": True}
HAND_EDITS = [
    # (id, stack, edit, preview exit, what the preview names, whether plan --check sees it)
    ("regulated-internet-facing", "regulated-assistant-prod", edits(
        service("compliance.private_only", False), service("network.private_only", False),
        service("network.exposure", {**PUBLIC, "tls_certificate_arn": EU_CERT})), 2,
     ["compliance.private_only", "network.private_only", "network.exposure.scope"], True),
    ("regulated-kms-downgrade", "regulated-assistant-prod", edits(
        service("compliance.customer_managed_kms", False), service("storage.customer_managed_kms", False)), 2,
     ["compliance.customer_managed_kms", "storage.customer_managed_kms"], True),
    ("chat-made-public", "chat-assistant-prod",
     service("network.exposure", {**PUBLIC, "tls_certificate_arn": US_CERT}), 2, ["network.exposure.scope"], True),
    ("private-platform-public-api", "platform-prod-eu-central-1", platform("network.private_endpoint", False), 2,
     ["network.private_endpoint", "regulated-assistant-prod", "compliance.private_only"], True),
    ("private-platform-secrets-kms-off", "platform-prod-eu-central-1", platform("secrets_kms", False), 2,
     ["secrets_kms", "regulated-assistant-prod", "compliance.customer_managed_kms"], True),
    ("private-platform-audit-off", "platform-prod-eu-central-1", edits(
        platform("audit_logging", False), platform("audit_log_retention_days", None)), 2,
     ["audit_logging", "regulated-assistant-prod"], True),
    ("shared-namespace", "chat-assistant-prod", service("platform.namespace", "partner-api"), 2,
     ["platform.namespace", "partner-api-prod"], True),
    ("system-namespace", "chat-assistant-prod", service("platform.namespace", "kube-system"), 2,
     ["platform.namespace", "system namespace"], True),
    ("empty-api-key", "chat-assistant-prod", plain("servingblueprints:apiKey", ""), 2,
     ["servingblueprints:apiKey is empty"], False),
    ("plaintext-api-key", "chat-assistant-prod", plain("servingblueprints:apiKey", "k" * 40), 2,
     ["servingblueprints:apiKey is plain text"], False),
    ("plaintext-hf-token", "chat-assistant-prod", plain("servingblueprints:hfToken", "hf_abc"), 2,
     ["servingblueprints:hfToken is plain text"], False),
    ("plaintext-receiver-url", "platform-prod-us-east-1",
     plain("servingblueprints:alertReceiverUrl", "https://hooks.slack.com/services/T/B/X"), 2,
     ["servingblueprints:alertReceiverUrl is plain text"], False),
    ("monitoring-off-in-prod", "chat-assistant-prod", service("monitored", False), 2, ["monitored"], True),
    ("prod-without-receiver", "chat-assistant-prod", service("alerting.receiver", None), 2,
     ["alerting.receiver"], True),
    ("prod-platform-without-receiver", "platform-prod-us-east-1", platform("alerting.receiver", None), 2,
     ["alerting.receiver"], True),
    ("target-1e9", "chat-assistant-prod", service("autoscaling.target", 1e9), 2, ["autoscaling.target"], True),
    ("prod-marked-non-production", "chat-assistant-prod", edits(
        service("production", False), service("compliance.production", False),
        service("storage.retain_on_delete", False)), 2, ["production", "storage.retain_on_delete"], True),
    ("unpinned-ami-alias", "platform-prod-us-east-1", platform("node_classes.0.ami_alias", "al2023@latest"), 2,
     ["node_classes[0] (gpu).ami_alias"], True),
    ("admin-role-of-another-account", "platform-prod-us-east-1",
     platform("access.admin_role_arns", ["arn:aws:iam::999999999999:role/admins"]), 2, ["access.account_id"], True),
    ("foreign-admin-role", "platform-prod-us-east-1", edits(
        platform("access.account_id", "123456789012"),
        platform("access.admin_role_arns", ["arn:aws:iam::999999999999:role/admins"])), 2,
     ["999999999999", "other_account_ids"], True),
    ("newline-in-platform-tag", "platform-prod-us-east-1", platform("tags.owner", "ml\nplatform"), 2,
     ["tags.owner"], True),
    ("slo-loosened", "chat-assistant-prod", edits(service("slo.ttft_p95_ms", 600000.0),
                                                  service("slo.itl_p95_ms", 10000.0)), 2,
     ["slo.ttft_p95_ms", "slo.itl_p95_ms", "slo.ttft_p95_ms is 1500 ms"], True),
    ("availability-lowered", "chat-assistant-prod", service("slo.availability_pct", 99.0), 2,
     ["slo.availability_pct"], True),
    ("warm-floor-below-high-availability", "chat-assistant-prod", service("autoscaling.min_replicas", 1), 2,
     ["autoscaling.min_replicas", "keeps at least 2 replica(s) warm"], True),
    ("retrieval-part-latency-loosened", "rag-assistant-retrieval-prod", service("slo.latency_p95_ms", 600000.0), 2,
     ["slo.latency_p95_ms", "slo.latency_p95_ms is 150 ms"], True),
    ("vpc-cidr-with-host-bits", "platform-prod-us-east-1", platform("network.vpc_cidr", "10.30.5.0/16"), 2,
     ["network.vpc_cidr", "write its network address, 10.30.0.0/16"], True),
    ("regions-widened", "regulated-assistant-prod",
     service("compliance.regions_allowed", ["eu-central-1", "eu-west-1", "us-east-1"]), 2,
     ["compliance.regions_allowed"], True),
    ("engine-image-swapped", "chat-assistant-prod", service("engine.image", "vllm/vllm-openai:v0.10.0"), 2,
     ["engine.image"], True),
]


#: The hand edits whose `plan --check` part `make test` runs (each check re-plans the whole project): a service's, a
#: platform's whose services it reviews, one of several fields, and a compound part's. `make test` previews every
#: edit; `make test-slow` runs the `plan --check` part of each other edit the check sees (`<id>-plan-check`).
PLAN_CHECKED = {"chat-made-public", "private-platform-public-api", "prod-marked-non-production",
                "retrieval-part-latency-loosened"}


def _hand_edit_cases() -> list:
    cases = []
    for id_, stack, edit, code, names, drift in HAND_EDITS:
        if drift and id_ not in PLAN_CHECKED:
            cases += [pytest.param(stack, edit, code, names, False, id=id_),
                      pytest.param(stack, edit, code, names, True, id=f"{id_}-plan-check", marks=pytest.mark.slow)]
        else:
            cases.append(pytest.param(stack, edit, code, names, drift, id=id_))
    return cases


@pytest.mark.parametrize(("stack", "edit", "code", "names", "drift"), _hand_edit_cases())
def test_a_hand_edit_fails_the_edited_stacks_preview_naming_the_field_and_plan_check_naming_the_stack(
        project, stack, edit, code, names, drift):
    edit_config(project, stack, edit)
    result = runner.invoke(app, ["preview", stack])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    for name in names:
        assert name in result.output, result.output
    if drift:
        check = runner.invoke(app, ["plan", "--check", "--json"])
        assert check.exit_code == 1, check.output
        found = json.loads(check.stdout)
        assert {d["stack"] for d in found} == {stack}, found
        assert all("instead" in d["fix"] or "re-plan" in d["fix"] for d in found)


def test_plan_check_of_the_bundled_project_is_clean(project):
    result = runner.invoke(app, ["plan", "--check"])
    assert result.exit_code == 0, result.output


def test_plan_check_names_the_field_and_the_requirements_field_to_change(project):
    edit_config(project, "partner-api-prod", service("network.exposure.allowed_cidrs", ["0.0.0.0/0"]))
    result = runner.invoke(app, ["plan", "--check", "stacks/requirements/partner-api.yaml", "--json"])
    assert result.exit_code == 1, result.output
    found = json.loads(result.stdout)
    assert {d["stack"] for d in found} == {"partner-api-prod"}
    assert [d["committed"] for d in found if d["committed"] is not None] == ["0.0.0.0/0"]
    for drift in found:
        assert drift["field"].startswith("servingblueprints:blueprint.network.exposure.allowed_cidrs[")
        assert "change exposure.allowed_cidrs[" in drift["fix"]
        assert "in stacks/requirements/partner-api.yaml instead" in drift["fix"]


def test_plan_check_reports_a_stack_config_no_requirements_file_plans(project):
    (project / "stacks" / "requirements" / "edge-classifier.yaml").unlink()
    result = runner.invoke(app, ["plan", "--check", "--json"])
    assert result.exit_code == 1
    stale = {d["stack"] for d in json.loads(result.stdout) if d["field"] == "(file)"}
    assert stale == {"edge-classifier-dev", "edge-classifier-prod"}


def test_a_changed_platform_lists_every_service_on_it():
    stacks = list_stacks(ROOT / "stacks", policy_dir=ROOT / "policies" / "config")
    found = [s.stack for s in affected_stacks(["stacks/Pulumi.platform-prod-us-east-1.yaml"], stacks)]
    assert found == ["platform-prod-us-east-1", "chat-assistant-prod", "partner-api-prod",
                     "rag-assistant-generator-prod", "rag-assistant-retrieval-prod", "search-relevance-prod"]


def _private_chat(project: Path, **environment) -> Path:
    """A private-only self-hosted service in us-east-1, the shared prod platform's region."""
    data = yaml.safe_load((project / "stacks" / "requirements" / "chat-assistant.yaml").read_text())
    data.update(service="private-chat", compliance={**data["compliance"], "private_only": True})
    data["environments"] = {"prod": {**data["environments"]["prod"], **environment}}
    path = project / "stacks" / "requirements" / "private-chat.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _committed(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in (project / "stacks").glob("Pulumi.*.yaml")}


def test_a_private_service_on_a_shared_platform_is_refused_and_changes_nothing_else(project):
    before = _committed(project)
    refused = runner.invoke(app, ["plan", str(_private_chat(project)), "--as-of", "2026-12-01"])
    assert refused.exit_code == 2
    assert "platform-prod-us-east-1, whose posture (stacks/requirements/platform.yaml) lacks a private Kubernetes " \
           "API endpoint" in refused.output
    assert "set platforms.prod-us-east-1.private_endpoint: true" in refused.output
    assert "declare a dedicated platform for such services under platforms:" in refused.output
    for other in ("chat-assistant", "partner-api"):
        planned = runner.invoke(app, ["plan", f"stacks/requirements/{other}.yaml", "--as-of", "2026-12-01"])
        assert planned.exit_code == 0, planned.output
    assert _committed(project) == before  # the shared platform and every other plan byte-identical


def test_a_private_service_on_its_dedicated_platform_leaves_the_shared_one_byte_identical(project):
    before = _committed(project)
    preq = project / "stacks" / "requirements" / "platform.yaml"
    data = yaml.safe_load(preq.read_text())
    data["platforms"]["private-use1"] = {
        "environment": "prod", "region": "us-east-1", "private_endpoint": True, "secrets_kms": True,
        "audit_logging": True, "runner_label": "runner-use1",
        "existing_vpc": {"vpc_id": "vpc-0123456789abcdef0",
                         "private_subnet_ids": ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]}}
    preq.write_text(yaml.safe_dump(data, sort_keys=False))
    # At a tenth of the chat's traffic (a few GPUs): the prod account's GPU quota (gpu-quota maxGpus) is shared by
    # every prod stack in the Region, first come first served (tests/test_account_gpus.py); within it, no other
    # stack's plan changes, so `plan --check` below judges the platforms alone.
    planned = runner.invoke(app, ["plan", str(_private_chat(project, platform="private-use1", traffic_scale=0.1)),
                                  "--as-of", "2026-12-01"])
    assert planned.exit_code == 0, planned.output
    after = _committed(project)
    assert {k: after[k] for k in before} == before
    assert sorted(set(after) - set(before)) == ["Pulumi.platform-private-use1.yaml", "Pulumi.private-chat-prod.yaml"]
    assert runner.invoke(app, ["plan", "--check"]).exit_code == 0


def test_a_requirements_file_outside_the_requirements_folder_is_refused_naming_the_folder(project):
    outside = project / "elsewhere.yaml"
    outside.write_text((project / "stacks" / "requirements" / "chat-assistant.yaml").read_text().replace(
        "service: chat-assistant", "service: elsewhere"))
    result = runner.invoke(app, ["plan", str(outside), "--as-of", "2026-12-01"])
    assert result.exit_code == 2
    assert "lives in the requirements folder" in result.output and "stacks/requirements" in result.output
    assert not (project / "stacks" / "Pulumi.elsewhere-prod.yaml").exists()


def _with_overrides(project: Path, *overrides: dict) -> Path:
    path = project / "stacks" / "requirements" / "chat-assistant.yaml"
    data = yaml.safe_load(path.read_text())
    data["overrides"] = list(overrides)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_an_override_is_applied_recorded_with_its_reason_and_shown_in_what_changed(project):
    path = _with_overrides(project, {"field": "autoscaling.cooldown_s", "value": 1200, "environments": ["prod"],
                                     "reason": "launch week: keep capacity through the evening peak"})
    result = runner.invoke(app, ["plan", str(path), "--as-of", "2026-12-01", "--json"])
    assert result.exit_code == 0, result.output
    [prod] = [s for s in json.loads(result.stdout) if s["stack"] == "chat-assistant-prod"]
    assert prod["blueprint"]["autoscaling"]["cooldown_s"] == 1200
    [applied] = prod["blueprint"]["overrides"]
    assert applied["value"] == 1200 and applied["planned"] not in (None, 1200)
    assert any("override autoscaling.cooldown_s = 1200" in r for r in prod["blueprint"]["rationale"])
    shown = {c["path"]: c["after"] for c in prod["review"]["requirements"]}
    assert shown["overrides.autoscaling.cooldown_s.reason"] == "launch week: keep capacity through the evening peak"
    [dev] = [s for s in json.loads(result.stdout) if s["stack"] == "chat-assistant-dev"]
    assert dev["blueprint"]["overrides"] == []
    assert runner.invoke(app, ["plan", "--check", str(path)]).exit_code == 0  # the override is the plan's now


@pytest.mark.parametrize(("override", "message"), [
    ({"field": "storage.retain_on_delete", "value": 0, "reason": "cheaper teardown of the pilot"},
     "overrides[0].field: 'storage.retain_on_delete' cannot be overridden: it is decided by "
     "environments.<env>.production"),
    ({"field": "network.exposure.allowed_cidrs", "value": 0, "reason": "open it up for the demo day"},
     "cannot be overridden: it is decided by exposure.allowed_cidrs"),
    ({"field": "autoscaling.target", "value": 1e9, "environments": ["prod"], "reason": "never scale out, please"},
     "autoscaling.target"),
    ({"field": "autoscaling.cooldown_s", "value": 1.5, "reason": "a fraction of a second more"},
     "is a whole number"),
    ({"field": "autoscaling.cooldown_s", "value": 60, "environments": ["qa"], "reason": "qa is not an environment"},
     "overrides[0].environments: 'qa' is not an environment of this file"),
])
def test_an_override_never_weakens_what_compliance_and_policy_demand(project, override, message):
    result = runner.invoke(app, ["plan", str(_with_overrides(project, override)), "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    assert message in result.output
