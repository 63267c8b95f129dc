"""Project files a real Pulumi CLI reads: Pulumi.yaml against Pulumi's own schema, and the program's layout."""

from __future__ import annotations

import json

import jsonschema
import yaml

from tests.conftest import PLAN_DATE, ROOT


def test_pulumi_yaml_matches_pulumis_project_schema():
    # tests/data/pulumi-project.schema.json: sdk/go/common/workspace/project.json from the Pulumi repo (Apache-2.0).
    schema = json.loads((ROOT / "tests" / "data" / "pulumi-project.schema.json").read_text())
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    jsonschema.validate(project, schema)
    assert project["name"] == "servingblueprints"
    assert project["stackConfigDir"] == "stacks"
    # Pulumi's uv toolchain (sdk/python/toolchain/uv.go) runs `uv sync` and `uv run python` with
    # UV_PROJECT_ENVIRONMENT=.venv: `pulumi up` runs in the environment `make install` builds from uv.lock.
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "uv", "virtualenv": ".venv"}}


def test_installs_come_from_the_committed_locks():
    import tomllib

    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = {p["name"]: p["version"] for p in lock["package"] if "version" in p}
    for name in ("pulumi", "pulumi-aws", "pulumi-kubernetes", "pydantic", "pytest", "import-linter", "mkdocs",
                 "mkdocs-material"):
        assert name in locked, name
    makefile = (ROOT / "Makefile").read_text()
    assert "sync --locked" in makefile and "--require-hashes -r $(CHECKOV_LOCK)" in makefile
    checkov = (ROOT / "tests" / "tools" / "checkov.lock").read_text()
    assert "checkov==3.3.30" in checkov and "--hash=sha256:" in checkov


def test_committed_stack_configs_are_current(tmp_path):
    """Every committed stack config (services and platforms) equals what `blueprint plan` writes for its requirements
    file on the plan date the bundled examples were planned on, over the committed configs (whose hardware a re-plan
    keeps within the switch threshold): a fixed point."""
    from blueprints.contracts.stackconfig import write_stack_configs
    from blueprints.workspace import plan_requirements_file

    committed = sorted(p.name for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert committed, "the bundled examples' stack configs must be committed"
    written = set()
    for req_file in sorted((ROOT / "stacks" / "requirements").glob("*.yaml")):
        if req_file.name == "platform.yaml":
            continue
        source = req_file.relative_to(ROOT).as_posix()
        planned = plan_requirements_file(req_file, as_of=PLAN_DATE, policy_dir=ROOT / "policies" / "config",
                                         stacks_dir=ROOT / "stacks")
        out = tmp_path / req_file.stem
        # A platform's header names the requirements folder (every file there shapes it), so planning any service on
        # it, `make demo` included, writes the same bytes, header and all.
        for path in write_stack_configs(planned.subjects, out, source=source, platform_source="stacks/requirements",
                                        cluster_addons=planned.cluster_addons, as_of=PLAN_DATE):
            committed_text = (ROOT / "stacks" / path.name).read_text()
            assert committed_text == path.read_text(), f"re-run blueprint plan {source}"
            written.add(path.name)
    assert written == set(committed), f"stale stack configs: {sorted(set(committed) - written)}"
