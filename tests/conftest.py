"""Shared fixtures: catalogs, requirement builders and planned blueprints. No network anywhere."""

from __future__ import annotations

import copy
import datetime
import gc
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

#: Hypothesis profiles, chosen by HYPOTHESIS_PROFILE. `ci` (the default, `make test` and CI): every property test
#: replays the same examples on every run (derandomized, no example database), as many as its `examples(n)` budget
#: says: a red run reproduces anywhere, and the suite's time is bounded. `thorough` (opt-in): new random examples on
#: each run, `THOROUGH_FACTOR` times each budget, failures remembered in .hypothesis/ and printed as a reproducible blob.
THOROUGH_FACTOR = 10
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("thorough", derandomize=False, print_blob=True)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(HYPOTHESIS_PROFILE)  # an unknown name fails the run naming the registered profiles


#: Full (generation 2) garbage collections 10x rarer than CPython's default (700, 10, 10). A worker keeps everything it
#: imported (pulumi_aws, kubernetes, pydantic) and its shared previews and plans for the whole run, and a full
#: collection walks all of it: on eight preview- and plan-heavy test files in one process, collections took 13.5 s and
#: the run 74.4 s of CPU at the default, 4.8 s and 69.0 s at this. Cycles still go in the next full collection.
GC_THRESHOLDS = (700, 10, 100)
gc.set_threshold(*GC_THRESHOLDS)


#: Where the controller keeps the folder of shared simulations (`tests.shared_runs`).
_RUNS_FOLDER = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Simulations shared by the session's processes (`tests.shared_runs`): the controller (or a run without
    workers) makes the folder, each worker is handed it."""
    from tests import shared_runs

    worker = getattr(config, "workerinput", None)
    if worker is None:
        config.stash[_RUNS_FOLDER] = folder = shared_runs.new_folder()
    else:
        folder = Path(worker[shared_runs.FOLDER_KEY])
    shared_runs.install(folder)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # pytest-xdist's, on the controller for each worker it starts
    from tests import shared_runs

    node.workerinput[shared_runs.FOLDER_KEY] = str(node.config.stash[_RUNS_FOLDER])


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_RUNS_FOLDER, None)
    if folder is not None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_runs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A test marked `fresh_runs` simulates its own runs (`tests.shared_runs`); one that patches what a shared
    simulation reads without the mark fails, naming what it patched."""
    from tests import shared_runs

    if request.node.get_closest_marker("fresh_runs") is not None:
        with shared_runs.fresh():
            yield
        return
    yield
    patched = shared_runs.patched_reads(monkeypatch)
    if patched:
        pytest.fail(f"it patches {', '.join(patched)}, which the session's shared simulations read: mark it "
                    "@pytest.mark.fresh_runs (tests/shared_runs.py)", pytrace=False)


def examples(n: int) -> int:
    """A property test's example budget `n` under the loaded Hypothesis profile: `n` (`ci`), `THOROUGH_FACTOR * n`
    (`thorough`). Each property test sets its own (`@settings(max_examples=examples(n))`) by what one example costs."""
    return n * THOROUGH_FACTOR if HYPOTHESIS_PROFILE == "thorough" else n

from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog import Catalog, load_catalog
from blueprints.plan.planner import plan
from blueprints.requirements.hosting import ALL_ENGINES
from blueprints.requirements.service import Requirements

ROOT = Path(__file__).resolve().parent.parent
#: The plan date every test plans on (plans depend on it: the default Kubernetes version, support warnings).
PLAN_DATE = datetime.date(2026, 12, 1)
EXAMPLES = ROOT / "stacks" / "requirements"
CHAT_EXAMPLE = EXAMPLES / "chat-assistant.yaml"
#: What an existing cluster runs for a GPU service exposed by an NLB (`blueprints.plan.cluster_addons`: the planner
#: refuses an existing cluster that lacks one).
GPU_SERVICE_ADDONS = ["aws-load-balancer-controller", "dcgm-exporter", "keda", "keda-http-add-on",
                      "kube-prometheus-stack", "nvidia-device-plugin"]
#: `operations.engines` for the guardrail tests (instance families, gpu-quota, max_replicas, budget): these constrain
#: each engine's candidates alike (`llm_search`), so `make test` plans on vLLM alone and `make test-slow` compares
#: every engine, the requirements' default (`ALL_ENGINES`).
GUARDRAIL_ENGINES = [pytest.param(["vllm"], id="vllm"),
                     pytest.param(list(ALL_ENGINES), id="every-engine", marks=pytest.mark.slow)]


@pytest.fixture()
def project(tmp_path, monkeypatch) -> Path:
    """A copy of the project (program, Pulumi.yaml, requirements, policy configs, committed stack configs) as the
    working directory."""
    import shutil

    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(EXAMPLES, tmp_path / "stacks" / "requirements")
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    for stack in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        shutil.copy(stack, tmp_path / "stacks" / stack.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


def example_data(name: str = "chat-assistant") -> dict[str, Any]:
    """A bundled example's requirements as a plain dict (a fresh copy each call)."""
    return copy.deepcopy(yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text()))


def requirements_with(base: str = "chat-assistant", **changes: Any) -> Requirements:
    """A bundled example with top-level sections replaced or merged (dicts merge one level deep)."""
    data = example_data(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return Requirements.model_validate(data)


def platforms_for(req: Requirements) -> dict:
    """The platforms `req` lands on, planned from it alone with the bundled platform.yaml (existing VPCs and runner
    labels of the private platforms)."""
    from blueprints.catalog.addons import load_platform_catalog
    from blueprints.requirements.platform_file import load_platform_requirements
    from blueprints.plan.platforms import ServiceFile, plan_platforms

    return {p.name: p for p in plan_platforms([ServiceFile(None, req)],
                                              load_platform_requirements(EXAMPLES / "platform.yaml"),
                                              catalog=load_catalog(), pcat=load_platform_catalog(), as_of=PLAN_DATE)}


def l40s_chat(**slo: Any) -> Requirements:
    """chat-assistant on L40S only (hardware.allowed_instance_families [g6e]) at 12 requests/s, `slo` merged into its
    SLO: prod plans several g6e.xlarge replicas above the availability floor, so it scales (the bundled plan's
    3x p5.4xlarge all stay warm)."""
    return requirements_with(hardware={"allowed_instance_families": ["g6e"]}, traffic={"peak_requests_per_s": 12},
                             **({"slo": slo} if slo else {}))


def plan_env(req: Requirements, env: str) -> Blueprint:
    return plan(req, load_catalog(), as_of=PLAN_DATE, environments=[env], platforms=platforms_for(req))[0]


@pytest.fixture(scope="session")
def chat_prod() -> Blueprint:
    """The bundled chat assistant's prod blueprint."""
    return plan_env(requirements_with(), "prod")


@pytest.fixture(scope="session")
def benchmark_dry_run():
    """`blueprint benchmark chat-assistant-prod --dry-run` from the project folder, run once: the CLI's result (the
    benchmark Job's manifests on stdout, its run plan on stderr)."""
    from typer.testing import CliRunner

    from blueprints.cli import app

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        result = CliRunner().invoke(app, ["benchmark", "chat-assistant-prod", "--dry-run"])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="session")
def bundled_previews():
    """Every bundled stack config, reviewed as `blueprint preview` does (`review_stack`, from the project folder): a
    read-only mapping of stack name to report that reviews a stack on its first access in this worker and returns a
    fresh copy on each access (`tests.bundled.BundledReviews`)."""
    from tests.bundled import BundledReviews

    return BundledReviews()


def vllm_blueprint(tp: int, *, base: Blueprint) -> Blueprint:
    """`base` with tensor parallel `tp` on an 8-GPU node (for tests of TP-dependent rendering)."""
    from tests.blueprint_builders import derive

    engine = {**base.engine.model_dump(mode="json"), "tensor_parallel_size": tp, "shm_size_gib": 2.0 * tp}
    return derive(base, engine=engine, compute={"gpus_per_replica": tp, "instance_type": "g6e.48xlarge"})


def write_stacks(blueprints: list[Blueprint], folder: Path) -> list[Path]:
    """Write service stack configs plus the bundled platform each lands on (its preview reads the platform's), as
    `blueprint plan` would, beside the bundled requirements (`<folder>/requirements`)."""
    from blueprints.contracts.stackconfig import write_stack_configs
    from tests.blueprint_builders import bundled_platform

    import shutil

    if not (folder / "requirements").exists():  # the preview judges each stack against its requirements file
        shutil.copytree(EXAMPLES, folder / "requirements")
    platforms = {bp.platform.stack: bundled_platform(bp.platform.stack) for bp in blueprints if bp.platform.stack}
    for bp in blueprints:  # a service outside the bundled examples lands there too, as its plan would record
        if bp.platform.stack and bp.stack not in platforms[bp.platform.stack].services:
            platform = platforms[bp.platform.stack]
            platforms[bp.platform.stack] = platform.model_copy(
                update={"services": sorted([*platform.services, bp.stack])})
    written = write_stack_configs([*platforms.values(), *blueprints], folder, source="req.yaml")
    return written[len(platforms):]
