"""Choosing the profile that represents a phase (Corredor 2011, section 3.1.3, Fig. 3.18).

The thesis: the candidate with the highest similarity index wins; "if the number of similar
candidates is high (above a threshold, 5 in this work) the similarity margins can be adjusted so
that the algorithm is more selective"; and when the maximum is duplicated, "the thresholds are
adjusted until a single maximum appears". Both adjustments are left to an expert there. Here they
are deterministic:

* **More than five candidates.** A candidate is a config whose best non-discarded comparison is
  within ``close_points`` of the best index. While there are more than ``max_candidates`` of them,
  every percentage bound of the zones (and every discard threshold) is multiplied by
  ``tighten_factor`` and the phase is compared again, at most ``max_tightenings`` times; a round
  that would discard every candidate is not taken.
* **Ties.** Refining the zones until one maximum remains amounts, in the limit, to ordering the tied
  candidates by their raw differences. We do that directly: highest index, then the query covering
  more of the phase's streams, then the smallest tpi d% (the quantity the estimate rests on), then
  the smallest mean size d%, the smallest mean stride d%, and finally the config name and query
  (so the answer never depends on input order).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from registry.models.corredor.index import Comparison, Phase, Profile, compare, queries
from registry.models.corredor.zones import Zones


@dataclass(frozen=True)
class SelectionRules:
    """The thesis's selection constants (section 3.1.3): 5 candidates at most, then tighten."""

    max_candidates: int = 5
    close_points: float = 5.0      # one zone step of one feature
    tighten_factor: float = 0.5
    max_tightenings: int = 3

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _mean(values) -> float:
    return sum(values) / len(values)


def tie_key(c: Comparison) -> tuple:
    """Sort key: best comparison first (see the module docstring for the order and why)."""
    return (-(c.index if c.index is not None else float("-inf")), -len(c.query), c.d_pct["tpi"][0],
            _mean(c.d_pct["size"]), _mean(c.d_pct["stride"]), c.profile.config, c.query)


def compare_all(phase: Phase, profiles: Sequence[Profile], zones: Zones) -> list[Comparison]:
    """Every query of the phase against every profile with as many streams (Tables 3.23-3.26)."""
    by_n: dict[int, list[Profile]] = {}
    for p in profiles:
        by_n.setdefault(len(p.streams), []).append(p)
    return [compare(phase, q, p, zones) for q in queries(len(phase.streams)) for p in by_n.get(len(q), ())]


def close_candidates(comparisons: Iterable[Comparison], rules: SelectionRules) -> list[Comparison]:
    """Each config's best surviving comparison, kept when within close_points of the top, best first."""
    best: dict[str, Comparison] = {}
    for c in comparisons:
        if c.index is not None and (c.profile.config not in best or tie_key(c) < tie_key(best[c.profile.config])):
            best[c.profile.config] = c
    ranked = sorted(best.values(), key=tie_key)
    if not ranked:
        return []
    top = ranked[0].index
    return [c for c in ranked if c.index >= top - rules.close_points]


def query_maxima(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """The best surviving comparisons of each query (one, or several tied), ties included (the thesis's Table 3.27)."""
    by_query: dict[tuple[int, ...], list[Comparison]] = {}
    for c in comparisons:
        if c.index is not None:
            by_query.setdefault(c.query, []).append(c)
    out = []
    for q in sorted(by_query, key=lambda q: (len(q), q)):
        top = max(c.index for c in by_query[q])
        out.extend(sorted((c for c in by_query[q] if c.index == top), key=tie_key))
    return out


@dataclass(frozen=True)
class PhaseMatch:
    """The outcome of matching one phase: the winner (None: no similar profile) and why."""

    phase: Phase
    winner: Comparison | None
    candidates: tuple[Comparison, ...]        # the close candidates, best first
    maxima: tuple[Comparison, ...]            # per-query maxima (Table 3.27)
    comparisons: tuple[Comparison, ...]       # every comparison of the final round
    zones: Zones                              # the zones of the final round
    notes: tuple[str, ...] = field(default=())

    @property
    def index(self) -> float | None:
        return None if self.winner is None else self.winner.index

    def nearest_discarded(self) -> Comparison | None:
        """With no winner, the comparison that came closest: fewest features past their discard
        threshold, then the tie order. It tells the user which feature no config matches."""
        if self.winner is not None or not self.comparisons:
            return None
        return min(self.comparisons, key=lambda c: (len(c.discarded_by), c.d_pct["tpi"][0], tie_key(c)[3:]))


def match_phase(phase: Phase, profiles: Sequence[Profile], zones: Zones,
                rules: SelectionRules = SelectionRules()) -> PhaseMatch:
    """Compare the phase with every profile and pick the winner by the thesis's rules."""
    comps = compare_all(phase, profiles, zones)
    close = close_candidates(comps, rules)
    current, notes = zones, []
    while len(close) > rules.max_candidates and current.tightenings - zones.tightenings < rules.max_tightenings:
        tighter = current.tightened(rules.tighten_factor)
        t_comps = compare_all(phase, profiles, tighter)
        t_close = close_candidates(t_comps, rules)
        if not t_close:
            notes.append(f"{len(close)} close candidates; tightening the margins again would discard all of them")
            break
        notes.append(f"{len(close)} close candidates (> {rules.max_candidates}): margins x{rules.tighten_factor:g}")
        comps, close, current = t_comps, t_close, tighter
    if len(close) > 1 and close[0].index == close[1].index:
        notes.append(f"{sum(c.index == close[0].index for c in close)} candidates tie at index "
                     f"{close[0].index:g}: broken by streams covered, then tpi, size and stride differences")
    return PhaseMatch(phase, close[0] if close else None, tuple(close), tuple(query_maxima(comps)),
                      tuple(comps), current, tuple(notes))
