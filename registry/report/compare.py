"""`nodereg report compare N1 N2 ...`: several node profiles overlaid, one colour per node.

One bandwidth kernel is compared (triad unless `kernel` says otherwise, or the first STREAM-like
kernel every node has): against working-set size at one thread and at each node's most threads,
and against threads at the largest working set. Latency, FP throughput against threads and one
roofline per node (memory bandwidth under the FP peak) complete it; a table puts the headline
figures side by side. Cache boundaries are marked in the node's colour (grey where nodes share one).
"""

from __future__ import annotations

import sqlalchemy as sa

from registry.errors import UserError
from registry.report import charts, curves
from registry.report.document import Chart, Report, Table
from registry.report.load import NodeProfile, node_profile
from registry.report.node import Panel, grid_figure


def pick_kernel(profiles: list[NodeProfile], kernel: str | None) -> str:
    have = [set(p.family("bandwidth")["ub"]) for p in profiles]
    common = set.intersection(*have) if have else set()
    if kernel:
        missing = [p.name for p, h in zip(profiles, have) if kernel not in h]
        if missing:
            raise UserError(f"kernel {kernel!r} is not in the profile of {', '.join(missing)}"
                            + (f" (common kernels: {', '.join(curves.kernel_order(common))})" if common else ""))
        return kernel
    if not common:
        raise UserError("these nodes have no bandwidth kernel in common: profile them with the same kernels")
    return curves.kernel_order(common)[0]


def _colors(profiles: list[NodeProfile]) -> dict[str, str]:
    names = [p.name for p in profiles]
    return {n: charts.color_for(n, names) for n in names}


def size_panel(profiles, colors, family, metric, kernel, threads_of, ylabel, title, legend=True) -> Panel:
    """One curve per node of `kernel` at the thread count `threads_of(profile)` picks."""
    data = []
    for p in profiles:
        t = threads_of(p)
        c = curves.size_curves(p, family, metric, t).get(kernel) if t else None
        if c is not None:
            data.append((p, t, c))

    def draw(ax) -> None:
        for p, t, c in data:
            charts.plot_curve(ax, c, "ws_bytes", f"{p.name} ({t} thr)", colors[p.name])
        charts.bytes_axis(ax, [x for _, _, c in data for x in c["ws_bytes"]])
        charts.value_axis(ax, [v for _, _, c in data for v in c["value"]], ylabel)
        charts.mark_boundaries(ax, [(label, x, colors[p.name]) for p, t, _ in data
                                    for label, x in curves.cache_marks(p.caches, t, sizes=False)])
        ax.set_title(title, loc="left")
        if legend:
            charts.legend_outside(ax, title="node")
    return draw if data else None


def scaling_panel(profiles, colors, family, metric, kernel, ylabel, title) -> Panel | None:
    data = []
    for p in profiles:
        series = curves.scaling(p, family, metric)
        c = next((c for (k, _), c in series.items() if k == kernel), None)   # the preferred placement
        if c is not None:
            data.append((p, c))
    if not any(len(c) > 1 for _, c in data):
        return None

    def draw(ax) -> None:
        for p, c in data:
            charts.plot_curve(ax, c, "threads", p.name, colors[p.name])
        charts.threads_axis(ax, [t for _, c in data for t in c["threads"]])
        charts.value_axis(ax, [v for _, c in data for v in c["value"]], ylabel, force_log=False)
        ax.set_title(title, loc="left")
        charts.legend_outside(ax)
    return draw


def roofline_panel(profiles, colors, kernel: str) -> Panel | None:
    lines = []
    for p in profiles:
        peak = curves.fp_peak(p)
        _, levels = curves.bandwidth_ceilings(p, kernel)
        memory = next((lv.value for lv in levels if lv.label == "memory"), None)
        if kernel == curves.REFERENCE_KERNEL and memory is not None:   # the node's memory bandwidth, as everywhere
            memory = curves.memory_bandwidth(p).value
        if peak and memory:
            lines.append(charts.RoofLine(f"{p.name}: {memory:.3g} GB/s, {peak.value:.3g} GFLOP/s",
                                         colors[p.name], memory, peak.value))
    if not lines:
        return None

    return charts.roofline_drawing(lines, f"Roofline ({kernel} memory bandwidth, FP peak)")


def _level(levels, label):
    lv = next((lv for lv in levels if lv.label == label), None)
    return None if lv is None else round(lv.value, 2)


def headline_table(profiles: list[NodeProfile], kernel: str) -> Table:
    rows = []
    for p in profiles:
        counts = curves.thread_counts(p, "bandwidth")
        single = curves.size_curves(p, "bandwidth", "bandwidth_gbs", counts[0]) if counts else {}
        one = curves.level_figures({kernel: single[kernel]}, p.caches, counts[0]) if kernel in single else []
        _, most = curves.bandwidth_ceilings(p, kernel)
        lat_t, lat = curves.latency_curves(p)
        latency = curves.level_figures(lat, p.caches, lat_t, best=min) if lat else []
        peak = curves.fp_peak(p)
        rows.append([p.name, p.node.get("cpu_model") or "", p.node.get("cores"), p.node.get("n_cpus"),
                     " / ".join(charts.fmt_bytes(c.size_bytes) for c in p.caches),
                     _level(one, "memory"), _level(most, "memory"), counts[-1] if counts else None,
                     _level(most, "L1"), round(peak.value, 1) if peak else None,
                     _level(latency, "memory")])
    return Table("Side by side", ["node", "CPU", "cores", "CPUs", "caches (L1 / L2 / ...)",
                                  f"memory {kernel} GB/s, 1 thread", f"memory {kernel} GB/s, most threads",
                                  "most threads", f"L1 {kernel} GB/s, most threads", "FP peak GFLOP/s",
                                  "memory latency (ns)"], rows,
                 "Memory figures: median over working sets beyond twice the last-level cache; L1: inside L1.")


def compare_report(conn: sa.Connection, names: list[str], kernel: str | None = None) -> Report:
    names = list(dict.fromkeys(names))
    if len(names) < 2:
        raise UserError("compare needs at least two different nodes")
    profiles = [node_profile(conn, n) for n in names]
    kernel = pick_kernel(profiles, kernel)
    colors = _colors(profiles)
    bw1 = size_panel(profiles, colors, "bandwidth", "bandwidth_gbs", kernel,
                     lambda p: (curves.thread_counts(p, "bandwidth") or [None])[0], "bandwidth (GB/s)",
                     f"{kernel} bandwidth, 1 thread", legend=False)
    bwn = size_panel(profiles, colors, "bandwidth", "bandwidth_gbs", kernel,
                     lambda p: (curves.thread_counts(p, "bandwidth") or [None])[-1], "bandwidth (GB/s)",
                     f"{kernel} bandwidth, most threads")
    lat = size_panel(profiles, colors, "latency", "latency_ns", "chase",
                     lambda p: curves.latency_curves(p)[0], "latency per access (ns)", "Memory latency (chase)")
    bw_scal = scaling_panel(profiles, colors, "bandwidth", "bandwidth_gbs", kernel, "bandwidth (GB/s)",
                            f"{kernel} memory bandwidth vs threads")
    fp_scal = scaling_panel(profiles, colors, "compute", "gflops", curves.FP_PEAK_KERNEL, "GFLOP/s",
                            f"{curves.FP_PEAK_KERNEL} vs threads")
    roof = roofline_panel(profiles, colors, kernel)
    sections: list = []
    if bw1 or bwn:
        pair = [p for p in (bw1, bwn) if p]
        sections.append(Chart(f"{kernel} bandwidth against working-set size",
                              lambda: grid_figure(pair, ncols=2, panel_h=4.6),
                              "Dotted lines: each node's cache capacities for that many threads, in its colour "
                              "(grey where the nodes share one)."))
    if lat:
        sections.append(Chart("Latency against working-set size",
                              lambda: grid_figure([lat], ncols=1, panel_w=8.0, panel_h=4.8)))
    scal = [p for p in (bw_scal, fp_scal) if p]
    if scal:
        sections.append(Chart("Thread scaling", lambda: grid_figure(scal, ncols=2),
                              f"{kernel} at the largest working set of each sweep, and the FP peak kernel."))
    if roof:
        sections.append(Chart("Rooflines", lambda: grid_figure([roof], ncols=1, panel_w=9.5, panel_h=4.8)))
    sections.append(headline_table(profiles, kernel))
    panels = [p for p in (bw1, bwn, lat, bw_scal, fp_scal, roof) if p]
    if not panels:
        raise UserError(f"nothing to compare: the profiles of {', '.join(names)} have no common results to chart")
    facts = [(p.name, p.headline()) for p in profiles] + [("bandwidth kernel", kernel)]
    return Report("compare", f"Nodes compared: {', '.join(names)}", f"{len(names)} node profiles, kernel {kernel}",
                  facts, sections, lambda: grid_figure(panels, title=f"{' vs '.join(names)} ({kernel})"))
