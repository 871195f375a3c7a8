#!/usr/bin/env python3
"""Start-up benchmark (issue 30, item 7): the whole-process time of cheap `nodereg` commands, beside
the same commands of a baseline revision (default `main`) in the same run, against the 0.3 s target.

    python scripts/bench_startup.py --runs 15            # --help, --version, nodes, nodes --help

Each command is run `--runs` times, alternating this checkout and the baseline, so that both meet
the same load. `nodes` lists a small registry (3 nodes, in a temporary DuckDB file made by this
checkout; the baseline reads it at its own schema). Printed per command: median and best wall
clock, and median CPU seconds (user + system) of the process: on a shared machine the CPU seconds
move less than the wall clock, and the best run is the nearest to an idle machine.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_scale import baseline_checkout

TARGET_S = 0.3
COMMANDS = {"--help": ["--help"], "--version": ["--version"], "nodes": ["nodes"], "nodes --help": ["nodes", "--help"]}


def timed(args: list[str], env: dict | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one `python -m registry ARGS` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # run from the checkout's own root: `python -m` puts the working directory first on sys.path
    cwd = env["PYTHONPATH"] if env else str(Path(__file__).resolve().parents[1])
    res = subprocess.run([sys.executable, "-m", "registry", *args], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"`nodereg {' '.join(args)}` failed: {res.stderr.strip()}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def small_registry(path: Path) -> str:
    """A DuckDB registry with three nodes."""
    from registry.db import open_registry
    from registry.nodes import ensure_node

    url = f"duckdb:///{path}"
    reg = open_registry(url)
    with reg.begin() as conn:
        for name in ("alpha", "beta", "gamma"):
            ensure_node(conn, name)
    reg.close()
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="runs of each command (each checkout)")
    ap.add_argument("--baseline", default="main", help="git revision timed beside this checkout ('none': skip)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = small_registry(Path(tmp) / "small.duckdb")
        checkouts = {"this checkout": None}
        if args.baseline != "none":
            code, _ = baseline_checkout(args.baseline, Path(tmp) / "base")
            checkouts = {f"baseline {args.baseline}": {**os.environ, "PYTHONPATH": str(code)}, **checkouts}
        times = {(c, name): [] for c in checkouts for name in COMMANDS}
        for _ in range(args.runs):
            for name, argv in COMMANDS.items():
                for label, env in checkouts.items():
                    times[(label, name)].append(timed(["--db", db, *argv] if name.startswith("nodes") else argv, env))
    out = [{"checkout": label, "command": f"nodereg {name}", "runs": len(t),
            "median_wall_s": statistics.median(w for w, _ in t), "best_wall_s": min(w for w, _ in t),
            "median_cpu_s": statistics.median(c for _, c in t)} for (label, name), t in times.items()]
    if args.json:
        print(json.dumps({"target_s": TARGET_S, "load_average": os.getloadavg()[0], "results": out}, indent=2))
        return
    print(f"start-up, {args.runs} runs each; target < {TARGET_S} s; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    for r in sorted(out, key=lambda r: (r["command"], r["checkout"])):
        ok = "meets" if r["median_wall_s"] < TARGET_S else "misses"
        print(f"  {r['command']:22s} {r['checkout']:18s} median {r['median_wall_s']:.3f} s wall "
              f"(best {r['best_wall_s']:.3f}), median {r['median_cpu_s']:.3f} s CPU: {ok} the target")


if __name__ == "__main__":
    main()
