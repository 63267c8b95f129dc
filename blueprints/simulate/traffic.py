"""Traffic a fleet simulation replays: a documented daily curve per pattern, or a user's trace.

Daily curve (requests/s per minute, `peak` the environment's planned peak): a diurnal wave, lowest at 04:00 and
highest at 16:00, `base + (top - base) x (1 - cos(2 pi (hour - 4) / 24)) / 2` of the peak, plus bursts that reach the
full peak. Pattern parameters (`PATTERNS`, [assumption] shapes, not measured traffic):

| pattern | night (base) | daily top | bursts per day | burst length |
|---|---|---|---|---|
| steady | 0.6 | 1.0 | 0 | - |
| bursty | 0.25 | 0.75 | 6 | 10-20 min |
| spiky | 0.1 | 0.5 | 12 | 2-5 min |

Bursts rise to the peak within a minute and fall back linearly; their start times are drawn from a seeded generator
(the same seed always gives the same trace), with one burst of each bursty/spiky day fixed at the daily top so the
planned peak is always exercised. A diurnal day (requirements `traffic.daily`: peak_to_trough, peak_hours, timezone)
replaces the wave: the peak within the peak hours, peak / peak_to_trough outside, one-hour cosine ramps between,
with the pattern's bursts on top (one of them at the middle of the peak hours). A trace file is CSV with one row per minute: `rps` (requests/s), optionally
preceded by `minute`; a header row is allowed.
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass
from pathlib import Path

from blueprints.core.errors import RequirementsError, read_text_file
from blueprints.requirements.model import DailyShape

MINUTES_PER_DAY = 1440
#: Largest trace the simulation accepts: 90 days of minutes.
MAX_TRACE_MINUTES = 90 * MINUTES_PER_DAY
#: Largest request rate a trace row may hold, requests/s (bounds the simulation's arithmetic).
MAX_TRACE_RPS = 1e6


@dataclass(frozen=True)
class Pattern:
    base: float
    top: float
    bursts_per_day: int
    burst_minutes: tuple[int, int]


PATTERNS = {
    "steady": Pattern(base=0.6, top=1.0, bursts_per_day=0, burst_minutes=(0, 0)),
    "bursty": Pattern(base=0.25, top=0.75, bursts_per_day=6, burst_minutes=(10, 20)),
    "spiky": Pattern(base=0.1, top=0.5, bursts_per_day=12, burst_minutes=(2, 5)),
}
#: Seed of the burst generator: traces are deterministic.
SEED = 20261201


def diurnal_level(minute: int, daily: DailyShape) -> float:
    """The share (0-1] of the peak a diurnal day (`DailyShape`) runs at `minute` after local midnight: 1 within its
    peak hours, 1 / peak_to_trough outside, with one-hour cosine ramps up before the start and down after the end."""
    start, end = daily.peak_hours
    hour = minute / 60
    span = (end - start) % 24  # the peak window's length, hours (start > end spans midnight)
    into = (hour - start) % 24  # hours since the window opened
    if into < span:
        weight = 1.0
    elif into < span + 1:  # the hour after the end: down
        weight = (1 + math.cos(math.pi * (into - span))) / 2
    elif into >= 23:  # the hour before the start: up
        weight = (1 - math.cos(math.pi * (into - 23))) / 2
    else:
        weight = 0.0
    trough = 1 / daily.peak_to_trough
    return trough + (1 - trough) * weight


def daily_curve(pattern: str, peak_rps: float, *, days: int = 1, seed: int = SEED,
                daily: DailyShape | None = None) -> list[float]:
    """Requests/s for each minute of `days` days of `pattern` at `peak_rps` (see the module docstring); `daily`: a
    diurnal day (`diurnal_level`) instead of the pattern's canned wave, the pattern's bursts on top of it."""
    shape = PATTERNS[pattern]
    rng = random.Random(f"{seed}-{pattern}")
    out = []
    for day in range(days):
        if daily is None:
            minutes = [peak_rps * (shape.base + (shape.top - shape.base)
                                   * (1 - math.cos(2 * math.pi * ((m / 60) - 4) / 24)) / 2)
                       for m in range(MINUTES_PER_DAY)]
            top = 16 * 60
        else:
            minutes = [peak_rps * diurnal_level(m, daily) for m in range(MINUTES_PER_DAY)]
            start, end = daily.peak_hours
            top = round((start + ((end - start) % 24) / 2) % 24 * 60)  # the middle of the peak hours
        starts = [rng.randrange(0, MINUTES_PER_DAY) for _ in range(shape.bursts_per_day)]
        if starts:
            starts[0] = top  # one burst at the daily top: the planned peak happens every day
        for start in starts:
            length = rng.randint(*shape.burst_minutes)
            for i in range(length):
                m = start + i
                if m >= MINUTES_PER_DAY:
                    break
                level = peak_rps * (1 - i / max(1, length))  # up at once, then back down linearly
                minutes[m] = max(minutes[m], level)
        out += minutes
    return out


def read_trace(path: Path) -> list[float]:
    """A user's trace: requests/s per minute from a CSV file (column `rps`, or the last column).

    Raises:
        RequirementsError: unreadable, empty, longer than 90 days, or a value that is not a finite number within
            0-1e6; the message names the file, the row and the fix.
    """
    text = read_text_file(path, RequirementsError, "trace file")
    rows = [r for r in csv.reader(text.splitlines()) if r and any(c.strip() for c in r)]
    if rows and not any(_parses(c) for c in rows[0]):
        rows = rows[1:]  # a header (no cell of it is a number)
    if not rows:
        raise RequirementsError(f"{path}: no rows; give one row per minute with the request rate (requests/s), "
                                "e.g. `minute,rps` then `0,3.5`")
    if len(rows) > MAX_TRACE_MINUTES:
        raise RequirementsError(f"{path}: {len(rows)} rows; at most {MAX_TRACE_MINUTES} minutes (90 days)")
    values = []
    for index, row in enumerate(rows, start=1):
        cell = row[-1].strip()
        if not _is_number(cell) or not 0 <= float(cell) <= MAX_TRACE_RPS:
            raise RequirementsError(f"{path}: row {index}: {cell!r} is not a request rate; each row's last column "
                                    f"is requests/s for one minute, a number from 0 to {MAX_TRACE_RPS:g}")
        values.append(float(cell))
    return values


def _parses(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _is_number(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False
