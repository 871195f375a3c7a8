"""Phases of a traced run, three ways: change points of the samples, markers, OpenMP regions.

- auto: PELT (ruptures, least-squares cost) on the multivariate sample series. Each metric is
  transformed (log1p for rates and sizes spanning decades) and scaled by its noise level, estimated
  from the median absolute difference of consecutive samples, so that a step of a few noise levels
  in any metric is a change while jitter is not. Segments shorter than `min_phase_s` are merged into
  the neighbour they resemble most, and neighbours closer than NEAR_IDENTICAL noise levels in every
  metric into one. CPU use is read as the program's demand where the sampler measured it: the CPU
  time it got plus the time its threads waited for a CPU (`runq_util`). On a busy host what a
  program gets rises and falls with the others' load, which is no phase of it (trial 4 of #32:
  `xz -T2` beside other work got 0.3-0.8 CPUs in waves, 9 segments; its demand was 2.0, then 1.0
  in the one-thread tail: 5, the tail's boundary among them).
- marker: begin/end markers, one phase per name (a name marked several times is one phase with
  several occurrences, as a loop body is).
- omp: one phase per outlined OpenMP function (the thesis's phases), time = sum of the slowest
  thread's time per call, weight = the regions' share of the wall time; functions under
  `min_weight` of the wall time are left out.

A boundary found between two samples is placed inside the interval that straddles it, in
proportion to how far that sample's rates lie between the two sides (`_refine`), so a detected
boundary lies within one sampling interval of the true one.
"""

import heapq
import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from registry.trace.omp import OmpRecord
from registry.measure.runner import Marker
from registry.io.tracefile import Phase

LOG_METRICS = {"rss_mb", "minflt_per_s", "majflt_per_s", "ctxsw_per_s", "read_mb_s", "write_mb_s", "wss_mb"}
LINEAR_METRICS = {"cpu_util", "threads"}
NOISE_FLOOR = 0.05      # of a metric's spread: a metric that never jitters still needs a scale
# ... and an absolute one, so that an idle program's flicker (0.01 CPU, a few KB touched) is no change:
# 0.05 CPUs, half a thread, and 0.25 in log1p units for the rest (~30% at large values)
ABS_NOISE = {"cpu_util": 0.05, "threads": 0.5}
ABS_NOISE_LOG = 0.25
# Rates are compared in units of a rate that matters (log1p(rate / unit)): below it a sample holds a
# few events (14 or 31 context switches a second are 1-3 per 0.1 s sample), whose counting noise
# and the host's preemptions are no phase of the program. On a busy host `xz -T2`'s one-thread tail
# split at 14 against 31 switches/s, and its two-thread part at 409 against 181 minor faults/s (trial
# 4 of #32), while a start-up's 8,000 faults/s or a lock-bound phase's thousands of switches stand out
CHANGE_UNITS = {"ctxsw_per_s": 100.0, "minflt_per_s": 1000.0, "majflt_per_s": 10.0}
MAX_MISSING = 0.5      # metrics read on fewer than half the samples (a large RSS's working set) are
                       # left to the signatures
PENALTY_PER_DIM = 8.0   # PELT penalty per dimension, in (noise level)^2 units, times log(n)
MAX_PELT_SAMPLES = 1000
NEAR_IDENTICAL = 2.0    # neighbouring segments closer than this many noise levels in every metric are one


def feature_matrix(samples: list[dict]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Samples -> (segmentation matrix, mixing matrix, metric names), both n x d.

    The segmentation matrix holds transformed, noise-scaled metrics (what PELT sees). The mixing
    matrix holds the untransformed metrics divided by their spread: a sample that straddles a
    boundary is a time-weighted mix of its two sides in these units, which `_refine` uses.
    """
    names = [k for k in samples[0] if k in LOG_METRICS | LINEAR_METRICS] if samples else []
    columns, mixing, kept = [], [], []
    for name in names:
        raw = np.array([s.get(name, math.nan) for s in samples], dtype=float)
        if name == "cpu_util" and "runq_util" in samples[0]:     # demand, not what the others left it
            raw = raw + np.array([s.get("runq_util", 0.0) for s in samples], dtype=float)
        if np.isnan(raw).mean() > MAX_MISSING:
            continue  # a sparse metric's reads straddle boundaries: it would blur them
        raw = _fill(raw)
        x = np.log1p(np.maximum(raw, 0.0) / CHANGE_UNITS.get(name, 1.0)) if name in LOG_METRICS else raw
        spread = np.percentile(x, 95) - np.percentile(x, 5)
        if spread <= 1e-9:
            continue  # constant: no information about boundaries
        noise = 1.4826 * np.median(np.abs(np.diff(x))) / math.sqrt(2) if len(x) > 2 else 0.0
        floor = ABS_NOISE.get(name, ABS_NOISE_LOG)
        columns.append((x - np.median(x)) / max(noise, NOISE_FLOOR * spread, floor))
        mixing.append(raw / max(raw.max() - raw.min(), 1e-12))
        kept.append(name)
    if not columns:
        empty = np.zeros((len(samples), 0))
        return empty, empty, []
    return np.column_stack(columns), np.column_stack(mixing), kept


def _fill(x: np.ndarray) -> np.ndarray:
    """Fill gaps of a sparse metric backwards: a working-set read covers the intervals since the
    previous read (the stretch after the last read keeps the last value)."""
    measured = np.flatnonzero(~np.isnan(x))
    if len(measured) == len(x):
        return x
    nxt = np.searchsorted(measured, np.arange(len(x)))
    return x[measured[np.minimum(nxt, len(measured) - 1)]]


def change_points(matrix: np.ndarray, min_size: int = 2) -> list[int]:
    """Indices where a new segment starts (excluding 0), by PELT.

    ruptures' PELT costs grow faster than linearly with the series (~3 s for 1000 samples, 80 s for
    5000), so a run longer than MAX_PELT_SAMPLES samples is segmented on block means first and each
    boundary then moved to the best split of the full-resolution samples around it.
    """
    n, d = matrix.shape
    if d == 0 or n < 2 * min_size:
        return []
    block = math.ceil(n / MAX_PELT_SAMPLES)
    coarse = matrix if block == 1 else _block_means(matrix, block)
    import ruptures  # imported here: only automatic phase detection needs it

    algo = ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(coarse)
    # the penalty is in units of the per-sample noise; a block mean's noise is sqrt(block) smaller
    ends = algo.predict(pen=PENALTY_PER_DIM * d * math.log(len(coarse)) / block)
    bounds = [e for e in ends if e < len(coarse)]
    if block == 1:
        return bounds
    return sorted({_best_split(matrix, (b - 1) * block, min((b + 1) * block, n)) for b in bounds})


def _block_means(matrix: np.ndarray, block: int) -> np.ndarray:
    n = len(matrix) // block * block
    head = matrix[:n].reshape(-1, block, matrix.shape[1]).mean(axis=1)
    return head if n == len(matrix) else np.vstack([head, matrix[n:].mean(axis=0)])


def _best_split(matrix: np.ndarray, lo: int, hi: int) -> int:
    """The index in (lo, hi) splitting matrix[lo:hi] into two parts of least squared error."""
    seg = matrix[lo:hi]
    best, best_cost = lo + 1, math.inf
    for k in range(1, len(seg)):
        cost = ((seg[:k] - seg[:k].mean(axis=0)) ** 2).sum() + ((seg[k:] - seg[k:].mean(axis=0)) ** 2).sum()
        if cost < best_cost:
            best, best_cost = lo + k, cost
    return best


def _merge_segments(bounds: list[int], matrix: np.ndarray, min_len: int) -> list[int]:
    """Drop boundaries so that no segment is shorter than `min_len` samples (join the more similar
    side), then between neighbours whose means differ by less than NEAR_IDENTICAL noise levels in
    every metric, the closest pair first. On long runs PELT finds steps far below the noise that
    moves a metric from sample to sample (`xz -T2` on a uniform input gave 7 segments, a numpy matmul
    10): such segments are one phase to a user and to `match`."""
    bounds = list(bounds)
    while True:
        edges = [0, *bounds, len(matrix)]
        lengths = [b - a for a, b in zip(edges, edges[1:])]
        short = [i for i, n in enumerate(lengths) if n < min_len]
        if not short or not bounds:
            break
        i = min(short, key=lambda k: lengths[k])
        mean = matrix[edges[i]:edges[i + 1]].mean(axis=0)
        left = matrix[edges[i - 1]:edges[i]].mean(axis=0) if i > 0 else None
        right = matrix[edges[i + 1]:edges[i + 2]].mean(axis=0) if i + 1 < len(lengths) else None
        if right is None or (left is not None and np.linalg.norm(mean - left) <= np.linalg.norm(mean - right)):
            bounds.remove(edges[i])          # join the left neighbour
        else:
            bounds.remove(edges[i + 1])      # join the right neighbour
    while bounds:
        edges = [0, *bounds, len(matrix)]
        means = [matrix[a:b].mean(axis=0) for a, b in zip(edges, edges[1:])]
        gaps = [float(np.abs(m1 - m0).max()) for m0, m1 in zip(means, means[1:])]
        closest = int(np.argmin(gaps))
        if gaps[closest] >= NEAR_IDENTICAL:
            break
        bounds.remove(edges[closest + 1])
    return bounds


def auto_phases(samples: list[dict], wall_s: float, interval_s: float,
                min_phase_s: float | None = None) -> list[Phase]:
    """Segments of the sample series (at least one: the whole run)."""
    if wall_s <= 0:
        return []
    if min_phase_s is None:
        min_phase_s = max(3 * interval_s, 0.02 * wall_s)
    matrix, mixing, _ = feature_matrix(samples)
    bounds = change_points(matrix) if len(samples) else []
    bounds = _merge_segments(bounds, matrix, max(1, int(round(min_phase_s / interval_s))))
    ends = np.array([s["t_s"] for s in samples])
    starts = np.concatenate([[0.0], ends[:-1]])
    cuts = [0.0, *(_refine(k, mixing, starts, ends) for k in bounds), wall_s]
    return [Phase(name=f"segment {i + 1}", method="auto", start_s=a, end_s=b, weight=(b - a) / wall_s,
                  time_s=b - a, intervals=[[a, b]])
            for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]


def _refine(k: int, mixing: np.ndarray, starts: np.ndarray, ends: np.ndarray, window: int = 3) -> float:
    """Time of the boundary before sample `k`, placed inside whichever of samples k-1, k straddles it.

    A straddling sample is a mix of its two sides, x = (1-f) old + f new, with f the share of its
    interval after the boundary; f is estimated by projecting x onto the line between the local
    means of the two sides (up to `window` samples each, the two candidates excluded).
    """
    old = mixing[max(0, k - 1 - window):k - 1]
    new = mixing[k + 1:k + 1 + window]
    if len(old) == 0 or len(new) == 0:
        return float(ends[k - 1])
    a, b = old.mean(axis=0), new.mean(axis=0)
    gap = float(np.dot(b - a, b - a))
    if gap <= 1e-12:
        return float(ends[k - 1])

    def share_new(i: int) -> float:
        return float(np.clip(np.dot(mixing[i] - a, b - a) / gap, 0.0, 1.0))

    t = ends[k - 1] - share_new(k - 1) * (ends[k - 1] - starts[k - 1]) + (1 - share_new(k)) * (ends[k] - starts[k])
    return float(np.clip(t, starts[k - 1], ends[k]))


def marker_phases(markers: list[Marker], wall_s: float) -> list[Phase]:
    """One phase per marker name, over the disjoint leaves of the marked intervals (`leaves`); an
    unclosed begin ends with the run, a stray end is ignored."""
    open_at: dict[str, list[float]] = defaultdict(list)
    occurrences: dict[str, list[list[float]]] = defaultdict(list)
    for m in sorted(markers, key=lambda m: m.t_s):
        if m.verb == "begin":
            open_at[m.name].append(m.t_s)
        elif m.verb == "end" and open_at[m.name]:
            occurrences[m.name].append([open_at[m.name].pop(), m.t_s])
    for name, starts in open_at.items():
        occurrences[name].extend([s, wall_s] for s in starts)
    return _grouped(leaves(occurrences), wall_s, "marker")


def leaves(occurrences: dict[str, list[list[float]]]) -> dict[str, list[list[float]]]:
    """Marked intervals made disjoint: every instant goes to the innermost marker open at it (the
    one begun last), so a phase `solve` holding a phase `kernel` keeps only the time outside the
    kernel. Nested markers would otherwise count the inner time twice (a 10 s run with `solve`
    0-9 s holding `kernel` 1-6 s is 9 s of phases, not 14). Overlapping, not nested, intervals
    are cut the same way: the later one owns the overlap. A name left with no time is dropped."""
    spans = sorted((a, b, name) for name, ivs in occurrences.items() for a, b in ivs if b > a)
    cuts = sorted({t for a, b, _ in spans for t in (a, b)})
    out: dict[str, list[list[float]]] = defaultdict(list)
    open_spans: list[tuple] = []          # heap: latest begun first, then the shortest
    nxt = 0
    for lo, hi in zip(cuts, cuts[1:]):
        while nxt < len(spans) and spans[nxt][0] <= lo:
            a, b, name = spans[nxt]
            heapq.heappush(open_spans, (-a, b, nxt, name))
            nxt += 1
        while open_spans and open_spans[0][1] <= lo:
            heapq.heappop(open_spans)     # ended before this piece (the top covers it, since every end is a cut)
        if not open_spans:
            continue
        owner = open_spans[0][3]
        ivs = out[owner]
        if ivs and ivs[-1][1] == lo:
            ivs[-1][1] = hi               # one occurrence cut only by its neighbours' edges
        else:
            ivs.append([lo, hi])
    return dict(out)


def disjoint_markers(phases: list[Phase], wall_s: float) -> list[Phase]:
    """The phases with the marker ones reduced to disjoint leaves (`leaves`): what `nodereg trace`
    now records, applied to traces stored before it did. A marker phase that lost time to a nested
    one keeps its signature (measured over all of it) but not its loop iterations, which counted
    the nested work too."""
    markers = [p for p in phases if p.method == "marker"]
    reduced = leaves({p.name: p.intervals or [[p.start_s, p.end_s]] for p in markers})
    out = [p for p in phases if p.method != "marker"]
    for p in markers:
        ivs = reduced.get(p.name)
        if not ivs:
            continue
        if ivs == sorted(p.intervals or [[p.start_s, p.end_s]]):
            out.append(p)
            continue
        time_s = sum(b - a for a, b in ivs)
        out.append(Phase(name=p.name, method=p.method, start_s=ivs[0][0], end_s=ivs[-1][1],
                         weight=time_s / wall_s if wall_s > 0 else 0.0, time_s=time_s, calls=len(ivs),
                         intervals=ivs, signature=p.signature, iterations=None, streams=p.streams))
    return out


def occupied(phases: list[Phase]) -> list[list[float]]:
    """The union of the phases' intervals, sorted and merged."""
    merged: list[list[float]] = []
    for a, b in sorted(iv for p in phases for iv in (p.intervals or [[p.start_s, p.end_s]])):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def fill_gaps(declared: list[Phase], segments: list[Phase], wall_s: float,
              cpu_use: Callable[[dict], float | None] | None = None) -> list[Phase]:
    """The change-point segments' parts that lie outside the declared phases (markers, OpenMP
    regions): the time the author did not mark keeps the boundaries the samples show there. Each
    part keeps its segment's name and signature (measured over the whole segment), but for its CPU
    use (`gap_cpu`), which `cpu_use` (a phase's busy CPUs from its signature) lets it take apart
    from the declared phases' share of the segment."""
    taken = occupied(declared)
    out = []
    for seg in segments:
        free = _minus([[seg.start_s, seg.end_s]], taken)
        time_s = sum(b - a for a, b in free)
        if time_s <= 0:
            continue
        signature = gap_cpu(seg, declared, time_s, cpu_use) if cpu_use else seg.signature
        out.append(Phase(name=seg.name, method=seg.method, start_s=free[0][0], end_s=free[-1][1],
                         weight=time_s / wall_s if wall_s > 0 else 0.0, time_s=time_s, calls=len(free),
                         intervals=free, signature=signature, iterations=None, streams=[]))
    return out


_CPU_METRICS = (("proc", "cpu_util"), ("sched", "demand"))


def gap_cpu(seg: Phase, declared: list[Phase], gap_s: float, cpu_use: Callable[[dict], float | None]) -> dict:
    """`seg`'s signature with its CPU use (/proc's and the run-queue demand) taken for its gap alone:
    the segment's CPU seconds less those of the declared phases inside it (each at its own busy
    CPUs, `cpu_use`: an OpenMP region's team as the shim counted it), over the gap's time. Measured
    over the whole segment, the gap between OpenMP regions looked as parallel as the regions it
    held: NPB MG.A's serial gaps read 1.35 and 1.58 CPUs busy (they are 0.94-0.97) and were
    projected onto one CPU 1.30-1.49x slower, on top of the regions themselves (docs/match.md).
    Never below one CPU where the segment kept one busy (its master thread runs the gap), never
    above the segment's own figure; a declared phase without a CPU figure leaves the signature as
    it was."""
    span = seg.end_s - seg.start_s
    inside = []
    for p in declared:
        spans = p.intervals or [[p.start_s, p.end_s]]
        overlap = sum(max(0.0, min(b, seg.end_s) - max(a, seg.start_s)) for a, b in spans)
        if overlap > 0:
            busy = cpu_use(p.signature or {})
            if busy is None or not math.isfinite(busy):
                return seg.signature
            inside.append((busy, overlap))
    if not inside or span <= 0:
        return seg.signature
    signature = {src: dict(metrics) for src, metrics in (seg.signature or {}).items()}
    for src, metric in _CPU_METRICS:
        whole = signature.get(src, {}).get(metric)
        if whole is None or not math.isfinite(whole):
            continue
        rest = (whole * span - sum(busy * overlap for busy, overlap in inside)) / gap_s
        signature[src][metric] = float(min(whole, max(rest, min(whole, 1.0))))
    return signature


def _minus(intervals: list[list[float]], taken: list[list[float]]) -> list[list[float]]:
    """`intervals` less the (sorted, disjoint) `taken` ones."""
    out = []
    for a, b in intervals:
        for c, d in taken:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append([a, c])
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append([a, b])
    return out


def _grouped(occurrences: dict[str, list[list[float]]], wall_s: float, method: str) -> list[Phase]:
    phases = []
    for name, ivs in occurrences.items():
        ivs = sorted(ivs)
        time_s = sum(b - a for a, b in ivs)
        phases.append(Phase(name=name, method=method, start_s=ivs[0][0], end_s=max(b for _, b in ivs),
                            weight=time_s / wall_s if wall_s > 0 else 0.0, time_s=time_s, calls=len(ivs),
                            intervals=ivs))
    return sorted(phases, key=lambda p: p.start_s)


def omp_phases(records: list[OmpRecord], wall_s: float, min_weight: float = 0.01) -> list[Phase]:
    """One phase per outlined function.

    time_s is the thesis's phase time, the sum over calls of the slowest thread's time in the
    function; weight is the regions' share of the wall time, fork to join (on a busy machine the
    wake-up of the team can make a region last several times its slowest thread's work).

    The signature's `omp.busy_threads` is the threads' summed time in the function over the
    regions' wall time: how many threads did the region's work on average. /proc counts a thread
    spinning at the region's end (OMP_WAIT_POLICY=active, libgomp's default spin before sleeping)
    as busy; the shim does not, so `nodereg match` takes the serial share from it
    (registry.match.project.parallel_use). Not a feature of any config: it never enters a distance.
    """
    by_fn: dict[str, list[OmpRecord]] = defaultdict(list)
    for r in records:
        by_fn[r.function].append(r)
    phases = []
    for fn, recs in by_fn.items():
        time_s = sum(r.slowest_s for r in recs)
        weight = sum(r.wall_s for r in recs) / wall_s if wall_s > 0 else 0.0
        if weight < min_weight:
            continue
        wall = sum(r.wall_s for r in recs)
        busy = {"omp": {"busy_threads": sum(r.thread_s for r in recs) / wall,
                        "threads": float(max(r.max_threads for r in recs))}} if wall > 0 else {}
        phases.append(Phase(name=fn, method="omp", start_s=min(r.start_s for r in recs),
                            end_s=max(r.end_s for r in recs), weight=weight, time_s=time_s,
                            calls=sum(r.calls for r in recs), intervals=[[r.start_s, r.end_s] for r in recs],
                            signature=busy))
    return sorted(phases, key=lambda p: p.start_s)
