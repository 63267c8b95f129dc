"""What a process remembers so `blueprint plan --check` does not redo its work for every requirements file it plans:
plans by the content of every input (`blueprints.workspace.remembered_plan`) and parsed YAML by its text
(`blueprints.core.yamlio.load_yaml`). The same inputs give the same result without the work, each caller its own
copy; any changed input is planned (or parsed) anew."""

from __future__ import annotations

import pytest

from blueprints.core.yamlio import load_yaml
from blueprints.plan import planner
from blueprints.workspace import forget_plans, plan_requirements_file
from tests.conftest import EXAMPLES, PLAN_DATE, ROOT

EDGE = EXAMPLES / "edge-classifier.yaml"
POLICY_DIR = ROOT / "policies" / "config"


@pytest.fixture()
def plans(monkeypatch) -> list[str]:
    """The services the planner plans from here on (a spy on `blueprints.plan.planner.plan`), with nothing
    remembered."""
    called: list[str] = []
    real = planner.plan

    def spy(req, *args, **kwargs):
        called.append(req.service)
        return real(req, *args, **kwargs)

    monkeypatch.setattr(planner, "plan", spy)
    forget_plans()
    yield called
    forget_plans()


def _plan(**changes):
    return plan_requirements_file(EDGE, **{"as_of": PLAN_DATE, "policy_dir": POLICY_DIR, "stacks_dir": ROOT / "stacks",
                                           **changes})


def test_the_same_inputs_plan_once_and_each_caller_gets_its_own_copy(plans):
    first, again = _plan(), _plan()
    assert plans == ["edge-classifier"]
    assert [bp.model_dump(mode="json") for bp in again.blueprints] == [
        bp.model_dump(mode="json") for bp in first.blueprints]
    assert all(a is not b and a.rationale is not b.rationale for a, b in zip(first.blueprints, again.blueprints))
    first.blueprints[0].rationale.append("changed by a caller")
    assert "changed by a caller" not in _plan().blueprints[0].rationale
    assert plans == ["edge-classifier"]


@pytest.mark.parametrize("change", [
    {"switch_threshold_pct": 0.0},
    {"as_of": PLAN_DATE.replace(year=2027)},
    {"environments": ["prod"]},
    {"use_policy": False},  # no guardrails
], ids=["switch-threshold", "plan-date", "environments", "guardrails"])
def test_any_changed_input_is_planned_anew(plans, change):
    _plan()
    _plan(**change)
    assert plans == ["edge-classifier", "edge-classifier"]


def test_a_yaml_document_is_parsed_once_per_text_and_each_reader_gets_its_own_copy():
    text = (ROOT / "stacks" / "Pulumi.edge-classifier-prod.yaml").read_text()
    first = load_yaml(text)
    first["config"]["changed"] = True
    again = load_yaml(text)
    assert "changed" not in again["config"] and again == load_yaml(text)
    assert load_yaml(text.replace("edge-classifier", "edge-sorter")) != again  # another text, another document
