"""Proven hints (`blueprints.plan.hints`): before a refusal says "raise X to >= N", the plan runs again with N and
succeeds; otherwise the message names every change that must move together, or says that none named suffices.
Checked by: a printed hint, applied, plans."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import pytest

from blueprints.catalog import load_catalog
from blueprints.core.errors import Fix, SizingError
from blueprints.plan.guardrails import Guardrails
from blueprints.plan.hints import apply_fixes, prove
from blueprints.plan.planner import plan
from blueprints.plan.quota import gpus_at_full_scale
from blueprints.requirements.hosting import ALL_ENGINES
from blueprints.requirements.service import Requirements
from tests.conftest import GUARDRAIL_ENGINES, PLAN_DATE, example_data, platforms_for, requirements_with

FAMILIES = {"accelerators": ["nvidia-gpu"], "allowed_instance_families": ["g5", "g6", "g6e", "p4d", "p5"]}


def _busy_chat(budget: float | None, families: list[str] | None = None, engines: Sequence[str] = ALL_ENGINES,
               **slo) -> Requirements:
    """The 8B chat assistant at 10x its traffic (200 requests/s), comparing `engines`; at its 50 ms ITL target and the
    production margin the cheapest option meeting the SLO is also the one with the fewest GPUs (p5.4xlarge,
    ~$150k/month)."""
    return requirements_with(environments={"prod": {"region": "us-east-1", "traffic_scale": 10}},
                             budget={"max_monthly_usd": budget}, slo=slo, operations={"engines": list(engines)},
                             hardware={**FAMILIES, "allowed_instance_families": families or
                                       FAMILIES["allowed_instance_families"]})


def _gpus_with_the_surge(req: Requirements) -> int:
    """The GPUs the plan's peak replicas and a rollout surge take (what the quota refusal counts)."""
    [bp] = _plan(req)
    assert bp.placement.per_new_node == 1
    return (bp.compute.replicas + 1) * bp.compute.gpus_per_replica


def _quota(max_gpus: int) -> dict[str, Guardrails]:
    return {"prod": Guardrails(source="prod.json", allowed_instance_families=None, max_gpus=max_gpus)}


def _plan(req: Requirements, guardrails: dict | None = None, **kwargs):
    return plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"], guardrails=guardrails,
                platforms=platforms_for(req), **kwargs)


def _refusal(req: Requirements, guardrails: dict | None = None, **kwargs) -> SizingError:
    with pytest.raises(SizingError) as caught:
        _plan(req, guardrails, **kwargs)
    return caught.value


def _applied_plans(req: Requirements, guardrails: dict | None, refusal: SizingError) -> None:
    """Every change the message proposes, applied as printed (its words parsed back), plans."""
    assert refusal.groups, str(refusal)
    for group in refusal.groups:
        for fix in group:
            assert fix.text in str(refusal)
            assert float(re.search(r">= (\d+)", fix.text).group(1)) == fix.value  # the words say the value
        fixed, limits = apply_fixes(req, guardrails or {}, group)
        assert _plan(fixed, limits or None, prove_hints=False)


@pytest.mark.parametrize("engines", GUARDRAIL_ENGINES)
def test_a_quota_hint_names_the_gpus_an_option_within_budget_needs_not_the_least_any_option_needs(engines):
    """At an 80 ms ITL target the cheapest option is on L40S (g6e.xlarge, ~$92k/month) and the fewest GPUs on H100
    (p5.4xlarge, ~$151k/month). Within $120,000 the least any option needs only plans the H100 option, over budget;
    the hint is the cheapest option's GPUs, which plans."""
    cheapest = _gpus_with_the_surge(_busy_chat(None, engines=engines, itl_p95_ms=80))
    fewest = _gpus_with_the_surge(_busy_chat(None, ["p5"], engines, itl_p95_ms=80))
    assert 10 < fewest < cheapest
    req, quota = _busy_chat(120_000, engines=engines, itl_p95_ms=80), _quota(10)
    unproven = _refusal(req, quota, prove_hints=False)
    assert f"raise maxGpus in prod.json to >= {fewest}," in str(unproven)  # the old hint: the least any option needs
    with pytest.raises(SizingError, match=r"over budget.max_monthly_usd=120000"):
        _plan(*apply_fixes(req, quota, [Fix("policy:prod:maxGpus", fewest, "")]), prove_hints=False)
    proven = _refusal(req, quota)
    assert f"raise maxGpus in prod.json to >= {cheapest}, lower environments.prod.traffic_scale" in str(proven)
    assert f"the least any option meeting the SLO needs is {fewest}" in str(proven)  # still said, as a fact
    _applied_plans(req, quota, proven)


@pytest.mark.parametrize("engines", GUARDRAIL_ENGINES)
def test_when_no_single_change_plans_the_hint_names_every_change_that_must_move_together(engines):
    """Within $70,000 no option fits at any quota: the quota and the budget move together."""
    req, quota = _busy_chat(70_000, engines=engines), _quota(10)
    proven = _refusal(req, quota)
    [(gpus, budget)] = proven.groups
    assert (gpus.field, budget.field) == ("policy:prod:maxGpus", "budget.max_monthly_usd")
    assert f"{gpus.text} and {budget.text} together" in str(proven)
    _applied_plans(req, quota, proven)


def test_a_compound_budget_hint_is_the_cost_of_the_parts_that_meet_the_end_to_end_budget():
    """rag-assistant within $3,000: the parts meet the 1.2 s end-to-end budget only with tightened targets; the
    refusal says so (not that the latency budget cannot be met), and the budget it names plans."""
    data = example_data("rag-assistant")
    data["budget"] = {"max_monthly_usd": 3000}
    req = Requirements.model_validate(data)
    proven = _refusal(req)
    message = str(proven)
    assert "cannot be met" not in message  # the latency budget can, at a cost
    assert message.startswith("environments.prod: with their targets tightened to meet slo.pipeline_latency_p95_ms, "
                              "the service's parts at their planned peaks cost")
    [(fix,)] = proven.groups
    assert fix.field == "budget.max_monthly_usd" and fix.value > 3000
    _applied_plans(req, None, proven)


def test_an_unreachable_latency_hint_is_proven_at_the_value_that_plans_without_searching_the_central_estimate(
        monkeypatch):
    """An ITL target below what any option reaches: the hint's value plans (the next refusal's value for the same
    field is taken when the first does not). The re-plans proving it ask only whether it plans, so none searches the
    production plan's central estimate (`PlanContext.proving`); the plan of the fixed requirements does."""
    from blueprints.plan.builders import llm_band

    searched: list[bool] = []
    search = llm_band.llm_search
    monkeypatch.setattr(llm_band, "llm_search", lambda *a, **k: searched.append(k["central"]) or search(*a, **k))
    req = requirements_with("regulated-assistant", slo={"itl_p95_ms": 3}, budget={"max_monthly_usd": None})
    proven = _refusal(req)
    [(fix,)] = proven.groups
    assert fix.field == "slo.itl_p95_ms" and f"{fix.text}, lower model.precision" in str(proven)
    assert searched == []
    _applied_plans(req, None, proven)
    assert searched == [True]


def test_a_hint_that_no_re_plan_proves_is_flagged_as_not_enough():
    """`prove` with a re-plan that always refuses: the words stay, flagged, and the message says none suffices."""
    fix = Fix("budget.max_monthly_usd", 10, "raise budget.max_monthly_usd to >= 10")
    refusal = SizingError(f"over budget: {fix.text}, or relax the SLO", fixes=(fix,))

    def never(_fixes) -> None:
        raise SizingError("still over budget", fixes=(fix,))

    proven = prove(refusal, never)
    assert proven.groups == () and "raise budget.max_monthly_usd to >= 10 is not enough on its own" in str(proven)
    assert str(proven).endswith("No change named here plans on its own or with the next one it needs")


def test_a_hint_beyond_its_fields_bound_is_not_proposed_and_the_search_does_not_raise():
    """Edge nodes measured at 0.0001 GFLOP/s per vCPU: the latency floor is ~13.9 million ms, beyond
    slo.latency_p95_ms's bound (600,000 ms). The refusal says the field cannot go far enough and names the bound; it
    proposes no value beyond it (a break-it pass found the re-plan raising pydantic's error instead)."""
    from blueprints.core import bounds

    data = example_data("edge-classifier")
    data["hardware"]["edge_nodes"]["gflops_per_vcpu"] = 0.0001
    req = Requirements.model_validate(data)
    with pytest.raises(SizingError) as caught:
        plan(req, load_catalog(), as_of=PLAN_DATE)
    message = str(caught.value)
    floor = int(re.search(r"it would need >= ([\d,]+)", message).group(1).replace(",", ""))
    assert floor > bounds.MAX_LATENCY_MS
    assert "slo.latency_p95_ms cannot go far enough" in message and "less than or equal to 600000" in message
    assert "raise slo.latency_p95_ms to >=" not in message and caught.value.groups == ()


def test_a_re_plan_refused_for_another_reason_counts_as_not_planning():
    """A re-plan refused with another `BlueprintError` than a SizingError (a requirements rule the change breaks):
    the hint is flagged, never raised."""
    from blueprints.core.errors import RequirementsError

    fix = Fix("slo.ttft_p95_ms", 900, "raise slo.ttft_p95_ms to >= 900")
    refusal = SizingError(f"too slow: {fix.text}", fixes=(fix,))

    def refused(_fixes) -> None:
        raise RequirementsError("slo.ttft_p95_ms: must be below slo.pipeline_latency_p95_ms")

    proven = prove(refusal, refused)
    assert proven.groups == () and f"{fix.text} is not enough on its own" in str(proven)


def test_a_compound_refusal_the_gpu_quota_caused_names_the_maxgpus_raise_that_alone_plans():
    """rag-assistant in a full dev account (8 GPUs, 5 held by other stacks) at its prod traffic: the generator,
    capped by the quota, misses the end-to-end latency budget; no change the refusal names plans (a break-it pass
    read "no change named here plans"), while raising maxGpus alone does. The hint names that raise, at the GPUs the
    plan without a quota reaches with the others, and it plans."""
    data = example_data("rag-assistant")
    data["environments"] = {"dev": {"region": "us-west-2", "traffic_scale": 1.0, "spot": True}}
    req = Requirements.model_validate(data)
    quota = {"dev": Guardrails(source="dev.json", allowed_instance_families=None, max_gpus=8, gpus_in_use=5,
                               gpus_in_use_by=("chat-assistant-dev: 2", "newcomer-dev: 3"))}

    def dev(guardrails, **kwargs):
        return plan(req, load_catalog(), as_of=PLAN_DATE, environments=["dev"], guardrails=guardrails,
                    platforms=platforms_for(req), **kwargs)

    with pytest.raises(SizingError) as unproven:
        dev(quota, prove_hints=False)
    assert "maxGpus" not in str(unproven.value)  # the refusal is the latency budget's, naming no quota
    with pytest.raises(SizingError) as caught:
        dev(quota)
    proven = caught.value
    free = dev({"dev": replace(quota["dev"], max_gpus=None)})
    need = 5 + sum(gpus_at_full_scale(bp) for bp in free)
    [(fix,)] = proven.groups
    assert (fix.field, fix.value) == ("policy:dev:maxGpus", need) and need > 8
    assert str(proven).endswith(f"No change named here plans, but the GPU quota held the plan back: raise maxGpus in "
                                f"dev.json to >= {need} plans")
    assert dev(apply_fixes(req, quota, [fix])[1], prove_hints=False)
    with pytest.raises(SizingError):  # the least: one GPU fewer does not plan
        dev(apply_fixes(req, quota, [replace(fix, value=need - 1)])[1], prove_hints=False)
