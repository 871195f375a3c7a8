"""The ``corredor`` projection model: Corredor (2011)'s method, exactly, as a model plugin.

Inputs are explicit (the generic ReferenceSet of signatures does not carry stream descriptors):

* ``fit(profiles=..., node_tpi=..., base_node=..., zones=...)``: the microbenchmark configs measured
  on the base node (``Profile``: config identity, its ``ub_streams`` as ``Stream``s, its
  ``profile_runs.tpi_us`` on the base node) and ``node_tpi[config][node]``, the time per iteration
  of that config on every node. When the application runs with a different thread count on a node
  (all of that node's CPUs), the caller puts the tpi of the config's counterpart at that thread
  count under the same config identity. ``zones`` come from ``load_zones(conn)`` (the registry's
  corredor_zones table); they may also be given to the constructor.
* ``predict(query, nodes)`` with a ``PhasesQuery`` (or ``predict_phases(phases, nodes, total_s)``):
  the application's phases on the base node with their streams, time per iteration, time and
  iterations, plus the application's total time on the base node.

The answer per node is the sum of the phase estimates plus the unmatched remainder projected by the
fallback of ``corredor_estimate``; the explanation carries each phase's winner, index and
sub-indexes, and the coverage. The method has no learned parameters: ``params()`` holds its
thresholds (zones and selection rules); the reference data is re-read from the registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from registry.errors import UserError
from registry.models.corredor.estimate import ESTIMATES, NodeTpi, project
from registry.models.corredor.index import Comparison, Phase, Profile, Stream
from registry.models.corredor.select import PhaseMatch, SelectionRules, match_phase
from registry.models.corredor.zones import Zones, load_zones
from registry.models.base import NEEDS_STREAMS, NodePrediction, NotFittedError, ProjectionModel, Query, ReferenceSet
from registry.models.options import Option

__all__ = ["CorredorModel", "Phase", "PhasesQuery", "Profile", "SelectionRules", "Stream", "Zones",
           "load_zones", "match_phase"]


@dataclass
class PhasesQuery(Query):
    """A Query that carries the application's phases (stream descriptors) on the base node."""

    phases: tuple[Phase, ...] = field(default=())

    @classmethod
    def of(cls, name: str, phases: Sequence[Phase], total_s: float | None = None) -> PhasesQuery:
        """A query from phases alone; the total defaults to the phases' own time (full coverage)."""
        total = sum(p.time_s for p in phases) if total_s is None else float(total_s)
        return cls(name, {}, total, tuple(phases))


def _match_details(m: PhaseMatch) -> dict:
    w: Comparison | None = m.winner
    return {"phase": m.phase.name, "weight": m.phase.weight, "winner": None if w is None else w.profile.config,
            "query": None if w is None else w.query_label(), "index": m.index,
            "sub_indexes": None if w is None else dict(w.sub), "tightenings": m.zones.tightenings,
            "candidates": [{"config": c.profile.config, "query": c.query_label(), "index": c.index}
                           for c in m.candidates],
            "notes": list(m.notes), "nearest_discarded": _discarded(m.nearest_discarded())}


def _discarded(c: Comparison | None) -> dict | None:
    """The closest discarded comparison, with the largest difference (d%) of each discarding feature."""
    if c is None:
        return None
    return {"config": c.profile.config, "query": c.query_label(), "discarded_by": list(c.discarded_by),
            "d_pct": {f: round(max(c.d_pct[f]), 1) for f in c.discarded_by}}


class CorredorModel(ProjectionModel):
    """The thesis's matcher and estimator behind the ProjectionModel interface (inputs: module docstring)."""

    name = "corredor"
    description = ("Corredor (2011): stream-descriptor similarity index (zones of Table 3.21, out of 125) "
                   "between each phase and the microbenchmark configs on the base node; the phase time on a "
                   "node is the winning config's time per iteration there x the phase's iterations.")
    needs = frozenset({NEEDS_STREAMS})
    options = (Option("estimate", str, "auto", "thesis: the winner's time per iteration on each node x the "
                      "phase's iterations (Corredor 2011); ratio: the phase's time x the winner's time per "
                      "iteration on the node / on the base node (the phase's own time on the base node); auto: "
                      "thesis where the winner's time per iteration scores in the zones (iZ > 0), else ratio",
                      choices=ESTIMATES),
               Option("unmatched", str, "similarity", "what `nodereg match` does with a phase no config survives "
                      "the discards for: similarity: projects it by the default model from its signature; "
                      "remainder: the thesis's rule, it joins the unprojected rest (its base time when nothing "
                      "else is projected)", choices=("similarity", "remainder")))

    def __init__(self, zones: Zones | None = None, rules: SelectionRules | None = None, estimate: str = "auto",
                 unmatched: str = "similarity"):
        self.zones = zones
        self.rules = rules or SelectionRules()
        self.estimate = estimate
        self.unmatched = unmatched
        self.profiles: tuple[Profile, ...] = ()
        self.node_tpi: NodeTpi = {}
        self.base_node: str | None = None

    def fit(self, refs: ReferenceSet | None = None, *, profiles: Sequence[Profile] = (),
            node_tpi: NodeTpi | None = None, base_node: str | None = None,
            zones: Zones | None = None) -> CorredorModel:
        """Take the configs measured on the base node and their per-node times per iteration."""
        if refs is not None and not profiles:
            raise UserError("the corredor model needs stream descriptors of the microbenchmark configs, "
                            "which a signature reference set does not carry")
        self.zones = zones or self.zones
        if self.zones is None:
            raise UserError("the corredor model needs its zones (load_zones on the registry)")
        base_node = base_node or (refs.base_node if refs is not None else None)
        if not base_node:
            raise UserError("the corredor model needs the base node")
        if not profiles:
            raise UserError(f"no microbenchmark config with stream descriptors is measured on {base_node}")
        configs = [p.config for p in profiles]
        if len(set(configs)) != len(configs):
            raise UserError("duplicate config identities among the corredor profiles")
        self.profiles, self.base_node = tuple(profiles), base_node
        self.node_tpi = dict(node_tpi or {})
        return self

    def match(self, phases: Sequence[Phase]) -> list[PhaseMatch]:
        if self.base_node is None or self.zones is None:
            raise NotFittedError(self.name)
        return [match_phase(ph, self.profiles, self.zones, self.rules) for ph in phases]

    def predict_phases(self, phases: Sequence[Phase], nodes: Sequence[str],
                       total_s: float | None = None) -> list[NodePrediction]:
        """Predicted time per node: the matched phases summed plus the remainder (see corredor_estimate).

        ``explanation['phases']`` holds each phase's winner, index and estimate on that node;
        ``explanation['matches']`` (one list shared by every node) the matching details: query,
        sub-indexes, close candidates, tightenings and notes.
        """
        if not phases:
            raise UserError("the corredor model needs the application's phases with stream descriptors")
        matches = self.match(phases)
        winners = [_match_details(m) for m in matches]
        preds = []
        for pr in project(matches, self.node_tpi, list(nodes), self.base_node, total_s,
                          estimate=self.estimate):
            per_phase = [{"phase": e.phase, "winner": e.config, "index": m.index, "estimate_s": e.estimate_s,
                          "method": e.method} for m, e in zip(matches, pr.phases)]
            preds.append(NodePrediction(pr.node, pr.predicted_s, pr.low_s, pr.high_s, explanation={
                "model": self.name, "base_node": self.base_node, "coverage": pr.coverage,
                "remainder_base_s": pr.remainder_base_s, "remainder_ratio": pr.remainder_ratio,
                "zones_version": self.zones.version, "phases": per_phase, "matches": winners},
                warnings=list(pr.warnings)))
        return preds

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.base_node is None or self.zones is None:
            raise NotFittedError(self.name)
        phases = getattr(query, "phases", ())
        if not phases:
            raise UserError(f"{query.name}: the corredor model needs phases with stream descriptors "
                            "(`nodereg trace --streams -- CMD`, or NODEREG_PHASE_STREAM markers)")
        return self.predict_phases(phases, nodes, query.base_time_s)

    def params(self) -> dict:
        if self.zones is None:
            raise UserError("the corredor model has no zones yet")
        return {"zones": self.zones.to_dict(), "rules": self.rules.to_dict(), "base_node": self.base_node,
                "estimate": self.estimate, "unmatched": self.unmatched}

    @classmethod
    def from_params(cls, params: Mapping) -> CorredorModel:
        model = cls(Zones.from_dict(params["zones"]), SelectionRules(**params.get("rules", {})),
                    params.get("estimate", "thesis"), params.get("unmatched", "similarity"))
        model.base_node = params.get("base_node")
        return model

    def describe(self) -> str:
        zones = "no zones" if self.zones is None else f"zones version {self.zones.version}"
        return (f"{self.description} Base node {self.base_node or '?'}, {len(self.profiles)} configs, {zones}, "
                f"at most {self.rules.max_candidates} close candidates before tightening, {self.estimate} estimate, "
                f"unmatched phases by {self.unmatched}.")

