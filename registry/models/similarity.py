"""The ``similarity`` projection model: nearest references by signature, geometric mean of their ratios.

A query (a phase or a whole app, measured on the base node) is compared with every reference (a
microbenchmark config for ``nodereg match``; another app for ``nodereg evaluate``) over the
features both have, whatever their source (proc, counters, cachegrind, streams, sar, meta):

1. Features are standardised on the references (centre: median; scale: 1.4826 x the median
   absolute deviation, or the standard deviation where that is 0) and clipped to +-4, so that no
   unit or outlier dominates. Features without spread among the references are dropped.
2. Each feature weighs ``prior x relevance ** relevance_power``. The prior is the model's data,
   shipped with it in ``similarity_weights.json`` (versioned: the latest is the default, and its
   version is part of the model's version, so predictions made with other weights say so), by
   ``source.metric``, ``source.*`` or ``*``; the ``weights`` option or ``ReferenceSet.feature_weights``
   replace it. The relevance is learnt from the references when the model is fitted:
   the share of the variance of the references' log node-to-base ratios that the feature accounts
   for (squared covariance of the standardised feature with each node's log ratio, summed over
   nodes, over the total variance). A feature that says nothing about how times move between
   nodes does not steer the neighbours.
3. The distance is the weighted root-mean-square difference over the shared features.
4. On each node, the k nearest references that were measured there vote with weights
   1 / (distance + 5% of the median distance), times the reference set's prior on each reference's
   vote where it has one (registry.match.track: how well the reference moves like the applications
   measured on many nodes); the projection is the weighted geometric mean of
   their node-to-base time ratios (a weighted mean in log space), shrunk toward the node's median
   ratio over all references by ``shrink`` (steadier when the neighbours disagree or are far).
5. The interval is the projection times exp(+-h): h adds (registry.models.intervals.rss) z x the
   weighted spread of the neighbours' log ratios, z = 2.6 (a 90% band, calibrated on measured runs:
   see ``_Z_INTERVAL``), and the query's distance to its nearest reference times how much the log
   ratio moves per unit of distance between neighbouring references on that node (learnt at fit,
   ``distance_slope``): a phase far from every reference is not predicted as surely as one that
   sits on one, even when its neighbours agree. That term is at most the node's whole span of
   log ratios (a phase like no reference gets that span: nothing beyond it is known either).
6. When the nearest references tie (distances within ``TIE_DISTANCE`` of the nearest, or a vote of
   at least ``NEAR_VOTE`` of the nearest's: zstd's one-thread tail matched the memory load at
   similarity 0.73 and the triad at 0.64, whose one-thread ratios between two quick profiles were
   0.70 and 1.08) but their ratios on a node differ by more than ``DISAGREE`` (a numpy matrix
   product matched the memory load, the triad and `mbw1c` all at similarity 1.00, which scale
   differently from 2 CPUs to 1), the signature cannot tell which of them the query behaves like:
   the interval is widened to cover every such reference's ratio, and the explanation says so
   (``disagree``), which `nodereg match` turns into a warning.

The defaults (k=5, shrink=0.1, relevance_power=2) were chosen on the Lumos Alibaba cloud and
checked on the Huawei one (docs/evaluation.md), never tuned on the app being predicted. Work per
query is one pass over references x features plus one over references x nodes (no per-node
distances), so 300 references x 10,000 nodes stay well under a second.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from registry import __version__
from registry.models.base import (NEEDS_SIGNATURES, NodePrediction, NotFittedError, ProjectionModel, Query,
                                  ReferenceSet)
from registry.models import intervals
from registry.models.options import Option
from registry.models.predictions import NodePredictions

_CLIP = 4.0
# The neighbours' spread leaves out run-to-run noise and the query's own base-time noise, so a
# normal 90% band (1.645) covered only 77% on Lumos; 2.6 covers 90% on Alibaba (chosen there) and
# 90% on Huawei (checked there).
_Z_INTERVAL = 2.6
LOG_SPAN = 1000.0              # a positive feature whose references span 3 decades is compared as a log
TIE_DISTANCE = 0.05            # references this close to the nearest (standardised RMS units) tie with it
DISAGREE = 0.15                # tied references whose ratios differ by more than 15% disagree
NEAR_VOTE = 0.5                # a reference with half the nearest's vote or more is about as near


@functools.cache
def _weight_versions() -> dict[int, dict[str, float]]:
    """Every shipped version of the prior weights. Model data rather than registry data: re-weighting
    is a new nodereg release, not a schema migration that would lock older clients out of a shared
    registry."""
    shipped = json.loads(Path(__file__).with_name("similarity_weights.json").read_text())
    return {int(v["version"]): {w["pattern"]: float(w["weight"]) for w in v["weights"]} for v in shipped["versions"]}


WEIGHTS_VERSION = max(_weight_versions())


def load_weights(version: int = WEIGHTS_VERSION) -> dict[str, float]:
    """The shipped prior feature weights of `version` (default: the latest)."""
    if version not in _weight_versions():
        raise ValueError(f"no similarity weights version {version} (shipped: {sorted(_weight_versions())})")
    return dict(_weight_versions()[version])


def prior_weight(feature: str, weights: Mapping[str, float]) -> float:
    """Weight of 'source.metric': exact entry, else 'source.*', else '*', else 1."""
    if feature in weights:
        return float(weights[feature])
    source = feature.split(".", 1)[0]
    if f"{source}.*" in weights:
        return float(weights[f"{source}.*"])
    return float(weights.get("*", 1.0))


class SimilarityModel(ProjectionModel):
    name = "similarity"
    description = ("k nearest references by weighted standardised signature distance over every source both "
                   "have; projection = weighted geometric mean of their node-to-base time ratios, shrunk toward "
                   "the node's median ratio; interval from the neighbours' spread")
    needs = frozenset({NEEDS_SIGNATURES})
    # the weights are part of what the model computes: other weights, another version
    version = f"{__version__}+weights{WEIGHTS_VERSION}"
    options = (
        Option("k", int, 5, "nearest references that vote on each node", low=1),
        Option("shrink", float, 0.1, "weight of the node's median ratio against the neighbours'", low=0.0, high=1.0),
        Option("relevance_power", float, 2.0, "exponent of the learnt feature relevance (0: priors only)", low=0.0),
        Option("z_interval", float, _Z_INTERVAL, "interval half-width in neighbours' standard deviations", low=0.0),
    )

    def __init__(self, k: int = 5, shrink: float = 0.1, relevance_power: float = 2.0,
                 weights: Mapping[str, float] | None = None, z_interval: float = _Z_INTERVAL):
        if k < 1:
            raise ValueError("k must be at least 1")
        if not 0.0 <= shrink <= 1.0:
            raise ValueError("shrink must be within [0, 1]")
        self.k = int(k)
        self.shrink = float(shrink)
        self.relevance_power = float(relevance_power)
        self.weights = dict(weights) if weights is not None else None
        self.z_interval = float(z_interval)
        # the shipped prior's version, None when the prior was given (`weights` or the reference set's)
        self.weights_version: int | None = WEIGHTS_VERSION if self.weights is None else None
        self._fitted = False
        self.log_columns: list[str] = []
        self.vote_prior: np.ndarray | None = None   # per reference (fit: ReferenceSet.reference_weights)

    # -- persistence -------------------------------------------------------------------------

    def params(self) -> dict:
        """Hyper-parameters and, once fitted, everything `predict` uses: the learnt feature centres,
        scales and weights, and the references (a nearest-neighbour model's fitted state is its
        references: standardised features, log node-to-base ratios, each node's median ratio)."""
        out = {"k": self.k, "shrink": self.shrink, "relevance_power": self.relevance_power,
               "weights": self.weights, "weights_version": self.weights_version, "z_interval": self.z_interval}
        if self._fitted:
            out["features"] = {f: {"center": float(c), "scale": float(s), "weight": float(w)}
                               for f, c, s, w in zip(self.columns, self.center, self.scale, self._weight)}
            out["references"] = {"rows": list(self.references), "columns": list(self.columns),
                                 "log_columns": list(self.log_columns), "z": self.z.tolist(),
                                 "nodes": list(self._node_index), "log_ratio": self.y.tolist(),
                                 "node_median": self.node_median.tolist(),
                                 "distance_slope": self.distance_slope.tolist(),
                                 "vote_prior": None if self.vote_prior is None else self.vote_prior.tolist()}
        return out

    @classmethod
    def from_params(cls, params: dict) -> SimilarityModel:
        model = cls(k=params.get("k", 5), shrink=params.get("shrink", 0.1),
                    relevance_power=params.get("relevance_power", 2.0), weights=params.get("weights"),
                    z_interval=params.get("z_interval", _Z_INTERVAL))
        refs = params.get("references")
        if refs is not None:  # stored JSON holds NaN as null: float arrays turn it back into NaN
            features, columns = params["features"], list(refs["columns"])
            model.columns, model.log_columns = columns, list(refs["log_columns"])
            model.center, model.scale, model._weight = (
                np.array([features[c][key] for c in columns], dtype=float) for key in ("center", "scale", "weight"))
            model.feature_weight = dict(zip(columns, model._weight.tolist()))
            model.references = list(refs["rows"])
            model.z = np.array(refs["z"], dtype=float).reshape(len(model.references), len(columns))
            model.y = np.array(refs["log_ratio"], dtype=float).reshape(len(model.references), len(refs["nodes"]))
            model._node_index = {n: i for i, n in enumerate(refs["nodes"])}
            model.node_median = np.array(refs["node_median"], dtype=float)
            model.distance_slope = np.array(refs.get("distance_slope") or np.zeros(len(refs["nodes"])), dtype=float)
            prior = refs.get("vote_prior")
            model.vote_prior = None if prior is None else np.array(prior, dtype=float)
            model._span()
            model._fitted = True
        model.weights_version = params.get("weights_version", model.weights_version)
        return model

    def describe(self) -> str:
        if not self._fitted:
            return self.description
        top = sorted(self.feature_weight.items(), key=lambda fw: -fw[1])[:5]
        listed = ", ".join(f"{f} ({w:.2f})" for f, w in top)
        return (f"{self.description}. Fitted on {len(self.z)} references x {self.y.shape[1]} nodes, "
                f"k={self.k}, shrink={self.shrink}; heaviest features: {listed}")

    # -- fit / predict (numpy arrays: no pandas on the `nodereg match` path) -------------------

    def _transform(self, values: np.ndarray, columns: list[str]) -> np.ndarray:
        """Features spanning decades (a working set from L1 to memory) are compared in log space."""
        log_columns = set(self.log_columns)
        logged = [i for i, c in enumerate(columns) if c in log_columns]
        if not logged:
            return values
        out = values.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, logged] = np.log(np.where(out[:, logged] > 0, out[:, logged], np.nan))
        return out

    def fit(self, refs: ReferenceSet) -> SimilarityModel:
        x, ratios = refs.feature_matrix, refs.ratio_matrix
        values, columns = np.array(x.values, dtype=float), list(x.columns)
        missing = np.isnan(values)
        positive = ((values > 0) | missing).all(axis=0) & ((~missing).sum(axis=0) >= 3)
        with np.errstate(divide="ignore", invalid="ignore"):
            span = np.where(missing, -np.inf, values).max(axis=0, initial=-np.inf) / \
                np.where(missing, np.inf, values).min(axis=0, initial=np.inf)
        self.log_columns = [c for c, pos, sp in zip(columns, positive, span) if pos and sp >= LOG_SPAN]
        values = self._transform(values, columns)
        with warnings.catch_warnings(), np.errstate(all="ignore"):   # all-NaN columns: NaN, as meant
            warnings.simplefilter("ignore", RuntimeWarning)
            center = np.nanmedian(values, axis=0)
            scale = np.nanmedian(np.abs(values - center), axis=0) * 1.4826
            scale = np.where(scale > 0, scale, np.nanstd(values, axis=0, ddof=1))
        usable = np.isfinite(scale) & (scale > 0)
        self.columns = [c for c, u in zip(columns, usable) if u]
        self.center, self.scale = center[usable], scale[usable]
        with np.errstate(invalid="ignore"):
            z = np.clip((values[:, usable] - self.center) / self.scale, -_CLIP, _CLIP)
        weights = self.weights if self.weights is not None else refs.feature_weights or load_weights()
        if self.weights is None:
            self.weights_version = None if refs.feature_weights else WEIGHTS_VERSION
        prior = np.array([prior_weight(c, weights) for c in self.columns], dtype=float)
        yv = ratios.values
        with np.errstate(all="ignore"):
            # np.median where nothing is missing: nanmedian's masked-array path is 4x slower on 10,000 nodes
            node_median = (np.full(yv.shape[1], np.nan) if not len(yv) else
                           np.nanmedian(yv, axis=0) if np.isnan(yv).any() else np.median(yv, axis=0))
        w = prior * self._relevance(z, yv, node_median) ** self.relevance_power
        self._weight = w / w.sum() if w.sum() > 0 else prior
        self.feature_weight = dict(zip(self.columns, self._weight.tolist()))
        self.references, self.z, self.y = list(x.rows), z, yv
        self.vote_prior = None if refs.reference_weights is None else \
            np.array([refs.reference_weights.get(r, 1.0) for r in self.references], dtype=float)
        self._node_index = {n: i for i, n in enumerate(ratios.columns)}
        self.node_median = node_median
        self._span()
        self.distance_slope = self._neighbour_slope(z, self._weight, yv)
        self._fitted = True
        return self

    @staticmethod
    def _neighbour_slope(z: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per node, how far the log ratio moves per unit of signature distance between a reference
        and its nearest other reference: the least-squares slope through the origin of |dy| on d.
        A query that far from its nearest reference is as uncertain as such a pair (intervals.
        distance_width). 0 where fewer than two references were measured on a node."""
        n = len(z)
        if n < 2 or z.shape[1] == 0 or y.shape[1] == 0:
            return np.zeros(y.shape[1])
        have = np.isfinite(z)
        zz = np.nan_to_num(z)
        both = have[:, None, :] & have[None, :, :]                      # refs x refs x features
        wm = np.where(both, w, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.sqrt((wm * (zz[:, None, :] - zz[None, :, :]) ** 2).sum(axis=2) / wm.sum(axis=2))
        d[np.arange(n), np.arange(n)] = np.nan
        d = np.where(np.isfinite(d), d, np.inf)
        nearest = d.argmin(axis=1)
        dist = d[np.arange(n), nearest]
        keep = np.isfinite(dist)
        if not keep.any():
            return np.zeros(y.shape[1])
        gap = y[keep] - y[nearest[keep]]                                 # pairs x nodes, NaN: unmeasured
        np.abs(gap, out=gap)
        dk = dist[keep]
        missing = np.isnan(gap)
        if missing.any():          # matrix products, not pairs x nodes temporaries: 10,000 nodes stay cheap
            gap[missing] = 0.0
            den = (dk ** 2) @ ~missing
        else:
            den = np.full(gap.shape[1], (dk ** 2).sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = (dk @ gap) / den
        return np.where(np.isfinite(slope), slope, 0.0)

    def _span(self) -> None:
        """Each node's lowest and highest log ratio over every reference, which bound every query's
        interval (predict_many): computed once, not per phase (3 million ratios at 10,000 nodes)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # a node without any reference: NaN stays
            self.node_lowest, self.node_highest = np.nanmin(self.y, axis=0), np.nanmax(self.y, axis=0)

    @staticmethod
    def _relevance(z: np.ndarray, y: np.ndarray, node_median: np.ndarray) -> np.ndarray:
        """Share of the references' log-ratio variance each standardised feature accounts for."""
        n = len(z)
        if n < 3 or y.shape[1] == 0 or z.shape[1] == 0:
            return np.ones(z.shape[1])
        zc = np.nan_to_num(z)
        zc = zc - zc.mean(axis=0)
        zsd = zc.std(axis=0)
        zsd[zsd == 0] = np.inf
        yc = np.where(np.isfinite(y), y, np.nan_to_num(node_median))
        yc = yc - yc.mean(axis=0)
        cov = (zc / zsd).T @ yc / (n - 1)               # features x nodes: cov(feature, log ratio)
        total = (yc**2).sum() / (n - 1)
        return (cov**2).sum(axis=1) / total if total > 0 else np.ones(z.shape[1])

    def distances(self, query: Query) -> np.ndarray:
        """Weighted RMS standardised difference between the query and each of `self.references`
        (NaN: nothing shared)."""
        sig = query.signature
        q = np.array([[float(sig[c]) if c in sig else np.nan for c in self.columns]])
        q = self._transform(q, self.columns)[0]
        with np.errstate(invalid="ignore", over="ignore"):   # a huge value clips to +-_CLIP, as meant
            zq = np.clip((q - self.center) / self.scale, -_CLIP, _CLIP)
        have_q = ~np.isnan(zq)
        w = self._weight * have_q
        diff = self.z - np.where(have_q, zq, 0.0)
        shared = np.isfinite(diff)
        wm = np.where(shared, w, 0.0)
        num = np.nansum(wm * np.nan_to_num(diff) ** 2, axis=1)
        den = wm.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.sqrt(num / den)
        return np.where(den > 0, d, np.nan)

    def nearest(self, query: Query, k: int) -> list[tuple[str, float]]:
        """The k references nearest the query, with their distances (those sharing no feature left out)."""
        d = self.distances(query)
        order = [i for i in np.argsort(np.where(np.isnan(d), np.inf, d), kind="stable")[:k] if np.isfinite(d[i])]
        return [(self.references[i], float(d[i])) for i in order]

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        return list(self.predict_many(query, nodes).values())

    def predict_many(self, query: Query, nodes: list[str]) -> NodePredictions:
        """`predict` as arrays over `nodes` (registry.models.predictions): no object per node."""
        if not self._fitted:
            raise NotFittedError(self.name)
        d = self.distances(query)
        order = np.argsort(np.where(np.isnan(d), np.inf, d), kind="stable")
        dist = d[order]
        ids = [self.references[i] for i in order[:self.k]]
        known = [n for n in nodes if n in self._node_index]
        ratios, cols = self.y, [self._node_index[n] for n in known]
        # only the nearest rows can vote: take the shortest prefix of references, in order of distance,
        # in which every node has k usable ones (usually k rows; 10,000 nodes x 300 references otherwise)
        rows = min(len(order), self.k)
        while True:
            y = ratios[order[:rows]][:, cols]
            usable = np.isfinite(y) & np.isfinite(dist[:rows])[:, None]
            if rows == len(order) or (usable.sum(axis=0) >= self.k).all():
                break
            rows = min(len(order), 2 * rows)
        rank = np.cumsum(usable, axis=0)
        chosen = usable & (rank <= self.k)
        scale = np.nanmedian(dist[np.isfinite(dist)]) if np.isfinite(dist).any() else 1.0
        sim = 1.0 / (np.nan_to_num(dist, nan=np.inf) + 0.05 * max(scale, 1e-9))
        if self.vote_prior is not None:
            sim = sim * self.vote_prior[order]
        wts = np.where(chosen, sim[:rows, None], 0.0)
        wsum = wts.sum(axis=0)
        yz = np.nan_to_num(y)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = (wts * yz).sum(axis=0) / wsum
            spread = np.sqrt((wts * (yz - mean) ** 2).sum(axis=0) / wsum)
        med = self.node_median[cols]
        est = np.where(wsum > 0, (1 - self.shrink) * mean + self.shrink * med, med)
        spread = np.where(wsum > 0, spread, np.nan)
        nearest = [{"reference": str(ids[i]), "distance": float(dist[i])}
                   for i in range(min(self.k, len(ids))) if np.isfinite(dist[i])]
        t = query.base_time_s * np.exp(est)
        # the neighbours' spread and the query's distance to the nearest of them, added by intervals' one rule
        near = float(dist[0]) if len(dist) and np.isfinite(dist[0]) else 0.0
        lowest, highest = self.node_lowest[cols], self.node_highest[cols]
        # the distance term at most the node's whole span of log ratios: a phase far from every
        # reference is as uncertain as one that resembles none (the blind case below), never more.
        # References nearly alike in signature but apart in ratio (a busy host's profile: 31 of 32
        # configs unstable) made the slope ~14 per unit, and a phase 1.6 units out got x1e15
        half = intervals.rss(self.z_interval * np.where(np.isfinite(spread), spread, 0.0),
                             np.fmin(intervals.distance_width(self.distance_slope[cols], near), highest - lowest))
        low, high = t * np.exp(-half), t * np.exp(half)
        tied_refs, lo, hi, disagree = self._ties(dist[:rows], sim[:rows], order[:rows], chosen, yz)
        low = np.where(disagree, np.minimum(low, query.base_time_s * np.exp(lo)), low)
        high = np.where(disagree, np.maximum(high, query.base_time_s * np.exp(hi)), high)
        blind = wsum <= 0       # no reference shares a feature with the phase: the node's full spread, not a point
        if blind.any():
            low = np.where(blind, query.base_time_s * np.exp(lowest), low)
            high = np.where(blind, query.base_time_s * np.exp(highest), high)
        blind_warning = [f"phase {query.name}: its signature shares no usable feature with the references (a "
                         "phase shorter than a sampling window, or a host without the same sources): the node's "
                         "median ratio, with the full spread of its references as the interval"]
        # the known nodes' arrays onto the asked ones: a node never measured, or without a finite ratio,
        # has no prediction (NaN)
        if known == nodes:      # every node asked for was measured (the usual case): no lookups
            at = np.arange(len(nodes), dtype=np.int64)
        else:
            index = {n: i for i, n in enumerate(known)}
            at = np.array([index.get(n, -1) for n in nodes], dtype=np.int64)
        ok = at >= 0
        ok[ok] = np.isfinite(est[at[ok]])

        def pick(values: np.ndarray, fill=np.nan) -> np.ndarray:
            out = np.full(len(nodes), fill, dtype=values.dtype)
            out[ok] = values[at[ok]]
            return out

        used = chosen.sum(axis=0)

        def explain(i: int) -> dict:
            if not ok[i]:
                return {}
            j = int(at[i])
            out = {"neighbours": nearest, "used": int(used[j]), "log_ratio": float(est[j])}
            if disagree[j]:
                out["disagree"] = {"references": tied_refs, "ratios": [math.exp(lo[j]), math.exp(hi[j])]}
            return out

        node_warnings = {i: [f"no reference was measured on {nodes[i]}"] if not ok[i] else blind_warning
                         for i in np.flatnonzero(~ok | pick(blind, False)).tolist()}
        return NodePredictions(nodes, pick(t), pick(low), pick(high), explain=explain, warnings=node_warnings,
                               flags={"disagree": pick(disagree, False)})

    def _ties(self, dist: np.ndarray, vote: np.ndarray, rows: np.ndarray, chosen: np.ndarray, y: np.ndarray):
        """The references about as near as the nearest (names): tied with it, or with at least
        NEAR_VOTE of its vote; per node the lowest and highest log ratio of those that voted, and
        whether they disagree (>= 2 of them, ratios > DISAGREE apart)."""
        top, top_vote = (dist[0], vote[0]) if len(dist) else (0.0, 0.0)
        tied_rows = np.isfinite(dist) & ((dist <= top + TIE_DISTANCE) | (vote >= NEAR_VOTE * top_vote))
        tied = chosen & tied_rows[:, None]
        lo = np.where(tied, y, np.inf).min(axis=0, initial=np.inf)
        hi = np.where(tied, y, -np.inf).max(axis=0, initial=-np.inf)
        with np.errstate(invalid="ignore"):
            disagree = (tied.sum(axis=0) >= 2) & (hi - lo > math.log1p(DISAGREE))
        return [str(self.references[i]) for i in rows[tied_rows]], lo, hi, disagree
