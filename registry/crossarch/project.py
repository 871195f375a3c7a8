"""`nodereg match APP --from-runs`: the app's measured times on the 1-3 node types the user has,
projected onto every node of the suite by a projection model (default similar-runs), ranked by time
or by cost per run, with intervals and warnings.

Warnings per node: an architecture none of the measured nodes has ("aarch64 predicted from x86_64 runs
only": the references carry the architecture's effect, but nothing of the app was seen on it), a
CPU family that none of the measured nodes has and that no other node of the suite shares (a node
family never seen: its references are its own alone), for an app that uses every CPU, vCPUs more
than e^FAR (7.4) times beyond the measured nodes' range (its scaling extrapolated: the interval is
wider there too, registry.models.similar_runs `_size_bins`), and a node whose vendor sells its vCPUs
shared with other tenants (registry.crossarch.data.shared_vcpu_nodes: on the imported types, 16.9%
median error against 10.5% on dedicated ones; its interval is its own, from its own residuals).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from registry.crossarch.data import CrossData, single_threaded
from registry.crossarch.references import ReferenceBank, query
from registry.errors import UserError
from registry.io.sparecores.apps import app_family
from registry.models.similar_runs import SIZE_EDGES, vcpus_beyond

FAR = SIZE_EDGES[-1]   # log vCPU ratio beyond the measured nodes' range past which a node is warned (7.4x)


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


class Warner:
    """The warnings of each node predicted from `calibration` (module docstring), with the node table
    read once (a pandas lookup per node made `match --from-runs` over 2,700 nodes take seconds)."""

    def __init__(self, data: CrossData, calibration: list[str], single: bool = True):
        names = data.nodes.index.tolist()
        vcpus = data.nodes["n_cpus"].to_numpy(dtype=float, na_value=np.nan)
        self.vcpus = dict(zip(names, vcpus.tolist()))
        sizes = data.nodes.loc[calibration, "n_cpus"].to_numpy(dtype=float, na_value=np.nan)
        # an all-CPU app's scaling, extrapolated far beyond the measured nodes (a one-CPU app's is not)
        far = not single and np.isfinite(sizes).all() and len(sizes)
        self.beyond = dict(zip(names, vcpus_beyond(vcpus, sizes).tolist())) if far else {}
        self.range = (sizes.min(), sizes.max()) if far else None
        self.arch = dict(zip(names, data.nodes["architecture"].astype(str).tolist()))
        self.family = dict(zip(names, data.nodes["cpu_family"].astype(str).tolist()))
        self.family_size = Counter(self.family.values())
        self.seen_arch = sorted({self.arch[n] for n in calibration})
        self.seen_family = {self.family[n] for n in calibration}
        self.shared = set(data.nodes.index[data.nodes["shared_vcpus"].fillna(False).astype(bool)]) \
            if "shared_vcpus" in data.nodes else set()

    def __call__(self, node: str) -> list[str]:
        out = []
        arch, family = self.arch[node], self.family[node]
        if arch not in self.seen_arch:
            out.append(f"{arch} predicted from {'/'.join(self.seen_arch)} runs only")
        if family not in self.seen_family and self.family_size.get(family, 0) <= 1:
            out.append(f"CPU family {family!r} never seen: no other node of the suite has it")
        beyond = self.beyond.get(node, np.nan)
        if abs(beyond) > FAR:
            side, edge = ("largest", self.range[1]) if beyond > 0 else ("smallest", self.range[0])
            out.append(f"{self.vcpus[node]:.0f} vCPUs, {np.exp(abs(beyond)):.0f}x the {side} measured node's "
                       f"{edge:.0f}: the app's scaling extrapolated")
        if node in self.shared:
            out.append("shared vCPUs (the vendor's specs): its figures move with other tenants' load, and such "
                       "types err more than dedicated ones")
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
    measured = set(calibration)
    targets = [n for n in data.nodes.index.tolist() if n not in measured]
    # one thread per pool: these products are small, and BLAS threads on a busy machine made them 20x slower
    with threadpool_limits(1):
        predictions = create(model, options=options or {}).fit(refs).predict(query(app, times, calibration, single),
                                                                               targets)
    out = []
    warner = Warner(data, calibration, single)
    prices = dict(zip(data.prices.index.tolist(), data.prices.tolist())) if data.prices is not None else {}
    for p in predictions:
        if not np.isfinite(p.predicted_s):
            continue
        price = prices.get(p.node)
        cost = None if price is None or not np.isfinite(price) else float(price) * p.predicted_s / 3600.0
        out.append(Ranked(p.node, p.predicted_s, p.low_s, p.high_s, warner.arch[p.node], warner.family[p.node],
                          cost, warner(p.node) + list(p.warnings)))
    if objective == "cost":
        out = [r for r in out if r.cost is not None]
        if not out:
            raise UserError("--objective cost: no predicted node has a price (`nodereg nodes set NODE "
                            "--price-per-hour X` or `nodereg import prices FILE.csv`)")
        out.sort(key=lambda r: r.cost)
    else:
        out.sort(key=lambda r: r.predicted_s)
    return out
