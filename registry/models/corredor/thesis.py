"""The published inputs of Corredor (2011) and their reproduction with the ``corredor`` model.

The thesis compares each phase with the profile rows it prints for that case (Tables 3.22/3.25 for
MM 4000x4000, 4.5/4.8 for MM 5000x5000, ...: "examples of the profile database selected to apply
the comparison algorithm"), so each case is matched against its own tables, not against their
union (against the union, MM 5000x5000 would prefer mbw1hc(15869,8) of Table 3.22, index 100).
Per-node times per iteration are published only for the selected configs (the estimation tables).

The data file (``registry/models/corredor/data/corredor2011.json``, shipped in the package: ``DATA``)
holds the tables as printed plus the errata; the ones with ``patches`` are applied unless
``errata=False`` (see docs/corredor.md).
"""

from __future__ import annotations

import copy
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from registry.errors import UserError
from registry.models.corredor.model import CorredorModel
from registry.models.corredor.estimate import estimate_phase
from registry.models.corredor.index import Phase, Profile, Stream
from registry.models.corredor.select import PhaseMatch, SelectionRules
from registry.models.corredor.zones import Zones
from registry.models.base import NodePrediction

DATA = Path(__file__).resolve().parent / "data" / "corredor2011.json"   # package data (the wheel has it)


def config_name(ub: str, streams: Sequence[Sequence]) -> str:
    """The thesis's notation: ub(k1,s1[,k2,s2...]) with k in its "KB" units and s in bytes."""
    return f"{ub}({','.join(f'{s[0]:g},{s[1]:g}' for s in streams)})"


def _streams(raw) -> tuple[Stream, ...]:
    return tuple(Stream.from_kb(size_kb, stride, elem_bytes, access) for size_kb, stride, elem_bytes, access in raw)


@dataclass(frozen=True)
class ThesisCase:
    case: str
    title: str
    sources: dict
    phase: Phase                       # the characterized phase (what the thesis estimates)
    app_phases: tuple[Phase, ...]      # the application's significant phases, for the app-level projection
    total_s: float
    candidates: tuple[Profile, ...]
    node_tpi: dict[str, dict[str, float]]
    thesis: dict


@dataclass(frozen=True)
class ThesisData:
    nodes: tuple[str, ...]
    base_node: str
    cases: tuple[ThesisCase, ...]
    errata: tuple[dict, ...]
    applied: tuple[str, ...]           # ids of the errata whose patches were applied
    aggregate: dict


def _apply_patches(tables: dict, errata: list[dict]) -> list[str]:
    applied = []
    for erratum in errata:
        for patch in erratum.get("patches", ()):
            rows = [r for r in tables[patch["table"]]["rows"] if config_name(r["ub"], r["streams"]) == patch["row"]]
            if len(rows) != 1:
                raise UserError(f"erratum {erratum['id']}: no single row {patch['row']} in Table {patch['table']}")
            rows[0].update(patch["set"])
        if erratum.get("patches"):
            applied.append(erratum["id"])
    return applied


def load_thesis(path: Path = DATA, errata: bool = True) -> ThesisData:
    """Read the published inputs; `errata` applies the patches the thesis's own tables imply."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the thesis data {path}: {exc}") from None
    tables = copy.deepcopy(data["tables"])
    applied = _apply_patches(tables, data["errata"]) if errata else []
    cases = []
    for c in data["cases"]:
        rows = [r for t in c["sources"]["candidates"] for r in tables[t]["rows"]]
        profiles = tuple(Profile(config_name(r["ub"], r["streams"]), _streams(r["streams"]), r["tpi_us"], r["ub"])
                         for r in rows)
        ph = c["phase"]
        phase = Phase(ph["name"], _streams(ph["streams"]), ph["tpi_us"], ph["time_s"], ph["iterations_e6"] * 1e6,
                      ph["time_s"] / c["total_s"])
        app_phases = (phase,) if len(c["app_phases"]) == 1 else tuple(
            Phase(a["name"], phase.streams, phase.tpi_us, a["time_s"], weight=a["time_s"] / c["total_s"])
            for a in c["app_phases"])
        est = c["estimation"]
        cases.append(ThesisCase(c["case"], c["title"], c["sources"], phase, app_phases, c["total_s"], profiles,
                                {est["config"]: dict(est["tpi_us"])}, c["thesis"]))
    return ThesisData(tuple(data["nodes"]), data["base_node"], tuple(cases), tuple(data["errata"]),
                      tuple(applied), data["aggregate"])


@dataclass(frozen=True)
class CaseResult:
    case: ThesisCase
    match: PhaseMatch
    estimates_s: dict[str, float | None]     # the characterized phase on each node
    app: list[NodePrediction]                # the application: phases + remainder fallback

    @property
    def winner(self) -> str | None:
        return None if self.match.winner is None else self.match.winner.profile.config

    def errors_pct(self) -> dict[str, float | None]:
        real = self.case.thesis["real_s"]
        return {n: None if e is None else abs(real[n] - e) / real[n] * 100 for n, e in self.estimates_s.items()}

    def as_json(self) -> dict:
        return {"case": self.case.case, "winner": self.winner, "index": self.match.index,
                "estimates_s": self.estimates_s}


def reproduce_case(case: ThesisCase, nodes: Sequence[str], base_node: str, zones: Zones,
                   rules: SelectionRules | None = None) -> CaseResult:
    model = CorredorModel(zones, rules).fit(profiles=case.candidates, node_tpi=case.node_tpi, base_node=base_node)
    (match,) = model.match([case.phase])
    profile = None if match.winner is None else match.winner.profile
    estimates = {n: estimate_phase(case.phase, profile, case.node_tpi, n, base_node).estimate_s for n in nodes}
    return CaseResult(case, match, estimates, model.predict_phases(case.app_phases, nodes, case.total_s))


def reproduce(data: ThesisData, zones: Zones, rules: SelectionRules | None = None) -> list[CaseResult]:
    return [reproduce_case(c, data.nodes, data.base_node, zones, rules) for c in data.cases]


def aggregate(results: Sequence[CaseResult], base_node: str) -> dict:
    """Errors over the target-node predictions and whether the fastest node is picked right."""
    errors, correct, complete = [], 0, 0
    for r in results:
        errs = r.errors_pct()
        errors += [e for n, e in errs.items() if n != base_node and e is not None]
        if all(e is not None for e in r.estimates_s.values()):
            complete += 1
            real = r.case.thesis["real_s"]
            correct += min(r.estimates_s, key=r.estimates_s.get) == min(real, key=real.get)
    return {"predictions": len(errors), "mean_error_pct": statistics.mean(errors) if errors else None,
            "median_error_pct": statistics.median(errors) if errors else None,
            "max_error_pct": max(errors, default=None), "best_node_correct": correct, "cases": len(results),
            "cases_estimated": complete}


def rounding_tolerance_s(case: ThesisCase) -> float:
    """How far an estimate from the printed 5-digit tpi may lie from the printed estimate: half a unit
    of the tpi's last digit times the iterations, plus half a unit of the estimate's last digit."""
    return 0.5e-5 * 1e-6 * case.phase.iterations + 0.005


def agrees_with_thesis(result: CaseResult) -> list[str]:
    """What differs from the thesis beyond rounding (empty: winner, index and estimates agree)."""
    thesis, problems = result.case.thesis, []
    if result.winner != thesis["winner"]:
        problems.append(f"winner {result.winner} (thesis {thesis['winner']})")
    if result.match.index != thesis["index"]:
        problems.append(f"index {result.match.index} (thesis {thesis['index']})")
    tol = rounding_tolerance_s(result.case)
    for node, published in thesis["estimates_s"].items():
        ours = result.estimates_s.get(node)
        if ours is None or abs(ours - published) > tol:
            shown = "none" if ours is None else f"{ours:.2f}"
            problems.append(f"{node} estimate {shown} (thesis {published:.2f}, tolerance {tol:.3g} s)")
    return problems
