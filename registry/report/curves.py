"""What a node profile says, as curves and figures the charts draw (no plotting here).

A profile holds many configs per kernel (working-set sizes x strides x threads x placements).
A curve keeps one value per working set: the preferred placement (compact, else none, else the
first other) and the kernel's smallest stride (unit stride: what bandwidth is quoted at); repeated
configs are reduced to their median, and a point is unstable when any of its configs was.

Per-level figures use the node's caches: the capacity `threads` threads can use of each level
(`CacheLevel.capacity`), and the working sets that sit clearly inside a level: up to 3/4 of its
capacity and beyond 1.5x the level below (memory: beyond 2x the last level). The level's figure is
the median over those points, and for bandwidth the best kernel's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from registry.models.base import CacheLevel
from registry.report.load import NodeProfile

PLACEMENTS = ("compact", "none", "scatter")
BANDWIDTH_KERNELS = ("triad", "copy", "scale", "add", "load", "store")   # display order; others follow
FP_PEAK_KERNEL = "peak_fma"
REFERENCE_KERNEL = "triad"
INSIDE, ABOVE, MEMORY_ABOVE = 0.75, 1.5, 2.0


def _placement_rank(p: str) -> int:
    return PLACEMENTS.index(p) if p in PLACEMENTS else len(PLACEMENTS)


def select(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of the preferred placement per (kernel, threads) and the smallest stride per kernel."""
    if rows.empty:
        return rows
    best = rows.groupby(["ub", "threads"])["placement"].transform(lambda s: min(s, key=_placement_rank))
    rows = rows[rows["placement"] == best]
    min_stride = rows.groupby("ub")["stride_bytes"].transform("min")
    return rows[min_stride.isna() | (rows["stride_bytes"] == min_stride)]


def kernel_order(names) -> list[str]:
    names = set(names)
    return [k for k in BANDWIDTH_KERNELS if k in names] + sorted(names - set(BANDWIDTH_KERNELS))


def curve(rows: pd.DataFrame, metric: str, x: str = "ws_bytes") -> pd.DataFrame:
    """One point per x: columns x, value (median), unstable (any)."""
    rows = rows[rows[metric].notna() & rows[x].notna()]
    if rows.empty:
        return pd.DataFrame(columns=[x, "value", "unstable"])
    groups = rows.groupby(x, sort=True)
    med, unstable = groups[metric].median(), groups["unstable"].any()
    return pd.DataFrame({x: med.index.to_numpy(), "value": med.to_numpy(), "unstable": unstable.to_numpy()})


def thread_counts(prof: NodeProfile, family: str) -> list[int]:
    return sorted(int(t) for t in prof.family(family)["threads"].dropna().unique())


def size_curves(prof: NodeProfile, family: str, metric: str, threads: int) -> dict[str, pd.DataFrame]:
    """kernel -> curve of `metric` over working-set size, at `threads` threads (computed once per profile)."""
    key = (family, metric, threads)
    if key not in prof.memo:
        rows = select(prof.family(family))
        rows = rows[rows["threads"] == threads]
        found = {k: curve(grp, metric) for k, grp in rows.groupby("ub")}
        prof.memo[key] = {k: found[k] for k in kernel_order(found) if len(found[k])}
    return prof.memo[key]


def latency_curves(prof: NodeProfile) -> tuple[int | None, dict[str, pd.DataFrame]]:
    """Latency is a one-thread property: the curves at the smallest thread count measured."""
    counts = thread_counts(prof, "latency")
    if not counts:
        return None, {}
    return counts[0], size_curves(prof, "latency", "latency_ns", counts[0])


def scaling(prof: NodeProfile, family: str, metric: str) -> dict[tuple[str, str], pd.DataFrame]:
    """(kernel, placement) -> value by thread count; bandwidth, and gemm (the compute kernel with a
    working set), at each sweep's largest working set."""
    rows = prof.family(family)
    rows = rows[rows[metric].notna()]
    if rows.empty:
        return {}
    min_stride = rows.groupby("ub")["stride_bytes"].transform("min")
    rows = rows[min_stride.isna() | (rows["stride_bytes"] == min_stride)]
    if family in ("bandwidth", "compute"):
        ws = rows["ws_bytes"].fillna(0)     # the other compute kernels have none (0, or NULL if imported)
        rows = rows[ws == ws.groupby([rows["ub"], rows["placement"], rows["threads"]]).transform("max")]
    out = {}
    for (kernel, placement), grp in rows.groupby(["ub", "placement"]):
        c = curve(grp, metric, x="threads")
        if len(c):
            out[(kernel, placement)] = c
    order = kernel_order({k for k, _ in out})
    return dict(sorted(out.items(), key=lambda kv: (order.index(kv[0][0]), _placement_rank(kv[0][1]))))


def level_label(level: int) -> str:
    return f"L{level}"


def cache_marks(caches: list[CacheLevel], threads: int, *, sizes: bool = True) -> list[tuple[str, float]]:
    """(label, capacity in bytes) of each cache level for `threads` threads placed compactly."""
    return [(f"{level_label(c.level)} {_fmt(c.capacity(threads))}" if sizes else level_label(c.level),
             float(c.capacity(threads))) for c in caches]


def _fmt(n: float) -> str:
    from registry.report.charts import fmt_bytes
    return fmt_bytes(n)


@dataclass
class Level:
    label: str          # L1, L2, ..., memory
    lo: float           # working sets (bytes) counted for this level: lo < ws <= hi
    hi: float
    value: float | None = None
    kernel: str | None = None


def level_bands(caches: list[CacheLevel], threads: int) -> list[Level]:
    """The working-set band that sits inside each cache level and in memory."""
    bands, below = [], 0.0
    for c in caches:
        cap = float(c.capacity(threads))
        if cap * INSIDE > below * ABOVE:
            bands.append(Level(level_label(c.level), below * ABOVE, cap * INSIDE))
        below = cap
    bands.append(Level("memory", below * MEMORY_ABOVE if caches else 0.0, float("inf")))
    return bands


def level_figures(curves: dict[str, pd.DataFrame], caches: list[CacheLevel], threads: int,
                  best=max) -> list[Level]:
    """Per level: the median of each kernel's points in the band, the `best` kernel's value (max for
    bandwidth, min for latency); pass one curve to get that kernel's figures. Levels without points
    are left out. Without cache data, the sweep's largest working set counts as memory."""
    levels = []
    for band in level_bands(caches, threads):
        found = {}
        for kernel, c in curves.items():
            pts = c[(c["ws_bytes"] > band.lo) & (c["ws_bytes"] <= band.hi)]
            if not caches:
                pts = c[c["ws_bytes"] == c["ws_bytes"].max()]
            if len(pts):
                found[kernel] = float(pts["value"].median())
        if found:
            kernel = best(found, key=found.get)
            levels.append(Level(band.label, band.lo, band.hi, found[kernel], kernel))
    return levels


@dataclass
class Peak:
    value: float
    kernel: str
    threads: int

    def describe(self) -> str:
        return f"{self.kernel}, {self.threads} thread{'s' if self.threads != 1 else ''}, the most measured"


def is_integer(kernel: str) -> bool:
    """Integer kernels (int_ops, int_branch) report giga integer operations (int_branch: bytes hashed)
    in the gflops column: not FP ceilings."""
    return kernel.startswith("int")


def fp_peaks(prof: NodeProfile) -> list[Peak]:
    """Each compute kernel's GFLOP/s at the most threads it was measured with (the better placement:
    the node's figure, defined as the memory bandwidth is), highest first. A lower count that ran
    faster on a busy host is not the node's peak: the table of threads shows it."""
    rows = prof.family("compute")
    rows = rows[rows["gflops"].notna()]
    peaks = []
    for kernel, grp in rows.groupby("ub"):
        most = grp[grp["threads"] == grp["threads"].max()]
        peaks.append(Peak(float(most["gflops"].max()), str(kernel), int(most["threads"].iloc[0])))
    return sorted(peaks, key=lambda p: -p.value)


def node_fp64(prof: NodeProfile) -> Peak | None:
    """The node's FP64 peak, one definition wherever it is quoted (`nodereg nodes`, i.e.
    v_nodes.fp64_gflops, the profile's summary, the roofline, the reports): peak_fma at the most
    threads measured, the better placement; None without peak_fma."""
    return next((p for p in fp_peaks(prof) if p.kernel == FP_PEAK_KERNEL), None)


def fp_peak(prof: NodeProfile) -> Peak | None:
    """The FP peak the roofline uses: the node's FP64 peak (node_fp64), else the best FP compute kernel
    at its most threads."""
    peaks = [p for p in fp_peaks(prof) if not is_integer(p.kernel)]
    return node_fp64(prof) or (peaks[0] if peaks else None)


@dataclass
class MemoryBandwidth:
    value: float
    kernel: str
    threads: int
    ws_bytes: float
    store_kind: str | None

    def describe(self) -> str:
        stores = f", {self.store_kind} stores" if self.store_kind else ""
        return f"{self.kernel}, {self.threads} thread{'s' if self.threads != 1 else ''}, largest working set{stores}"


def memory_bandwidth(prof: NodeProfile) -> MemoryBandwidth | None:
    """The node's memory bandwidth, one definition wherever it is quoted (`nodereg nodes`, i.e.
    v_nodes.memory_triad_gbs, the roofline's memory slope, the node report's facts): STREAM triad
    at the most threads measured and its largest working set, the better of the two store kinds."""
    rows = prof.rows[(prof.rows["ub"] == REFERENCE_KERNEL) & prof.rows["bandwidth_gbs"].notna()]
    if rows.empty:
        return None
    rows = rows[rows["threads"] == rows["threads"].max()]
    rows = rows[rows["ws_bytes"] == rows["ws_bytes"].max()]
    best = rows.loc[rows["bandwidth_gbs"].idxmax()]
    return MemoryBandwidth(float(best["bandwidth_gbs"]), REFERENCE_KERNEL, int(best["threads"]),
                           float(best["ws_bytes"]), best.get("store_kind"))


def bandwidth_ceilings(prof: NodeProfile, kernel: str = REFERENCE_KERNEL) -> tuple[int | None, list[Level]]:
    """Bandwidth per memory level at the profile's largest thread count (the roofline's slopes).

    One reference kernel (STREAM triad, as rooflines quote memory bandwidth; else the first
    bandwidth kernel measured) rather than the best of all: the best of many noisy kernels is
    an outlier more often than a ceiling.
    """
    counts = thread_counts(prof, "bandwidth")
    if not counts:
        return None, []
    threads = counts[-1]
    found = size_curves(prof, "bandwidth", "bandwidth_gbs", threads)
    if kernel not in found:
        if not found:
            return threads, []
        kernel = next(iter(found))
    return threads, level_figures({kernel: found[kernel]}, prof.caches, threads)
