"""Per-phase signatures: a few named metrics per source, comparable between phases and microbenchmarks.

Sources and metrics (see docs/trace.md for what they mean and how they were chosen):

- proc (always): cpu_util, threads_active, rss_mb, wss_mb, wss_llc, minflt_per_s, majflt_per_s,
  ctxsw_per_s, read_mb_s, write_mb_s
- counters (perf, where the node has a PMU): ipc, cache_miss_rate, misses_per_kinst
- cachegrind (with --cachegrind): see `registry.trace.cachegrind.METRICS`

`wss_llc` (working set over the last-level cache size) is what tells a memory-bound phase from a
compute-bound one on nodes without counters: > 1 means the phase touches more memory per interval
than the cache holds. `measure_signature` measures the same sources for any command, so that a
microbenchmark config run under it on the same node gets a signature comparable with a phase's.
"""

import math
from collections.abc import Sequence

import numpy as np

from registry.errors import UserError
from registry.trace import cachegrind
from registry.trace import counters as perf
from registry.trace.tracefile import Phase

MEAN_METRICS = ("cpu_util", "threads_active", "minflt_per_s", "majflt_per_s", "ctxsw_per_s", "read_mb_s",
                "write_mb_s")


def rows_in(samples: list[dict], intervals: Sequence[Sequence[float]]) -> list[dict]:
    """Samples whose interval's midpoint lies in one of `intervals`; for a phase shorter than one
    interval, the sample whose interval contains the phase's midpoint."""
    chosen, prev = [], 0.0
    spans = []
    for row in samples:
        spans.append((prev, row["t_s"]))
        mid = (prev + row["t_s"]) / 2
        if any(a <= mid <= b for a, b in intervals):
            chosen.append(row)
        prev = row["t_s"]
    if chosen or not samples or not intervals:
        return chosen
    a, b = intervals[0]
    mid = (a + b) / 2
    return [row for row, (lo, hi) in zip(samples, spans) if lo <= mid <= hi][:1]


def wss_reads(samples: list[dict], intervals: Sequence[Sequence[float]], slack_s: float) -> list[float]:
    """Working-set reads whose window lies inside one of `intervals` (`slack_s` of tolerance at each
    end, for boundaries known to one interval). A read's window is the union of all memory touched
    since the previous read, so one reaching into a neighbouring phase would carry that phase's."""
    out = []
    for r in samples:
        value, window = r.get("wss_mb", math.nan), r.get("wss_window_s", math.nan)
        if math.isnan(value) or math.isnan(window):
            continue
        start, end = r["t_s"] - window, r["t_s"]
        if any(start >= a - slack_s and end <= b + slack_s for a, b in intervals):
            out.append(value)
    return out


def proc_signature(rows: list[dict], llc_bytes: int | None = None, wss: list[float] | None = None) -> dict[str, float]:
    """Means of the rates over `rows`, the peak RSS, and the median of the working-set reads `wss`."""
    if not rows:
        return {}
    sig = {m: float(np.mean([r[m] for r in rows])) for m in MEAN_METRICS if m in rows[0]}
    sig["rss_mb"] = float(max(r["rss_mb"] for r in rows))
    if wss:
        sig["wss_mb"] = float(np.median(wss))
        if llc_bytes:
            sig["wss_llc"] = sig["wss_mb"] * 1024 * 1024 / llc_bytes
    return sig


def counter_signature(rows: list[dict]) -> dict[str, float]:
    totals = {e: sum(r[e] for r in rows if e in r) for e in perf.EVENTS if any(e in r for r in rows)}
    if not totals:
        return {}
    return {k: v for k, v in perf.derived(totals).items() if not math.isnan(v)}


def attach(phases: list[Phase], samples: list[dict], counter_rows: list[dict], llc_bytes: int | None,
           interval_s: float) -> None:
    """Fill each phase's `proc` (and `counters`) signature from the samples it spans."""
    for ph in phases:
        intervals = ph.intervals or [[ph.start_s, ph.end_s]]
        proc = proc_signature(rows_in(samples, intervals), llc_bytes, wss_reads(samples, intervals, interval_s))
        if proc:
            ph.signature["proc"] = proc
        if counter_rows:
            cnt = counter_signature(rows_in(counter_rows, intervals))
            if cnt:
                ph.signature["counters"] = cnt


def measure_signature(argv: list[str], *, cpus: list[int] | None = None, llc_bytes: int | None = None,
                      interval_s: float = 0.1, cachegrind_inventory=None, env: dict | None = None,
                      timeout_s: float | None = None) -> dict[str, dict[str, float]]:
    """Run `argv` once and return its whole-run signature {source: {metric: value}}.

    The same sources, metric names and sampling as `nodereg trace` uses for phases, so a
    microbenchmark config measured with this on a node compares with the phases traced there.
    `cachegrind_inventory` (an Inventory, or None to skip) adds a cachegrind pass with the node's caches.
    Raises UserError when the command fails. The working set needs the command to live a few
    intervals (>= 0.3 s at the default interval): repeat a short kernel, or pass a smaller interval.
    """
    from registry.trace.tracer import observe  # tracer builds on this module: imported at call time

    obs = observe(argv, interval_s=interval_s, timeout_s=timeout_s, cpus=cpus, env=env, omp=False)
    if obs.run.status != "ok":
        raise UserError(f"{argv[0]} {obs.run.status} (exit status {obs.run.exit_status}) while measuring "
                        "its signature")
    whole = [[0.0, obs.run.wall_s]]
    sig = {"proc": proc_signature(rows_in(obs.run.samples, whole), llc_bytes,
                                  wss_reads(obs.run.samples, whole, interval_s))}
    if obs.counter_rows:
        sig["counters"] = counter_signature(obs.counter_rows)
    if cachegrind_inventory is not None:
        stats = cachegrind.run(argv, cachegrind_inventory, cpus=cpus, env=env)
        sig["cachegrind"] = cachegrind.metrics(stats.total)
    return {src: m for src, m in sig.items() if m}
