"""`similar-runs`: an app measured on a few nodes, projected onto every node by the references whose
pattern over those nodes resembles the app's (registry/crossarch; docs/crossarch.md).

The references are things measured on every node: micro-benchmark configs and other applications.
Their features are their log costs on the calibration nodes relative to the base node (``cal.<node>``
columns; any other numeric features serve as the pattern when there are none), ``meta.single`` (1:
runs on one CPU) and ``meta.app`` (1: an application rather than a micro-benchmark). In log space a
reference r projects the app onto node n as ``L[r, n] + b_r(n)``, where the offset b_r(n) is the gap
between the app and r over the calibration nodes, each calibration node's gap weighed by how like node
n it is (the references' relative standing on the two; LOCALITY; with one calibration node, its
gap); the prediction is a weighted mean over references,
weight = prior x exp(-SSE_r / 2s^2), SSE_r the squared mismatch of the centred patterns (Bayesian
averaging over "the app behaves like reference r"). With one calibration node every pattern fits,
and the prior decides: references of the app's thread class (1 CPU or all), applications weighted
``app_weight`` times a micro-benchmark.

The tolerance s and ``app_weight`` are not tuned by hand: each fit chooses them from a small grid by
predicting every reference application from the others (its whole family left out) with the same
calibration nodes, scored by the median absolute error on the other nodes: nested cross-validation
inside the reference data. The same inner cross-validation then decides, coordinate-wise, whether
the prior also weighs each reference by its track record (how well it alone predicts the reference
apps of other families) and how much the other thread class counts (an app named all-CPU may scale
like one-CPU references); each query then takes, of the settings tried, the one that did best on the
reference apps whose pattern resembles its own (docs/crossarch.md). The reference apps that judge are
those of the query's thread class, or, for an app of a known group (Geekbench single-core or
multi-core, compression, Redis and the static web server: known from its name) with another family
of that group among them, that group's alone (`scope`): a Geekbench workload's references are judged
on the other Geekbench workloads, not mostly on compression. The residuals of that choice give the intervals:
normalised split-conformal, calibrated on the reference apps, not on the app predicted. The setting is
chosen on INNER_NODES nodes; its residuals are then taken on every node (`_node_widths`). Each inner
target's absolute log errors are divided by (floor + its misfit: how unlike its references its own
pattern is, `Projection.misfit`), per node the conformal quantile at the nominal coverage
(`column_quantile`), and the query's interval is that
times (floor + the query's misfit): an app no reference fits over the calibration nodes gets a wider
interval than one several fit closely (with one calibration node every misfit is 0). A node where too
few inner targets were measured takes the quantile of the other nodes of its architecture and size
beside the calibration nodes (`_size_bins`), a query of a small group no narrower an interval than its
thread class's (`_half`), and a node that measured only a share s of the weighted references an
interval 1 / sqrt(s) as wide (`Projection.share`).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from registry.errors import UserError
from registry.models.base import (NEEDS_SIGNATURES, NodePrediction, NotFittedError, ProjectionModel, Query,
                                  ReferenceSet)
from registry.models.options import Option

CAL = "cal."
SINGLE = "meta.single"
IS_APP = "meta.app"
OTHER_THREAD_PRIOR = 1e-3      # a reference of the other thread class counts this much (by default)
OTHER_THREAD_PRIORS = (1e-2, 1e-1)   # tried by the inner cross-validation (an app may scale like the other class)
TOLERANCES = (0.02, 0.04, 0.08, 0.16, 0.32)
APP_WEIGHTS = (1.0, 10.0, 100.0)
# of the track-record prior, in log units of mean error (None: no such prior)
SHARPNESS = (0.1, 0.05, 0.02, 0.01, 0.005)
# of the local offset: the node distance (log units) over which a calibration node's gap fades (docs/crossarch.md)
LOCALITY = 0.3
MIN_TRACK_FAMILIES = 3         # app families among the inner targets before a track record is trusted
MIN_GROUP_FAMILIES = 1         # other app families of the query's app group before its own scope serves
NODE_FEATURES = ("n_cpus", "memory_bytes", "aarch64")   # what the models may know of a node besides its references
SIZE_EDGES = (0.5, 2.0)       # log vCPU ratio beyond the calibration nodes' range: the pools' size bins
LOOSE_FIT = 2.0               # a query's misfit over the reference apps' median above which match warns
MIN_MISFIT_FLOOR = 0.01     # log units: the interval's misfit scale never rests on less (one calibration node: 0)
MIN_WEIGHT_SHARE = 0.05       # of the references' weight that must have been measured on a node to predict it
INNER_NODES = 400              # nodes scored by the inner cross-validation (a fixed, spread subset)


class Widths(NamedTuple):
    """An interval's half widths (log units) scaled by the query's misfit (`misfit`): per node,
    `per_node * (floor + misfit)`. Normalised split-conformal: the inner cross-validation's absolute
    errors divided by (floor + each inner target's own misfit) give the per-node quantile, so that an app
    unlike every reference gets a wider interval than one that several references fit closely."""
    per_node: np.ndarray
    floor: float

    def at(self, query_misfit: float) -> np.ndarray:
        return self.per_node * (self.floor + query_misfit)


class Choice(NamedTuple):
    """The prior's hyper-parameters that the inner cross-validation chooses (SimilarRunsModel._choose)."""
    app_weight: float
    sharpness: float | None = None       # of the track-record prior (None: none)
    other: float = OTHER_THREAD_PRIOR    # weight of the references of the other thread class


def pattern_columns(columns: list[str]) -> list[str]:
    """The features that are a reference's pattern over the calibration nodes."""
    cal = [c for c in columns if c.startswith(CAL)]
    return cal or [c for c in columns if not c.startswith("meta.")]


def family_codes(names: list[str]) -> np.ndarray:
    """An integer per reference: references of one app family share it (registry.io.sparecores.apps.app_family)."""
    from registry.io.sparecores.apps import app_family

    seen: dict[str, int] = {}
    return np.array([seen.setdefault(app_family(str(n)), len(seen)) for n in names])


def app_groups(names: list[str]) -> np.ndarray:
    """Each reference's app group (registry.io.sparecores.apps.app_group: 'geekbench-single',
    'compression', ...; '' for a micro-benchmark or an app of no Spare Cores group)."""
    from registry.io.sparecores.apps import app_group

    return np.array([app_group(str(n)) or "" for n in names], dtype=object)


def pattern_weights(F: np.ndarray, q: np.ndarray, prior: np.ndarray, tolerance: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(w, b, sse), each Q x R: the weights of references with patterns F (R x C) for queries q (Q x C
    patterns) under the prior (Q x R, 0 = unused; each row's largest weight is 1), the offsets b (mean
    gap) and the squared misfits of the centred patterns."""
    # the gaps q - F_r without a Q x R x C array (C may be thousands of measured nodes):
    # b = mean gap, SSE = sum of squared gaps - C b^2
    c = F.shape[1]
    b = q.mean(axis=1)[:, None] - F.mean(axis=1)[None, :]
    sq = (q ** 2).sum(axis=1)[:, None] - 2 * q @ F.T + (F ** 2).sum(axis=1)[None, :]
    sse = np.maximum(sq - c * b ** 2, 0.0)
    with np.errstate(divide="ignore"):
        logw = np.log(prior) - sse / (2 * tolerance ** 2)
    logw -= np.nanmax(np.where(np.isfinite(logw), logw, -np.inf), axis=1, keepdims=True)
    return np.where(np.isfinite(logw), np.exp(logw), 0.0), b, sse


class Projection(NamedTuple):
    """What `project` gives for each query: its log predictions on every node, the share of its
    references' weight measured on each node (what a prediction rests on), and its misfit: how unlike
    its references it is, the root mean squared gap of its centred pattern to theirs per degree of
    freedom (C - 1 calibration nodes), averaged under the weights (log units; 0 with one calibration
    node, where every pattern fits)."""
    log: np.ndarray      # Q x N, NaN where not predicted
    share: np.ndarray    # Q x N
    misfit: np.ndarray   # Q


def project(F: np.ndarray, L: np.ndarray, q: np.ndarray, prior: np.ndarray, tolerance: float,
            local: np.ndarray | None = None) -> Projection:
    """Queries q (Q x C patterns) projected onto every node (columns of L) from references with patterns
    F (R x C) and log ratios L (R x N, NaN = unmeasured); prior: Q x R weights (0 = unused). `local`
    (C x N, each column summing to 1; `local_weights`): how much each calibration node's gap between the
    query and a reference counts in the offset on each node; None: the plain mean gap everywhere."""
    w, b, sse = pattern_weights(F, q, prior, tolerance)
    measured = np.isfinite(L).astype(float)       # float: a bool operand makes every product below 2x slower
    Lz = np.where(measured > 0, L, 0.0)
    den = w @ measured
    if local is None:
        num = w @ Lz + (w * b) @ measured
    else:   # sum over references of w b_r(n) on node n, b_r(n) = sum_c local[c, n] (q_c - F_rc)
        num = w @ Lz
        for c in range(F.shape[1]):
            num += local[c][None, :] * (q[:, c][:, None] * den - (w * F[:, c][None, :]) @ measured)
    total = np.maximum(w.sum(axis=1), 1e-300)
    share = den / total[:, None]
    # a node where the references that carry the weight were not measured is not predicted: the mean
    # over the few that were (e.g. all-CPU ones, for a one-CPU app) would be another app's scaling
    with np.errstate(invalid="ignore", divide="ignore"):
        log = np.where((den > 0) & (share >= MIN_WEIGHT_SHARE), num / den, np.nan)
    return Projection(log, share, np.sqrt((w * sse).sum(axis=1) / total / max(F.shape[1] - 1, 1)))


def weighted_projection(F: np.ndarray, L: np.ndarray, q: np.ndarray, prior: np.ndarray, tolerance: float,
                        local: np.ndarray | None = None) -> np.ndarray:
    """`project`'s log predictions alone."""
    return project(F, L, q, prior, tolerance, local).log


def node_distances(F: np.ndarray, L: np.ndarray) -> np.ndarray:
    """C x N: how unlike each calibration node (patterns F, R x C) each node (log ratios L, R x N) is:
    the variance over the references both measured of their log ratio between the two (a node that is
    uniformly faster is not unlike: only the references' relative standing counts)."""
    measured = np.isfinite(L)
    n = np.maximum(measured.sum(axis=0), 1)
    out = np.empty((F.shape[1], L.shape[1]))
    for c in range(F.shape[1]):
        diff = np.where(measured, L - F[:, c][:, None], 0.0)
        mean = diff.sum(axis=0) / n
        out[c] = np.maximum((diff ** 2).sum(axis=0) / n - mean ** 2, 0.0)
    return out


def local_weights(distances: np.ndarray, locality: float) -> np.ndarray:
    """C x N offset weights (`project`'s `local`) from `node_distances`: exp(-d / 2h^2), each node's
    column normalised; the nearest calibration node counts most, and a node far from all of them
    gets about the mean."""
    logit = -(distances - distances.min(axis=0, keepdims=True)) / (2 * locality ** 2)
    weights = np.exp(logit)
    return weights / weights.sum(axis=0, keepdims=True)


def vcpus_beyond(vcpus: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Per node, how far its vCPUs lie beyond the range of the `measured` nodes' (log ratio to the largest
    above it, to the smallest below it, negative; 0 within; NaN where unknown)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        up, down = np.log(vcpus / np.max(measured)), np.log(vcpus / np.min(measured))
    return np.where(up > 0, up, np.where(down < 0, down, np.where(np.isfinite(vcpus), 0.0, np.nan)))


def reliability_factor(E: np.ndarray, sharpness: float) -> np.ndarray:
    """exp(-(E - min E) / sharpness) along the last axis; a reference without a track record gets the
    worst one's factor (1 everywhere where none has one)."""
    ok = np.isfinite(E)
    worst = np.max(np.where(ok, E, -np.inf), axis=-1, keepdims=True)
    E = np.where(ok, E, worst)
    best = np.min(E, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        factor = np.exp(-(E - best) / sharpness)
    return np.where(np.isfinite(factor), factor, 1.0)


def column_quantile(x: np.ndarray, q: float, at_least: int = 1) -> np.ndarray:
    """Each column's split-conformal q-quantile of its n finite values: the ceil(q (n + 1))-th smallest
    (the largest where that is past n); NaN for a column with fewer than `at_least` of them. The plain
    ceil(q n)-th covers a new value with probability ceil(q n) / (n + 1) only: 75% for q = 0.8 and the
    15 Geekbench workloads that judge one (docs/crossarch.md)."""
    n = np.isfinite(x).sum(axis=0)
    ordered = np.sort(np.where(np.isfinite(x), x, np.inf), axis=0)
    k = np.clip(np.minimum(np.ceil(q * (n + 1)).astype(int), n) - 1, 0, max(x.shape[0] - 1, 0))
    out = ordered[k, np.arange(x.shape[1])] if x.shape[0] else np.full(x.shape[1], np.nan)
    return np.where(n >= max(at_least, 1), out, np.nan)


def node_predictions(nodes: list[str], known: list[str], base_s: float, log: np.ndarray, half: np.ndarray,
                     explanation: dict | None = None, warnings: list[str] = ()) -> list[NodePrediction]:
    """One NodePrediction per node asked for (NaN where `known` lacks it or the log ratio is NaN):
    time = base x exp(log), interval x exp(-/+ half); `warnings` on every one."""
    where = {n: i for i, n in enumerate(known)}
    idx = np.array([where.get(n, -1) for n in nodes], dtype=int)
    ok = idx >= 0
    r = np.where(ok, log[np.where(ok, idx, 0)], np.nan)
    h = np.where(ok, half[np.where(ok, idx, 0)], np.nan)
    t = base_s * np.exp(r)
    lo, hi = t * np.exp(-h), t * np.exp(h)
    return [NodePrediction(n, float(a), float(b), float(c), dict(explanation or {}), list(warnings))
            for n, a, b, c in zip(nodes, t.tolist(), lo.tolist(), hi.tolist())]


class SimilarRunsModel(ProjectionModel):
    """Similarity-weighted projection of an app measured on a few nodes (module docstring)."""

    name = "similar-runs"
    description = ("an app measured on 1-3 nodes: references whose pattern over those nodes matches, their "
                   "ratios averaged by similarity (tolerance chosen by inner CV on the reference apps)")
    needs = frozenset({NEEDS_SIGNATURES})
    options = (Option("coverage", float, 0.8, "nominal coverage of the interval", low=0.5, high=0.99),
               Option("tolerance", float, None, "pattern tolerance s in log units (default: chosen by inner "
                                                "cross-validation on the reference apps)", low=0.001),)

    def __init__(self, coverage: float = 0.8, tolerance: float | None = None):
        self.coverage, self.tolerance = float(coverage), tolerance
        self.fitted: dict | None = None

    # -- fit -----------------------------------------------------------------------------------

    def fit(self, refs: ReferenceSet) -> SimilarRunsModel:
        feats, ratio = refs.feature_matrix, refs.ratio_matrix
        cols = pattern_columns(list(feats.columns))
        if not cols:
            raise UserError("similar-runs needs references with a pattern over the calibration nodes")
        at = {c: i for i, c in enumerate(feats.columns)}
        F = feats.values[:, [at[c] for c in cols]]
        keep = np.all(np.isfinite(F), axis=1) & np.isfinite(ratio.values).any(axis=1)
        if keep.sum() < 2:
            raise UserError("similar-runs needs at least 2 references measured on every calibration node")
        meta = {k: (feats.values[keep, at[k]] if k in at else np.zeros(keep.sum())) for k in (SINGLE, IS_APP)}
        self.fitted = {"columns": cols, "nodes": list(ratio.columns),
                       "refs": [feats.rows[i] for i in np.flatnonzero(keep)],
                       "F": F[keep], "L": ratio.values[keep], "single": np.nan_to_num(meta[SINGLE]) > 0.5,
                       "app": np.nan_to_num(meta[IS_APP]) > 0.5}
        nf = refs.node_features
        if nf is not None and set(NODE_FEATURES) <= set(nf.columns):
            nf = nf.reindex(self.fitted["nodes"])
            self.fitted["node_features"] = {c: nf[c].to_numpy(dtype=float) for c in NODE_FEATURES}
        self.fitted["tried"] = {}    # per scope: every (tolerance, Choice, per-app median error) tried
        self.fitted["choice"] = {}   # per scope: (tolerance, Choice, Widths)
        self.fitted["inner"] = {}    # per query thread class: (reference apps, nodes, their inner-CV log predictions)
        return self

    def _groups(self) -> np.ndarray:
        """The references' app groups (app_groups), computed once per fit."""
        f = self.fitted
        if "groups" not in f:
            f["groups"] = app_groups(f["refs"])
        return f["groups"]

    def _families(self) -> np.ndarray:
        """The references' app family codes (family_codes), computed once per fit."""
        f = self.fitted
        if "families" not in f:
            f["families"] = family_codes(f["refs"])
        return f["families"]

    def scope(self, single: bool, group: str | None = None) -> bool | tuple[bool, str]:
        """Whose reference apps judge the references and the settings for a query: its thread class
        (the key is the class, a bool), or, for a query of a known app group (Geekbench single-core,
        compression, Redis and the static web server, ...) with at least MIN_GROUP_FAMILIES other
        families of that group among the reference apps of its class, that group alone: (class, group).
        A group of fewer than MIN_TRACK_FAMILIES families (Redis for the static web server, and the
        reverse) chooses the settings but gives no track record."""
        if group is None:
            return bool(single)
        f = self.fitted
        cache = f.setdefault("scopes", {})
        if (bool(single), group) not in cache:
            mine = f["app"] & (f["single"] == single) & (self._groups() == group)
            enough = len(set(self._families()[mine])) >= MIN_GROUP_FAMILIES
            cache[(bool(single), group)] = (bool(single), group) if enough else bool(single)
        return cache[(bool(single), group)]

    def inner_targets(self, single: bool, group: str | None = None) -> np.ndarray:
        """The references the inner cross-validation predicts for queries of this thread class: its
        applications (its references, or all of them, where fewer than 5); those of the query's app group
        where the scope is the group."""
        f = self.fitted
        key = self.scope(single, group)
        if isinstance(key, tuple):
            return np.flatnonzero(f["app"] & (f["single"] == single) & (self._groups() == key[1]))
        targets = np.flatnonzero(f["app"] & (f["single"] == single))
        if len(targets) < 5:
            targets = np.flatnonzero(f["single"] == single) if (f["single"] == single).sum() >= 5 else \
                np.arange(len(f["refs"]))
        return targets

    def other_nodes(self) -> np.ndarray:
        """Indices of the nodes outside the calibration nodes."""
        f = self.fitted
        if "other_nodes" not in f:
            cal_nodes = {c[len(CAL):] for c in f["columns"]}
            f["other_nodes"] = np.array([i for i, n in enumerate(f["nodes"]) if n not in cal_nodes], dtype=int)
        return f["other_nodes"]

    def scored_nodes(self) -> np.ndarray:
        """Indices of the nodes the inner cross-validation scores: up to INNER_NODES evenly spread ones
        outside the calibration nodes."""
        others = self.other_nodes()
        if len(others) > INNER_NODES:
            others = others[np.linspace(0, len(others) - 1, INNER_NODES).astype(int)]
        return others

    def _prior(self, single: bool, choice: Choice, group: str | None = None) -> np.ndarray:
        """The references' prior weights for a query of this thread class under a grid choice: the app
        weight, the other thread class's weight, and with a sharpness each reference's track record."""
        f = self.fitted
        prior = np.where(f["single"] == single, 1.0, choice.other) * np.where(f["app"], choice.app_weight, 1.0)
        if choice.sharpness:
            prior = prior * reliability_factor(self._track_records(single, group)[0], choice.sharpness)
        return prior

    def _track_records(self, single: bool, group: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(E, E_minus, target families): E[r] is reference r's mean absolute log error as a single ratio
        (offset from the calibration nodes) predicting the reference apps of this thread class on the
        scored nodes, averaged per app family (pairs of one family not scored), then over families, so
        that 68 compression variants count as one family; E_minus[r, g] leaves family g out, for an
        inner target of family g (its own errors must not choose its references)."""
        f = self.fitted
        key = self.scope(single, group)
        cache = f.setdefault("track", {})
        if key in cache:
            return cache[key]
        targets = self.inner_targets(single, group)
        fam = self._families()
        L = f["L"][:, self.scored_nodes()]
        Fm = f["F"].mean(axis=1)
        errs = np.full((len(f["refs"]), len(targets)), np.nan)
        tf = fam[targets]
        groups = np.unique(tf)
        with warnings.catch_warnings():   # a reference measured on none of a target's nodes: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            for j, t in enumerate(targets):
                errs[:, j] = np.nanmean(np.abs(L + (Fm[t] - Fm)[:, None] - L[t][None, :]), axis=1)
            errs[fam[:, None] == tf[None, :]] = np.nan
            per = np.column_stack([np.nanmean(errs[:, tf == g], axis=1) for g in groups])   # R x G
        ok = np.isfinite(per)
        vals = np.where(ok, per, 0.0)
        total, count = vals.sum(axis=1), ok.sum(axis=1)
        E = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        left = count[:, None] - ok
        E_minus = np.where(left > 0, (total[:, None] - vals) / np.maximum(left, 1), np.nan)
        cache[key] = (E, E_minus, groups)
        return cache[key]

    def _choose(self, single: bool, group: str | None = None) -> tuple[float, Choice, Widths]:
        """(tolerance, Choice, the interval's Widths) for queries of this thread class, by
        predicting each reference app of the class from the others (family left out): the tolerance
        and app weight over their grid, then (coordinate-wise, each kept only if it lowers the inner
        error) the track record's sharpness, the other thread class's weight, and the tolerance again."""
        f = self.fitted
        key = self.scope(single, group)
        if key in f["choice"]:
            return f["choice"][key]
        targets = self.inner_targets(single, group)
        others = self.scored_nodes()
        L = f["L"][:, others]
        track = self._inner_track(single, group)

        def inner(tol: float, choice: Choice) -> tuple:
            pred = self._inner_projection(single, group, tol, choice, track, others).log
            err = np.abs(pred - L[targets])
            with warnings.catch_warnings():   # an app measured on none of the scored nodes: NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                tried.append((tol, choice, np.nanmedian(err, axis=1)))
            return (np.nanmedian(err) if np.isfinite(err).any() else np.inf), tol, choice, err, pred

        tried = f["tried"].setdefault(key, [])

        tolerances = (self.tolerance,) if self.tolerance else TOLERANCES
        best = min((inner(t, Choice(a)) for t in tolerances for a in APP_WEIGHTS), key=lambda r: r[0])
        for field, values in (("sharpness", SHARPNESS if track is not None else ()), ("other", OTHER_THREAD_PRIORS)):
            start = best
            for value in values:
                candidate = inner(start[1], start[2]._replace(**{field: value}))
                if candidate[0] < best[0]:
                    best = candidate
        _, tol, weight, err, pred = min([best] + [inner(t, best[2]) for t in tolerances if t != best[1]],
                                        key=lambda r: r[0])
        f["inner"][key] = (targets, others, pred)
        f["choice"][key] = (tol, weight, self._node_widths(single, group, tol, weight))
        return f["choice"][key]

    def _inner_track(self, single: bool, group: str | None) -> np.ndarray | None:
        """Each inner target's track record of every reference, its own family left out (targets x
        references); None where too few families judge the scope."""
        if self._few_families(single, group):
            return None
        _, E_minus, groups = self._track_records(single, group)
        fam = self._families()[self.inner_targets(single, group)]
        return E_minus[:, np.searchsorted(groups, fam)].T

    def _inner_prior(self, single: bool, group: str | None, choice: Choice, track: np.ndarray | None) -> np.ndarray:
        """The prior of each inner target's references (targets x references) under a choice: its own
        family never serves."""
        targets = self.inner_targets(single, group)
        fam = self._families()
        prior = np.tile(self._prior(single, choice._replace(sharpness=None)), (len(targets), 1))
        if choice.sharpness:
            prior = prior * reliability_factor(track, choice.sharpness)
        prior[fam[None, :] == fam[targets][:, None]] = 0.0
        return prior

    def _node_widths(self, single: bool, group: str | None, tol: float, choice: Choice) -> Widths:
        """The interval's Widths of a setting, from the inner cross-validation's errors on every node but
        the calibration nodes, not only the INNER_NODES that chose the setting: a node whose figures
        stray from what its references say (for every app alike, as 10 Hetzner types' decompression
        runs of one day did) gets its own wider quantile rather than its pool's (docs/crossarch.md,
        "Intervals from every node": coverage on the Hetzner types 67.0% -> 74.7%, seeds 5-6)."""
        f = self.fitted
        targets, nodes = self.inner_targets(single, group), self.other_nodes()
        proj = self._inner_projection(single, group, tol, choice, self._inner_track(single, group), nodes)
        return self._widths(np.abs(proj.log - f["L"][targets][:, nodes]), proj.misfit, nodes)

    def _inner_projection(self, single: bool, group: str | None, tol: float, choice: Choice,
                          track: np.ndarray | None, nodes: np.ndarray) -> Projection:
        """The scope's inner targets projected onto `nodes` (indices) under a setting, each with its own
        family left out; where the references that carry a track record's or the other class's weight
        were not measured, the plain prior's prediction (as predict does: each node's projection is its
        own, so only those nodes are projected again)."""
        F, targets = self.fitted["F"], self.inner_targets(single, group)
        L, local = self.fitted["L"][:, nodes], self._local(single, nodes)
        proj = project(F, L, F[targets], self._inner_prior(single, group, choice, track), tol, local)
        missing = np.isnan(proj.log)
        cols = np.flatnonzero(missing.any(axis=0))
        if choice != Choice(choice.app_weight) and len(cols):
            plain = self._inner_prior(single, group, Choice(choice.app_weight), None)
            again = project(F, L[:, cols], F[targets], plain, tol, None if local is None else local[:, cols]).log
            proj.log[:, cols] = np.where(missing[:, cols], again, proj.log[:, cols])
        return proj

    def _local(self, single: bool, nodes: np.ndarray | None = None) -> np.ndarray | None:
        """The local offset's weights (`local_weights`) on `nodes` (indices; all by default) for a query of
        this thread class; None with one calibration node (one gap). The distances between nodes are
        taken over the references of the query's class, once per fit and class: over the one-CPU ones they
        are small (a one-CPU app keeps about the mean gap), over the all-CPU ones they include the nodes'
        sizes (docs/crossarch.md, "The local offset")."""
        f = self.fitted
        if len(f["columns"]) < 2:
            return None
        cache = f.setdefault("local", {})
        if single not in cache:
            rows = f["single"] == single
            cache[single] = local_weights(node_distances(f["F"][rows], f["L"][rows]), LOCALITY)
        return cache[single] if nodes is None else cache[single][:, nodes]

    def _widths(self, err: np.ndarray, misfits: np.ndarray, scored: np.ndarray) -> Widths:
        """The interval from the inner cross-validation's absolute errors (targets x the `scored` nodes) and
        the targets' misfits: each error over (floor + its target's misfit), the floor the targets' median
        misfit; per node the quantile at the nominal coverage where enough apps say so, else the one pooled
        over the scored nodes of its architecture and size beside the calibration nodes (`_size_bins`: an
        all-CPU app errs more the farther its vCPUs are extrapolated), else of its architecture (ARM or
        not: an ARM node predicted from x86 runs errs more than the x86 nodes that dominate the pool), else
        over all of them."""
        floor = max(float(np.median(misfits)) if len(misfits) else 0.0, MIN_MISFIT_FLOOR)
        scores = err / (floor + misfits)[:, None]
        glob = np.nanquantile(scores, self.coverage) if np.isfinite(scores).any() else 0.5 / floor
        per_node = np.full(len(self.fitted["nodes"]), glob)
        # nodes without their own: the quantile pooled over the scored nodes of their architecture, then of
        # their architecture and size beside the calibration nodes' where that pool has enough (the finer wins)
        arch = self._architectures()
        for pool in (arch, arch * 100 + self._size_bins()):
            for key in np.unique(pool[scored]):
                mine = scores[:, pool[scored] == key]
                if np.isfinite(mine).sum() >= 10:
                    per_node[pool == key] = np.nanquantile(mine, self.coverage)
        per = column_quantile(scores, self.coverage, at_least=10)
        per_node[scored] = np.where(np.isfinite(per), per, per_node[scored])
        return Widths(per_node, floor)

    def _half(self, single: bool, group: str | None, widths: Widths, unlike: float) -> np.ndarray:
        """A query's interval half widths per node: its scope's at its misfit, and for a small group (fewer
        than MIN_TRACK_FAMILIES families judge it: Redis for the static web server, and the reverse) no
        narrower than its thread class's. One other family's residuals say little of how far the query's
        own family strays: the static web server's intervals, judged on Redis alone, held 59% of its
        outcomes (docs/crossarch.md)."""
        half = widths.at(unlike)
        if isinstance(self.scope(single, group), tuple) and self._few_families(single, group):
            half = np.maximum(half, self._choose(single)[2].at(unlike))
        return half

    def _few_families(self, single: bool, group: str | None = None) -> bool:
        """Whether fewer than MIN_TRACK_FAMILIES app families judge queries of this scope (too few for a
        track record, or to calibrate an interval on alone)."""
        return len(set(self._families()[self.inner_targets(single, group)])) < MIN_TRACK_FAMILIES

    def _size_bins(self) -> np.ndarray:
        """Per node, how far its vCPUs lie outside the calibration nodes' range, in bins of the log ratio
        (0 inside; 1, 2, 3 above by up to 1.65x, 7.4x, more; -1, -2, -3 below alike): an all-CPU app errs
        more the farther it is extrapolated. All 0 where the vCPUs are unknown."""
        f = self.fitted
        nf = f.get("node_features")
        if nf is None:
            return np.zeros(len(f["nodes"]), dtype=int)
        vcpus = np.asarray(nf["n_cpus"], dtype=float)
        where = {n: i for i, n in enumerate(f["nodes"])}
        cal = vcpus[[where[c[len(CAL):]] for c in f["columns"] if c[len(CAL):] in where]]
        if not len(cal) or not np.isfinite(cal).all():
            return np.zeros(len(f["nodes"]), dtype=int)
        beyond = np.nan_to_num(vcpus_beyond(vcpus, cal))
        return np.sign(beyond).astype(int) * np.where(beyond != 0, np.digitize(np.abs(beyond), SIZE_EDGES) + 1, 0)

    def _architectures(self) -> np.ndarray:
        """Per node, 1 for an ARM node, 0 for any other (all 0 where the reference set said nothing)."""
        nf = self.fitted.get("node_features")
        if nf is None:
            return np.zeros(len(self.fitted["nodes"]))
        return np.nan_to_num(np.asarray(nf["aarch64"], dtype=float))

    def _local_choice(self, single: bool, q: np.ndarray, group: str | None = None
                      ) -> tuple[float, Choice, Widths]:
        """The hyper-parameters for one query: of every setting the inner cross-validation tried, the one
        with the lowest error on the reference apps whose pattern resembles the query's (weight
        exp(-SSE / 2s^2), s the class's chosen tolerance, each app family counted once). With one
        calibration node every pattern is alike: the class's choice."""
        f = self.fitted
        tol, choice, widths = self._choose(single, group)
        if len(q) < 2 or self.tolerance:
            return tol, choice, widths
        targets = self.inner_targets(single, group)
        fam = self._families()[targets]
        patterns = f["F"][targets]
        gaps = q[None, :] - patterns
        sse = ((gaps - gaps.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        v = np.exp(-(sse - sse.min()) / (2 * tol ** 2)) / np.bincount(fam)[fam]
        scores = []
        for _, _, per_app in f["tried"][self.scope(single, group)]:
            ok = np.isfinite(per_app)
            scores.append((v[ok] * per_app[ok]).sum() / max(v[ok].sum(), 1e-300) if ok.any() else np.inf)
        local_tol, local = f["tried"][self.scope(single, group)][int(np.argmin(scores))][:2]
        if (local_tol, local) == (tol, choice):
            return tol, choice, widths
        return local_tol, local, self._node_widths(single, group, local_tol, local)

    # -- predict -------------------------------------------------------------------------------

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.fitted is None:
            raise NotFittedError(self.name)
        f = self.fitted
        sig = dict(query.signature.items()) if hasattr(query.signature, "items") else dict(query.signature)
        missing = [c for c in f["columns"] if c not in sig]
        if missing:
            raise UserError(f"similar-runs: the query has no value for {', '.join(missing[:3])}")
        q = np.array([float(sig[c]) for c in f["columns"]])
        single = float(sig.get(SINGLE, 0.0)) > 0.5
        group = app_groups([query.name])[0] or None
        tol, weight, widths = self._local_choice(single, q, group)
        prior = self._prior(single, weight, group)[None, :]
        local = self._local(single)
        proj = project(f["F"], f["L"], q[None, :], prior, tol, local)
        log, share, unlike = proj.log[0], proj.share[0], float(proj.misfit[0])
        if weight != Choice(weight.app_weight) and np.isnan(log).any():
            # a track record or the other class's weight can put the weight on a few references; a node
            # where those were not measured gets the plain prior's prediction, not none
            plain = project(f["F"], f["L"], q[None, :], self._prior(single, Choice(weight.app_weight))[None, :], tol,
                            local)
            fallback = np.isnan(log)
            log = np.where(fallback, plain.log[0], log)
            share = np.where(fallback, plain.share[0], share)
        # a node that measured only part of the weighted references rests on fewer of them: the spread of a
        # mean over a share s of them grows as 1 / sqrt(s) (docs/crossarch.md: where s <= 0.25, 37% of the
        # outcomes fell inside the interval before, 66% after)
        half = self._half(single, group, widths, unlike) / np.sqrt(np.clip(share, MIN_WEIGHT_SHARE, 1.0))
        loose = []
        if group is not None and not isinstance(self.scope(single, group), tuple):
            # a kind no other family judges (llama.cpp's: 55-60% inside the 80% intervals, docs/crossarch.md)
            loose.append(f"no other app family of its group ({group}) among the references: references and "
                         f"intervals are judged on every {'one-CPU' if single else 'all-CPU'} app instead, "
                         "and an app unlike all of them errs more than the intervals say")
        if unlike > LOOSE_FIT * widths.floor:
            loose.append(f"its runs fit no reference closely (misfit {unlike:.2f} log units, "
                         f"{unlike / widths.floor:.1f}x the reference apps' median): intervals widened")
        return node_predictions(nodes, f["nodes"], query.base_time_s, log, half,
                                {"tolerance": tol, **weight._asdict(), "misfit": unlike,
                                 "typical_misfit": widths.floor}, loose)

    # -- storage -------------------------------------------------------------------------------

    def params(self) -> dict:
        if self.fitted is None:
            raise NotFittedError(self.name)
        f = self.fitted
        return {"coverage": self.coverage, "tolerance": self.tolerance, "columns": f["columns"], "nodes": f["nodes"],
                "refs": [str(r) for r in f["refs"]], "F": f["F"].tolist(),
                "L": [[None if not np.isfinite(v) else float(v) for v in row] for row in f["L"]],
                "single": f["single"].tolist(), "app": f["app"].tolist()} | self._node_feature_params()

    def _node_feature_params(self) -> dict:
        nf = self.fitted.get("node_features")
        if nf is None:
            return {}
        return {"node_features": {c: [None if not np.isfinite(v) else float(v) for v in col] for c, col in nf.items()}}

    @classmethod
    def from_params(cls, params: dict) -> SimilarRunsModel:
        model = cls(params.get("coverage", 0.8), params.get("tolerance"))
        if "F" in params:
            model.fitted = {"columns": list(params["columns"]), "nodes": list(params["nodes"]),
                            "refs": list(params["refs"]), "F": np.array(params["F"], dtype=float),
                            "L": np.array([[np.nan if v is None else v for v in row] for row in params["L"]],
                                          dtype=float),
                            "single": np.array(params["single"], dtype=bool),
                            "app": np.array(params["app"], dtype=bool), "choice": {}, "inner": {}, "tried": {}}
            if params.get("node_features") is not None:
                model.fitted["node_features"] = {c: np.array([np.nan if v is None else v for v in col], dtype=float)
                                                 for c, col in params["node_features"].items()}
        return model
