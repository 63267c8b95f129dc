"""`blueprint schema` accepts what the loader accepts: a document valid against it loads and plans, or fails only on a
cross-field rule the schema lists (`x-cross-field-rules`); a document it refuses, the loader refuses too.

Documents come from the schema itself (hypothesis-jsonschema) and from mutations of the bundled examples; both are
derandomized and bounded in count.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from blueprints.requirements.rules import CROSS_FIELD_RULES
from blueprints.requirements.service import requirements_json_schema
from tests.conftest import examples
from tests.fuzz_inputs import (
    ROOT,
    example,
    example_names,
    mutate,
    schema_documents,
    schema_validator,
    structural_documents,
    verdict,
)

SCHEMA = schema_validator()


def test_the_schema_lists_every_cross_field_rule_and_each_is_enforced_somewhere():
    schema = requirements_json_schema()
    assert schema["x-cross-field-rules"] == CROSS_FIELD_RULES
    sources = "".join(p.read_text() for folder in ("blueprints",) for p in (ROOT / folder).rglob("*.py")
                      if p != ROOT / "blueprints" / "requirements" / "rules.py")
    enforced = set(re.findall(r'rule\s*=\s*"([a-z0-9-]+)"', sources)) | set(re.findall(r'rule = "([a-z0-9-]+)"',
                                                                                         sources))
    assert set(CROSS_FIELD_RULES) <= enforced, set(CROSS_FIELD_RULES) - enforced  # no rule documented but unchecked
    assert enforced <= set(CROSS_FIELD_RULES), enforced - set(CROSS_FIELD_RULES)  # no rule checked but undocumented


#: Generate without shrinking: shrinking a failing document takes minutes; the failure prints it as found.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


@pytest.mark.parametrize("name", example_names())
def test_every_bundled_example_is_valid_against_the_schema(name):
    assert list(SCHEMA.iter_errors(example(name))) == []


@pytest.mark.parametrize("names", [{"Prod": {"region": "us-east-1"}}, {"prod_1": {"region": "us-east-1"}},
                                   {"x" * 21: {"region": "us-east-1"}}, {"prod\n": {"region": "us-east-1"}}])
def test_an_environment_name_the_loader_refuses_the_schema_refuses(names):
    doc = {**example("chat-assistant"), "environments": names}
    assert list(SCHEMA.iter_errors(doc)), "the schema let an environment name through"
    assert not verdict(doc, plan=False).loaded


@settings(phases=NO_SHRINK, max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(schema_documents())
def test_a_document_valid_against_the_schema_plans_or_breaks_only_documented_rules(doc):
    assert list(SCHEMA.iter_errors(doc)) == []  # generated from a subset of the schema
    result = verdict(doc)
    assert result.undocumented == [], result.undocumented


@settings(phases=NO_SHRINK, max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(structural_documents())
def test_a_document_of_well_typed_fields_gets_the_same_verdict_from_the_schema_and_the_loader(doc):
    """The fields' relations left to chance: the schema's cross-field rules refuse some documents, and the loader
    must refuse exactly those (or more, naming a documented rule)."""
    _same_verdict(doc)


@pytest.mark.parametrize("seed", range(60))
def test_a_mutated_example_gets_the_same_verdict_from_the_schema_and_the_loader(seed):
    rng = random.Random(seed)
    doc = mutate(example(rng.choice(example_names())), rng)
    _same_verdict(doc)


def _same_verdict(doc) -> None:
    """The loader refuses what the schema refuses; what the schema accepts fails, if at all, on a documented rule."""
    schema_ok = not list(SCHEMA.iter_errors(doc))
    result = verdict(doc, plan=False)
    if schema_ok:
        assert result.undocumented == [], (doc, result.undocumented)
    else:
        assert not result.loaded, ("the loader accepts what the schema refuses", doc,
                                   [e.message for e in SCHEMA.iter_errors(doc)])
