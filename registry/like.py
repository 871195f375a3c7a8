"""The imported node types most like a measured node (this machine, by default), and how far apart
their figures are.

A program traced here is projected onto imported types through the ratio of each config's figure
there to its figure here, so the local measurement of the suite is only trustworthy when the types
with this machine's CPU measured about what this machine measures. Candidates are ranked by how
much of the hardware they share (the same CPU model, then the same microarchitecture, then the same
maker and architecture: registry.io.sparecores.family's labels), then by vCPU count (the same as
this node's first: its all-CPU figures compare), then by the distance of their figures: the root
mean square of log(there / here) over the configs both measured. The vCPU count comes before the
figures because a busy host measures low figures, and a distance of figures alone then prefers
smaller types.
"""

import math
import socket

import numpy as np
import sqlalchemy as sa

from registry.db import Registry
from registry.errors import UserError
from registry.nodes import require_node_id
from registry.profile.suite.store import MODE
from registry.suites import suite_costs

# units of the suite's configs: the figures are shown in the tool's own terms (the costs of
# registry.suites.suite_costs are time-like: 1 / rate, or the latency itself)
_UNITS = """
SELECT c.config_key, c.unit, c.higher_is_better FROM ub_configs c
JOIN microbenchmarks u ON u.ub_id = c.ub_id WHERE u.suite = :suite"""
_NODES = "SELECT name, cpu_model, cpu_family, cpu_vendor, architecture, n_cpus, source FROM nodes"
_LOCAL = """
SELECT n.name FROM nodes n JOIN profiles p ON p.node_id = n.node_id
WHERE p.host = :host AND p.mode = :mode ORDER BY p.profile_id DESC LIMIT 1"""
TIERS = ("same CPU model", "same microarchitecture", "same CPU maker", "other")


def default_node(conn: sa.Connection) -> str:
    """The node whose suite profile was measured on this host most recently."""
    name = conn.execute(sa.text(_LOCAL), {"host": socket.gethostname(), "mode": MODE}).scalar_one_or_none()
    if name is None:
        raise UserError(f"no suite profile measured on this host ({socket.gethostname()}): run "
                        "`nodereg profile NODE --suite sparecores` first, or name the node")
    return name


def _figures(reg: Registry, suite: str) -> dict[str, dict[str, tuple[float, str]]]:
    """Per node, per config: the tool's figure and its unit, from each node's latest profile in `suite`."""
    costs = suite_costs(reg, suite)
    with reg.connect() as conn:
        units = {k: (u or "", bool(h) if h is not None else True)
                 for k, u, h in conn.execute(sa.text(_UNITS), {"suite": suite})}
    out: dict[str, dict[str, tuple[float, str]]] = {}
    for key in costs.columns:
        unit, higher_is_better = units.get(key, ("", True))
        for node, cost in costs[key].dropna().items():
            if cost > 0 and math.isfinite(cost):
                out.setdefault(str(node), {})[key] = (1.0 / cost if higher_is_better else float(cost), unit)
    return out


def _tier(me: dict, other: dict) -> int:
    same = lambda col: me[col] is not None and me[col] == other[col]   # noqa: E731
    if same("cpu_model"):
        return 0
    if same("cpu_family"):
        return 1
    if same("cpu_vendor") and same("architecture"):
        return 2
    return 3


def _lower_is_better(unit: str) -> bool:
    return unit == "ns"


def compare(here: dict[str, tuple[float, str]], there: dict[str, tuple[float, str]]) -> list[dict]:
    """Per config both measured: the figure here and there, and how far apart (there / here - 1,
    and `faster_there`: the ratio in the direction of speed)."""
    rows = []
    for key in sorted(set(here) & set(there)):
        (a, unit), (b, _) = here[key], there[key]
        speed = a / b if _lower_is_better(unit) else b / a
        rows.append({"config": key, "unit": unit, "here": a, "there": b, "diff": b / a - 1.0,
                     "faster_there": speed})
    return rows


def like(reg: Registry, node: str | None = None, suite: str = "sparecores", top: int = 5,
         figures_of: str | None = None) -> dict:
    """The `top` imported types most like `node`, and per config how far apart the figures are for
    the nearest (or `figures_of`)."""
    with reg.connect() as conn:
        node = node or default_node(conn)
        require_node_id(conn, node)
        info = {r.name: dict(r._mapping) for r in conn.execute(sa.text(_NODES))}
    figures = _figures(reg, suite)
    if node not in figures:
        raise UserError(f"node {node!r} has no profile in suite {suite!r}: run `nodereg profile {node} --suite {suite}`")
    me = info[node]
    ranked = []
    for other, figs in figures.items():
        if other == node:
            continue
        rows = compare(figures[node], figs)
        if not rows:
            continue
        logs = np.log([r["faster_there"] for r in rows])
        ranked.append({"node": other, "tier": _tier(me, info[other]), "match": TIERS[_tier(me, info[other])],
                       "cpu_family": info[other]["cpu_family"], "cpu_model": info[other]["cpu_model"],
                       "n_cpus": info[other]["n_cpus"], "shared_configs": len(rows),
                       "rms_log": float(np.sqrt(np.mean(logs ** 2))),
                       "median_abs_diff": float(np.median(np.abs(np.exp(logs) - 1.0)))})
    if not ranked:
        raise UserError(f"no other node shares a config of suite {suite!r} with {node!r}: import some "
                        "(`nodereg import sparecores DIR`)")
    ranked.sort(key=lambda r: (r["tier"], r["n_cpus"] != me["n_cpus"], r["rms_log"]))
    chosen = figures_of or ranked[0]["node"]
    if chosen not in figures:
        raise UserError(f"node {chosen!r} has no profile in suite {suite!r}")
    return {"node": node, "suite": suite, "cpu_family": me["cpu_family"], "cpu_model": me["cpu_model"],
            "n_cpus": me["n_cpus"], "like": ranked[:top], "figures_of": chosen,
            "figures": compare(figures[node], figures[chosen])}
