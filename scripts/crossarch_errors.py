#!/usr/bin/env python3
"""Where the cross-node prediction error comes from (docs/crossarch.md, "Where the error is").

    nodereg --db URL evaluate --calibrate 3 --seed 5 --models similar-runs --predictions p.csv
    python scripts/crossarch_errors.py p.csv --db URL [--model similar-runs] [--top 15] [--json FILE]

Reads the predictions CSV of `evaluate --calibrate` (one row per prediction) and the node table of
the registry, and splits the absolute error |predicted / actual - 1| of one model by: app group, the
app's kind (one CPU, all CPUs, compression's `all-2024`, Geekbench, Redis, static web), the target's
vCPUs over the largest calibration node's (log2 bins), the target's architecture and vCPUs, its CPU
family and the app (the largest shares of the tail first). Each row: predictions, median and 90th
percentile error, the median signed log error (log predicted / actual; < 0: predicted too fast), and
the share of the tail: the predictions above the model's overall 90th percentile that fall there.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from registry.crossarch.data import app_group, load, single_threaded
from registry.db import open_registry
from registry.errors import UserError

console = Console(width=160)
NEEDED = {"model", "app", "node", "calibration", "predicted_s", "actual_s"}


def app_kind(app: str) -> str:
    """The kind of app the error is split by: compression by thread class (`1t`, `all`, `all-2024`),
    the other suites by name (geekbench single and multi apart)."""
    parts = app.split(":")
    if parts[0] == "compression":
        return f"compression:{parts[-1]}"
    if parts[0] == "geekbench":
        return f"geekbench:{parts[-1]}"
    if parts[0] in ("redis", "static_web", "llm"):
        return parts[0]
    return "one CPU" if single_threaded(app) else "all CPUs"


def annotate(frame: pd.DataFrame, nodes: pd.DataFrame) -> pd.DataFrame:
    """The predictions with their error, signed log error and the columns they are split by."""
    vcpus = nodes["n_cpus"].astype(float).to_dict()
    largest = {c: max(vcpus.get(n, np.nan) for n in c.split(";")) for c in frame["calibration"].unique()}
    out = frame.assign(ae=(frame["predicted_s"] / frame["actual_s"] - 1).abs(),
                       log_error=np.log(frame["predicted_s"] / frame["actual_s"]),
                       group=frame["app"].map(app_group), kind=frame["app"].map(app_kind),
                       architecture=frame["node"].map(nodes["architecture"].astype(str)),
                       cpu_family=frame["node"].map(nodes["cpu_family"].astype(str)),
                       vcpus=frame["node"].map(vcpus))
    ratio = np.log2(out["vcpus"] / out["calibration"].map(largest))
    out["vcpus_over_calibration"] = pd.cut(ratio, [-np.inf, -3, -1, 0, 1, 3, np.inf],
                                           labels=["< 1/8", "1/8-1/2", "1/2-1", "1-2", "2-8", "> 8"])
    out["target_vcpus"] = pd.cut(out["vcpus"], [0, 2, 8, 32, 64, 128, np.inf],
                                 labels=["1-2", "3-8", "9-32", "33-64", "65-128", "> 128"])
    out["tail"] = out["ae"] > out["ae"].quantile(0.9)
    return out


def split(frame: pd.DataFrame, by: str, top: int | None = None) -> list[dict]:
    """One row per value of `by`: predictions, share, median / p90 error, median log error, tail share."""
    tail = max(int(frame["tail"].sum()), 1)
    rows = []
    for value, g in frame.groupby(by, sort=True, observed=True):   # bins in their order
        rows.append({by: str(value), "predictions": len(g), "share %": round(100 * len(g) / len(frame), 1),
                     "median err %": round(100 * g["ae"].median(), 1),
                     "p90 err %": round(100 * g["ae"].quantile(0.9), 1),
                     "median log error": round(float(g["log_error"].median()), 3),
                     "tail share %": round(100 * g["tail"].sum() / tail, 1)})
    if top:
        rows = sorted(rows, key=lambda r: -r["tail share %"])[:top]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("predictions", type=Path, help="CSV written by `nodereg evaluate --calibrate K --predictions`")
    ap.add_argument("--db", required=True, help="registry URL holding the suite the predictions were made on")
    ap.add_argument("--model", default="similar-runs", help="the model whose error is split (default similar-runs)")
    ap.add_argument("--top", type=int, default=15, help="CPU families and apps shown (largest tail share first)")
    ap.add_argument("--json", type=Path, help="also write every table to this JSON file")
    args = ap.parse_args()
    try:
        frame = pd.read_csv(args.predictions)
    except (OSError, ValueError) as exc:
        sys.exit(f"error: cannot read {args.predictions}: {exc}")
    missing = sorted(NEEDED - set(frame.columns))
    if missing:
        sys.exit(f"error: {args.predictions} is not a predictions CSV of `evaluate --calibrate` "
                 f"(no column {', '.join(missing)})")
    frame = frame[frame["model"] == args.model].dropna(subset=["predicted_s", "actual_s"])
    if frame.empty:
        sys.exit(f"error: no prediction of model {args.model!r} in {args.predictions}")
    try:
        nodes = load(open_registry(args.db, readonly=True)).nodes
    except UserError as exc:
        sys.exit(f"error: {exc}")
    frame = annotate(frame, nodes)
    console.print(f"{args.model}: {len(frame)} predictions, median error {100 * frame['ae'].median():.1f}%, "
                  f"90th percentile {100 * frame['ae'].quantile(0.9):.1f}% (the tail: above it)")
    tables = {}
    for by, top in (("group", None), ("kind", None), ("vcpus_over_calibration", None), ("target_vcpus", None),
                    ("architecture", None), ("cpu_family", args.top), ("app", args.top)):
        rows = tables[by] = split(frame, by, top)
        table = Table(title=f"{args.model}: error by {by.replace('_', ' ')}", header_style="bold")
        for c in rows[0]:
            table.add_column(c, justify="left" if c == by else "right")
        for r in rows:
            table.add_row(*(str(v) for v in r.values()))
        console.print(table)
    if args.json:
        args.json.write_text(json.dumps(tables, indent=1))


if __name__ == "__main__":
    main()
