"""Barnes's reliability check: predict *within* the training runs before predicting beyond them.

Fit on the thread counts <= p0/2 (p0: the largest training count) and predict the training
counts above p0/2. A large error there says the runs do not follow one curve (a memory-hierarchy
step, an algorithmic change), so the prediction beyond p0 is unlikely to be better. A small
error is no guarantee: a change that starts beyond p0 is invisible to every check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from registry.errors import UserError
from registry.models.base import ScalingModel, median_by_threads


@dataclass
class Backtest:
    inner_max: int
    targets: list[int]
    median_error: float
    max_error: float
    log_miss: float   # the median of ln(measured / predicted): > 0 where the curve predicts too short a time

    def warning(self, threshold: float = 0.10) -> str | None:
        if self.median_error <= threshold:
            return None
        return (f"within the training runs, a fit on <= {self.inner_max} threads predicts "
                f"{', '.join(map(str, self.targets))} threads with {self.median_error:.0%} median error: "
                "expect errors of that order beyond the training range")


def backtest(make_model: Callable[[], ScalingModel], threads, times) -> Backtest | None:
    """The within-training check, or None when the runs are too few to split."""
    n = np.asarray(threads, dtype=float)
    t = np.asarray(times, dtype=float)
    p0 = n.max()
    inner = n <= p0 / 2
    model = make_model()
    if np.unique(n[inner]).size < model.min_thread_counts or not (~inner).any():
        return None
    try:
        model.fit(n[inner], t[inner])
    except UserError:
        return None
    targets, measured = median_by_threads(n[~inner], t[~inner])
    preds = model.predict([int(x) for x in targets])
    predicted = np.array([p.predicted_s for p in preds])
    errors = np.abs(predicted - measured) / measured
    return Backtest(int(n[inner].max()), [int(x) for x in targets], float(np.median(errors)), float(errors.max()),
                    float(np.median(np.log(measured / predicted))))
