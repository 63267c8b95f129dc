"""Hot loops on a fresh interpreter stack (`@fresh_stack`).

CPython keeps Python frames in 16 KiB chunks of a per-thread data stack and, up to the fix, frees a chunk as soon as
it empties (python/cpython#142183, "calls across stack chunks perform badly"; fixed by python/cpython#145789, March
2026, which keeps one spare chunk per thread, with backports to 3.13 and 3.14 linked from the issue; 3.11, which the
project runs on, takes security fixes only). A loop whose own frame sits near the end of a chunk then maps and unmaps
a new chunk on every call it makes. Where the frame lands depends on how deep the caller is, so it comes and goes
with the caller: one plan check under pytest spent 16.6 s of system time beside 24 s of user time (about 1.4 million
`mmap`/`munmap` pairs), the same plan check from the command line 0.3 s. The simulations' loops
(`blueprints.capacity.simulator.simulate`, `blueprints.simulate.fleet`) therefore run on a new thread's stack, where
they are always the same few frames deep: the plan check's test then spent 1.7 s of system time. A new thread costs
about 0.1 ms against a simulation's tens.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def fresh_stack(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn`, run on a new thread (a fresh data stack) and waited for: its result, or its exception raised in the
    caller's thread. Nothing runs concurrently (the caller waits), so `fn` sees what its caller sees."""

    @functools.wraps(fn)
    def on_fresh_stack(*args: P.args, **kwargs: P.kwargs) -> T:
        outcome: list = []

        def run() -> None:
            try:
                outcome.append((True, fn(*args, **kwargs)))
            except BaseException as exc:  # raised again in the caller's thread
                outcome.append((False, exc))

        worker = threading.Thread(target=run, name=f"fresh-stack:{fn.__qualname__}", daemon=True)
        worker.start()
        worker.join()
        ok, value = outcome[0]
        if ok:
            return value
        raise value

    return on_fresh_stack
