"""Plotting helpers shared by every report: one quiet style, byte and log axes, cache marks, legends.

Figures are plain `matplotlib.figure.Figure` objects saved through the Agg (PNG) and SVG canvases;
pyplot is never used, so there is no global figure state and no GUI backend. matplotlib itself is
imported inside the functions (about a second of start-up that `nodereg` should not pay otherwise).

Conventions the reports share: working-set axes are log2 with binary units (KiB, MiB, GiB, as caches
are sized); a value axis turns logarithmic when its data span more than `LOG_SPAN`; legends sit
outside the axes (to the right) so they never cover data; cache boundaries are dotted vertical
lines labelled on a secondary axis along the top.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

LOG_SPAN = 15.0          # max/min above which a value axis is logarithmic

STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4,
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "svg.fonttype": "none",   # text stays text in SVG: smaller, searchable, selectable
    "text.parse_math": False,  # titles and legends show names as written: `$` in a name is not mathtext
}

# the same kernel keeps its colour in every chart of every report
_KERNEL_ORDER = ("triad", "copy", "scale", "add", "load", "store", "chase", "peak_fma", "scalar_fp64", "int_ops",
                 "int_branch", "gemm")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


@contextlib.contextmanager
def style():
    """Build and save figures inside this context (the shared rcParams)."""
    import matplotlib
    with matplotlib.rc_context(STYLE):
        yield


def figure(width: float, height: float):
    from matplotlib.figure import Figure
    return Figure(figsize=(width, height), layout="constrained")


# for charts with more series than PALETTE has colours (the thesis family has 16 kernels)
PALETTE20 = ("#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd",
             "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7", "#bcbd22", "#dbdb8d",
             "#17becf", "#9edae5")


def color_for(name: str, order: Sequence[str] = ()) -> str:
    """A stable colour: by position in `order` when given (20 colours past 10 names), else by the
    known kernel order, else hashed."""
    names = list(order) or list(_KERNEL_ORDER)
    palette = PALETTE20 if len(names) > len(PALETTE) and order else PALETTE
    if name in names:
        return palette[names.index(name) % len(palette)]
    return PALETTE[sum(map(ord, name)) % len(PALETTE)]


def fmt_bytes(n: float) -> str:
    """1024-based sizes as caches are quoted: 32 KiB, 1.25 MiB, 2 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_num(x: float) -> str:
    """Tick labels for value axes: plain numbers, no 10^k, thousands separated."""
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


TICK_LABEL_IN = 0.6   # width of a label like "128 KiB" at the default font size, inches, with a gap


def bytes_axis(ax, values: Iterable[float], label: str = "working set", max_ticks: int = 8) -> None:
    """A log2 x axis for sizes, ticked at powers of two (about `max_ticks`, fewer where the axes are
    too narrow for that many labels side by side), labelled in KiB/MiB/GiB."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    vals = [v for v in values if v and v > 0]
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"{label} (bytes, log scale)")
    if not vals:
        return
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    max_ticks = max(2, min(max_ticks, int(width_in / TICK_LABEL_IN)))
    lo, hi = math.floor(math.log2(min(vals))), math.ceil(math.log2(max(vals)))
    step = max(1, math.ceil((hi - lo) / max_ticks))
    ax.xaxis.set_major_locator(FixedLocator([2.0**k for k in range(lo, hi + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_bytes(x)))
    ax.set_xlim(2.0 ** (math.log2(min(vals)) - 0.3), 2.0 ** (math.log2(max(vals)) + 0.3))


def value_axis(ax, values: Iterable[float], label: str, *, axis: str = "y", force_log: bool | None = None) -> bool:
    """Label a value axis; make it logarithmic when the data span more than LOG_SPAN. Returns is-log."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    finite = [v for v in values if v is not None and math.isfinite(v)]
    vals = [v for v in finite if v > 0]
    log = force_log if force_log is not None else bool(vals) and max(vals) / min(vals) > LOG_SPAN
    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)(label + (" (log scale)" if log else ""))
    if log:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        decades = math.log10(max(vals) / min(vals)) if vals else 1.0
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)))
        target.set_major_formatter(FuncFormatter(lambda x, _: fmt_num(x)))
        target.set_minor_formatter(NullFormatter())
    else:
        target.set_major_formatter(FuncFormatter(lambda x, _: fmt_num(x)))   # 1,500,000, never "1e6" offsets
        if axis == "y" and all(v >= 0 for v in finite):
            ax.set_ylim(bottom=0)
    return log


def legend_outside(ax, **kwargs) -> None:
    """A legend to the right of the axes (never over the data); nothing when there is nothing labelled."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def mark_boundaries(ax, marks: Sequence[tuple[str, float, str]]) -> None:
    """Dotted vertical lines at cache capacities, labelled along the top: marks are (label, bytes, colour).

    Marks at (nearly) the same size with the same label are drawn once, in grey (several nodes
    with the same cache). Labels go on a secondary top axis, where constrained layout makes room.
    """
    from matplotlib.ticker import NullLocator
    merged: list[list] = []
    for label, x, color in sorted(marks, key=lambda m: m[1]):
        for m in merged:
            if m[0] == label and abs(math.log2(m[1] / x)) < 0.02:
                m[2] = "#555555" if m[2] != color else color
                break
        else:
            merged.append([label, x, color])
    lo, hi = ax.get_xlim()
    merged = [m for m in merged if lo <= m[1] <= hi]
    if not merged:
        return
    for _, x, color in merged:
        ax.axvline(x, color=color, linestyle=(0, (1, 2)), linewidth=1.1, alpha=0.9, zorder=1)
    top = ax.secondary_xaxis("top")
    # tick positions must differ (a formatter labels coinciding ticks alike): nudge repeats a hair
    positions = [m[1] * (1 + 1e-6 * sum(1 for o in merged[:i] if o[1] == m[1])) for i, m in enumerate(merged)]
    top.set_xticks(positions, labels=[m[0] for m in merged])
    top.xaxis.set_minor_locator(NullLocator())
    top.tick_params(axis="x", length=3, labelsize=8, pad=1)
    span = math.log2(hi / lo) or 1.0
    last = None
    for tick, label, m in zip(top.xaxis.get_major_ticks(), top.get_xticklabels(), merged):
        label.set_color(m[2])
        crowded = last is not None and math.log2(m[1] / last[0]) / span < 0.016 * (len(m[0]) + len(last[1])) / 2 + 0.01
        if crowded and last[2] == 1:   # too close to the previous label: lift it to a second row
            tick.set_pad(11)
            last = (m[1], m[0], 2)
        else:
            last = (m[1], m[0], 1)


def threads_axis(ax, threads: Iterable[int]) -> None:
    ts = sorted({int(t) for t in threads})
    ax.set_xlabel("threads")
    if ts:
        step = max(1, math.ceil(len(ts) / 12))
        ax.set_xticks(ts[::step])
        ax.set_xlim(min(ts) - 0.5, max(ts) + 0.5)


def no_data(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#777777")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def plot_curve(ax, frame, x: str, label: str, color: str, linestyle="-", marker: str = "o") -> None:
    """A measured curve: line through every point, filled markers, hollow where the point was unstable."""
    if frame is None or not len(frame):
        return
    xs, ys = frame[x].to_numpy(dtype=float), frame["value"].to_numpy(dtype=float)
    unstable = frame["unstable"].to_numpy(dtype=bool) if "unstable" in frame else np.zeros(len(xs), bool)
    ax.plot(xs, ys, color=color, linestyle=linestyle, marker=None, label=label, zorder=3)
    unstable = np.asarray(unstable, dtype=bool)
    ax.plot(xs[~unstable], ys[~unstable], linestyle="none", marker=marker, color=color, zorder=4)
    if unstable.any():
        ax.plot(xs[unstable], ys[unstable], linestyle="none", marker=marker, markerfacecolor="white",
                markeredgecolor=color, zorder=4)


@dataclass
class RoofLine:
    """One line of a roofline chart: bandwidth slope (GB/s) capped by a peak (GFLOP/s); either may be None."""

    label: str
    color: str
    bandwidth_gbs: float | None
    peak_gflops: float | None
    linestyle: str = "-"


def roofline_drawing(lines: Sequence[RoofLine], title: str):
    """The draw function of a roofline panel: the lines, the title, the legend beside."""
    def draw(ax) -> None:
        roofline(ax, lines)
        ax.set_title(title, loc="left")
        legend_outside(ax)
    return draw


def roofline(ax, lines: Sequence[RoofLine]) -> None:
    """Attainable GFLOP/s against arithmetic intensity (FLOP/byte), log-log, ridge points marked."""
    slopes = [ln for ln in lines if ln.bandwidth_gbs]
    ridges = [ln.peak_gflops / ln.bandwidth_gbs for ln in slopes if ln.peak_gflops]
    lo = min([1 / 16] + [r / 16 for r in ridges])
    hi = max([16.0] + [r * 8 for r in ridges])
    xs = np.logspace(math.log10(lo), math.log10(hi), 256)
    for ln in lines:
        if ln.bandwidth_gbs:
            ys = ln.bandwidth_gbs * xs
            if ln.peak_gflops:
                ys = np.minimum(ys, ln.peak_gflops)
        else:
            ys = np.full_like(xs, ln.peak_gflops)
        ax.plot(xs, ys, color=ln.color, linestyle=ln.linestyle, label=ln.label, zorder=3)
        if ln.bandwidth_gbs and ln.peak_gflops:
            ridge = ln.peak_gflops / ln.bandwidth_gbs
            ax.plot([ridge], [ln.peak_gflops], marker="o", color=ln.color, zorder=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_num(x) if x >= 1 else f"1/{1 / x:.0f}"))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_num(x)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, log scale)")
    ax.set_ylabel("attainable GFLOP/s (log scale)")
