"""`nodereg evaluate --calibrate K`: an app measured on K nodes, predicted on every node of another CPU
family, every model and baseline on the same folds, and the oracle beside them.

Calibration rule (documented in docs/crossarch.md, the same for every app and model): the nodes where
the app was measured, in an order shuffled by a generator seeded with (seed, CRC-32 of the app's
name); the first node, then each next one whose CPU family is not among those already taken, until K.
The targets are every node where the app was measured whose CPU family is none of the calibration
nodes'. Nothing of the app's times on the targets reaches a model; its whole family is left out of
the references (references.py). With an architecture to calibrate on (``--calibrate-on aarch64``),
the same rule draws from that architecture's nodes alone: under the plain rule a fold whose K
calibration nodes are all ARM is rare (2 of 642 at K = 3, seeds 0-2, on the shared data), so the
ARM -> x86 figures of the plain run rest on a handful of folds; calibrated on ARM, every fold asks
that question.

Metrics, over all (app, seed) folds of a model: median and 90th percentile of the absolute error of
the predicted time (|predicted / actual - 1|), median Spearman rank correlation over the targets of a
fold, top-1 (the predicted fastest target is the fastest measured), regret (time on the predicted
fastest over the fastest, minus 1), coverage of the interval (models with intervals); by app group;
across architectures: ``x86->arm`` (every calibration node x86_64, the aarch64 targets) and
``arm->x86`` (the reverse); and, where the targets are of several clouds, by the target's cloud
(``cloud:<vendor>``: a cloud the methods were never designed on is checked the same way).
``oracle``: in each fold, the single reference whose ratio has the lowest median error on the targets,
chosen in hindsight (a bound on any single-ratio rule, not a model); ``oracle-micro``: the same over the
suite's micro-benchmarks alone (the candidates of ``best-micro-ratio``: the bound on that baseline, and
the oracle row of issue 27's table).
"""

from __future__ import annotations

import time
import warnings
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from registry.crossarch.data import CrossData, app_group, single_threaded
from registry.crossarch.references import ReferenceBank, query
from registry.errors import UserError
from registry.io.sparecores.apps import app_family
from registry.models.base import MODEL_FAILURES

ORACLE = "oracle"
ORACLE_MICRO = "oracle-micro"
ORACLES = {ORACLE: False, ORACLE_MICRO: True}     # name -> the micro-benchmarks only
X86, ARM = "x86_64", "aarch64"
DIRECTIONS = {X86: "x86->arm", ARM: "arm->x86"}    # the slice of the targets across, by the calibration's arch
CLOUD = "cloud:"      # the summary's slices by the target's cloud
COLUMNS = ["model", "app", "node", "calibration", "predicted_s", "actual_s", "low_s", "high_s", "seed"]


def calibration_nodes(data: CrossData, app: str, k: int, seed: int, on: str | None = None) -> list[str]:
    """K nodes of different CPU families where `app` was measured (module docstring), all of the
    architecture `on` where given; [] if fewer families measured it."""
    measured = sorted(data.times.index[data.times[app].notna()])
    if on is not None:
        measured = [n for n in measured if data.architecture(n) == on]
    rng = np.random.default_rng([int(seed), zlib.crc32(app.encode())])
    chosen, families = [], set()
    for i in rng.permutation(len(measured)):
        family = data.family(measured[i])
        if family not in families:
            chosen.append(measured[i])
            families.add(family)
            if len(chosen) == k:
                return chosen
    return []


def targets(data: CrossData, app: str, calibration: list[str]) -> list[str]:
    families = {data.family(n) for n in calibration}
    fam = data.nodes["cpu_family"].astype(str)
    return list(data.times.index[data.times[app].notna() & ~fam.isin(families)])


def _oracle(refs, q: np.ndarray, target_idx: np.ndarray, actual_log: np.ndarray, micro: bool = False
            ) -> np.ndarray:
    """The log prediction of the single reference (micro-benchmark, with `micro`) with the lowest median
    error on the targets."""
    columns = list(refs.feature_matrix.columns)
    cols = [c for c in columns if c.startswith("cal.")]
    rows = refs.feature_matrix.values[:, columns.index("meta.micro")] > 0.5 if micro else slice(None)
    F = refs.feature_matrix.values[rows, :len(cols)]
    L = refs.ratio_matrix.values[rows][:, target_idx]
    if not len(F):   # no micro-benchmark measured on every calibration node: no oracle of that kind
        return np.full(len(target_idx), np.nan)
    pred = L + (q[None, :] - F).mean(axis=1)[:, None]
    with warnings.catch_warnings():   # a reference measured on none of the targets: NaN, never chosen
        warnings.simplefilter("ignore", RuntimeWarning)
        err = np.nanmedian(np.abs(np.expm1(pred - actual_log[None, :])), axis=1)
    return pred[int(np.nanargmin(np.where(np.isfinite(err), err, np.inf)))]


@dataclass
class CalibrateResult:
    predictions: pd.DataFrame     # COLUMNS
    seconds: dict[str, float]     # per model
    errors: dict[str, str]        # model -> why it could not serve (first failure)
    kinds: dict[str, str]         # model -> 'model' | 'baseline' | 'oracle'


def run(data: CrossData, models: Iterable[str], k: int, seeds: Iterable[int], *, apps: list[str] | None = None,
        on_fold: Callable[[], None] | None = None, on: str | None = None) -> CalibrateResult:
    """Every (app, seed) fold of K calibration nodes (of the architecture `on` where given), each model
    fitted on the fold's references."""
    from registry.models import plugins

    if k < 1:
        raise UserError("--calibrate needs K >= 1 calibration nodes")
    if on is not None and on not in DIRECTIONS:
        raise UserError(f"--calibrate-on {on!r}: expected {' or '.join(DIRECTIONS)}")
    if on is not None and not (data.nodes["architecture"].astype(str) == on).any():
        raise UserError(f"--calibrate-on {on}: the suite has no node of that architecture")
    classes = [plugins.model_class(m, kind="projection") for m in models]
    bank = ReferenceBank(data)
    rows: list[pd.DataFrame] = []
    seconds = {c.name: 0.0 for c in classes} | dict.fromkeys(ORACLES, 0.0)
    errors: dict[str, str] = {}
    index = bank.node_index
    with threadpool_limits(1):
        for app in apps if apps is not None else data.apps:
            for seed in seeds:
                cal = calibration_nodes(data, app, k, seed, on)
                goal = targets(data, app, cal) if cal else []
                if not goal:
                    if on_fold:
                        on_fold()
                    continue
                refs = bank.reference_set(app_family(app), cal)
                q = query(app, data.times[app], cal, single_threaded(app))
                actual = data.times.loc[goal, app].to_numpy(dtype=float)
                joined = ";".join(cal)
                for cls in classes:
                    if cls.name in errors:
                        continue
                    start = time.perf_counter()
                    try:
                        preds = cls().fit(refs).predict(q, goal)
                    except MODEL_FAILURES as exc:
                        errors[cls.name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                        continue
                    seconds[cls.name] += time.perf_counter() - start
                    rows.append(_frame(cls.name, app, goal, joined, [p.predicted_s for p in preds], actual,
                                       [p.low_s for p in preds], [p.high_s for p in preds], seed))
                sig = np.array([q.signature[c] for c in refs.feature_matrix.columns if c.startswith("cal.")])
                where, actual_log = np.array([index[n] for n in goal]), np.log(actual / q.base_time_s)
                for name, micro in ORACLES.items():
                    start = time.perf_counter()
                    log = _oracle(refs, sig, where, actual_log, micro)
                    t = q.base_time_s * np.exp(log)
                    rows.append(_frame(name, app, goal, joined, t, actual, t, t, seed))
                    seconds[name] += time.perf_counter() - start
                if on_fold:
                    on_fold()
    kinds = {c.name: "baseline" if c.baseline else "model" for c in classes} | dict.fromkeys(ORACLES, "oracle")
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=COLUMNS)
    return CalibrateResult(frame, seconds, errors, kinds)


def _frame(model, app, nodes, calibration, predicted, actual, low, high, seed) -> pd.DataFrame:
    """One fold's rows of one model (COLUMNS)."""
    return pd.DataFrame({"model": model, "app": app, "node": nodes, "calibration": calibration,
                         "predicted_s": np.asarray(predicted, dtype=float), "actual_s": actual,
                         "low_s": np.asarray(low, dtype=float), "high_s": np.asarray(high, dtype=float),
                         "seed": seed}, columns=COLUMNS)


# -- metrics -----------------------------------------------------------------------------------


def _direction(data: CrossData, frame: pd.DataFrame) -> pd.Series:
    """'x86->arm' / 'arm->x86' for the rows whose calibration is all of one architecture and whose
    target is of the other; '' elsewhere."""
    arch = data.nodes["architecture"].astype(str)
    cal_arch = {c: {arch.get(n) for n in c.split(";")} for c in frame["calibration"].unique()}
    target = frame["node"].map(arch)
    cal = frame["calibration"].map(lambda c: next(iter(cal_arch[c])) if len(cal_arch[c]) == 1 else "")
    out = pd.Series("", index=frame.index)
    out[(cal == X86) & (target == ARM)] = DIRECTIONS[X86]
    out[(cal == ARM) & (target == X86)] = DIRECTIONS[ARM]
    return out


def _cloud(data: CrossData, frame: pd.DataFrame) -> pd.Series:
    """Each row's target cloud (the nodes' vendor; '' where the data has none)."""
    if "vendor" not in data.nodes:
        return pd.Series("", index=frame.index)
    return frame["node"].map(data.nodes["vendor"].fillna("").astype(str)).fillna("")


def score(frame: pd.DataFrame) -> dict:
    """Median / 90th-percentile absolute error, median Spearman, top-1, regret and interval coverage
    of prediction rows (COLUMNS) of one model."""
    p = frame.dropna(subset=["predicted_s", "actual_s"])
    if p.empty:
        return {"folds": 0, "predictions": 0, "median_ae": None, "p90_ae": None, "spearman": None, "top1": None,
                "regret": None, "coverage": None}
    ae = (p["predicted_s"] / p["actual_s"] - 1).abs()
    rho, top1, regret = [], [], []
    for _, g in p.groupby(["app", "seed"], sort=False):
        if len(g) >= 3:
            r = g["predicted_s"].rank().corr(g["actual_s"].rank())
            if np.isfinite(r):
                rho.append(r)
        chosen = g["actual_s"].to_numpy()[int(np.argmin(g["predicted_s"].to_numpy()))]
        best = g["actual_s"].min()
        top1.append(chosen <= best)
        regret.append(chosen / best - 1)
    widths = p["high_s"] > p["low_s"]
    coverage = float(((p["actual_s"] >= p["low_s"]) & (p["actual_s"] <= p["high_s"])).mean()) if widths.any() \
        else None
    return {"folds": len(top1), "predictions": len(p), "median_ae": float(ae.median()),
            "p90_ae": float(ae.quantile(0.9)), "spearman": float(np.median(rho)) if rho else None,
            "top1": float(np.mean(top1)), "regret": float(np.mean(regret)), "coverage": coverage}


def summary(data: CrossData, result: CalibrateResult) -> list[dict]:
    """One row per model and slice: 'all', each app group, 'x86->arm', 'arm->x86'."""
    frame = result.predictions
    if frame.empty:
        return []
    frame = frame.assign(group=frame["app"].map(app_group), direction=_direction(data, frame),
                         cloud=_cloud(data, frame))
    clouds = frame["cloud"].nunique() > 1
    out = []
    for model, g in frame.groupby("model", sort=False):
        slices = [("all", g)] + [(name, s) for name, s in g.groupby("group")] + \
                 [(name, s) for name, s in g.groupby("direction") if name] + \
                 ([(CLOUD + name, s) for name, s in g.groupby("cloud") if name] if clouds else [])
        for name, s in slices:
            out.append({"model": model, "kind": result.kinds.get(model, "model"), "slice": name, **score(s)})
    return out
