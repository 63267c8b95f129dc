"""The bounded in-process memo every cache of the planner and the readers goes through (blueprints.core.memo)."""

from __future__ import annotations

import pytest

from blueprints.core.memo import remembered


def test_a_key_is_computed_once_a_none_result_included():
    memo: dict = {}
    calls: list[str] = []
    for _ in range(3):
        assert remembered(memo, "empty", lambda: calls.append("empty"), kept=4) is None  # an empty YAML document
    assert calls == ["empty"]


def test_a_full_memo_starts_again_and_keeps_the_new_key():
    memo: dict = {}
    for k in range(3):
        remembered(memo, k, lambda k=k: k * 10, kept=3)
    assert remembered(memo, 3, lambda: 30, kept=3) == 30
    assert memo == {3: 30}


def test_a_failed_computation_stores_nothing():
    memo: dict = {"kept": 1}

    def fails():
        raise ValueError("bad file")

    with pytest.raises(ValueError):
        remembered(memo, "bad", fails, kept=1)
    assert memo == {"kept": 1}
