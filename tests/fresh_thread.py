"""A test's plan-and-preview work on a fresh thread's stack, as the planner's simulations run
(`blueprints.core.freshstack`).

CPython 3.11 frees a 16 KiB chunk of a thread's frame stack as soon as it empties (python/cpython#142183): a hot loop
whose frame happens to sit at the end of a chunk maps and unmaps one on each call it makes. Under Hypothesis's and
pytest's frames a property test's example landed there: tests/test_plan_then_preview.py's policy-pack property made
570,000 `mmap`/`munmap` pairs (strace) and spent 15.6 s of CPU (4.8 s of it system time), 10.1 s on a fresh thread.
What runs there is the same code on the same inputs; only the depth of the stack under it changes."""

from __future__ import annotations

import asyncio
from typing import Callable, ParamSpec, TypeVar

from blueprints.core.freshstack import fresh_stack

P = ParamSpec("P")
T = TypeVar("T")


def on_fresh_stack(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on a new thread (waited for; its exception raised here), with an asyncio event loop of
    its own for the Pulumi mock engine a preview runs (`blueprints.review.preview.run_under_mocks`), closed after."""

    def run() -> T:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return fn(*args, **kwargs)
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    return fresh_stack(run)()
