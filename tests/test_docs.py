"""The documentation site: it builds strict (no broken link or anchor, no page outside the nav), its reference lists
every field of `blueprint schema` and `blueprint schema --platform`, every CLI command and option, every stack
config key and every policy rule, and every command block of README.md and docs/ runs against the bundled example
or says why it is not run.

One build per session (`site`), shared by the tests that read the built pages.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from blueprints.cli import app
from tests.conftest import ROOT

#: A command block not run by the tests says why, on the line before its fence.
NOT_RUN = re.compile(r"^<!-- docs-test: not run \((?P<reason>.+)\) -->$")
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\s*$")
SHELL = {"bash", "sh", "shell", "console"}


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """`mkdocs build --strict` as `make docs` runs it, into a temporary folder; fails with the build's output."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                             str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return out


def _text(page: Path) -> str:
    """A built page's text, tags dropped and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def _codes(page: Path) -> set[str]:
    """Every inline code element's text on a built page."""
    return {html.unescape(c) for c in re.findall(r"<code>([^<]*)</code>", page.read_text(encoding="utf-8"))}


def test_the_site_builds_strict_with_every_page_in_the_nav_and_links_checked(site):
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    assert config["strict"] is True
    # Under --strict a warning fails the build: each check below is a warning.
    warn = 30  # logging.WARNING
    validation = config["validation"]
    assert validation["nav"]["omitted_files"] == warn and validation["nav"]["not_found"] == warn
    assert validation["links"]["not_found"] == warn and validation["links"]["anchors"] == warn
    assert validation["links"]["unrecognized_links"] == warn
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix(".html") for p in (ROOT / "docs").rglob("*.md"))
    assert pages and all((site / p).is_file() for p in pages)


def test_the_readme_links_only_to_pages_and_anchors_the_site_has(site):
    """The README is not part of the site, so mkdocs does not check its links: every link into docs/ names a page
    and, if any, an anchor of the built page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", readme)
    assert len(links) > 10
    broken = []
    for target, anchor in links:
        built = site / Path(target).relative_to("docs").with_suffix(".html")
        if not built.is_file() or (anchor and f'id="{anchor}"' not in built.read_text(encoding="utf-8")):
            broken.append(f"{target}#{anchor}")
    assert broken == []
    assert [t for t in re.findall(r"\]\(([^)#\s]+)", readme) if not t.startswith(("docs/", "http"))] == []


def _schema_paths(node: dict, defs: dict, prefix: str = "", seen: tuple[str, ...] = ()) -> list[str]:
    """Every field path of a JSON Schema: `a.b`, `a[].b` (list entries), `a.<name>.b` (mapping values)."""
    paths = []
    ref = node.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            return []
        node, seen = defs[name], (*seen, name)
    for alternative in node.get("anyOf", []) + node.get("oneOf", []):
        if "properties" not in node:
            paths += _schema_paths(alternative, defs, prefix, seen)
    if "items" in node:
        paths += _schema_paths(node["items"], defs, f"{prefix}[]", seen)
    for value in node.get("patternProperties", {}).values():
        paths += _schema_paths(value, defs, f"{prefix}.<name>", seen)
    if isinstance(node.get("additionalProperties"), dict):
        paths += _schema_paths(node["additionalProperties"], defs, f"{prefix}.<name>", seen)
    for key, value in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        paths += [path, *_schema_paths(value, defs, path, seen)]
    return paths


@pytest.mark.parametrize("args, page", [(["schema"], "requirements.html"),
                                        (["schema", "--platform"], "platform-yaml.html")])
def test_the_reference_lists_every_field_of_blueprint_schema(site, args, page):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    paths = _schema_paths(schema, schema.get("$defs", {}))
    assert len(paths) > 20
    listed = _codes(site / "reference" / page)
    assert [p for p in paths if p not in listed] == []
    text = _text(site / "reference" / page)
    assert [r for r in schema.get("x-cross-field-rules", {}) if r not in text] == []


def test_the_reference_lists_every_cli_command_and_option(site):
    group = typer.main.get_command(app)
    text = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    sections = dict(re.findall(r'<h2 id="blueprint-?([a-z-]*)"[^>]*>(.*?)(?=<h2 |</article>)', text, re.S))
    ctx = group.make_context("blueprint", ["--help"], resilient_parsing=True)
    missing = [o for p in group.get_params(ctx) for o in p.opts if o not in html.unescape(sections.get("", ""))]
    names = group.list_commands(ctx)
    assert set(names) == set(sections) - {""}
    def words(text: str) -> str:
        return " ".join(text.replace("`", "").split())

    for name in names:
        command = group.get_command(ctx, name)
        body = words(html.unescape(re.sub(r"<[^>]+>", "", sections[name])))
        for param in command.get_params(command.make_context(name, [], parent=ctx, resilient_parsing=True)):
            missing += [f"{name} {o}" for o in [*param.opts, *param.secondary_opts] if o not in body]
            if param.help and words(param.help) not in body:
                missing.append(f"{name} {param.name}: its help")
    assert missing == []


def test_the_reference_lists_every_stack_config_key_policy_rule_and_signal(site):
    from blueprints.catalog.signals import SIGNALS
    from blueprints.contracts.stackconfig import PROJECT, PROJECT_KEYS, REGION_KEY
    from policies.rules import RULES

    assert {s.name for s in SIGNALS} - _codes(site / "concepts" / "review.html") == set()

    keys = {f"{PROJECT}:{k}" for k in PROJECT_KEYS} | {REGION_KEY}
    assert keys - _codes(site / "reference" / "stack-config.html") == set()
    assert {r.name for r in RULES} - _codes(site / "reference" / "policies.html") == set()
    blueprint_fields = _codes(site / "reference" / "stack-config.html")
    from blueprints.contracts.blueprint import Blueprint

    assert set(Blueprint.model_fields) - blueprint_fields == set()


def command_blocks() -> list[tuple[str, int, str, str | None]]:
    """(file, line, commands, reason not run or None) of every shell block of README.md and docs/."""
    blocks = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        lines = path.read_text(encoding="utf-8").split("\n")
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if fence is None:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if fence.group("lang") in SHELL:
                marker = NOT_RUN.match(lines[i - 1]) if i else None
                blocks.append((str(path.relative_to(ROOT)), i + 1, "\n".join(lines[i + 1:end]),
                               marker.group("reason") if marker else None))
            i = end + 1
    return blocks


def test_every_command_block_runs_or_says_why_not():
    blocks = command_blocks()
    assert blocks and all(reason is None or reason.strip() for *_, reason in blocks)
    # A reason that names the tests covering the block names files that exist.
    cited = {t for *_, reason in blocks for t in re.findall(r"tests/test_\w+\.py", reason or "")}
    assert cited and [t for t in sorted(cited) if not (ROOT / t).is_file()] == []
    # A marker stands right before its block; one anywhere else marks nothing.
    for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        lines = path.read_text(encoding="utf-8").split("\n")
        stray = [n + 1 for n, line in enumerate(lines) if line.startswith("<!-- docs-test")
                 and not (NOT_RUN.match(line) and n + 1 < len(lines) and FENCE.match(lines[n + 1]))]
        assert stray == [], f"{path}: a docs-test marker not right before a fence on lines {stray}"


RUN = [(f"{file}:{line}", commands) for file, line, commands, reason in command_blocks() if reason is None]
#: A block running one of these runs in `make test-slow` (`blueprint pilot` plans each finalist's stack: about 5 s of
#: CPU; tests/test_pilot.py runs the same command on the chat assistant in `make test`); `make test` runs every
#: other block.
SLOW_COMMANDS = ("blueprint pilot ",)


@pytest.mark.parametrize("where, commands", [
    pytest.param(where, commands, id=where,
                 marks=[pytest.mark.slow] if any(c in commands for c in SLOW_COMMANDS) else [])
    for where, commands in RUN])
def test_a_command_block_runs_against_the_bundled_example(tmp_path, where, commands):
    """Run in a copy of the project's stacks and policy configs (a block may write files), with this checkout's
    `blueprint` first on the PATH."""
    for name in ("stacks", "policies"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{where}:\n{commands}\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
