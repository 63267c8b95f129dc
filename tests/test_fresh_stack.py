"""The simulations' loops run on a fresh interpreter stack, the same few frames deep whatever their caller's depth
(blueprints.core.freshstack: CPython gh-142183 made a loop that happened to sit at the end of a 16 KiB stack chunk map
and unmap a chunk on every call)."""

from __future__ import annotations

import sys

import pytest

from blueprints.capacity import simulator
from blueprints.capacity.physics import replica_model
from blueprints.capacity.runs import open_loop, scheduler_config
from blueprints.capacity.workload import length_model
from blueprints.core.freshstack import fresh_stack
from blueprints.requirements.model import Precision
from blueprints.simulate import fleet


def _depth() -> int:
    """Frames below the caller's, counted to the bottom of its thread's stack."""
    frame, n = sys._getframe(1), 0
    while frame is not None:
        n, frame = n + 1, frame.f_back
    return n


def _at_depth(extra: int, fn, *args):
    """`fn(*args)` called `extra` frames deeper than this call."""
    return fn(*args) if extra == 0 else _at_depth(extra - 1, fn, *args)


def test_a_fresh_stack_function_runs_equally_deep_from_any_callers_depth():
    probe = fresh_stack(_depth)
    assert _at_depth(400, _depth) - _at_depth(5, _depth) == 395  # the control: an ordinary call is as deep as called
    shallow, deep = _at_depth(5, probe), _at_depth(400, probe)
    assert shallow == deep
    assert deep < 12


def test_its_result_and_its_exception_reach_the_caller_unchanged():
    failure = ValueError("the simulation's own error")

    def fails():
        raise failure

    assert fresh_stack(lambda a, *, b: (a, b))(1, b=2) == (1, 2)
    with pytest.raises(ValueError) as raised:
        fresh_stack(fails)()
    assert raised.value is failure


@pytest.mark.fresh_runs  # it watches the loop run: each run simulated, not read back
def test_the_replica_simulations_loop_is_equally_deep_from_any_caller(catalog, monkeypatch):
    model = replica_model(catalog.model("llama-3.1-8b").architecture, catalog.gpu("l40s"), precision=Precision.BF16,
                          tensor_parallel_size=1)
    config = scheduler_config(model, catalog.gpu("l40s"), max_model_len=8192)
    depths: list[int] = []
    bisect_right = simulator.bisect_right  # the loop calls it for every run of decode steps
    monkeypatch.setattr(simulator, "bisect_right", lambda *a: depths.append(_depth()) or bisect_right(*a))

    def run():
        return open_loop(model, config, rate_per_s=2.0, pattern="steady", inputs=length_model(1000),
                         outputs=length_model(200), max_model_len=8192, requests=60)

    shallow = _at_depth(0, run)
    seen_shallow, depths[:] = set(depths), []
    deep = _at_depth(300, run)
    assert deep == shallow
    assert seen_shallow and set(depths) == seen_shallow


def test_the_fleet_replay_is_equally_deep_from_any_caller(chat_prod, monkeypatch):
    depths: list[int] = []
    model_of = fleet.replica_model
    monkeypatch.setattr(fleet, "replica_model", lambda bp: depths.append(_depth()) or model_of(bp))
    trace = [1.0] * 30
    shallow = _at_depth(0, lambda: fleet.simulate(chat_prod, trace=trace))
    deep = _at_depth(300, lambda: fleet.simulate(chat_prod, trace=trace))
    assert deep == shallow
    assert depths and depths[:len(depths) // 2] == depths[len(depths) // 2:]  # each replay: the same depths
