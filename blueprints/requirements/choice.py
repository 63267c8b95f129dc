"""`choice`: the finalist a service's team chose by measurement (`blueprint choose`), with its evidence.

Written by `blueprint choose <service> RESULT...` into the requirements file, never by hand: the candidate (archetype,
engine, instance type, tensor parallel degree, KV-cache dtype, precision), the date, what the evidence was measured on
(`basis`: the model, the workload's lengths and prefix, the SLO targets), and per finalist each result file with its
sha256 and the figures measured. `blueprint plan` keeps the candidate while the requirements still match `basis`
(`blueprints.plan.choice`); a change of the model or the workload, or a tightened SLO target, re-opens the choice.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import Field, model_validator

from blueprints.catalog import load_catalog
from blueprints.catalog.engines import EngineName
from blueprints.core import bounds
from blueprints.core.errors import FieldProblem, describe_pattern
from blueprints.requirements.fields import DNS_1123_LABEL, SHA256_HEX, InstanceTypeName, Section
from blueprints.requirements.model import Precision
from blueprints.requirements.reuse import Sessions

#: Most finalists a choice compares (`blueprint pilot --finalists` deploys at most 5).
MAX_CHOICE_FINALISTS = 5
#: Most result files per finalist a choice records.
MAX_CHOICE_RESULTS = 10
#: A project-relative POSIX path: segments of letters, digits and `_.-`, none starting with a dot (no `..`, not
#: absolute).
RELATIVE_PATH = describe_pattern(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$", "a project-relative "
                                 "path such as benchmarks/results/<stack>/<date>.json: names of letters, digits and "
                                 "_.- joined by /, none starting with a dot (no .., not absolute, no backslash)")
#: Largest measured rate, cost or latency a choice records (the result files' own bounds).
MAX_FIGURE = 1e9

_Figure = Annotated[float, Field(ge=0, le=MAX_FIGURE)]


class ChosenCandidate(Section):
    """One finalist's serving candidate, as `blueprint pilot` planned it."""

    archetype: Literal["vllm-gpu", "sagemaker-endpoint"] = Field(description="the archetype it runs")
    engine: EngineName | None = Field(default=None, description="the self-hosted serving engine (vllm, sglang, "
                                      "tensorrt-llm); null on SageMaker (its LMI container)")
    instance_type: InstanceTypeName = Field(max_length=40, description="EC2 (or SageMaker `ml.`) instance type of "
                                            "the catalog")
    tensor_parallel_size: int = Field(ge=1, le=64, description="GPUs per replica")
    kv_cache_dtype: Literal["auto", "fp8"] | None = Field(default=None, description="vLLM's --kv-cache-dtype; null "
                                                          "on SageMaker")
    precision: Precision = Field(description="the precision the weights were served at")

    @model_validator(mode="after")
    def _fits_instance(self) -> ChosenCandidate:
        gpus = load_catalog().instance(self.instance_type).gpu_count
        if self.tensor_parallel_size > gpus:
            raise FieldProblem("tensor_parallel_size", f"tensor_parallel_size={self.tensor_parallel_size} is more "
                               f"than the {gpus} GPU(s) of {self.instance_type}: a replica runs on one instance; "
                               f"the candidate is what `blueprint pilot` planned, so run `blueprint choose` again "
                               f"rather than editing it (or set tensor_parallel_size <= {gpus})",
                               rule="choice-candidate-fits")
        return self

    def words(self) -> str:
        """e.g. `vllm-gpu on g6e.xlarge (vllm, tensor_parallel_size=1, KV cache auto, bf16)`."""
        kv = f", KV cache {self.kv_cache_dtype}" if self.kv_cache_dtype else ""
        return (f"{self.archetype} on {self.instance_type} ({self.engine or 'LMI'}, tensor_parallel_size="
                f"{self.tensor_parallel_size}{kv}, {self.precision.value})")


    def short(self) -> str:
        """e.g. `g6e.xlarge vllm tp1 kv-fp8` (a table cell)."""
        kv = f" kv-{self.kv_cache_dtype}" if self.kv_cache_dtype else ""
        return f"{self.instance_type} {self.engine or 'sagemaker-lmi'} tp{self.tensor_parallel_size}{kv}"


class ChoiceBasis(Section):
    """What the evidence was measured on: a requirements change away from it re-opens the choice."""

    model: str = Field(min_length=1, max_length=200, description="the model's catalog id (or served name)")
    mean_input_tokens: int = Field(ge=1, le=bounds.MAX_TOKENS, description="traffic.mean_input_tokens measured")
    mean_output_tokens: int = Field(ge=1, le=bounds.MAX_TOKENS, description="traffic.mean_output_tokens measured")
    shared_prefix_tokens: int | None = Field(default=None, ge=1, le=bounds.MAX_TOKENS,
                                             description="traffic.shared_prefix_tokens measured")
    sessions: Sessions | None = Field(default=None, description="traffic.sessions measured")
    ttft_p95_ms: float = Field(ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                               description="slo.ttft_p95_ms the goodput was counted against")
    itl_p95_ms: float = Field(ge=bounds.MIN_LATENCY_MS, le=bounds.MAX_LATENCY_MS,
                              description="slo.itl_p95_ms the goodput was counted against")


class ResultEvidence(Section):
    """One result file a finalist was measured by."""

    file: str = Field(max_length=300, pattern=RELATIVE_PATH, description="project-relative path of "
                      "benchmarks/results/<stack>/<date>.json")
    sha256: str = Field(pattern=SHA256_HEX, description="the result file's SHA-256 when chosen, 64 lowercase hex "
                        "digits, as `blueprint choose` writes it")
    date: dt.date = Field(description="the benchmark's date (the file's `date`)")


class LatencyPercentiles(Section):
    """p50/p95/p99 of one latency, ms, at the run nearest the planned load per replica."""

    p50: _Figure | None = None
    p95: _Figure | None = None
    p99: _Figure | None = None


class MeasuredFinalist(Section):
    """One finalist's figures, as `blueprint choose` measured them from its result files."""

    stack: str = Field(max_length=80, pattern=DNS_1123_LABEL,
                       description="its pilot stack, `<service>-pilot-<k>`")
    candidate: ChosenCandidate
    verdict: Literal["chosen", "meets-slo", "misses-slo", "failed"] = Field(
        description="chosen: the cheapest meeting the SLO; meets-slo: met it at a higher cost; misses-slo: no "
        "measured rate met the p95 targets; failed: more than 1 % of a run's requests failed (not chosen)")
    results: list[ResultEvidence] = Field(min_length=1, max_length=MAX_CHOICE_RESULTS)
    goodput_rps_per_replica: _Figure | None = Field(default=None, description="the highest measured request "
                                                    "rate whose TTFT and ITL p95 met the SLO, requests/s")
    replicas_at_peak: int | None = Field(default=None, ge=1, le=bounds.MAX_REPLICAS,
                                         description="replicas that goodput implies at the planned peak")
    monthly_usd: _Figure | None = Field(default=None, description="that fleet's monthly cost, USD")
    usd_per_1k_requests: _Figure | None = None
    usd_per_million_input_tokens: _Figure | None = None
    usd_per_million_output_tokens: _Figure | None = None
    usd_per_million_tokens: _Figure | None = None
    ttft_ms: LatencyPercentiles | None = Field(default=None, description="at the planned load per replica")
    itl_ms: LatencyPercentiles | None = Field(default=None, description="at the planned load per replica")
    failed_pct: float = Field(ge=0, le=100, description="the largest share of a run's requests that failed, %")
    cold_start_s: _Figure | None = Field(default=None, description="the measured pod's cold start, s")
    calibration: str | None = Field(default=None, max_length=300, pattern=RELATIVE_PATH,
                                    description="the calibration written from its runs (vLLM finalists)")


class Choice(Section):
    """The finalist chosen by measurement, and the evidence (`blueprint choose`; not written by hand)."""

    decided: dt.date = Field(description="the day `blueprint choose` chose")
    environment: str = Field(pattern=DNS_1123_LABEL, max_length=63, description="the production environment whose "
                             "planned peak sized each finalist's fleet")
    candidate: ChosenCandidate = Field(description="what `blueprint plan` keeps while `basis` holds")
    basis: ChoiceBasis
    finalists: list[MeasuredFinalist] = Field(min_length=2, max_length=MAX_CHOICE_FINALISTS)

    @model_validator(mode="after")
    def _one_chosen(self) -> Choice:
        # Dates no clock has reached yet measured nothing: a day's slack for the writer's time zone.
        latest = dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=1)
        if self.decided > latest:
            raise FieldProblem("decided", f"decided={self.decided} is in the future: `blueprint choose` writes the day "
                               "it chose; run it again rather than editing the choice", rule="choice-dates")
        for i, finalist in enumerate(self.finalists):
            for j, result in enumerate(finalist.results):
                if result.date > self.decided:
                    raise FieldProblem(("finalists", i, "results", j, "date"), f"date={result.date} is after the "
                                       f"choice (decided={self.decided}): a result measured later is not its evidence; "
                                       "run `blueprint choose` again with the results", rule="choice-dates")
        chosen = [f for f in self.finalists if f.verdict == "chosen"]
        if len(chosen) != 1 or chosen[0].candidate != self.candidate:
            raise FieldProblem("finalists", "exactly one has verdict `chosen`, and its candidate is `candidate`; "
                               "run `blueprint choose` again rather than editing the choice", rule="choice-one-chosen")
        return self


def choice_yaml(choice: Choice) -> str:
    """The top-level `choice:` block as YAML text (block style, the model's field order), ending with a newline."""
    import yaml

    return yaml.safe_dump({"choice": choice.model_dump(mode="json", exclude_none=True)}, sort_keys=False,
                          default_flow_style=False, width=120, allow_unicode=True)


def with_choice(text: str, choice: Choice) -> str:
    """A requirements file's text with its top-level `choice:` block replaced by `choice` (or appended), every other
    byte kept: the block runs from its `choice:` line to the next line that starts a top-level key or document
    marker (comments and blank lines before that key stay with it)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("choice:")), None)
    block = choice_yaml(choice)
    if start is None:
        sep = "" if not text or text.endswith("\n") else "\n"
        return text + sep + block
    end = start + 1
    while end < len(lines) and (lines[end][:1] in (" ", "\t", "\n", "\r", "#", "-") and not lines[end].startswith("---")
                                or lines[end].strip() == ""):
        end += 1
    while end > start + 1 and (lines[end - 1].strip() == "" or lines[end - 1].startswith("#")):
        end -= 1  # trailing blank lines and top-level comments belong to what follows
    return "".join(lines[:start]) + block + "".join(lines[end:])
