"""Gradient-boosted trees for the node-to-node projection (after Branikas 2024).

A projection model: scikit-learn's HistGradientBoostingRegressor learns the log time ratio
ln(T_node / T_base) from the reference's signature on the base node plus the node's profile
features (see ``registry.models.tabular``); every (reference, node) pair with a measured ratio is
a training row. Two more models fitted with the quantile loss (10 % and 90 %) give the interval;
with few rows (< ``MIN_QUANTILE_ROWS``) the interval comes from the training residuals instead.

Trees do not extrapolate: beyond the training ranges they predict the value at the edge (Branikas:
R^2 0.854 -> 0.466 on unseen node counts). Queries or nodes outside the training ranges are
flagged with a warning, or refused (``extrapolation="refuse"``).

Fitted ensembles are stored as JSON (the trees' split features, thresholds and leaf values), never
as pickles; ``_TreeEnsemble`` evaluates them the way scikit-learn does.
"""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from registry.errors import UserError
from registry.models.base import (NEEDS_NODE_FEATURES, NEEDS_SIGNATURES, NodePrediction, NotFittedError,
                                   ProjectionModel, Query,
                                  ReferenceSet)
from registry.models.options import Option
from registry.models.tabular import FeatureRanges, projection_rows, query_rows

MIN_QUANTILE_ROWS = 60
QUANTILES = (0.1, 0.9)
_FIELDS = ("value", "feature_idx", "num_threshold", "missing_go_to_left", "left", "right", "is_leaf")


class _TreeEnsemble:
    """A fitted HistGradientBoostingRegressor as plain arrays: baseline + sum of tree leaf values."""

    def __init__(self, baseline: float, trees: list[dict[str, list]]):
        self.baseline = float(baseline)
        self.trees = [{k: np.asarray(v) for k, v in t.items()} for t in trees]

    @classmethod
    def from_sklearn(cls, model: HistGradientBoostingRegressor) -> _TreeEnsemble:
        if getattr(model, "is_categorical_", None) is not None:
            raise ValueError("categorical features are not supported by the JSON export")
        trees = []
        big = np.finfo(float).max                      # JSON has no infinity: an infinite threshold becomes the
        for iteration in model._predictors:           # largest float, which compares the same with finite inputs
            nodes = iteration[0].nodes
            tree = {f: nodes[f].tolist() for f in _FIELDS}
            tree["num_threshold"] = np.nan_to_num(nodes["num_threshold"], posinf=big, neginf=-big).tolist()
            trees.append(tree)
        return cls(float(np.ravel(model._baseline_prediction)[0]), trees)

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        out = np.full(len(x), self.baseline)
        rows = np.arange(len(x))
        for t in self.trees:
            node = np.zeros(len(x), dtype=int)
            while True:
                active = t["is_leaf"][node] == 0
                if not active.any():
                    break
                f = t["feature_idx"][node[active]]
                v = x[rows[active], f]
                left = np.where(np.isnan(v), t["missing_go_to_left"][node[active]] == 1,
                                v <= t["num_threshold"][node[active]])
                node[active] = np.where(left, t["left"][node[active]], t["right"][node[active]])
            out += t["value"][node]
        return out

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "trees": [{k: v.tolist() for k, v in t.items()} for t in self.trees]}

    @classmethod
    def from_dict(cls, d: dict) -> _TreeEnsemble:
        return cls(d["baseline"], d["trees"])


class GbtModel(ProjectionModel):
    name = "gbt"
    description = ("gradient-boosted trees on signature + node profile features -> log time ratio "
                   "(flags extrapolation)")
    needs = frozenset({NEEDS_SIGNATURES, NEEDS_NODE_FEATURES})
    options = (
        Option("extrapolation", str, "warn", "a query outside the training ranges: warn, or refuse to predict",
               choices=("warn", "refuse")),
        Option("max_iter", int, 200, "boosting iterations (trees)", low=1),
        Option("learning_rate", float, 0.05, "shrinkage of each tree", low=1e-6, high=1.0),
        Option("max_leaf_nodes", int, 15, "leaves per tree", low=2),
        Option("random_state", int, 0, "seed"),
    )

    def __init__(self, extrapolation: str = "warn", max_iter: int = 200, learning_rate: float = 0.05,
                 max_leaf_nodes: int = 15, random_state: int = 0) -> None:
        if extrapolation not in ("warn", "refuse"):
            raise UserError(f"gbt extrapolation must be warn or refuse, not {extrapolation!r}")
        self.extrapolation = extrapolation
        self.hyper = {"max_iter": int(max_iter), "learning_rate": float(learning_rate),
                      "max_leaf_nodes": int(max_leaf_nodes), "random_state": int(random_state)}
        self.mean: _TreeEnsemble | None = None
        self.quantiles: dict[str, _TreeEnsemble] = {}
        self.residual_band: tuple[float, float] | None = None
        self.ranges: FeatureRanges | None = None
        self.rows = 0
        self.warnings = []

    def option_values(self) -> dict:
        return {"extrapolation": self.extrapolation, **self.hyper}

    def _regressor(self, rows: int, **loss) -> HistGradientBoostingRegressor:
        return HistGradientBoostingRegressor(min_samples_leaf=max(3, rows // 20), early_stopping=False,
                                             **self.hyper, **loss)

    def fit(self, refs: ReferenceSet) -> GbtModel:
        rows = projection_rows(refs)
        x, y = rows.frame.to_numpy(dtype=float), rows.y
        self.warnings = list(rows.notes)
        self.ranges, self.rows = rows.ranges, len(y)
        mean = self._regressor(len(y)).fit(x, y)
        self.mean = _TreeEnsemble.from_sklearn(mean)
        self.quantiles, self.residual_band = {}, None
        if len(y) >= MIN_QUANTILE_ROWS:
            for q in QUANTILES:
                self.quantiles[str(q)] = _TreeEnsemble.from_sklearn(
                    self._regressor(len(y), loss="quantile", quantile=q).fit(x, y))
        else:
            resid = y - self.mean.predict(x)
            self.residual_band = (float(np.quantile(resid, QUANTILES[0])), float(np.quantile(resid, QUANTILES[1])))
            self._warn(f"only {len(y)} training rows: the interval is the training residuals' 10-90% band "
                       "(optimistic)")
        return self

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.mean is None or self.ranges is None:
            raise NotFittedError(self.name)
        q = query_rows(query, nodes, self.ranges)
        x = q.frame.to_numpy(dtype=float)
        if self.extrapolation == "refuse":
            outside = sorted({w for node in q.nodes for w in q.warnings[node] if w.startswith("extrapolation")})
            if outside:
                raise UserError(f"gbt refuses to extrapolate: {outside[0]}"
                                + (f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""))
        pred = self.mean.predict(x)
        if self.quantiles:
            lo = self.quantiles[str(QUANTILES[0])].predict(x)
            hi = self.quantiles[str(QUANTILES[1])].predict(x)
        else:
            lo, hi = pred + self.residual_band[0], pred + self.residual_band[1]
        lo, hi = np.minimum(lo, pred), np.maximum(hi, pred)   # quantile models can cross the mean
        base = query.base_time_s
        return [NodePrediction(node, float(base * np.exp(pred[i])), float(base * np.exp(lo[i])),
                               float(base * np.exp(hi[i])), {"log_ratio": float(pred[i])}, q.warnings[node])
                for i, node in enumerate(q.nodes)]

    def params(self) -> dict:
        if self.mean is None or self.ranges is None:
            raise NotFittedError(self.name)
        return {"extrapolation": self.extrapolation, "hyper": self.hyper, "rows": self.rows,
                "mean": self.mean.to_dict(), "quantiles": {k: v.to_dict() for k, v in self.quantiles.items()},
                "residual_band": list(self.residual_band) if self.residual_band else None,
                "ranges": self.ranges.to_dict(), "warnings": self.warnings}

    @classmethod
    def from_params(cls, params: dict) -> GbtModel:
        model = cls(params["extrapolation"], **params["hyper"])
        model.rows = int(params["rows"])
        model.mean = _TreeEnsemble.from_dict(params["mean"])
        model.quantiles = {k: _TreeEnsemble.from_dict(v) for k, v in params["quantiles"].items()}
        band = params.get("residual_band")
        model.residual_band = tuple(band) if band else None
        model.ranges = FeatureRanges.from_dict(params["ranges"])
        model.warnings = list(params.get("warnings", []))
        return model

    def describe(self) -> str:
        if self.mean is None or self.ranges is None:
            return self.description
        interval = "quantile models (10%, 90%)" if self.quantiles else "training residual band"
        return (f"gradient-boosted trees: {len(self.mean.trees)} trees on {len(self.ranges.signature_columns)} "
                f"signature + {len(self.ranges.node_columns)} node features, {self.rows} training rows; "
                f"interval from {interval}; extrapolation: {self.extrapolation}")
