"""Command-line tools some tests run (Prometheus's promtool, Alertmanager's amtool): found on PATH, else skipped locally
with how to install them, and a failure under CI (`.ci/run` installs them); and the Python of the test suite's separate
tools virtualenv (`.venv-checkov`, tests/tools/checkov.in), in which the engines' own parsers run from each release's
source (`engine_parse`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: tool -> the Debian/Ubuntu package that ships it.
PACKAGES = {"promtool": "prometheus", "amtool": "prometheus-alertmanager"}


def tool(name: str) -> str:
    """The path of `name`; skips the test (fails it under CI) when it is not installed."""
    path = shutil.which(name)
    if path is None:
        how = f"apt-get install -y {PACKAGES[name]}"
        if os.environ.get("CI"):
            pytest.fail(f"{name} not found: .ci/run installs it ({how})")
        pytest.skip(f"{name} is not installed: `{how}` (Debian/Ubuntu) runs these tests")
    return path


def version(name: str) -> tuple[int, int]:
    """(major, minor) `name --version` prints."""
    out = subprocess.run([tool(name), "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
    assert found, out
    return int(found.group(1)), int(found.group(2))


def tools_python() -> Path:
    """The tools virtualenv's Python (beside `$CHECKOV`, else `.venv-checkov`); skips the test when it is missing
    (fails it when `CHECKOV` or `CI` says it should be there)."""
    checkov = os.environ.get("CHECKOV")
    path = Path(checkov).parent / "python" if checkov else ROOT / ".venv-checkov" / "bin" / "python"
    if not path.exists():
        if checkov or os.environ.get("CI"):
            pytest.fail(f"{path} not found; run `make test-tools`")
        pytest.skip("the tools virtualenv is not installed: `make test` (or `make test-tools`) creates it")
    return path


def engine_parse(engine: str, script: str, argvs: list[list[str]]) -> dict:
    """`argvs` through `engine`'s own parser at its pinned release, `tests/tools/<script>` (vllm_bench_argv.py: `vllm
    bench serve`; vllm_serve_argv.py: `vllm`; sglang_argv.py: SGLang's server), in the tools virtualenv, from the
    release's source: `$VLLM_SOURCE` / `$SGLANG_SOURCE`, the folder holding `vllm/` / `sglang/` (`make test` fetches
    it: tools/engine_source/fetch.py). The script's JSON answer (its last stdout line). Skipped without the source
    (failed under CI)."""
    import json

    variable = f"{engine.upper()}_SOURCE"
    source = os.environ.get(variable)
    if not source or not (Path(source) / engine / "version.py").exists():
        message = (f"${variable} is not {engine}'s source: `make test` sets it (or `python "
                   f"tools/engine_source/fetch.py {engine} DIR` and {variable}=DIR)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    done = subprocess.run([str(tools_python()), str(ROOT / "tests" / "tools" / script), source],
                          input=json.dumps(argvs), capture_output=True, text=True, timeout=300,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": tempfile.mkdtemp(prefix=f"{engine}-home-")})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
