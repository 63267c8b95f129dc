"""Where a project keeps its parts: its root (the folder holding `Pulumi.yaml`), stack configs, program and
policy configs, found from any folder inside it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
import yaml
from blueprints.core.yamlio import load_yaml
from blueprints.core.errors import BlueprintError, read_text_file


#: The file marking the project root (where `policies/config/` lives).
PROJECT_FILE = "Pulumi.yaml"


POLICY_CONFIG_SUBDIR = Path("policies") / "config"


def real_path(path: Path) -> Path:
    """`path` absolute, its symlinks followed as far as they go (`os.path.realpath`): a symlink loop stays as it is,
    for the read that follows to refuse naming the file (`Path.resolve` raises RuntimeError on one)."""
    return Path(os.path.realpath(path))


def project_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` (a file or folder) holding `Pulumi.yaml`; None when there is none."""
    here = real_path(start)
    for folder in [here, *here.parents] if here.is_dir() else list(here.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    return None


def project_relative(path: Path) -> str:
    """`path` relative to its project's root (so plans do not depend on where the checkout lives or where the command
    ran); as given when it is outside any project."""
    root = project_root(path)
    return real_path(path).relative_to(root).as_posix() if root is not None else path.as_posix()


@dataclass(frozen=True)
class ProjectPaths:
    """Where a project keeps its parts, resolved from its root (the folder holding `Pulumi.yaml`), so the CLI works
    the same from any working directory; relative to the working directory when no root is found."""

    root: Path | None
    stacks_dir: Path
    program: Path
    policy_dir: Path

    @property
    def requirements_dir(self) -> Path:
        """`<stacks>/requirements`: every service's requirements file and the platform team's `platform.yaml`."""
        return self.stacks_dir / "requirements"


def project_paths(start: Path | None = None) -> ProjectPaths:
    """The project found at or above `start` (a requirements file or folder), else above the working directory.

    The stack config folder is `Pulumi.yaml`'s `stackConfigDir` (this project: `stacks`).
    """
    root = (project_root(start) if start is not None else None) or project_root(Path.cwd())
    if root is None:
        return ProjectPaths(None, Path("stacks"), Path("__main__.py"), POLICY_CONFIG_SUBDIR)
    try:
        project = load_yaml(read_text_file(root / PROJECT_FILE, BlueprintError, "project file")) or {}
    except (BlueprintError, yaml.YAMLError):
        project = {}
    stacks = project.get("stackConfigDir") if isinstance(project, dict) else None
    return ProjectPaths(root, root / (stacks if isinstance(stacks, str) else "stacks"), root / "__main__.py",
                        root / POLICY_CONFIG_SUBDIR)
