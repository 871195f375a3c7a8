"""The thresholds of the thesis's similarity index (Corredor 2011, Table 3.21) as data.

The zones live in the registry tables ``corredor_zones`` / ``corredor_discards`` (versioned, seeded
as version 1 by migration 0001), never as constants in code: the thesis says they are expert-set
initial values to be tuned. ``load_zones`` reads one version into an immutable ``Zones`` object that
the matcher takes as an argument.

Semantics (as in the schema's comment): a feature's score is that of the first zone, by increasing
``max_pct``, whose ``max_pct >= d%`` (boundaries inclusive, as the thesis's "<= 2%"); a d% beyond the
last zone scores 0; a d% above ``discard_pct`` discards the candidate. Categorical features (dtype,
access) are compared as d% = 0 when equal and 100 otherwise, so the single zone ``max_pct = 0``
gives "equal: 25, different: 0".
"""

from __future__ import annotations

from dataclasses import dataclass

from registry.db.statement import execute
from registry.errors import UserError

FEATURES = ("size", "stride", "dtype", "access", "tpi")
CATEGORICAL = frozenset({"dtype", "access"})

# Percentages are computed in floating point: 122/6103*100 must count as "<= 2%" when it prints as
# 2.00%; this tolerance (in percentage points) absorbs rounding noise only, never a real difference.
_EPS_PCT = 1e-9


@dataclass(frozen=True)
class FeatureZones:
    """Scoring zones of one feature: ``zones`` are (max_pct, score) sorted by max_pct."""

    feature: str
    zones: tuple[tuple[float, float], ...]
    discard_pct: float | None = None

    def __post_init__(self):
        if self.feature not in FEATURES:
            raise UserError(f"unknown corredor feature {self.feature!r} (expected one of {', '.join(FEATURES)})")
        if list(self.zones) != sorted(self.zones):
            raise UserError(f"corredor zones of {self.feature!r} must be sorted by max_pct")

    def discards(self, d_pct: float) -> bool:
        return self.discard_pct is not None and d_pct > self.discard_pct + _EPS_PCT

    def score(self, d_pct: float) -> float:
        """Score of the first zone that holds d_pct (0 beyond the last zone); discards are separate."""
        for max_pct, score in self.zones:
            if d_pct <= max_pct + _EPS_PCT:
                return score
        return 0.0

    @property
    def max_score(self) -> float:
        return max((s for _, s in self.zones), default=0.0)

    def tightened(self, factor: float) -> FeatureZones:
        """Every percentage bound multiplied by `factor` (< 1: more selective); scores unchanged."""
        return FeatureZones(self.feature, tuple((m * factor, s) for m, s in self.zones),
                            None if self.discard_pct is None else self.discard_pct * factor)


@dataclass(frozen=True)
class Zones:
    """One version of the thresholds: one ``FeatureZones`` per feature of the index."""

    version: int
    features: tuple[FeatureZones, ...]
    tightenings: int = 0   # how many times the margins were tightened (see corredor_select)

    def __post_init__(self):
        names = [f.feature for f in self.features]
        missing = [f for f in FEATURES if f not in names]
        if missing or len(names) != len(set(names)):
            raise UserError(f"corredor zones version {self.version} must define each of {', '.join(FEATURES)} "
                            f"once (missing: {', '.join(missing) or 'none'})")

    def __getitem__(self, feature: str) -> FeatureZones:
        for f in self.features:
            if f.feature == feature:
                return f
        raise KeyError(feature)

    @property
    def max_index(self) -> float:
        """The best possible index (125 with the thesis's values)."""
        return sum(f.max_score for f in self.features)

    def tightened(self, factor: float) -> Zones:
        return Zones(self.version, tuple(f.tightened(factor) for f in self.features), self.tightenings + 1)

    def to_dict(self) -> dict:
        return {"version": self.version, "tightenings": self.tightenings,
                "features": {f.feature: {"zones": [list(z) for z in f.zones], "discard_pct": f.discard_pct}
                             for f in self.features}}

    @classmethod
    def from_dict(cls, data: dict) -> Zones:
        feats = tuple(FeatureZones(name, tuple((float(m), float(s)) for m, s in spec["zones"]),
                                   None if spec.get("discard_pct") is None else float(spec["discard_pct"]))
                      for name, spec in data["features"].items())
        return cls(int(data["version"]), feats, int(data.get("tightenings", 0)))


def zones_from_rows(version: int, zone_rows, discard_rows) -> Zones:
    """Build a Zones object from (feature, max_pct, score) and (feature, discard_pct) rows."""
    by_feature: dict[str, list[tuple[float, float]]] = {}
    for feature, max_pct, score in zone_rows:
        by_feature.setdefault(feature, []).append((float(max_pct), float(score)))
    discards = {feature: float(pct) for feature, pct in discard_rows}
    unknown = (set(by_feature) | set(discards)) - set(FEATURES)
    if unknown:
        raise UserError(f"corredor zones version {version} name unknown features: {', '.join(sorted(unknown))}")
    return Zones(version, tuple(FeatureZones(f, tuple(sorted(by_feature.get(f, []))), discards.get(f))
                                for f in FEATURES if f in by_feature or f in discards))


def load_zones(conn, version: int | None = None) -> Zones:
    """Read one version of corredor_zones/corredor_discards (the latest when `version` is None), on a
    SQLAlchemy connection or the quick reader of `match` (registry/db/duckread.py)."""
    if version is None:
        version = execute(conn, "SELECT max(version) FROM corredor_zones").scalar_one()
        if version is None:
            raise UserError("the registry holds no corredor zones (table corredor_zones is empty)")
    zone_rows = execute(conn, "SELECT feature, max_pct, score FROM corredor_zones WHERE version = :v",
                        {"v": version}).all()
    if not zone_rows:
        raise UserError(f"no corredor zones with version {version} in the registry")
    discard_rows = execute(conn, "SELECT feature, discard_pct FROM corredor_discards WHERE version = :v",
                           {"v": version}).all()
    return zones_from_rows(int(version), zone_rows, discard_rows)
