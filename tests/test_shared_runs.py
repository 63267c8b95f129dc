"""The session's shared replica simulations (tests/shared_runs.py): a run read back is the run simulated afresh, any
input it reads changes its key, and a test patching what the simulations run is named."""

from __future__ import annotations

from dataclasses import replace

from blueprints.capacity import planning, runs, simulator
from blueprints.capacity.physics import Correction, replica_model
from blueprints.capacity.runs import open_loop, scheduler_config
from blueprints.capacity.workload import length_model
from blueprints.requirements.model import Precision
from tests import shared_runs


def _run(model, config, rate: float = 2.0):
    return open_loop(model, config, rate_per_s=rate, pattern="bursty", inputs=length_model(1000),
                     outputs=length_model(200), max_model_len=8192, requests=80)


def test_a_shared_run_is_the_run_simulated_afresh_and_each_input_it_reads_keys_it(catalog):
    model = replica_model(catalog.model("llama-3.1-8b").architecture, catalog.gpu("l40s"), precision=Precision.BF16,
                          tensor_parallel_size=1)
    config = scheduler_config(model, catalog.gpu("l40s"), max_model_len=8192)
    assert getattr(runs.simulate, "shared", False)
    shared = _run(model, config)
    with shared_runs.fresh():
        fresh = _run(model, config)
    assert shared == fresh and shared.stable and shared.measured > 0
    slower = replace(model, correction=Correction(step_time=1.5))
    keys = {shared_runs._key(m, config, s, {"warmup": 0})
            for m in (model, slower) for s in ("shapes-a", "shapes-b")}
    assert len(keys) == 4
    with shared_runs.fresh():
        assert _run(slower, config) == _run(slower, config) != shared


def test_a_patch_of_what_the_simulations_run_is_named_and_one_above_them_is_not(monkeypatch):
    monkeypatch.setattr(simulator, "bisect_right", simulator.bisect_right)
    monkeypatch.setattr(planning, "simulate_rate", planning.simulate_rate)
    assert shared_runs.patched_reads(monkeypatch) == ["blueprints.capacity.simulator.bisect_right"]
    monkeypatch.undo()  # or this test would fail the guard it checks
