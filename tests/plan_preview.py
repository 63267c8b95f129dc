"""Plan a requirements document in a project folder of its own and preview every stack it writes, as `blueprint plan`
and `blueprint preview` do (the bundled policy configs): what the property tests (`tests/test_planner_properties.py`,
`tests/test_plan_then_preview.py`) and `benchmarks/plan_preview.py` count. A plan that succeeds must preview clean
(`blueprint preview` exit 0); a refusal must be a `BlueprintError` (exit 2) naming the fix."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from blueprints.contracts.stackconfig import write_stack_configs
from blueprints.core.errors import BlueprintError
from blueprints.plan.platforms import standalone_platform_file
from blueprints.requirements.service import Requirements
from blueprints.review.stack import review_stack
from blueprints.workspace import plan_requirements_file
from tests.conftest import PLAN_DATE, ROOT

POLICY_DIR = ROOT / "policies" / "config"


@dataclass
class Outcome:
    """What became of one document: `refused` (the planner's message) or the stacks planned and, per stack that did
    not preview clean, its findings (`check: message`)."""

    refused: str | None = None
    stacks: list[str] = field(default_factory=list)
    failures: dict[str, list[str]] = field(default_factory=dict)

    @property
    def planned(self) -> bool:
        return self.refused is None


def findings(report) -> list[str]:
    """Everything that makes `blueprint preview` exit 1."""
    return ([f"manifest: {k}: {v}" for k, v in report.manifest_problems.items()]
            + [f"{f.check}: {f.message}" for f in report.deployability]
            + [f"{f.check}: {f.message}" for f in report.signals]
            + [f"policy {v.policy}: {v.message}" for v in report.mandatory_violations])


def plan_in(data: dict, folder: Path):
    """`blueprint plan` of `data` (as `stacks/requirements/svc.yaml`, with a platform.yaml whose platforms follow the
    service: `standalone_platform_file`) in the project folder `folder`, within the bundled policy configs: the
    `PlannedFile`, or the `BlueprintError` (a schema error: `ValueError`) it exits 2 with."""
    requirements = folder / "stacks" / "requirements"
    requirements.mkdir(parents=True, exist_ok=True)
    path = requirements / "svc.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        platform = standalone_platform_file(Requirements.model_validate(data))
    except ValueError:  # invalid requirements: planning them names the field
        platform = None
    if platform is not None:
        (requirements / "platform.yaml").write_text(yaml.safe_dump(platform.model_dump(mode="json",
                                                                                       exclude_defaults=True)))
    return plan_requirements_file(path, as_of=PLAN_DATE, policy_dir=POLICY_DIR)


def plan_and_preview(data: dict, folder: Path | None = None) -> Outcome:
    """`blueprint plan` of `data` in `folder` (a temporary one by default, `plan_in`), then `blueprint preview` of
    every stack the plan wrote."""
    if folder is None:
        with tempfile.TemporaryDirectory() as tmp:
            return plan_and_preview(data, Path(tmp))
    try:
        planned = plan_in(data, folder)
    except (BlueprintError, ValueError) as exc:  # `blueprint plan` exits 2 with the message (a schema error too)
        assert str(exc), "a refusal names the fix"
        return Outcome(refused=str(exc))
    write_stack_configs(planned.subjects, folder / "stacks", source="svc.yaml", cluster_addons=planned.cluster_addons)
    outcome = Outcome(stacks=sorted(s.stack for s in planned.subjects))
    for stack in outcome.stacks:
        report = review_stack(stack, stacks_dir=folder / "stacks", program=ROOT / "__main__.py", policy_dir=POLICY_DIR)
        if not report.clean:
            outcome.failures[stack] = findings(report)
    return outcome
