"""Castellanos 2014: model-based recursive partitioning (MOB) with linear leaf models.

The thesis used R's ``party::mob`` (Zeileis, Hothorn & Hornik 2008); this is the same algorithm:

1. fit a weighted linear model (the *regressors*) in the node;
2. test every *partitioning variable* for parameter instability with the M-fluctuation test: order
   the model's score contributions w_i x_i e_i by the variable, take the decorrelated cumulative
   sum process W(t) and its supLM statistic ``sup_{t in [pi, 1-pi]} ||W(t)||^2 / (t (1-t))``
   (numeric variables; p-value from the simulated distribution of the same functional of a
   k-dimensional Brownian bridge) or its chi^2 statistic by category (categorical variables);
   Bonferroni-correct the p-values over the variables tested;
3. if the smallest corrected p-value is below alpha, split on that variable at the cut point that
   minimises the children's objective (weighted SSE, ``deviance``, or the thesis's weighted
   relative error), each child keeping at least ``minsplit`` weight; recurse. No pruning.

Regressors and partitioning variables are separate sets (the thesis regresses on w1, w2, workers
and partitions on those plus workload, threads and cache-sharing counts). ``thesis_weights`` is
the thesis's weighting (short runs weigh more, approximating relative error) and
``best_configuration`` its exhaustive arg-min over feasible configurations.

``MobModel`` is the plugin: a projection model whose rows are (reference, node) pairs, leaves
regress the log time ratio on the node's profile features, and the tree partitions on the
reference's signature (so memory-bound and compute-bound references get their own projection).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from registry.errors import UserError
from registry.models.base import (NEEDS_NODE_FEATURES, NEEDS_SIGNATURES, NodePrediction, NotFittedError,
                                   ProjectionModel, Query,
                                  ReferenceSet, log_interval)
from registry.models.linfit import LinearFit, wls
from registry.models.options import Option
from registry.models.tabular import FeatureRanges, projection_rows, query_rows
from registry.values import listed

OBJECTIVES = ("deviance", "relative")


def thesis_weights(y) -> np.ndarray:
    """w_i = max_j log2(y_j 1e4) - log2(y_i 1e4) + 1 (thesis eqs 4.5-4.6): short runs weigh more."""
    ly = np.log2(np.asarray(y, dtype=float) * 1e4)
    return ly.max() - ly + 1.0


# -- the instability tests -------------------------------------------------------------------------
@lru_cache(maxsize=32)
def _suplm_null(k: int, trim: float, reps: int = 4000, steps: int = 1000) -> np.ndarray:
    """Sorted simulated values of sup ||B_k(t)||^2 / (t(1-t)) over t in [trim, 1-trim] (B_k: Brownian bridge)."""
    rng = np.random.default_rng(20080101 + k)
    t = np.arange(1, steps + 1) / steps
    inside = (t >= trim) & (t <= 1 - trim)
    out = np.empty(reps)
    for start in range(0, reps, 250):
        m = min(250, reps - start)
        walk = np.cumsum(rng.standard_normal((m, steps, k)), axis=1) / np.sqrt(steps)
        bridge = walk - t[None, :, None] * walk[:, -1:, :]
        lm = (bridge[:, inside, :] ** 2).sum(-1) / (t[inside] * (1 - t[inside]))
        out[start:start + m] = lm.max(axis=1)
    return np.sort(out)


def suplm_pvalue(statistic: float, k: int, trim: float) -> float:
    null = _suplm_null(k, round(trim, 4))
    exceed = null.size - np.searchsorted(null, statistic, side="left")
    return float((exceed + 1) / (null.size + 1))


def _decorrelate(scores: np.ndarray, w: np.ndarray) -> np.ndarray:
    """J^{-1/2} for the outer-product-of-gradients estimate J = sum w psi psi' / sum w."""
    j = (scores * w[:, None]).T @ scores / w.sum()
    vals, vecs = np.linalg.eigh(j)
    keep = vals > vals.max() * 1e-10 if vals.max() > 0 else np.zeros_like(vals, dtype=bool)
    return vecs[:, keep] @ np.diag(vals[keep] ** -0.5) @ vecs[:, keep].T


def fluctuation_test(scores: np.ndarray, w: np.ndarray, z: pd.Series, trim: float) -> tuple[float, float]:
    """(statistic, p-value) of parameter instability along z; scores are per-observation psi_i (unweighted)."""
    k = int(np.linalg.matrix_rank(scores)) if len(scores) else 0
    if k == 0 or z.nunique() < 2:
        return 0.0, 1.0
    root = _decorrelate(scores, w)
    total = w.sum()
    if z.dtype.kind in "biuf":
        order = np.argsort(z.to_numpy(), kind="stable")
        zs = z.to_numpy()[order]
        cum = np.cumsum(scores[order] * w[order, None], axis=0) @ root.T / np.sqrt(total)
        tt = np.cumsum(w[order]) / total
        valid = (zs[:-1] < zs[1:]) & (tt[:-1] >= trim) & (tt[:-1] <= 1 - trim)
        if not valid.any():
            return 0.0, 1.0
        lm = (cum[:-1][valid] ** 2).sum(1) / (tt[:-1][valid] * (1 - tt[:-1][valid]))
        stat = float(lm.max())
        return stat, suplm_pvalue(stat, k, trim)
    stat = 0.0
    levels = z.astype(str).to_numpy()
    for level in np.unique(levels):
        sel = levels == level
        part = (scores[sel] * w[sel, None]).sum(0) @ root.T / np.sqrt(total)
        stat += float(part @ part) / (w[sel].sum() / total)
    df = k * (np.unique(levels).size - 1)
    return stat, float(stats.chi2.sf(stat, df))


# -- the tree --------------------------------------------------------------------------------------
@dataclass
class MobNode:
    id: int
    depth: int
    weight: float
    count: int
    fit: LinearFit
    tests: list[dict] = field(default_factory=list)
    split: dict | None = None           # {"variable", "cut"} or {"variable", "left_levels"}
    left: MobNode | None = None
    right: MobNode | None = None

    def is_leaf(self) -> bool:
        return self.split is None

    def goes_left(self, frame: pd.DataFrame) -> np.ndarray:
        col = frame[self.split["variable"]]
        if "cut" in self.split:
            return (col.to_numpy(dtype=float) <= self.split["cut"])
        return col.astype(str).isin(self.split["left_levels"]).to_numpy()

    def to_dict(self) -> dict:
        return {"id": self.id, "depth": self.depth, "weight": self.weight, "count": self.count,
                "fit": self.fit.to_dict(), "tests": self.tests, "split": self.split,
                "left": self.left.to_dict() if self.left else None,
                "right": self.right.to_dict() if self.right else None}

    @classmethod
    def from_dict(cls, d: dict) -> MobNode:
        return cls(d["id"], d["depth"], d["weight"], d["count"], LinearFit.from_dict(d["fit"]), d["tests"], d["split"],
                   cls.from_dict(d["left"]) if d["left"] else None, cls.from_dict(d["right"]) if d["right"] else None)


class MobTree:
    """MOB with linear models: ``fit(frame, y, weights)``, ``predict(frame)``, ``describe()``."""

    def __init__(self, regressors: list[str], partition: list[str], *, intercept: bool = True, alpha: float = 0.05,
                 bonferroni: bool = True, minsplit: float = 25, objective: str = "deviance", trim: float = 0.1,
                 max_depth: int | None = None) -> None:
        if objective not in OBJECTIVES:
            raise UserError(f"mob objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
        if not partition:
            raise UserError("mob needs at least one partitioning variable")
        self.regressors, self.partition = list(regressors), list(partition)
        self.intercept, self.alpha, self.bonferroni = intercept, alpha, bonferroni
        self.minsplit, self.objective, self.trim, self.max_depth = float(minsplit), objective, trim, max_depth
        self.root: MobNode | None = None
        self._next_id = 0

    def design(self, frame: pd.DataFrame) -> np.ndarray:
        cols = [frame[c].to_numpy(dtype=float) for c in self.regressors]
        if self.intercept:
            cols.insert(0, np.ones(len(frame)))
        return np.column_stack(cols) if cols else np.ones((len(frame), 1))

    def fit(self, frame: pd.DataFrame, y, weights=None) -> MobTree:
        missing = [c for c in self.regressors + self.partition if c not in frame.columns]
        if missing:
            raise UserError(f"mob: the data lack the {listed(missing, 'column')}")
        y = np.asarray(y, dtype=float)
        w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
        if len(y) != len(frame) or len(w) != len(y):
            raise ValueError("frame, y and weights differ in length")
        self._next_id = 0
        self.root = self._grow(frame.reset_index(drop=True), self.design(frame), y, w, 0)
        return self

    def _objective(self, x, y, w) -> float:
        fit = wls(x, y, w)
        resid = y - x @ fit.coef
        if self.objective == "relative":
            return float((w * np.abs(resid) / np.abs(y)).sum())
        return float((w * resid**2).sum())

    def _grow(self, frame, x, y, w, depth) -> MobNode:
        node = MobNode(self._next_id, depth, float(w.sum()), len(y), wls(x, y, w))
        self._next_id += 1
        if w.sum() < 2 * self.minsplit or (self.max_depth is not None and depth >= self.max_depth):
            return node
        resid = y - x @ node.fit.coef
        scores = x * resid[:, None]
        tested = [v for v in self.partition if frame[v].nunique() > 1]
        for v in tested:
            stat, p = fluctuation_test(scores, w, frame[v], self.trim)
            p_adj = min(1.0, p * len(tested)) if self.bonferroni else p
            node.tests.append({"variable": v, "statistic": stat, "p": p, "p_adj": p_adj})
        if not node.tests:
            return node
        best = min(node.tests, key=lambda r: r["p_adj"])
        if best["p_adj"] >= self.alpha:
            return node
        split = self._best_cut(frame[best["variable"]], x, y, w)
        if split is None:
            return node
        node.split = {"variable": best["variable"], **split}
        left = node.goes_left(frame)
        node.left = self._grow(frame[left].reset_index(drop=True), x[left], y[left], w[left], depth + 1)
        node.right = self._grow(frame[~left].reset_index(drop=True), x[~left], y[~left], w[~left], depth + 1)
        return node

    def _best_cut(self, z: pd.Series, x, y, w) -> dict | None:
        best = None
        if z.dtype.kind in "biuf":
            zv = z.to_numpy(dtype=float)
            values = np.unique(zv)
            for lo, hi in zip(values[:-1], values[1:]):
                left = zv <= lo
                if w[left].sum() < self.minsplit or w[~left].sum() < self.minsplit:
                    continue
                cost = self._objective(x[left], y[left], w[left]) + self._objective(x[~left], y[~left], w[~left])
                if best is None or cost < best[0]:
                    best = (cost, {"cut": float((lo + hi) / 2)})
        else:
            levels = sorted(z.astype(str).unique())
            zs = z.astype(str).to_numpy()
            for r in range(1, len(levels)):
                for group in combinations(levels, r):
                    if levels[0] not in group:      # each partition once
                        continue
                    left = np.isin(zs, group)
                    if w[left].sum() < self.minsplit or w[~left].sum() < self.minsplit:
                        continue
                    cost = self._objective(x[left], y[left], w[left]) + self._objective(x[~left], y[~left], w[~left])
                    if best is None or cost < best[0]:
                        best = (cost, {"left_levels": list(group)})
        return None if best is None else best[1]

    def _fitted(self) -> MobNode:
        if self.root is None:
            raise UserError("the mob tree is not fitted yet")
        return self.root

    def leaves(self, frame: pd.DataFrame) -> list[MobNode]:
        """The leaf each row falls into."""
        out: list[MobNode | None] = [None] * len(frame)
        frame = frame.reset_index(drop=True)

        def walk(node: MobNode, idx: np.ndarray) -> None:
            if node.is_leaf():
                for i in idx:
                    out[i] = node
                return
            left = node.goes_left(frame.iloc[idx])
            walk(node.left, idx[left])
            walk(node.right, idx[~left])

        walk(self._fitted(), np.arange(len(frame)))
        return out

    def predict(self, frame: pd.DataFrame, with_interval: bool = False):
        x = self.design(frame)
        leaves = self.leaves(frame)
        pred = np.array([float(x[i] @ leaf.fit.coef) for i, leaf in enumerate(leaves)])
        if not with_interval:
            return pred
        half = np.array([float(leaf.fit.half_width(x[i])[0]) for i, leaf in enumerate(leaves)])
        return pred, half

    def all_nodes(self) -> list[MobNode]:
        out, stack = [], [self._fitted()]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(n for n in (node.right, node.left) if n is not None)
        return sorted(out, key=lambda n: n.id)

    def describe(self) -> str:
        names = (["(intercept)"] if self.intercept else []) + self.regressors
        lines = []

        def walk(node: MobNode, indent: str, label: str) -> None:
            if node.is_leaf():
                coefs = ", ".join(f"{n}={c:.4g}" for n, c in zip(names, node.fit.coef))
                lines.append(f"{indent}{label}leaf {node.id} (weight {node.weight:.4g}, n={node.count}): {coefs}")
                return
            s = node.split
            test = next(t for t in node.tests if t["variable"] == s["variable"])
            cond = f"<= {s['cut']:.4g}" if "cut" in s else f"in {{{', '.join(s['left_levels'])}}}"
            lines.append(f"{indent}{label}node {node.id}: split on {s['variable']} (p = {test['p_adj']:.3g})")
            walk(node.left, indent + "  ", f"{s['variable']} {cond}: ")
            walk(node.right, indent + "  ", "else: ")

        walk(self._fitted(), "", "")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"regressors": self.regressors, "partition": self.partition, "intercept": self.intercept,
                "alpha": self.alpha, "bonferroni": self.bonferroni, "minsplit": self.minsplit,
                "objective": self.objective, "trim": self.trim, "max_depth": self.max_depth,
                "root": self._fitted().to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> MobTree:
        tree = cls(d["regressors"], d["partition"], intercept=d["intercept"], alpha=d["alpha"],
                   bonferroni=d["bonferroni"], minsplit=d["minsplit"], objective=d["objective"], trim=d["trim"],
                   max_depth=d["max_depth"])
        tree.root = MobNode.from_dict(d["root"])
        return tree


def best_configuration(tree: MobTree, candidates: pd.DataFrame, score=None) -> tuple[pd.Series, float]:
    """The thesis's exhaustive search: the feasible configuration with the lowest (predicted) score.

    `score(candidates, predictions) -> array` turns predictions into the quantity to minimise
    (default: the prediction itself, e.g. the iteration time; see `efficiency_index`).
    """
    if candidates.empty:
        raise UserError("no candidate configurations to choose from")
    pred = tree.predict(candidates)
    values = np.asarray(score(candidates, pred) if score else pred, dtype=float)
    i = int(np.nanargmin(values))
    return candidates.iloc[i], float(values[i])


def efficiency_index(workers, t_iter, t_compute) -> np.ndarray:
    """E_index = Workers * T_iter^2 / T_c (thesis eq 4.9): lower is better."""
    return np.asarray(workers, dtype=float) * np.asarray(t_iter, dtype=float) ** 2 / np.asarray(t_compute, dtype=float)


# -- the plugin ------------------------------------------------------------------------------------
class MobModel(ProjectionModel):
    name = "mob"
    description = ("Castellanos 2014 model-based tree: log time ratio ~ node profile features, "
                   "partitioned by the signature (supLM tests, Bonferroni)")
    needs = frozenset({NEEDS_SIGNATURES, NEEDS_NODE_FEATURES})
    options = (
        Option("regressors", tuple, None, "node features in each leaf's regression (default: all of them)"),
        Option("partition", tuple, None, "signature features the tree may split on (default: all of them)"),
        Option("minsplit", float, None, "rows a node needs to be split (default: max(10, rows / 10))", low=2),
        Option("alpha", float, 0.05, "significance level of the parameter-instability tests", low=1e-9, high=1.0),
        Option("objective", str, "deviance", "what a split minimises", choices=OBJECTIVES),
    )

    def __init__(self, regressors: list[str] | None = None, partition: list[str] | None = None,
                 minsplit: float | None = None, alpha: float = 0.05, objective: str = "deviance") -> None:
        self.regressors, self.partition = regressors, partition
        self.minsplit, self.alpha, self.objective = minsplit, alpha, objective
        self.tree: MobTree | None = None
        self.ranges: FeatureRanges | None = None
        self.warnings = []

    def fit(self, refs: ReferenceSet) -> MobModel:
        rows = projection_rows(refs)
        self.warnings = list(rows.notes)
        regressors = self.regressors or list(rows.node_columns)
        partition = self.partition or list(rows.signature_columns)
        frame = rows.frame
        minsplit = self.minsplit if self.minsplit is not None else max(10.0, len(frame) / 10)
        self.tree = MobTree(regressors, partition, minsplit=minsplit, alpha=self.alpha, objective=self.objective)
        self.tree.fit(frame, rows.y)
        self.ranges = rows.ranges
        return self

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.tree is None or self.ranges is None:
            raise NotFittedError(self.name)
        q = query_rows(query, nodes, self.ranges)
        pred, half = self.tree.predict(q.frame, with_interval=True)
        leaves = self.tree.leaves(q.frame)
        out = []
        for i, node in enumerate(q.nodes):
            t = query.base_time_s * np.exp(pred[i])
            low, high = log_interval(t, half[i])
            out.append(NodePrediction(node, float(t), float(low), float(high),
                                      {"log_ratio": float(pred[i]), "leaf": leaves[i].id},
                                      q.warnings[node]))
        return out

    def params(self) -> dict:
        if self.tree is None or self.ranges is None:
            raise NotFittedError(self.name)
        return {"options": {"regressors": self.regressors, "partition": self.partition, "minsplit": self.minsplit,
                            "alpha": self.alpha, "objective": self.objective},
                "tree": self.tree.to_dict(), "ranges": self.ranges.to_dict(),
                "warnings": self.warnings}

    @classmethod
    def from_params(cls, params: dict) -> MobModel:
        model = cls(**params["options"])
        model.tree = MobTree.from_dict(params["tree"])
        model.ranges = FeatureRanges.from_dict(params["ranges"])
        model.warnings = list(params.get("warnings", []))
        return model

    def describe(self) -> str:
        if self.tree is None:
            return self.description
        return f"MOB tree ({len([n for n in self.tree.all_nodes() if n.is_leaf()])} leaves):\n{self.tree.describe()}"
