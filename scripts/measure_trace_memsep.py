"""Which counter-free measurement tells a memory-bound phase from a compute-bound one? Measured.

Program: scripts/trace_testprog.c -m -b 256 compute:2 stream:2 sleep:1 (FMA chains in registers,
read-modify-write passes over 256 MB, sleep), with 1 and 2 OpenMP threads. Its markers give the
true phases. Candidates, each reduced to one number per phase:

  wss     (default of `nodereg trace`) proc source: memory touched per interval over the LLC size,
          from /proc/PID/clear_refs + smaps_rollup (signature metric proc.wss_llc)
  probe-read   co-running probe (scripts/trace_mem_probe.c), sequential reads over 64 MB every
          100 ms: ns per line, relative to its idle baseline measured before the program starts
  probe-chase  the same probe walking a random pointer chain over 8 MB (LLC-resident when idle)
  cachegrind   valgrind cachegrind with the node's caches on a reduced input (-b 64, 0.3 s phases):
          LL misses per 1000 instructions of each outlined OpenMP function (cachegrind.ll_mpki)

Printed per candidate and thread count: the per-phase medians over the repeats, the ratio
stream / compute, and whether every stream value exceeds every compute value (separated).

usage: python scripts/measure_trace_memsep.py [--repeats 2]
"""

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path

from registry.inventory import collect
from registry.microbench.build import compile_c, source
from registry.measure import cachegrind, signature
from registry.trace import phases
from registry.trace.tracer import observe

HERE = Path(__file__).resolve().parent
PHASES = ["compute:2", "stream:2", "sleep:1"]
PROBES = {"probe-read": ["read", str(64 << 20), "131072", "100"],
          "probe-chase": ["chase", str(8 << 20), "10000", "100"]}


def build(*flags: str) -> str:
    return str(compile_c([HERE / "trace_testprog.c"], "trace_testprog",
                         extra_flags=(f"-I{source('include')}", *flags), depends=[source("include/nodereg_phase.h")]))


def per_phase(times_values: list[tuple[float, float]], marker_phases) -> dict[str, list[float]]:
    out = {}
    for p in marker_phases:
        out[p.name] = [v for t, v in times_values if any(a + 0.05 <= t <= b - 0.05 for a, b in p.intervals)]
    return out


def run_wss(prog: str, threads: int, llc: int) -> dict[str, float]:
    obs = observe([prog, "-m", "-b", "256", *PHASES], env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    found = phases.marker_phases(obs.run.markers, obs.run.wall_s)
    signature.attach(found, obs.run.samples, [], llc, 0.1)
    return {p.name: p.signature["proc"].get("wss_llc", float("nan")) for p in found}


def run_probe(prog: str, probe: str, args: list[str], threads: int) -> dict[str, float]:
    proc = subprocess.Popen([probe, *args], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)  # idle baseline
    obs = observe([prog, "-m", "-b", "256", *PHASES], env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    proc.terminate()
    out, _ = proc.communicate()
    rows = [tuple(map(float, line.split())) for line in out.splitlines() if line.strip()]
    t0 = obs.run.t0_monotonic
    baseline = statistics.median(v for t, v in rows if t < t0 and t > t0 - 0.8)
    found = phases.marker_phases(obs.run.markers, obs.run.wall_s)
    values = per_phase([(t - t0, v / baseline) for t, v in rows], found)
    return {name: statistics.median(v) for name, v in values.items() if v}


def run_cachegrind(prog: str, threads: int, inv) -> tuple[dict[str, float], float]:
    start = time.monotonic()
    stats = cachegrind.run([prog, "-b", "64", "compute:0.3", "stream:0.3", "sleep:0.1"], inv,
                           env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    took = time.monotonic() - start
    m = {fn.split(".")[0]: cachegrind.metrics(c)["ll_mpki"] for fn, c in stats.functions.items()
         if "._omp_fn." in fn}
    return m, took


def cachegrind_slowdown(prog: str, inv) -> float:
    """Wall time under cachegrind over native wall time, on fixed work (one thread)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    argv = [prog, "-b", "64", "work:100", "stream:0"]
    start = time.monotonic()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    native = time.monotonic() - start
    start = time.monotonic()
    cachegrind.run(argv, inv, env=env)
    return (time.monotonic() - start) / native


def report(name: str, threads: int, runs: list[dict[str, float]]) -> None:
    comp = [r["compute"] for r in runs if "compute" in r]
    strm = [r["stream"] for r in runs if "stream" in r]
    slp = [r["sleep"] for r in runs if "sleep" in r]
    med = {k: statistics.median(v) if v else float("nan") for k, v in (("compute", comp), ("stream", strm),
                                                                        ("sleep", slp))}
    ratio = med["stream"] / med["compute"] if med["compute"] else float("inf")
    separated = bool(comp and strm and min(strm) > max(comp))
    print(f"{name:<12} {threads:>2} {med['compute']:>10.4g} {med['stream']:>10.4g} {med['sleep']:>10.4g} "
          f"{ratio:>10.3g} {'yes' if separated else 'NO':>9}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    inv = collect()
    llc = inv.last_level_cache().size_bytes
    prog = build()
    probe = str(compile_c([HERE / "trace_mem_probe.c"], "trace_mem_probe", openmp=False))
    print(f"node: {inv.cpu_model}, {inv.cpu_count} CPUs, LLC {llc >> 20} MB; load average "
          f"{os.getloadavg()[0]:.2f}; program: trace_testprog -b 256 {' '.join(PHASES)}")
    print(f"{'candidate':<12} {'th':>2} {'compute':>10} {'stream':>10} {'sleep':>10} {'str/comp':>10} "
          f"{'separated':>9}", flush=True)
    for threads in (1, 2):
        report("wss", threads, [run_wss(prog, threads, llc) for _ in range(args.repeats)])
        for name, pargs in PROBES.items():
            report(name, threads, [run_probe(prog, probe, pargs, threads) for _ in range(args.repeats)])
        if cachegrind.available():
            cg_prog = build("-mno-avx512f")
            runs, took = [], []
            for _ in range(args.repeats):
                m, t = run_cachegrind(cg_prog, threads, inv)
                runs.append(m)
                took.append(t)
            report("cachegrind", threads, runs)
            print(f"{'':<12}    (cachegrind pass of a 0.7 s reduced input took {statistics.median(took):.1f} s)")
    if cachegrind.available():
        print(f"cachegrind slowdown on fixed work (work:100 + one 64 MB pass, 1 thread): "
              f"{cachegrind_slowdown(build('-mno-avx512f'), inv):.0f}x")
    print(f"load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
