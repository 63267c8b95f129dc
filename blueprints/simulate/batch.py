"""A batch service's daily run, replayed: at the window's start the day's requests are all queued, the fleet's
replicas start (a cold start each, `startup.total_s`) and each then serves a closed loop at its `max_num_seqs` (the
queue never empty: its throughput with the batch full, `blueprints.capacity.runs.closed_loop` on the planned replica,
`blueprints.capacity.replica.planned_candidate`) until the queue is empty. The run's first requests finish one
request's latency after the replicas start (the pipeline fills), so the day's work is done at

    start + one request's latency (p95 at that operating point) + requests / (replicas x throughput per replica).

The replay reports that completion time against the deadline, and the share of the work done by each hour.
Pure; LLMs only (a batch service serves one text-generation model, `traffic.batch`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints.contracts.blueprint import Blueprint


@dataclass(frozen=True)
class BatchReplay:
    """The replayed day. Times are seconds after the window's start."""

    requests: float
    replicas: int
    requests_per_s_per_replica: float
    start_s: float
    request_latency_s: float

    @property
    def completion_s(self) -> float:
        """When the day's last request completes, s after the window's start."""
        return self.start_s + self.request_latency_s + self.requests / (self.replicas * self.requests_per_s_per_replica)

    def done_by(self, seconds: float) -> float:
        """Share of the day's requests completed `seconds` after the window's start (0-1)."""
        serving = seconds - self.start_s - self.request_latency_s
        if serving <= 0:
            return 0.0
        return min(1.0, serving * self.replicas * self.requests_per_s_per_replica / self.requests)

    def hourly(self) -> tuple[float, ...]:
        """Share of the work done at the end of each hour until it is all done."""
        hours = math.ceil(self.completion_s / 3600 - 1e-9)
        return tuple(round(self.done_by(3600 * (h + 1)), 4) for h in range(max(1, hours)))


def replay_json(replay: BatchReplay, *, deadline_hours: float) -> dict:
    """`blueprint simulate <batch stack> --json`: {requests, replicas, requests_per_s_per_replica, start_s,
    request_latency_s, completion_hours, deadline_hours, within_deadline, done_by_hour (shares 0-1, one an hour)}."""
    return {"requests": replay.requests, "replicas": replay.replicas,
            "requests_per_s_per_replica": round(replay.requests_per_s_per_replica, 4), "start_s": replay.start_s,
            "request_latency_s": round(replay.request_latency_s, 2),
            "completion_hours": round(replay.completion_s / 3600, 3), "deadline_hours": deadline_hours,
            "within_deadline": replay.completion_s <= deadline_hours * 3600, "done_by_hour": list(replay.hourly())}


def replay_batch(bp: Blueprint, *, requests: float, replicas: int | None = None) -> BatchReplay:
    """Replay a planned vLLM blueprint's batch run of `requests` on `replicas` (default: its planned replicas).

    Raises:
        ValueError: `bp` is not a text-generation plan whose replica the capacity model knows.
    """
    from blueprints.capacity.replica import planned_candidate
    from blueprints.capacity.runs import closed_loop

    found = planned_candidate(bp)
    if found is None:
        raise ValueError(f"{bp.stack}: a batch is replayed on a planned text-generation replica")
    cand, shape = found
    run = closed_loop(cand.model, cand.config, concurrency=cand.config.max_num_seqs, inputs=shape.inputs,
                      outputs=shape.outputs, max_model_len=shape.max_model_len)
    return BatchReplay(requests=requests, replicas=replicas or bp.compute.replicas,
                       requests_per_s_per_replica=run.requests_per_s, start_s=float(bp.startup.total_s),
                       request_latency_s=run.e2e_ms.p95 / 1e3)
