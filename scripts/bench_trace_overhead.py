"""Overhead of `nodereg trace` on a CPU-bound program: plain run vs traced run, interleaved pairs.

The program is scripts/trace_testprog.c's `work:N` (fixed work: FMA chains in registers, one
thread), sized to about 20 s. Each pair runs it once plainly and once under the tracer with the
defaults of `nodereg trace` (0.1 s interval, /proc sampling with working-set reads, OpenMP shim,
marker FIFO). Printed: wall and CPU time of each run, the per-pair slowdown, the tracer's own CPU
time (the most it can take from the program), and the medians. `--no-mix`: traced without perf's
timer samples (source `mix`), to see what they cost beside the default.
On a shared machine other jobs add noise to the wall times: the CPU time of the program (from
wait4's rusage) is the figure that isolates the tracer's effect on the program itself.

usage: python scripts/bench_trace_overhead.py [--pairs 3] [--seconds 20] [--interval 0.1] [--no-mix]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from registry.microbench.build import compile_c, source
from registry.trace.tracer import observe

PROG = Path(__file__).resolve().parent / "trace_testprog.c"


def plain(argv: list[str], env: dict) -> tuple[float, float]:
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.monotonic() - start, usage.ru_utime + usage.ru_stime


def traced(argv: list[str], env: dict, interval: float, mix: bool | None = None) -> tuple[float, float, float]:
    """(wall, program CPU, tracer CPU) of one traced run; the tracer's CPU includes its helpers'
    (perf record and perf script for the instruction mix, objdump): the children's time less the
    program's. `mix`: as observe's (None: where perf can sample)."""
    start, children = time.process_time(), _children_cpu()
    obs = observe(argv, interval_s=interval, env=env, mix=mix)
    helpers = _children_cpu() - children - obs.run.cpu_s
    return obs.run.wall_s, obs.run.cpu_s, time.process_time() - start + max(0.0, helpers)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--no-mix", action="store_true", help="trace without perf's timer samples (source mix)")
    args = ap.parse_args()
    prog = str(compile_c([PROG], "trace_testprog", extra_flags=(f"-I{source('include')}",),
                         depends=[source("include/nodereg_phase.h")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    _, cpu = plain([prog, "work:500"], env)
    millions = 500 * args.seconds / cpu
    argv = [prog, f"work:{millions:.0f}"]
    print(f"program: {' '.join(argv)} (about {args.seconds:g} s of CPU, one thread); interval {args.interval} s; "
          f"mix {'off' if args.no_mix else 'on where perf samples'}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    print(f"{'pair':>4} {'plain wall':>11} {'traced wall':>12} {'wall +%':>8} {'plain cpu':>10} {'traced cpu':>11} "
          f"{'cpu +%':>7} {'tracer cpu':>11}", flush=True)
    wall_pct, cpu_pct, tracer_pct = [], [], []
    for i in range(args.pairs):
        order = [("plain", plain), ("traced", traced)] if i % 2 == 0 else [("traced", traced), ("plain", plain)]
        res = {}
        for name, fn in order:
            mix = False if args.no_mix else None
            res[name] = fn(argv, env) if name == "plain" else fn(argv, env, args.interval, mix)
        (pw, pc), (tw, tc, tracer) = res["plain"], res["traced"]
        wall_pct.append(100 * (tw / pw - 1))
        cpu_pct.append(100 * (tc / pc - 1))
        tracer_pct.append(100 * tracer / tw)
        print(f"{i + 1:>4} {pw:>10.2f}s {tw:>11.2f}s {wall_pct[-1]:>7.2f}% {pc:>9.2f}s {tc:>10.2f}s "
              f"{cpu_pct[-1]:>6.2f}% {tracer:>10.2f}s", flush=True)
    print(f"median slowdown: wall {statistics.median(wall_pct):+.2f}%  program CPU time "
          f"{statistics.median(cpu_pct):+.2f}%  (target < 2%); the tracer itself used "
          f"{statistics.median(tracer_pct):.2f}% of one CPU; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
