"""Project files a real Pulumi CLI reads: Pulumi.yaml against Pulumi's own schema, and the program's layout."""

from __future__ import annotations

import json

import jsonschema
import yaml

from tests.conftest import ROOT


def test_pulumi_yaml_matches_pulumis_project_schema():
    # tests/data/pulumi-project.schema.json: sdk/go/common/workspace/project.json from the Pulumi repo (Apache-2.0).
    schema = json.loads((ROOT / "tests" / "data" / "pulumi-project.schema.json").read_text())
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    jsonschema.validate(project, schema)
    assert project["name"] == "servingblueprints"
    assert project["stackConfigDir"] == "stacks"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}


def test_committed_stack_configs_are_current(tmp_path):
    """Every committed stack config equals what `blueprint plan` writes today for its requirements file."""
    from blueprints.catalog import load_catalog
    from blueprints.planner import plan
    from blueprints.requirements import load_requirements
    from blueprints.review import environment_guardrails
    from blueprints.stackconfig import write_stack_configs

    committed = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert committed, "the bundled examples' stack configs must be committed"
    for req_file in sorted((ROOT / "stacks" / "requirements").glob("*.yaml")):
        source = req_file.relative_to(ROOT).as_posix()
        req = load_requirements(req_file)
        limits = environment_guardrails(req, ROOT / "policies" / "config")
        for path in write_stack_configs(plan(req, load_catalog(), guardrails=limits), tmp_path, source=source):
            assert (ROOT / "stacks" / path.name).read_text() == path.read_text(), f"re-run blueprint plan {source}"
