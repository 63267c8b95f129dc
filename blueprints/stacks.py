"""Which stacks a change touches: drives the pull-request preview matrix and the deploy workflow."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from blueprints.review import POLICY_CONFIG_DIR, policy_config_for
from blueprints.stackconfig import read_stack_config

#: Paths whose change can alter every stack's resources (the program, the planner, the policies, the toolchain).
PROGRAM_PATHS = ("blueprints/", "components/", "policies/", "__main__.py", "Pulumi.yaml", "pyproject.toml")


@dataclass(frozen=True)
class StackRef:
    """A stack and what CI needs to preview or deploy it."""

    stack: str
    service: str
    environment: str
    production: bool
    policy_config: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def list_stacks(stacks_dir: Path, *, policy_dir: Path = POLICY_CONFIG_DIR) -> list[StackRef]:
    """Every stack config in `stacks_dir`, validated, sorted by name, with its policy config
    (`blueprints.review.policy_config_for`). Raises `StackConfigError` on an invalid stack config."""
    refs = []
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        bp = read_stack_config(path)
        refs.append(StackRef(stack=bp.stack, service=bp.service, environment=bp.environment,
                             production=bp.production,
                             policy_config=policy_config_for(bp.environment, production=bp.production,
                                                             config_dir=policy_dir).as_posix()))
    return refs


def affected_stacks(changed_paths: list[str], stacks: list[StackRef], *, stacks_dir: str = "stacks") -> list[StackRef]:
    """The stacks a set of changed files (repository-relative, POSIX) can affect.

    A change to the program, planner, policies or toolchain (`PROGRAM_PATHS`) affects every stack; a stack config
    affects its stack; a requirements file `stacks/requirements/<service>.yaml` affects that service's stacks;
    anything else (docs, tests) affects none.
    """
    selected: set[str] = set()
    for raw in changed_paths:
        path = PurePosixPath(raw.strip())
        text = path.as_posix()
        if not text or text == ".":
            continue
        if text.startswith(PROGRAM_PATHS):
            return list(stacks)
        if path.parent == PurePosixPath(stacks_dir) and path.name.startswith("Pulumi.") and path.suffix == ".yaml":
            selected.add(path.name[len("Pulumi."):-len(".yaml")])
        elif path.parent == PurePosixPath(stacks_dir) / "requirements" and path.suffix in (".yaml", ".yml"):
            selected.update(s.stack for s in stacks if s.service == path.stem)
    return [s for s in stacks if s.stack in selected]
