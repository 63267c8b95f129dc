"""Which stacks a change touches, in deploy order: drives the pull-request preview matrix and the deploy workflow.

Platform stacks come before the service stacks that land on them (services read their outputs); destroying goes in
reverse. A private platform (no public Kubernetes API) and every service on it are deployed from the self-hosted
runner its platform.yaml entry names (`runs_on`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from blueprints.requirements.platform_file import PLATFORM_FILE
from blueprints.contracts.platform import PlatformConfig
from blueprints.contracts.deploy_inputs import deploy_inputs
from blueprints.review.stack import POLICY_CONFIG_DIR, policy_config_for
from blueprints.core.errors import RequirementsError, StackConfigError, read_text_file
from blueprints.contracts.stackconfig import read_config, stack_config_path
from blueprints.core.yamlio import load_yaml

#: Paths whose change can alter every stack's resources (the program, the planner, the policies, the toolchain).
PROGRAM_PATHS = ("blueprints/", "components/", "policies/", "__main__.py", "Pulumi.yaml", "pyproject.toml")
#: Runner of stacks whose Kubernetes API is public (and of platforms being created from outside any VPC).
HOSTED_RUNNER = ["ubuntu-latest"]


@dataclass(frozen=True)
class StackRef:
    """A stack and what CI needs to preview, deploy or destroy it.

    Attributes:
        service: the service its requirements file declares (a compound service's, for each of its parts);
            `platform` for platforms.
        kind: `platform` or `service`.
        platform: the platform stack a service lands on (None for platforms and services on no platform).
        runs_on: the GitHub Actions `runs-on` labels: a self-hosted runner inside a private platform's VPC.
        part: a compound service's part (`generator`, `retrieval`) this stack serves; None otherwise.
        review: what `blueprint preview` reviews it as: `<service>-<environment>` for a part (both parts in one
            report), the stack itself otherwise.
        config: the config keys `pulumi up` needs besides the stack config (`blueprints.contracts.deploy_inputs`):
            `{"key", "secret", "from"}`, `from` the GitHub secret (or, not secret, variable) the deploy workflow sets
            it from.
    """

    stack: str
    service: str
    environment: str
    production: bool
    policy_config: str = ""
    kind: str = "service"
    platform: str | None = None
    runs_on: list[str] = field(default_factory=lambda: list(HOSTED_RUNNER))
    part: str | None = None
    review: str = ""
    config: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.review:
            object.__setattr__(self, "review", self.stack)

    def to_json(self) -> dict:
        return asdict(self)


def list_stacks(stacks_dir: Path, *, policy_dir: Path = POLICY_CONFIG_DIR) -> list[StackRef]:
    """Every stack config in `stacks_dir`, validated, platforms first (sorted by name), then services (sorted), each
    with its policy config (`blueprints.review.stack.policy_config_for`).

    Raises:
        StackConfigError: a stack config is invalid, or a service's platform has no stack config (CI would deploy the
            service before a platform that is never created).
    """
    paths = sorted(stacks_dir.glob("Pulumi.*.yaml"))
    subjects = [read_config(path) for path in paths]
    platforms = {s.stack: s for s in subjects if isinstance(s, PlatformConfig)}
    for path, s in zip(paths, subjects):
        if not isinstance(s, PlatformConfig) and s.platform.stack and s.platform.stack not in platforms:
            raise StackConfigError(f"{path}: {s.stack} lands on platform {s.platform.stack}, whose stack config "
                                   f"{stack_config_path(stacks_dir, s.platform.stack)} is missing; plan it first "
                                   "(`blueprint plan` of any service on it writes it)")
    refs = []
    for s in [*platforms.values(), *(s for s in subjects if not isinstance(s, PlatformConfig))]:
        policy = policy_config_for(s.environment, production=s.production, config_dir=policy_dir).as_posix()
        config = [{"key": i.key, "secret": i.secret, "from": i.source_name} for i in deploy_inputs(s)]
        if isinstance(s, PlatformConfig):
            runner = ["self-hosted", s.runner_label] if s.runner_label else list(HOSTED_RUNNER)
            refs.append(StackRef(stack=s.stack, service="platform", environment=s.environment,
                                 production=s.production, policy_config=policy, kind="platform", runs_on=runner,
                                 config=config))
        else:
            platform = platforms.get(s.platform.stack or "")
            runner = ["self-hosted", platform.runner_label] if platform and platform.runner_label else \
                list(HOSTED_RUNNER)
            compound = s.pipeline
            service = compound.service if compound else s.service
            refs.append(StackRef(stack=s.stack, service=service, environment=s.environment,
                                 production=s.production, policy_config=policy, platform=s.platform.stack,
                                 runs_on=runner, part=compound.part.value if compound else None,
                                 review=f"{service}-{s.environment}" if compound else s.stack, config=config))
    return refs


def _service_of(path: Path) -> str:
    """The `service` a requirements file declares (its file name when it cannot be read: deleted, or not YAML)."""
    try:
        data = load_yaml(read_text_file(path, RequirementsError, "requirements file"))
    except Exception:  # noqa: BLE001 - any unreadable file falls back to its name; the plan reports the real error
        return path.stem
    service = data.get("service") if isinstance(data, dict) else None
    return service if isinstance(service, str) else path.stem


def affected_stacks(changed_paths: list[str], stacks: list[StackRef], *, stacks_dir: str = "stacks",
                    root: Path = Path(".")) -> list[StackRef]:
    """The stacks a set of changed files (repository-relative, POSIX) can affect, in deploy order.

    A change to the program, planner, policies or toolchain (`PROGRAM_PATHS`) affects every stack; a stack config
    affects its stack; a requirements file affects the stacks of the service it declares (read from the file, not
    its name; a compound service's part stacks alike) and the platforms they land on; `platform.yaml` affects every
    platform; anything else (docs, tests) affects none. A platform a change affects brings every service on it: a
    platform change can break a service that was not touched (a posture no longer meeting its compliance, an add-on
    it needs), and only the service's own preview shows it.
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
            if path.name == PLATFORM_FILE:
                selected.update(s.stack for s in stacks if s.kind == "platform")
                continue
            service = _service_of(root / text)
            services = [s for s in stacks if s.kind == "service" and s.service == service]
            selected.update(s.stack for s in services)
            selected.update(s.platform for s in services if s.platform)
    selected.update(s.stack for s in stacks if s.kind == "service" and s.platform in selected)
    return [s for s in stacks if s.stack in selected]
