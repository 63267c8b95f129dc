"""Previews and reviews of the bundled, unmodified stack configs (`stacks/Pulumi.*.yaml` at the repo root), computed
once per test process (one pytest-xdist worker) on the first use of each stack, and handed out as deep copies.

`bundled_preview(stack)` is `run_preview(stack, stacks_dir=ROOT / "stacks", program=ROOT / "__main__.py")`;
`bundled_review(stack)` is `review_stack` with the same arguments (`blueprint preview` from the project folder). Both
run from the project folder whatever the working directory. Each call returns a fresh deep copy of this process's one
result, so a test may change what it gets (append a record, edit a manifest) without another test seeing it.

Only the bundled stacks are cached, and only as the repo holds them: a test that previews an edited copy, a tmp
project, or code it patched runs `run_preview`/`review_stack` itself. A test must not call these while a patch of
product code, the environment or the stack files is in effect (the first call would cache what the patch made):
take the report first (a module fixture is set up before a test's `monkeypatch`), then patch.

Import this module as `tests.bundled` only: pytest imports `conftest.py` under its own name as well as
`tests.conftest`, so a cache kept there would exist twice in one process.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from blueprints.review.preview import PreviewReport

ROOT = Path(__file__).resolve().parent.parent
STACKS_DIR = ROOT / "stacks"
PROGRAM = ROOT / "__main__.py"
#: Every bundled stack, sorted by name.
BUNDLED_STACKS: tuple[str, ...] = tuple(sorted(p.name[len("Pulumi."):-len(".yaml")]
                                               for p in STACKS_DIR.glob("Pulumi.*.yaml")))

_previews: dict[str, PreviewReport] = {}
_reviews: dict[str, PreviewReport] = {}


def _bundled(stack: str) -> str:
    if stack not in BUNDLED_STACKS:
        raise KeyError(f"{stack!r} is not a bundled stack; bundled: {', '.join(BUNDLED_STACKS)}")
    return stack


def bundled_preview(stack: str) -> PreviewReport:
    """`run_preview` of the bundled `stack` from the project folder: a deep copy of this process's one run.

    Raises:
        KeyError: `stack` has no config in `stacks/`.
    """
    from blueprints.review.preview import run_preview

    if _bundled(stack) not in _previews:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(ROOT)
            _previews[stack] = run_preview(stack, stacks_dir=STACKS_DIR, program=PROGRAM)
    return copy.deepcopy(_previews[stack])


def bundled_review(stack: str) -> PreviewReport:
    """`review_stack` of the bundled `stack` from the project folder (policy verdicts, deployability, signals and
    bucket warnings filled in): a deep copy of this process's one review.

    The review runs the real `review_stack` (its floors, policies and checks), with the program's run served by
    `bundled_preview` (a copy of the same `run_preview` it would make), so a stack previewed and reviewed in one
    process runs the program once.

    Raises:
        KeyError: `stack` has no config in `stacks/`.
    """
    import blueprints.review.stack as review

    if _bundled(stack) not in _reviews:
        def cached_run(name: str, *, stacks_dir: Path, program: Path) -> PreviewReport:
            assert (name, stacks_dir, program) == (stack, STACKS_DIR, PROGRAM), (name, stacks_dir, program)
            return bundled_preview(name)

        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(ROOT)
            mp.setattr(review, "run_preview", cached_run)
            _reviews[stack] = review.review_stack(stack, stacks_dir=STACKS_DIR, program=PROGRAM)
    return copy.deepcopy(_reviews[stack])


class BundledReviews(Mapping[str, PreviewReport]):
    """Every bundled stack's `bundled_review`, by stack name in sorted order; a stack is reviewed on first access and
    each access returns a fresh copy."""

    def __getitem__(self, stack: str) -> PreviewReport:
        return bundled_review(stack)

    def __contains__(self, stack: object) -> bool:  # without reviewing it (Mapping's would)
        return stack in BUNDLED_STACKS

    def __iter__(self) -> Iterator[str]:
        return iter(BUNDLED_STACKS)

    def __len__(self) -> int:
        return len(BUNDLED_STACKS)
