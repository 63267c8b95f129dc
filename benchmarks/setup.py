"""Set-up and test times from a fresh clone: `make install test-tools` (the project's virtualenv, the test tools'
and the engines' sources), then `make test` twice: first in the fresh clone, which also writes the bytecode of what it
imports and Hypothesis's cache of the code's constants, then again in the clone now warm, as a contributor re-runs it
(the goal, `TEST_GOAL_S`, is the warm run's). Prints wall and CPU seconds per step (CPU: user + system of every
process the step ran, what a shared machine cannot inflate), and the test count pytest reports; fails nothing (a
benchmark, not a test).

Usage: `python benchmarks/setup.py [--empty-cache] [--keep] [--skip-test] [--once]`. Clones this checkout's HEAD
(`git clone` of the local repository: commit first what you want timed) into a temporary folder. The packages come
from uv's cache, else the package registry (PyPI) the locks name; `--empty-cache` starts from an empty uv cache
(`UV_CACHE_DIR` inside the temporary folder), as a new user's first install; `--once` runs `make test` in the fresh
clone only. Needs what `make test` needs on the PATH (promtool, amtool: `.ci/run` installs them on a clean machine).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The goal for a warm clone's `make test` on 2 cores, seconds ("Tests <= 4 minutes on 2 cores").
TEST_GOAL_S = 240.0
STEPS = [("set-up", ["make", "install", "test-tools"]), ("test", ["make", "test"]), ("warm", ["make", "test"])]


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    """Run `cmd`: (wall seconds, CPU seconds of it and every process it waited for, exit code, its output's tail)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.returncode, result.stdout[-3000:] + result.stderr[-2000:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--empty-cache", action="store_true", help="install with an empty uv cache (a first install)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    parser.add_argument("--skip-test", action="store_true", help="time the set-up only")
    parser.add_argument("--once", action="store_true", help="run `make test` in the fresh clone only, not again warm")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="setup-bench-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = {**os.environ, **({"UV_CACHE_DIR": str(work / "uv-cache")} if args.empty_cache else {})}
    env.pop("PYTHONPATH", None)  # the clone's own code, not the checkout's
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                            text=True).stdout.strip()
    print(f"fresh clone of {ROOT} ({commit}) at {clone}; {'empty' if args.empty_cache else 'the machine'}'s uv cache; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    failed = False
    for name, cmd in STEPS[:1] if args.skip_test else STEPS[:2] if args.once else STEPS:
        wall, cpu, code, tail = timed(cmd, clone, env)
        goal = f"  (goal <= {TEST_GOAL_S:.0f} s{'' if wall <= TEST_GOAL_S else ', over'})" if name == "warm" else ""
        counts = re.findall(r"^=*\s*(\d+ passed.*?)\s*=*$", tail, re.MULTILINE)
        print(f"{name:<7} {wall:7.1f} s wall {cpu:7.1f} s CPU  `{' '.join(cmd)}` exit {code}{goal}"
              + (f"\n        {counts[-1]}" if counts else ""))
        if code:
            print(tail)
            failed = True
            break
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    print("clone clean after the run" if not dirty.strip() else f"clone changed:\n{dirty}")
    if args.keep:
        print(f"kept: {clone}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
