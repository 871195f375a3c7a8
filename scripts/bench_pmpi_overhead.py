"""Overhead of the PMPI library that `nodereg trace -- mpirun ...` preloads into every rank.

The program is the suite's halo exchange + compute loop (tests/programs/mpi_halo.c) at 1 rank (its
halos go to itself: no rank waits for another, so the figures are the library's cost, not the
neighbours' scheduling) and at 2 ranks, in two sizes: `suite` (the test's size: 64 KiB halos, 400,000-point compute sweeps; about 10 ms a
step) and `calls` (8-byte halos and 1,000 points: nearly all MPI calls, the library's worst case).
Each pair runs it once plainly and once with the library preloaded and recording (LD_PRELOAD and
NODEREG_PMPI_OUT, as the trace sets them), in alternating order. The figure is the program's own
time from MPI_Init to its end (it prints it), so the launcher's start-up does not count, and the CPU
time of the launcher and its ranks (wait4). Printed:
each pair, then the median per-pair slowdown, the slowdown of the medians, and the time the library
adds per MPI call (41 calls a step: 8 fields x 5 calls, one allreduce).
On a shared machine other jobs add noise: the median over pairs is the figure to read.

usage: python scripts/bench_pmpi_overhead.py [--pairs 7] [--ranks 1,2]
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from registry.microbench import mpi, pmpi
from registry.microbench.build import compile_c, source

PROG = Path(__file__).resolve().parents[1] / "tests" / "programs" / "mpi_halo.c"
SIZES = {"suite": ["300", "65536", "400000", "4"], "calls": ["50000", "8", "1000", "1"]}


def run(cmd: list[str], env: dict, out: Path) -> tuple[float, float]:
    """(the program's own MPI_Init-to-end time, slowest rank; the CPU seconds of the launcher and
    its ranks, from wait4: less moved by other jobs than the wall time, launch included)."""
    out.unlink(missing_ok=True)
    proc = subprocess.Popen([*cmd, str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {proc.stderr.read().decode(errors='replace')[:300]}")
    own = max(float(t) for t in re.findall(r"phase all mpi_s [\d.]+ phase_s ([\d.]+)", out.read_text()))
    return own, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--ranks", default="1,2", help="rank counts, comma-separated")
    args = ap.parse_args()
    node_mpi = mpi.find("this measurement needs one")
    prog = compile_c([PROG], "mpi_halo", openmp=False, libs=(), cc=node_mpi.mpicc,
                     extra_flags=(f"-I{source('include')}",), depends=[source("include/nodereg_phase.h")])
    shim = pmpi.library(node_mpi)
    base = {**mpi.environment(node_mpi), "OMPI_MCA_mpi_yield_when_idle": "1"}   # a shared machine
    print(f"{node_mpi.version}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="pmpi-overhead-") as tmp:
        records = Path(tmp) / "records"
        records.mkdir()
        traced_env = {**base, "LD_PRELOAD": str(shim), pmpi.OUT_ENV: str(records)}
        for ranks, (size, extra) in ((int(n), sz) for n in args.ranks.split(",") for sz in SIZES.items()):
            cmd = [*mpi.launcher(node_mpi, ranks), str(prog), *extra]
            print(f"\n{size}: {' '.join(Path(c).name if c == str(prog) else c for c in cmd)}")
            print(f"{'pair':>4} {'plain s':>9} {'traced s':>9} {'+%':>7} {'plain cpu':>10} {'traced cpu':>11} {'+%':>7}")
            plain_s, traced_s, pct, cpu_pct = [], [], [], []
            for i in range(args.pairs):
                order = (False, True) if i % 2 == 0 else (True, False)
                times = {}
                for with_library in order:
                    times[with_library] = run(cmd, traced_env if with_library else base, Path(tmp) / "own.txt")
                (plain, plain_cpu), (traced, traced_cpu) = times[False], times[True]
                plain_s.append(plain)
                traced_s.append(traced)
                pct.append(100 * (traced / plain - 1))
                cpu_pct.append(100 * (traced_cpu / plain_cpu - 1))
                print(f"{i + 1:>4} {plain:>9.4f} {traced:>9.4f} {pct[-1]:>+7.2f} {plain_cpu:>10.3f} {traced_cpu:>11.3f} "
                      f"{cpu_pct[-1]:>+7.2f}", flush=True)
            plain_m, traced_m = statistics.median(plain_s), statistics.median(traced_s)
            print(f"median of pairs {statistics.median(pct):+.2f}% (CPU time {statistics.median(cpu_pct):+.2f}%); medians {plain_m:.4f} s plain, {traced_m:.4f} s "
                  f"traced ({100 * (traced_m / plain_m - 1):+.2f}%); {1e9 * (traced_m - plain_m) / (41 * int(extra[0])):+.0f} "
                  "ns per call")


if __name__ == "__main__":
    main()
