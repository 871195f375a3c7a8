#!/usr/bin/env python3
"""Where the time of `nodereg profile --quick` goes (issue 30, item 7: < 45 s on the 2-vCPU VM),
stage by stage, with the figures' stability beside it.

    python scripts/bench_profile_quick.py [--fresh] [--baseline main]

Runs the steps of `nodereg profile --quick` in this process through the same functions the
command calls (registry.profile.profiler: plan, build, the timed sweep, the signature windows)
and prints each stage's wall clock and CPU seconds, the seconds per kernel of the sweep and of
the signature pass, and the stability of the figures: the median coefficient of variation of the
configurations' repetitions and how many are unstable (registry.profile.stats). `--fresh` builds
the driver into an empty cache first, as a first profile on a node does. Nothing is stored.
On a shared machine the wall clock moves with the load (printed); compare stages in one run.
`--baseline REV` (default main; 'none' skips it) runs that revision's copy of this script and this
checkout's, each in a process of its own, alternately for `--rounds` rounds (baseline first), and
ends with each run's total, signature windows and stability side by side: on a shared machine the
load moves between runs, so compare runs of one round, and the best of each side.
"""

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_scale import baseline_checkout

from registry.microbench.driver import Driver, driver_binary
from registry.profile import profiler, runner, signatures


class Stages:
    """Wall and CPU seconds of named stages, in order."""

    def __init__(self):
        self.rows: list[tuple[str, float, float]] = []

    def time(self, name: str, fn):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        self.rows.append((name, time.perf_counter() - wall, time.process_time() - cpu))
        return out


SUMMARY = re.compile(r"load average (?P<load>[\d.]+) .*?signature windows\s+(?P<windows>[\d.]+) s wall.*?"
                     r"(?P<windows_cpu>[\d.]+) s CPU.*?total\s+(?P<total>[\d.]+) s wall.*?"
                     r"median CV (?P<cv>[\d.]+), unstable (?P<unstable>\d+) of (?P<configs>\d+)", re.S)


def run_script(code: Path, fresh: bool) -> str:
    """The output of the copy of this script in the tree `code`, run in a process of its own."""
    script = code / "scripts" / "bench_profile_quick.py"
    alone = ["--baseline", "none"] if "--baseline" in script.read_text() else []   # older copies run alone
    res = subprocess.run([sys.executable, str(script), *alone, *(["--fresh"] if fresh else [])], cwd=code,
                         env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"the script in {code} failed: {res.stderr.strip()[-400:]}")
    return res.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh", action="store_true", help="build the driver into an empty cache first")
    ap.add_argument("--baseline", default="main", help="git revision run beside this checkout ('none': skip)")
    ap.add_argument("--rounds", type=int, default=1, help="alternate baseline and this checkout this many times")
    args = ap.parse_args()
    if args.baseline == "none":
        print(measure(args.fresh))
        return
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        sides = {f"baseline {args.baseline}": baseline_checkout(args.baseline, Path(tmp) / "base")[0],
                 "this checkout": Path(__file__).resolve().parents[1]}
        for round_ in range(1, args.rounds + 1):
            for label, code in sides.items():
                out = run_script(code, args.fresh)
                print(f"round {round_}, {label}:\n{out}\n", flush=True)
                runs.append((round_, label, SUMMARY.search(out)))
    print(f"beside the baseline (alternately, {args.baseline} first; target < 45 s):")
    for round_, label, m in runs:
        print(f"  round {round_} {label:18s} {float(m['total']):7.2f} s (signature windows {float(m['windows']):6.2f} s, "
              f"{float(m['windows_cpu']):5.2f} s CPU of the profiler), median CV {m['cv']}, unstable {m['unstable']} "
              f"of {m['configs']}, load average {m['load']}")
    for label in sides:
        best = min(float(m["total"]) for _, side, m in runs if side == label)
        print(f"  best of {label:18s} {best:7.2f} s")


def measure(fresh: bool) -> str:
    """Run the stages; their report as text."""
    lines = []
    with tempfile.TemporaryDirectory() as cache:
        if fresh:
            os.environ["NODEREG_BUILD_CACHE"] = cache
        stages = Stages()
        opts = profiler.ProfileOptions(node="bench", mode="quick")
        prep = stages.time("inventory and plan", lambda: profiler.prepare(opts))
        stages.time("build" + (" (fresh cache)" if fresh else " (cached)"), lambda: profiler.build(prep))
        local = [c for c in prep.plan.configs if c.ub.family != "mpi"]
        llc = prep.inventory.last_level_cache()
        per_kernel = collections.defaultdict(float)

        def timed(kind: str, config, fn):
            t0 = time.perf_counter()
            out = fn()
            per_kernel[(kind, config.ub.name)] += time.perf_counter() - t0
            return out

        with Driver(driver_binary()) as driver:
            measured = stages.time("timed sweep", lambda: [
                timed("sweep", c, lambda c=c: runner.measure_one(driver, c, prep.policy))
                for c in runner.execution_order(local)])
            signed = signatures.representatives(local)
            last = [time.perf_counter()]

            def advance(config, _estimate):   # the command's progress hook: time each window
                per_kernel[("signature", config.ub.name)] += time.perf_counter() - last[0]
                last[0] = time.perf_counter()

            def signature_pass():
                last[0] = time.perf_counter()
                return signatures.measure_all(driver, local, llc.size_bytes if llc else None, advance,
                                              signatures.passes_for(measured))

            stages.time("signature windows", signature_pass)
    total = sum(w for _, w, _ in stages.rows)
    lines.append(f"profile --quick stages ({len(local)} configurations, {len(signed)} signature windows); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, wall, cpu in stages.rows:
        lines.append(f"  {name:28s} {wall:7.2f} s wall ({wall / total:4.0%}), {cpu:6.2f} s CPU of this process")
    lines.append(f"  {'total':28s} {total:7.2f} s wall (target < 45 s for the whole command)")
    lines.append("seconds by kernel (sweep / signature windows):")
    for kernel in sorted({k for _, k in per_kernel}, key=lambda k: -per_kernel[("sweep", k)] - per_kernel[("signature", k)]):
        lines.append(f"  {kernel:12s} {per_kernel[('sweep', kernel)]:6.2f} / {per_kernel[('signature', kernel)]:6.2f}")
    cvs = [m.stats.cv for m in measured]
    lines.append(f"stability: median CV {statistics.median(cvs):.4f}, unstable {sum(m.unstable for m in measured)} "
          f"of {len(measured)} configurations, {sum(len(m.times) for m in measured)} repetitions "
          f"({sum(sum(m.times) for m in measured):.1f} s timed)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
