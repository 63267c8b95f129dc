"""The preview reviews exactly what `pulumi up` reads: a stack config's keys resolved as the Pulumi CLI resolves them
(bare keys in the project's namespace, the old `<ns>:config:<name>` form, `secure:` values), and refused (exit 2,
naming the key and what the CLI reads) where the review would show something else; provider settings only as the
plan writes them or platform.yaml declares them.

The rules are Pulumi's (see `blueprints.contracts.pulumi_config`); the cases marked "Pulumi's own test" restate the
CLI's unit tests at pulumi/pulumi v3.259 (`sdk/go/common/resource/config/key_test.go` TestParseKey,
`sdk/go/common/workspace/loaders_test.go` TestEmptyValueWarning). The CLI itself is not installable offline.
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.pulumi_config import (
    ConfigEntry, cli_config, cli_key, engine_value, yaml_v3_differences, yaml_v3_scalar,
)
from blueprints.contracts.stackconfig import (
    PLANNED_PROVIDER_KEYS, PROJECT, PROJECT_KEYS, config_values, read_stack_settings,
)
from blueprints.core.errors import StackConfigError
from blueprints.requirements.platform_file import PlatformRequirements
from tests.conftest import ROOT

runner = CliRunner()
PROD_STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*-prod*.yaml"))
CHAT = "chat-assistant-prod"
CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"


def entries(config: dict) -> dict[str, ConfigEntry]:
    return cli_config(config, project="proj", source="Pulumi.s.yaml")


# --- the resolution equals Pulumi's rules ------------------------------------------------------------------------

def test_a_bare_key_is_in_the_projects_namespace():
    found = entries({"instanceSize": "t3.micro"})
    assert list(found) == ["proj:instanceSize"]
    assert found["proj:instanceSize"].spelled == "instanceSize"


def test_a_namespaced_key_is_read_as_written_and_the_old_config_form_as_namespace_name():
    # Pulumi's own test (TestParseKey): "test:config:key" and "test:key" are both namespace "test", name "key".
    assert cli_key("test:config:key", project="proj") == "test:key"
    assert cli_key("test:key", project="proj") == "test:key"
    assert list(entries({"aws:region": "us-east-1"})) == ["aws:region"]


def test_a_key_with_two_colons_other_than_config_is_refused_as_the_cli_refuses_it():
    # Pulumi's own test (TestParseKey): "test:data:key" is not a configuration key.
    with pytest.raises(ValueError, match=r"could not parse test:data:key as a configuration key \(configuration keys "
                                         r"should be of the form `<namespace>:<name>`\)"):
        cli_key("test:data:key", project="proj")
    with pytest.raises(StackConfigError, match="a:b:c:d as a configuration key"):
        entries({"a:b:c:d": 1})


@pytest.mark.parametrize("spellings", [("blueprint", "proj:blueprint"), ("proj:config:blueprint", "proj:blueprint"),
                                       ("blueprint", "proj:config:blueprint")])
def test_one_key_spelled_two_ways_is_ambiguous_and_names_both_and_what_the_cli_reads(spellings):
    with pytest.raises(StackConfigError) as raised:
        entries({spellings[0]: {"a": 1}, spellings[1]: {"a": 2}})
    message = str(raised.value)
    assert f"{spellings[0]} and {spellings[1]} are both proj:blueprint" in message
    assert "at random" in message and "keep only proj:blueprint" in message


def test_secure_values_are_secrets_also_inside_objects_and_lists():
    found = entries({"proj:apiKey": {"secure": "v1:abc"}, "proj:nested": {"a": {"b": [{"secure": "v1:x"}]}},
                     "proj:notSecure": {"secure": 1}, "proj:twoKeys": {"secure": "v1:x", "other": "y"},
                     "proj:plain": "text"})
    assert {k: e.secret for k, e in found.items()} == {
        "proj:apiKey": True, "proj:nested": True, "proj:notSecure": False, "proj:twoKeys": False, "proj:plain": False}


def test_values_reach_the_program_as_the_engine_passes_them():
    found = entries({"s": "text", "b": True, "i": 42, "f": 600000.0, "g": 1.5, "n": None,
                     "o": {"z": [1, 2.0], "a": {"k": "v"}}})
    # Go's encoding/json: sorted keys, no spaces, float64 600000 written without a fraction; no value reads as ""
    # (Pulumi's own test TestEmptyValueWarning: `project:a:` is config.NewValue("")).
    assert {k.split(":")[1]: engine_value(e) for k, e in found.items()} == {
        "s": "text", "b": "true", "i": "42", "f": "600000", "g": "1.5", "n": "",
        "o": '{"a":{"k":"v"},"z":[1,2]}'}
    assert json.loads(engine_value(found["proj:o"])) == {"a": {"k": "v"}, "z": [1, 2]}


@pytest.mark.parametrize(("text", "pyyaml", "cli"), [
    ("yes", True, "yes"), ("on", True, "on"), ("1:30", 90, "1:30"), ("1e3", "1e3", 1000.0), ("0o17", "0o17", 15),
    ("08", "08", 8.0)])
def test_a_scalar_yaml_1_1_and_1_2_read_differently_is_named(text, pyyaml, cli):
    # yaml.v3 resolve.go: only true/false are booleans, no base-60, `[eE]` floats without a dot, 0o octal, Go's
    # ParseInt (leading-0 octal, else a float); PyYAML's YAML 1.1 resolver reads them as the other column.
    assert yaml_v3_scalar(text) == cli and yaml.safe_load(f"v: {text}")["v"] == pyyaml
    assert yaml_v3_differences(f"config:\n  proj:a: {{b: [x, {text}]}}\n") == [
        f"config.proj:a.b[1]: {text} is {pyyaml!r} here but {cli!r} to the Pulumi CLI (YAML 1.2)"]


@pytest.mark.parametrize("text", ["true", "false", "null", "12", "-3", "1.5", "0x1F", "0755", "1_000", "text",
                                  "'yes'", '"2026-01-01"'])
def test_a_scalar_both_read_alike_is_not_named(text):
    assert yaml_v3_differences(f"config:\n  proj:a: {text}\n") == []


def test_a_date_is_refused_since_the_cli_reads_text(project):
    # yaml.v3 decode.go: "It looks like a timestamp but ... we set it as a string" when decoding into interface{}.
    path = project / "stacks" / f"Pulumi.{CHAT}.yaml"
    path.write_text(path.read_text() + f"  {PROJECT}:clusterName: 2026-01-01\n")
    _refused(CHAT, f"config.{PROJECT}:clusterName: 2026-01-01 is datetime.date(2026, 1, 1) here but '2026-01-01' "
                   "to the Pulumi CLI", "quote it")


# --- this project's keys -----------------------------------------------------------------------------------------

def test_the_project_namespace_is_pulumi_yamls_name():
    assert yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["name"] == PROJECT


def _program_reads() -> set[str]:
    """The names the program reads through `pulumi.Config(PROJECT)` (string literals passed to its getters)."""
    getters = {"get", "require", "get_secret", "require_secret", "get_object", "require_object", "get_bool",
               "get_int", "get_float", "require_bool", "require_int", "require_float"}
    tree = ast.parse((ROOT / "components" / "program.py").read_text())
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in getters
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


def test_every_key_the_program_reads_or_the_plan_writes_is_a_known_project_key_and_no_other():
    from blueprints.contracts.stackconfig import PlanRecord, ROLES_ANYWHERE_CA_KEY

    reads = _program_reads() | {ROLES_ANYWHERE_CA_KEY.split(":", 1)[1]}  # read through the constant
    assert {"blueprint", "platform", "apiKey", "hfToken", "kubeconfig", "platformStack"} <= reads  # the scan works
    planned = PlanRecord(requirements="stacks/requirements/x.yaml", as_of="2026-12-01")
    written = set()
    for stack in (CHAT, "platform-prod-us-east-1"):
        subject = read_stack_settings(ROOT / "stacks" / f"Pulumi.{stack}.yaml")[0]
        keys = config_values(subject, cluster_addons=[], planned=planned)
        assert {k for k in keys if not k.startswith(f"{PROJECT}:")} == set(PLANNED_PROVIDER_KEYS)
        written |= {k.split(":", 1)[1] for k in keys if k.startswith(f"{PROJECT}:")}
    assert reads | written == PROJECT_KEYS


@pytest.mark.parametrize("path", sorted((ROOT / "stacks").glob("Pulumi.*.yaml")), ids=lambda p: p.name)
def test_every_bundled_stack_config_reads_the_same_to_the_cli_and_the_review(path):
    subject, found = read_stack_settings(path)
    assert all(e.spelled == k for k, e in found.items())
    assert found["aws:region"].value == subject.region


# --- the break-it reproducers: each exits 2 at `blueprint preview`, naming the key -------------------------------

def _edit(project: Path, stack: str, **extra) -> None:
    path = project / "stacks" / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"].update(extra)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _refused(stack: str, *names: str, command: tuple[str, ...] = ("preview",)) -> str:
    result = runner.invoke(app, [*command, stack] if command == ("preview",) else list(command))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for name in names:
        assert name in result.output, result.output
    return result.output


def test_a_bare_blueprint_key_opening_the_service_to_the_internet_is_refused(project):
    path = project / "stacks" / f"Pulumi.{CHAT}.yaml"
    public = copy.deepcopy(yaml.safe_load(path.read_text())["config"][f"{PROJECT}:blueprint"])
    public["network"]["exposure"] = {"scope": "public", "allowed_cidrs": ["0.0.0.0/0"],
                                     "acknowledge_open_internet": True, "tls_certificate_arn": CERT}
    _edit(project, CHAT, blueprint=public)
    _refused(CHAT, f"{PROJECT}:blueprint and blueprint are both {PROJECT}:blueprint", "at random")
    _refused(CHAT, "blueprint", command=("plan", "--check"))


@pytest.mark.parametrize("key", ["apiKey", "hfToken", f"{PROJECT}:config:apiKey"])
def test_a_secret_in_plain_text_is_refused_however_it_is_spelled(project, key):
    _edit(project, CHAT, **{key: "k" * 40})
    name = key.rsplit(":", 1)[-1]
    _refused(CHAT, f"{PROJECT}:{name} is plain text", f"{key} is read by the Pulumi CLI as {PROJECT}:{name}")


@pytest.mark.parametrize("stack", PROD_STACKS)
@pytest.mark.parametrize(("key", "value"), [
    ("aws:assumeRole", {"roleArn": "arn:aws:iam::999999999999:role/deployer"}),
    ("aws:endpoints", [{"s3": "https://s3.example.net", "sts": "https://sts.example.net"}]),
    ("aws:profile", "other-account"),
])
def test_a_provider_setting_the_plan_does_not_write_is_refused_on_every_prod_stack(project, stack, key, value):
    _edit(project, stack, **{key: value})
    _refused(stack, key, "platform.yaml", "provider_settings")


@pytest.mark.parametrize("key", ["aws:accessKey", "aws:secretKey", "aws:skipCredentialsValidation", "aws:region2",
                                 "kubernetes:kubeconfig", "kubernetes:context", "random:anything",
                                 "pulumi:disable-default-providers"])
def test_any_other_namespace_is_refused_by_the_rule_not_a_list(project, key):
    _edit(project, CHAT, **{key: "x"})
    _refused(CHAT, key, "the plan does not write")


def test_an_undeclared_provider_setting_fails_plan_check_too(project):
    _edit(project, "platform-prod-us-east-1", **{"aws:assumeRole": {"roleArn": "arn:aws:iam::999999999999:role/x"}})
    _refused("", "Pulumi.platform-prod-us-east-1.yaml", "aws:assumeRole", command=("plan", "--check"))


def test_an_unknown_project_key_is_refused_with_the_close_match(project):
    _edit(project, CHAT, **{f"{PROJECT}:apikey": {"secure": "v1:abc"}})
    _refused(CHAT, f"{PROJECT}:apikey is no key", f"did you mean {PROJECT}:apiKey?")


def test_a_secure_value_where_the_program_reads_plain_config_is_refused(project):
    _edit(project, CHAT, **{f"{PROJECT}:clusterName": {"secure": "v1:abc"}})
    _refused(CHAT, f"{PROJECT}:clusterName holds a `secure:` value")


def test_an_esc_environment_import_is_refused(project):
    path = project / "stacks" / f"Pulumi.{CHAT}.yaml"
    data = yaml.safe_load(path.read_text())
    data["environment"] = ["org/other-account"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    _refused(CHAT, "`environment:` imports Pulumi ESC environments")


# --- provider settings the platform team declares -----------------------------------------------------------------

def _declare(project: Path, settings: dict) -> None:
    path = project / "stacks" / "requirements" / "platform.yaml"
    data = yaml.safe_load(path.read_text())
    data["provider_settings"] = settings
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_declared_provider_setting_passes_with_its_value_and_is_refused_with_another(project):
    _declare(project, {"aws:profile": "prod-deployer"})
    _edit(project, CHAT, **{"aws:profile": "prod-deployer"})
    path = project / "stacks" / f"Pulumi.{CHAT}.yaml"
    assert read_stack_settings(path)[1]["aws:profile"].value == "prod-deployer"
    _edit(project, CHAT, **{"aws:profile": "other-account"})
    _refused(CHAT, 'aws:profile is "other-account" but platform.yaml `provider_settings` declares "prod-deployer"')


@pytest.mark.parametrize(("settings", "message"), [
    ({"aws:region": "us-east-1"}, "the plan writes aws:region"),
    ({"aws:secretKey": "x"}, "carries credentials"),
    ({"kubernetes:kubeconfig": "x"}, "carries credentials"),
    ({f"{PROJECT}:blueprint": {}}, "the project's own keys"),
    ({"aws:assumeRole": {"secure": "v1:x"}}, "cannot be reviewed"),
    ({"aws:profile": "p" * 3000}, "longer than 2000 characters"),
    ({"aws": "x"}, "String should match pattern"),
])
def test_platform_yaml_provider_settings_are_bounded_where_they_enter(settings, message):
    with pytest.raises(ValueError, match=message):
        PlatformRequirements.model_validate({"provider_settings": settings})


def test_a_bad_provider_settings_declaration_exits_2_naming_platform_yaml(project):
    _declare(project, {"aws:secretKey": "AKIA"})
    _refused(CHAT, "platform.yaml", "provider_settings", "carries credentials")


def test_every_recorded_pulumi_fact_has_a_source_and_a_test_here():
    facts = yaml.safe_load((ROOT / "blueprints" / "catalog" / "pulumi_config.yaml").read_text())["facts"]
    assert len(facts) >= 8
    for fact in facts:
        assert fact["source"] and fact["rule"], fact["id"]
        for name in fact["checked_by"]:
            assert callable(globals().get(name)), f"{fact['id']}: no test {name}"


@pytest.mark.parametrize("declaration", [{"aws:assumeRole": {"value": {"roleArn": "arn:aws:iam::999999999999:role/x"}}},
                                         {"aws:profile": "other"}, {"apiKey": "k" * 40},
                                         {"clusterName": {"type": "string", "default": "theirs"}}])
def test_a_value_the_project_file_gives_every_stack_is_refused(project, declaration):
    path = project / "Pulumi.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"] = declaration
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    _refused(CHAT, "Pulumi.yaml: config.", next(iter(declaration)), "no stack config shows")


def test_a_type_only_declaration_in_the_project_file_gives_no_value():
    from blueprints.contracts.pulumi_config import project_config_problems

    assert project_config_problems({"config": {"clusterName": {"type": "string"}}}, source="Pulumi.yaml") == []
    assert project_config_problems({"name": "x"}, source="Pulumi.yaml") == []
