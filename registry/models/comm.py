"""Communication models: how long an MPI phase's messages take on a node, from the node's
communication profile (the `mpi` kernels of docs/mpi.md: ping-pong, Exchange, Allreduce).

Issue #31 item 3. A phase traced under the PMPI library carries, per rank, the messages it sent
and their bytes and the collective calls and their bytes (registry.trace.mpi). A model fitted to a
node's profile turns them into seconds; `nodereg match` scales the phase's *measured*
communication time by the target's model time over the base's (registry.match.comm), so the time
a rank waits for its neighbours (load imbalance) is kept in proportion, not dropped.

Three models, plugins of the entry-point group ``nodereg.comm_models`` (another distribution can
add one the same way):

- ``hockney``: the latency/bandwidth model T(m) = alpha + m / beta, fitted to the ping-pong by
  least squares on the relative error (each message size counts alike, 8 B or 4 MiB). A phase's
  time: msgs x alpha + bytes / beta, plus its collectives from the Allreduce kernel.
- ``branikas``: Branikas 2024's semi-empirical model from the IMB Exchange benchmark,
  T(PpN, M) = PpN x (1/3) x (M / 4 KiB) x Base, Base fitted as the median of
  T / (PpN/3 x M/4KiB) over the node's Exchange figures with M >= 32 KiB (the sizes of the
  paper's table; it has no latency term, so small messages are outside it). A phase's exchange
  steps are its messages / 2 (one to each neighbour), of its mean message size, at the rank count
  asked for; collectives as above.
- ``boosted``: Branikas 2024's second model, gradient-boosted trees, trained on the node's own
  Jacobi data generator as in the paper (time per message sent, from message size, ranks,
  messages per step, working set and load), or where the profile has none on its ping-pong and
  Exchange figures, boosting a log-log backbone, since trees alone do not extrapolate
  (BoostedModel).

Collectives: the Allreduce kernel's time at the phase's mean collective size, interpolated in
log-log between measured sizes at the nearest measured rank count (a node without it: twice
ceil(log2 P) point-to-point steps, the recursive-doubling bound, said in a warning).
"""

from __future__ import annotations

import abc
import functools
import math
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import ClassVar

import numpy as np

from registry.errors import UserError
from registry.values import plural

# the signature source of a phase's communication figures (registry/trace/mpi.py writes it; here, not
# there, so that `match` does not import the MPI tracer and the kernels' build to read it)
SOURCE = "mpi"

GROUP = "nodereg.comm_models"
BRANIKAS_BASE_BYTES = 4096
BRANIKAS_MIN_BYTES = 32768
BOOSTED_MIN_FIGURES = 8
PER_STEP = {"pingpong": 1, "exchange": 2}      # messages a rank sends per operation of the kernel


@dataclass(frozen=True)
class JacobiFigure:
    """One configuration of the node's Jacobi data generator (kernel `jacobi`): one message's bytes,
    messages per time step, a rank's working set and operations per point, and the microseconds
    per step of the halo exchange (the mean rank's) and of the whole step."""

    ranks: int
    placement: str
    msg_bytes: int
    msgs: int
    ws_bytes: int
    ops: int
    comm_us: float
    step_us: float


@dataclass
class CommProfile:
    """One node's MPI kernel figures: kernel -> [(ranks, placement, message bytes, microseconds)],
    and the Jacobi data generator's apart (its configurations have more parameters)."""

    node: str
    points: dict[str, list[tuple[int, str, int, float]]] = field(default_factory=dict)
    jacobi: list[JacobiFigure] = field(default_factory=list)

    def of(self, kernel: str, ranks: int | None = None) -> list[tuple[int, float]]:
        """(bytes, us) of `kernel` at the measured rank count nearest `ranks` (any: the smallest), at
        the placement that keeps ranks closest (same_ccx, then compact, then the rest)."""
        pts = self.points.get(kernel, [])
        if not pts:
            return []
        counts = sorted({p[0] for p in pts})
        n = counts[0] if ranks is None else min(counts, key=lambda c: (abs(math.log2(c) - math.log2(max(ranks, 1))), c))
        order = {"same_ccx": 0, "compact": 1}
        placement = min({p[1] for p in pts if p[0] == n}, key=lambda s: (order.get(s, 2), s))
        return sorted((b, us) for r, pl, b, us in pts if r == n and pl == placement)


def loglog_interp(points: list[tuple[int, float]], x: float) -> float:
    """Piecewise log-log interpolation (extrapolated linearly in log-log at both ends)."""
    xs = np.log([max(b, 1) for b, _ in points])
    ys = np.log([us for _, us in points])
    lx = math.log(max(x, 1.0))
    if len(xs) == 1:
        return float(math.exp(ys[0]))
    i = int(np.clip(np.searchsorted(xs, lx) - 1, 0, len(xs) - 2))
    slope = (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]) if xs[i + 1] > xs[i] else 0.0
    return float(math.exp(ys[i] + slope * (lx - xs[i])))


class CommModel(abc.ABC):
    """A node's communication model. `fit` takes the node's profile; `seconds` a phase's per-rank
    communication (its `mpi` signature) at `ranks` ranks and gives the model's time for it."""

    name: ClassVar[str]
    description: ClassVar[str]

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.profile: CommProfile | None = None

    @abc.abstractmethod
    def fit(self, profile: CommProfile) -> CommModel: ...

    @abc.abstractmethod
    def point_to_point_s(self, msgs: float, msg_bytes: float, ranks: int) -> float: ...

    @abc.abstractmethod
    def describe(self) -> str: ...

    def seconds(self, sig: dict, ranks: int) -> float:
        """Model time of a phase's communication per rank: point-to-point plus collectives."""
        msgs = float(sig.get("msgs") or 0.0)
        coll, coll_bytes = float(sig.get("coll") or 0.0), float(sig.get("coll_bytes") or 0.0)
        total = self.phase_point_to_point_s(sig, ranks) if msgs > 0 else 0.0
        if coll > 0:
            total += coll * self.collective_s(coll_bytes / coll, ranks)
        return total

    def phase_point_to_point_s(self, sig: dict, ranks: int) -> float:
        """A phase's point-to-point time per rank: its messages and bytes (a model that reads more of
        the phase's figures overrides it)."""
        return self.point_to_point_s(float(sig["msgs"]), float(sig.get("msg_bytes") or 0.0), ranks)

    def collective_s(self, size: float, ranks: int) -> float:
        """One collective of `size` bytes per rank at `ranks` ranks (the Allreduce kernel)."""
        pts = self.profile.of("allreduce", ranks) if self.profile else []
        if pts:
            return loglog_interp(pts, size) * 1e-6
        self._warn(f"{self.profile.node if self.profile else '?'}: no Allreduce figures: collectives taken as "
                   "2 x ceil(log2 ranks) point-to-point steps")
        steps = 2 * max(1, math.ceil(math.log2(max(ranks, 2))))
        return steps * self.point_to_point_s(1.0, size, ranks)

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)


class HockneyModel(CommModel):
    name = "hockney"
    description = "latency/bandwidth fit of the ping-pong, T(m) = alpha + m / beta; collectives from the Allreduce"

    def fit(self, profile: CommProfile) -> HockneyModel:
        self.profile = profile
        pts = profile.of("pingpong", 2)
        if len(pts) < 2:
            raise UserError(f"node {profile.node!r} has {plural(len(pts), 'ping-pong figure')}: the hockney model needs two "
                            "message sizes or more (nodereg profile NODE --kernels mpi)")
        m = np.array([b for b, _ in pts], dtype=float)
        t = np.array([us for _, us in pts], dtype=float) * 1e-6
        design = np.column_stack([1.0 / t, m / t])             # relative error: (alpha + m g) / t ~ 1
        (alpha, inv_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
        if inv_beta <= 0:   # bandwidth unbounded by the data: the largest message's
            inv_beta = t[-1] / m[-1]
        self.alpha, self.inv_beta = max(float(alpha), 0.0), float(inv_beta)
        fitted = self.alpha + m * self.inv_beta
        self.rel_rmse = float(np.sqrt(np.mean((fitted / t - 1) ** 2)))
        return self

    def point_to_point_s(self, msgs: float, msg_bytes: float, ranks: int) -> float:
        return msgs * self.alpha + msg_bytes * self.inv_beta

    def describe(self) -> str:
        return (f"alpha {self.alpha * 1e6:.3g} us, beta {1e-9 / self.inv_beta:.3g} GB/s "
                f"(fit error {self.rel_rmse:.0%})")


class BranikasModel(CommModel):
    name = "branikas"
    description = "Branikas 2024 Exchange model, T(PpN, M) = PpN/3 x M/4KiB x Base; collectives from the Allreduce"

    def fit(self, profile: CommProfile) -> BranikasModel:
        self.profile = profile
        pts = [(r, b, us) for r, pl, b, us in profile.points.get("exchange", [])]
        if not pts:
            raise UserError(f"node {profile.node!r} has no Exchange figures: the branikas model needs them "
                            "(nodereg profile NODE --kernels mpi)")
        large = [p for p in pts if p[1] >= BRANIKAS_MIN_BYTES] or pts
        bases = [us * 1e-6 / (r / 3 * b / BRANIKAS_BASE_BYTES) for r, b, us in large]
        self.base_s = float(np.median(bases))
        self.rel_spread = float(np.median([abs(b / self.base_s - 1) for b in bases]))
        return self

    def exchange_s(self, ranks: int, size: float) -> float:
        """Branikas's T(PpN, M), seconds per exchange step."""
        return max(ranks, 1) / 3 * size / BRANIKAS_BASE_BYTES * self.base_s

    def point_to_point_s(self, msgs: float, msg_bytes: float, ranks: int) -> float:
        if msg_bytes / max(msgs, 1.0) < BRANIKAS_MIN_BYTES:
            self._warn(f"{self.profile.node}: messages under {BRANIKAS_MIN_BYTES // 1024} KiB are outside Branikas's "
                       "Exchange model (no latency term): their time is underestimated")
        return msgs / 2 * self.exchange_s(ranks, msg_bytes / max(msgs, 1.0))

    def describe(self) -> str:
        return f"Base (1 rank per node, 4 KiB) {self.base_s * 1e6:.3g} us (spread {self.rel_spread:.0%})"


class BoostedModel(CommModel):
    """Branikas 2024's second model, gradient-boosted trees on the log of the time per message sent.

    Trained, as in the paper, on the node's Jacobi data generator (kernel `jacobi`,
    microbench/ub_jacobi.c) when the profile has it: the halo exchange's time per step over its
    messages, from log2 of the message size, ranks, messages per step, working set per rank and
    operations per point (the paper's features less the node count: one node here). Without it
    (an older profile, `--kernels pingpong,exchange`), on the ping-pong and Exchange figures: from
    log2 message size, log2 ranks and the kernel (ping-pong, one message; Exchange, two a step),
    each rank count at its closest placement as in the other models. Not both at once: the
    Exchange has no computation between its steps, and the paper found that models of it missed
    the generator's communication (ranks that compute drift apart and wait for each other, and
    their sweeps evict the messages' buffers), which is what an application's phases are like;
    the figures of the microbenchmarks would pull the trees towards the idle case.

    A traced phase carries its messages, their mean size and the ranks, and its working set where
    the trace read it (`wss_bytes`, the process tree's, from its `proc` signature: per rank, over
    the ranks), not its messages per step or load: the model's time for a phase is its mean (in
    log) over the values of the features it lacks that the sweep measured (partial dependence), so
    that each of them counts as the sweep weighed it. Branikas's filter (keeping configurations
    whose communication is 0.1 .. 0.8 of the step) is not applied: a phase's share can be
    anything, and the ends are real figures.

    Trees do not extrapolate (the paper: R^2 0.854 -> 0.466 on unseen node counts), so they boost a
    log-log backbone fitted by least squares, which carries the trend beyond the figures; a phase
    outside them gets a warning."""

    name = "boosted"
    description = ("Branikas 2024 boosted trees on the node's Jacobi data generator (else its ping-pong and "
                   "Exchange figures; log-log backbone); collectives from the Allreduce")

    def fit(self, profile: CommProfile) -> BoostedModel:
        self.profile = profile
        grid = [f for f in profile.jacobi if f.comm_us > 0]
        if len(grid) >= BOOSTED_MIN_FIGURES and len({f.msg_bytes for f in grid}) >= 2:
            self.source = "jacobi"
            x = np.log2([[f.msg_bytes, f.ranks, f.msgs, f.ws_bytes, f.ops] for f in grid])
            y = np.log(np.array([f.comm_us / f.msgs for f in grid]) * 1e-6)
            self.averaged = np.unique(x[:, 2:], axis=0)    # (messages, working set, ops) a phase does not carry
        else:
            x, y = self._microbenchmark_rows(profile, len(grid))
            self.source = "pingpong/exchange"
            self.averaged = np.array([[1.0]])              # a phase exchanges with its neighbours, as the Exchange
        design = np.column_stack([np.ones(len(x)), x])
        self.backbone, *_ = np.linalg.lstsq(design, y, rcond=None)
        from sklearn.ensemble import GradientBoostingRegressor    # (only this model needs it: import when fitted)

        self.trees = GradientBoostingRegressor(n_estimators=100, learning_rate=0.1, max_depth=2, random_state=0)
        self.trees.fit(x, y - design @ self.backbone)
        self.ranges = {"bytes": (2 ** x[:, 0].min(), 2 ** x[:, 0].max()), "ranks": (2 ** x[:, 1].min(), 2 ** x[:, 1].max())}
        if self.source == "jacobi":
            self.ranges["bytes of working set per rank"] = (2 ** x[:, 3].min(), 2 ** x[:, 3].max())
        self.rel_rmse = float(np.sqrt(np.mean((np.exp(self._log_s(x) - y) - 1) ** 2)))
        self.figures = len(x)
        return self

    @staticmethod
    def _microbenchmark_rows(profile: CommProfile, jacobi: int) -> tuple[np.ndarray, np.ndarray]:
        rows = [(math.log2(b), math.log2(r), float(kernel == "exchange"), us / PER_STEP[kernel])
                for kernel in PER_STEP for r in sorted({p[0] for p in profile.points.get(kernel, [])})
                for b, us in profile.of(kernel, r)]      # (each rank count at its closest placement)
        if len(rows) < BOOSTED_MIN_FIGURES or len({x[0] for x in rows}) < 2:
            grid = f" and {plural(jacobi, 'Jacobi figure')}" if jacobi else ""
            raise UserError(f"node {profile.node!r} has {plural(len(rows), 'ping-pong or Exchange figure')}{grid}: "
                            f"the boosted model needs {BOOSTED_MIN_FIGURES} or more of either, at two message sizes "
                            f"or more (nodereg profile {profile.node} --kernels mpi)")
        return np.array([r[:3] for r in rows]), np.log(np.array([r[3] for r in rows]) * 1e-6)

    def _log_s(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(x)), x]) @ self.backbone + self.trees.predict(x)

    def message_s(self, ranks: int, size: float, *, msgs: int | None = None, ws_bytes: int | None = None,
                  ops: int | None = None) -> float:
        """Seconds per message sent by a rank exchanging with its neighbours: the features a phase
        does not carry averaged over the sweep's, unless given (`msgs` per step, a rank's working
        set `ws_bytes`, `ops` per point: the Jacobi model's)."""
        for what, value in (("bytes", size), ("ranks", ranks), ("bytes of working set per rank", ws_bytes)):
            low, high = self.ranges.get(what, (value, value))
            if value is not None and not low <= value <= high:
                self._warn(f"{self.profile.node}: the boosted model was trained on {low:g}..{high:g} {what}, not "
                           f"{value:g}: its trees add their edge value there, the log-log backbone the trend")
        rest = self.averaged.copy()
        for column, value in enumerate((msgs, ws_bytes, ops)):
            if value is not None and self.source == "jacobi":
                rest[:, column] = math.log2(value)
        x = np.column_stack([np.full(len(rest), math.log2(max(size, 1.0))),
                             np.full(len(rest), math.log2(max(ranks, 1))), rest])
        return float(np.exp(np.mean(self._log_s(x))))

    def point_to_point_s(self, msgs: float, msg_bytes: float, ranks: int) -> float:
        return msgs * self.message_s(ranks, msg_bytes / max(msgs, 1.0))

    def phase_point_to_point_s(self, sig: dict, ranks: int) -> float:
        """As point_to_point_s, with the phase's working set per rank where it has one (Jacobi model)."""
        msgs, wss = float(sig["msgs"]), sig.get("wss_bytes")
        ws = wss / max(ranks, 1) if wss and self.source == "jacobi" else None
        return msgs * self.message_s(ranks, float(sig.get("msg_bytes") or 0.0) / max(msgs, 1.0), ws_bytes=ws)

    def describe(self) -> str:
        return (f"log-log backbone and {self.trees.n_estimators_} boosted trees on {self.trees.n_features_in_} "
                f"features of {plural(self.figures, self.source + ' figure')} (fit error {self.rel_rmse:.0%})")


@functools.cache
def _installed() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def create(name: str) -> CommModel:
    """A fresh communication model by plugin name, or a UserError naming the installed ones."""
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        names = ", ".join(sorted(_installed())) or "none: is nodereg installed (pip install -e .)?"
        raise UserError(f"unknown communication model {name!r} (installed: {names})")
    cls = found[0].load()
    if not (isinstance(cls, type) and issubclass(cls, CommModel)):
        raise UserError(f"communication model plugin {name!r} ({found[0].value}) is not a CommModel")
    return cls()
