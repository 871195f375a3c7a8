"""Deshmeh 2013 (ADEPT): Downey's speed-up model fitted per prediction target.

Downey describes an application by A (average parallelism) and sigma (variance of parallelism):

    low variance (sigma <= 1):  S = An / (A + sigma/2 (n-1))              1 <= n <= A
                                S = An / (sigma (A-1/2) + n (1-sigma/2))   A <= n <= 2A-1
                                S = A                                     n >= 2A-1
    high variance (sigma >= 1): S = nA(sigma+1) / (sigma (n+A-1) + A)      1 <= n <= A + A sigma - sigma
                                S = A                                     beyond

Two forms of the runtime:

* ``normalised`` (default): T(n) = L / S(n; A, sigma) with L (the one-thread time) fitted in closed
  form for every (A, sigma). Sound in any time unit.
* ``raw`` (the thesis): the runtime functions of its Table 1 in the given unit, which assume
  T(inf) = 1 and so tie A to the unit. Its search is the thesis's: an *envelope* of (A, sigma)
  ranges from closed-form solutions of observation pairs widened by +-delta (Appendix A, with the
  typos of eqs 28/30/32 corrected), a 1-D pass over 5000 values of A through the observation
  closest to the target, then a 500 x 500 pass within +-15 % around the best instance.

ADEPT's other parts: the fit criterion is the weighted sum of squared relative errors
``WSSRE = sum W_i ((t_i - T(n_i)) / t_i)^2`` with distance weights
``W_i = q max_j |n* - n_j| - |n* - n_i|`` (one fit per target n*); the R fluctuation metric finds
anomalous runs and down-weights them (``W' = max(0, W (theta - D) / theta)``) or recognises a
stepwise pattern (then only the runs of the target's phase count); three reliability warnings
(all runs in the linear section, fit error above delta, a runner-up instance with a very
different A that fits nearly as well). Instances fitting nearly as well as the best also bound the
prediction interval, so an unidentified A shows as a wide interval, not a confident guess.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from registry.errors import UserError
from registry.models.base import (NotFittedError, ScalingContext, ScalingModel, ScalingPrediction, check_targets,
                                   median_by_threads)
from registry.models.options import Option

FORMS = ("normalised", "raw")
RUNNER_UP_WSSRE = 1.1      # runner-up fits within this factor of the best ...
RUNNER_UP_A = 1.5          # ... with A differing by more than this factor
GAMMA = 5.0                # cross-size: base anomalies with D >= gamma give no guide points
ISOLATED = 0.25           # removing one run must cut the R fluctuation to <= this share to call it anomalous
SIGMA_MAX = 1e4            # sigma beyond this is Amdahl's law (Downey's sigma -> inf limit) for every purpose
TIE = 1e-6                 # relative error per run below which two instances are the same fit (point choice)
NOISE_FLOOR = 0.005        # runs are not timed better than this (relative): fits this close are ties


# -- the model ------------------------------------------------------------------------------------
def speedup(n, A, sigma) -> np.ndarray:
    """Downey's S(n; A, sigma), broadcasting over all three arguments."""
    n, A, s = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(A, dtype=float),
                                  np.asarray(sigma, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(n <= A, A * n / (A + s / 2 * (n - 1)),
                       np.where(n <= 2 * A - 1, A * n / (s * (A - 0.5) + n * (1 - s / 2)), A))
        high = np.where(n <= A + A * s - s, n * A * (s + 1) / (s * (n + A - 1) + A), A)
    return np.where(s <= 1, low, high)


def raw_time(n, A, sigma) -> np.ndarray:
    """The thesis's runtime functions (Table 1): T(1)/S(n) with T(1) = A (low) or A(sigma+1) (high), T(inf) = 1."""
    A, s = np.asarray(A, dtype=float), np.asarray(sigma, dtype=float)
    t1 = np.where(s <= 1, A, A * (s + 1))
    return t1 / speedup(n, A, s)


def distance_weights(n: np.ndarray, target: float, q: float) -> np.ndarray:
    """ADEPT's W_i = q max_j |n* - n_j| - |n* - n_i| (runs close to the target weigh more)."""
    d = np.abs(target - np.asarray(n, dtype=float))
    if d.max() == 0:
        return np.ones_like(d)
    return q * d.max() - d


# -- the R fluctuation metric and anomalies ---------------------------------------------------------
def r_metric(n: np.ndarray, t: np.ndarray) -> np.ndarray:
    """R_i = (t_i n_i / n_{i+1}) / t_{i+1} * (1 + (n_{i+1} - n_i) / n_{i+1}) for consecutive runs."""
    n, t = np.asarray(n, dtype=float), np.asarray(t, dtype=float)
    return (t[:-1] * n[:-1] / n[1:]) / t[1:] * (1 + (n[1:] - n[:-1]) / n[1:])


def _jumps(r: np.ndarray, eps: float) -> list[int]:
    """Indices k with R_{k+1} > (1 + eps) R_k."""
    return [k for k in range(len(r) - 1) if r[k + 1] > (1 + eps) * r[k]]


def _fluctuation(r: np.ndarray, eps: float) -> float:
    return float(sum(max(0.0, r[k + 1] - (1 + eps) * r[k]) for k in range(len(r) - 1)))


@dataclass
class Anomalies:
    deviation: dict[int, float]      # observation index -> D (individual anomalous runs)
    phase_starts: list[int]          # stepwise pattern: indices where a new phase begins
    notes: list[str]


def detect_anomalies(n: np.ndarray, t: np.ndarray, eps: float = 0.1) -> Anomalies:
    """ADEPT's anomaly detection on runs sorted by thread count (one time per count).

    Runs next to a jump of R (R_{k+1} > (1+eps) R_k) are candidates; the candidate whose removal
    cuts the R curve's fluctuation (the sum of the jumps' excess) the most is an individual anomaly
    if it removes most of it (to <= ISOLATED of the original); otherwise, with >= 5 runs, the
    jumps are read as a stepwise pattern.
    """
    r = r_metric(n, t)
    jumps = _jumps(r, eps)
    if not jumps:
        return Anomalies({}, [], [])
    if len(n) < 4:
        return Anomalies({}, [], [f"the R metric fluctuates at {int(n[jumps[0] + 1])} threads but >= 4 runs are "
                                  "needed to identify an anomalous run"])
    candidates = sorted({k + 1 for k in jumps} | {k + 2 for k in jumps})
    scores = {}
    for c in candidates:
        keep = np.arange(len(n)) != c
        scores[c] = _fluctuation(r_metric(n[keep], t[keep]), eps)
    best = min(scores, key=lambda c: (scores[c], c))
    if scores[best] <= ISOLATED * _fluctuation(r, eps):
        k = next(k for k in jumps if best in (k + 1, k + 2))
        d = min(10.0, (r[k + 1] - r[k]) / eps)
        return Anomalies({best: d}, [], [f"run at {int(n[best])} threads looks anomalous (R jumps by "
                                         f"{r[k + 1] / r[k] - 1:.0%}); its weight is reduced (D = {d:.2f})"])
    if len(n) >= 5:
        starts = sorted({k + 2 for k in jumps})
        where = ", ".join(f"{int(n[s - 1])}->{int(n[s])}" for s in starts)
        return Anomalies({}, starts, [f"stepwise scalability (a phase change at {where} threads, e.g. the working "
                                      "set entering a cache): each target is fitted on the runs of its own phase"])
    return Anomalies({}, [], ["the R metric fluctuates but no single run explains it (>= 5 runs are needed to "
                              "recognise a stepwise pattern)"])


def adjusted_weights(w: np.ndarray, deviation: dict[int, float], theta: float) -> np.ndarray:
    """W'_i = max(0, W_i (theta - D_i) / theta) for anomalous runs."""
    w = np.array(w, dtype=float)
    for i, d in deviation.items():
        w[i] = max(0.0, w[i] * (theta - d) / theta)
    return w


# -- the envelope (raw form) ------------------------------------------------------------------------
@dataclass(frozen=True)
class RangePair:
    a_lo: float
    a_hi: float
    s_lo: float
    s_hi: float
    case: int

    def contains(self, other: RangePair) -> bool:
        return (self.a_lo <= other.a_lo and other.a_hi <= self.a_hi
                and self.s_lo <= other.s_lo and other.s_hi <= self.s_hi)

    def inside(self, A: np.ndarray, s: np.ndarray) -> np.ndarray:
        return (A >= self.a_lo) & (A <= self.a_hi) & (s >= self.s_lo) & (s <= self.s_hi)


def _clip_pair(case: int, s_range, a_of_sigma) -> RangePair | None:
    s_lo, s_hi = sorted(s_range)
    lo_bound, hi_bound = (0.0, 1.0) if case in (4, 5) else (1.0, np.inf)
    s_lo, s_hi = max(s_lo, lo_bound), min(s_hi, hi_bound)
    if not (np.isfinite(s_lo) and s_lo <= s_hi):
        return None
    ends = [a_of_sigma(s, lim) for s in (s_lo, s_hi) for lim in (0, 1)]
    a_lo, a_hi = max(1.0, min(ends)), max(ends)
    if not (np.isfinite(a_hi) and a_lo <= a_hi):
        return None
    return RangePair(a_lo, a_hi, s_lo, s_hi, case)


def envelope(n: np.ndarray, t: np.ndarray, delta: float) -> list[RangePair]:
    """Non-redundant (A, sigma) range pairs from every observation pair (thesis Appendix A, eqs 26-35).

    Times are in the raw form's unit (T(inf) = 1). Corrections: eqs 28/30 use t_j (from eqs 11/15),
    eq 32's denominator is n_j - n_i (as in eq 19).
    """
    n, t = np.asarray(n, dtype=float), np.asarray(t, dtype=float)
    pm = (1 - delta, 1 + delta)
    pairs: list[RangePair] = []
    m = len(n)
    for i in range(m):
        for j in range(i + 1, m):
            ni, ti, nj, tj = n[i], t[i], n[j], t[j]
            ci = ni * ti

            def high_a(k):
                return lambda s, lim: (n[k] * t[k] * pm[lim] + s * (1 - n[k])) / (s + 1)

            base = (nj * tj - ci) / (nj - ni)
            cands = [
                _clip_pair(1, (base * pm[0], base * pm[1]), high_a(i)),                      # eqs 26-27
                _clip_pair(2, (tj * pm[0] - 1, tj * pm[1] - 1), high_a(i)),                  # eqs 28-29
                _clip_pair(4, (2 * base * pm[0], 2 * base * pm[1]),                          # eqs 32-33
                           lambda s, lim: ci * pm[lim] - s * (ni - 1) / 2),
            ]
            b5 = 2 * (ci - nj * tj) / (nj - ni)
            cands.append(_clip_pair(5, (b5 * pm[0] + 2, b5 * pm[1] + 2),                     # eqs 34-35
                                    lambda s, lim: (ni + 1) / 2 + ni * (ti * pm[lim] - 1) / s if s > 0 else np.inf))
            for k in range(m):                                                               # eqs 30-31
                if k not in (i, j) and n[k] < ni:
                    cands.append(_clip_pair(3, (tj * pm[0] - 1, tj * pm[1] - 1), high_a(k)))
            pairs.extend(c for c in cands if c is not None)
    unique = list(dict.fromkeys(pairs))
    return [p for p in unique if not any(o != p and o.contains(p) for o in unique)]


# -- fitting ------------------------------------------------------------------------------------------
@dataclass
class Instance:
    A: float
    sigma: float
    L: float            # one-thread time (normalised form); T(1) of the raw form otherwise
    wssre: float

    def time(self, n, form: str) -> np.ndarray:
        return times_of(n, self.A, self.sigma, self.L, form)


class _Evaluator:
    """WSSRE of many (A, sigma) at once; keeps every evaluation for the runner-up search."""

    def __init__(self, n, t, w, form):
        self.n, self.t, self.w, self.form = n, t, w, form
        self.seen_A, self.seen_s, self.seen_L, self.seen_e = [], [], [], []
        self.profile: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None   # (A, best sigma, WSSRE)

    def __call__(self, A: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        A, s = np.asarray(A, dtype=float).ravel(), np.asarray(s, dtype=float).ravel()
        if A.size == 0:
            return np.array([]), np.array([])
        S = speedup(self.n[None, :], A[:, None], s[:, None])
        if self.form == "raw":
            t1 = np.where(s <= 1, A, A * (s + 1))
            model = t1[:, None] / S
            L = t1
        else:
            g = (1.0 / S) / self.t[None, :]                      # model / t per unit L
            L = (self.w * g).sum(1) / np.maximum((self.w * g * g).sum(1), 1e-300)
            model = L[:, None] / S
        err = (self.t[None, :] - model) / self.t[None, :]
        e = (self.w[None, :] * err**2).sum(1)
        e = np.where(np.isfinite(e), e, np.inf)
        self.seen_A.append(A), self.seen_s.append(s), self.seen_L.append(L), self.seen_e.append(e)
        return e, L

    def best(self) -> Instance:
        A, s, L, e = (np.concatenate(x) for x in (self.seen_A, self.seen_s, self.seen_L, self.seen_e))
        i = int(np.argmin(e))
        return Instance(float(A[i]), float(s[i]), float(L[i]), float(e[i]))

    def near_optimal(self, best: Instance) -> dict[str, np.ndarray]:
        """Instances with WSSRE <= 1.1 x the best, or within the timing-noise floor of it (arrays A, sigma, L, wssre).

        The floor (every run explained to NOISE_FLOOR relative error) keeps exact synthetic data from
        making the set depend on which grid points happen to hit the optimum exactly.
        """
        A, s, L, e = (np.concatenate(x) for x in (self.seen_A, self.seen_s, self.seen_L, self.seen_e))
        tol = max(RUNNER_UP_WSSRE * best.wssre, best.wssre + NOISE_FLOOR**2 * self.w.sum())
        keep = e <= tol
        return {"A": A[keep], "sigma": s[keep], "L": L[keep], "wssre": e[keep]}


def times_of(n, A, sigma, L, form: str) -> np.ndarray:
    """T(n) of many instances at once (arrays A, sigma, L)."""
    return raw_time(n, A, sigma) if form == "raw" else np.asarray(L) / speedup(n, A, sigma)


def _sigma_through(n: float, t: float, A: np.ndarray) -> list[np.ndarray]:
    """sigma of the raw-form instances that pass exactly through (n, t), one array per model piece."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = [
            (t - A / n) / ((1 - 1 / n) / 2) if n > 1 else np.full_like(A, np.nan),   # low, piece 1
            (t - 1) / ((A - 0.5) / n - 0.5),                                         # low, piece 2
            (t - A / n) / (1 + (A - 1) / n),                                         # high, piece 1
            np.full_like(A, t - 1),                                                  # high, flat piece
        ]
    return [np.where(np.isfinite(s) & (s >= 0), s, np.nan) for s in out]


def _local_grid(best: Instance, lo_A: float, hi_A: float, lo_s: float, hi_s: float, size: int):
    a_lo, a_hi = max(lo_A, best.A * 0.85), min(hi_A, best.A * 1.15)
    half_s = max(0.15 * best.sigma, 0.02)
    s_lo, s_hi = max(lo_s, best.sigma - half_s), min(hi_s, best.sigma + half_s)
    A, s = np.meshgrid(np.linspace(a_lo, a_hi, size), np.linspace(s_lo, s_hi, size))
    return A.ravel(), s.ravel()


def fit_instance(n: np.ndarray, t: np.ndarray, w: np.ndarray, target: float, form: str, *, delta: float = 0.1,
                 grid: int = 500) -> tuple[Instance, _Evaluator, list[str]]:
    """The lowest-WSSRE Downey instance for one target, the evaluator (for near-optimal ones) and notes."""
    ev = _Evaluator(n, t, w, form)
    notes: list[str] = []
    a_cap = 1000.0 * max(float(n.max()), float(target))
    if form == "raw":
        env, d = [], delta
        while not env and d <= 0.8:
            env = envelope(n, t, d)
            d *= 2
        fixed = int(np.argmin(np.where(w > 0, np.abs(n - target), np.inf)))
        if env:
            a_lo, a_hi = min(p.a_lo for p in env), min(max(p.a_hi for p in env), a_cap)
            s_lo, s_hi = min(p.s_lo for p in env), max(p.s_hi for p in env)
            A = np.linspace(a_lo, a_hi, 10 * grid)                      # 5000 values at the default grid
            for s in _sigma_through(n[fixed], t[fixed], A):
                ok = np.isfinite(s) & np.any([p.inside(A, np.nan_to_num(s, nan=-1)) for p in env], axis=0)
                ev(A[ok], s[ok])
            if any(len(x) for x in ev.seen_e):
                best = ev.best()
                A2, s2 = _local_grid(best, a_lo, a_hi, s_lo, s_hi, grid)
                inside = np.any([p.inside(A2, s2) for p in env], axis=0)
                ev(A2[inside], s2[inside])
                _polish(ev, a_cap)
                return ev.best(), ev, notes
        notes.append("no envelope instance explains the runs within +-80%: searched the whole (A, sigma) plane")
    _profile(ev, np.geomspace(1.0, a_cap, max(grid // 2, 50)))
    A2, s2 = _local_grid(ev.best(), 1.0, a_cap, 0.0, SIGMA_MAX, grid)
    ev(A2, s2)
    _polish(ev, a_cap)
    return ev.best(), ev, notes


def _golden_section(f, lo: np.ndarray, hi: np.ndarray, steps: int = 60) -> np.ndarray:
    """Vectorised golden-section minimisation, one bracket [lo, hi] per lane; returns the minimisers."""
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(steps):
        x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        left = f(x1) <= f(x2)
        hi, lo = np.where(left, x2, hi), np.where(left, lo, x1)
    return (lo + hi) / 2


def _profile(ev: _Evaluator, a_values: np.ndarray) -> None:
    """Profiles of the WSSRE: the best sigma for each A (ev.profile) and the best A for each sigma.

    Both start from one (A, sigma) grid and refine each lane by golden-section search. The profile
    over A traces the valley of equally good instances exactly, which the tie-break between them
    (see DowneyModel) needs; the profile over sigma finds optima a coarse A grid steps over
    (large sigma makes the WSSRE very sensitive to A).
    """
    sig = np.concatenate([np.linspace(0, 1, 101), np.geomspace(1.01, SIGMA_MAX, 300)])
    e, _ = ev(np.repeat(a_values, sig.size), np.tile(sig, a_values.size))
    e = e.reshape(a_values.size, sig.size)
    j = e.argmin(axis=1)
    best_s = _golden_section(lambda x: ev(a_values, x)[0], sig[np.maximum(j - 1, 0)],
                             sig[np.minimum(j + 1, sig.size - 1)])
    ev.profile = (a_values, best_s, ev(a_values, best_s)[0])
    i = e.argmin(axis=0)
    log_a = np.log(a_values)
    _golden_section(lambda x: ev(np.exp(x), sig)[0], log_a[np.maximum(i - 1, 0)],
                    log_a[np.minimum(i + 1, a_values.size - 1)])


def _polish(ev: _Evaluator, a_cap: float) -> None:
    """Nelder-Mead from the best grid instance, so exact data give exact parameters."""
    start = ev.best()

    def objective(p):   # log A and log(1 + sigma): both parameters span orders of magnitude
        A, s = float(np.clip(np.exp(p[0]), 1.0, a_cap)), float(np.expm1(max(p[1], 0.0)))
        return float(ev(np.array([A]), np.array([s]))[0][0])

    optimize.minimize(objective, [np.log(start.A), np.log1p(start.sigma)], method="Nelder-Mead",
                      options={"xatol": 1e-10, "fatol": 1e-18, "maxiter": 800})


def _largest_tied_A(ev: _Evaluator, best: Instance) -> Instance:
    """Among instances that fit as well as the best (within TIE per run), the one with the largest A.

    Runs only in the Amdahl-like first piece identify sigma/A, not A: then predict no saturation
    the runs do not show (the runner-up warning and the interval show the alternatives).
    """
    A, s, e = ev.profile
    tied = np.flatnonzero(e <= RUNNER_UP_WSSRE * best.wssre + TIE**2 * ev.w.sum())
    if tied.size == 0 or A[tied].max() <= best.A:
        return best
    i = tied[np.argmax(A[tied])]
    e_i, L_i = ev(A[i:i + 1], s[i:i + 1])
    return Instance(float(A[i]), float(s[i]), float(L_i[0]), float(e_i[0]))


def cross_size_guide_points(base_n, base_t, target_n, target_t, base_deviation: dict[int, float] | None = None,
                            prediction_target: float | None = None):
    """ADEPT across problem sizes: base-size runs scaled by T_target(n0)/T_base(n0) as guide points.

    n0 is the smallest thread count measured for both sizes; base runs at counts the target size lacks
    become guides, except anomalous base runs (D >= gamma) that do not sit at the prediction target.
    Returns (n, t, is_guide) sorted by n.
    """
    bn, bt = median_by_threads(np.asarray(base_n, dtype=float), np.asarray(base_t, dtype=float))
    tn, tt = median_by_threads(np.asarray(target_n, dtype=float), np.asarray(target_t, dtype=float))
    common = sorted(set(bn) & set(tn))
    if not common:
        raise UserError("cross-size prediction needs one thread count measured for both problem sizes")
    n0 = common[0]
    ratio = tt[tn == n0][0] / bt[bn == n0][0]
    dev = base_deviation or {}
    guides = [(n, t * ratio) for i, (n, t) in enumerate(zip(bn, bt))
              if n not in set(tn) and (dev.get(i, 0.0) < GAMMA or n == prediction_target)]
    rows = sorted([(n, t, False) for n, t in zip(tn, tt)] + [(n, t, True) for n, t in guides])
    return (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))


# -- the plugin ---------------------------------------------------------------------------------------
class DowneyModel(ScalingModel):
    name = "downey"
    description = "Deshmeh 2013 ADEPT: Downey speed-up model (A, sigma), one weighted fit per target"
    min_thread_counts = 3
    options = (
        Option("form", str, "normalised", "normalised: T(n) = L / S(n); raw: T(inf) = 1 time unit", choices=FORMS),
        Option("q", float, 2.0, "distance-weight factor of the runs around each target (> 1)", low=1.0),
        Option("eps", float, 0.1, "relative deviation that marks a run as an anomaly", low=0.0),
        Option("theta", float, 5.0, "how strongly an anomalous run is down-weighted", low=0.0),
        Option("delta", float, 0.1, "fitting error above which a warning is given", low=0.0),
        Option("grid", int, 500, "grid points of the (A, sigma) search", low=10),
    )

    def __init__(self, form: str = "normalised", q: float = 2.0, eps: float = 0.1, theta: float = 5.0,
                 delta: float = 0.1, grid: int = 500) -> None:
        if form not in FORMS:
            raise UserError(f"downey form must be one of {', '.join(FORMS)}, not {form!r}")
        if q <= 1:
            raise UserError("the distance-weight factor q must be > 1")
        self.form, self.q, self.eps, self.theta, self.delta, self.grid = form, q, eps, theta, delta, int(grid)
        self.n = np.array([])
        self.t = np.array([])
        self.anomalies = Anomalies({}, [], [])
        self.instances: dict[int, dict] = {}   # target -> fitted instance and its warnings
        self.warnings = []

    def fit(self, threads, times, context: ScalingContext | None = None) -> DowneyModel:
        n, t = self._check_runs(threads, times)
        self.n, self.t = median_by_threads(n, t)
        if self.form == "raw" and np.any(self.t < 1):
            raise UserError("the raw Downey form assumes T(inf) = 1 time unit, so no run can take < 1; "
                            "use the normalised form")
        self.anomalies = detect_anomalies(self.n, self.t, self.eps)
        self.warnings = list(self.anomalies.notes)
        self.instances = {}
        self._fit_target(int(self.n.max()))          # the reference instance, shown by describe()
        return self

    def _weights(self, target: float) -> np.ndarray:
        w = adjusted_weights(distance_weights(self.n, target, self.q), self.anomalies.deviation, self.theta)
        starts = self.anomalies.phase_starts
        if starts:
            phase = np.searchsorted(starts, np.arange(len(self.n)), side="right")
            nearest = int(np.argmin(np.abs(self.n - target)))
            w = np.where(phase == phase[nearest], w, 0.0)
        return w

    def _fit_target(self, target: int) -> dict:
        if target in self.instances:
            return self.instances[target]
        w = self._weights(target)
        best, ev, notes = fit_instance(self.n, self.t, w, target, self.form, delta=self.delta, grid=self.grid)
        if ev.profile is not None:
            best = _largest_tied_A(ev, best)
        near = ev.near_optimal(best)
        near_t = times_of(target, near["A"], near["sigma"], near["L"], self.form)
        rel = np.abs(self.t - best.time(self.n, self.form)) / self.t
        used = w > 0
        dof = max(int(used.sum()) - (3 if self.form == "normalised" else 2), 0)
        spread = float(np.sqrt((w * rel**2).sum() / w.sum() * used.sum() / dof)) if dof else 0.0
        entry = {"A": best.A, "sigma": best.sigma, "L": best.L, "wssre": best.wssre,
                 "near_low": float(np.min(near_t)), "near_high": float(np.max(near_t)), "spread": spread,
                 "warnings": notes + self._reliability(best, near, rel, used, target)}
        self.instances[target] = entry
        return entry

    def _reliability(self, best: Instance, near: dict[str, np.ndarray], rel: np.ndarray, used: np.ndarray,
                     target: int) -> list[str]:
        out = []
        if best.sigma <= 1 and np.all(self.n[used] < best.A):
            out.append(f"all runs lie in the linear section of the fitted curve (n < A = {best.A:.3g}): "
                       f"add a run at >= {int(np.ceil(best.A))} threads")
        normal = used & ~np.isin(np.arange(len(self.n)), list(self.anomalies.deviation))
        if normal.any() and rel[normal].max() > self.delta:
            i = int(np.argmax(np.where(normal, rel, -1)))
            out.append(f"high fitting error: {rel[i]:.0%} at {int(self.n[i])} threads > {self.delta:.0%}: the app "
                       "deviates from the Downey model")
        far = np.flatnonzero((near["A"] < best.A / RUNNER_UP_A) | (near["A"] > best.A * RUNNER_UP_A))
        if far.size:
            j = far[np.argmax(np.abs(np.log(near["A"][far] / best.A)))]
            other = Instance(*(float(near[k][j]) for k in ("A", "sigma", "L", "wssre")))
            probe = np.unique(np.round(np.geomspace(self.n.max() + 1, max(4 * target, 4 * self.n.max()), 40)))
            diff = np.abs(other.time(probe, self.form) / best.time(probe, self.form) - 1)
            k = int(np.argmax(diff))
            out.append(f"runner-up instance A = {other.A:.3g} (chosen A = {best.A:.3g}) fits nearly as well: add a "
                       f"run outside the measured range, e.g. at {int(probe[k])} threads where they differ by "
                       f"{diff[k]:.0%}")
        return out

    def predict(self, threads) -> list[ScalingPrediction]:
        if self.n.size == 0:
            raise NotFittedError(self.name)
        out = []
        for n in check_targets(threads):
            e = self._fit_target(n)
            pred = float(Instance(e["A"], e["sigma"], e["L"], e["wssre"]).time(n, self.form))
            half = 2.0 * e["spread"]
            low = min(pred * np.exp(-half), e["near_low"])
            high = max(pred * np.exp(half), e["near_high"])
            out.append(ScalingPrediction(n, pred, float(low), float(high), list(e["warnings"])))
        return out

    def params(self) -> dict:
        return {"form": self.form, "q": self.q, "eps": self.eps, "theta": self.theta, "delta": self.delta,
                "grid": self.grid, "threads": self.n.tolist(), "times": self.t.tolist(),
                "anomalies": {"deviation": {str(k): v for k, v in self.anomalies.deviation.items()},
                              "phase_starts": self.anomalies.phase_starts, "notes": self.anomalies.notes},
                "instances": {str(k): v for k, v in self.instances.items()}, "warnings": self.warnings}

    @classmethod
    def from_params(cls, params: dict) -> DowneyModel:
        model = cls(params["form"], params["q"], params["eps"], params["theta"], params["delta"], params["grid"])
        model.n = np.asarray(params["threads"], dtype=float)
        model.t = np.asarray(params["times"], dtype=float)
        a = params["anomalies"]
        model.anomalies = Anomalies({int(k): float(v) for k, v in a["deviation"].items()},
                                    list(a["phase_starts"]), list(a["notes"]))
        model.instances = {int(k): v for k, v in params["instances"].items()}
        model.warnings = list(params.get("warnings", []))
        return model

    def describe(self) -> str:
        ref = self._fit_target(int(self.n.max()))
        mode = "low" if ref["sigma"] <= 1 else "high"
        lead = f"L = {ref['L']:.4g} s, " if self.form == "normalised" else ""
        limit = 2 * ref["A"] - 1 if ref["sigma"] <= 1 else ref["A"] + ref["A"] * ref["sigma"] - ref["sigma"]
        return (f"Downey ({self.form}, {mode} variance): {lead}A = {ref['A']:.4g}, sigma = {ref['sigma']:.3g}; "
                f"maximum speed-up {ref['A']:.3g}x reached at {limit:.3g} threads (fit for n* = {int(self.n.max())})")

