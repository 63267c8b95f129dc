"""Benchmark result files whose runs are the capacity model's own replay (constructed, never measured): written as
`blueprint benchmark` writes them (`blueprints.operate.run.result_file` over `benchmark_settings`: the stack's
planned workload, prefix included), each run's figures those of `blueprints.capacity.correction.replay` of that run on
the replica calibration replays, with a known correction. `blueprint calibrate` must recover the correction from them.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from blueprints.capacity.correction import MeasuredRun, predicted, replay
from blueprints.capacity.physics import Correction
from blueprints.contracts.benchmark_result import VllmBenchRun, result_json
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.operate import benchmark as bench
from blueprints.operate.calibrate import measured_setup
from blueprints.operate.run import BenchmarkRun, result_file
from tests.conftest import ROOT

#: The day the constructed runs are dated.
RUN_DATE = dt.date(2026, 12, 3)
#: A client run's keys as v0.24.0 writes them, from the bundled (constructed) result file.
TEMPLATE = ROOT / "tests/data/benchmark-results/chat-assistant-prod/2026-12-03.json"


def model_runs(stack: str, truth: Correction, *, rates: tuple[float, ...], duration_s: int = 60) -> dict:
    """The result file's JSON (constructed: `measured: false`) for `stack`'s planned workload at `rates` requests/s,
    `duration_s` each, its runs replayed with `truth`."""
    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    settings = bench.benchmark_settings(bp, rates=list(rates), duration_s=duration_s)
    setup, _ = measured_setup(bp, None)
    w = settings.workload
    template = json.loads(TEMPLATE.read_text())["runs"][0]
    runs = []
    for i, (rate, prompts) in enumerate(zip(settings.rates, settings.num_prompts)):
        probe = MeasuredRun("model", rate, prompts, w.input_len, w.output_len, w.range_ratio, 1.0, 1.0, 1.0)
        result = replay(setup, probe, truth)
        runs.append(VllmBenchRun.model_validate({
            **template, "date": f"{RUN_DATE:%Y%m%d}-{10 + i:02d}0000", "request_rate": rate, "num_prompts": prompts,
            "completed": prompts, "failed": 0, "max_concurrency": settings.max_concurrency,
            "max_concurrent_requests": min(50, settings.max_concurrency - 1),
            "total_input_tokens": prompts * w.prompt_len, "total_output_tokens": prompts * w.output_len,
            "duration": result.duration_s, "request_throughput": result.measured / result.duration_s,
            "output_throughput": predicted(result, "output_tokens_per_s"),
            "median_ttft_ms": predicted(result, "median_ttft_ms"),
            "median_itl_ms": predicted(result, "median_itl_ms")}))
    written = result_file(BenchmarkRun(bp, settings, [], []), runs, client_image=bp.engine.image, backend=w.backend,
                          endpoint=w.endpoint, address="none: the capacity model's replay", date=RUN_DATE)
    data = result_json(written.model_copy(update={"measured": False}))
    data["note"] = (f"CONSTRUCTED, NOT MEASURED: the capacity model's replay at step time x{truth.step_time:g}, TTFT "
                    f"floor x{truth.ttft_floor:g}")
    return data


def model_result_file(tmp_path: Path, stack: str, truth: Correction, *, rates: tuple[float, ...],
                      duration_s: int = 60, name: str = "model.json") -> Path:
    """`model_runs` written to `tmp_path / name`."""
    path = tmp_path / name
    path.write_text(json.dumps(model_runs(stack, truth, rates=rates, duration_s=duration_s)))
    return path
