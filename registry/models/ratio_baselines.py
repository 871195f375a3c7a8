"""Single-ratio baselines of predicting an app measured on a few calibration nodes (registry/crossarch):
the app's time moves from node to node like ONE reference's does. In log space the prediction on node
n is ``L[r, n] + mean over calibration nodes c of (q_c - L[r, c])``.

* ``vcpu-ratio``: the reference ``node:vcpus`` (time ~ 1 / vCPUs);
* ``geekbench-ratio``: Geekbench's overall score of the app's thread class, its own sub-test left out
  (``geekbench:score:single|multi``);
* ``best-micro-ratio``: the micro-benchmark config whose pattern over the calibration nodes matches
  the app's best (least squares of the centred log patterns); with one calibration node every config
  fits, and the rule is the most typical config (the smallest median distance of its log ratios to
  the median over configs). On signatures of one node (a traced app in `nodereg evaluate`: no
  calibration times), the config whose signature matches best, and its ratio as it stands.

A reference set without the named reference (another suite, the conformance fixture) falls back to the
median log ratio over all references, with a warning. No intervals: low = high = the prediction.
"""

from __future__ import annotations

import warnings

import numpy as np

from registry.models.base import NEEDS_SIGNATURES, NodePrediction, NotFittedError, ProjectionModel, Query, ReferenceSet
from registry.models.similar_runs import CAL, node_predictions, pattern_columns

SINGLE = "meta.single"


class _SingleRatio(ProjectionModel):
    baseline = True
    needs = frozenset({NEEDS_SIGNATURES})

    def __init__(self) -> None:
        self.fitted: dict | None = None

    def fit(self, refs: ReferenceSet) -> _SingleRatio:
        feats, ratio = refs.feature_matrix, refs.ratio_matrix
        cols = pattern_columns(list(feats.columns))
        at = {c: i for i, c in enumerate(feats.columns)}
        self.fitted = {"rows": [str(r) for r in feats.rows], "columns": cols, "nodes": list(ratio.columns),
                       "F": feats.values[:, [at[c] for c in cols]], "L": ratio.values,
                       "micro": feats.values[:, at["meta.micro"]] > 0.5 if "meta.micro" in at else
                       np.ones(len(feats.rows), bool)}
        return self

    def choose(self, q: np.ndarray, single: bool) -> int | None:
        """The reference row this baseline projects with (None: the median over references)."""
        raise NotImplementedError

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.fitted is None:
            raise NotFittedError(self.name)
        f = self.fitted
        sig = dict(query.signature.items())
        q = np.array([float(sig.get(c, np.nan)) for c in f["columns"]])
        row = self.choose(q, float(sig.get(SINGLE, 0.0)) > 0.5)
        if row is None:
            self._warn(f"{self.name}: its reference is not among these references; the median ratio is used")
            with warnings.catch_warnings():   # a node no reference was measured on: NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                log = np.nanmedian(f["L"], axis=0)
            used = "median"
        else:
            # the offset of the app's calibration times from the reference's (both log times on the
            # calibration nodes); signatures measured on one node (`nodereg evaluate`'s traces) are no
            # times, and their differences (an RSS of 300 MB against 5) made a ratio of e^95
            offset = np.nanmean(q - f["F"][row]) if all(c.startswith(CAL) for c in f["columns"]) else 0.0
            log = f["L"][row] + offset
            used = f["rows"][row]
        return node_predictions(nodes, f["nodes"], query.base_time_s, log, np.zeros(len(log)), {"reference": used})

    def params(self) -> dict:
        if self.fitted is None:
            raise NotFittedError(self.name)
        f = self.fitted
        nan_free = lambda a: [[None if not np.isfinite(v) else float(v) for v in row] for row in a]  # noqa: E731
        return {"rows": f["rows"], "columns": f["columns"], "nodes": f["nodes"], "F": nan_free(f["F"]),
                "L": nan_free(f["L"]), "micro": [bool(v) for v in f["micro"]]}

    @classmethod
    def from_params(cls, params: dict) -> _SingleRatio:
        model = cls()
        if "L" in params:
            arr = lambda a: np.array([[np.nan if v is None else v for v in row] for row in a],  # noqa: E731
                                     dtype=float)
            model.fitted = {"rows": list(params["rows"]), "columns": list(params["columns"]),
                            "nodes": list(params["nodes"]), "F": arr(params["F"]).reshape(len(params["rows"]), -1),
                            "L": arr(params["L"]), "micro": np.array(params["micro"], dtype=bool)}
        return model


class _NamedRatio(_SingleRatio):
    def reference(self, single: bool) -> str:
        raise NotImplementedError

    def choose(self, q: np.ndarray, single: bool) -> int | None:
        name = self.reference(single)
        return self.fitted["rows"].index(name) if name in self.fitted["rows"] else None


class VcpuRatioBaseline(_NamedRatio):
    name = "vcpu-ratio"
    description = "baseline: the app's calibration times scaled by the ratio of vCPUs"

    def reference(self, single: bool) -> str:
        from registry.crossarch.references import VCPUS

        return VCPUS


class GeekbenchRatioBaseline(_NamedRatio):
    name = "geekbench-ratio"
    description = "baseline: scaled by Geekbench's overall score of the app's thread class (own sub-test left out)"

    def reference(self, single: bool) -> str:
        from registry.crossarch.references import GEEKBENCH_SCORE

        return GEEKBENCH_SCORE + ("single" if single else "multi")


class BestMicroRatioBaseline(_SingleRatio):
    name = "best-micro-ratio"
    description = "baseline: scaled by the one micro-benchmark config that best matches the calibration runs"

    def choose(self, q: np.ndarray, single: bool) -> int | None:
        f = self.fitted
        # over the features the query has: a trace's signature lacks some that profile configs have,
        # and a NaN in every config's fit ended in `argmin of an empty sequence` (trial 4 of #32)
        have = np.isfinite(q)
        rows = np.flatnonzero(f["micro"] & np.all(np.isfinite(f["F"][:, have]), axis=1)) if have.any() else []
        if not len(rows):
            return None
        gap = q[None, have] - f["F"][np.ix_(rows, np.flatnonzero(have))]
        sse = ((gap - gap.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        best = rows[sse <= sse.min() + 1e-12]
        if len(best) == 1:
            return int(best[0])
        L = f["L"][best]
        with warnings.catch_warnings():   # nodes none of them was measured on: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            typical = np.nanmedian(np.abs(L - np.nanmedian(L, axis=0)), axis=1)
        return int(best[np.nanargmin(np.where(np.isfinite(typical), typical, np.inf))])
