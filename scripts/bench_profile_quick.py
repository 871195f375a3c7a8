#!/usr/bin/env python3
"""Where the time of `nodereg profile --quick` goes (issue 30, item 7: < 45 s on the 2-vCPU VM),
stage by stage, with the figures' stability beside it.

    python scripts/bench_profile_quick.py [--fresh]

Runs the steps of `nodereg profile --quick` in this process through the same functions the
command calls (registry.profile.profiler: plan, build, the timed sweep, the signature windows)
and prints each stage's wall clock and CPU seconds, the seconds per kernel of the sweep and of
the signature pass, and the stability of the figures: the median coefficient of variation of the
configurations' repetitions and how many are unstable (registry.profile.stats). `--fresh` builds
the driver into an empty cache first, as a first profile on a node does. Nothing is stored.
On a shared machine the wall clock moves with the load (printed); compare stages in one run.
"""

import argparse
import collections
import os
import statistics
import tempfile
import time

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh", action="store_true", help="build the driver into an empty cache first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        if args.fresh:
            os.environ["NODEREG_BUILD_CACHE"] = cache
        stages = Stages()
        opts = profiler.ProfileOptions(node="bench", mode="quick")
        prep = stages.time("inventory and plan", lambda: profiler.prepare(opts))
        stages.time("build" + (" (fresh cache)" if args.fresh else " (cached)"), lambda: profiler.build(prep))
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
            stages.time("signature windows", lambda: [
                timed("signature", c, lambda c=c: signatures.measure(driver, c, llc.size_bytes if llc else None))
                for c in signed])
    total = sum(w for _, w, _ in stages.rows)
    print(f"profile --quick stages ({len(local)} configurations, {len(signed)} signature windows); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, wall, cpu in stages.rows:
        print(f"  {name:28s} {wall:7.2f} s wall ({wall / total:4.0%}), {cpu:6.2f} s CPU of this process")
    print(f"  {'total':28s} {total:7.2f} s wall (target < 45 s for the whole command)")
    print("seconds by kernel (sweep / signature windows):")
    for kernel in sorted({k for _, k in per_kernel}, key=lambda k: -per_kernel[("sweep", k)] - per_kernel[("signature", k)]):
        print(f"  {kernel:12s} {per_kernel[('sweep', kernel)]:6.2f} / {per_kernel[('signature', kernel)]:6.2f}")
    cvs = [m.stats.cv for m in measured]
    print(f"stability: median CV {statistics.median(cvs):.4f}, unstable {sum(m.unstable for m in measured)} "
          f"of {len(measured)} configurations, {sum(len(m.times) for m in measured)} repetitions "
          f"({sum(sum(m.times) for m in measured):.1f} s timed)")


if __name__ == "__main__":
    main()
