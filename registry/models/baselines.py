"""Baselines: what "simple" reaches on the same data, shown beside every model in `nodereg evaluate`.

They are plugins like any model (entry points in pyproject.toml), marked ``baseline = True`` so that
reports list them apart; they can also serve `nodereg match`, where they make a useful sanity check.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from registry.errors import UserError
from registry.models.base import NEEDS_SIGNATURES, NodePrediction, NotFittedError, ProjectionModel, Query, ReferenceSet
from registry.models.options import Option


class MedianRatioBaseline(ProjectionModel):
    """Scale the base time by each node's median ratio over all references (ignores the signature)."""

    name = "median-ratio"
    baseline = True
    description = "baseline: base time x the node's median node-to-base ratio over all references"
    needs = frozenset()

    def __init__(self) -> None:
        self.median: pd.Series | None = None

    def fit(self, refs: ReferenceSet) -> MedianRatioBaseline:
        self.median = refs.log_ratio.median()
        return self

    def params(self) -> dict:
        if self.median is None:
            raise NotFittedError(self.name)
        return {"median": {str(n): float(v) for n, v in self.median.items()}}

    @classmethod
    def from_params(cls, params: dict) -> MedianRatioBaseline:
        model = cls()
        model.median = pd.Series(params["median"], dtype=float)
        return model

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.median is None:
            raise NotFittedError(self.name)
        out = []
        for node in nodes:
            r = float(self.median.get(node, np.nan))
            t = query.base_time_s * np.exp(r) if np.isfinite(r) else np.nan
            out.append(NodePrediction(node, t, t, t))
        return out


class KnnSarBaseline(ProjectionModel):
    """Plain mean of the log ratios of the k nearest references, z-scored 'sar.*' features, Euclidean."""

    name = "knn5-sar"
    baseline = True
    description = "baseline: 5 nearest references by z-scored sar summary, plain mean of their log ratios"
    needs = frozenset({NEEDS_SIGNATURES})
    options = (Option("k", int, 5, "nearest references averaged", low=1),)

    def __init__(self, k: int = 5):
        self.k = k
        self.y: pd.DataFrame | None = None

    def fit(self, refs: ReferenceSet) -> KnnSarBaseline:
        cols = [c for c in refs.features.columns if c.startswith("sar.")]
        x = refs.features[cols]
        self.mu, self.sd = x.mean(), x.std().replace(0, np.nan)
        self.cols = [c for c in cols if np.isfinite(self.sd[c])]
        self.z = ((x[self.cols] - self.mu[self.cols]) / self.sd[self.cols]).fillna(0.0)
        self.y = refs.log_ratio
        return self

    def params(self) -> dict:
        if self.y is None:
            raise NotFittedError(self.name)
        return {"k": self.k, "cols": self.cols, "mu": self.mu[self.cols].tolist(), "sd": self.sd[self.cols].tolist(),
                "z": self.z.to_dict(orient="split"), "y": self.y.to_dict(orient="split")}

    @classmethod
    def from_params(cls, params: dict) -> KnnSarBaseline:
        model = cls(params["k"])
        model.cols = list(params["cols"])
        model.mu = pd.Series(params["mu"], index=model.cols, dtype=float)
        model.sd = pd.Series(params["sd"], index=model.cols, dtype=float)
        model.z, model.y = (pd.DataFrame(**params[key], dtype=float) for key in ("z", "y"))
        return model

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.y is None:
            raise NotFittedError(self.name)
        zq = ((query.features.reindex(self.cols) - self.mu[self.cols]) / self.sd[self.cols]).fillna(0.0)
        d = np.sqrt(((self.z - zq) ** 2).sum(axis=1))
        out = []
        for node in nodes:
            col = self.y[node].dropna() if node in self.y.columns else pd.Series(dtype=float)
            near = d[col.index].nsmallest(self.k).index
            r = float(col[near].mean()) if len(near) else np.nan
            t = query.base_time_s * np.exp(r)
            out.append(NodePrediction(node, t, t, t))
        return out


class RfSarBaseline(ProjectionModel):
    """The Lumos README's "random forest on sar summary + VM one-hot": one forest over (reference, node)
    rows, inputs the reference's 'sar.*' summary and the node as a one-hot, target the log ratio."""

    name = "rf-sar"
    baseline = True
    description = "baseline: one random forest on (sar summary, node one-hot) -> log time ratio"
    needs = frozenset({NEEDS_SIGNATURES})

    options = (Option("n_estimators", int, 100, "trees in the forest", low=1),
               Option("random_state", int, 0, "seed of the forest"))

    def __init__(self, n_estimators: int = 100, random_state: int = 0):
        self.n_estimators, self.random_state = int(n_estimators), int(random_state)
        self.forest = None

    def fit(self, refs: ReferenceSet) -> RfSarBaseline:
        from sklearn.ensemble import RandomForestRegressor

        from registry.models.forest import TreeEnsemble

        cols = [c for c in refs.features.columns if c.startswith("sar.")]
        x = refs.features[cols].apply(pd.to_numeric, errors="coerce")
        x = x.loc[:, x.notna().any()]          # a metric no reference has says nothing (and cannot be filled)
        self.cols, self.fill = list(x.columns), x.median()
        self.nodes = list(refs.log_ratio.columns)
        long = refs.log_ratio.reindex(x.index).stack().dropna().rename("y").reset_index()
        long.columns = ["ref", "node", "y"]
        if long.empty or not self.cols:
            raise UserError("rf-sar needs references with sar features measured on some node")
        rows = self._rows(x.fillna(self.fill).loc[long["ref"]].to_numpy(dtype=float), long["node"].tolist())
        fitted = RandomForestRegressor(n_estimators=self.n_estimators, random_state=self.random_state,
                                       n_jobs=1).fit(rows, long["y"].to_numpy())
        self.forest = TreeEnsemble.from_sklearn(fitted)   # plain arrays: saved as JSON, never pickled
        return self

    def _rows(self, x: np.ndarray, nodes: list[str]) -> np.ndarray:
        index = {n: i for i, n in enumerate(self.nodes)}
        onehot = np.zeros((len(nodes), len(self.nodes)))
        onehot[np.arange(len(nodes)), [index[n] for n in nodes]] = 1.0
        return np.hstack([x, onehot])

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.forest is None:
            raise NotFittedError(self.name)
        q = pd.to_numeric(query.features.reindex(self.cols), errors="coerce").fillna(self.fill).to_numpy(dtype=float)
        known = [n for n in nodes if n in self.nodes]
        rows = self._rows(np.tile(q, (len(known), 1)), known)
        ratio = dict(zip(known, self.forest.per_tree(rows)[:, :, 0].mean(axis=0))) if known else {}
        out = []
        for node in nodes:
            t = query.base_time_s * float(np.exp(ratio[node])) if node in ratio else np.nan
            out.append(NodePrediction(node, t, t, t))
        return out

    def params(self) -> dict:
        if self.forest is None:
            raise NotFittedError(self.name)
        return {"n_estimators": self.n_estimators, "random_state": self.random_state, "columns": self.cols,
                "fill": [float(v) for v in self.fill], "nodes": self.nodes, "trees": self.forest.to_dict()}

    @classmethod
    def from_params(cls, params: dict) -> RfSarBaseline:
        from registry.models.forest import TreeEnsemble  # (scikit-learn: imported when used)

        model = cls(params.get("n_estimators", 100), params.get("random_state", 0))
        if "trees" in params:
            model.cols, model.nodes = list(params["columns"]), list(params["nodes"])
            model.fill = pd.Series(params["fill"], index=model.cols, dtype=float)
            model.forest = TreeEnsemble(params["trees"])
        return model
