"""Scalability on the base node combined with the node-to-node projection.

`nodereg match` projects an application traced on the base node (at the base node's thread
count n_ref) onto another node X: T_X(n_ref). A scaling model fitted on the app's runs on the base
node gives the *shape* of its runtime curve, T_base(n) / T_base(n_ref). Assuming the shape is a
property of the application (its serial fraction, its parallelism A and sigma), not of the node:

    T_X(n) = T_X(n_ref) * T_base(n) / T_base(n_ref)

which predicts X at thread counts the base node does not have (n > base cores): the scaling model
extrapolates, the projection moves the curve to X's speed. Intervals combine in log space (the
two relative half widths in quadrature); the warnings of both models are kept, plus a warning when
n exceeds the CPUs of X. The assumption fails where the node changes the shape (a working set that
fits X's larger caches, memory bandwidth that saturates at a different thread count): the scaling
model's cache warning covers the first when the node's caches are given to it.
"""

from __future__ import annotations

import numpy as np

from registry.errors import UserError
from registry.models.base import NodePrediction, ScalingModel, ScalingPrediction, check_targets


def _log_half(predicted: float, low: float, high: float) -> float:
    if predicted <= 0 or low <= 0 or high <= 0:
        return 0.0
    return max(np.log(predicted / low), np.log(high / predicted), 0.0)


def project_scaling(scaling: ScalingModel, reference_threads: int, node_prediction: NodePrediction, threads,
                    node_cpus: int | None = None) -> list[ScalingPrediction]:
    """Predicted runtimes on node_prediction.node at each thread count (see the module text)."""
    targets = check_targets(threads)
    if reference_threads < 1:
        raise UserError("the reference thread count must be >= 1")
    base = scaling.predict([int(reference_threads), *targets])
    ref = base[0]
    h_proj = _log_half(node_prediction.predicted_s, node_prediction.low_s, node_prediction.high_s)
    out = []
    for p in base[1:]:
        pred = node_prediction.predicted_s * p.predicted_s / ref.predicted_s
        half = float(np.hypot(_log_half(p.predicted_s, p.low_s, p.high_s), h_proj))
        warnings = list(p.warnings) + [w for w in node_prediction.warnings if w not in p.warnings]
        if node_cpus is not None and p.threads > node_cpus:
            warnings.append(f"{p.threads} threads exceed the {node_cpus} CPUs of {node_prediction.node}: "
                            "oversubscribed, the prediction assumes one CPU per thread")
        out.append(ScalingPrediction(p.threads, pred, pred * float(np.exp(-half)), pred * float(np.exp(half)),
                                     warnings))
    return out
