#!/usr/bin/env python3
"""Predict again, with a baseline revision and with this checkout, what a finished run of
scripts/validate_apps.py predicted: the same profiles, traces and measured runs, so that the two
columns differ by the code alone (docs/validation.md quotes what this prints).

    python scripts/validate_reproject.py REGISTRY.duckdb [--baseline REV] [--node val-1c] [--json]
                                         [--baseline-without SOURCE]

For every traced app: `nodereg match APP --no-store --json` on a copy of the registry (nothing is
written to it), by `git archive REV` unpacked in a temporary folder and by this checkout; the error
of each one's prediction for NODE against the median of the app's measured runs there.
`--baseline-without SOURCE`: the baseline predicts on a copy without the signatures of SOURCE
(a signature source that its revision did not measure, such as `mix`: it would read them too),
so the two columns differ by that source and the code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
from rich.console import Console
from rich.table import Table

from bench_scale import baseline_checkout

REPO = Path(__file__).resolve().parent.parent


def measured(db: Path, node: str) -> dict[str, float]:
    """Each traced app's median measured time on `node`."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("""
            SELECT a.name, median(r.time_s) FROM runs r JOIN apps a ON a.app_id = r.app_id
            JOIN nodes n ON n.node_id = r.node_id
            WHERE n.name = ? AND a.app_id IN (SELECT app_id FROM traces) GROUP BY a.name ORDER BY a.name""",
                           [node]).fetchall()
    finally:
        con.close()
    return {app: float(t) for app, t in rows}


def predicted(db: Path, app: str, node: str, code: Path) -> tuple[float, float, float] | None:
    """`nodereg match APP` by the checkout `code`: its prediction for `node` and the interval's ends
    (None: none)."""
    res = subprocess.run([sys.executable, "-m", "registry", "--db", str(db), "match", app, "--no-store", "--json"],
                         capture_output=True, text=True, cwd=str(code), env={**os.environ, "PYTHONPATH": str(code)})
    if res.returncode:
        raise SystemExit(f"match {app} failed ({code}): {res.stderr.strip()}")
    return next(((p["predicted_s"], p["low_s"], p["high_s"]) for p in json.loads(res.stdout)["predictions"]
                 if p["node"] == node), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("registry", type=Path, help="the DuckDB registry of a validate_apps.py run")
    ap.add_argument("--baseline", default="main", help="git revision predicted beside this checkout")
    ap.add_argument("--node", default="val-1c", help="the variant whose predictions are scored")
    ap.add_argument("--baseline-without", metavar="SOURCE",
                    help="signature source deleted from the baseline's copy of the registry")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.registry.is_file():
        raise SystemExit(f"no registry at {args.registry}")
    with tempfile.TemporaryDirectory() as tmp:
        copy, base_copy = Path(tmp) / "registry.duckdb", Path(tmp) / "baseline.duckdb"
        shutil.copy(args.registry, copy)
        shutil.copy(args.registry, base_copy)
        if args.baseline_without:
            con = duckdb.connect(str(base_copy))
            con.execute("DELETE FROM signatures WHERE source = ?", [args.baseline_without])
            con.close()
        base, _ = baseline_checkout(args.baseline, Path(tmp) / "base")
        times = measured(copy, args.node)
        rows = [{"app": app, "measured_s": t, "baseline_s": predicted(base_copy, app, args.node, base),
                 "this_s": predicted(copy, app, args.node, REPO)} for app, t in times.items()]
    for r in rows:
        for side in ("baseline", "this"):
            got = r.pop(f"{side}_s")
            r[f"{side}_s"], r[f"{side}_low_s"], r[f"{side}_high_s"] = got or (None, None, None)
            r[f"{side}_error"] = got[0] / r["measured_s"] - 1 if got else None
            r[f"{side}_inside"] = bool(got and got[1] <= r["measured_s"] <= got[2])
    scored = [r for r in rows if r["baseline_s"] is not None and r["this_s"] is not None]
    if len(scored) < len(rows):
        print(f"not predicted for {args.node} by one side, left out: "
              f"{', '.join(r['app'] for r in rows if r not in scored)}", file=sys.stderr)
    rows = scored
    summary = {side: {"median_abs_error": statistics.median(abs(r[f"{side}_error"]) for r in rows),
                      "worst_error": max((r[f"{side}_error"] for r in rows), key=abs),
                      "inside_interval": sum(r[f"{side}_inside"] for r in rows)}
               for side in ("baseline", "this") if rows}
    if args.json:
        print(json.dumps({"registry": str(args.registry), "node": args.node, "baseline": args.baseline,
                          "baseline_without": args.baseline_without,
                          "apps": rows, "summary": summary}, indent=2))
        return
    table = Table(title=f"{args.registry}: predictions for {args.node}, {args.baseline} beside this checkout")
    for col in ("app", "measured s", f"{args.baseline} s", "error", "interval", "this checkout s", "error", "interval"):
        table.add_column(col, justify="left" if col == "app" else "right")
    for r in rows:
        table.add_row(r["app"], f"{r['measured_s']:.3g}",
                      *(x for side in ("baseline", "this") for x in (
                          f"{r[f'{side}_s']:.3g}", f"{r[f'{side}_error']:+.1%}",
                          f"{r[f'{side}_low_s']:.3g} - {r[f'{side}_high_s']:.3g}" + (" *" if not r[f"{side}_inside"] else ""))))
    console = Console()
    console.print(table)
    for side, s in summary.items():
        console.print(f"{side}: median |error| {s['median_abs_error']:.1%}, worst {s['worst_error']:+.1%}, "
                      f"{s['inside_interval']} of {len(rows)} measured medians inside the interval (* outside)")


if __name__ == "__main__":
    main()
