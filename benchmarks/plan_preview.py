"""Plan many generated requirement documents and preview every stack each plan writes: how many plans preview clean.

Usage: .venv/bin/python benchmarks/plan_preview.py [--planned 300] [--seed 0] [--strategy both|policies|wide]
The documents come from the suite's strategies (`tests/test_plan_then_preview.requirements`: LLM, encoder, estate and
compound services on a new EKS platform or an existing cluster declaring all, some or none of the add-ons, in
allowed and disallowed regions), each planned and previewed as `blueprint plan` and `blueprint preview` run them
(`tests/plan_preview.plan_and_preview`, the bundled policy configs), until `--planned` of them planned. Prints how
many planned, how many were refused (and with what), how many of the planned preview clean (also every 25 planned),
and per failing check how many plans it rejected, with one example message. Target: every plan that succeeds previews clean (issue 23, class 7). Informational only: the suite
runs a few dozen of the same documents, derandomized and bounded in count, never in wall time.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests.plan_preview import plan_and_preview  # noqa: E402
from tests.test_plan_then_preview import requirements as within_policies  # noqa: E402
from tests.test_planner_properties import deployable_requirements  # noqa: E402

#: The suite's two strategies: documents within the bundled policy pack (a third region it refuses), and wider ones
#: (any catalogued model, precision, format, CPU architecture and budget, in the regions the policies allow).
STRATEGIES = {"policies": within_policies, "wide": deployable_requirements}


def documents(strategy, count: int, seed: int) -> list[dict]:
    """`count` requirement documents drawn from `strategy`, reproducible from `seed`."""
    docs: list[dict] = []

    @settings(max_examples=count, database=None, deadline=None, derandomize=False, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck))
    @given(strategy())
    def collect(doc):
        docs.append(doc)

    random.seed(seed)
    collect()
    return docs[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planned", type=int, default=300, help="stop once this many documents planned")
    parser.add_argument("--max-documents", type=int, default=3000, help="stop after this many documents anyway")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategy", choices=[*STRATEGIES, "both"], default="both",
                        help="which documents (both: one of each in turn)")
    args = parser.parse_args()
    names = list(STRATEGIES) if args.strategy == "both" else [args.strategy]
    drawn = [documents(STRATEGIES[name], args.max_documents // len(names), args.seed) for name in names]
    docs = [d for turn in zip(*drawn) for d in turn]  # one of each strategy in turn
    refused: collections.Counter[str] = collections.Counter()
    failing: collections.Counter[str] = collections.Counter()
    example: dict[str, str] = {}
    planned = clean = 0
    started = time.perf_counter()
    seen = 0
    for i, doc in enumerate(docs, 1):
        if planned >= args.planned:
            break
        seen = i
        outcome = plan_and_preview(doc)
        if not outcome.planned:
            refused[outcome.refused.split("svc.yaml: ")[-1][:70]] += 1
            continue
        planned += 1
        clean += not outcome.failures
        if planned % 25 == 0:
            print(f"  {planned} planned of {i} documents, {clean} preview clean", flush=True)
        if not outcome.failures:
            continue
        checks = {f.split(":")[0] for found in outcome.failures.values() for f in found}
        for check in checks:
            failing[check] += 1
            example.setdefault(check, next(f for found in outcome.failures.values() for f in found
                                           if f.startswith(check))[:300])
        print(f"  document {i}: {sorted(outcome.failures)}: {sorted(checks)}", flush=True)
    elapsed = time.perf_counter() - started
    print(f"{seen} documents in {elapsed:.0f} s: {planned} planned, {seen - planned} refused (exit 2)")
    print(f"planned and previewed clean: {clean} of {planned}"
          + (f" ({100 * clean / planned:.1f} %)" if planned else ""))
    for check, n in failing.most_common():
        print(f"  {n} plan(s) rejected by {check}: e.g. {example[check]}")
    print("refusals by first words:")
    for why, n in refused.most_common():
        print(f"  {n:4d}  {why}")
    return 0 if clean == planned else 1


if __name__ == "__main__":
    raise SystemExit(main())
