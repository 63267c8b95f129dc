"""Bounded in-process memos: a value computed once per key, kept until the memo holds its limit of keys, when it
starts again (no eviction order to keep; the processes that fill memos, a plan check or a test worker, revisit a
small working set)."""

from __future__ import annotations

from typing import Callable, Hashable, TypeVar

T = TypeVar("T")


def remembered(memo: dict, key: Hashable, compute: Callable[[], T], *, kept: int) -> T:
    """`memo[key]`, computed by `compute()` and stored the first time `key` is asked for (a None result too); a memo
    already holding `kept` keys is emptied first. An exception from `compute` stores nothing."""
    if key in memo:
        return memo[key]
    value = compute()
    if len(memo) >= kept:
        memo.clear()
    memo[key] = value
    return value
