"""The requirements folder (`stacks/requirements/`): which of its files are services' requirements files."""

from __future__ import annotations

from pathlib import Path

from blueprints.requirements.platform_file import PLATFORM_FILE

#: Names a platform team's file may have (`platform.yml` is not read as a service by mistake).
PLATFORM_FILES = (PLATFORM_FILE, "platform.yml")


def requirements_files(folder: Path) -> list[Path]:
    """The services' requirements files in a folder (`*.yaml`, `*.yml`), sorted. Not requirements: `platform.yaml`
    and Pulumi's own files (`Pulumi.yaml`, `Pulumi.<stack>.yaml`); keep requirements in a folder of their own
    (`stacks/requirements/`): every other YAML file there is read as one."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.name.lower() not in PLATFORM_FILES
                  and not p.name.startswith("Pulumi.") and p.is_file())
