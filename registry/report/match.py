"""`nodereg report match TRACE`: the predictions `nodereg match` stored for a trace, against reality.

One horizontal bar per node (grouped by model when several models predicted: each model's latest
prediction per node), whiskers for the prediction interval, and the measured median of the real
runs (`v_runs`, with their min-max range) as black diamonds where the registry has them. Nodes are
ordered by the first model's rank, best on top; the time the traced run took on its base node is a
dotted reference line. A table gives the numbers, with the error of each prediction that has a
measurement.
"""

from __future__ import annotations

import pandas as pd
import sqlalchemy as sa

from registry.errors import UserError
from registry.report import charts
from registry.report.document import Chart, Report, Table
from registry.report.load import TraceData, resolve_trace
from registry.values import command_line

MAX_CHART_NODES, MAX_TABLE_ROWS = 30, 300
MODEL_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948")

_PREDICTIONS_SQL = """
SELECT p.prediction_id, n.name AS node, n.n_cpus, p.model_name, p.threads, p.predicted_s, p.low_s, p.high_s,
       p.node_rank, p.coverage, p.created_at
FROM predictions p JOIN nodes n ON n.node_id = p.node_id
WHERE {where}"""


def latest_predictions(conn: sa.Connection, tr: TraceData) -> pd.DataFrame:
    """Each model's latest prediction per node for this trace (a trace file that is not in the
    registry: the predictions stored for its app without a trace)."""
    if tr.trace_id is not None:
        sql, params = _PREDICTIONS_SQL.format(where="p.trace_id = :t"), {"t": tr.trace_id}
    else:
        sql = _PREDICTIONS_SQL.format(where="p.trace_id IS NULL AND p.app_id = "
                                            "(SELECT app_id FROM apps WHERE name = :a)")
        params = {"a": tr.app}
    frame = pd.DataFrame([dict(r._mapping) for r in conn.execute(sa.text(sql), params)])
    if frame.empty:
        return frame
    frame = frame.sort_values(["created_at", "prediction_id"])
    return frame.groupby(["model_name", "node"], as_index=False).last()


def measured(conn: sa.Connection, app: str) -> pd.DataFrame:
    return pd.DataFrame([dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT node, threads, runs, median_s, min_s, max_s FROM v_runs WHERE app = :a"), {"a": app})],
        columns=["node", "threads", "runs", "median_s", "min_s", "max_s"])


def measured_for(runs: pd.DataFrame, node: str, threads, n_cpus) -> dict | None:
    """The measured runs a prediction compares with: same thread count; for a prediction without
    one, the runs at all of the node's CPUs (what the app uses by default), else the most runs."""
    mine = runs[runs["node"] == node]
    if mine.empty:
        return None
    if _int(threads) is not None:
        hit = mine[mine["threads"] == _int(threads)]
        return hit.iloc[0].to_dict() if len(hit) else None
    hit = mine[mine["threads"] == _int(n_cpus)] if _int(n_cpus) is not None else mine.iloc[:0]
    return (hit if len(hit) else mine.sort_values("runs")).iloc[-1].to_dict()


def _order(preds: pd.DataFrame, models: list[str]) -> list[str]:
    """Nodes best first by the first model's rank (predicted time where there is no rank)."""
    first = preds[preds["model_name"] == models[0]].copy()
    first["key"] = first["node_rank"].fillna(first["predicted_s"].rank())
    ordered = list(first.sort_values(["key", "predicted_s"])["node"])
    rest = sorted(set(preds["node"]) - set(ordered), key=lambda n: preds[preds["node"] == n]["predicted_s"].min())
    return ordered + rest


def bars_figure(preds: pd.DataFrame, runs: pd.DataFrame, tr: TraceData, models: list[str], nodes: list[str]):
    shown = nodes[:MAX_CHART_NODES]
    n_models = len(models)
    height = max(2.6, 0.32 * len(shown) * max(1, n_models * 0.75) + 1.4)
    fig = charts.figure(10.0, height)
    ax = fig.subplots()
    bar_h = 0.8 / n_models
    values = []
    for j, model in enumerate(models):
        mine = preds[preds["model_name"] == model].set_index("node")
        ys, xs, lo, hi = [], [], [], []
        for i, node in enumerate(shown):
            if node in mine.index:
                r = mine.loc[node]
                ys.append(i - 0.4 + bar_h * (j + 0.5))
                xs.append(r["predicted_s"])
                lo.append(r["predicted_s"] - (r["low_s"] if pd.notna(r["low_s"]) else r["predicted_s"]))
                hi.append((r["high_s"] if pd.notna(r["high_s"]) else r["predicted_s"]) - r["predicted_s"])
                values += [x for x in (r["low_s"], r["high_s"], r["predicted_s"]) if pd.notna(x)]
        ax.barh(ys, xs, height=bar_h * 0.9, color=MODEL_COLORS[j % len(MODEL_COLORS)], alpha=0.85,
                label=f"predicted ({model})" if n_models > 1 else "predicted", zorder=2)
        ax.errorbar(xs, ys, xerr=[lo, hi], fmt="none", ecolor="#333333", elinewidth=1.0, capsize=3, zorder=3)
    meas = []
    for i, node in enumerate(shown):
        threads = preds[preds["node"] == node]["threads"].iloc[0]
        n_cpus = preds[preds["node"] == node]["n_cpus"].iloc[0]
        m = measured_for(runs, node, threads, n_cpus)
        if m is not None:
            meas.append((i, m))
    if meas:
        ax.errorbar([m["median_s"] for _, m in meas], [i for i, _ in meas],
                    xerr=[[m["median_s"] - m["min_s"] for _, m in meas], [m["max_s"] - m["median_s"] for _, m in meas]],
                    fmt="D", color="black", markersize=6, elinewidth=1.6, capsize=0, label="measured (median, range)",
                    zorder=4)
        values += [m[k] for _, m in meas for k in ("median_s", "min_s", "max_s")]
    if tr.wall_s:
        ax.axvline(tr.wall_s, color="#555555", linestyle=(0, (2, 2)), linewidth=1.1,
                   label=f"traced run on {tr.node}: {tr.wall_s:.3g} s", zorder=1)
        values.append(tr.wall_s)
    ax.set_yticks(range(len(shown)), labels=shown)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    log = charts.value_axis(ax, values, "time (s)", axis="x")
    if not log:
        ax.set_xlim(left=0)
    ax.set_title(f"Predicted time of {tr.app} per node" + (f" (best {len(shown)} of {len(nodes)})"
                                                            if len(nodes) > len(shown) else ""), loc="left")
    charts.legend_outside(ax)
    return fig


def costs(conn: sa.Connection, preds: pd.DataFrame, model: str) -> pd.DataFrame:
    """The model's predictions of the priced nodes with cost per run (price x time, and its interval)
    and whether the node is on the time/cost Pareto front (no other node both faster and cheaper)."""
    from registry.prices import current_prices

    prices = current_prices(conn)
    mine = preds[(preds["model_name"] == model) & preds["node"].isin(prices)].copy()
    if mine.empty:
        return mine
    per_hour = mine["node"].map(lambda n: prices[n][0]) / 3600.0
    mine["currency"] = mine["node"].map(lambda n: prices[n][1])
    for col, t in (("cost", "predicted_s"), ("cost_low", "low_s"), ("cost_high", "high_s")):
        mine[col] = per_hour * mine[t].fillna(mine["predicted_s"])
    mine = mine.sort_values(["predicted_s", "cost"])
    mine["pareto"] = mine["cost"] < mine["cost"].cummin().shift(fill_value=float("inf"))
    return mine


def pareto_figure(priced: pd.DataFrame, model: str):
    """Predicted time against cost per run, each with its interval; the Pareto front as a step line."""
    fig = charts.figure(9.0, 5.2)
    ax = fig.subplots()
    for on_front, color, label in ((False, "#9c9c9c", "dominated"), (True, "#e15759", "Pareto front")):
        part = priced[priced["pareto"] == on_front]
        if part.empty:
            continue
        ax.errorbar(part["predicted_s"], part["cost"],
                    xerr=[part["predicted_s"] - part["low_s"].fillna(part["predicted_s"]),
                          part["high_s"].fillna(part["predicted_s"]) - part["predicted_s"]],
                    yerr=[part["cost"] - part["cost_low"], part["cost_high"] - part["cost"]],
                    fmt="o", color=color, ecolor=color, elinewidth=0.8, capsize=2, markersize=6, label=label,
                    zorder=3)
    front = priced[priced["pareto"]]
    ax.step(front["predicted_s"], front["cost"], where="post", color="#e15759", linewidth=1.2, zorder=2)
    for _, r in priced.iterrows():
        ax.annotate(r["node"], (r["predicted_s"], r["cost"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    charts.value_axis(ax, list(priced["low_s"].fillna(priced["predicted_s"])) + list(priced["high_s"].fillna(0)),
                      "predicted time (s)", axis="x")
    charts.value_axis(ax, list(priced["cost_low"]) + list(priced["cost_high"]),
                      f"cost per run ({priced['currency'].iloc[0]})")
    ax.set_title(f"Time and cost per run ({model}): lower left is better", loc="left")
    charts.legend_outside(ax)
    return fig


def numbers_table(preds: pd.DataFrame, runs: pd.DataFrame, models: list[str], nodes: list[str]) -> Table:
    rows = []
    for node in nodes[:MAX_TABLE_ROWS]:
        for model in models:
            hit = preds[(preds["node"] == node) & (preds["model_name"] == model)]
            if hit.empty:
                continue
            r = hit.iloc[0]
            m = measured_for(runs, node, r["threads"], r["n_cpus"])
            err = None if m is None else round(100 * (r["predicted_s"] - m["median_s"]) / m["median_s"], 1)
            rows.append([node, model, _int(r["node_rank"]), round(r["predicted_s"], 3), _r(r["low_s"]),
                         _r(r["high_s"]), None if m is None else round(m["median_s"], 3),
                         None if m is None else int(m["runs"]), err,
                         None if pd.isna(r["coverage"]) else round(100 * r["coverage"], 1)])
    caption = "Error: (predicted - measured median) / measured median."
    if len(nodes) > MAX_TABLE_ROWS:
        caption += f" The best {MAX_TABLE_ROWS} of {len(nodes)} nodes."
    return Table("Predictions and measurements", ["node", "model", "rank", "predicted (s)", "low (s)", "high (s)",
                                                  "measured (s)", "runs", "error (%)", "coverage (%)"], rows, caption)


def _r(v):
    return None if v is None or pd.isna(v) else round(float(v), 3)


def _int(v):
    return None if v is None or pd.isna(v) else int(v)


def match_report(conn: sa.Connection, ref: str) -> Report:
    tr = resolve_trace(conn, ref)
    preds = latest_predictions(conn, tr)
    if preds.empty:
        raise UserError(f"no predictions for trace {tr.uid or tr.label} ({tr.app} on {tr.node}): "
                        f"run {command_line('nodereg', 'match', ref)} first")
    latest = preds.groupby("model_name")["created_at"].max().sort_values(ascending=False)
    models = list(latest.index)     # the most recently used model first: it orders the nodes
    nodes = _order(preds, models)
    runs = measured(conn, tr.app)
    sections = [Chart("Predicted time per node", lambda: bars_figure(preds, runs, tr, models, nodes),
                      "Bars: predicted time with its interval (whiskers); diamonds: the measured median of real "
                      "runs with their range, where the registry has them."),
                numbers_table(preds, runs, models, nodes)]
    priced = costs(conn, preds, models[0])
    if len(priced) >= 2 and priced["currency"].nunique() == 1:
        front = ", ".join(priced[priced["pareto"]]["node"])
        sections.insert(1, Chart("Time and cost per run", lambda: pareto_figure(priced, models[0]),
                                 f"Cost per run = the node's price per hour x the predicted time, both with their "
                                 f"interval. Pareto front (no node is both faster and cheaper): {front}."))
    facts = [("application", tr.app), ("trace", f"{tr.uid or tr.label} (on {tr.node}"
                                       + (f", {tr.wall_s:.4g} s)" if tr.wall_s else ")")),
             ("models", ", ".join(models)), ("nodes predicted", str(len(nodes))),
             ("nodes with measured runs", str(len(set(runs["node"]) & set(nodes))))]
    best = nodes[0]
    best_pred = preds[(preds["node"] == best) & (preds["model_name"] == models[0])]["predicted_s"]
    subtitle = f"best node by {models[0]}: {best}" + (f" ({best_pred.iloc[0]:.3g} s)" if len(best_pred) else "")
    return Report("match", f"Predictions for {tr.app}", subtitle, facts, sections,
                  lambda: bars_figure(preds, runs, tr, models, nodes))
