"""Per-phase signatures: a few named metrics per source, comparable between phases and microbenchmarks.

Sources and metrics (see docs/trace.md for what they mean and how they were chosen):

- proc (always): cpu_util, threads_active, rss_mb, wss_mb, wss_llc, minflt_per_s, majflt_per_s,
  ctxsw_per_s, read_mb_s, write_mb_s
- counters (perf, where the node has a PMU): ipc, cache_miss_rate, misses_per_kinst
- cachegrind (with --cachegrind): see `registry.measure.cachegrind.METRICS`
- sched (phases only): demand, the CPUs the phase kept busy plus those its threads waited for on a
  run queue: what it would have used on a host of its own. Not a feature of any config, so it never
  enters a distance; `nodereg match` splits a phase's serial and parallel parts with it
  (registry.match.project.parallel_use).

`wss_llc` (working set over the last-level cache size) is what tells a memory-bound phase from a
compute-bound one on nodes without counters: > 1 means the phase touches more memory per interval
than the cache holds. registry/profile/signatures.py measures the same sources for the microbenchmark
configs, so that a config's signature compares with a phase's on the same node.
"""

import math
from collections.abc import Sequence

import numpy as np

from registry.measure import counters as perf
from registry.io.tracefile import Phase

MEAN_METRICS = ("cpu_util", "threads_active", "minflt_per_s", "majflt_per_s", "ctxsw_per_s", "read_mb_s",
                "write_mb_s")


def spans_in(samples: list[dict], intervals: Sequence[Sequence[float]]) -> list[tuple[dict, float]]:
    """Samples whose interval's midpoint lies in one of `intervals`, each with its interval's length
    in seconds; for a phase shorter than one interval, the sample whose interval contains the
    phase's midpoint."""
    chosen, prev = [], 0.0
    spans = []
    for row in samples:
        spans.append((prev, row["t_s"]))
        mid = (prev + row["t_s"]) / 2
        if any(a <= mid <= b for a, b in intervals):
            chosen.append((row, row["t_s"] - prev))
        prev = row["t_s"]
    if chosen or not samples or not intervals:
        return chosen
    a, b = intervals[0]
    mid = (a + b) / 2
    return [(row, hi - lo) for row, (lo, hi) in zip(samples, spans) if lo <= mid <= hi][:1]


def rows_in(samples: list[dict], intervals: Sequence[Sequence[float]]) -> list[dict]:
    """The samples of `spans_in`, without their lengths."""
    return [row for row, _ in spans_in(samples, intervals)]


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


def proc_signature(spans: list[tuple[dict, float]], llc_bytes: int | None = None,
                   wss: list[float] | None = None) -> dict[str, float]:
    """Means of the rates over the samples `spans` (`spans_in`), weighted by their intervals' lengths,
    the peak RSS, and the median of the working-set reads `wss`. Weighted: the last sample of a
    run is cut short at its exit (6 ms of a 0.56 s run of sysbench), and as one plain sample of six
    it counted as much as a whole 0.1 s one (with its CPU time lost then, before the runner's
    `TreeSampler.account_exit`, it put the run's CPU use at 1.55 CPUs instead of 1.66)."""
    if not spans:
        return {}
    rows = [r for r, _ in spans]
    seconds = np.array([max(s, 0.0) for _, s in spans])
    weights = seconds if seconds.sum() > 0 else None
    sig = {m: float(np.average([r[m] for r in rows], weights=weights)) for m in MEAN_METRICS if m in rows[0]}
    sig["rss_mb"] = float(max(r["rss_mb"] for r in rows))
    if wss:
        sig["wss_mb"] = float(np.median(wss))
        if llc_bytes:
            sig["wss_llc"] = sig["wss_mb"] * 1024 * 1024 / llc_bytes
    return sig


def sched_demand(spans: list[tuple[dict, float]]) -> float | None:
    """CPU use plus run-queue wait, weighted by the intervals' lengths (None: not sampled)."""
    rows = [(r, s) for r, s in spans if "runq_util" in r and s > 0]
    if not rows:
        return None
    return float(np.average([r["cpu_util"] + r["runq_util"] for r, _ in rows], weights=[s for _, s in rows]))


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
        proc = proc_signature(spans_in(samples, intervals), llc_bytes, wss_reads(samples, intervals, interval_s))
        if proc:
            ph.signature["proc"] = proc
        demand = sched_demand(spans_in(samples, intervals))
        if demand is not None:
            ph.signature["sched"] = {"demand": demand}
        if counter_rows:
            cnt = counter_signature(rows_in(counter_rows, intervals))
            if cnt:
                ph.signature["counters"] = cnt
