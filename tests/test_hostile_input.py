"""Hostile input found by a break-it pass, kept apart: each exits 2 at once, naming the file and the field, with no
traceback and nothing written. Numbers of thousands of digits and documents nested 200,000 deep in every YAML and
JSON the CLI reads (bounded before parsing: `blueprints.core.yamlio`), FIFOs, devices and symlink loops where a file
is expected (refused from `os.stat`, never opened for reading: `blueprints.core.errors.read_text_file`), and an
infeasible requirement whose hint would break a field's bound (`blueprints.plan.hints`). The FIFO and symlink cases
run the CLI in a process of its own, killed after `HANG_S`: a read that blocks fails the test instead of hanging it.
Time is CPU time (the suite shares its cores: wall time measures the machine's load, not the CLI).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from blueprints.core.yamlio import MAX_DEPTH, MAX_NUMBER_DIGITS
from tests.fuzz_inputs import ROOT, Project, example

#: CPU seconds a refusal may take (the break-it pass's bound, 20 s; the CLI itself starts in about one).
WITHIN_S = 20
#: Wall seconds after which a CLI process counts as hung (a blocked read takes no CPU: only the wall clock sees it).
HANG_S = 120
HUGE = "7" * 5000
DEEP = 200_000
STACK = "chat-assistant-prod"


@pytest.fixture()
def project(tmp_path) -> Project:
    return Project(tmp_path, with_examples=True)


def _refused(project: Project, args: list[str], *words: str) -> str:
    # This thread's CPU: the process's would count threads earlier tests left running in the worker (the Pulumi mock
    # engine's gRPC servers), which is how this bound once failed at 21 s for a refusal taking 6 s.
    cpu = time.thread_time()
    outcome = project.run(args)
    cpu = time.thread_time() - cpu
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 2, outcome.output
    for word in words:
        assert word in outcome.output, outcome.output
    assert len(outcome.output) < 2000 and cpu < WITHIN_S
    return outcome.output


def _stack_path(project: Project, stack: str = STACK) -> Path:
    return project.stacks / f"Pulumi.{stack}.yaml"


def test_a_number_of_5000_digits_in_a_requirements_file_is_refused_naming_the_field(project):
    path = project.requirements / "chat-assistant.yaml"
    path.write_text(re.sub(r"peak_requests_per_s: \d+", f"peak_requests_per_s: {HUGE}", path.read_text()))
    assert HUGE in path.read_text()
    before = project.snapshot()
    _refused(project, ["plan", str(path), "--as-of", "2026-12-01"], "chat-assistant.yaml",
             "traffic.peak_requests_per_s", "5,000 digits", f"more than {MAX_NUMBER_DIGITS}")
    assert project.snapshot() == before


@pytest.mark.parametrize("quoted", [HUGE, "[" * DEEP + "]" * DEEP])
def test_a_quoted_number_or_bracket_string_where_a_number_goes_is_a_type_error_not_a_crash(project, quoted):
    """The message's "write it without quotes" check reads the text as JSON: bounded too (it once recursed)."""
    path = project.requirements / "chat-assistant.yaml"
    path.write_text(re.sub(r"peak_requests_per_s: \d+", lambda _: f'peak_requests_per_s: "{quoted}"', path.read_text()))
    _refused(project, ["plan", str(path), "--as-of", "2026-12-01"], "chat-assistant.yaml",
             "traffic.peak_requests_per_s: expected a number or null, got a string")


def test_a_number_of_5000_digits_in_platform_yaml_and_a_stack_config_is_refused(project):
    platform = project.requirements / "platform.yaml"
    data = yaml.safe_load(platform.read_text())
    data["huge"] = 1
    platform.write_text(yaml.safe_dump(data).replace("huge: 1", f"huge: {HUGE}"))
    _refused(project, ["plan", str(project.requirements / "chat-assistant.yaml"), "--as-of", "2026-12-01"],
             "platform.yaml", "huge", "5,000 digits")
    stack = _stack_path(project)
    text = stack.read_text()
    stack.write_text(text.replace("replicas: 3\n", f"replicas: {HUGE}\n", 1))
    assert HUGE in stack.read_text()
    _refused(project, ["preview", STACK], f"Pulumi.{STACK}.yaml", "replicas", "5,000 digits")


def test_a_requirements_file_nested_200000_deep_is_refused(project):
    path = project.requirements / "deep.yaml"
    path.write_text("service: deep\nowner: " + "[" * DEEP + "]" * DEEP + "\n")
    _refused(project, ["plan", str(path), "--as-of", "2026-12-01"], "deep.yaml", "nest")
    path.write_text("service: deep\nowner:\n" + "".join("  " * i + "- \n" for i in range(1, 100)))
    _refused(project, ["plan", str(path), "--as-of", "2026-12-01"], "deep.yaml", "owner[0][0]",
             f"more than {MAX_DEPTH} levels")


@pytest.mark.parametrize("content, words", [
    ("[" * DEEP + "]" * DEEP, ("nested more than",)),
    ('{"stack": "chat-assistant-prod", "resources": [' + HUGE + "]}", ("resources[0]", "5,000 digits")),
])
def test_a_hostile_json_baseline_or_result_file_is_refused(project, content, words):
    path = project.root / "hostile.json"
    path.write_text(content)
    _refused(project, ["preview", STACK, "--baseline", str(path)], "hostile.json", *words)
    _refused(project, ["calibrate", "--stack", STACK, str(path)], "hostile.json", *words)


def test_a_policy_config_with_a_5000_digit_number_is_refused(project):
    path = project.root / "policies" / "config" / "prod.json"
    config = json.loads(path.read_text())
    text = json.dumps({**config, "huge": 1}).replace('"huge": 1', f'"huge": {HUGE}')
    path.write_text(text)
    _refused(project, ["preview", STACK], "prod.json", "huge", "5,000 digits")


def test_an_infeasible_requirement_whose_hint_breaks_a_bound_exits_2_naming_the_field(project):
    """Edge nodes measured at 0.0001 GFLOP/s per vCPU: the latency floor (~13.9 million ms) is beyond
    slo.latency_p95_ms's bound; the hint search once re-planned with it and raised pydantic's error (exit 1)."""
    path = project.requirements / "edge-classifier.yaml"
    data = example("edge-classifier")
    data["hardware"]["edge_nodes"]["gflops_per_vcpu"] = 0.0001
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    before = project.snapshot()
    _refused(project, ["plan", str(path), "--as-of", "2026-12-01"], "SizingError",
             "slo.latency_p95_ms cannot go far enough", "less than or equal to 600000")
    assert project.snapshot() == before


def test_the_break_it_passes_infeasible_ttft_on_rag_assistant_exits_2_naming_the_field(project):
    """`slo.ttft_p95_ms: 0.5` on rag-assistant: the hint search re-plans the compound service (it once raised the
    planner's own consistency error: an expected cost a rounding above the peak)."""
    path = project.requirements / "rag-assistant.yaml"
    data = example("rag-assistant")
    data["slo"]["ttft_p95_ms"] = 0.5
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    _refused(project, ["plan", str(path), "--as-of", "2026-12-01"], "rag-assistant.yaml", "slo.ttft_p95_ms")


# --- Not a regular file: each in a process of its own, so a blocking read fails the test instead of hanging it ---


def _cli(project: Project, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """The CLI in a process of its own: its result and the CPU seconds it took (raises TimeoutExpired when it
    blocks for `HANG_S`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "blueprints.cli", *args], cwd=project.root, env=env,
                          capture_output=True, text=True, timeout=HANG_S)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _refused_at_once(project: Project, args: list[str], *words: str) -> None:
    done, seconds = _cli(project, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert seconds < WITHIN_S


def test_a_fifo_as_the_requirements_file_or_a_stack_config_is_refused_without_blocking(project):
    fifo = project.requirements / "pipe.yaml"
    os.mkfifo(fifo)
    _refused_at_once(project, ["plan", str(fifo.relative_to(project.root)), "--as-of", "2026-12-01"],
                     "pipe.yaml", "a FIFO (named pipe), not a regular file")
    fifo.unlink()
    stack = project.stacks / "Pulumi.pipe-dev.yaml"
    os.mkfifo(stack)
    _refused_at_once(project, ["preview", "pipe-dev"], "Pulumi.pipe-dev.yaml", "a FIFO (named pipe)")


def test_a_symlink_loop_or_a_device_as_the_requirements_file_is_refused(project):
    loop = project.requirements / "loop.yaml"
    os.symlink("other.yaml", loop)
    os.symlink("loop.yaml", project.requirements / "other.yaml")
    _refused_at_once(project, ["plan", str(loop.relative_to(project.root))], "loop.yaml",
                     "Too many levels of symbolic links")
    _refused_at_once(project, ["plan", "/dev/zero"], "/dev/zero", "a device, not a regular file")
