"""Print the LLM capacity model against published measurements: the error on points no fit saw, beside the in-sample one.

Usage: .venv/bin/python benchmarks/sizing.py [--points FILE] [--sources]
       .venv/bin/python benchmarks/sizing.py --cross-validate [--write | --check] [--workers N]

The points are every blueprints/catalog/calibration-points*.yaml (each with its source, its source group, its engine,
its regime and how the figure is defined; see those files' headers), or the calibration file FILE (a malformed one
exits 2 naming the point and the field).

Default: each point's held-out prediction (from the committed fit, blueprints/catalog/capacity-fit.yaml: the constants
fitted without the point's source group) beside its in-sample one (the committed constants), then the median, p90
and worst |error| of each regime and GPU, held out and in sample. tests/test_sizing_calibration.py gates the held-out
figures; the README's "How far to trust the numbers" quotes them.

`--cross-validate` fits the constants (blueprints/capacity/fitting.py) on every point from their priors, then leaves
each source group out in turn: a few minutes on two cores; then each other engine's ENGINE_CONSTANTS on its own
points, the same way (on a grid: a minute). `--write` commits the results to capacity-fit.yaml and engine-fit.yaml
(then copy `full` into defaults.py and gpus.yaml: the tests hold them equal); `--check` exits 1 when a committed
file is not what the fit gives now (CI runs it). `--sources` compares the two step-time sources per GPU with measured tables
(defaults.MEASURED_STEP_GPUS is chosen from it), in sample.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blueprints.core import defaults  # noqa: E402
from blueprints.core.errors import BlueprintError  # noqa: E402
from blueprints.capacity.calibration import (  # noqa: E402
    POINT_TOLERANCE,
    CalibrationPoint,
    Comparison,
    better_source,
    compare,
    errors_by_regime,
    load_points,
    load_points_file,
    median_abs_error,
    p90_abs_error,
    source_errors,
)
from blueprints.capacity.fitting import (  # noqa: E402
    CONSTANTS,
    ENGINE_FIT_FILE,
    FIT_FILE,
    dump_engine_fits,
    dump_fit_record,
    engine_fits,
    engine_held_out,
    fit_digest,
    fit_record,
    load_fit_record,
)
from blueprints.capacity.measured import covered_gpus  # noqa: E402
from blueprints.catalog import Catalog, load_catalog  # noqa: E402

FIT_PATH = Path(__file__).resolve().parent.parent / "blueprints" / "catalog" / FIT_FILE
ENGINE_FIT_PATH = FIT_PATH.with_name(ENGINE_FIT_FILE)


def _table(title: str, rows: list[Comparison], key) -> None:
    groups: dict[str, list[Comparison]] = {}
    for c in rows:
        groups.setdefault(key(c), []).append(c)
    print(title)
    for name, cs in sorted(groups.items()):
        worst = max(cs, key=lambda c: abs(c.error))
        print(f"  {name:<46} {len(cs):>4} points: median |error| {median_abs_error(cs):6.1%}, p90 "
              f"{p90_abs_error(cs):6.1%}, signed median {statistics.median(c.error for c in cs):+6.1%}, worst "
              f"{worst.error:+7.0%} ({worst.point.id})")


def _regimes(title: str, rows: list[Comparison]) -> None:
    print(title)
    for r in errors_by_regime(rows):
        print(f"  {r.regime:<12} {r.points:>4} points: median |error| {r.median:6.1%}, p90 {r.p90:6.1%}, worst "
              f"{abs(r.worst.error):7.1%} ({r.worst.point.id})")


def report(catalog: Catalog, points: tuple[CalibrationPoint, ...], *, bundled: bool) -> None:
    start = time.perf_counter()
    inside = compare(catalog, points)
    held = load_fit_record().held_out(points) if bundled else None
    by_id = {c.point.id: c for c in held or []}
    others = engine_held_out(points, catalog)  # other engines: no point of theirs is fitted, held out throughout
    by_id.update({c.point.id: c for cs in others.values() for c in cs})
    elapsed = time.perf_counter() - start
    print(f"{'point':<48} {'regime':<11} {'metric':<24} {'published':>10} {'held out':>10} {'in sample':>10}")
    for c in inside:
        h = by_id.get(c.point.id) if held else None
        flag = ""
        if abs((h or c).error) > POINT_TOLERANCE:
            flag = "  known off" if c.point.known_off else ""
        print(f"{c.point.id[:48]:<48} {c.point.regime:<11} {c.point.metric + ' ' + c.point.stat:<24} "
              f"{c.point.value:>10.2f} {(f'{h.error:+.1%}' if h else '-'):>10} {c.error:>+10.1%}{flag}")
    print()
    if held:
        _regimes(f"held out (fitted without the point's source group), all {len(held)} points "
                 f"({sum(1 for c in held if c.point.known_off)} listed as known off, included):", held)
        _table("held out, per GPU:", held, lambda c: c.point.args.gpu)
        _table("held out, per source group:", held, lambda c: c.point.source_group)
    for engine, rows in sorted(others.items()):
        _regimes(f"{engine}: its {len(rows)} points on the constants fitted on vLLM's alone (held out by "
                 "construction):", rows)
        _table(f"{engine}, per GPU:", rows, lambda c: c.point.args.gpu)
    _regimes("in sample (the committed constants, fitted on every point):", inside)
    for c in inside:
        if c.point.known_off:
            print(f"  known off: {c.point.id} ({c.error:+.0%}): {c.point.known_off}")
    print(f"({elapsed:.2f} s)")


def sources(catalog: Catalog, points: tuple[CalibrationPoint, ...]) -> None:
    """Per GPU with measured tables: both sources' error on its points the tables cover (in sample)."""
    print(f"{'GPU':<10} {'points':>7}  {'measured median / p90':>22}  {'roofline median / p90':>22}  "
          "better  chosen (defaults.MEASURED_STEP_GPUS)")
    for gpu in covered_gpus():
        count, errors = source_errors(catalog, points, gpu, fitted=frozenset())
        chosen = "measured" if gpu in defaults.MEASURED_STEP_GPUS else "roofline"
        if not errors:
            print(f"{gpu:<10} {0:>7}  {'no published point':>47}  measured  {chosen}")
            continue
        cells = [f"{errors[s][0]:>9.1%} / {errors[s][1]:>8.1%}" for s in ("measured", "roofline")]
        print(f"{gpu:<10} {count:>7}  {cells[0]:>22}  {cells[1]:>22}  {better_source(errors):<8} {chosen}")


def cross_validate(catalog: Catalog, points: tuple[CalibrationPoint, ...], *, workers: int, write: bool,
                   check: bool) -> int:
    start = time.perf_counter()
    record = fit_record(points, catalog, workers=workers)
    print(f"fitted and cross-validated over {len(record.folds)} source groups in {time.perf_counter() - start:.0f} s")
    print(f"{'constant':<54} {'fitted':>9}  fold range")
    for c in CONSTANTS:
        values = [v[c.name] for _, v, _ in record.folds]
        print(f"{c.name:<54} {record.full[c.name]:>9.4g}  {min(values):.4g} - {max(values):.4g} {c.unit}")
    _regimes("held out:", record.held_out(points))
    start = time.perf_counter()
    fits = engine_fits(points, catalog)
    print(f"fitted the other engines' constants on their own points in {time.perf_counter() - start:.0f} s")
    for fit in fits:
        for name, value in fit.full.items():
            values = [v[name] for _, v, _ in fit.folds]
            print(f"{name:<54} {value:>9.4g}  {min(values):.4g} - {max(values):.4g}")
    for engine, rows in sorted(engine_held_out(points, catalog, fits).items()):
        _regimes(f"{engine}, held out:", rows)
    stale = 0
    for path, text in ((FIT_PATH, dump_fit_record(record)), (ENGINE_FIT_PATH, dump_engine_fits(fits))):
        if write:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(path.parents[2])}")
        if check:
            if (path.read_text(encoding="utf-8") if path.exists() else "") != text:
                print(f"{path.name} is not what the fit gives now: run benchmarks/sizing.py --cross-validate --write "
                      "and copy `full` into defaults.py and gpus.yaml", file=sys.stderr)
                stale = 1
            else:
                print(f"{path.name} is what the fit gives")
    return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=Path, help="a calibration file (default: the bundled points)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--sources", action="store_true", help="compare the step-time sources per GPU")
    mode.add_argument("--cross-validate", action="store_true", help="fit, and leave each source group out")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--write", action="store_true", help="with --cross-validate: write capacity-fit.yaml")
    out.add_argument("--check", action="store_true", help="with --cross-validate: exit 1 when it is stale")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes for the folds")
    args = parser.parse_args()
    catalog = load_catalog()
    try:
        points = load_points_file(args.points, catalog) if args.points else load_points(catalog)
    except BlueprintError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.cross_validate:
        return cross_validate(catalog, points, workers=args.workers, write=args.write, check=args.check)
    if args.sources:
        sources(catalog, points)
        return 0
    bundled = args.points is None and FIT_PATH.exists() and load_fit_record().digest == fit_digest(points)
    report(catalog, points, bundled=bundled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
