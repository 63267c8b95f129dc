"""Compound services: a generator LLM and retrieval models in one requirements file plan one stack per part on one
platform, with an end-to-end budget over both and one review (the bundled `rag-assistant.yaml`)."""

from __future__ import annotations

import math
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.contracts.sections import Archetype, PipelinePart
from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.core.errors import RequirementsError, SizingError
from blueprints.plan.planner import plan
from blueprints.requirements.service import Requirements
from tests.conftest import EXAMPLES, PLAN_DATE, ROOT, example_data, platforms_for

runner = CliRunner()
RAG = EXAMPLES / "rag-assistant.yaml"


def rag(**changes) -> Requirements:
    """The bundled RAG example with top-level sections replaced or merged one level deep."""
    data = example_data("rag-assistant")
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and isinstance(data.get(key), dict) else value
    return Requirements.model_validate(data)


def plan_rag(req: Requirements, env: str = "prod"):
    return plan(req, load_catalog(), as_of=PLAN_DATE, environments=[env], platforms=platforms_for(req))


@pytest.fixture(scope="module")
def planned():
    """The bundled example planned in its project, as `blueprint plan` does (policy guardrails included)."""
    from blueprints.workspace import plan_requirements_file

    return plan_requirements_file(RAG, as_of=PLAN_DATE, policy_dir=ROOT / "policies" / "config")


@pytest.fixture(scope="module")
def prod(planned):
    generator, retrieval = [bp for bp in planned.blueprints if bp.environment == "prod"]
    return generator, retrieval


def test_a_rag_requirements_file_plans_two_stacks_per_environment_on_one_platform(planned):
    stacks = [bp.stack for bp in planned.blueprints]
    assert stacks == ["rag-assistant-generator-dev", "rag-assistant-retrieval-dev",
                      "rag-assistant-generator-prod", "rag-assistant-retrieval-prod"]
    for env in ("dev", "prod"):
        generator, retrieval = [bp for bp in planned.blueprints if bp.environment == env]
        assert generator.archetype is Archetype.VLLM_GPU
        assert retrieval.archetype in (Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU)
        assert [m.name for m in generator.models] == ["generator"]
        assert [m.name for m in retrieval.models] == ["embedder", "reranker"]
        # one platform per environment, and it knows both parts
        assert generator.platform.stack == retrieval.platform.stack == f"platform-{env}-{generator.region}"
        [platform] = [p for p in planned.platforms if p.stack == generator.platform.stack]
        assert {generator.stack, retrieval.stack} <= set(platform.services)
        # one namespace per part (two stacks cannot both own one namespace)
        assert (generator.platform.namespace, retrieval.platform.namespace) == (
            "rag-assistant-generator", "rag-assistant-retrieval")
        for bp, part in ((generator, "generator"), (retrieval, "retrieval")):
            assert bp.tags["service"] == "rag-assistant" and bp.tags["part"] == part
    assert len(planned.platforms) == 2


def test_a_platform_gets_the_scale_to_zero_add_on_only_when_a_part_scales_to_zero():
    def addons(req: Requirements, env: str) -> set[str]:
        return {a.id for p in platforms_for(req).values() if p.environment == env for a in p.addons}

    assert "keda-http-add-on" in addons(rag(), "dev")  # dev: min_replicas 0
    assert "nvidia-device-plugin" in addons(rag(), "dev")
    data = example_data("rag-assistant")
    del data["environments"]["dev"]["min_replicas"]
    assert "keda-http-add-on" not in addons(Requirements.model_validate(data), "dev")


def test_each_part_gets_its_own_traffic_and_fan_out_comes_from_the_rates(prod):
    generator, retrieval = prod
    data = example_data("rag-assistant")
    rates = {m["name"]: m["traffic"]["peak_requests_per_s"] for m in data["models"]}  # prod: traffic_scale 1
    assert generator.model.traffic.peak_requests_per_s == rates["generator"]
    assert {m.name: m.traffic.peak_requests_per_s for m in retrieval.models} == {
        "embedder": rates["embedder"], "reranker": rates["reranker"]}
    stages = {s.model: s for s in generator.pipeline.stages}
    assert stages["embedder"].calls_per_request == 1
    assert stages["reranker"].calls_per_request == rates["reranker"] // rates["generator"] == 20
    for model in retrieval.predictions.models:
        assert stages[model.name].rounds == math.ceil(stages[model.name].calls_per_request / model.concurrent_requests)


def test_the_end_to_end_p95_is_composed_from_the_parts_own_predictions_and_meets_the_budget(prod):
    generator, retrieval = prod
    assert generator.pipeline == retrieval.pipeline.model_copy(update={"part": PipelinePart.GENERATOR})
    expected = 0.0
    for model in retrieval.predictions.models:
        stage = next(s for s in generator.pipeline.stages if s.model == model.name)
        expected += round(model.latency_p95_ms + (stage.rounds - 1) * model.batch_ms, 1)
    expected += generator.predictions.ttft_p95_ms  # streamed answers: the pipeline waits for the first token
    assert generator.pipeline.latency_p95_ms == pytest.approx(expected, abs=0.1)
    budget = example_data("rag-assistant")["slo"]["pipeline_latency_p95_ms"]
    assert generator.pipeline.latency_p95_budget_ms == budget
    assert generator.pipeline.latency_p95_ms <= budget
    assert any("end-to-end p95 <=" in line and "conservative" not in line for line in generator.rationale)
    assert any("conservative" in line for line in retrieval.rationale)


def test_parts_at_their_own_targets_missing_the_budget_are_tightened_and_the_rationale_says_what_each_got(prod):
    generator, retrieval = prod
    [own_generator, own_retrieval] = plan_rag(rag(slo={"pipeline_latency_p95_ms": None}))
    budget = generator.pipeline.latency_p95_budget_ms
    assert own_generator.pipeline.latency_p95_ms > budget  # the example needs tightening in prod
    assert generator.slo.ttft_p95_ms is not None and own_generator.slo.ttft_p95_ms is None
    retrieval_share = sum(s.stage_p95_ms for s in generator.pipeline.stages if s.part is PipelinePart.RETRIEVAL)
    assert generator.slo.ttft_p95_ms <= budget - retrieval_share + 1
    assert retrieval.slo.latency_p95_ms <= own_retrieval.slo.latency_p95_ms
    own_cost = own_generator.predictions.monthly_cost_usd + own_retrieval.predictions.monthly_cost_usd
    cost = generator.predictions.monthly_cost_usd + retrieval.predictions.monthly_cost_usd
    assert cost >= own_cost
    given = next(line for line in generator.rationale if line.startswith("targets given:"))
    assert f"generator ttft_p95_ms {generator.slo.ttft_p95_ms:g} ms (what the end-to-end budget leaves it" in given
    assert f"compose to {own_generator.pipeline.latency_p95_ms:,.0f} ms (over the budget)" in given
    assert f"${cost - own_cost:,.0f}/month less: this split is the cheapest" in given


def test_a_generator_without_a_ttft_target_gets_what_the_budget_leaves_it(planned):
    generator, retrieval = [bp for bp in planned.blueprints if bp.environment == "dev"]
    data = example_data("rag-assistant")
    assert "ttft_p95_ms" not in data["slo"]
    assert retrieval.slo.latency_p95_ms == data["slo"]["latency_p95_ms"]  # met in dev: retrieval keeps its own
    share = sum(s.stage_p95_ms for s in generator.pipeline.stages if s.part is PipelinePart.RETRIEVAL)
    assert generator.slo.ttft_p95_ms == math.floor(data["slo"]["pipeline_latency_p95_ms"] - share)
    assert generator.predictions.ttft_p95_ms <= generator.slo.ttft_p95_ms
    assert any("what the end-to-end budget leaves it" in line for line in generator.rationale)


class _Priced:
    """A pair as `_cheapest` reads it: its cost before finishing and, once asked (finishing it), after."""

    def __init__(self, sized_usd: float, finished_usd: float, finished: list[int], index: int) -> None:
        self.sized_usd, self._finished_usd, self._log, self._index = sized_usd, finished_usd, finished, index

    @property
    def monthly_usd(self) -> float:
        self._log.append(self._index)
        return self._finished_usd


@pytest.mark.parametrize("costs, finished, chosen", [
    # finishing keeps the cheapest cheapest: the others are never finished
    ([(100, 100), (100, 130), (120, 120)], [0], 0),
    # the fleet simulation raises the cheapest above the next: that one is finished too, and wins
    ([(100, 140), (110, 115), (120, 120)], [0, 1], 1),
    # equal final costs: the first in ladder order, as an exhaustive min
    ([(120, 120), (100, 120), (130, 130)], [1, 0], 0),
    # cost to the cent: 99.994 and 99.99 are equal, so the second cannot beat the first and is never finished
    ([(99.99, 99.99), (99.994, 99.994)], [0], 0),
])
def test_the_cheapest_pair_is_the_exhaustive_choice_finishing_only_those_that_could_win(costs, finished, chosen):
    from blueprints.plan.compound.planner import _cheapest

    log: list[int] = []
    pairs = [_Priced(sized, final, log, i) for i, (sized, final) in enumerate(costs)]
    assert _cheapest(pairs) is pairs[chosen]
    assert log == finished
    assert chosen == min(range(len(costs)), key=lambda i: round(costs[i][1], 2))  # what finishing them all picks


def test_a_compound_plan_finishes_only_the_parts_its_choice_needs_and_plans_as_finishing_every_one(monkeypatch):
    """dev: the parts at their own targets, and the generator the budget leaves 1018 ms, finish; the tightened
    retrieval parts and the generators they leave more room are sized and priced only. Finishing every pair gives
    the same stacks."""
    from blueprints.plan import planner
    from blueprints.plan.compound import planner as compound

    finished: list[str] = []
    raised: list[tuple[float, float]] = []  # (cost sized, cost finished) of each part
    real = planner.finish

    def finishing(bp, *args, **kwargs):
        finished.append(bp.stack)
        done = real(bp, *args, **kwargs)
        raised.append((bp.predictions.monthly_cost_usd, done.predictions.monthly_cost_usd))
        return done

    monkeypatch.setattr(planner, "finish", finishing)
    lazy = plan_rag(rag(), "dev")
    assert sorted(finished) == ["rag-assistant-generator-dev", "rag-assistant-generator-dev",
                                "rag-assistant-retrieval-dev"]
    every = compound._cheapest

    def exhaustive(pairs):
        for p in pairs:
            p.finished  # noqa: B018 (finish every pair, as the choice did before it was lazy)
        return every(pairs)

    monkeypatch.setattr(compound, "_cheapest", exhaustive)
    finished.clear()
    eager = plan_rag(rag(), "dev")
    assert len(finished) > 3
    assert all(done >= sized for sized, done in raised)  # what the lazy choice rests on
    assert [bp.model_dump(mode="json") for bp in eager] == [bp.model_dump(mode="json") for bp in lazy]


def test_an_unreachable_end_to_end_budget_is_refused_naming_the_field_the_parts_and_the_fix():
    with pytest.raises(SizingError) as caught:
        plan_rag(rag(slo={"pipeline_latency_p95_ms": 60}))
    message = str(caught.value)
    assert "slo.pipeline_latency_p95_ms=60 cannot be met" in message
    assert "embedder" in message and "reranker" in message and "generator TTFT" in message
    assert "raise slo.pipeline_latency_p95_ms to >=" in message
    assert "against slo.pipeline_latency_p95_ms=60" in message and "no end-to-end budget set" not in message


def test_a_non_streamed_generator_adds_its_whole_request_latency(tmp_path):
    data = example_data("rag-assistant")
    data["models"][0]["traffic"]["streaming"] = False
    data["slo"]["pipeline_latency_p95_ms"] = None
    generator, _ = plan_rag(Requirements.model_validate(data))
    stage = generator.pipeline.stages[-1]
    assert (stage.measure, stage.stage_p95_ms) == ("latency", generator.predictions.latency_p95_ms)


def test_the_budget_covers_both_parts_together():
    generator, retrieval = plan_rag(rag(slo={"pipeline_latency_p95_ms": None}, budget={"max_monthly_usd": None}))
    costs = (generator.planned_monthly_usd, retrieval.planned_monthly_usd)  # the planned peaks
    between = max(costs) + 1  # each part alone fits; together they do not
    assert between < sum(costs)
    with pytest.raises(SizingError, match=r"the service's parts at their planned peaks cost .* over "
                                          r"budget.max_monthly_usd") as caught:
        plan_rag(rag(slo={"pipeline_latency_p95_ms": None}, budget={"max_monthly_usd": between}))
    message = str(caught.value)
    assert generator.stack in message and retrieval.stack in message
    assert f"vllm-gpu, {generator.planned_nodes}x {generator.compute.instance_type}" in message  # the fleets
    assert f">= {math.ceil(sum(costs))}" in message


def test_a_budget_below_both_autoscalers_maxima_caps_them_to_share_it():
    """The budget covers the most both parts can run: between their planned peaks and their maxima, each part's
    maximum is capped at what its share of the budget pays for, and together they stay within it."""
    free = plan_rag(rag(slo={"pipeline_latency_p95_ms": None}, budget={"max_monthly_usd": None}))
    peaks, maxima = sum(bp.planned_monthly_usd for bp in free), sum(bp.max_monthly_usd for bp in free)
    budget = math.floor((peaks + maxima) / 2)
    capped = plan_rag(rag(slo={"pipeline_latency_p95_ms": None}, budget={"max_monthly_usd": budget}))
    assert sum(bp.max_monthly_usd for bp in capped) <= budget < maxima
    assert [bp.compute.replicas for bp in capped] == [bp.compute.replicas for bp in free]  # the peaks are kept
    assert any(bp.autoscaling.max_replicas < f.autoscaling.max_replicas for bp, f in zip(capped, free))
    assert any(r.startswith("autoscaling max capped") for bp in capped for r in bp.rationale)


def test_managed_operations_put_the_generator_on_sagemaker_and_keep_retrieval_self_hosted():
    generator, retrieval = plan_rag(rag(operations={"preference": "managed"}, slo={"pipeline_latency_p95_ms": None}))
    assert generator.archetype is Archetype.SAGEMAKER_ENDPOINT
    assert retrieval.archetype in (Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU)
    assert retrieval.platform.stack == "platform-prod-us-east-1" and generator.platform.stack is None
    assert any("SageMaker serves one model per endpoint" in line for line in retrieval.rationale)


@pytest.mark.parametrize(("mutate", "field", "fix"), [
    (lambda d: d["slo"].update(pipeline_latency_p95_ms=-5), "slo.pipeline_latency_p95_ms", "greater than 0"),
    (lambda d: d["slo"].update(pipeline_latency_p95_ms=10**7), "slo.pipeline_latency_p95_ms", "less than or equal"),
    (lambda d: d["models"].append({**d["models"][0], "name": "second"}), "models", "at most one generator"),
    (lambda d: d.update(service="a-compound-service-name-of-31ch"), "service", "shorten it to <= 30"),
    (lambda d: d.update(models=[d["models"][1]]), "slo.pipeline_latency_p95_ms", "remove it"),
])
def test_bad_compound_input_exits_2_naming_the_field(tmp_path, monkeypatch, mutate, field, fix):
    data = example_data("rag-assistant")
    mutate(data)
    (tmp_path / "stacks" / "requirements").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    path = tmp_path / "stacks" / "requirements" / "rag.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["plan", str(path), "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert field in result.output and fix in result.output, result.output
    assert not list((tmp_path / "stacks").glob("Pulumi.*.yaml"))


def test_a_part_named_like_another_services_stacks_is_refused():
    from blueprints.requirements.platform_file import PlatformRequirements
    from blueprints.catalog.addons import load_platform_catalog
    from blueprints.plan.platforms import ServiceFile, plan_platforms

    other = Requirements.model_validate({**example_data("chat-assistant"), "service": "rag-assistant-generator"})
    with pytest.raises(RequirementsError, match="both declare service 'rag-assistant-generator'") as caught:
        plan_platforms([ServiceFile(RAG, rag()), ServiceFile(None, other)], PlatformRequirements(),
                       catalog=load_catalog(), pcat=load_platform_catalog(), as_of=PLAN_DATE)
    assert "the generator part of compound service 'rag-assistant'" in str(caught.value)
    # a service whose stack would take a platform's name
    clash = Requirements.model_validate({**example_data("chat-assistant"), "service": "platform-dev",
                                         "environments": {"us-west-2": {"region": "us-west-2"}, "dev": {
                                             "region": "us-west-2"}}})
    with pytest.raises(RequirementsError, match="plans stack platform-dev-us-west-2, the name of a shared platform"):
        plan_platforms([ServiceFile(None, clash)], PlatformRequirements(), catalog=load_catalog(),
                       pcat=load_platform_catalog(), as_of=PLAN_DATE)


def test_stacks_list_the_parts_under_their_service_with_one_review():
    from blueprints.review.stacks import affected_stacks, list_stacks

    refs = {r.stack: r for r in list_stacks(ROOT / "stacks", policy_dir=ROOT / "policies" / "config")}
    for part in ("generator", "retrieval"):
        ref = refs[f"rag-assistant-{part}-prod"]
        assert (ref.kind, ref.service, ref.part, ref.review, ref.production) == (
            "service", "rag-assistant", part, "rag-assistant-prod", True)
        assert ref.policy_config.endswith("policies/config/prod.json")
    assert refs["chat-assistant-prod"].review == "chat-assistant-prod" and refs["chat-assistant-prod"].part is None
    found = [s.stack for s in affected_stacks(["stacks/requirements/rag-assistant.yaml"], list(refs.values()),
                                               root=ROOT)]
    # Both parts and their platforms, and every other service on those platforms (a platform change reviews them).
    assert found == ["platform-dev-us-west-2", "platform-prod-us-east-1", "chat-assistant-dev", "chat-assistant-prod",
                     "partner-api-prod", "rag-assistant-generator-dev", "rag-assistant-generator-prod",
                     "rag-assistant-retrieval-dev", "rag-assistant-retrieval-prod", "search-relevance-prod"]


def test_the_pr_workflow_reviews_a_compound_service_once_and_deploys_each_part(tmp_path):
    """Run the workflows' own jq filters over `blueprint stacks --json` of the committed stacks."""
    import json
    import re
    import subprocess

    jq = shutil.which("jq")
    if jq is None:
        pytest.skip("jq is not installed (GitHub's ubuntu runners have it)")
    listing = runner.invoke(app, ["stacks", "--json", "--stacks-dir", str(ROOT / "stacks")])
    assert listing.exit_code == 0, listing.output
    pr = yaml.safe_load((ROOT / ".github" / "workflows" / "pull-request.yml").read_text())
    run = next(s["run"] for s in pr["jobs"]["stacks"]["steps"] if "reviews=" in s.get("run", ""))
    reviews_filter = re.search(r"jq -c '([^']+)'", run.split("reviews=", 1)[1]).group(1)
    reviews = json.loads(subprocess.run([jq, "-c", reviews_filter], input=listing.output, capture_output=True,
                                        text=True, check=True).stdout)
    [rag_prod] = [r for r in reviews if r["review"] == "rag-assistant-prod"]
    assert rag_prod["stacks"] == "rag-assistant-generator-prod rag-assistant-retrieval-prod"
    assert len(reviews) == len(json.loads(listing.output)) - 2  # two compound environments, one review each
    deploy = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    affected = next(s["run"] for s in deploy["jobs"]["stacks"]["steps"] if s.get("id") == "affected")
    prod_filter = re.search(r"\"prod=\$\(echo \"\$\{all\}\" \| jq -c '([^']+)'", affected).group(1)
    prods = json.loads(subprocess.run([jq, "-c", prod_filter], input=listing.output, capture_output=True, text=True,
                                      check=True).stdout)
    assert {"rag-assistant-generator-prod", "rag-assistant-retrieval-prod"} <= {s["stack"] for s in prods}
