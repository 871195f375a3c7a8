"""Amdahl's law by least squares: T(n) = s + p / n, with s, p >= 0.

The plain baseline every other scaling model is compared with. The fit minimises squared
*relative* errors (each run weighted by 1/t^2), the error measure runtimes are judged by, so
that the long single-thread runs do not dominate. Serial fraction f = s / (s + p).
"""

from __future__ import annotations

import numpy as np

from registry.models.base import (NotFittedError, ScalingContext, ScalingModel, ScalingPrediction, check_targets,
                                   log_interval)
from registry.models.linfit import LinearFit, wls


class AmdahlModel(ScalingModel):
    name = "amdahl"
    description = "Amdahl's law T(n) = s + p/n by relative least squares (the plain baseline)"

    @staticmethod
    def design(threads) -> np.ndarray:
        """The regressors of T(n), one column per coefficient (each constrained to >= 0)."""
        n = np.asarray(threads, dtype=float)
        return np.column_stack([np.ones_like(n), 1.0 / n])

    def __init__(self) -> None:
        self.fit_: LinearFit | None = None
        self.train_threads: list[float] = []
        self.warnings = []

    def fit(self, threads, times, context: ScalingContext | None = None) -> AmdahlModel:
        n, t = self._check_runs(threads, times)
        self.fit_ = wls(self.design(n), t, 1.0 / t**2, nonnegative=True)
        self.train_threads = sorted(set(n.tolist()))
        self.warnings = []
        if self.fit_.dof <= 0:
            self._warn("as many parameters as distinct runs: the interval is not estimated (add a run)")
        return self

    @property
    def serial_s(self) -> float:
        return float(self._fitted().coef[0])

    @property
    def parallel_s(self) -> float:
        return float(self._fitted().coef[1])

    def _fitted(self) -> LinearFit:
        if self.fit_ is None:
            raise NotFittedError(self.name)
        return self.fit_

    def predict(self, threads) -> list[ScalingPrediction]:
        targets = check_targets(threads)
        fit = self._fitted()
        x = self.design(targets)
        pred = fit.predict(x)
        # the fit is in relative units: the half width scales with the prediction
        rel = fit.half_width(x / pred[:, None])
        low, high = log_interval(pred, np.log1p(rel))
        return [ScalingPrediction(n, float(p), float(lo), float(hi), self._target_warnings(n))
                for n, p, lo, hi in zip(targets, pred, low, high)]

    def _target_warnings(self, threads: int) -> list[str]:
        """Warnings about one target (none for Amdahl; the USL subclass flags retrograde scaling)."""
        return []

    def params(self) -> dict:
        return {"fit": self._fitted().to_dict(), "train_threads": self.train_threads, "warnings": self.warnings}

    @classmethod
    def from_params(cls, params: dict) -> AmdahlModel:
        model = cls()
        model.fit_ = LinearFit.from_dict(params["fit"])
        model.train_threads = list(params.get("train_threads", []))
        model.warnings = list(params.get("warnings", []))
        return model

    def describe(self) -> str:
        s, p = self.serial_s, self.parallel_s
        f = s / (s + p) if s + p > 0 else float("nan")
        return (f"Amdahl: T(n) = {s:.4g} s + {p:.4g} s / n (serial fraction {f:.3%}, "
                f"maximum speed-up {1 / f if f > 0 else float('inf'):.3g}x)")

