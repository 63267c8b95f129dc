"""The house by stage: the import directions of docs/reference/layout.md, held by import-linter's contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with the project's contracts (pyproject.toml), its packages imported from `project`."""
    return subprocess.run([str(LINT_IMPORTS), "--config", str(project / "pyproject.toml"), "--no-cache"],
                          cwd=project, capture_output=True, text=True, env={"PYTHONPATH": str(project)})


@pytest.fixture
def copy_of_project(tmp_path: Path) -> Path:
    for name in ("blueprints", "components", "policies"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_project_keeps_every_import_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


def test_the_root_of_blueprints_holds_only_the_cli_the_plan_check_the_workspace_and_stage_packages():
    modules = sorted(p.name for p in (ROOT / "blueprints").glob("*.py"))
    packages = sorted(p.name for p in (ROOT / "blueprints").iterdir() if (p / "__init__.py").exists())
    assert modules == ["__init__.py", "cli.py", "drift.py", "workspace.py"]
    assert packages == ["capacity", "catalog", "contracts", "core", "engines", "operate", "plan", "requirements",
                        "review", "simulate"]


def _add_import(project: Path, module: str, line: str) -> None:
    path = project / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("blueprints.contracts.weights", "from blueprints.plan import planner  # noqa", "each stage imports only"),
    ("blueprints.review.diff", "import blueprints.operate.verify  # noqa", "each stage imports only"),
    ("blueprints.operate.verify", "import blueprints.workspace  # noqa", "each stage imports only"),
    ("components.labels", "import blueprints.capacity.physics  # noqa", "components never import"),
    ("policies.gpu", "import blueprints.review.preview  # noqa", "policies import only"),
    ("blueprints.catalog.units", "def later():\n    from blueprints.catalog import signals  # noqa",
     "no import circles"),
])
def test_a_violating_import_fails_lint_imports_naming_its_contract(copy_of_project, module, line, contract):
    assert lint_imports(copy_of_project).returncode == 0
    _add_import(copy_of_project, module, line)
    result = lint_imports(copy_of_project)
    assert result.returncode == 1
    broken = result.stdout[result.stdout.index("Broken contracts"):]
    assert contract in broken, result.stdout
