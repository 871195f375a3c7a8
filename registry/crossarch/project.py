"""`nodereg match APP --from-runs`: the app's measured times on the 1-3 node types the user has,
projected onto every node of the suite by a projection model (default similar-runs), ranked by time
or by cost per run, with intervals and warnings.

Warnings per node: an architecture none of the measured nodes has ("aarch64 predicted from x86_64 runs
only": the references carry the architecture's effect, but nothing of the app was seen on it), and a
CPU family that none of the measured nodes has and that no other node of the suite shares (a node
family never seen: its references are its own alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from registry.crossarch.data import CrossData, app_family, single_threaded
from registry.crossarch.references import ReferenceBank, query
from registry.errors import UserError


@dataclass
class Ranked:
    node: str
    predicted_s: float
    low_s: float
    high_s: float
    architecture: str
    cpu_family: str
    cost: float | None = None          # price per hour x predicted time, per run
    warnings: list[str] = field(default_factory=list)


def node_warnings(data: CrossData, node: str, calibration: list[str]) -> list[str]:
    arch = data.architecture(node)
    seen_arch = sorted({data.architecture(n) for n in calibration})
    out = []
    if arch not in seen_arch:
        out.append(f"{arch} predicted from {'/'.join(seen_arch)} runs only")
    family = data.family(node)
    if family not in {data.family(n) for n in calibration} and \
            int((data.nodes["cpu_family"].astype(str) == family).sum()) <= 1:
        out.append(f"CPU family {family!r} never seen: no other node of the suite has it")
    return out


def from_runs(data: CrossData, app: str, times: dict[str, float], model: str = "similar-runs",
              options: dict | None = None, single: bool | None = None, objective: str = "time") -> list[Ranked]:
    """Every node of the suite but the measured ones, predicted from `times` (node -> seconds)."""
    from registry.models.plugins import create

    calibration = [n for n in sorted(times) if n in data.nodes.index and times[n] > 0]
    if not calibration:
        raise UserError(f"{app}: none of the nodes it was measured on has a profile in the suite "
                        f"(measured on: {', '.join(sorted(times)) or 'none'})")
    bank = ReferenceBank(data)
    refs = bank.reference_set(app_family(app), calibration)
    single = single_threaded(app) if single is None else single
    targets = [n for n in data.nodes.index if n not in set(calibration)]
    predictions = create(model, options=options or {}).fit(refs).predict(query(app, times, calibration, single),
                                                                           targets)
    out = []
    for p in predictions:
        if not np.isfinite(p.predicted_s):
            continue
        price = data.prices.get(p.node) if data.prices is not None else None
        cost = None if price is None or not np.isfinite(price) else float(price) * p.predicted_s / 3600.0
        out.append(Ranked(p.node, p.predicted_s, p.low_s, p.high_s, data.architecture(p.node), data.family(p.node),
                          cost, node_warnings(data, p.node, calibration) + list(p.warnings)))
    if objective == "cost":
        out = [r for r in out if r.cost is not None]
        if not out:
            raise UserError("--objective cost: no predicted node has a price (`nodereg nodes set NODE "
                            "--price-per-hour X` or `nodereg import prices FILE.csv`)")
        out.sort(key=lambda r: r.cost)
    else:
        out.sort(key=lambda r: r.predicted_s)
    return out
