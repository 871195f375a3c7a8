"""Weighted linear least squares with prediction intervals, shared by the linear models.

The log-log (Barnes), Amdahl and MOB leaf models are all linear in their parameters; this is the one
place that solves them and turns the residual spread into prediction intervals (Student t, with
the leverage of the target point, so that extrapolating far from the runs widens the interval).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats


@dataclass
class LinearFit:
    coef: np.ndarray
    xtwx_inv: np.ndarray      # (X' W X)^-1 (unscaled covariance of coef)
    sse: float                # weighted sum of squared residuals
    dof: int                  # residual degrees of freedom
    weight_sum: float

    @property
    def sigma(self) -> float:
        """Residual standard error sqrt(SSE / dof) (R's 'Residual standard error'); NaN without dof."""
        return float(np.sqrt(self.sse / self.dof)) if self.dof > 0 else float("nan")

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.atleast_2d(x) @ self.coef

    def half_width(self, x: np.ndarray, level: float = 0.95) -> np.ndarray:
        """Half width of the prediction interval for a new observation at each row of `x` (0 without dof)."""
        x = np.atleast_2d(x)
        if self.dof <= 0:
            return np.zeros(len(x))
        leverage = np.einsum("ij,jk,ik->i", x, self.xtwx_inv, x)
        return stats.t.ppf(0.5 + level / 2, self.dof) * self.sigma * np.sqrt(1.0 + np.maximum(leverage, 0.0))

    def to_dict(self) -> dict:
        return {"coef": self.coef.tolist(), "xtwx_inv": self.xtwx_inv.tolist(), "sse": self.sse,
                "dof": self.dof, "weight_sum": self.weight_sum}

    @classmethod
    def from_dict(cls, data: dict) -> LinearFit:
        return cls(np.asarray(data["coef"], dtype=float), np.asarray(data["xtwx_inv"], dtype=float),
                   float(data["sse"]), int(data["dof"]), float(data["weight_sum"]))


def wls(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, *, nonnegative: bool = False) -> LinearFit:
    """Weighted least squares of y on the columns of x (no implicit intercept).

    With `nonnegative`, coefficients are constrained to >= 0 (NNLS); the covariance then refers to
    the coefficients left free.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    sw = np.sqrt(w)
    xw, yw = x * sw[:, None], y * sw
    if nonnegative:
        coef, _ = optimize.nnls(xw, yw)
    else:
        coef, *_ = np.linalg.lstsq(xw, yw, rcond=None)
    free = np.ones(x.shape[1], dtype=bool) if not nonnegative else coef > 0
    inv = np.zeros((x.shape[1], x.shape[1]))
    if free.any():
        inv[np.ix_(free, free)] = np.linalg.pinv(xw[:, free].T @ xw[:, free])
    resid = yw - xw @ coef
    rank = int(np.linalg.matrix_rank(xw[:, free])) if free.any() else 0
    return LinearFit(coef, inv, float(resid @ resid), len(y) - rank, float(w.sum()))
