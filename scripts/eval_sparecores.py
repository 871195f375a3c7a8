#!/usr/bin/env python3
"""Cross-architecture accuracy on the Spare Cores data (issue 27 items 2 and 4; docs/crossarch.md).

    python scripts/eval_sparecores.py [--db URL] [--k 1,3] [--seeds 0-2] [--apps N] [--models M,...]
                                      [--calibrate-on aarch64|x86_64] [--cache DIR] [--json FILE]

Uses the registry --db when it already holds the imported suite; otherwise unpacks
../shared/datasets/sparecores/*.tar.gz ($NODEREG_SHARED/datasets/sparecores when set) into a cache
folder (once) and imports it into a DuckDB file there (once). Then, for each K, every app measured on
K calibration nodes of different CPU families (seeds as given), predicted on every node of another
family by every model and baseline, and the two oracle single ratios (any reference; the
micro-benchmarks only): the full table (overall, by app group, x86 -> ARM and ARM -> x86) and the
issue's targets, met or not. With --calibrate-on, the calibration nodes are drawn from that
architecture alone: every fold predicts across architectures.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from platformdirs import user_cache_dir
from rich.console import Console
from rich.table import Table

from registry.cpulist import parse as parse_list
from registry.crossarch import evaluate as cal
from registry.crossarch import report
from registry.crossarch.data import load
from registry.db import open_registry
from registry.errors import UserError

MODELS = ["similar-runs", "geekbench-ratio", "best-micro-ratio", "vcpu-ratio"]
# the learned models (registry/models/learned_runs.py) fit boosted trees in every fold: add them with
# --models similar-runs,similar-runs-gbt,paris,... (with --apps 3 the three seeds take minutes, not an hour)
console = Console(width=160)


def _registry(args):
    """The registry holding the suite: --db if given, else an import cached beside the unpacked data."""
    if args.db:
        return open_registry(args.db, readonly=True)
    from registry.io.sparecores.archive import shared_dir, unpack
    from registry.io.sparecores.store import import_sparecores

    db = args.cache / "sparecores.duckdb"
    if not db.exists():
        inspector, specs = unpack(shared_dir(Path(__file__).resolve().parents[1]), args.cache)
        t0 = time.perf_counter()
        partial = db.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        reg = open_registry(f"duckdb:///{partial}")
        import_sparecores(reg, inspector, specs, workers=2)
        reg.close()
        partial.rename(db)
        console.print(f"imported {inspector} into {db} in {time.perf_counter() - t0:.0f} s")
    return open_registry(f"duckdb:///{db}", readonly=True)


def _table(title, rows, columns):
    table = Table(title=title, header_style="bold")
    for c in columns:
        table.add_column(c, justify="left" if c in ("model", "kind") else "right")
    for r in rows:
        table.add_row(*("" if r.get(c) is None else str(r.get(c)) for c in columns))
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="registry URL that holds the imported suite (default: import into the cache)")
    ap.add_argument("--k", default="1,3", help="calibration node counts (default 1,3)")
    ap.add_argument("--seeds", default="0-2", help="seeds of the calibration draw (default 0-2)")
    ap.add_argument("--apps", type=int, default=None, help="only every n-th app (a quicker look)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"projection models to run, each non-baseline one checked against the targets (default {','.join(MODELS)})")
    ap.add_argument("--cache", type=Path, default=Path(user_cache_dir("nodereg")) / "sparecores",
                    help="where the archives are unpacked and imported (reused)")
    ap.add_argument("--calibrate-on", choices=list(cal.DIRECTIONS),
                    help="draw the calibration nodes from this architecture only (the ARM -> x86 question)")
    ap.add_argument("--json", type=Path, help="also write every summary row to this JSON file")
    args = ap.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    try:
        ks, seeds = parse_list(args.k), parse_list(args.seeds)
    except UserError:
        sys.exit(f"error: --k {args.k!r} / --seeds {args.seeds!r}: expected numbers like 1,3 or 0-2")
    try:
        t0 = time.perf_counter()
        data = load(_registry(args))
    except (UserError, FileNotFoundError) as exc:
        sys.exit(f"error: {exc}")
    apps = data.apps[::args.apps] if args.apps else data.apps
    console.print(f"{len(apps)} apps, {len(data.nodes)} nodes, {data.nodes['cpu_family'].nunique()} CPU families, "
                  f"{len(data.costs.columns)} micro-benchmark configs; read in {time.perf_counter() - t0:.1f} s")
    out = {}
    for k in ks:
        t0 = time.perf_counter()
        try:
            result = cal.run(data, models, k, seeds, apps=apps, on=args.calibrate_on)
        except UserError as exc:
            sys.exit(f"error: {exc}")
        summary = cal.summary(data, result)
        out[k] = summary
        on = f", all {args.calibrate_on}" if args.calibrate_on else ""
        title = f"K={k}{on}, seeds {args.seeds}: {time.perf_counter() - t0:.0f} s (shared 2-core machine)"
        _table(title, report.overall_rows(summary), ["model", "kind", "folds", "predictions", "median err %",
                                                      "p90 err %", "Spearman", "top-1 %", "regret %", "coverage %"])
        for what, rows, columns in report.slice_tables(summary, ("median_ae", "p90_ae", "coverage")):
            _table(f"K={k}: {what}", rows, columns)
        seconds = ", ".join(f"{m} {s:.0f} s" for m, s in result.seconds.items())
        console.print(f"  fit and predict time: {seconds}", markup=False)
        for model in [m for m in models if result.kinds.get(m) == "model"]:
            for text, ok in report.targets(summary, k, model, args.calibrate_on):
                console.print(f"  target {'met    ' if ok else 'NOT met'}  {model}: {text}", markup=False)
        for model, why in result.errors.items():
            console.print(f"  not evaluated: {model}: {why}", markup=False)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
