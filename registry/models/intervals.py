"""Interval arithmetic for predicted times, in one place, and its empirical calibration.

An interval is a prediction t with a low and a high end; its *log half-widths* are ln(t / low) and
ln(high / t). Independent sources of error (the model's spread among its references, the query's
distance to the nearest of them, the noise of the base time it starts from, the dispersion of the
profiles the ratio is read from) add as the root of the sum of squares of their half-widths
(`rss`, `combine`). No interval of a prediction is narrower than MIN_HALF_WIDTH: a profile's medians and
a program's runs move by a few percent between repetitions, so a zero-width interval is never true.

Calibration (split conformal, normalised): for predictions already checked by runs measured after
them, the score is |ln(measured / predicted)| divided by the prediction's own half-width on that
side. The ceil((n + 1) q)-th smallest of n scores is the factor by which half-widths must be scaled
so that a fraction q of new outcomes falls inside, whatever the model's own half-widths mean, as
long as new predictions are exchangeable with the checked ones (same model and version). Below
MIN_CHECKS checked predictions the factor is 1 (the model's own interval, said to be uncalibrated).
The scale applied to a stored prediction is stored with it, so later scores are taken against the
model's own half-widths, not against already scaled ones.

Scales are kept per interval *group* (Mondrian conformal): predictions whose own half-widths relate
to their errors differently are not pooled. `match` groups nodes by suite and by how much of the
base's profile they measured (registry.match.calibration.node_groups): on the imported Spare Cores
types, the similarity model's own intervals were 30x too wide on types with the full suite and too
narrow on the others, so one scale could not fit both (docs/sparecores-trace.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from registry.values import plural

NOMINAL = 0.8          # the share of outcomes an interval is meant to hold
MIN_CHECKS = 10        # checked predictions below which no calibration is attempted
MIN_HALF_WIDTH = 0.05  # ln(1.05): repetition noise of profile medians and of program runs


@dataclass
class Calibration:
    """How the intervals of one model and version, in one group of nodes, are scaled, and what that
    rests on: this registry's checked predictions, or (`shipped`, where the registry has too few)
    the calibration measured for nodereg's release and shipped with it (registry.match.calibration)."""
    model: str
    version: str
    checks: int                # checked predictions (runs measured after them)
    scale: float = 1.0         # half-width multiplier
    nominal: float = NOMINAL
    group: str = ""            # the nodes it applies to (registry.match.calibration.node_groups)
    shipped: str | None = None  # where a shipped calibration was measured (None: this registry's checks)

    @property
    def calibrated(self) -> bool:
        return self.checks >= MIN_CHECKS

    def describe(self) -> str:
        who = f"{self.model} {self.version}"
        where = f" on {self.group} nodes" if self.group else ""
        if not self.calibrated:
            return (f"intervals{where}: the model's own, uncalibrated ({plural(self.checks, 'checked prediction')} "
                    f"of {who}, fewer than {MIN_CHECKS}; `nodereg accuracy` reports their coverage)")
        if self.shipped:
            return (f"intervals{where}: {self.nominal:.0%} by the conformal calibration shipped with nodereg "
                    f"({self.checks:,} checked predictions of {who}: {self.shipped}; half-widths x{self.scale:.2f})")
        return (f"intervals{where}: {self.nominal:.0%} by conformal calibration on {self.checks} checked predictions "
                f"of {who} (half-widths x{self.scale:.2f})")

    def to_dict(self) -> dict:
        return {"method": "conformal" if self.calibrated else "uncalibrated", "model": self.model,
                "version": self.version, "checks": self.checks, "scale": self.scale, "nominal": self.nominal,
                "group": self.group, "source": "shipped" if self.shipped else "registry"}


@dataclass
class Calibrations:
    """The calibration of each group a match's nodes fall in, and each node's group."""
    by_group: dict[str, Calibration]
    node_group: dict[str, str]     # node -> its group (a node not in it: `default`)
    default: str

    def scales(self, nodes: list[str]) -> tuple[list[str], list[float]]:
        """Each node's group and half-width multiplier."""
        scale = {g: c.scale if c.calibrated else 1.0 for g, c in self.by_group.items()}
        groups = [self.node_group.get(n, self.default) for n in nodes]
        return groups, [scale[g] for g in groups]

    def used(self) -> list[Calibration]:
        """The calibrations of the groups that hold nodes, the group of most nodes first."""
        counts: dict[str, int] = {}
        for g in self.node_group.values():
            counts[g] = counts.get(g, 0) + 1
        order = sorted(counts, key=lambda g: (-counts[g], g)) or [self.default]
        return [self.by_group[g] for g in order]

    def describe(self) -> list[str]:
        return [c.describe() for c in self.used()]

    def to_dict(self) -> dict:
        """The group of most nodes' calibration, with every used group's under `groups`."""
        used = self.used()
        return {**used[0].to_dict(), "groups": {c.group: c.to_dict() for c in used}}


MEAN_ABS_TO_BAND = 1.6  # an 80% normal band is 1.28 sigma, a mean absolute deviation 0.8 sigma


def rss(*parts):
    """The root sum of squares of independent log half-widths (floats or numpy arrays alike): the
    one rule by which every source of error is added to an interval."""
    return sum(p * p for p in parts) ** 0.5


def distance_width(slope, distance):
    """The log half-width for a query `distance` (standardised signature units) away from its
    nearest reference, where `slope` is how much the log ratio moves per unit of distance between
    neighbouring references (the similarity model learns it per node); an 80% band."""
    return MEAN_ABS_TO_BAND * slope * distance


def profile_noise(cv_base, cv_node):
    """Log half-width of a node-to-base ratio from the two profiles' dispersion: each profile's
    root-mean-square coefficient of variation over its configs' repetitions (a profile's medians
    move between profiles by at least that much), added by `rss`, at an 80% band (1.28 sigma); `cv_node`
    may be an array of every node's."""
    return 1.28 * rss(0.0 if cv_base is None else cv_base, 0.0 if cv_node is None else cv_node)


def half_widths(predicted, low, high):
    """(ln(t / low), ln(high / t)), each at least MIN_HALF_WIDTH (infinite where an end or t is not
    positive). Floats, or numpy arrays of every node's figures alike (a 10,000-node match widens
    every interval in a few array operations)."""
    t, lo, hi = (np.asarray(x, dtype=float) for x in (predicted, low, high))
    with np.errstate(divide="ignore", invalid="ignore"):
        down = np.where((lo > 0) & (t > 0), np.log(t / np.where(lo > 0, lo, 1.0)), np.inf)
        up = np.where((t > 0) & (hi > 0), np.log(hi / np.where(t > 0, t, 1.0)), np.inf)
    return _same_kind(np.maximum(down, MIN_HALF_WIDTH), predicted), _same_kind(np.maximum(up, MIN_HALF_WIDTH), predicted)


def combine(predicted, low, high, *extra, below=0.0, above=0.0):
    """(low, high) of an interval widened by independent log half-widths `extra` (root sum of
    squares) and floored at MIN_HALF_WIDTH; floats or arrays, as `half_widths`. `below` / `above`:
    a log half-width added (the same way) to one end only, for an error known to lie on one side
    (a scaling curve whose backtest predicted too short a time widens the high end)."""
    down, up = half_widths(predicted, low, high)
    more = rss(*extra)
    return (_same_kind(predicted * np.exp(-rss(down, more, below)), predicted),
            _same_kind(predicted * np.exp(rss(up, more, above)), predicted))


def scaled(predicted, low, high, scale):
    """(low, high) with both half-widths multiplied by `scale`, never below MIN_HALF_WIDTH (a scale
    below 1 narrows the model's interval, not the repetition noise under it); floats or arrays."""
    down, up = half_widths(predicted, low, high)
    return (_same_kind(predicted * np.exp(-np.maximum(scale * down, MIN_HALF_WIDTH)), predicted),
            _same_kind(predicted * np.exp(np.maximum(scale * up, MIN_HALF_WIDTH)), predicted))


def _same_kind(value, like):
    """`value` as a float where `like` is a scalar (callers format and store plain numbers)."""
    return float(value) if np.ndim(like) == 0 else value


def score(predicted: float, low: float, high: float, measured: float, applied_scale: float = 1.0) -> float:
    """The normalised nonconformity of one checked prediction: how many of the model's own
    half-widths (the stored ones divided by the scale applied to them) the outcome lay out."""
    down, up = half_widths(predicted, low, high)
    gap = math.log(measured / predicted)
    return abs(gap) / ((up if gap > 0 else down) / applied_scale)


def conformal_scale(scores: list[float], nominal: float = NOMINAL) -> float:
    """The split-conformal quantile of `scores`: the ceil((n + 1) nominal)-th smallest (the largest
    when that exceeds n)."""
    ordered = sorted(s for s in scores if math.isfinite(s))
    if not ordered:
        return 1.0
    k = min(len(ordered), math.ceil((len(ordered) + 1) * nominal))
    return max(ordered[k - 1], 1e-3)


def covered(low: float | None, measured: float, high: float | None) -> bool | None:
    """Whether the interval holds the outcome (None where the prediction has no interval)."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    return low <= measured <= high


def base_noise(times_s: list[float]) -> float:
    """Log half-width of a median base time from its samples: the sample standard deviation of the
    log times over sqrt(n), times 1.25 (the median's efficiency), at a 1.28-sigma (80%) band; 0 for
    fewer than two samples (the single run's noise is then unknown: the floor covers some of it)."""
    logs = [math.log(t) for t in times_s if t > 0]
    if len(logs) < 2:
        return 0.0
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    return 1.28 * 1.25 * sd / math.sqrt(len(logs))
