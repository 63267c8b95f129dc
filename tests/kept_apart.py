"""Requirement folders kept apart from the bundled examples (`tests/data/<name>/requirements/`), planned into a scratch
stacks folder and reviewed as `blueprint preview` reviews a stack (with the project's policy configs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from blueprints.contracts.stackconfig import write_stack_configs
from blueprints.review.preview import PreviewReport
from blueprints.review.stack import review_stack
from blueprints.workspace import plan_requirements_file, requirements_files
from tests.conftest import PLAN_DATE, ROOT

DATA = ROOT / "tests" / "data"
POLICY_DIR = ROOT / "policies" / "config"


def project_skeleton(root: Path) -> Path:
    """`root` made a project with no stacks yet: the program, Pulumi.yaml and the policy configs (what `blueprint plan`,
    `pilot`, `choose` and `preview` find a project by), and an empty stacks/requirements/; returns that folder."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "__main__.py", root / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(POLICY_DIR, root / "policies" / "config")
    folder = root / "stacks" / "requirements"
    folder.mkdir(parents=True)
    return folder


def plan_folder(folder: Path, stacks_dir: Path) -> list[str]:
    """`blueprint plan` of every requirements file in `folder` (its platform.yaml beside them) into `stacks_dir`;
    the stacks written, sorted."""
    stacks: set[str] = set()
    for path in requirements_files(folder):
        planned = plan_requirements_file(path, as_of=PLAN_DATE, policy_dir=POLICY_DIR, requirements_dir=folder)
        write_stack_configs(planned.subjects, stacks_dir, source=path.name, cluster_addons=planned.cluster_addons)
        stacks |= {s.stack for s in planned.subjects}
    return sorted(stacks)


def review(stack: str, stacks_dir: Path) -> PreviewReport:
    """`review_stack` as `blueprint preview` runs it from the project folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return review_stack(stack, stacks_dir=stacks_dir, program=ROOT / "__main__.py")


def reviewed(name: str, tmp: Path) -> dict[str, PreviewReport]:
    """Every stack the kept-apart folder `tests/data/<name>/requirements` plans, reviewed: `{stack: report}`. The folder
    is copied to `<tmp>/stacks/requirements`, where the preview finds the requirements each stack is judged against."""
    stacks_dir = tmp / "stacks"
    folder = shutil.copytree(DATA / name / "requirements", stacks_dir / "requirements")
    return {stack: review(stack, stacks_dir) for stack in plan_folder(folder, stacks_dir)}
