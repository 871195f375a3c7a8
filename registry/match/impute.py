"""A reference's missing figures on a node, filled in from that node's other measurements.

Why: an imported suite is not measured alike on every node type. Of Spare Cores' 2,723 server
types, 1,523 did not run the 85-stressor task and 1,500-2,200 have no membench figure at a given
size; they have the older tasks (PassMark, bw_mem, openssl, stress-ng's div16 curve). A phase
matched to `stressng:qsort` on the base node was projected on those types from whatever few
configs they had, another reference set than the one that projected the same-CPU type: the
ratio between two node types then mixed two kinds of work (a median bias of +16% to +114%,
docs/sparecores-trace.md). On the types that did run both, the missing stressors follow from the
older tasks closely: a ridge regression of the log throughput of `stressng:qsort` (one thread)
on a node's PassMark, bw_mem, openssl and div16 figures misses by a median 2.4% on types it was
not fitted on (`match` prints each phase's range of these errors; docs/sparecores-trace.md has
them per reference).

The rule: the predictors are the node x config figures, at one thread and at all of the node's
CPUs, that nearly every node measured (`PREDICTOR_SHARE`); each reference is regressed on them
(log throughput, standardised; a ridge regression, its penalty chosen per reference by
leave-one-out) over the nodes that measured it, and filled in on the nodes that did not and that
measured most of the predictors (`MIN_PRESENT`). Nothing is filled where fewer than `MIN_TRAIN`
nodes measured a reference (a small registry of our own kernels: nothing to learn from), and
nothing is stored: the registry keeps measurements only, and `match` says on which nodes figures
were filled in and how far off that rule was on the nodes left out of its fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PREDICTOR_SHARE = 0.95   # a predictor: a node x config figure measured on at least this share of the nodes
MIN_PRESENT = 0.8        # a node is filled in when it measured at least this share of the predictors
MIN_TRAIN = 50           # nodes that measured a reference, to fit its regression on
MAX_PREDICTORS = 200     # columns a regression reads at most
MAX_FITS = 16            # sets of nodes (one per task that measured references together) fitted at most
MAX_ROWS = 2000          # nodes a regression is fitted on at most (evenly spaced among those that measured it)
_ALPHAS = np.logspace(-2, 4, 13)


@dataclass
class Filled:
    """The log figures with the missing ones filled in where the rule allows, and what was filled."""

    values: np.ndarray      # nodes x references, log throughput
    imputed: np.ndarray     # nodes x references: filled in here
    error: np.ndarray       # per reference: the median |log error| of its regression left out (NaN: none)

    @classmethod
    def nothing(cls, values: np.ndarray) -> Filled:
        """`values` as they were: nothing filled."""
        return cls(values, np.zeros(values.shape, dtype=bool), np.full(values.shape[1], np.nan))


def candidates(missing: np.ndarray) -> np.ndarray:
    """Per reference (columns of `missing`, nodes x references): missing somewhere and measured on
    enough nodes to learn it from. Where none is, nothing is filled, and the caller need not gather
    predictors."""
    return missing.any(axis=0) & ((~missing).sum(axis=0) >= MIN_TRAIN)


def fill(values: np.ndarray, predictors: np.ndarray, own: np.ndarray) -> Filled:
    """`values` (nodes x references, log throughput, NaN = not measured) completed from
    `predictors` (nodes x columns, log throughput of every config the nodes measured); `own`
    (references x columns): the predictor columns that are the reference itself (at any thread
    count). A reference that is itself a predictor is not filled: it was measured nearly
    everywhere, and where it was not, the rule would read its own gap."""
    missing = np.isnan(values)
    out = Filled.nothing(values)
    present = np.isfinite(predictors)
    share = present.mean(axis=0)
    cols = share >= PREDICTOR_SHARE
    # (checked before anything costly: a registry where every node measured every reference, or
    # only references that are themselves predictors, pays for two counts)
    fillable = candidates(missing) & ~own[:, cols].any(axis=1)
    if not cols.any() or not fillable.any():
        return out
    if cols.sum() > MAX_PREDICTORS:         # the most often measured (a sweep of our kernels has thousands)
        cols[np.argsort(-np.where(cols, share, -1.0), kind="stable")[MAX_PREDICTORS:]] = False
    x, present = predictors[:, cols], present[:, cols]
    usable = present.mean(axis=1) >= MIN_PRESENT
    centre = np.nanmedian(np.where(usable[:, None], x, np.nan), axis=0)
    spread = np.nanstd(np.where(usable[:, None], x, np.nan), axis=0)
    spread[~(spread > 0)] = 1.0
    z = np.where(present, (x - centre) / spread, 0.0)
    wanted = missing & usable[:, None]
    train = ~missing & usable[:, None]
    # references measured on the same nodes share one fit (a suite's task measured them together):
    # one decomposition for all of them, a penalty per reference
    groups: dict[bytes, list[int]] = {}
    for j in np.flatnonzero(fillable & wanted.any(axis=0) & (train.sum(axis=0) >= MIN_TRAIN)):
        groups.setdefault(np.packbits(train[:, j]).tobytes(), []).append(int(j))
    if not groups:
        return out
    filled = values.copy()
    # the largest sets first, at most MAX_FITS of them: an imported suite's tasks make a few
    # (Spare Cores: 6 at one thread, 9 at all CPUs); references missing each on its own nodes
    # (scattered failures) would make one fit each, and are left as they were (projected from what
    # those nodes measured)
    for refs in sorted(groups.values(), key=len, reverse=True)[:MAX_FITS]:
        rows = np.flatnonzero(train[:, refs[0]])
        rows = rows[np.linspace(0, len(rows) - 1, min(len(rows), MAX_ROWS)).astype(int)]
        coef, intercept, error = _ridge_loo(z[rows], values[np.ix_(rows, refs)])
        out.error[refs] = error
        guess = z @ coef + intercept
        for i, j in enumerate(refs):
            filled[wanted[:, j], j] = guess[wanted[:, j], i]
    out.values = filled
    out.imputed = wanted & np.isfinite(filled)
    return out


def _ridge_loo(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ridge regressions of each column of `y` on `x`, each with the penalty of `_ALPHAS` whose
    leave-one-out error is lowest (the closed form through one decomposition, as scikit-learn's
    RidgeCV computes it; importing sklearn.linear_model takes 1.2 s here, more than a whole `match`).

    Returns the coefficients (columns of x x columns of y), the intercepts, and per column of y
    the median absolute leave-one-out error at its penalty."""
    mx, my = x.mean(axis=0), y.mean(axis=0)
    xc = x - mx
    # the SVD through the eigenvectors of the small Gram matrix (columns x columns): 4x faster than
    # LAPACK's SVD of the tall matrix here, and the penalties keep its squared condition harmless
    s2, v = np.linalg.eigh(xc.T @ xc)
    keep = s2 > 1e-9 * max(float(s2.max(initial=0.0)), 1e-300)
    s2, v = s2[keep], v[:, keep]
    u = (xc @ v) / np.sqrt(s2)
    uty = u.T @ (y - my)                                       # k x targets
    shrink = s2[None, :] / (s2[None, :] + _ALPHAS[:, None])    # alphas x k
    fitted = np.einsum("ik,ak,kt->ait", u, shrink, uty)        # alphas x rows x targets
    leverage = (u ** 2) @ shrink.T + 1.0 / len(x)              # rows x alphas (the intercept's share too)
    loo = np.abs((y - my)[None] - fitted) / (1.0 - leverage.T)[:, :, None]
    best = np.argmin((loo ** 2).mean(axis=1), axis=0)          # per target
    coef = v @ ((np.sqrt(s2) / (s2 + _ALPHAS[best][:, None])).T * uty)
    return coef, my - mx @ coef, np.median(loo[best, :, np.arange(y.shape[1])], axis=1)
