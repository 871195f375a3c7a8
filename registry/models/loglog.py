"""Barnes et al. 2008: regression-based scalability prediction in log2 space.

    log2 T = sum_i b_i log2 x_i + g(q) + e,   g(q) = c0 + c1 log2 q  (L)  or  + c2 (log2 q)^2  (Q)

fitted by least squares in log2 space (relative errors: RE = 2^|e| - 1), predicted as T = 2^yhat.

* **TOT** regresses the total time; L or Q is chosen by the lower log-RMSE (the residual standard
  error, as R reports it: the quadratic term must pay for its parameter).
* **SEP** regresses computation and communication separately and adds the back-transformed
  predictions. Two ways to split a run (``ScalingContext.comm_s``: 'MAX' = the slowest rank's
  computation and that rank's communication, 'CP' = along the critical path) x L/Q for each part
  = up to 8 candidates, chosen by the RMSEs weighted by each part's share of the time at p0 (the
  largest training count). SEP is used when the program is not computation-bound (< 90 %
  computation, on average, at some training count) or its communication grows with q.

Failure modes the paper names are reported as warnings: a working set that crosses a cache
capacity between the training range and the target (or inside the training range, which makes
the regression over-compensate, as for CG), and superlinear speed-up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from registry.errors import UserError
from registry.models.base import (CacheLevel, NotFittedError, ScalingContext, ScalingModel, ScalingPrediction,
                                  check_targets, superlinear_pairs)
from registry.models.options import Option
from registry.models.linfit import LinearFit, wls
from registry.values import listed

FORMS = ("L", "Q")
COMPUTE_BOUND_SHARE = 0.90
LN2 = float(np.log(2.0))


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.3g} MiB"


def design(q, inputs: dict[str, np.ndarray], names: list[str], form: str) -> np.ndarray:
    """Columns: 1, log2 x_i (in `names` order), log2 q and, for Q, (log2 q)^2."""
    lq = np.log2(np.asarray(q, dtype=float))
    cols = [np.ones_like(lq)] + [np.log2(np.asarray(inputs[k], dtype=float)) * np.ones_like(lq) for k in names] + [lq]
    if form == "Q":
        cols.append(lq**2)
    return np.column_stack(cols)


@dataclass
class LogLogFit:
    """One log2-space regression (the total time, or one part of a SEP split)."""

    form: str
    inputs: list[str]
    fit: LinearFit

    @property
    def rmse(self) -> float:
        return self.fit.sigma

    @property
    def coefficients(self) -> dict[str, float]:
        names = ["c0"] + [f"b[{k}]" for k in self.inputs] + ["c1"] + (["c2"] if self.form == "Q" else [])
        return dict(zip(names, self.fit.coef.tolist()))

    def log2_predict(self, q, inputs) -> tuple[np.ndarray, np.ndarray]:
        x = design(q, inputs, self.inputs, self.form)
        return self.fit.predict(x), self.fit.half_width(x)

    def slope(self, q) -> np.ndarray:
        """d log2 T / d log2 q: -1 is ideal speed-up, below -1 superlinear."""
        c = self.coefficients
        lq = np.log2(np.asarray(q, dtype=float))
        return c["c1"] + (2 * c["c2"] * lq if self.form == "Q" else 0.0)

    def to_dict(self) -> dict:
        return {"form": self.form, "inputs": self.inputs, "fit": self.fit.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> LogLogFit:
        return cls(data["form"], list(data["inputs"]), LinearFit.from_dict(data["fit"]))


def fit_forms(q: np.ndarray, t: np.ndarray, inputs: dict[str, np.ndarray]) -> dict[str, LogLogFit]:
    """The L and Q fits that the data can support (Q needs >= 3 distinct q and a residual dof)."""
    names = sorted(inputs)
    out = {}
    for form in FORMS:
        x = design(q, inputs, names, form)
        if form == "Q" and np.unique(q).size < 3:
            continue
        fit = wls(x, np.log2(t))
        if form == "Q" and fit.dof <= 0:
            continue
        out[form] = LogLogFit(form, names, fit)
    return out


def best_form(fits: dict[str, LogLogFit]) -> LogLogFit:
    """Lowest log-RMSE; an exact fit (no residual dof) has no RMSE and wins only when alone."""
    scored = [(f.rmse if np.isfinite(f.rmse) else np.inf, FORMS.index(k), f) for k, f in fits.items()]
    return min(scored, key=lambda s: (s[0], s[1]))[2]


def _rmse_or_zero(fit: LogLogFit) -> float:
    return fit.rmse if np.isfinite(fit.rmse) else 0.0


class LogLogModel(ScalingModel):
    name = "loglog"
    description = "Barnes 2008 log2-space regression (L/Q in log2 threads; TOT, or SEP with a comm split)"

    options = (Option("form", str, "auto", "L (linear in log2 q), Q (quadratic), or auto (the better by "
                                          "cross-validation)", choices=("auto", *FORMS)),)

    def __init__(self, form: str = "auto") -> None:
        if form not in ("auto", *FORMS):
            raise UserError(f"loglog form must be auto, L or Q, not {form!r}")
        self.form = form
        self.technique = "TOT"
        self.tot: LogLogFit | None = None
        self.sep: dict | None = None           # {"method", "comp": LogLogFit, "comm": LogLogFit}
        self.candidates: list[dict] = []
        self.inputs: list[str] = []
        self.train_threads: list[float] = []
        self.working_set_bytes: float | None = None
        self.caches: list[CacheLevel] = []
        self.warnings = []

    # -- fitting -------------------------------------------------------------------------------
    def fit(self, threads, times, context: ScalingContext | None = None) -> LogLogModel:
        ctx = context or ScalingContext()
        q, t = self._check_runs(threads, times)
        inputs = {k: np.asarray(v, dtype=float) for k, v in ctx.inputs.items()}
        for k, v in inputs.items():
            if v.shape != q.shape or not np.all(v > 0):
                raise UserError(f"input variable {k!r} needs one positive value per run")
        self.inputs = sorted(inputs)
        self.train_threads = sorted(set(q.tolist()))
        self.working_set_bytes = ctx.working_set_bytes
        self.caches = list(ctx.caches)
        self.warnings = []
        self.candidates = []

        tot_fits = self._forms(q, t, inputs)
        for k, f in tot_fits.items():
            self.candidates.append({"name": f"TOT/{k}", "rmse": f.rmse})
        self.tot = best_form(tot_fits)
        self.technique, self.sep = "TOT", None
        if ctx.comm_s:
            self._fit_sep(q, t, inputs, ctx.comm_s)
        if all(not np.isfinite(c["rmse"]) for c in self.candidates):
            self._warn("as many parameters as distinct runs: no log-RMSE and no interval (add runs)")
        self._training_warnings(q, t)
        return self

    def _forms(self, q, t, inputs) -> dict[str, LogLogFit]:
        fits = fit_forms(q, t, inputs)
        if self.form != "auto":
            if self.form not in fits:
                raise UserError(f"the {self.form} log-log form needs more runs (>= 3 thread counts, 1 spare)")
            fits = {self.form: fits[self.form]}
        return fits

    def _fit_sep(self, q, t, inputs, comm_s: dict[str, np.ndarray]) -> None:
        p0 = q == q.max()
        best = None
        separate = False        # not computation-bound at some training count, or communication growing
        for method in sorted(comm_s):
            comm = np.asarray(comm_s[method], dtype=float)
            comp = t - comm
            if comm.shape != t.shape or not (np.all(comm > 0) and np.all(comp > 0)):
                self._warn(f"SEP/{method}: communication must be > 0 and < the run time for every run; not used")
                continue
            share = (comp / t)
            by_q = {n: share[q == n].mean() for n in np.unique(q)}
            comm_fit_l = fit_forms(q, comm, inputs)["L"]
            separate |= min(by_q.values()) < COMPUTE_BOUND_SHARE or comm_fit_l.coefficients["c1"] > 0
            comp_fits, comm_fits = self._forms(q, comp, inputs), self._forms(q, comm, inputs)
            w_comp = float(share[p0].mean())
            for fc, cf in comp_fits.items():
                for fm, mf in comm_fits.items():
                    rmse = w_comp * _rmse_or_zero(cf) + (1 - w_comp) * _rmse_or_zero(mf)
                    if not (np.isfinite(cf.rmse) or np.isfinite(mf.rmse)):
                        rmse = np.inf
                    name = f"SEP/{fc}/{fm}/{method}"
                    self.candidates.append({"name": name, "rmse": rmse})
                    if best is None or rmse < best[0]:
                        best = (rmse, {"method": method, "comp": cf, "comm": mf, "comp_share_p0": w_comp})
        if best is None:
            return
        if separate:
            self.technique, self.sep = "SEP", best[1]
        else:
            self._warn("computation-bound (>= 90% computation at every training count) and communication not "
                       "growing: SEP not needed, TOT used")

    def _training_warnings(self, q, t) -> None:
        for lo, hi, s in superlinear_pairs(q, t):
            self._warn(f"superlinear speed-up measured from {lo} to {hi} threads ({s:.2f}x > {hi / lo:.2g}x ideal): "
                       "often a working set dropping into a cache; extrapolation assumes the trend continues")
        ws = self.working_set_bytes
        if ws and self.caches and len(self.train_threads) > 1:
            lo, hi = self.train_threads[0], self.train_threads[-1]
            for c in self.caches:
                if (ws <= c.capacity(lo)) != (ws <= c.capacity(hi)):
                    self._warn(f"working set {_mib(ws)} crosses the L{c.level} capacity inside the training range "
                               f"({_mib(c.capacity(lo))} at {lo:g} threads, {_mib(c.capacity(hi))} at {hi:g}): the "
                               "regression over-compensates beyond it")

    # -- prediction ----------------------------------------------------------------------------
    def _fitted(self) -> LogLogFit:
        if self.tot is None:
            raise NotFittedError(self.name)
        return self.tot

    def _input_values(self, inputs: dict[str, float] | None, count: int) -> dict[str, np.ndarray]:
        inputs = inputs or {}
        missing = [k for k in self.inputs if k not in inputs]
        if missing:
            raise UserError(f"this log-log model needs the {listed(missing, 'input variable')} to predict")
        return {k: np.full(count, float(inputs[k])) for k in self.inputs}

    def predict(self, threads, inputs: dict[str, float] | None = None) -> list[ScalingPrediction]:
        targets = check_targets(threads)
        tot = self._fitted()
        xin = self._input_values(inputs, len(targets))
        if self.technique == "SEP" and self.sep:
            (yc, hc), (ym, hm) = (self.sep[p].log2_predict(targets, xin) for p in ("comp", "comm"))
            pred = 2.0**yc + 2.0**ym
            low, high = 2.0 ** (yc - hc) + 2.0 ** (ym - hm), 2.0 ** (yc + hc) + 2.0 ** (ym + hm)
            slopes = [self.sep["comp"].slope(targets), self.sep["comm"].slope(targets)]
            slope = (2.0**yc * slopes[0] + 2.0**ym * slopes[1]) / pred
        else:
            y, h = tot.log2_predict(targets, xin)
            pred, low, high = 2.0**y, 2.0 ** (y - h), 2.0 ** (y + h)
            slope = tot.slope(targets)
        return [ScalingPrediction(n, float(p), float(lo), float(hi), self._target_warnings(n, float(s)))
                for n, p, lo, hi, s in zip(targets, pred, low, high, np.broadcast_to(slope, len(targets)))]

    def _target_warnings(self, n: int, slope: float) -> list[str]:
        out = []
        if slope < -1.05:
            out.append(f"the fit predicts superlinear speed-up at {n} threads (local log-log slope {slope:.2f} < -1)")
        ws = self.working_set_bytes
        if ws and self.caches and self.train_threads:
            p0 = self.train_threads[-1]
            for c in self.caches:
                if (ws <= c.capacity(p0)) != (ws <= c.capacity(n)):
                    fits_at = n if ws <= c.capacity(n) else p0
                    out.append(f"working set {_mib(ws)} crosses the L{c.level} capacity between the training range "
                               f"(<= {p0:g} threads, {_mib(c.capacity(p0))}) and {n} threads "
                               f"({_mib(c.capacity(n))}); it fits only at {fits_at:g}: the prediction ignores the jump")
        return out

    # -- persistence -------------------------------------------------------------------------
    def params(self) -> dict:
        sep = None
        if self.sep:
            sep = {"method": self.sep["method"], "comp": self.sep["comp"].to_dict(),
                   "comm": self.sep["comm"].to_dict(), "comp_share_p0": self.sep["comp_share_p0"]}
        return {"form": self.form, "technique": self.technique, "tot": self._fitted().to_dict(), "sep": sep,
                "candidates": [{"name": c["name"], "rmse": c["rmse"] if np.isfinite(c["rmse"]) else None}
                               for c in self.candidates],
                "inputs": self.inputs, "train_threads": self.train_threads,
                "working_set_bytes": self.working_set_bytes,
                "caches": [vars(c) for c in self.caches], "warnings": self.warnings}

    @classmethod
    def from_params(cls, params: dict) -> LogLogModel:
        model = cls(params.get("form", "auto"))
        model.technique = params["technique"]
        model.tot = LogLogFit.from_dict(params["tot"])
        sep = params.get("sep")
        if sep:
            model.sep = {"method": sep["method"], "comp": LogLogFit.from_dict(sep["comp"]),
                         "comm": LogLogFit.from_dict(sep["comm"]), "comp_share_p0": sep["comp_share_p0"]}
        model.candidates = [{"name": c["name"], "rmse": np.inf if c["rmse"] is None else c["rmse"]}
                            for c in params.get("candidates", [])]
        model.inputs = list(params.get("inputs", []))
        model.train_threads = list(params.get("train_threads", []))
        model.working_set_bytes = params.get("working_set_bytes")
        model.caches = [CacheLevel(**c) for c in params.get("caches", [])]
        model.warnings = list(params.get("warnings", []))
        return model

    def describe(self) -> str:
        def terms(f: LogLogFit) -> str:
            c = f.coefficients
            parts = [f"{c['c0']:.4g}"] + [f"{c[f'b[{k}]']:+.4g} log2 {k}" for k in f.inputs]
            parts.append(f"{c['c1']:+.4g} log2 q")
            if f.form == "Q":
                parts.append(f"{c['c2']:+.4g} (log2 q)^2")
            rmse = f"log-RMSE {f.rmse:.3g}, ~{2**f.rmse - 1:.1%}" if np.isfinite(f.rmse) else "exact fit"
            return f"log2 T = {' '.join(parts)} ({rmse})"

        if self.technique == "SEP" and self.sep:
            return (f"log-log SEP/{self.sep['comp'].form}/{self.sep['comm'].form}/{self.sep['method']}: "
                    f"computation {terms(self.sep['comp'])}; communication {terms(self.sep['comm'])}")
        return f"log-log TOT/{self._fitted().form}: {terms(self._fitted())}"
