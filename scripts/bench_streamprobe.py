"""Slowdown of the stream probe (`nodereg trace --streams`) on small inputs of the test programs.

Each program of tests/programs (triad, matmul, nbody; built like tests/test_streamprobe.py, two
OpenMP threads) runs plainly `--runs` times (median) and once under each probe, side by side: our
valgrind tool (nrstreams, microbench/streamtool.c) and the fallback, valgrind lackey piping every
access into microbench/streamprobe.c; both record every access (`--every 1`) and, to measure what
sampling saves, one window of 2^20 accesses in eight (`--every 8`). Printed: wall and CPU seconds
(children's user + system, from getrusage) of both, and the slowdowns. On a shared, busy machine
the wall figures are indicative; the CPU ratio is the probe's own cost. Valgrind runs one thread
at a time, so the wall ratio of a two-thread program includes up to 2x for that alone.

usage: python scripts/bench_streamprobe.py [--runs 5] [--scale 1] [--probes nrstreams,lackey] [--every 1,8]
"""

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from registry.measure import streams

PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"
INPUTS = {"triad": ["200000", "5"], "matmul": ["120"], "nbody": ["400", "2"]}


def build(name: str, out: Path) -> Path:
    exe = out / name
    subprocess.run(["cc", "-O2", "-fopenmp", "-fno-tree-vectorize", str(PROGRAMS / f"{name}.c"), "-o", str(exe),
                    "-lm"], check=True)
    return exe


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(fn) -> tuple[float, float]:
    """(wall, CPU of the children it waited for) of fn()."""
    cpu, start = children_cpu(), time.monotonic()
    fn()
    return time.monotonic() - start, children_cpu() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="plain runs per program (median)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the first input argument")
    ap.add_argument("--probes", default=f"{streams.streamtool.TOOL},lackey", help="valgrind tools, in order")
    ap.add_argument("--every", default="1,8", help="sampling: one window in K, per probe run")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    print(f"{'program':<8} {'input':<12} {'plain_s':>8} {'plain_cpu':>9} {'probe':<10} {'every':>5} {'probe_s':>8} "
          f"{'probe_cpu':>9} {'wall_x':>7} {'cpu_x':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, inputs in INPUTS.items():
            argv = [str(build(name, Path(tmp))), str(int(int(inputs[0]) * args.scale)), *inputs[1:]]
            plain = [measured(lambda: subprocess.run(argv, check=True, stdout=subprocess.DEVNULL))
                     for _ in range(args.runs)]
            wall, cpu = statistics.median(w for w, _ in plain), statistics.median(c for _, c in plain)
            for tool in args.probes.split(","):
                for every in map(int, args.every.split(",")):
                    p_wall, p_cpu = measured(lambda: streams.run(argv, every=every, tool=tool))
                    print(f"{name:<8} {' '.join(argv[1:]):<12} {wall:8.3f} {cpu:9.3f} {tool:<10} {every:5d} "
                          f"{p_wall:8.2f} {p_cpu:9.2f} {p_wall / wall:7.0f} {p_cpu / max(cpu, 1e-3):7.0f}")


if __name__ == "__main__":
    main()
