#!/usr/bin/env python3
"""How fast `nodereg match APP --from-runs` answers over every imported node (issue 27 item 6: under 1 s).

    python scripts/bench_match_runs.py --db URL [--apps A,B,...] [--repeat 5] [--model similar-runs]

For each app (default: one one-CPU Geekbench workload, one all-CPU compression level, one Redis
pipeline, each measured on its two first nodes of different architectures): the command itself, end
to end (a fresh process, as a user runs it, `--json`), and in-process the two parts of its work:
reading the suite (registry.crossarch.data.load) and predicting and ranking every node
(registry.crossarch.project.from_runs). Prints the median time of each beside the number of nodes.
The registry is opened read-only; figures taken on a shared machine are noisy: say so beside them.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from registry.crossarch.data import app_runs, load, single_threaded
from registry.crossarch.project import from_runs
from registry.db import open_registry
from registry.errors import UserError

DEFAULT_APPS = ("geekbench:clang:single", "compression:brotli-4:compress:all", "redis:set:p16")
console = Console(width=140)


def calibration(data, times: dict[str, float]) -> list[str]:
    """The app's first measured node of each architecture (two nodes when it ran on both)."""
    chosen: dict[str, str] = {}
    for node in sorted(times):
        if node in data.nodes.index:
            chosen.setdefault(data.architecture(node), node)
    return sorted(chosen.values())


def timed(fn, repeat: int) -> tuple[float, object]:
    """The median wall time of `repeat` calls of fn, and its last result."""
    seconds, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="registry URL holding the imported suite (opened read-only)")
    ap.add_argument("--apps", default=",".join(DEFAULT_APPS), help="apps to match (comma-separated)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each measurement (the median is shown)")
    ap.add_argument("--model", default="similar-runs", help="projection model (default similar-runs)")
    args = ap.parse_args()
    if args.repeat < 1:
        sys.exit("error: --repeat must be at least 1")
    try:
        reg = open_registry(args.db, readonly=True)
        load_s, data = timed(lambda: load(reg), args.repeat)
    except (UserError, FileNotFoundError) as exc:
        sys.exit(f"error: {exc}")
    exe = Path(sys.executable).with_name("nodereg")
    table = Table(title=f"match APP --from-runs over {len(data.nodes)} nodes ({args.model}; median of "
                        f"{args.repeat}; shared machine)", header_style="bold")
    for column in ("app", "measured on", "nodes", "predicted", "command s", "read suite s", "predict+rank s"):
        table.add_column(column, justify="left" if column in ("app", "measured on") else "right")
    for app in [a.strip() for a in args.apps.split(",") if a.strip()]:
        try:
            times, all_single = app_runs(reg, app)
        except UserError as exc:
            console.print(f"skipped {app}: {exc}", markup=False)
            continue
        cal = calibration(data, times)
        measured = {n: times[n] for n in cal}
        single = single_threaded(app) or all_single
        rank_s, ranked = timed(lambda: from_runs(data, app, measured, args.model, {}, single), args.repeat)
        command = [str(exe), "--db", args.db, "match", app, "--from-runs", "--runs-on", ",".join(cal),
                   "--model", args.model, "--json"]

        def run_command():
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"error: {' '.join(command)}: {done.stderr.strip()}")

        command_s, _ = timed(run_command, args.repeat)
        table.add_row(app, ", ".join(cal), str(len(data.nodes)), str(len(ranked)), f"{command_s:.2f}",
                      f"{load_s:.2f}", f"{rank_s:.2f}")
    console.print(table)
    console.print("target: the command answers in under 1 s (issue 27 item 6)")


if __name__ == "__main__":
    main()
