"""What a service serves, at what load and latency: the `model` (or `models`) sections with their weights,
format, precision and quantization, each model's `traffic`, and the `slo`; `context_tokens`, the context a model is
served with. Every section is closed: a misspelt key is an error.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from enum import Enum

from typing import Annotated, Literal
from pydantic import ConfigDict, Field, model_validator

from blueprints.core import bounds
from blueprints.catalog import Architecture, Task, load_catalog
from blueprints.core.errors import FieldProblem, raise_problems
from blueprints.requirements.reuse import Sessions, reuse_problems
from blueprints.requirements.fields import (
    DNS_1123_LABEL, InstanceTypeName, KMS_KEY_ARN, MAX_WEIGHTS_URI_CHARS, ModelId, SHA256_HEX, Section, WEIGHTS_URI,
    absent_or_null, given, is_const, when,
)
from blueprints.requirements.adapters import LoraAdapter, adapter_problems


class ModelFormat(str, Enum):
    SAFETENSORS = "safetensors"
    ONNX = "onnx"
    TENSORRT = "tensorrt"
    TORCHSCRIPT = "torchscript"
    PYTORCH = "pytorch"
    TENSORFLOW = "tensorflow"
    GGUF = "gguf"


#: The file a Triton backend loads from a model's version folder (Triton model repository docs, "Model Files"):
#: onnxruntime `model.onnx`, pytorch `model.pt`: the formats an `https://` source (one file) can be.
MODEL_FILE = {ModelFormat.ONNX: "model.onnx", ModelFormat.TORCHSCRIPT: "model.pt", ModelFormat.PYTORCH: "model.pt"}


class Precision(str, Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def bytes_per_param(self) -> float:
        """Bytes per weight; INT4 includes group-wise scales (~0.56). Source: sizing-facts.md, Formulas."""
        return {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5625}[self.value]


class Quantization(str, Enum):
    """How a checkpoint's weights were quantised: the kernel family vLLM runs, which sets the decode bandwidth a
    quantised model reaches (4-bit AWQ and GPTQ kernels differ; see `defaults.WEIGHT_BANDWIDTH_FACTOR`)."""

    AWQ = "awq"
    GPTQ = "gptq"
    FP8 = "fp8"
    W8A8 = "w8a8"

    @property
    def precisions(self) -> tuple[Precision, ...]:
        """The weight precisions a checkpoint of this method comes in."""
        return {"awq": (Precision.INT4,), "gptq": (Precision.INT4, Precision.INT8), "fp8": (Precision.FP8,),
                "w8a8": (Precision.INT8,)}[self.value]


#: The method a quantised precision implies when `model.quantization` is not given (what the planner always assumed:
#: INT4 -> AWQ, INT8 -> GPTQ, FP8 -> FP8), so requirement files written before the field existed keep their meaning.
DEFAULT_QUANTIZATION = {Precision.INT4: Quantization.AWQ, Precision.INT8: Quantization.GPTQ,
                        Precision.FP8: Quantization.FP8}


#: Largest p95 / mean of a token-length distribution: lengths are drawn from a lognormal matched to the mean and
#: p95, and a lognormal's p95 is at most exp(1.645^2 / 2) = 3.87x its mean (blueprints/capacity/workload.py).
MAX_TOKENS_P95_TO_MEAN = 3.5


class TrafficPattern(str, Enum):
    STEADY = "steady"
    BURSTY = "bursty"
    SPIKY = "spiky"


class DailyShape(Section):
    """A diurnal day: the peak rate during `peak_hours` (local time in `timezone`), `peak_to_trough` times less
    overnight, one-hour cosine ramps between them. Replaces the pattern's canned daily wave in the fleet simulation
    (`blueprints.simulate.traffic.daily_curve`); `traffic.pattern` still sets the arrivals' burstiness within minutes
    and its bursts."""

    peak_to_trough: float = Field(ge=1, le=1000, description="the peak rate over the overnight rate (3: a 3x daily "
                                  "swing; 1: flat)")
    peak_hours: tuple[Annotated[int, Field(ge=0, le=23)], Annotated[int, Field(ge=0, le=23)]] = Field(
        default=(9, 17), description="[start, end) hours of the peak, local time, 0-23 each; start > end spans "
        "midnight")
    timezone: str = Field(default="UTC", max_length=64, description="IANA time zone the hours are in (e.g. "
                          "America/New_York); the simulated day is reported in it")

    @model_validator(mode="after")
    def _hours_and_zone(self) -> DailyShape:
        problems = []
        start, end = self.peak_hours
        if start == end:
            problems.append(FieldProblem("peak_hours", f"peak_hours={list(self.peak_hours)}: two different hours "
                                         "between 0 and 23, [start, end) local time, e.g. [9, 17]",
                                         rule="daily-shape-hours"))
        zone = _iana_zone_problem(self.timezone, "daily-shape-hours")
        raise_problems([*problems, *([zone] if zone else [])])
        return self


#: Days of the week, as `traffic.weekly.weekend_days` names them (Monday first, as ISO 8601 numbers them).
Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WEEKDAYS: tuple[str, ...] = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class WeeklyShape(Section):
    """A week: the planned day on working days, the same day at `weekend_factor` of its traffic (every minute, the
    peak included) on `weekend_days`. The SLO and the peak are planned for a working day (the busiest); the monthly
    expected cost is the week's average (`blueprints.simulate.fleet.simulate`: a working day and a weekend day
    simulated, weighted by how many of each a week has), and the unit costs divide it by the week's requests."""

    weekend_factor: float = Field(ge=0, le=1, description="a weekend day's traffic over a working day's, 0-1 (0.4: "
                                  "40 % of the weekday's load every minute; 0: no traffic at weekends; 1: no weekly "
                                  "shape). A service busier at weekends names its quiet days as weekend_days")
    weekend_days: tuple[Weekday, ...] = Field(default=("saturday", "sunday"), min_length=1, max_length=6,
                                              description="the quiet days, lower-case English names, 1-6 of them "
                                              "(default saturday and sunday; e.g. [friday, saturday])")

    @model_validator(mode="after")
    def _distinct_days(self) -> WeeklyShape:
        if len(set(self.weekend_days)) != len(self.weekend_days):
            raise FieldProblem("weekend_days", f"weekend_days={list(self.weekend_days)} names a day twice; list each "
                               "quiet day once", rule="weekly-shape-days")
        return self

    def day_factors(self) -> tuple[float, ...]:
        """Each day's traffic over the planned day's, Monday first (7 values)."""
        return tuple(self.weekend_factor if day in self.weekend_days else 1.0 for day in WEEKDAYS)


def _iana_zone_problem(timezone: str, rule: str) -> FieldProblem | None:
    """`timezone` is not an IANA time zone name: the problem naming it (the machine's `localtime`, `Factory` and the
    `posix/` and `right/` copies are not accepted)."""
    from zoneinfo import available_timezones

    if timezone in available_timezones() and timezone not in ("localtime", "Factory"):
        return None
    return FieldProblem("timezone", f"timezone={timezone!r} is not an IANA time zone; write one such as UTC, "
                        "Europe/Berlin or America/New_York", rule=rule)


def run_minutes(run_hours: float) -> int:
    """A daily run's length on a cron schedule, whole minutes (`run_hours` rounded up to the minute); 1440 or more is
    the whole day (no schedule: always on)."""
    return math.ceil(run_hours * 60 - 1e-9)


#: Days ahead in which a batch's cron times are checked against the time zone's daylight-saving gaps.
DST_LOOKAHEAD_DAYS = 3 * 366


def skipped_on(timezone: str, minute_of_day: int, *, today: dt.date | None = None) -> dt.date | None:
    """The first day within `DST_LOOKAHEAD_DAYS` of `today` (default: the UTC date now) on which the local time
    `minute_of_day` (minutes after midnight) does not exist in `timezone` (clocks jump over it for daylight saving
    time), or None. A wall time that does not exist comes back changed from UTC (PEP 495)."""
    from zoneinfo import ZoneInfo

    zone, (hour, minute) = ZoneInfo(timezone), divmod(minute_of_day, 60)
    start = today or dt.datetime.now(dt.timezone.utc).date()
    for offset in range(DST_LOOKAHEAD_DAYS):
        day = start + dt.timedelta(days=offset)
        local = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
        back = local.astimezone(dt.timezone.utc).astimezone(zone)
        if (back.hour, back.minute) != (hour, minute):
            return day
    return None


def shortest_run(timezone: str, start_minute: int, minutes: int, *,
                 today: dt.date | None = None) -> tuple[float, dt.date | None]:
    """The shortest real length of a daily run, seconds, and the first day it starts on (None: no day's run is shorter
    than `minutes`), over `DST_LOOKAHEAD_DAYS` from `today` (default: the UTC date now).

    The run is held by a cron start and end in `timezone` (KEDA's cron scaler): from the local time `start_minute`
    (minutes after midnight) for `minutes` minutes of wall-clock time. A run that spans the clocks' spring-forward jump
    lasts that jump (an hour in most zones) less; one that spans the fall-back change lasts longer. A start or end in
    a skipped hour is refused before (rule batch-dst-gap). In a repeated hour robfig/cron v3.0.1
    `SpecSchedule.Next` (spec.go: the minute and hour loops add real minutes and hours) gives, once the first
    occurrence has passed, the second, an hour later, and KEDA 2.20.2 is active while the next end comes before the
    next start (pkg/scalers/cron_scaler.go L137-148): the run starts at a start's second occurrence (taken so here)
    and ends at an end's second (taken at its first here: never counted longer than it is)."""
    from zoneinfo import ZoneInfo

    zone, utc = ZoneInfo(timezone), dt.timezone.utc
    first = today or dt.datetime.now(utc).date()
    shortest, night = float(minutes * 60), None
    for offset in range(DST_LOOKAHEAD_DAYS):
        day = first + dt.timedelta(days=offset)
        wall = dt.datetime(day.year, day.month, day.day) + dt.timedelta(minutes=start_minute)
        start = wall.replace(tzinfo=zone, fold=1).astimezone(utc)
        end = (wall + dt.timedelta(minutes=minutes)).replace(tzinfo=zone, fold=0).astimezone(utc)
        seconds = (end - start).total_seconds()
        if seconds < shortest:
            shortest, night = seconds, day
    return shortest, night


class BatchWindow(Section):
    """When a daily batch may run: from `start_hour` for `length_hours` (or until `end_hour`), local time in
    `timezone`. The fleet exists only from the window's start until the batch's deadline (a KEDA cron trigger,
    `blueprints.plan.batch`); outside it the service runs no replica."""

    start_hour: int = Field(ge=0, le=23, description="the hour the batch may start, 0-23, local time")
    length_hours: int | None = Field(default=None, ge=1, le=24, description="how long the window lasts, hours "
                                     "(1-24); give this or end_hour")
    end_hour: int | None = Field(default=None, ge=0, le=23, description="the hour the window closes, 0-23, local "
                                 "time (before start_hour: the window spans midnight); give this or length_hours")
    timezone: str = Field(default="UTC", max_length=64, description="IANA time zone the hours are in (e.g. "
                          "Europe/Berlin), as traffic.daily")

    @model_validator(mode="after")
    def _one_length(self) -> BatchWindow:
        problems = []
        if (self.length_hours is None) == (self.end_hour is None):
            problems.append(FieldProblem("length_hours", "give exactly one of length_hours (e.g. 8) or end_hour "
                                         "(e.g. 6, a window from start_hour to 06:00)", rule="batch-window"))
        elif self.end_hour is not None and self.end_hour == self.start_hour:
            problems.append(FieldProblem("end_hour", f"end_hour={self.end_hour} equals start_hour: a window from an "
                                         "hour to the same hour is a whole day; write length_hours: 24",
                                         rule="batch-window"))
        zone = _iana_zone_problem(self.timezone, "batch-window")
        raise_problems([*problems, *([zone] if zone else [])])
        return self

    @property
    def hours(self) -> int:
        """The window's length, hours (1-24)."""
        if self.length_hours is not None:
            return self.length_hours
        return (self.end_hour - self.start_hour) % 24  # type: ignore[operator]


class Batch(Section):
    """A daily batch instead of interactive traffic: its volume, and that it must finish within `deadline_hours` of
    its `window`'s start. Planned for the lowest cost that finishes in time (`blueprints.plan.batch`): each replica
    at its highest throughput (the largest batch its KV cache holds, no latency target), as many replicas as finish
    the day's work by the deadline, none outside the window. A service with `traffic.batch` is a batch service: it
    has no latency SLO (`slo` latency targets are refused) and no `peak_requests_per_s` (its planned rate is the
    day's work over the deadline)."""

    requests_per_day: float | None = Field(default=None, ge=1, le=bounds.MAX_BATCH_REQUESTS_PER_DAY,
                                           description="requests (documents) a day; give this or tokens_per_day")
    tokens_per_day: float | None = Field(default=None, ge=1, le=bounds.MAX_BATCH_TOKENS_PER_DAY,
                                         description="prompt plus generated tokens a day; converted to requests with "
                                         "traffic.mean_input_tokens + mean_output_tokens; give this or "
                                         "requests_per_day")
    deadline_hours: float = Field(ge=bounds.MIN_BATCH_DEADLINE_HOURS, le=bounds.MAX_BATCH_DEADLINE_HOURS,
                                  description="the day's work finishes within this many hours of the window's start "
                                  "(0.01-24, at most the window's length)")
    window: BatchWindow | None = Field(default=None, description="when the batch may run: {start_hour, length_hours "
                                       "or end_hour, timezone}; required")

    @model_validator(mode="after")
    def _volume_and_window(self) -> Batch:
        problems = []
        if (self.requests_per_day is None) == (self.tokens_per_day is None):
            problems.append(FieldProblem("requests_per_day", "give exactly one of requests_per_day (documents a "
                                         "day) or tokens_per_day (prompt plus generated tokens a day)",
                                         rule="batch-one-volume"))
        if self.window is None:
            problems.append(FieldProblem("window", "a batch needs the window it may run in, e.g. window: "
                                         "{start_hour: 22, length_hours: 8, timezone: UTC}", rule="batch-window"))
        elif self.deadline_hours > self.window.hours:
            problems.append(FieldProblem("deadline_hours", f"deadline_hours={self.deadline_hours:g} is beyond the "
                                         f"window's {self.window.hours} hours: the batch cannot run after its window "
                                         f"closes; lower deadline_hours to <= {self.window.hours} or lengthen the "
                                         "window", rule="batch-deadline-within-window"))
        else:
            problems += self._schedule_in_dst_gap()
        raise_problems(problems)
        return self

    def _schedule_in_dst_gap(self) -> list[FieldProblem]:
        """The run's cron start or end at a local time the window's time zone skips on some day (a daylight-saving
        gap). KEDA's cron scaler takes the next start and end from robfig/cron, whose `SpecSchedule.Next` steps over
        a skipped hour to the next day (spec.go, the hour loop's `t.Add(1 * time.Hour)`), and is active while the
        next end comes before the next start (pkg/scalers/cron_scaler.go L123-151): a skipped start holds the fleet
        from the previous day's end (a whole extra day), a skipped end leaves that night without a run."""
        minutes = run_minutes(self.deadline_hours)
        if minutes >= 24 * 60:  # always on: no schedule
            return []
        window = self.window
        start = window.start_hour * 60  # type: ignore[union-attr]
        problems = []
        for what, at in (("start", start), ("end", (start + minutes) % (24 * 60))):
            day = skipped_on(window.timezone, at)  # type: ignore[union-attr]
            if day is not None:
                field = "window.start_hour" if what == "start" else "deadline_hours"
                problems.append(FieldProblem(field, f"the run's {what}, {at // 60:02d}:{at % 60:02d} "
                                             f"{window.timezone}, does not exist on {day} (the clocks skip it for "  # type: ignore[union-attr]
                                             f"daylight saving time): KEDA's cron scaler would "
                                             f"{'hold the fleet from the day before' if what == 'start' else 'skip that night'}"
                                             f"; move the {what} out of the skipped hour (another "
                                             f"{'start_hour' if what == 'start' else 'deadline_hours'}) or use a time "
                                             "zone without daylight saving time (UTC)", rule="batch-dst-gap"))
        return problems

    def shortest_run_s(self, *, today: dt.date | None = None) -> tuple[float, dt.date | None]:
        """The run's shortest real length, seconds (at most `deadline_hours`), and the first night it is shorter than
        `deadline_hours` (None: never), over `DST_LOOKAHEAD_DAYS` from `today`: the cron end is a local time, so a run
        spanning the spring-forward change is an hour shorter that night (`shortest_run`). Always on (a 24 h run): no
        schedule, `deadline_hours`."""
        minutes = run_minutes(self.deadline_hours)
        deadline_s = self.deadline_hours * 3600
        if minutes >= 24 * 60 or self.window is None:
            return deadline_s, None
        seconds, night = shortest_run(self.window.timezone, self.window.start_hour * 60, minutes, today=today)
        return (seconds, night) if seconds < deadline_s else (deadline_s, None)

    def requests(self, *, mean_input_tokens: int, mean_output_tokens: int) -> float:
        """Requests a day: `requests_per_day`, or `tokens_per_day` over the mean request's tokens."""
        if self.requests_per_day is not None:
            return self.requests_per_day
        return self.tokens_per_day / (mean_input_tokens + mean_output_tokens)  # type: ignore[operator]


class Traffic(Section):
    """Load at peak, per model. Token counts are per request."""

    peak_requests_per_s: float | None = Field(default=None, ge=bounds.MIN_PEAK_REQUESTS_PER_S,
                                              le=bounds.MAX_PEAK_REQUESTS_PER_S, description="peak arrival rate in "
                                              "production, requests/s (0.001-100,000); required unless `batch` is "
                                              "given (a batch's rate is its day's work over its deadline)")
    mean_input_tokens: int = Field(default=512, ge=1, le=bounds.MAX_TOKENS, description="mean prompt length, tokens")
    mean_output_tokens: int = Field(default=256, ge=1, le=bounds.MAX_TOKENS,
                                    description="mean generated length, tokens (generative models)")
    streaming: bool = Field(default=True, description="responses are streamed token by token")
    api: Literal["chat", "completions"] = Field(default="chat", description="the OpenAI API clients call: chat "
                                                "(/v1/chat/completions: the server renders the model's chat template "
                                                "for every request, which the capacity model counts in the TTFT) or "
                                                "completions (/v1/completions, raw prompts)")
    pattern: TrafficPattern = Field(default=TrafficPattern.STEADY, description="how arrivals bunch around the peak "
                                    "rate: steady = Poisson; bursty, spiky = rate bursts of seconds (see "
                                    "defaults.ARRIVAL_BURSTS)")
    daily: DailyShape | None = Field(default=None, description="a diurnal day (peak_to_trough, peak_hours, timezone) "
                                     "for the fleet simulation instead of the pattern's canned wave (see "
                                     "blueprints/simulate/traffic.py)")
    weekly: WeeklyShape | None = Field(default=None, description="a weekly shape, {weekend_factor: 0.4} (and "
                                       "weekend_days, default saturday and sunday): the monthly expected cost "
                                       "weighs a simulated working day and weekend day over the week; absent: every "
                                       "day is the planned day")
    input_tokens_p95: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS, description="95th-percentile prompt "
                                         "length, tokens (>= mean_input_tokens, <= 3.5x it); the capacity model "
                                         "draws prompt lengths from a lognormal with this mean and p95. Default: "
                                         "defaults.TOKENS_P95_TO_MEAN x the mean")
    output_tokens_p95: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS, description="95th-percentile generated "
                                          "length, tokens (>= mean_output_tokens, <= 3.5x it); as input_tokens_p95")
    shared_prefix_tokens: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS, description="tokens at the "
                                             "start of every prompt that are the same across requests (system prompt, "
                                             "tools, few-shot examples), <= mean_input_tokens; vLLM caches them "
                                             "(blueprints/requirements/reuse.py). Default: no shared prefix")
    sessions: Sessions | None = Field(default=None, description="multi-turn conversations that resend their history "
                                      "(blueprints/requirements/reuse.py); clients send the conversation's id in the "
                                      "x-session-id header. Default: single-turn requests")
    batch: Batch | None = Field(default=None, description="a daily batch instead of interactive traffic: "
                                "{requests_per_day or tokens_per_day, deadline_hours, window} (see Batch); absent: "
                                "interactive traffic at peak_requests_per_s")

    @model_validator(mode="after")
    def _p95_around_mean(self) -> Traffic:
        problems = []
        for field, mean_field in (("input_tokens_p95", "mean_input_tokens"), ("output_tokens_p95", "mean_output_tokens")):
            p95, mean = getattr(self, field), getattr(self, mean_field)
            if p95 is None:
                continue
            if p95 < mean:
                problems.append(FieldProblem(field, f"{field}={p95} is below {mean_field}={mean}: a 95th percentile is "
                                             f"at least the mean of lengths this skewed; raise {field} to >= {mean} "
                                             f"or lower {mean_field}", rule="p95-around-mean"))
            elif p95 > MAX_TOKENS_P95_TO_MEAN * mean:
                problems.append(FieldProblem(field, f"{field}={p95} is more than {MAX_TOKENS_P95_TO_MEAN:g}x "
                                             f"{mean_field}={mean}; the length model cannot put the p95 that far above "
                                             f"the mean; lower {field} to <= {int(MAX_TOKENS_P95_TO_MEAN * mean)} or "
                                             "check both figures", rule="p95-around-mean"))
        problems += reuse_problems(mean_input_tokens=self.mean_input_tokens, mean_output_tokens=self.mean_output_tokens,
                                   shared_prefix_tokens=self.shared_prefix_tokens, sessions=self.sessions)
        problems += self._batch_problems()
        raise_problems(problems)
        if self.batch is not None:  # the rate it is planned at, so every reader of the peak sees the batch's
            object.__setattr__(self, "peak_requests_per_s", self.batch_rate_per_s)
        return self

    def _batch_problems(self) -> list[FieldProblem]:
        """`peak_requests_per_s` xor `batch`; a batch's planned rate within the peak's bounds; no arrival shape."""
        if self.batch is None:
            return [] if self.peak_requests_per_s is not None else [FieldProblem(
                "peak_requests_per_s", "give peak_requests_per_s (interactive traffic) or batch (a daily batch)",
                rule="batch-or-peak")]
        # A dump of a validated batch carries the rate derived from it (`_p95_around_mean`), which is no contradiction.
        if self.peak_requests_per_s is not None and not math.isclose(self.peak_requests_per_s, self.batch_rate_per_s):
            return [FieldProblem("peak_requests_per_s", "a batch's rate is its day's work over its deadline: remove "
                                 "peak_requests_per_s (or remove batch for interactive traffic)", rule="batch-or-peak")]
        shaped = [f for f in ("daily", "weekly", "sessions") if getattr(self, f) is not None]
        shaped += ["pattern"] if self.pattern is not TrafficPattern.STEADY else []
        problems = [FieldProblem(f, f"{f} shapes interactive arrivals; a batch runs its queue at full throughput: "
                                 f"remove {f}", rule="batch-or-peak") for f in shaped]
        if self.batch.tokens_per_day is not None:  # converted with the mean lengths: the defaults are no one's figures
            problems += [FieldProblem(f, f"batch.tokens_per_day is converted to requests with mean_input_tokens and "
                                      f"mean_output_tokens; give {f} (the mean of your documents), or give "
                                      "batch.requests_per_day instead", rule="batch-tokens-need-lengths")
                         for f in ("mean_input_tokens", "mean_output_tokens") if f not in self.model_fields_set]
            if problems:
                return problems
        rate = self.batch_rate_per_s
        if not bounds.MIN_PEAK_REQUESTS_PER_S <= rate <= bounds.MAX_PEAK_REQUESTS_PER_S:
            volume = "requests_per_day" if self.batch.requests_per_day is not None else "tokens_per_day"
            problems.append(FieldProblem(("batch", volume), f"the batch's work over its deadline is {rate:.3g} "
                                         f"requests/s, outside {bounds.MIN_PEAK_REQUESTS_PER_S:g}-"
                                         f"{bounds.MAX_PEAK_REQUESTS_PER_S:,g}; change batch.{volume} or "
                                         "batch.deadline_hours", rule="batch-or-peak"))
        return problems

    @property
    def batch_requests_per_day(self) -> float | None:
        """A batch's requests a day (None: interactive traffic)."""
        if self.batch is None:
            return None
        return self.batch.requests(mean_input_tokens=self.mean_input_tokens,
                                   mean_output_tokens=self.mean_output_tokens)

    @property
    def batch_rate_per_s(self) -> float:
        """A batch's day of work over its deadline, requests/s (the rate it is first planned at)."""
        return self.batch_requests_per_day / (self.batch.deadline_hours * 3600)  # type: ignore[operator,union-attr]


def _model_spec_rules(schema: dict) -> None:
    """The ModelSpec rules a JSON Schema states: model-id-or-architecture, measured-latency-pair,
    quantization-precision (task-of-catalog-model is listed, not stated: ten `if`/`then`s over the catalog's ids make
    the schema too slow for generators and editors alike)."""
    schema["allOf"] = [
        {"anyOf": [given({"id": "string"}), given({"architecture": "object", "name": "string", "task": "string"})]},
        {"anyOf": [absent_or_null("measured_latency_ms", "measured_instance_type"),
                   given({"measured_latency_ms": "number", "measured_instance_type": "string"})]},
        *[when(is_const("quantization", q.value),
               {"required": ["precision"], "properties": {"precision": {"enum": [p.value for p in q.precisions]}}})
          for q in Quantization],
    ]


class ModelSpec(Section):
    """One model to serve: a catalog `id`, or an explicit `architecture` (then `name` is required)."""

    model_config = ConfigDict(json_schema_extra=_model_spec_rules)

    id: ModelId | None = Field(default=None,
                               description="catalog id, e.g. `llama-3.1-8b` (see blueprints/catalog/models.yaml)")
    name: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=40,
                             description="served model name; defaults to `id`")
    architecture: Architecture | None = Field(default=None, description="explicit shape for a model not in the catalog")
    task: Task | None = Field(default=None, description="defaults to the catalog's task for `id`")
    format: ModelFormat = Field(default=ModelFormat.SAFETENSORS, description="on-disk weights format")
    precision: Precision = Field(default=Precision.BF16, description="precision the weights are served at")
    quantization: Quantization | None = Field(
        default=None, description="how a quantised checkpoint was made: `awq` (int4), `gptq` (int4 or int8), `fp8`, "
        "`w8a8` (int8 weights and activations). Default: the one `precision` implies (int4 -> awq, int8 -> gptq, "
        "fp8 -> fp8); none for 16/32-bit")
    weights_uri: str = Field(pattern=WEIGHTS_URI, max_length=MAX_WEIGHTS_URI_CHARS,
                             description="`s3://bucket/prefix/` or `hf://org/name`; on an edge cluster also an "
                             "`https://` URL of the model file (then `sha256` is required)")
    sha256: str | None = Field(default=None, pattern=SHA256_HEX, description="`https://` sources only: the SHA-256 "
                               "of the file (64 lowercase hex digits); the download is refused when it differs")
    weights_kms_key_arn: str | None = Field(
        default=None, pattern=KMS_KEY_ARN, description="`s3://` sources encrypted with a customer-managed KMS key: "
        "its key ARN (not an alias), so the copy into the stack's model store may decrypt them. Default: none (SSE-S3 "
        "or the AWS-managed key of the source's own account)")
    max_context_tokens: int | None = Field(default=None, ge=bounds.MIN_CONTEXT_TOKENS, le=bounds.MAX_TOKENS,
                                           description="longest prompt + output to serve; defaults to min(model "
                                           "limit, 8192) for text generation")
    traffic: Traffic | None = Field(default=None, description="this model's own load (multi-model estates, `models:`)")
    measured_latency_ms: float | None = Field(
        default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS, description="non-generative models: latency of ONE request (batch 1, mean input) you "
        "measured on `measured_instance_type` using all its GPU / vCPUs, ms. When set, sizing derives the compute per "
        "request from it instead of the catalog's FLOPs estimate")
    measured_instance_type: InstanceTypeName | None = Field(
        default=None, description="the EC2 type `measured_latency_ms` was measured on, e.g. `c7i.xlarge`, `g5.xlarge`")
    adapters: list[LoraAdapter] | None = Field(
        default=None, min_length=1, max_length=bounds.MAX_LORA_ADAPTERS, description="text generation on vLLM: LoRA adapters served beside the base model by the same "
        "replicas, each picked by its `name` in a request's OpenAI `model` field (blueprints/requirements/adapters.py)")

    @model_validator(mode="after")
    def _id_or_architecture(self) -> ModelSpec:
        problems = []
        if self.id is None and self.architecture is None:
            problems.append(FieldProblem("id", "give a catalog `id` or an explicit `architecture`",
                                         rule="model-id-or-architecture"))
        elif self.id is None:
            problems += [FieldProblem(f, "a model given by `architecture` also needs `name` and `task`",
                                      rule="model-id-or-architecture") for f in ("name", "task")
                         if getattr(self, f) is None]
        if self.quantization is not None and self.precision not in self.quantization.precisions:
            allowed = ", ".join(p.value for p in self.quantization.precisions)
            problems.append(FieldProblem("quantization", f"quantization `{self.quantization.value}` comes with "
                                         f"precision {allowed}, not `{self.precision.value}`; set precision to "
                                         f"{allowed} or drop quantization", rule="quantization-precision"))
        https = self.weights_uri.startswith("https://")
        if https and self.sha256 is None:
            problems.append(FieldProblem("sha256", "an https:// weights_uri needs `sha256` (the file's SHA-256, e.g. "
                                         "from `sha256sum model.onnx`): without it a changed or tampered file would "
                                         "be served", rule="https-needs-sha256"))
        if self.sha256 is not None and not https:
            problems.append(FieldProblem("sha256", "`sha256` checks an https:// download; s3:// and hf:// sources are "
                                         "read with an identity, not a checksum: remove it", rule="https-needs-sha256"))
        if self.weights_kms_key_arn is not None and not self.weights_uri.startswith("s3://"):
            problems.append(FieldProblem("weights_kms_key_arn", "weights_kms_key_arn applies to an s3:// weights_uri: "
                                         "remove it", rule="source-key-s3-only"))
        if (self.measured_latency_ms is None) != (self.measured_instance_type is None):
            missing = "measured_instance_type" if self.measured_instance_type is None else "measured_latency_ms"
            problems.append(FieldProblem(missing, "give `measured_latency_ms` and `measured_instance_type` together "
                                         "(the latency is only meaningful on the hardware it was measured on)",
                                         rule="measured-latency-pair"))
        if self.id is not None and self.task is not None and self.task is not load_catalog().model(self.id).task:
            problems.append(FieldProblem("task", f"{self.id} is a {load_catalog().model(self.id).task.value} model "
                                         f"in the catalog, not {self.task.value}; drop `task` or give an "
                                         "`architecture` and `name` for another model", rule="task-of-catalog-model"))
        if self.adapters:
            record = load_catalog().models.get(self.id) if self.id else None
            problems += adapter_problems(self.adapters, base_name=self.served_name,
                                         task=self.task or (record.task if record else None),
                                         architecture=self.architecture or (record.architecture if record else None))
        raise_problems(problems)
        return self

    @property
    def served_name(self) -> str:
        return self.name or _dns_label(self.id or "model")

    @property
    def quantization_method(self) -> Quantization | None:
        """`quantization`, or the method `precision` implies (None for 16/32-bit weights)."""
        return self.quantization or DEFAULT_QUANTIZATION.get(self.precision)


def _dns_label(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40]


#: Longest end-to-end budget a compound service may set, ms: 10 minutes, well past any interactive answer
#: (a SageMaker real-time invocation stops at 60 s) [assumption: a bound against typos, not a platform limit].
MAX_PIPELINE_LATENCY_MS = 600_000


class Slo(Section):
    """Latency and availability targets. Generative models use TTFT/ITL; others use request latency."""

    ttft_p95_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                      description="time to first token, p95, ms")
    itl_p95_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                     description="inter-token latency, p95, ms")
    ttft_p99_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                      description="time to first token, p99, ms (text generation; optional): each "
                                      "replica is sized so the simulated p99 stays within it too, it is predicted "
                                      "in the plan and alerted on; at least ttft_p95_ms")
    itl_p99_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                     description="inter-token latency, p99, ms (text generation; optional): sized, "
                                     "predicted and alerted on as ttft_p99_ms; at least itl_p95_ms")
    latency_p95_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                         description="request latency p95, ms (non-generative)")
    latency_p99_ms: float | None = Field(default=None, ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                                         description="request latency p99, ms (non-generative)")
    availability_pct: float = Field(default=99.5, ge=90, lt=100, description="monthly availability target, %")
    attainment_pct: float | None = Field(default=None, ge=50, le=100, description="share of a simulated planned "
                                         "day's minutes within every latency target (the p95s, and ttft_p99_ms / "
                                         "itl_p99_ms when set), %: the plan keeps replicas warm "
                                         "(minimum replicas) until the day meets it, and refuses when even the peak's "
                                         "replicas kept warm cannot; default 99 in production, 95 elsewhere "
                                         "(defaults.SLO_ATTAINMENT_PCT)")
    longest_violation_minutes: int | None = Field(default=None, ge=0, le=1440, description="the longest run of "
                                                  "minutes over a latency target the simulated day may have (none: not "
                                                  "limited); 0 needs replicas warm for every burst")
    pipeline_latency_p95_ms: float | None = Field(
        default=None, gt=0, le=MAX_PIPELINE_LATENCY_MS, description="compound services only (a generator and "
        "retrieval models in `models:`): end-to-end p95 budget, ms, from the request to the answer's first token "
        "(streamed) or its last (not streamed), composed from the parts' p95s (blueprints/plan/compound/latency.py); the plan "
        "tightens the parts' own targets to meet it or refuses")

    @model_validator(mode="after")
    def _p99_not_below_p95(self) -> Slo:
        for stat in ("latency", "ttft", "itl"):
            p95, p99 = getattr(self, f"{stat}_p95_ms"), getattr(self, f"{stat}_p99_ms")
            if p95 and p99 and p99 < p95:
                raise FieldProblem(f"{stat}_p99_ms", f"{stat}_p99_ms ({p99:g}) must be >= {stat}_p95_ms ({p95:g}): a "
                                   f"99th percentile is never below the 95th; raise {stat}_p99_ms or lower "
                                   f"{stat}_p95_ms", rule="latency-p99-not-below-p95")
        return self


def context_tokens(spec: ModelSpec) -> tuple[int, int]:
    """(the context a model is served with, the model's own limit), tokens: `max_context_tokens`, else the smaller of
    the catalog's limit and `defaults.DEFAULT_MAX_MODEL_LEN`; a model outside the catalog is limited by what is
    asked for (the default when nothing is)."""
    from blueprints.core.defaults import DEFAULT_MAX_MODEL_LEN

    record = load_catalog().models.get(spec.id) if spec.id else None
    limit = record.max_context_tokens if record else (spec.max_context_tokens or DEFAULT_MAX_MODEL_LEN)
    return spec.max_context_tokens or min(limit, DEFAULT_MAX_MODEL_LEN), limit
