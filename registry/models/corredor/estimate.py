"""Projecting matched phases onto nodes (Corredor 2011, section 3.1.4), and the unmatched rest.

Per phase the thesis estimates ``T_est(X) = tpi(winning config measured on X) x iterations`` (the
phase's loop iterations on the base node). When the iterations are unknown we use the
ratio form ``phase time x tpi(X) / tpi(base)``. The thesis's form carries the difference between
the phase's tpi and its winner's, which the index lets through up to its discard threshold (80%),
into every node's estimate, the base node's included; the ratio form keeps the phase's own time on
the base node and takes only the winner's change from node to node. ``estimate``: 'thesis' (always
the thesis's form, with iterations), 'ratio' (always the ratio form), 'auto' (the model's default:
the thesis's form when the winner's tpi scores in the zones, iZ > 0, i.e. within 20% of the
phase's with the thesis's zones, as every winner of the thesis's seven cases; else the ratio form:
n-body traced here won a config at index 65 with iZ 0, whose tpi put the thesis's estimate 79%
low on every node). Phases are summed.

The thesis stops there (it models only significant phases; BT leaves about 65% unmodelled). An
application also has a remainder: its total time minus the phases projected on that node (phases
with no similar profile, or whose winning config was not measured on X). Fallback, documented: the
remainder scales like the projected part as a whole, ``remainder x sum(est(X)) / sum(est(base))``;
the interval lets it range from "unchanged" to the fastest/slowest projected phase's ratio,
``[min(1, min r_p), max(1, max r_p)]``, so it is zero-width when everything is covered. ``coverage``
is the share of the base node's total time that the projected phases account for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from registry.models.corredor.index import Phase, Profile
from registry.models.corredor.select import PhaseMatch

NodeTpi = Mapping[str, Mapping[str, float]]   # config -> node -> time per iteration (us) on that node


@dataclass(frozen=True)
class PhaseEstimate:
    phase: str
    node: str
    config: str | None
    estimate_s: float | None
    method: str        # 'tpi x iterations' | 'time x tpi ratio' | 'no similar profile' | 'config not measured'
    #                    | 'no base time' (the config's time per iteration on the base node is 0: no ratio)


def node_tpi_of(profile: Profile, node_tpi: NodeTpi, node: str, base_node: str) -> float | None:
    """The config's time per iteration on `node`; on the base node the profile's own value is the default."""
    tpi = node_tpi.get(profile.config, {}).get(node)
    if tpi is None and node == base_node:
        return profile.tpi_us
    return tpi


def estimate_phase(phase: Phase, profile: Profile | None, node_tpi: NodeTpi, node: str,
                   base_node: str, ratio: bool = False) -> PhaseEstimate:
    """The thesis's estimate of one phase on one node (`ratio`: the ratio form, module docstring)."""
    if profile is None:
        return PhaseEstimate(phase.name, node, None, None, "no similar profile")
    tpi_x = node_tpi_of(profile, node_tpi, node, base_node)
    if tpi_x is None:
        return PhaseEstimate(phase.name, node, profile.config, None, "config not measured")
    if phase.iterations and not ratio:
        return PhaseEstimate(phase.name, node, profile.config, tpi_x * 1e-6 * phase.iterations,
                             "tpi x iterations")
    tpi_b = node_tpi_of(profile, node_tpi, base_node, base_node)
    if not tpi_b:  # 0 (or unknown) on the base node: no ratio to scale by; the phase joins the remainder
        return PhaseEstimate(phase.name, node, profile.config, None, "no base time")
    return PhaseEstimate(phase.name, node, profile.config, phase.time_s * tpi_x / tpi_b, "time x tpi ratio")


@dataclass(frozen=True)
class AppProjection:
    """An application's projected time on one node, with the share of it the phases explain."""

    node: str
    predicted_s: float
    low_s: float
    high_s: float
    coverage: float                    # share of the base total explained by projected phases
    phases: tuple[PhaseEstimate, ...]
    remainder_base_s: float            # base-node time not explained by projected phases
    remainder_ratio: float             # factor applied to it (the fallback)
    warnings: tuple[str, ...] = ()


ESTIMATES = ("auto", "thesis", "ratio")


def uses_ratio(m: PhaseMatch, estimate: str) -> bool:
    """Whether the phase is estimated by the ratio form under `estimate` (module docstring)."""
    if estimate == "auto":
        return m.winner is not None and m.winner.sub["iZ"] == 0
    return estimate == "ratio"


def project(matches: Sequence[PhaseMatch], node_tpi: NodeTpi, nodes: Sequence[str], base_node: str,
            total_s: float | None = None, estimate: str = "auto") -> list[AppProjection]:
    """Project every matched phase onto each node, sum them, and add the remainder by the fallback."""
    phases_total = sum(m.phase.time_s for m in matches)
    total = phases_total if total_s is None else float(total_s)
    common = []
    if total_s is not None and phases_total > total * 1.01:
        common.append(f"the phases add up to {phases_total:.4g} s, more than the total {total:.4g} s")
    profiles = [None if m.winner is None else m.winner.profile for m in matches]
    by_ratio = [uses_ratio(m, estimate) for m in matches]
    base_est = [estimate_phase(m.phase, p, node_tpi, base_node, base_node, r)
                for m, p, r in zip(matches, profiles, by_ratio)]
    out = []
    for node in nodes:
        warnings = list(common)
        estimates, est_sum, base_sum, covered_s, ratios = [], 0.0, 0.0, 0.0, []
        for m, profile, base, r in zip(matches, profiles, base_est, by_ratio):
            est = estimate_phase(m.phase, profile, node_tpi, node, base_node, r)
            estimates.append(est)
            if est.estimate_s is None or not base.estimate_s:
                if est.method in ("config not measured", "no base time"):
                    where = node if est.method == "config not measured" else f"the base node {base_node}"
                    warnings.append(f"phase {m.phase.name}: config {est.config} has no time on {where}; "
                                    "projected with the remainder")
                continue
            est_sum += est.estimate_s
            base_sum += base.estimate_s
            covered_s += m.phase.time_s
            ratios.append(est.estimate_s / base.estimate_s)
        remainder = max(total - covered_s, 0.0)
        if ratios:
            ratio, lo, hi = est_sum / base_sum, min(1.0, *ratios), max(1.0, *ratios)
        else:
            ratio = lo = hi = 1.0
            warnings.append("no phase could be projected: the time on the base node is assumed")
        out.append(AppProjection(node, est_sum + remainder * ratio, est_sum + remainder * lo,
                                 est_sum + remainder * hi, min(covered_s / total, 1.0) if total > 0 else 0.0,
                                 tuple(estimates), remainder, ratio, tuple(warnings)))
    return out
