"""Honest evaluation of projection models on measured runs: leave one app out, one data size out,
or choose on one cloud and score on another.

For every app that has a trace on the base node and measured runs on other nodes, the reference set
is built from the OTHER apps only (their signatures on the base node, their measured node-to-base
time ratios), the model is fitted on it, and the held-out app's time on every other node is
predicted from what was measured of it on the base node alone: its signature (the mean over its
base traces, each trace's phases weighted by their share of the run) and its base time (the median
of its base runs). Nothing of the held-out app's runs on other nodes reaches the model; a model's
hyper-parameters are its fixed defaults.

Measured truth per app and node is the median of the measured runs (at the node's default thread
count: `threads` NULL or all of the node's CPUs). Metrics, per model:

* MAPE and median APE over every (app, other node) cell with a measurement;
* top-1 / top-3: share of apps whose predicted fastest other node is the measured fastest / among
  the measured three fastest;
* mean regret: time on the chosen node over the time on the best one, minus 1;
* cost regret, where at least two evaluated nodes have prices in one currency: the measured cost
  per run (price x time) on the node predicted cheapest over the cheapest measured, minus 1;
* interval coverage: share of measured times inside the model's [low, high] (models with intervals);
* run-level MAPE (``run_mape``, the Lumos README's protocol as far as we can reproduce it, reported
  beside the issue's cell-level MAPE and never instead of it): the model's predicted ratio applied
  to each base run, scored against each single measured run on the node, averaged over all those
  pairs (an app with 3 runs per node weighs 9 times a single-run app);

and, for the data itself, the noise floor: each run against the median of the other runs of the
same app on the same node (every app, on the base and the evaluated nodes; cells with >= 2 runs).

Splits (``split``): ``app`` (above); ``size``: every app of one data size is held out at once and
the apps of the other sizes are the references (extrapolation to other inputs); ``size-pair``: the
apps of ONE size are the references and those of the next size up or down are predicted (tiny ->
small and back on Lumos; every ordered pair of adjacent sizes is a fold, so an app can be predicted
in two folds and is scored once per fold); ``cloud`` (`evaluate_cross`): the model is chosen by
leave-one-app-out on one cloud's data and scored on another's. ``select`` (`evaluate_selected`): in
every outer fold, the model is chosen among the candidates by k-fold cross-validation inside that
fold's training apps only (`fold_scores`: each fold's own figures).

Simple baselines (registry/models/baselines.py, plugins like any model, marked ``baseline``) run
beside the other models so that every report says what "simple" reaches on the same data.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlalchemy as sa
from threadpoolctl import threadpool_limits

from registry.db import Registry
from registry.errors import UserError
from registry.models.base import (MODEL_FAILURES, NEEDS_NODE_FEATURES, NEEDS_SIGNATURES, ProjectionModel, Query,
                                  ReferenceSet)
from registry.values import plural

SERVABLE_NEEDS = frozenset({NEEDS_SIGNATURES, NEEDS_NODE_FEATURES})
# leave one app out | one data size out | train on one size, predict the next | choose on one cloud, score on another
SPLITS = ("app", "size", "size-pair", "cloud")
SIZE_FEATURE = "meta.datasize_rank"
INNER_FOLDS = 5


@dataclass
class EvalData:
    """Everything leave-one-app-out needs, read once from the registry."""

    base_node: str
    features: pd.DataFrame          # index app; columns 'source.metric'; on the base node
    base_time_s: pd.Series          # index app; median base run (or trace wall time)
    actual_s: pd.DataFrame          # index app; columns every other node; median measured time, NaN = none
    runs: pd.DataFrame              # app, node, time_s: every run on the base and the evaluated nodes (noise floor)
    node_features: pd.DataFrame | None = None
    prices: pd.Series | None = None  # index node; price per hour, one currency (None: fewer than 2 priced)

    @property
    def apps(self) -> list[str]:
        return list(self.features.index)

    def log_ratio(self) -> pd.DataFrame:
        return np.log(self.actual_s.div(self.base_time_s, axis=0))

    def references(self, without: str) -> ReferenceSet:
        """The reference set of every app but `without`."""
        return self.references_of([a for a in self.apps if a != without])

    def references_of(self, keep: list[str]) -> ReferenceSet:
        """The reference set of the apps `keep` (the training apps of a fold)."""
        return ReferenceSet(base_node=self.base_node, features=self.features.loc[keep],
                            log_ratio=self.log_ratio().loc[keep], node_features=self.node_features)

    def sizes(self) -> pd.Series:
        """app -> its data size (HiBench's scale name, from the signature's meta.datasize_rank), where known."""
        from registry.io.lumos import DATASIZES

        if SIZE_FEATURE not in self.features.columns:
            return pd.Series(dtype=object)
        rank = self.features[SIZE_FEATURE].dropna().astype(int)
        return rank.map(lambda r: DATASIZES[r] if 0 <= r < len(DATASIZES) else f"size {r}")

    def query(self, app: str) -> Query:
        return Query(name=app, signature=self.features.loc[app].dropna(), base_time_s=float(self.base_time_s[app]))


def resolve_node(conn: sa.Connection, name: str) -> tuple[int, str]:
    """A node by exact name, else by the part after the last '/' (e.g. 'g6.xlarge' for 'alibaba/g6.xlarge')."""
    rows = conn.execute(sa.text("SELECT node_id, name FROM nodes")).fetchall()
    exact = [r for r in rows if r[1] == name]
    if exact:
        return exact[0][0], exact[0][1]
    tail = [r for r in rows if r[1].rsplit("/", 1)[-1] == name]
    if len(tail) == 1:
        return tail[0][0], tail[0][1]
    if len(tail) > 1:
        raise UserError(f"node {name!r} is ambiguous: {', '.join(sorted(r[1] for r in tail))}")
    raise UserError(f"no node called {name!r} in the registry (see `nodereg nodes list`)")


def default_base(conn: sa.Connection) -> str:
    """The node with traces of the most apps that also have runs elsewhere (ties: the name)."""
    row = conn.execute(sa.text("""
        SELECT n.name, count(DISTINCT t.app_id) AS apps
        FROM traces t JOIN nodes n ON n.node_id = t.node_id
        WHERE t.status = 'ok'
          AND EXISTS (SELECT 1 FROM runs r WHERE r.app_id = t.app_id AND r.node_id <> t.node_id)
        GROUP BY n.name ORDER BY apps DESC, n.name LIMIT 1""")).fetchone()
    if row is None:
        raise UserError("nothing to evaluate: the registry has no app with a trace on one node and measured runs "
                        "on another (import some, e.g. `nodereg import lumos DIR`)")
    return row[0]


# a run or trace of input :input, or of an unknown one (NULL), when :input is given; any otherwise
_OF_INPUT = "(CAST(:input AS VARCHAR) IS NULL OR {t}.input IS NULL OR {t}.input = :input)"


def _signatures(conn: sa.Connection, base_id: int, input_label: str | None = None) -> pd.DataFrame:
    rows = conn.execute(sa.text(f"""
        SELECT a.name AS app, t.trace_id, p.weight, s.source, s.metric, s.value
        FROM traces t
        JOIN apps a ON a.app_id = t.app_id
        JOIN phases p ON p.trace_id = t.trace_id
        JOIN signatures s ON s.owner_kind = 'phase' AND s.owner_id = p.phase_id
        WHERE t.node_id = :base AND t.status = 'ok' AND s.value IS NOT NULL AND {_OF_INPUT.format(t="t")}"""),
        {"base": base_id, "input": input_label}).fetchall()
    frame = pd.DataFrame(rows, columns=["app", "trace_id", "weight", "source", "metric", "value"])
    if frame.empty:
        return pd.DataFrame()
    frame["feature"] = frame["source"] + "." + frame["metric"]
    frame["wv"] = frame["weight"] * frame["value"]
    per_trace = frame.groupby(["app", "trace_id", "feature"])[["wv", "weight"]].sum()
    per_trace = (per_trace["wv"] / per_trace["weight"]).rename("value").reset_index()
    return per_trace.groupby(["app", "feature"])["value"].mean().unstack("feature").sort_index()


def _runs(conn: sa.Connection, base_id: int, input_label: str | None = None) -> pd.DataFrame:
    """Runs at each node's CPU count, of `input_label` where given; otherwise, of an app whose latest
    base trace names its input, only the runs of that input (or of an unknown one): runs of another
    input measure another workload, in the base time and in the truth alike."""
    rows = conn.execute(sa.text(f"""
        SELECT a.name, n.name, r.time_s, r.input,
               (SELECT t.input FROM traces t WHERE t.app_id = r.app_id AND t.node_id = :base AND t.status = 'ok'
                ORDER BY t.started_at DESC, t.trace_id DESC LIMIT 1) AS traced_input
        FROM runs r JOIN apps a ON a.app_id = r.app_id JOIN nodes n ON n.node_id = r.node_id
        WHERE r.time_s > 0 AND (r.threads IS NULL OR n.n_cpus IS NULL OR r.threads = n.n_cpus)
          AND {_OF_INPUT.format(t="r")}"""), {"base": base_id, "input": input_label}).fetchall()
    frame = pd.DataFrame(rows, columns=["app", "node", "time_s", "input", "traced_input"])
    same = frame["input"].isna() | frame["traced_input"].isna() | (frame["input"] == frame["traced_input"])
    return frame.loc[same, ["app", "node", "time_s"]].reset_index(drop=True)


def _trace_walls(conn: sa.Connection, base_id: int, input_label: str | None = None) -> pd.Series:
    rows = conn.execute(sa.text(f"""
        SELECT a.name, t.wall_s FROM traces t JOIN apps a ON a.app_id = t.app_id
        WHERE t.node_id = :base AND t.status = 'ok' AND t.wall_s > 0 AND {_OF_INPUT.format(t="t")}"""),
        {"base": base_id, "input": input_label}).fetchall()
    frame = pd.DataFrame(rows, columns=["app", "wall_s"])
    return frame.groupby("app")["wall_s"].median()


def _node_features(conn: sa.Connection, nodes: list[str]) -> pd.DataFrame | None:
    rows = conn.execute(sa.text("SELECT name, n_cpus, cores, memory_bytes, max_mhz FROM nodes")).fetchall()
    frame = pd.DataFrame(rows, columns=["node", "n_cpus", "cores", "memory_gib", "max_mhz"]).set_index("node")
    frame["memory_gib"] = frame["memory_gib"] / 2**30
    frame = frame.reindex(nodes).astype(float).dropna(axis=1, how="all")
    return frame if not frame.empty else None


def _prices(conn: sa.Connection, nodes: list[str]) -> pd.Series | None:
    """The evaluated nodes' current prices per hour, when at least two have one and all in one currency."""
    from registry.prices import current_prices

    found = {n: p for n, p in current_prices(conn).items() if n in nodes}
    if len(found) < 2 or len({c for _, c in found.values()}) > 1:
        return None
    return pd.Series({n: p for n, (p, _) in found.items()}, dtype=float)


def load(registry: Registry, base: str | None = None, same_cloud: bool = False,
         input_label: str | None = None) -> EvalData:
    """Read the evaluation data of base node `base` (default: `default_base`); `same_cloud`: only the
    nodes named like the base's cloud ('alibaba/...' for 'alibaba/g6.xlarge'), for a registry that
    holds several clouds; `input_label`: only traces and runs of that input (or of an unknown one)."""
    with registry.connect() as conn:
        base_name = resolve_node(conn, base)[1] if base else default_base(conn)
        base_id = resolve_node(conn, base_name)[0]
        features = _signatures(conn, base_id, input_label)
        runs = _runs(conn, base_id, input_label)
        walls = _trace_walls(conn, base_id, input_label)
        if features.empty:
            raise UserError(f"no app has a trace with a signature on the base node {base_name}")
        medians = runs.groupby(["app", "node"])["time_s"].median().unstack("node")
        base_time = (medians[base_name] if base_name in medians.columns else pd.Series(dtype=float))
        base_time = base_time.reindex(features.index).fillna(walls.reindex(features.index))
        others = [n for n in medians.columns if n != base_name]
        if same_cloud and "/" in base_name:
            others = [n for n in others if n.startswith(base_name.rsplit("/", 1)[0] + "/")]
        actual = medians.reindex(index=features.index, columns=others)
        keep = base_time.notna() & (base_time > 0) & actual.notna().any(axis=1)
        apps = list(features.index[keep])
        if len(apps) < 3:
            raise UserError(f"base node {base_name}: only {plural(len(apps), 'app')} "
                            f"{'has' if len(apps) == 1 else 'have'} a base trace and measured runs on other nodes; "
                            "leave-one-app-out needs at least 3")
        actual = actual.loc[apps].dropna(axis=1, how="all")
        node_features = _node_features(conn, list(actual.columns))
        prices = _prices(conn, list(actual.columns))
    on_nodes = runs[runs["node"].isin([base_name, *actual.columns])].reset_index(drop=True)
    return EvalData(base_name, features.loc[apps].dropna(axis=1, how="all"), base_time[apps].astype(float), actual,
                    on_nodes, node_features, prices)


# -- metrics -----------------------------------------------------------------------------------


def noise_floor(runs: pd.DataFrame) -> dict:
    """Mean and median |run - median(other runs)| / median(other runs), over cells with >= 2 runs."""
    errors = []
    for times in runs.groupby(["app", "node"])["time_s"]:
        t = times[1].to_numpy(dtype=float)
        if len(t) < 2:
            continue
        for i in range(len(t)):
            other = np.median(np.delete(t, i))
            errors.append(abs(t[i] - other) / other)
    if not errors:
        return {"mape": None, "median_ape": None, "cells": 0, "runs": 0}
    cells = int((runs.groupby(["app", "node"]).size() >= 2).sum())
    return {"mape": float(np.mean(errors)), "median_ape": float(np.median(errors)), "cells": cells,
            "runs": len(errors)}


def run_mape(predictions: pd.DataFrame, runs: pd.DataFrame, base_node: str) -> float | None:
    """MAPE scored run by run: each base run x the predicted ratio (predicted_s / base_s) against each
    measured run of the app on the node, averaged over all (base run, node run) pairs."""
    p = predictions.dropna(subset=["predicted_s", "base_s"])
    if p.empty:
        return None
    ratio = (p["predicted_s"] / p["base_s"]).to_numpy()
    keyed = pd.DataFrame({"app": p["app"].to_numpy(), "node": p["node"].to_numpy(), "ratio": ratio})
    on_nodes = runs.merge(keyed, on=["app", "node"])
    base = runs[runs["node"] == base_node][["app", "time_s"]].rename(columns={"time_s": "base_run_s"})
    pairs = on_nodes.merge(base, on="app")
    if pairs.empty:
        return None
    return float((np.abs(pairs["base_run_s"] * pairs["ratio"] - pairs["time_s"]) / pairs["time_s"]).mean())


def choice_quality(predicted: pd.Series, actual: pd.Series) -> tuple[bool, float]:
    """Of one app's nodes: whether the node predicted fastest is the measured fastest (top-1), and the
    regret of choosing it (its measured time over the best measured time, minus 1)."""
    chosen = actual[predicted.idxmin()]
    best = actual.min()
    return bool(chosen <= best), float(chosen / best - 1.0)


def by_choice(predictions: pd.DataFrame):
    """The rows of each app's choice: per fold and app where rows name their fold (``size-pair``
    predicts an app in two folds, two separate choices)."""
    return predictions.groupby(["fold", "app"] if "fold" in predictions.columns else "app")


def cost_regret(predictions: pd.DataFrame, prices: pd.Series) -> float | None:
    """Mean over apps of (measured cost per run on the node chosen as cheapest by the predictions) /
    (the cheapest measured cost per run) - 1, over the priced nodes."""
    p = predictions[predictions["node"].isin(prices.index)].dropna(subset=["predicted_s", "actual_s"])
    if p.empty:
        return None
    price = p["node"].map(prices).to_numpy()
    p = p.assign(pred_cost=p["predicted_s"].to_numpy() * price, cost=p["actual_s"].to_numpy() * price)
    regret = [g.loc[g["pred_cost"].idxmin(), "cost"] / g["cost"].min() - 1.0 for _, g in by_choice(p)]
    return float(np.mean(regret))


def score(predictions: pd.DataFrame, runs: pd.DataFrame | None = None, base_node: str | None = None,
          prices: pd.Series | None = None) -> dict:
    """Accuracy of rows app, node, predicted_s, actual_s (actual present); with the runs (and rows'
    base_s), also the run-level MAPE of `run_mape`; with prices, the cost regret."""
    p = predictions.dropna(subset=["predicted_s", "actual_s"])
    if p.empty:
        return {"apps": 0, "cells": 0, "mape": None, "median_ape": None, "top1": None, "top3": None,
                "regret": None, "coverage": None, "run_mape": None, "cost_regret": None}
    ape = (p["predicted_s"] - p["actual_s"]).abs() / p["actual_s"]
    top1, top3, regret = [], [], []
    for _, g in by_choice(p):
        hit, loss = choice_quality(g["predicted_s"], g["actual_s"])
        top1.append(hit)
        top3.append(bool(g["actual_s"][g["predicted_s"].idxmin()] <= g["actual_s"].nsmallest(3).max()))
        regret.append(loss)
    out = {"apps": int(p["app"].nunique()), "cells": len(p), "mape": float(ape.mean()),
           "median_ape": float(ape.median()), "top1": float(np.mean(top1)), "top3": float(np.mean(top3)),
           "regret": float(np.mean(regret)), "coverage": None, "run_mape": None,
           "cost_regret": None if prices is None else cost_regret(p, prices)}
    if runs is not None and base_node is not None and "base_s" in p.columns:
        out["run_mape"] = run_mape(p, runs, base_node)
    if {"low_s", "high_s"} <= set(p.columns) and (p["high_s"] > p["low_s"]).any():
        out["coverage"] = float(((p["actual_s"] >= p["low_s"]) & (p["actual_s"] <= p["high_s"])).mean())
    return out


# -- the run -----------------------------------------------------------------------------------


@dataclass
class ModelResult:
    name: str
    kind: str                      # 'model' | 'baseline' (the class says so: Model.baseline) | 'selected'
    metrics: dict
    seconds: float
    predictions: pd.DataFrame      # fold, app, node, base_s, predicted_s, low_s, high_s, actual_s
    error: str | None = None
    chosen: dict[str, int] | None = None   # 'selected': how many outer folds chose each model


def servable_models(data: EvalData) -> tuple[list[str], list[str]]:
    """Installed projection models that can serve here, and one line for each one that cannot (and why).

    A model serves when everything it needs is among what leave-one-app-out provides: signatures
    on the base node, and node features where the registry has them.
    """
    from registry.models import plugins

    infos, broken = plugins.discover()
    names, skipped = [], list(broken)
    for info in infos:
        if info.kind != "projection":
            continue
        missing = set(info.needs) - SERVABLE_NEEDS
        if NEEDS_NODE_FEATURES in info.needs and data.node_features is None:
            missing.add(NEEDS_NODE_FEATURES)
        if missing:
            skipped.append(f"{info.name}: needs {', '.join(sorted(missing))}, which these apps or nodes do not have")
        else:
            names.append(info.name)
    return names, skipped


def folds(data: EvalData, split: str = "app") -> list[tuple[str, list[str], list[str]]]:
    """(label, training apps, held-out apps) of each fold: one app held out at a time (``app``); every
    app of one data size held out, the other sizes the references (``size``); or the apps of one size
    the references and those of the adjacent size predicted, both ways (``size-pair``: label
    'tiny->small'). Apps of unknown size are never held out (but are references in ``size``)."""
    if split == "app":
        return [(app, [a for a in data.apps if a != app], [app]) for app in data.apps]
    sizes = data.sizes()
    groups = {size: sorted(apps) for size, apps in sizes.groupby(sizes).groups.items()}
    if len(groups) < 2:
        raise UserError(f"splitting by data size needs apps of at least two data sizes (signature {SIZE_FEATURE}); "
                        f"base {data.base_node} has {', '.join(groups) or 'none'}")
    if split == "size":
        return [(size, [a for a in data.apps if a not in held], held) for size, held in sorted(groups.items())]
    order = sorted(groups, key=lambda size: int(data.features.at[groups[size][0], SIZE_FEATURE]))
    pairs = [p for lo, hi in zip(order, order[1:]) for p in ((lo, hi), (hi, lo))]
    return [(f"{a}->{b}", groups[a], groups[b]) for a, b in pairs]


def _predict_fold(data: EvalData, make: Callable[[], ProjectionModel], train: list[str], held: list[str],
                  nodes: list[str], label: str = "") -> list[dict]:
    # the fits are small: thread pools (OpenMP, BLAS) only oversubscribe the CPUs (20x slower seen)
    with threadpool_limits(1):
        model = make().fit(data.references_of(train))
        rows = []
        for app in held:
            for p in model.predict(data.query(app), nodes):
                rows.append({"fold": label, "app": app, "node": p.node, "base_s": float(data.base_time_s[app]),
                             "predicted_s": p.predicted_s, "low_s": p.low_s, "high_s": p.high_s,
                             "actual_s": data.actual_s.at[app, p.node]})
    return rows


def evaluate_model(data: EvalData, make: Callable[[], ProjectionModel], name: str, kind: str = "model",
                   on_app: Callable[[], None] | None = None, split: str = "app") -> ModelResult:
    """One model over the folds of `split`; a model that cannot serve a fold (MODEL_FAILURES) is
    reported, not fatal; a bug in it (any other exception) propagates."""
    rows, error = [], None
    start = time.perf_counter()
    nodes = list(data.actual_s.columns)
    for label, train, held in folds(data, split):
        try:
            rows += _predict_fold(data, make, train, held, nodes, label)
        except MODEL_FAILURES as exc:  # one model that cannot serve these data must not stop the others
            error = _failure(exc)
            break
        for _ in held:
            if on_app:
                on_app()
    return _result(data, name, kind, rows, start, error)


def _failure(exc: Exception) -> str:
    """Why a model could not serve a fold, in one line: a UserError's message says it in words (the
    class name is ours, not the reader's: `paris failed: UserError: ...`); any other error keeps
    its type, which is part of what it says."""
    text = " ".join(str(exc).split())[:200]
    return text if isinstance(exc, UserError) else f"{type(exc).__name__}: {text}"


def _result(data: EvalData, name: str, kind: str, rows: list[dict], start: float, error: str | None = None,
            chosen: dict[str, int] | None = None) -> ModelResult:
    frame = pd.DataFrame(rows, columns=["fold", "app", "node", "base_s", "predicted_s", "low_s", "high_s", "actual_s"])
    metrics = score(frame if error is None else frame.iloc[0:0], data.runs, data.base_node, data.prices)
    return ModelResult(name, kind, metrics, time.perf_counter() - start, frame, error, chosen)


def inner_mape(data: EvalData, cls: type[ProjectionModel], train: list[str], k: int = INNER_FOLDS) -> float:
    """MAPE of `cls` by k-fold cross-validation inside the apps `train` only (apps dealt to folds in
    order); inf when it cannot serve them."""
    nodes = list(data.actual_s.columns)
    rows = []
    for i in range(min(k, len(train))):
        held = train[i::k]
        try:
            rows += _predict_fold(data, cls, [a for a in train if a not in held], held, nodes)
        except MODEL_FAILURES:
            return float("inf")
    frame = pd.DataFrame(rows).dropna(subset=["predicted_s", "actual_s"])
    return float(((frame["predicted_s"] - frame["actual_s"]).abs() / frame["actual_s"]).mean()) if len(frame) \
        else float("inf")


def evaluate_selected(data: EvalData, classes: list[type[ProjectionModel]], split: str = "app",
                      on_app: Callable[[], None] | None = None) -> ModelResult:
    """`--select`: in every outer fold, the candidate with the lowest inner cross-validated MAPE on the
    training apps (never the held-out ones) is fitted on them and predicts the held-out apps."""
    rows, chosen = [], {}
    start = time.perf_counter()
    nodes = list(data.actual_s.columns)
    for label, train, held in folds(data, split):
        best = min(classes, key=lambda cls: inner_mape(data, cls, train))
        chosen[best.name] = chosen.get(best.name, 0) + 1
        rows += _predict_fold(data, best, train, held, nodes, label)
        for _ in held:
            if on_app:
                on_app()
    return _result(data, "selected", "selected", rows, start, chosen=chosen)


def choose(results: list[ModelResult]) -> str:
    """The model a finished evaluation recommends: the lowest MAPE (the cross-cloud split chooses on
    one cloud with it and scores the choice on the other)."""
    scored = [r for r in results if r.error is None and r.metrics["mape"] is not None]
    if not scored:
        raise UserError("no model could be evaluated on the selection data")
    return min(scored, key=lambda r: r.metrics["mape"]).name


def evaluate(data: EvalData, models: Iterable[str], *, on_app: Callable[[], None] | None = None,
             split: str = "app", select: bool = False,
             options: Mapping[str, Mapping[str, object]] | None = None) -> list[ModelResult]:
    """Every named installed model (baselines included) over the folds of `split` on `data`, models
    first; `options`: per model name, its options (a bad one fails here, before any fit). With
    `select`, also the model chosen per fold by nested cross-validation among the models that are
    not baselines (all of them when only baselines are named), with their default options: the
    baselines stay what the choice is compared with."""
    from registry.models import plugins

    options = options or {}
    classes = [plugins.model_class(name, kind="projection") for name in models]
    classes.sort(key=lambda cls: cls.baseline)
    makers = {cls.name: functools.partial(plugins.instantiate, cls, options.get(cls.name)) for cls in classes}
    for make in makers.values():
        make()
    out = [evaluate_model(data, makers[cls.name], cls.name, "baseline" if cls.baseline else "model", on_app, split)
           for cls in classes]
    if select:
        candidates = [cls for cls in classes if not cls.baseline] or classes
        out.append(evaluate_selected(data, candidates, split, on_app))
    return out


def evaluate_cross(select_on: EvalData, data: EvalData, models: Iterable[str], *,
                   on_app: Callable[[], None] | None = None,
                   options: Mapping[str, Mapping[str, object]] | None = None) -> list[ModelResult]:
    """The cross-cloud split: every model by leave-one-app-out on `select_on` (one cloud) chooses the
    model (lowest MAPE among those that are not baselines); every model is then scored on `data`
    (the other cloud), and the choice's score there is the 'selected' row."""
    models = list(models)
    chooser = evaluate(select_on, models, on_app=on_app, options=options)
    picked = choose([r for r in chooser if r.kind == "model"] or chooser)
    results = evaluate(data, models, on_app=on_app, options=options)
    mine = next(r for r in results if r.name == picked)
    return results + [ModelResult("selected", "selected", mine.metrics, mine.seconds, mine.predictions, mine.error,
                                  {picked: 1})]


def fold_scores(result: ModelResult) -> dict[str, dict]:
    """The `score` of each fold's predictions alone (the held-out size, or 'tiny->small'): a size
    split pools folds that differ a lot, and says where a model gains or loses only fold by fold."""
    if result.error is not None:
        return {}
    return {str(fold): score(g) for fold, g in result.predictions.groupby("fold", sort=True)}


def predictions_frame(results: list[ModelResult]) -> pd.DataFrame:
    """Every prediction of every model: model, app, node, predicted_s, actual_s, fold (the fold that
    made it: the app itself, the held-out size, or 'tiny->small')."""
    columns = ["model", "app", "node", "predicted_s", "actual_s", "fold"]
    frames = [r.predictions.assign(model=r.name) for r in results if r.error is None]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]
