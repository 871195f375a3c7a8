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
- ``boosted``: Branikas 2024's second model, gradient-boosted trees, here trained on the node's own
  ping-pong and Exchange figures (time per message sent, from message size, ranks and kernel),
  boosting a log-log backbone, since trees alone do not extrapolate (BoostedModel).

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


@dataclass
class CommProfile:
    """One node's MPI kernel figures: kernel -> [(ranks, placement, message bytes, microseconds)]."""

    node: str
    points: dict[str, list[tuple[int, str, int, float]]] = field(default_factory=dict)

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
        msgs, nbytes = float(sig.get("msgs") or 0.0), float(sig.get("msg_bytes") or 0.0)
        coll, coll_bytes = float(sig.get("coll") or 0.0), float(sig.get("coll_bytes") or 0.0)
        total = self.point_to_point_s(msgs, nbytes, ranks) if msgs > 0 else 0.0
        if coll > 0:
            total += coll * self.collective_s(coll_bytes / coll, ranks)
        return total

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
    """Branikas 2024's second model, gradient-boosted trees, trained here on the node's own
    point-to-point figures (the paper's came from a Jacobi data generator over many machines): the
    log of the time per message sent from log2 message size, log2 ranks and the kernel (ping-pong,
    one message; Exchange, two a step), each rank count at its closest placement as in the others. Trees do not extrapolate (the paper: R^2 0.854 -> 0.466 on
    unseen node counts), so they boost a log-log backbone fitted by least squares, which carries
    the trend beyond the figures; a phase outside them gets a warning."""

    name = "boosted"
    description = ("Branikas 2024 boosted trees on the node's ping-pong and Exchange figures (log-log backbone); "
                   "collectives from the Allreduce")

    def fit(self, profile: CommProfile) -> BoostedModel:
        self.profile = profile
        rows = [(math.log2(b), math.log2(r), float(kernel == "exchange"), us / PER_STEP[kernel])
                for kernel in PER_STEP for r in sorted({p[0] for p in profile.points.get(kernel, [])})
                for b, us in profile.of(kernel, r)]      # (each rank count at its closest placement)
        if len(rows) < BOOSTED_MIN_FIGURES or len({x[0] for x in rows}) < 2:
            raise UserError(f"node {profile.node!r} has {plural(len(rows), 'ping-pong or Exchange figure')}: the boosted "
                            f"model needs {BOOSTED_MIN_FIGURES} or more, at two message sizes or more "
                            f"(nodereg profile {profile.node} --kernels mpi)")
        x = np.array([r[:3] for r in rows])
        y = np.log(np.array([r[3] for r in rows]) * 1e-6)
        design = np.column_stack([np.ones(len(x)), x])
        self.backbone, *_ = np.linalg.lstsq(design, y, rcond=None)
        from sklearn.ensemble import GradientBoostingRegressor    # (only this model needs it: import when fitted)

        self.trees = GradientBoostingRegressor(n_estimators=100, learning_rate=0.1, max_depth=2, random_state=0)
        self.trees.fit(x, y - design @ self.backbone)
        self.ranges = {"bytes": (2 ** x[:, 0].min(), 2 ** x[:, 0].max()), "ranks": (2 ** x[:, 1].min(), 2 ** x[:, 1].max())}
        self.rel_rmse = float(np.sqrt(np.mean((np.exp(self._log_s(x) - y) - 1) ** 2)))
        return self

    def _log_s(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(x)), x]) @ self.backbone + self.trees.predict(x)

    def message_s(self, ranks: int, size: float) -> float:
        """Seconds per message sent by a rank exchanging with its neighbours (the Exchange kernel's case)."""
        for what, value in (("bytes", size), ("ranks", ranks)):
            low, high = self.ranges[what]
            if not low <= value <= high:
                self._warn(f"{self.profile.node}: the boosted model was trained on {low:g}..{high:g} {what}, not "
                           f"{value:g}: its trees add their edge value there, the log-log backbone the trend")
        x = np.array([[math.log2(max(size, 1.0)), math.log2(max(ranks, 1)), 1.0]])
        return float(np.exp(self._log_s(x)[0]))

    def point_to_point_s(self, msgs: float, msg_bytes: float, ranks: int) -> float:
        return msgs * self.message_s(ranks, msg_bytes / max(msgs, 1.0))

    def describe(self) -> str:
        return (f"log-log backbone and {self.trees.n_estimators_} boosted trees on {self.trees.n_features_in_} "
                f"features (fit error {self.rel_rmse:.0%})")


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
