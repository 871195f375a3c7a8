"""`nodereg report node NODE`: one node's profile at a glance.

Charts: bandwidth against working-set size per kernel (one thread and the most threads measured,
cache capacities marked from the node's inventory), pointer-chase latency against working set,
thread scaling of memory bandwidth and of compute throughput, a roofline (FP peak and the bandwidth
of each memory level), and the thesis kernels' time per iteration when the profile has them.
Tables: the per-level figures, compute peaks and the cache inventory. A PNG holds the summary grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import sqlalchemy as sa

from registry.errors import UserError
from registry.health import MIN_DEVIATION, THRESHOLD, host_rows, type_health
from registry.report import charts, curves
from registry.report.document import Chart, Report, Table
from registry.report.load import NodeProfile, fmt_time, node_profile

Panel = Callable[[object], None]     # draws into one Axes

LEVEL_COLORS = {"L1": "#2ca02c", "L2": "#17becf", "L3": "#9467bd", "L4": "#bcbd22", "memory": "#d62728"}


def size_panel(prof: NodeProfile, family: str, metric: str, threads: int, ylabel: str, title: str,
               legend: bool = True) -> Panel:
    data = curves.size_curves(prof, family, metric, threads)

    order = list(data) if family == "thesis" else ()   # the thesis family: colours by position, 20 of them

    def draw(ax) -> None:
        for kernel, c in data.items():
            charts.plot_curve(ax, c, "ws_bytes", kernel, charts.color_for(kernel, order))
        xs = [x for c in data.values() for x in c["ws_bytes"]]
        charts.bytes_axis(ax, xs, "working set, all threads" if threads > 1 else "working set")
        charts.value_axis(ax, [v for c in data.values() for v in c["value"]], ylabel)
        charts.mark_boundaries(ax, [(label, x, "#555555") for label, x in curves.cache_marks(prof.caches, threads)])
        ax.set_title(title, loc="left")
        if legend:
            charts.legend_outside(ax, title="kernel")
    return draw


def bandwidth_panels(prof: NodeProfile) -> list[Panel]:
    counts = curves.thread_counts(prof, "bandwidth")
    chosen = sorted({counts[0], counts[-1]}) if counts else []
    return [size_panel(prof, "bandwidth", "bandwidth_gbs", t, "bandwidth (GB/s)",
                       f"Bandwidth, {t} thread{'s' if t > 1 else ''}", legend=(t == chosen[-1]))
            for t in chosen]


def latency_panel(prof: NodeProfile) -> Panel | None:
    threads, data = curves.latency_curves(prof)
    if not data:
        return None
    return size_panel(prof, "latency", "latency_ns", threads, "latency per access (ns)",
                      "Memory latency (pointer chase)", legend=len(data) > 1)


def scaling_panel(prof: NodeProfile, family: str, metric: str, ylabel: str, title: str) -> Panel | None:
    data = curves.scaling(prof, family, metric)
    if not any(len(c) > 1 for c in data.values()):
        return None
    kernels_with_many = {k for k, _ in data if sum(1 for kk, _ in data if kk == k) > 1}

    if family == "compute" and any(curves.is_integer(k) for k, _ in data):
        ylabel += " (integer: Gop/s)"

    def draw(ax) -> None:
        first_placement: dict[str, str] = {}
        for (kernel, placement), c in data.items():
            main = first_placement.setdefault(kernel, placement) == placement
            label = f"{kernel} ({placement})" if kernel in kernels_with_many else kernel
            charts.plot_curve(ax, c, "threads", label, charts.color_for(kernel), linestyle="-" if main else "--")
        charts.threads_axis(ax, [t for c in data.values() for t in c["threads"]])
        charts.value_axis(ax, [v for c in data.values() for v in c["value"]], ylabel, force_log=False)
        ax.set_title(title, loc="left")
        charts.legend_outside(ax)
    return draw


def roofline_lines(prof: NodeProfile) -> tuple[list[charts.RoofLine], str]:
    """The node's roofline: one slope per memory level under the FP peak, lesser compute peaks dashed."""
    peak = curves.fp_peak(prof)
    threads, levels = curves.bandwidth_ceilings(prof)
    if peak is None or not levels:
        return [], ""
    memory = curves.memory_bandwidth(prof)
    if memory is not None and memory.threads == threads:   # the memory slope is the node's memory bandwidth
        levels = [replace(lv, value=memory.value) if lv.label == "memory" else lv for lv in levels]
    lines = [charts.RoofLine(f"{lv.label}: {lv.value:.3g} GB/s", LEVEL_COLORS.get(lv.label, "#7f7f7f"),
                             lv.value, peak.value) for lv in levels]
    lines.append(charts.RoofLine(f"peak: {peak.value:.3g} GFLOP/s ({peak.kernel}, {peak.threads} thr)", "#222222",
                                 None, peak.value))
    lines += [charts.RoofLine(f"{p.kernel}: {p.value:.3g} GFLOP/s ({p.threads} thr)", "#888888", None, p.value, "--")
              for p in curves.fp_peaks(prof)
              if p.kernel != peak.kernel and p.value < peak.value and not curves.is_integer(p.kernel)]
    return lines, f"{levels[0].kernel} bandwidth at {threads} thread{'s' if threads > 1 else ''}"


def roofline_panel(prof: NodeProfile) -> Panel | None:
    lines, note = roofline_lines(prof)
    if not lines:
        return None

    return charts.roofline_drawing(lines, f"Roofline ({note})")


def thesis_figure(prof: NodeProfile):
    """Small multiples, one panel per thesis kernel (the family has 16: one chart of 16 lines is
    unreadable), each over the others in grey, on shared axes; None without thesis results."""
    counts = curves.thread_counts(prof, "thesis")
    data = curves.size_curves(prof, "thesis", "tpi_us", counts[-1]) if counts else {}
    if not data:
        return None
    ncols = min(4, len(data))
    nrows = math.ceil(len(data) / ncols)
    fig = charts.figure(3.1 * ncols + 0.4, 2.4 * nrows + 0.7)
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    xs = [x for c in data.values() for x in c["ws_bytes"]]
    values = [v for c in data.values() for v in c["value"]]
    log = charts.LOG_SPAN < (max(values) / min(values)) if min(values) > 0 else False
    marks = [(label, x, "#555555") for label, x in curves.cache_marks(prof.caches, counts[-1], sizes=False)]
    for ax, (kernel, c) in zip(axes, data.items()):
        for other, oc in data.items():
            if other != kernel:
                ax.plot(oc["ws_bytes"], oc["value"], color="#d4d4d4", linewidth=0.8, zorder=1)
        charts.plot_curve(ax, c, "ws_bytes", kernel, charts.PALETTE[0])
        charts.bytes_axis(ax, xs, max_ticks=4)
        charts.value_axis(ax, values, "", force_log=log)
        ax.set_xlabel("")
        ax.set_ylabel("")
        charts.mark_boundaries(ax, marks)
        ax.set_title(kernel, loc="left", fontsize=10)
    for ax in axes[len(data):]:
        ax.set_visible(False)
    t = counts[-1]
    fig.suptitle(f"Thesis kernels: time per iteration at the smallest stride, {t} thread{'s' if t > 1 else ''}"
                 "\n(grey: the other kernels)", fontsize=11, fontweight="bold", x=0.01, ha="left")
    fig.supxlabel("working set, all threads (bytes, log scale)", fontsize=10)
    fig.supylabel("time per iteration (µs)" + (", log scale" if log else ""), fontsize=10)
    return fig


def grid_figure(panels: list[Panel], ncols: int = 3, panel_w: float = 6.2, panel_h: float = 4.2,
                title: str | None = None):
    ncols = max(1, min(ncols, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    fig = charts.figure(panel_w * ncols, panel_h * nrows + (0.4 if title else 0))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, panel in zip(axes, panels):
        panel(ax)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=13, fontweight="bold", x=0.01, ha="left")
    return fig


def _gbs(v):
    return None if v is None else round(v, 2)


def level_table(prof: NodeProfile) -> Table | None:
    counts = curves.thread_counts(prof, "bandwidth")
    one, most = (counts[0], counts[-1]) if counts else (None, None)
    bw1 = curves.level_figures(curves.size_curves(prof, "bandwidth", "bandwidth_gbs", one), prof.caches, one) \
        if one else []
    bwn = curves.level_figures(curves.size_curves(prof, "bandwidth", "bandwidth_gbs", most), prof.caches, most) \
        if most and most != one else []
    lat_t, lat = curves.latency_curves(prof)
    latency = curves.level_figures(lat, prof.caches, lat_t, best=min) if lat else []
    labels = [lv.label for lv in curves.level_bands(prof.caches, 1)]
    found = {name: {lv.label: lv for lv in levels} for name, levels in (("bw1", bw1), ("bwn", bwn), ("lat", latency))}
    rows = []
    for label in labels:
        b1, bn, la = (found[k].get(label) for k in ("bw1", "bwn", "lat"))
        if not (b1 or bn or la):
            continue
        cache = next((c for c in prof.caches if curves.level_label(c.level) == label), None)
        row = [label, charts.fmt_bytes(cache.size_bytes) if cache else "",
               _gbs(b1.value) if b1 else None, b1.kernel if b1 else ""]
        if most and most != one:
            row += [_gbs(bn.value) if bn else None, bn.kernel if bn else ""]
        row.append(round(la.value, 2) if la else None)
        rows.append(row)
    if not rows:
        return None
    cols = ["level", "size (one instance)", f"GB/s, {one} thread", "best kernel"]
    if most and most != one:
        cols += [f"GB/s, {most} threads", "best kernel "]
    cols.append("latency (ns)")
    return Table("Per-level figures", cols, rows,
                 "Median over the working sets that sit inside each level (up to 3/4 of its capacity, beyond 1.5x "
                 "the level below; memory: beyond 2x the last cache), best kernel for bandwidth. The node's memory "
                 "bandwidth, as `nodereg nodes` and the roofline quote it, is one kernel's: see the facts above.")


def facts(prof: NodeProfile) -> list[tuple[str, str]]:
    n, p, rows = prof.node, prof.profile, prof.rows
    out = [("CPU", prof.headline())]
    if n.get("memory_bytes"):
        out.append(("memory", charts.fmt_bytes(n["memory_bytes"])))
    if n.get("max_mhz"):
        out.append(("max frequency", f"{n['max_mhz']:.0f} MHz"))
    if prof.caches:
        out.append(("data caches", ", ".join(f"L{c.level} {charts.fmt_bytes(c.size_bytes)}"
                                             + (f" x{c.instances}" if c.instances > 1 else "") for c in prof.caches)))
    out.append(("profile", f"{p['uid']} ({p['mode']}, {fmt_time(p['started_at'])}"
                + (f", {p['duration_s']:.0f} s)" if p.get("duration_s") else ")")))
    if p.get("compiler") or p.get("cflags"):
        out.append(("built with", " ".join(str(x) for x in (p.get("compiler"), p.get("cflags")) if x)))
    memory = curves.memory_bandwidth(prof)
    if memory is not None:   # the figure `nodereg nodes` and the roofline quote
        out.append(("memory bandwidth", f"{memory.value:.3g} GB/s ({memory.describe()})"))
    fp64 = curves.node_fp64(prof)
    if fp64 is not None:     # ... and the FP64 peak, by the same rule
        out.append(("FP64 peak", f"{fp64.value:.3g} GFLOP/s ({fp64.describe()})"))
    out.append(("configs measured", f"{len(rows)} ({int(rows['unstable'].sum())} unstable, "
                                     f"kernels: {', '.join(curves.kernel_order(rows['ub'].unique()))})"))
    return out


def summary_panels(prof: NodeProfile) -> list[Panel]:
    panels = bandwidth_panels(prof) + [latency_panel(prof)]
    panels += [scaling_panel(prof, "bandwidth", "bandwidth_gbs", "bandwidth (GB/s)",
                             "Memory bandwidth vs threads"),
               scaling_panel(prof, "compute", "gflops", "GFLOP/s", "Compute throughput vs threads"),
               roofline_panel(prof)]
    return [p for p in panels if p is not None]


def _single(panel: Panel, w: float = 8.0, h: float = 4.8):
    return lambda: grid_figure([panel], ncols=1, panel_w=w, panel_h=h)


def charts_of(prof: NodeProfile) -> list[Chart]:
    out = []
    bw = bandwidth_panels(prof)
    if bw:
        out.append(Chart("Bandwidth against working-set size", lambda: grid_figure(bw, ncols=2, panel_h=4.6),
                         "One thread and the most threads measured (preferred placement, unit stride). Dotted lines: "
                         "the capacity of each cache level for that many threads, from the node's inventory. Hollow "
                         "markers: unstable measurements (high variation between repetitions)."))
    latency = latency_panel(prof)
    if latency:
        out.append(Chart("Latency against working-set size", _single(latency),
                         "Dependent loads over a random cyclic permutation: the time of one access as the working "
                         "set outgrows each cache."))
    scal = [p for p in (scaling_panel(prof, "bandwidth", "bandwidth_gbs", "bandwidth (GB/s)",
                                      "Memory bandwidth vs threads"),
                        scaling_panel(prof, "compute", "gflops", "GFLOP/s", "Compute throughput vs threads")) if p]
    if scal:
        out.append(Chart("Thread scaling", lambda: grid_figure(scal, ncols=2),
                         "Bandwidth at the largest working set of each sweep (memory) and compute kernel throughput "
                         "(integer kernels: giga integer operations per second), by thread count; dashed: other "
                         "placements."))
    roof = roofline_panel(prof)
    if roof:
        out.append(Chart("Roofline", _single(roof, 9.5),
                         "Attainable FLOP rate for a given arithmetic intensity: the FP peak, and the STREAM triad "
                         "bandwidth measured inside each memory level (most threads; another kernel where triad "
                         "was not measured). Dots mark the ridge points."))
    if curves.thread_counts(prof, "thesis"):
        out.append(Chart("Thesis kernels", lambda: thesis_figure(prof),
                         "Time per iteration of the slowest thread (Corredor 2011's measure) at each kernel's "
                         "smallest stride, the most threads measured; one panel per kernel."))
    return out


def host_table(conn: sa.Connection, name: str) -> Table | None:
    """The type's hosts against each other (registry.health), when it was profiled on several."""
    health = type_health(conn, name)
    if len(health.hosts) < 2:
        return None
    columns, rows = host_rows(health)
    return Table(f"Hosts ({len(health.hosts)})", columns, [[r.get(c, "") for c in columns] for r in rows],
                 "Each host's latest profile: key figures and their deviation from the median over the type's "
                 f"hosts (the figures above). Flagged: beyond {THRESHOLD:g} scaled MADs and {MIN_DEVIATION:.0%} "
                 "of the median (`nodereg health`).")


def node_report(conn: sa.Connection, name: str) -> Report:
    prof = node_profile(conn, name)
    sections: list = charts_of(prof)
    if not sections:
        raise UserError(f"node {name!r}: its profile has no bandwidth, latency, compute or thesis results to chart")
    table = level_table(prof)
    if table:
        sections.append(table)
    peaks = curves.fp_peaks(prof)
    if peaks:
        sections.append(Table("Compute peaks", ["kernel", "GFLOP/s", "at threads"],
                              [[p.kernel, round(p.value, 2), p.threads] for p in peaks],
                              "Each kernel at the most threads measured, the better placement: peak_fma's is the "
                              "node's FP64 peak (fp64_gflops in `nodereg nodes`)."))
    hosts = host_table(conn, name)
    if hosts:
        sections.append(hosts)
    if prof.caches:
        sections.append(Table("Caches (data and unified)", ["level", "size", "shared by CPUs", "instances"],
                              [[f"L{c.level}", charts.fmt_bytes(c.size_bytes), c.shared_by, c.instances]
                               for c in prof.caches]))
    panels = summary_panels(prof)
    notes = [] if prof.caches else ["the node has no cache inventory: cache boundaries are not marked"]
    return Report("node", f"Node {name}", prof.headline(), facts(prof), sections,
                  (lambda: grid_figure(panels, title=f"{name}: {prof.headline()}")) if panels
                  else (lambda: thesis_figure(prof)), notes)
