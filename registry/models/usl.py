"""Gunther's Universal Scalability Law by least squares: Amdahl plus a contention (coherency) term.

    T(n) = T1 (1 + sigma (n - 1) + kappa n (n - 1)) / n  =  s + p / n + c (n - 1)

with s = T1 sigma, p = T1 (1 - sigma), c = T1 kappa, all >= 0. The second form is linear in
(s, p, c), so the fit is Amdahl's relative least squares (weights 1/t^2, non-negative
coefficients) with one more column. kappa > 0 is what Amdahl cannot express: a cost that grows
with the thread count (memory-bandwidth saturation, lock and cache-line contention), which makes
the runtime bottom out at n* = sqrt(p / c) = sqrt((1 - sigma) / kappa) threads and rise after it
(retrograde scaling). With kappa = 0 the fit is Amdahl's.

Why it is here: Amdahl's curve only flattens, and the real series (docs/models.md) show runtimes
that stop improving or get worse as threads share a memory controller or a socket. The contention
term is only as good as the training runs' evidence for it; a prediction beyond n* is flagged.
"""

from __future__ import annotations

import numpy as np

from registry.models.amdahl import AmdahlModel


class UslModel(AmdahlModel):
    name = "usl"
    description = "Gunther's Universal Scalability Law T(n) = s + p/n + c(n-1) by relative least squares"
    min_thread_counts = 3

    @staticmethod
    def design(threads) -> np.ndarray:
        n = np.asarray(threads, dtype=float)
        return np.column_stack([np.ones_like(n), 1.0 / n, n - 1.0])

    @property
    def contention_s(self) -> float:
        """c = T1 kappa: seconds added per extra thread."""
        return float(self._fitted().coef[2])

    @property
    def t1_s(self) -> float:
        return self.serial_s + self.parallel_s

    @property
    def sigma(self) -> float:
        return self.serial_s / self.t1_s if self.t1_s > 0 else float("nan")

    @property
    def kappa(self) -> float:
        return self.contention_s / self.t1_s if self.t1_s > 0 else float("nan")

    @property
    def peak_threads(self) -> float:
        """The thread count of the shortest runtime, sqrt(p / c) (infinite without contention)."""
        c = self.contention_s
        # below round-off of the fit (NNLS leaves ~1e-16 where the true term is 0) there is no optimum
        return float(np.sqrt(self.parallel_s / c)) if c > 1e-12 * self.t1_s else float("inf")

    def _target_warnings(self, threads: int) -> list[str]:
        peak = self.peak_threads
        if threads <= peak:
            return []
        return [f"beyond the fitted optimum of {peak:.3g} threads: the contention term (kappa = {self.kappa:.3g}) "
                "predicts a runtime that grows with the thread count"]

    def describe(self) -> str:
        peak = self.peak_threads
        where = "never (no contention)" if not np.isfinite(peak) else f"at {peak:.3g} threads"
        return (f"USL: T(n) = {self.serial_s:.4g} s + {self.parallel_s:.4g} s / n + {self.contention_s:.4g} s (n - 1) "
                f"(sigma = {self.sigma:.3%}, kappa = {self.kappa:.3g}; shortest runtime {where})")
