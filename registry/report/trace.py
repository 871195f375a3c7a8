"""`nodereg report trace TRACE`: an application run over time, its phases and what they resemble.

The chart stacks one panel per metric group (CPU, memory, I/O, page faults, scheduling, counters,
then imported metrics grouped by the unit their names imply) under a strip that places each phase in
time; every panel shades the phases in the same colours. Tables list the phases, each phase's
signature (one table per source: proc, counters, cachegrind, sar, ...) and, when `nodereg match`
has stored predictions for the trace, the microbenchmark configs each phase was matched with.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import sqlalchemy as sa

from registry.report import charts
from registry.report.document import Chart, Report, Table
from registry.report.load import TraceData, TracePhase, resolve_trace
from registry.values import plural

# (panel title, axis label, metrics) for the metrics `nodereg trace` samples (registry.measure.sampler)
GROUPS = [
    ("CPU", "CPUs busy, threads", ("cpu_util", "threads", "threads_active")),
    ("Memory", "MB", ("rss_mb", "wss_mb")),
    ("I/O", "MB/s", ("read_mb_s", "write_mb_s")),
    ("Page faults", "faults per second", ("minflt_per_s", "majflt_per_s")),
    ("Scheduling", "switches per second", ("ctxsw_per_s",)),
    ("Hardware counters", "ratio", ("ipc", "cache_miss_rate", "misses_per_kinst")),
]
# units implied by the names of other metrics (sar and friends)
UNIT_RULES = [(re.compile(r"^%|%$|_pct$"), "Percent", "%"),
              (re.compile(r"^kb|_kb$"), "Kilobytes", "KB"),
              (re.compile(r"_mb$"), "Megabytes", "MB"),
              (re.compile(r"/s$|_per_s$|_[kmg]b_s$|ps$"), "Rates", "per second"),
              (re.compile(r"_s$"), "Durations", "seconds")]   # wss_window_s: a window's length, not a rate
MAX_PANELS, MAX_SERIES = 8, 6
PHASE_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                "#9c755f", "#bab0ac")
SERIES_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf")


def metric_groups(samples: pd.DataFrame) -> tuple[list[tuple[str, str, list[str]]], list[str]]:
    """Panels (title, unit, metrics) for the metrics that have data, and the metrics left out."""
    present = [c for c in samples.columns if samples[c].notna().any()]
    panels, used = [], set()
    for title, unit, names in GROUPS:
        found = [m for m in names if m in present]
        if found:
            panels.append((title, unit, found))
            used.update(found)
    rest: dict[tuple[str, str], list[str]] = {}
    for m in (m for m in present if m not in used):
        title, unit = next(((t, u) for rx, t, u in UNIT_RULES if rx.search(m.lower())), ("Other", ""))
        rest.setdefault((title, unit), []).append(m)
    rule_order = [t for _, t, _ in UNIT_RULES] + ["Other"]
    for (title, unit), names in sorted(rest.items(), key=lambda kv: rule_order.index(kv[0][0])):
        ranked = sorted(names, key=lambda m: -_variation(samples[m]))   # the most telling series first
        panels.append((title, unit, ranked))
    kept, dropped = [], []
    for title, unit, names in panels:
        if len(kept) < MAX_PANELS:
            kept.append((title, unit, names[:MAX_SERIES]))
            dropped += names[MAX_SERIES:]
        else:
            dropped += names
    return kept, dropped


def series_log(values: np.ndarray) -> bool:
    """Log scale for a time series only when it is positive throughout and spans more than two decades
    above its 5th percentile (page faults, working set); utilisations and percentages stay linear."""
    vals = values[np.isfinite(values)]
    if not len(vals) or vals.min() <= 0:
        return False
    return bool(vals.max() / np.percentile(vals, 5) > 100)


def _variation(s: pd.Series) -> float:
    s = s.dropna()
    mean = float(np.abs(s).mean()) if len(s) else 0.0
    return float(s.std()) / mean if mean > 0 and len(s) > 1 else 0.0


def phase_color(i: int) -> str:
    return PHASE_COLORS[i % len(PHASE_COLORS)]


def _shade(ax, phases: list[TracePhase]) -> None:
    for i, ph in enumerate(phases):
        for a, b in ph.intervals:
            ax.axvspan(a, b, color=phase_color(i), alpha=0.13, linewidth=0, zorder=0)


def _phase_strip(ax, phases: list[TracePhase]) -> None:
    """One row per phase (named), or a single row when there are too many phases to name."""
    named = len(phases) <= 12
    for i, ph in enumerate(phases):
        row = i if named else 0
        ax.broken_barh([(a, max(b - a, 0.0)) for a, b in ph.intervals], (row - 0.38, 0.76),
                       facecolors=phase_color(i), edgecolor="none")
    if named:
        ax.set_yticks(range(len(phases)), labels=[f"{ph.idx}: {ph.name}" for ph in phases], fontsize=8)
        ax.set_ylim(len(phases) - 0.5, -0.5)
    else:
        ax.set_yticks([0], labels=[plural(len(phases), "phase")], fontsize=8)
        ax.set_ylim(0.5, -0.5)
    ax.grid(False)
    ax.set_title("Phases", loc="left")
    ax.tick_params(axis="y", length=0)
    ax.spines["left"].set_visible(False)


def timeline_figure(tr: TraceData):
    panels, _ = metric_groups(tr.samples)
    strip_h = 0.35 + 0.22 * (min(len(tr.phases), 12) if len(tr.phases) <= 12 else 1)
    heights = ([strip_h] if tr.phases else []) + [1.9] * len(panels)
    if not heights:
        heights = [1.0]
    fig = charts.figure(11.0, sum(heights) + 0.9)
    axes = fig.subplots(len(heights), 1, sharex=True, squeeze=False, height_ratios=heights).ravel()
    rest = list(axes)
    if tr.phases:
        _phase_strip(rest.pop(0), tr.phases)
    t = tr.samples.index.to_numpy(dtype=float)
    for ax, (title, unit, names) in zip(rest, panels):
        _shade(ax, tr.phases)
        for j, m in enumerate(names):
            ax.plot(t, tr.samples[m].to_numpy(dtype=float), color=SERIES_COLORS[j % len(SERIES_COLORS)],
                    label=m, linewidth=1.3, marker="." if len(t) <= 60 else None, zorder=3)
        vals = tr.samples[names].to_numpy(dtype=float).ravel()
        charts.value_axis(ax, vals[np.isfinite(vals)], unit, force_log=series_log(vals))
        ax.set_title(title, loc="left")
        charts.legend_outside(ax)
    if not panels:
        charts.no_data(rest[0] if rest else axes[0], "no samples stored for this trace")
    end = max([tr.wall_s or 0.0] + [b for ph in tr.phases for _, b in ph.intervals] + list(t[-1:]))
    axes[-1].set_xlim(0, end * 1.01 if end > 0 else 1)
    axes[-1].set_xlabel("time since the command started (s)")
    fig.suptitle(f"{tr.app} on {tr.node}: {tr.wall_s:.4g} s" if tr.wall_s else f"{tr.app} on {tr.node}",
                 fontsize=12, fontweight="bold", x=0.01, ha="left")
    return fig


def phase_table(tr: TraceData) -> Table:
    rows = [[ph.idx, ph.name, ph.method, round(ph.start_s, 3), round(ph.end_s, 3),
             None if ph.time_s is None else round(ph.time_s, 3), round(100 * ph.weight, 1), ph.calls, ph.iterations]
            for ph in tr.phases]
    return Table("Phases", ["#", "name", "method", "start (s)", "end (s)", "time (s)", "share of run (%)", "calls",
                            "iterations"], rows)


def signature_tables(tr: TraceData) -> list[Table]:
    """One table per signature source: a row per phase, a column per metric."""
    sources = sorted({s for ph in tr.phases for s in ph.signature})
    tables = []
    for src in sources:
        known = [m for _, _, names in GROUPS for m in names]
        metrics = sorted({m for ph in tr.phases for m in ph.signature.get(src, {})},
                         key=lambda m: (known.index(m) if m in known else len(known), m))
        rows = [[ph.idx, ph.name] + [_round(ph.signature.get(src, {}).get(m)) for m in metrics] for ph in tr.phases]
        tables.append(Table(f"Signature: {src}", ["#", "phase"] + metrics, rows))
    return tables


def _round(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(f"{v:.4g}")


def _score(d: dict) -> str:
    for key, fmt in (("index", "index {:.4g}"), ("similarity", "similarity {:.3g}"), ("distance", "distance {:.3g}"),
                     ("weight", "weight {:.3g}")):
        if isinstance(d.get(key), (int, float)):
            return fmt.format(d[key])
    return ""


MATCH_LISTS = ("candidates", "neighbours", "neighbors", "matches", "configs")


def phase_matches(explanation: dict) -> list[tuple[str, list[str]]]:
    """Per phase, its matched configs best first ('config (score)'), from a stored prediction's explanation.

    Understands the corredor model's shape (per phase: winner + candidates with their index) and
    lists of neighbours/matches naming a config (or `reference`) with a similarity, distance or
    weight, per phase under "phases" or, for a whole-run query, at the top level.
    """
    entries = explanation.get("phases")
    if not entries and any(k in explanation for k in ("winner",) + MATCH_LISTS):
        entries = [{"phase": "whole run", **explanation}]
    out = []
    for i, ph in enumerate(entries or []):
        if not isinstance(ph, dict):
            continue
        name = str(ph.get("phase") or ph.get("name") or f"phase {i}")
        items, seen = [], set()
        winner = ph.get("winner")
        if isinstance(winner, str):
            items.append(f"{winner} ({_score(ph)})" if _score(ph) else winner)
            seen.add(winner)
        for key in MATCH_LISTS:
            for c in ph.get(key) or []:
                cfg = (c.get("config") or c.get("reference")) if isinstance(c, dict) else c
                if isinstance(cfg, str) and cfg not in seen:
                    seen.add(cfg)
                    score = _score(c) if isinstance(c, dict) else ""
                    items.append(f"{cfg} ({score})" if score else cfg)
        out.append((name, items))
    return out


def latest_explanations(conn: sa.Connection, trace_id: int, base_node: str) -> dict[str, dict]:
    """model -> explanation of its latest prediction for the trace: the base node's when stored (the
    matching happens on the base node, and `nodereg match` stores the matches in that row; rows
    without them say in `matches_in` which node's row has them)."""
    rows = conn.execute(sa.text(
        "SELECT p.model_name, n.name AS node, p.explanation_json FROM predictions p "
        "JOIN nodes n ON n.node_id = p.node_id WHERE p.trace_id = :t "
        "ORDER BY p.created_at DESC, p.prediction_id DESC"), {"t": trace_id}).all()
    out: dict[str, dict] = {}
    for model, node, text in rows:
        try:
            exp = json.loads(text) if text else {}
        except ValueError:
            continue
        exp = exp if isinstance(exp, dict) else {}
        if model not in out or node == base_node and out[model][0] != base_node \
                or node == out[model][1].get("matches_in"):
            out[model] = (node, exp)
    return {m: exp for m, (_, exp) in out.items()}


def match_table(conn: sa.Connection, tr: TraceData) -> Table | None:
    if tr.trace_id is None:
        return None
    rows = []
    for model, exp in sorted(latest_explanations(conn, tr.trace_id, tr.node).items()):
        for phase, items in phase_matches(exp):
            rows.append([model, phase] + (items + ["", "", ""])[:3])
    if not rows:
        return None
    return Table("Matched microbenchmark configs", ["model", "phase", "best match", "second", "third"], rows,
                 "From the latest predictions stored by `nodereg match` for this trace.")


def facts(tr: TraceData) -> list[tuple[str, str]]:
    out = [("application", tr.app), ("traced on", tr.node), ("trace", tr.uid or tr.label)]
    if tr.source_file:
        out.append(("file", tr.source_file + ("" if tr.trace_id else " (not in the registry)")))
    out += [("status", tr.status), ("wall time", f"{tr.wall_s:.4g} s" if tr.wall_s else "unknown"),
            ("sampling interval", f"{tr.interval_s:g} s" if tr.interval_s else "unknown"),
            ("started", tr.started_at), ("command", " ".join(tr.command)),
            ("samples", f"{len(tr.samples)} x {len(tr.samples.columns)} metrics"), ("phases", str(len(tr.phases)))]
    return out


def trace_report(conn: sa.Connection, ref: str) -> Report:
    tr = resolve_trace(conn, ref)
    _, dropped = metric_groups(tr.samples)
    caption = ("Shaded: the phases, in the colours of the strip on top. "
               + (f"Not plotted ({len(dropped)}): {', '.join(dropped[:20])}{' ...' if len(dropped) > 20 else ''}."
                  if dropped else ""))
    sections: list = [Chart("Samples over time", lambda: timeline_figure(tr), caption.strip())]
    if tr.phases:
        sections.append(phase_table(tr))
    sections += signature_tables(tr)
    matches = match_table(conn, tr)
    if matches:
        sections.append(matches)
    notes = []
    if tr.samples.empty:
        notes.append("this trace has no stored samples")
    if not tr.phases:
        notes.append("this trace has no phases")
    return Report("trace", f"Trace of {tr.app}", f"on node {tr.node}, {tr.started_at}", facts(tr), sections,
                  lambda: timeline_figure(tr), notes)
