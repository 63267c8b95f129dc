"""Fuzz `blueprint plan` with many generated requirement documents and print what happened.

Usage: .venv/bin/python benchmarks/fuzz.py [--count N] [--seed S] [--hostile N]
A third of the documents are mutations of the bundled examples (`tests/fuzz_inputs.mutate`), a third are generated
from a subset of `blueprint schema` whose every document the schema accepts, and a third from its fields' own types
and bounds with their relations left to chance (hypothesis-jsonschema; `tests/fuzz_inputs`); `--hostile N` more are
the break-it pass's text (`tests/fuzz_inputs.hostile`: a number of 5,000 digits or lists nested 200,000 deep at a
random field), each of which must exit 2. Each goes through the CLI in a scratch project, as a user would run it.
Prints the exit codes per kind, every traceback, the slowest documents and the largest output. Target: no traceback,
every run under 5 s (a hostile one too; the break-it pass's bound is 20 s) and printing under 10 KB, the stack
folder written all or nothing (no staged write or temporary file left). Informational only: the suite's
tests/test_fuzz.py runs a few dozen of the same documents, derandomized and bounded in count, never in wall time.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests.fuzz_inputs import (  # noqa: E402
    Project,
    dump,
    example,
    example_names,
    hostile,
    mutate,
    schema_documents,
    structural_documents,
)

TARGET_S = 5.0
TARGET_OUTPUT_BYTES = 10_000


def generated(strategy, count: int, seed: int) -> list[object]:
    """`count` documents drawn from a hypothesis `strategy`, reproducible from `seed`."""
    docs: list[object] = []

    @settings(max_examples=count, database=None, deadline=None, derandomize=False,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(doc):
        docs.append(doc)

    random.seed(seed)
    collect()
    return docs[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="documents in all. Default 2000.")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutations. Default 0.")
    parser.add_argument("--hostile", type=int, default=100, help="hostile texts, beyond --count. Default 100.")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    names = example_names()
    third = args.count // 3
    mutations = [("mutation", mutate(example(rng.choice(names)), rng)) for _ in range(args.count - 2 * third)]
    from_schema = [("schema", doc) for doc in generated(schema_documents(), third, args.seed)]
    structural = [("fields", doc) for doc in generated(structural_documents(), third, args.seed)]
    hostiles = [("hostile", hostile(example(rng.choice(names)), rng)) for _ in range(args.hostile)]
    with tempfile.TemporaryDirectory() as scratch:
        project = Project(Path(scratch))
        exits: collections.Counter = collections.Counter()
        slowest: list[tuple[float, str, str]] = []
        largest = (0, "", "")
        problems = []
        for i, (kind, doc) in enumerate(mutations + from_schema + structural + hostiles):
            text = doc if kind == "hostile" else dump(doc)
            outcome = project.plan(text)
            exits[(kind, outcome.exit_code)] += 1
            slowest = sorted([*slowest, (outcome.seconds, kind, text[:200])], reverse=True)[:5]
            if len(outcome.output) > largest[0]:
                largest = (len(outcome.output), kind, text[:200])
            if outcome.traceback or not outcome.ok or (kind == "hostile" and outcome.exit_code != 2):
                problems.append((kind, outcome.exit_code, (outcome.traceback or outcome.output)[-2000:], text[:500]))
            if (i + 1) % 200 == 0:
                print(f"  {i + 1} documents", file=sys.stderr)
    print(f"{args.count + len(hostiles)} documents ({len(mutations)} mutations, {len(from_schema)} from the schema, "
          f"{len(structural)} of well-typed fields, {len(hostiles)} hostile texts), seed {args.seed}")
    for (kind, code), n in sorted(exits.items()):
        print(f"  {kind:<9} exit {code}: {n}")
    print(f"slowest (target < {TARGET_S:g} s):")
    for seconds, kind, text in slowest:
        print(f"  {seconds:6.2f} s  {kind:<9} {text.splitlines()[0] if text else '(empty)'}")
    print(f"largest output: {largest[0]:,} bytes (target < {TARGET_OUTPUT_BYTES:,})")
    print(f"tracebacks or unclean exits: {len(problems)}")
    for kind, code, output, text in problems[:10]:
        print(f"--- {kind}, exit {code}\n{output}\n--- document:\n{text}")


if __name__ == "__main__":
    main()
