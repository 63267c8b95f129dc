"""Replica simulations shared by the test session's processes: each run is simulated once per `make test`, by
whichever pytest-xdist worker first needs it, and read back by the others.

`blueprints.capacity.simulator.simulate` is deterministic (no clock, no unseeded randomness: its module docstring), so
the run a worker reads back is the run it would have simulated. The planner remembers runs within a process
(`blueprints.capacity.planning`, up to 4,096), but the suite's workers plan the same stacks again, and a worker's long
session outgrows that memo: measured on one `make test`, 46 s of the 189 s of CPU in replica simulations repeated a
run simulated before (25 s in another worker, 21 s in the same one).

The key is every input a run reads, pickled: the replica model's fields with its step tables' contents (their
callables are built from those fields), the scheduler config, the request shapes, the arrival times and the options.
A test that patches what a simulation reads beyond its arguments (the simulator module's own functions) is marked
`fresh_runs`, and its runs are simulated and not shared. Wraps `blueprints.capacity.runs.simulate`, which every open-
and closed-loop run of the planner, the calibration and the benchmarks' replays goes through; a test that patches
`planning.simulate_rate` or `planning.run_meeting` still sees every call it counts. A test that patches a module a
shared simulation runs (`READ_BY_SIMULATIONS`) without the mark fails, naming what it patched (tests/conftest.py).
The fleet replays (`blueprints.simulate.fleet`) are not shared: on a dozen plan- and preview-heavy test files one in
nine repeated another, and its hits saved about what keying and copying every replay cost.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
import types
from pathlib import Path

from blueprints.capacity import runs
from blueprints.core.memo import remembered

#: The folder the session's processes share, created by the controller (or a run without workers).
FOLDER_KEY = "shared_runs_folder"

_state = {"folder": None, "on": True}
_steps: dict[int, tuple[object, bytes]] = {}  # id(step tables) -> (the tables, kept alive; their digest)
_memo: dict[str, object] = {}
#: Runs one process remembers (a worker simulates or reads ~5,000 in a `make test`); beyond it the memo starts again
#: and the folder answers.
MEMO_SIZE = 50_000


def _fields(obj: object) -> dict:
    """An object's attributes that are not callables (those a `cached_property` built from the others)."""
    return {k: v for k, v in vars(obj).items() if not callable(v)}


def _key(model, config, shapes, kwargs: dict) -> str:
    steps = model.steps
    known = _steps.get(id(steps))
    if known is None:
        known = _steps[id(steps)] = (steps, hashlib.sha256(pickle.dumps(
            (type(steps).__qualname__, _fields(steps)), protocol=5)).digest())
    fields = {k: v for k, v in _fields(model).items() if k != "steps"}
    return hashlib.sha256(known[1] + pickle.dumps((type(model).__qualname__, fields, config, shapes,
                                                   sorted(kwargs.items())), protocol=5)).hexdigest()


def install(folder: Path) -> None:
    """Share this process's replica simulations through `folder` (every process of the session gives the same)."""
    _state["folder"] = folder
    real = runs.simulate
    if getattr(real, "shared", False):
        return

    @functools.wraps(real)
    def simulate(model, config, shapes, **kwargs):
        if not _state["on"]:
            return real(model, config, shapes, **kwargs)
        return _shared(_key(model, config, shapes, kwargs), lambda: real(model, config, shapes, **kwargs))

    simulate.shared = True
    runs.simulate = simulate


def _shared(key: str, compute):
    """The session's run for `key`: remembered in this process (`blueprints.core.memo.remembered`), else read from
    the folder, else simulated and written there."""
    return remembered(_memo, key, lambda: _read_or_write(_state["folder"] / key, compute), kept=MEMO_SIZE)


def _read_or_write(path: Path, compute):
    try:
        return pickle.loads(path.read_bytes())
    except FileNotFoundError:
        run = compute()
        staged = path.with_name(f"{path.name}.{os.getpid()}")
        staged.write_bytes(pickle.dumps(run, protocol=5))
        staged.replace(path)  # atomic: another process reads the whole run or none
        return run


def new_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="blueprint-runs-"))


#: Modules whose code a shared simulation runs beyond its arguments: a test patching one must be marked `fresh_runs`.
READ_BY_SIMULATIONS = ("blueprints.capacity.simulator", "blueprints.capacity.runs", "blueprints.capacity.physics",
                       "blueprints.capacity.measured", "blueprints.capacity.roofline", "blueprints.capacity.workload",
                       "blueprints.capacity.replica")


def patched_reads(monkeypatch) -> list[str]:
    """What `monkeypatch` (pytest's) replaced in `READ_BY_SIMULATIONS`, e.g.
    `blueprints.capacity.simulator.bisect_right`."""
    found = []
    for obj, name, _ in getattr(monkeypatch, "_setattr", ()):
        module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "") or ""
        if module.startswith(READ_BY_SIMULATIONS):
            found.append(f"{module}.{name}")
    return found


class fresh:
    """Within it, runs are simulated and not shared (a `fresh_runs` test)."""

    def __enter__(self) -> None:
        _state["on"] = False

    def __exit__(self, *exc) -> None:
        _state["on"] = True
