"""The requirements file (`stacks/requirements/<service>.yaml`): the top-level `Requirements` with its
cross-field checks, its loader, and its JSON Schema.

The sections are `blueprints.requirements.model` (model, traffic, slo), `blueprints.requirements.hosting`
(hardware, operations, compliance), `blueprints.requirements.exposure` and `blueprints.requirements.environments`
(environments, budget), built from `blueprints.requirements.fields`. Every section is closed (`extra="forbid"`): a
misspelt key is an error, never silently ignored. `blueprint schema` prints this schema as JSON Schema for editors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, ConfigDict, Field, ValidationError, model_validator

from blueprints.catalog.engines import engine_facts
from blueprints.core import bounds
from blueprints.catalog import Task, load_catalog
from blueprints.core.errors import (
    FieldProblem, RequirementsError, field_path, format_validation_error, raise_problems, read_text_file,
)
from blueprints.core.yamlio import load_yaml
from blueprints.requirements.cluster_exposure import ExposureProblem, resolve_exposure
from blueprints.requirements.edge import edge_problems
from blueprints.requirements.rules import CROSS_FIELD_RULES
from blueprints.requirements.environments import ALWAYS_ON_DEMAND, Budget, Environment, EnvironmentName
from blueprints.requirements.exposure import Exposure, ExposureScope
from blueprints.requirements.fields import DNS_1123_LABEL, Section, TAG_VALUE, given, is_const, when
from blueprints.requirements.model import Batch, ModelSpec, Slo, Traffic, TrafficPattern, context_tokens
from blueprints.requirements.hosting import ALL_ENGINES, Compliance, Hardware, Operations, OperationsPreference
from blueprints.requirements.overrides import Override
from blueprints.requirements.choice import Choice


#: The service name platform stacks use (`platform-<env>-<region>`); no service may take it.
RESERVED_SERVICE = "platform"


def _not_reserved(value: str) -> str:
    if value == RESERVED_SERVICE:
        raise ValueError(f"{value!r} is reserved for platform stacks (platform-<env>-<region>); rename the service")
    return value


class _NotReserved:
    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict:
        return {**handler(core_schema), "not": {"const": RESERVED_SERVICE}}


class Requirements(Section):
    """A service's requirements: what to serve, at what load and latency, under which rules, where.

    Rules across fields that a JSON Schema cannot state are listed in `blueprints.requirements.rules`; each error names the
    field and carries the rule's id.
    """

    model_config = ConfigDict(json_schema_extra=lambda schema: _requirements_rules(schema))

    service: Annotated[str, AfterValidator(_not_reserved), _NotReserved()] = Field(
        pattern=DNS_1123_LABEL, max_length=40, description="DNS-1123 name of the service (not `platform`)")
    owner: str = Field(pattern=TAG_VALUE, max_length=256, description="owning team, tagged on every resource (a tag "
                       "value: up to 256 letters, digits, spaces and _.:/+-@)")
    cost_center: str = Field(pattern=TAG_VALUE, max_length=256, description="cost center, tagged on every resource "
                             "(a tag value)")
    model: ModelSpec | None = Field(default=None, description="the model (single-model services)")
    models: list[ModelSpec] | None = Field(default=None, min_length=1, max_length=bounds.MAX_MODELS,
                                           description="several models, each with traffic")
    traffic: Traffic | None = Field(default=None, description="load for `model`")
    slo: Slo = Field(default_factory=Slo)
    hardware: Hardware = Field(default_factory=Hardware)
    operations: Operations = Field(default_factory=Operations)
    compliance: Compliance = Field(default_factory=Compliance)
    exposure: Exposure = Field(default_factory=Exposure, description="who can reach the endpoint (internal by default)")
    budget: Budget = Field(default_factory=Budget)
    environments: dict[EnvironmentName, Environment] = Field(
        min_length=1, max_length=bounds.MAX_ENVIRONMENTS, description="environment name -> settings")
    overrides: list[Override] = Field(default_factory=list, max_length=20, description="intended deviations from "
                                      "derived settings of the plan, each with its reason (never compliance, "
                                      "exposure, retention, monitoring, production, namespace or images)")
    choice: Choice | None = Field(default=None, description="the finalist chosen by measurement, with its evidence, "
                                  "written by `blueprint choose` (not by hand); `blueprint plan` keeps it while its "
                                  "basis (model, workload, SLO targets) holds")

    @model_validator(mode="after")
    def _consistent(self) -> Requirements:
        raise_problems(self._model_problems() or [*self._catalog_problems(), *self._environment_problems(),
                                                  *self._cluster_problems(), *self._engine_problems(),
                                                  *self._batch_problems(), *self._choice_problems()])
        return self

    def _choice_problems(self) -> list[FieldProblem]:
        """The `choice` against this file: its environment is one of `environments`."""
        if self.choice is None or self.choice.environment in self.environments:
            return []
        return [FieldProblem(("choice", "environment"), f"{self.choice.environment!r} is not an environment of this "
                             f"file ({', '.join(self.environments)}): the finalists' fleets were sized at one of "
                             "its environments' planned peak; run `blueprint choose` again rather than editing the "
                             "choice", rule="choice-environment")]

    @property
    def batch(self) -> Batch | None:
        """The daily batch of a batch service (`traffic.batch` of its one model); None: interactive traffic."""
        return self.model_entries()[0][1].batch if self.model is not None else None

    def _batch_problems(self) -> list[FieldProblem]:
        """A batch service (`traffic.batch`): one text-generation model, no latency targets, its replicas planned
        from its work (no min/max_replicas)."""
        problems = [FieldProblem((*at, "batch"), "a batch goes with one `model` (a `models:` estate serves "
                                 "interactive traffic); plan the batch as its own service", rule="batch-service")
                    for _, traffic, _, at in self.model_entries() if self.models is not None and traffic.batch]
        if self.batch is None:
            return problems
        spec, _, _, at = self.model_entries()[0]
        record = load_catalog().models.get(spec.id) if spec.id else None
        task = spec.task or (record.task if record else None)
        if task is not None and not task.generative:
            problems.append(FieldProblem((*at, "batch"), f"a batch is planned for text generation; {spec.served_name} "
                                         f"is a {task.value} model: give it peak_requests_per_s instead",
                                         rule="batch-service"))
        problems += [FieldProblem(("slo", f), f"a batch service has no latency target (it finishes by "
                                  f"traffic.batch.deadline_hours); remove slo.{f}", rule="batch-service")
                     for f in ("ttft_p95_ms", "itl_p95_ms", "ttft_p99_ms", "itl_p99_ms", "latency_p95_ms",
                               "latency_p99_ms", "attainment_pct", "longest_violation_minutes",
                               "pipeline_latency_p95_ms") if getattr(self.slo, f) is not None]
        problems += [FieldProblem(("environments", env, f), f"a batch's replicas are planned from its day's work and "
                                  f"deadline, none outside its window; remove environments.{env}.{f}",
                                  rule="batch-service")
                     for env, e in self.environments.items() for f in ("min_replicas", "max_replicas")
                     if getattr(e, f) is not None]
        return problems

    def _engine_problems(self) -> list[FieldProblem]:
        """`operations.engines` can serve every generative model: at least one listed engine takes its quantisation
        method and its LoRA adapters (engines.yaml `features`)."""
        problems = []
        for spec, _, where, _ in self.model_entries():
            method = spec.quantization_method
            needs = [*([f"{method.value} checkpoints"] if method is not None else []),
                     *(["LoRA adapters"] if spec.adapters else [])]
            if not needs:
                continue
            able = [e for e in self.operations.engines if (method is None or method.value in
                                                            engine_facts(e).features.quantizations)
                    and (not spec.adapters or engine_facts(e).features.lora.supported)]
            if not able:
                serve = "; ".join(f"{engine_facts(e).display} serves "
                                  f"{', '.join(engine_facts(e).features.quantizations) or 'no quantised checkpoint'}"
                                  f"{' and LoRA adapters' if engine_facts(e).features.lora.supported else ''}"
                                  for e in ALL_ENGINES)
                problems.append(FieldProblem(("operations", "engines"), f"no engine of {self.operations.engines} "
                                             f"serves {spec.served_name}'s {' and '.join(needs)} ({serve}): add "
                                             "vllm to operations.engines", rule="engines-serve-model"))
        return problems

    def _model_problems(self) -> list[FieldProblem]:
        if (self.model is None) == (self.models is None):
            return [FieldProblem("model" if self.model is None else "models", "give exactly one of `model` (one model) "
                                 "or `models` (a list)", rule="model-or-models")]
        if self.models is not None and self.traffic is not None:
            return [FieldProblem("traffic", "top-level `traffic` goes with `model`; with `models`, give each entry its "
                                 "own `traffic`", rule="model-or-models")]
        if self.model is not None and self.traffic is None and self.model.traffic is None:
            return [FieldProblem("traffic", "`traffic` is required with `model` (top level or model.traffic)",
                                 rule="model-traffic")]
        problems = [FieldProblem(("models", i, "traffic"), "each entry of `models` needs its own `traffic`",
                                 rule="model-traffic") for i, m in enumerate(self.models or []) if m.traffic is None]
        names = [m.served_name for m in self.models or []]
        problems += [FieldProblem(("models", i, "name"), f"model name {name!r} is used by another entry too; served "
                                  "names are unique (set `name`)", rule="unique-model-names")
                     for i, name in enumerate(names) if names.count(name) > 1]
        return problems

    def _catalog_problems(self) -> list[FieldProblem]:
        """Each model against the catalog: its context limit and the requests its context must hold."""
        problems = []
        for spec, traffic, where, traffic_at in self.model_entries():
            record = load_catalog().models.get(spec.id) if spec.id else None
            task = spec.task or (record.task if record else None)
            wanted, limit = context_tokens(spec)
            if wanted > limit:
                problems.append(FieldProblem((*where, "max_context_tokens"), f"max_context_tokens={wanted} exceeds "
                                             f"{spec.id}'s limit of {limit} tokens; lower it to <= {limit}",
                                             rule="context-within-model"))
                continue
            given_p95 = [f for f in ("input_tokens_p95", "output_tokens_p95") if getattr(traffic, f) is not None]
            no_flops = record is None or spec.architecture is not None or record.gflops_per_request is None
            if task in (Task.VISION, Task.SPEECH_RECOGNITION) and no_flops and spec.measured_latency_ms is None:
                problems.append(FieldProblem((*where, "measured_latency_ms"), f"{spec.served_name} is a {task.value} "
                                             "model without a FLOPs figure in the catalog; set measured_latency_ms and "
                                             "measured_instance_type", rule="vision-needs-measurement"))
            if task is not None and task.autoregressive and not task.generative \
                    and traffic.mean_output_tokens > wanted:
                problems.append(FieldProblem((*traffic_at, "mean_output_tokens"), f"{traffic.mean_output_tokens} "
                                             f"exceeds the decoder's max_context_tokens={wanted}: a {task.value} "
                                             f"request (one 30 s window) decodes at most {wanted} tokens; set it to "
                                             "the tokens one window transcribes (e.g. 120)",
                                             rule="context-holds-requests"))
            if task is not None and not task.generative:
                problems += [FieldProblem((*traffic_at, f), f"{f} applies to text generation; "
                                          f"{spec.served_name} is a {task.value} model: remove it",
                                          rule="p95-lengths-text-generation") for f in given_p95]
                continue
            mean = traffic.mean_input_tokens + traffic.mean_output_tokens
            p95 = (traffic.input_tokens_p95 or traffic.mean_input_tokens) + \
                (traffic.output_tokens_p95 or traffic.mean_output_tokens)
            if mean > wanted:
                problems.append(FieldProblem((*where, "max_context_tokens"), f"the mean request (mean_input_tokens + "
                                             f"mean_output_tokens = {mean}) exceeds max_context_tokens={wanted}, so "
                                             f"it would be rejected; raise max_context_tokens (<= {limit}) or shorten "
                                             "requests", rule="context-holds-requests"))
            elif given_p95 and p95 > wanted:
                problems.append(FieldProblem((*where, "max_context_tokens"), f"a p95 request (input_tokens_p95 + "
                                             f"output_tokens_p95, or the mean where no p95 is given = {p95}) exceeds "
                                             f"max_context_tokens={wanted}, so one request in twenty would not fit; "
                                             f"raise max_context_tokens (<= {limit}) or lower the p95s",
                                             rule="context-holds-requests"))
        return problems

    def _environment_problems(self) -> list[FieldProblem]:
        problems = []
        allowed = set(self.compliance.regions_allowed)
        cert_region = self.exposure.certificate_region
        public = self.exposure.scope is ExposureScope.PUBLIC
        if self.compliance.private_only and public:
            problems.append(FieldProblem(("exposure", "scope"), "exposure.scope public contradicts "
                                         "compliance.private_only: a private-only service has no internet-facing "
                                         "endpoint; use exposure.scope: internal (or drop private_only)",
                                         rule="private-not-public"))
        for i, override in enumerate(self.overrides):
            problems += [FieldProblem(("overrides", i, "environments"), f"{env!r} is not an environment of this "
                                      f"file ({', '.join(self.environments)})", rule="override-applies")
                         for env in override.environments if env not in self.environments]
        for env, spec in self.environments.items():
            at = ("environments", env)
            if allowed and spec.region not in allowed:
                problems.append(FieldProblem((*at, "region"), f"{spec.region!r} is not in compliance.regions_allowed "
                                             f"{sorted(allowed)}; pick an allowed region or widen the list",
                                             rule="region-allowed"))
            if cert_region is not None and spec.region != cert_region:
                problems.append(FieldProblem((*at, "region"), f"exposure.tls_certificate_arn is an ACM certificate in "
                                             f"{cert_region} but this environment is in {spec.region}: ACM "
                                             "certificates are regional and a load balancer uses one of its own "
                                             f"region; request (or import) the certificate in {spec.region}, or give "
                                             "that environment its own requirements file", rule="certificate-region"))
            if self.is_production(env) and spec.spot:
                problems.append(FieldProblem((*at, "spot"), "spot capacity is not allowed in production; set spot: "
                                             "false", rule="production-on-demand"))
            declared = self.operations.declared_addons
            if self.is_production(env) and declared is not None and "kube-prometheus-stack" not in declared:
                problems.append(FieldProblem(("operations", "cluster_addons"), f"environments.{env} is production: "
                                             "its stack renders its ServiceMonitor, alerts and dashboard, so the "
                                             "cluster declares kube-prometheus-stack (whose Alertmanager pages its "
                                             "owner); add it, or keep this service out of production",
                                             rule="production-monitored"))
            bursts = sorted({t.pattern.value for _, t, _, _ in self.model_entries()
                             if t.pattern in (TrafficPattern.BURSTY, TrafficPattern.SPIKY)})
            if self.slo.longest_violation_minutes == 0 and bursts and spec.min_replicas == 0:
                problems.append(FieldProblem(("slo", "longest_violation_minutes"), f"0 with {' and '.join(bursts)} "
                                             "traffic and "
                                             f"environments.{env}.min_replicas 0: a request after an idle period "
                                             "waits for a cold start, which misses a minute; set "
                                             f"environments.{env}.min_replicas >= 1 or "
                                             "slo.longest_violation_minutes >= 1",
                                             rule="longest-violation-scale-to-zero"))
            if self.is_production(env) and spec.min_replicas == 0:
                problems.append(FieldProblem((*at, "min_replicas"), "production never scales to zero; set "
                                             "min_replicas >= 1", rule="production-always-on"))
            elif public and spec.min_replicas == 0:
                problems.append(FieldProblem((*at, "min_replicas"), "min_replicas 0 with exposure.scope public: a "
                                             "service that scales to zero has no load balancer (clients reach it "
                                             "through the in-cluster KEDA interceptor); set min_replicas >= 1 or use "
                                             "exposure.scope: internal", rule="public-always-on"))
            for spec_m, traffic, _, _ in self.model_entries():
                peak = traffic.peak_requests_per_s * spec.traffic_scale
                if not bounds.MIN_PEAK_REQUESTS_PER_S <= peak <= bounds.MAX_PEAK_REQUESTS_PER_S:
                    problems.append(FieldProblem((*at, "traffic_scale"), f"{spec_m.served_name}'s peak here is "
                                                 f"{traffic.peak_requests_per_s:g} x {spec.traffic_scale:g} = {peak:g} "
                                                 f"requests/s, outside {bounds.MIN_PEAK_REQUESTS_PER_S:g}-"
                                                 f"{bounds.MAX_PEAK_REQUESTS_PER_S:,g}; change traffic_scale or "
                                                 "the peak", rule="environment-peak-rate"))
                    break
        return problems

    def is_production(self, env: str) -> bool:
        flag = self.environments[env].production
        return flag if flag is not None else env.startswith("prod")

    def served_models(self) -> list[tuple[ModelSpec, Traffic]]:
        """Each model with its traffic (the top-level `traffic` for a single `model`)."""
        return [(spec, traffic) for spec, traffic, _, _ in self.model_entries()]

    def _cluster_problems(self) -> list[FieldProblem]:
        """The edge-cluster settings (`blueprints.requirements.edge.edge_problems`) and the exposure against the cluster's declared
        add-ons (`blueprints.requirements.cluster_exposure.resolve_exposure`)."""

        problems = edge_problems(self)
        if self.operations.preference is not OperationsPreference.MANAGED:
            try:
                resolve_exposure(self.operations, self.exposure)
            except ExposureProblem as exc:
                problems.append(FieldProblem(exc.field, str(exc), rule="exposure-implemented"))
        return problems

    def model_entries(self) -> list[tuple[ModelSpec, Traffic, tuple, tuple]]:
        """Each model with its traffic and where both are in the file: (spec, traffic, the model's location, the
        traffic's location), locations as field paths (`("models", 1)`, `("models", 1, "traffic")`)."""
        if self.model is not None:
            traffic_at = ("model", "traffic") if self.model.traffic is not None else ("traffic",)
            return [(self.model, self.model.traffic or self.traffic, ("model",), traffic_at)]  # type: ignore[list-item]
        return [(m, m.traffic, ("models", i), ("models", i, "traffic"))  # type: ignore[misc]
                for i, m in enumerate(self.models or [])]

    def model_path(self, index: int) -> str:
        """The field path of the `index`-th served model as messages name it: `model`, or `models[1] (reranker)`."""
        if self.model is not None:
            return "model"
        return field_path(("models", index), {"models": [{"name": m.served_name} for m in self.models or []]})


def _requirements_rules(schema: dict) -> None:
    """The Requirements rules a JSON Schema states: model-or-models, model-traffic, private-not-public,
    production-on-demand and production-always-on for environments named `prod...`, public-always-on."""
    # Exactly one of the two: they exclude each other (`anyOf` states it as well as `oneOf`, and generators handle it
    # in a fraction of the time).
    schema["anyOf"] = [
        {"required": ["model"], "properties": {"model": {"type": "object"}, "models": {"type": "null"}},
         "anyOf": [given({"traffic": "object"}), {"properties": {"model": given({"traffic": "object"})}}]},
        {"required": ["models"], "properties": {"models": {"type": "array", "items": given({"traffic": "object"})},
                                                 "model": {"type": "null"}, "traffic": {"type": "null"}}},
    ]
    schema["allOf"] = [
        when({"required": ["compliance"], "properties": {"compliance": is_const("private_only", True)}},
             {"properties": {"exposure": {"properties": {"scope": {"not": {"const": "public"}}}}}}),
        {"properties": {"environments": {"patternProperties": {  # a name starting with prod is production by default
            "^prod": when({"not": {"properties": {"production": {"const": False}}, "required": ["production"]}},
                          ALWAYS_ON_DEMAND)}}}},
        when({"required": ["exposure"], "properties": {"exposure": is_const("scope", "public")}},
             {"properties": {"environments": {"patternProperties": {
                 "": {"properties": {"min_replicas": {"not": {"const": 0}}}}}}}}),
    ]


def load_requirements(path: Path) -> Requirements:
    """Read and validate a requirements file.

    Args:
        path: a YAML file in the shape of `Requirements`.

    Returns:
        The validated `Requirements`.

    Raises:
        RequirementsError: the file is missing, is not YAML, is not a mapping, or breaks the schema; the message
            names the file and each bad field.
    """
    text = read_text_file(path, RequirementsError, "requirements file")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RequirementsError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise RequirementsError(f"{path}: expected a mapping with `service`, `model`, `traffic`, ... at the top level, "
                                f"got {type(data).__name__}")
    try:
        return Requirements.model_validate(data)
    except ValidationError as exc:
        raise RequirementsError(format_validation_error(exc, source=path, data=data, model=Requirements)) from None


def requirements_json_schema() -> dict:
    """The requirements schema as JSON Schema (draft 2020-12), for editors and `blueprint schema`.

    It accepts what `load_requirements` accepts, except the rules it cannot state, which it lists under
    `x-cross-field-rules` (`blueprints.requirements.rules`): a document valid against it plans, or fails naming one of them.
    Catalog names (model ids, instance types, regions, add-ons, Kubernetes versions) are `enum`s of this version's
    catalog. Patterns are ECMA-262 as editors apply them: `$` ends the value (no trailing newline).
    """

    schema = Requirements.model_json_schema()
    _close_pattern_properties(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "serving blueprints requirements file"
    schema["description"] = (f"{Requirements.__doc__.split(chr(10))[0]} Besides this schema, a file follows the "
                             "cross-field rules in x-cross-field-rules (checked by `blueprint plan`, which names the "
                             "field and the rule).")
    schema["x-cross-field-rules"] = dict(CROSS_FIELD_RULES)
    return schema


def _close_pattern_properties(node: object) -> None:
    """A mapping whose keys must match a pattern (`environments`) accepts no other key: pydantic writes
    `patternProperties` without `additionalProperties: false`, which lets any other name through."""
    if isinstance(node, dict):
        patterns = node.get("patternProperties")
        if patterns and node.get("type") == "object" and "additionalProperties" not in node:  # not the rules' parts
            node["additionalProperties"] = False
            if len(patterns) == 1:  # the key pattern holds for every name, also beside the rules' patterns
                node.setdefault("propertyNames", {})["pattern"] = next(iter(patterns))
        for value in node.values():
            _close_pattern_properties(value)
    elif isinstance(node, list):
        for value in node:
            _close_pattern_properties(value)
