"""Chart descriptions for plotly.js (served from the plotly package: registry/web/app.py, /static).

A figure is a plain dict {data, layout} that the page embeds as JSON and plotly.js draws. Names
are data: plotly reads `<b>`, `<br>` and entities in labels, so every label is entity-escaped
here and shows as the text it is (`<script>...` included). NaN becomes null (JSON has no NaN).
"""

from __future__ import annotations

import html
import math

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")


def label(text) -> str:
    """Text plotly shows literally (it would otherwise interpret tags and entities)."""
    return html.escape("" if text is None else str(text), quote=False)


def num(values) -> list:
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]


def _axis(title: str, log: bool = False, **extra) -> dict:
    return {"title": {"text": label(title)}, "type": "log" if log else "linear", "automargin": True, **extra}


def _layout(title: str, xaxis: dict, yaxis: dict, **extra) -> dict:
    return {"title": {"text": label(title), "x": 0, "font": {"size": 15}}, "xaxis": xaxis, "yaxis": yaxis,
            "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "height": 360, "legend": {"font": {"size": 11}},
            "hovermode": "closest", **extra}


def lines(title: str, series: list[tuple[str, list, list]], xtitle: str, ytitle: str, *, xlog=False, ylog=False,
          marks: list[tuple[str, float]] = (), dash: dict | None = None) -> dict:
    """One line per (name, xs, ys); `marks` are labelled vertical lines (cache capacities)."""
    data = [{"type": "scatter", "mode": "lines+markers", "name": label(name), "x": num(xs), "y": num(ys),
             "line": {"color": PALETTE[i % len(PALETTE)], "dash": (dash or {}).get(name, "solid")},
             "marker": {"size": 5}}
            for i, (name, xs, ys) in enumerate(series)]
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
               "line": {"color": "#888", "width": 1, "dash": "dot"}} for _, x in marks]
    notes = [{"xref": "x", "yref": "paper", "x": math.log10(x) if xlog else x, "y": 1, "text": label(t),
              "showarrow": False, "font": {"size": 10, "color": "#555"}, "yanchor": "bottom"} for t, x in marks]
    xaxis = _axis(xtitle, xlog, **({"dtick": 1} if xtitle == "threads" and len({x for _, xs, _ in series
                                                                               for x in xs}) <= 16 else {}))
    return {"data": data, "layout": _layout(title, xaxis, _axis(ytitle, ylog), shapes=shapes, annotations=notes)}


def steps(title: str, series: dict[str, tuple[list[str], list]], ytitle: str) -> dict:
    """Values that hold from a date until the next one (a price history), one step line per name."""
    data = [{"type": "scatter", "mode": "lines+markers", "line": {"shape": "hv", "color": PALETTE[i % len(PALETTE)]},
             "name": label(name), "x": [str(d) for d in days], "y": num(values)}
            for i, (name, (days, values)) in enumerate(series.items())]
    return {"data": data, "layout": _layout(title, {"type": "date", "automargin": True}, _axis(ytitle))}


def intervals(title: str, names: list[str], predicted: list, low: list, high: list, measured: list,
              xtitle: str) -> dict:
    """Horizontal bars with the prediction interval as error bars and measured runs as diamonds, best on top."""
    pred = num(predicted)
    plus = [None if h is None or p is None else max(h - p, 0.0) for h, p in zip(num(high), pred)]
    minus = [None if lo is None or p is None else max(p - lo, 0.0) for lo, p in zip(num(low), pred)]
    ys = [label(n) for n in names]
    data = [{"type": "bar", "orientation": "h", "name": "predicted", "x": pred, "y": ys,
             "marker": {"color": PALETTE[0]},
             "error_x": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": "#333"}}]
    if any(m is not None for m in num(measured)):
        data.append({"type": "scatter", "mode": "markers", "name": "measured (median)", "x": num(measured), "y": ys,
                     "marker": {"symbol": "diamond", "size": 9, "color": "#000"}})
    layout = _layout(title, _axis(xtitle), {"autorange": "reversed", "automargin": True, "type": "category"},
                     height=max(300, 22 * len(names) + 100), barmode="overlay")
    return {"data": data, "layout": layout}


def roofline(title: str, ceilings: list[tuple[str, float | None, float]]) -> dict:
    """Attainable GFLOP/s against arithmetic intensity: one line per (label, GB/s or None, peak GFLOP/s)."""
    xs = [2 ** (e / 2) for e in range(-10, 17)]
    series, dash = [], {}
    for name, gbs, peak in ceilings:
        ys = [min(gbs * x, peak) if gbs else peak for x in xs]
        series.append((name, xs, ys))
        if gbs is None:
            dash[name] = "dash"
    return lines(title, series, "arithmetic intensity (FLOP/byte)", "attainable GFLOP/s", xlog=True, ylog=True,
                 dash=dash)


def timeline(title: str, metrics: dict[str, tuple[list, list]], phases: list[tuple[str, float, float]]) -> dict:
    """Sampled metrics over time (each scaled to its own maximum) with the phases shaded and named."""
    data = []
    for i, (metric, (ts, vs)) in enumerate(metrics.items()):
        values = num(vs)
        top = max((v for v in values if v is not None), default=0.0) or 1.0
        data.append({"type": "scatter", "mode": "lines", "name": label(f"{metric} (max {top:.4g})"),
                     "x": num(ts), "y": [None if v is None else v / top for v in values],
                     "line": {"color": PALETTE[i % len(PALETTE)], "width": 1.5}})
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": a, "x1": b, "y0": 0, "y1": 1, "line": {"width": 0},
               "fillcolor": PALETTE[i % len(PALETTE)], "opacity": 0.12, "layer": "below"}
              for i, (_, a, b) in enumerate(phases)]
    notes = [{"xref": "x", "yref": "paper", "x": (a + b) / 2, "y": 1, "text": label(name), "showarrow": False,
              "yanchor": "bottom", "font": {"size": 10}} for name, a, b in phases]
    return {"data": data, "layout": _layout(title, _axis("time since start (s)"), _axis("share of its maximum"),
                                            shapes=shapes, annotations=notes)}


def scatter(title: str, groups: dict[str, tuple[list, list, list]], xtitle: str, ytitle: str, *, log=True,
            diagonal=True) -> dict:
    """Points per group (name -> xs, ys, hover texts), with the y = x line."""
    data = [{"type": "scatter", "mode": "markers", "name": label(g), "x": num(xs), "y": num(ys),
             "text": [label(t) for t in texts], "marker": {"color": PALETTE[i % len(PALETTE)], "size": 7}}
            for i, (g, (xs, ys, texts)) in enumerate(groups.items())]
    values = [v for _, (xs, ys, _t) in groups.items() for v in num(xs) + num(ys) if v]
    if diagonal and values:
        lo, hi = min(values), max(values)
        data.append({"type": "scatter", "mode": "lines", "name": "y = x", "x": [lo, hi], "y": [lo, hi],
                     "line": {"color": "#999", "dash": "dot"}})
    return {"data": data, "layout": _layout(title, _axis(xtitle, log), _axis(ytitle, log))}


def from_result(columns: list[str], rows: list[tuple], x: str, y: str, kind: str) -> dict:
    """A chart of a query result: `y` against `x` as lines, points or bars."""
    xi, yi = columns.index(x), columns.index(y)
    xs = [r[xi] for r in rows]
    xs = num(xs) if all(isinstance(v, (int, float)) or v is None for v in xs) else [label(v) for v in xs]
    ys = num([r[yi] if isinstance(r[yi], (int, float)) else None for r in rows])
    trace = {"type": "bar" if kind == "bar" else "scatter", "name": label(y), "x": xs, "y": ys,
             "marker": {"color": PALETTE[0]}}
    if kind != "bar":
        trace["mode"] = "lines+markers" if kind == "line" else "markers"
    return {"data": [trace], "layout": _layout(f"{y} by {x}", _axis(x), _axis(y))}
