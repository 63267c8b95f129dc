"""Seeded workloads for the replica simulation: arrival times per traffic pattern and request lengths.

- Arrivals (`defaults.ARRIVAL_BURSTS`): `steady` traffic is a Poisson process at the replica's share of the peak
  rate; `bursty` and `spiky` are Poisson processes whose rate alternates between bursts (the mean rate x a
  multiplier, for a fixed duration) and lulls (the rate that keeps the mean), e.g. bursty: 10 s at 2x, 30 s at
  2/3x.
- Lengths: prompt and output lengths are lognormal, matched to the mean and the 95th percentile (the requirements'
  `traffic.input_tokens_p95` / `output_tokens_p95`, else `defaults.TOKENS_P95_TO_MEAN` x the mean); p95 = mean gives
  fixed lengths. Draws are rounded and clipped to [1, max_model_len] (prompt + output <= max_model_len), which trims
  the mean slightly for long tails near the context limit.
- Determinism and common random numbers: the unit draws depend only on the seed and the request count, and the burst
  schedule only on the seed, so runs at different rates see the same requests, only scaled in time. The same inputs
  always give the same workload (the standard library's `random.Random`, whose `random()` stream is stable across
  Python versions; the normal quantile is `statistics.NormalDist`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

from blueprints.core import defaults

#: z of the 95th percentile of a standard normal.
Z95 = 1.6448536269514722


@dataclass(frozen=True)
class LengthModel:
    """A lognormal token-length distribution given by its mean and 95th percentile (tokens).

    Example:
        `LengthModel(1200, 2400)` draws prompts averaging 1,200 tokens with 5 % above 2,400.
    """

    mean: int
    p95: int

    @property
    def sigma(self) -> float:
        """Lognormal shape: the smaller root of z95 x s - s^2 / 2 = ln(p95 / mean) (0 for fixed lengths)."""
        ratio = math.log(max(self.p95, self.mean) / self.mean)
        disc = Z95 * Z95 - 2 * ratio
        return Z95 - math.sqrt(max(disc, 0.0))

    def draw(self, z: float, *, limit: int) -> int:
        """The length at standard-normal quantile `z`, rounded and clipped to [1, limit] tokens."""
        s = self.sigma
        if s == 0.0:
            return max(1, min(self.mean, limit))
        value = math.exp(math.log(self.mean) - s * s / 2 + s * z)
        return max(1, min(int(round(value)), limit))


def length_model(mean: int, p95: int | None = None) -> LengthModel:
    """The length distribution of a traffic field: its p95, or `defaults.TOKENS_P95_TO_MEAN` x the mean."""
    return LengthModel(mean, p95 if p95 is not None else max(mean, round(defaults.TOKENS_P95_TO_MEAN * mean)))


@dataclass(frozen=True)
class Requests:
    """Request shapes, in arrival order: prompt and output tokens per request."""

    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]


@lru_cache(maxsize=64)
def _unit_draws(seed: int, count: int) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """(unit-rate Poisson epochs, prompt z, output z) for `count` requests: the seed's common random numbers."""
    rng = random.Random(seed)
    normal = NormalDist()
    epochs, z_in, z_out = [], [], []
    clock = 0.0
    for _ in range(count):
        clock += -math.log(1.0 - rng.random())
        epochs.append(clock)
        z_in.append(normal.inv_cdf(min(max(rng.random(), 1e-12), 1 - 1e-12)))
        z_out.append(normal.inv_cdf(min(max(rng.random(), 1e-12), 1 - 1e-12)))
    return tuple(epochs), tuple(z_in), tuple(z_out)


@lru_cache(maxsize=256)
def request_shapes(inputs: LengthModel, outputs: LengthModel, *, count: int, max_model_len: int,
                   seed: int = defaults.SIMULATION_SEED) -> Requests:
    """`count` seeded (prompt, output) lengths within `max_model_len`."""
    _, z_in, z_out = _unit_draws(seed, count)
    prompt = [inputs.draw(z, limit=max_model_len - 1) for z in z_in]
    out = [outputs.draw(z, limit=max_model_len - p) for z, p in zip(z_out, prompt)]
    return Requests(tuple(prompt), tuple(out))


def arrival_times(pattern: str, rate_per_s: float, count: int, *, seed: int = defaults.SIMULATION_SEED) -> list[float]:
    """Arrival times (s) of `count` requests at mean `rate_per_s` with the pattern's burstiness.

    The unit-rate epochs are mapped through the inverse of the cumulative intensity rate x multiplier(t), where the
    multiplier repeats a cycle of a burst (`defaults.ARRIVAL_BURSTS`: multiplier h for d s) and a lull (the multiplier
    that keeps the mean, for d (1 - share) / share s); the seed sets where in the cycle time 0 falls. Regular rather
    than random durations, so every run of a few cycles sees the pattern's share of bursts. Closed form per request:
    a cycle's intensity is the rate x its length.
    """
    epochs, _, _ = _unit_draws(seed, count)
    burst = defaults.ARRIVAL_BURSTS[pattern]
    if burst is None:
        return [e / rate_per_s for e in epochs]
    high, share, burst_s = burst
    low = (1.0 - share * high) / (1.0 - share)
    cycle = burst_s / share
    per_cycle = rate_per_s * cycle
    in_burst = rate_per_s * high * burst_s  # intensity of the burst part of a cycle

    def within(x: float) -> float:  # intensity from the start of a cycle to position x
        return rate_per_s * (high * min(x, burst_s) + low * max(0.0, x - burst_s))

    phase = random.Random(seed * 7919 + 1).random() * cycle
    start = within(phase)
    out = []
    for e in epochs:
        k, rest = divmod(e + start, per_cycle)
        x = rest / (rate_per_s * high) if rest <= in_burst else burst_s + (rest - in_burst) / (rate_per_s * low)
        out.append(k * cycle + x - phase)
    return out


def simulation_requests(rate_per_s: float) -> int:
    """Requests one open-loop run simulates: `SIMULATION_HORIZON_S` of traffic within `SIMULATION_REQUESTS`."""
    low, high = defaults.SIMULATION_REQUESTS
    return int(min(high, max(low, rate_per_s * defaults.SIMULATION_HORIZON_S)))
