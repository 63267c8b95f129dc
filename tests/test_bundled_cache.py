"""The per-worker cache of the bundled stacks' previews and reviews (`tests.bundled`) gives what a fresh
`run_preview`/`review_stack` gives, as copies a test may change, and reviews a stack only when asked for it."""

from __future__ import annotations

import pytest

from blueprints.review.preview import run_preview
from blueprints.review.stack import review_stack
from tests import bundled
from tests.bundled import BUNDLED_STACKS, PROGRAM, STACKS_DIR, BundledReviews, bundled_preview, bundled_review

STACK = "edge-classifier-dev"  # the cheapest bundled stack to preview


def fresh_review(stack: str):
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(STACKS_DIR.parent)
        return review_stack(stack, stacks_dir=STACKS_DIR, program=PROGRAM)


def test_the_cache_gives_what_a_fresh_preview_and_review_give():
    preview, review = bundled_preview(STACK), bundled_review(STACK)
    assert preview == run_preview(STACK, stacks_dir=STACKS_DIR, program=PROGRAM)
    assert review == fresh_review(STACK)
    assert review.policy_verdicts == preview.policy_verdicts == [] and review.resources == preview.resources
    assert review.clean and review.warnings[:len(preview.warnings)] == preview.warnings  # the review appends its own


def test_each_call_returns_a_copy_a_test_may_change():
    first = bundled_review(STACK)
    first.resources.clear()
    first.manifests[0:0] = [{"kind": "Edited"}]
    first.warnings.append("edited")
    again = bundled_review(STACK)
    assert again.resources and again.manifests[0].get("kind") != "Edited" and "edited" not in again.warnings
    assert again is not first and again == fresh_review(STACK)


def test_only_bundled_stacks_are_served():
    with pytest.raises(KeyError, match="no-such-stack"):
        bundled_preview("no-such-stack")
    with pytest.raises(KeyError):
        BundledReviews()["no-such-stack"]


def test_the_mapping_lists_every_bundled_stack_and_reviews_one_only_on_access(monkeypatch):
    monkeypatch.setattr(bundled, "_reviews", {})  # this worker's reviews so far set aside
    reviews = BundledReviews()
    assert list(reviews) == sorted(BUNDLED_STACKS) and len(reviews) == len(BUNDLED_STACKS)
    assert set(BUNDLED_STACKS) == {p.name[len("Pulumi."):-len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml")}
    assert STACK in reviews and "no-such-stack" not in reviews and list(reviews.keys())
    assert bundled._reviews == {}  # `in`, iteration and keys review nothing
    assert reviews[STACK].stack == STACK and list(bundled._reviews) == [STACK]
