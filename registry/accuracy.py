"""Did the stored predictions come true? Stored predictions beside the runs measured afterwards.

`nodereg match` stores a prediction set per trace and model; `nodereg run` (or `runs add`, an
import) stores measured runs. Here each app x node prediction of the latest set per trace and model
meets the runs of the same app on the same node at the thread count the app runs with there (see
_MATCHED), on the same input (registry/workload.py: runs of another input are another workload;
runs or traces of unknown input are compared with any), and measured after the prediction was made
(a run made before it may have been its input: it checks nothing; `all_runs` takes them too). The
measured time is their median, and their spread ((max - min) / median) says how far the program's
own time moves between runs, which no prediction can beat.

Per set (an app's trace, projected from its base node by one model): the error on each node, and
how well the predicted order of the target nodes held: Spearman's rank correlation (over at least
MIN_SPEARMAN_NODES nodes: over 2 or 3 it is +-1 or a coarse step by construction, so n/a), top-1
(the node predicted fastest was the fastest measured) and regret (time on that node / best time -
1). Per model and version, the summary over its sets, with the coverage of the intervals: the
share of checked predictions whose interval held the measured time, beside the nominal share
(registry.models.intervals.NOMINAL), and per interval group (`match` calibrates each apart). The
base node's prediction is the base time
itself (the traced run, or its median with the runs measured there before `match`), not a
prediction, so it counts neither in the errors nor in the ranking; its row sets the traced run
beside the measured ones (`traced_gap`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlalchemy as sa

from registry.apps import require_app_id
from registry.db.read import read_frame
from registry.errors import UserError
from registry.evaluate import choice_quality
from registry.match.calibration import explained
from registry.models import intervals
from registry.workload import same_input

# The latest set per (app, trace, model) beside the measured runs at the thread count the app runs with
# on the node: the count the user fixed when tracing (traces.threads), else one per CPU of the node, as
# `nodereg run` starts it (registry/measure/onnode.py). Not the prediction's own `threads`, which is the
# count its phases were projected at: 1 for an app whose phases did not keep the base CPUs busy.
# (v_predictions compares by the same rule since schema version 13; this query also wants the runs' range,
# and each prediction's explanation, which names its interval group.)
_MATCHED = """
SELECT a.name AS app, t.uid AS trace_uid, b.name AS base_node, n.name AS node, p.model_name, p.model_version,
       p.created_at, COALESCE(t.threads, n.n_cpus) AS threads, p.predicted_s, p.low_s, p.high_s,
       t.wall_s AS traced_s, t.input AS input, p.explanation_json
FROM (SELECT q.*, max(q.created_at) OVER (PARTITION BY q.app_id, q.trace_id, q.model_name) AS latest
      FROM predictions q) p
JOIN apps a ON a.app_id = p.app_id
JOIN nodes n ON n.node_id = p.node_id
LEFT JOIN traces t ON t.trace_id = p.trace_id
LEFT JOIN nodes b ON b.node_id = p.base_node_id
WHERE p.created_at = p.latest"""
_RUNS = """
SELECT a.name AS app, n.name AS node, r.threads, r.time_s, r.created_at AS run_at, r.input AS run_input
FROM runs r JOIN apps a ON a.app_id = r.app_id JOIN nodes n ON n.node_id = r.node_id
WHERE r.threads IS NOT NULL"""
MIN_SPEARMAN_NODES = 4
_SET = ["app", "trace_uid", "model_name", "model_version", "base_node"]


@dataclass
class Accuracy:
    cells: pd.DataFrame    # app x node: predicted, measured, error, spread
    sets: pd.DataFrame     # per app (trace and model): spearman, top1, regret
    summary: pd.DataFrame  # per model and version

    def to_dict(self) -> dict:
        return {name: _records(getattr(self, name)) for name in ("cells", "sets", "summary")}

    def group_coverage(self) -> list[dict]:
        """The summary's coverage per interval group, one row per model, version and group."""
        return [{"model_name": r.model_name, "model_version": r.model_version, "interval_group": group,
                 "intervals": c["intervals"], "coverage": c["coverage"], "nominal": r.nominal}
                for r in self.summary.itertuples() for group, c in r.coverage_by_group.items()]


def _records(frame: pd.DataFrame) -> list[dict]:
    return [dict(zip(frame.columns, row)) for row in frame.itertuples(index=False, name=None)]


def load(conn: sa.Connection, app: str | None = None, model: str | None = None,
         all_runs: bool = False) -> pd.DataFrame:
    """Stored predictions of the latest sets, with the measured runs that check them where there are
    any (same input; made after the prediction unless `all_runs`)."""
    where, params = [], {}
    if app is not None:
        require_app_id(conn, app)
        where.append("app = :app")
        params["app"] = app
    if model is not None:
        where.append("model_name = :model")
        params["model"] = model
    sql = f"SELECT * FROM ({_MATCHED}) m" + (f" WHERE {' AND '.join(where)}" if where else "")
    frame = read_frame(conn, sql + " ORDER BY app, model_name, trace_uid, node", params)
    if frame.empty:
        scope = " and ".join(f"{k} {v!r}" for k, v in (("app", app), ("model", model)) if v is not None)
        raise UserError(f"no stored predictions{' for ' + scope if scope else ''}: `nodereg match APP` stores them")
    # the interval group `match` put each prediction in (None: stored before groups, or not by `match`)
    frame["interval_group"] = [explained(e).get("interval_group") for e in frame.pop("explanation_json")]
    runs = read_frame(conn, _RUNS + (" AND a.name = :app" if app is not None else ""),
                      {"app": app} if app is not None else {})
    return _with_runs(frame, runs, all_runs)


def _with_runs(frame: pd.DataFrame, runs: pd.DataFrame, all_runs: bool) -> pd.DataFrame:
    """Each prediction with the count, median, min and max of the runs that check it."""
    if runs.empty:
        return frame.assign(runs=None, measured_s=None, min_s=None, max_s=None).drop(columns=["created_at", "input"])
    pairs = frame.reset_index().merge(runs, on=["app", "node", "threads"], how="inner")
    known = lambda v: None if pd.isna(v) else v     # noqa: E731  (NULL reads as NaN or None)
    keep = [same_input(known(a), known(b)) for a, b in zip(pairs["input"], pairs["run_input"])]
    pairs = pairs[np.array(keep, dtype=bool)]
    if not all_runs:
        pairs = pairs[pd.to_datetime(pairs["run_at"]) >= pd.to_datetime(pairs["created_at"])]
    stats = pairs.groupby("index")["time_s"].agg(runs="count", measured_s="median", min_s="min", max_s="max")
    return frame.join(stats).drop(columns=["created_at", "input"])


def assess(frame: pd.DataFrame) -> Accuracy:
    """Errors per cell, ranking quality per set, summary per model (cells without runs are left out)."""
    cells = frame.dropna(subset=["measured_s"]).copy()
    if cells.empty:
        apps = ", ".join(sorted(frame["app"].unique()))
        raise UserError(f"no measured runs match the stored predictions of {apps} (same app, node, thread count "
                        "and input, measured after the prediction; --all-runs takes earlier runs too): measure them "
                        "with `nodereg run NODE -- CMD`")
    if "interval_group" not in cells:      # (a frame made without `load`: no group known)
        cells["interval_group"] = None
    cells = cells.astype({"predicted_s": float, "measured_s": float, "min_s": float, "max_s": float,
                          "traced_s": float})
    cells["trace_uid"] = cells["trace_uid"].fillna("(file)")  # a trace file not in the registry, or a removed one
    cells["base_node"] = cells["base_node"].fillna("(removed)")  # made from a node removed since (`nodes rm`)
    cells["model_version"] = cells["model_version"].fillna("")
    cells["base"] = cells["node"] == cells["base_node"]
    cells["error"] = (cells["predicted_s"] - cells["measured_s"]) / cells["measured_s"]
    cells["spread"] = (cells["max_s"] - cells["min_s"]) / cells["measured_s"]
    cells["covered"] = [intervals.covered(_number(lo), m, _number(hi))
                        for lo, m, hi in zip(cells["low_s"], cells["measured_s"], cells["high_s"])]
    sets = pd.DataFrame([_ranking(key, g) for key, g in cells.groupby(_SET, sort=True)])
    summary = pd.DataFrame([_summary(key, cells, sets) for key, _ in sets.groupby(["model_name", "model_version"])])
    # the traced run against the runs measured on the base node: one run's own noise, which a projection
    # from the traced time alone carries to every node (`match` starts from the median with the runs)
    cells["traced_gap"] = np.where(cells["base"], (cells["traced_s"] - cells["measured_s"]) / cells["measured_s"],
                                   np.nan)
    columns = ["app", "model_name", "model_version", "base_node", "node", "base", "threads", "predicted_s",
               "measured_s", "runs", "spread", "error", "traced_s", "traced_gap", "low_s", "high_s", "covered",
               "interval_group", "trace_uid"]
    return Accuracy(cells[columns].reset_index(drop=True), sets, summary)


def _ranking(key: tuple, g: pd.DataFrame) -> dict:
    from scipy.stats import spearmanr

    row = dict(zip(_SET, key))
    g = g[~g["base"]]                # the base's "prediction" is its own measurement: not a candidate ranked
    row["nodes"] = len(g)
    row["spearman"] = row["top1"] = row["regret"] = None
    if len(g) >= MIN_SPEARMAN_NODES:
        with warnings.catch_warnings():  # all times equal on one side: no order to correlate (NaN)
            warnings.simplefilter("ignore")
            rho = spearmanr(g["predicted_s"], g["measured_s"]).statistic
        row["spearman"] = None if np.isnan(rho) else float(rho)
    if len(g) >= 2:
        row["top1"], row["regret"] = choice_quality(g["predicted_s"], g["measured_s"])
    return row


def _summary(key: tuple, cells: pd.DataFrame, sets: pd.DataFrame) -> dict:
    model, version = key
    mine = (cells["model_name"] == model) & (cells["model_version"] == version)
    errors = cells.loc[mine & ~cells["base"], "error"].abs()
    ranked = sets[(sets["model_name"] == model) & (sets["model_version"] == version)].dropna(subset=["top1"])
    spearman = ranked["spearman"].dropna()
    held = [bool(c) for c in cells.loc[mine & ~cells["base"], "covered"] if c is not None]
    return {"model_name": model, "model_version": version, "apps": int(cells.loc[mine, "app"].nunique()),
            "cells": len(errors),
            "median_abs_error": float(errors.median()) if len(errors) else None,
            "worst_abs_error": float(errors.max()) if len(errors) else None,
            "median_spread": float(cells.loc[mine & ~cells["base"], "spread"].median()) if len(errors) else None,
            "median_spearman": float(spearman.median()) if len(spearman) else None,
            "top1_rate": float(ranked["top1"].astype(float).mean()) if len(ranked) else None,
            "mean_regret": float(ranked["regret"].astype(float).mean()) if len(ranked) else None,
            "intervals": len(held), "coverage": sum(held) / len(held) if held else None,
            "coverage_by_group": _coverage_by_group(cells[mine & ~cells["base"]]), "nominal": intervals.NOMINAL}


def _coverage_by_group(cells: pd.DataFrame) -> dict[str, dict]:
    """Per interval group (calibrated apart by `match`): the intervals checked and the share that held."""
    out = {}
    for group, g in cells.dropna(subset=["interval_group"]).groupby("interval_group", sort=True):
        held = [bool(c) for c in g["covered"] if c is not None]
        if held:
            out[str(group)] = {"intervals": len(held), "coverage": sum(held) / len(held)}
    return out


def _number(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
