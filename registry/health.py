"""Which hosts of a node type are off their peers: `nodereg health` and the node report's host table.

A type profiled on many hosts (`nodereg fleet`) should measure alike on all of them; a host with
a missing DIMM, a throttling CPU, a BIOS setting or a noisy neighbour does not. Each host is
judged by its latest profile on a few key figures, against the distribution of its type's hosts,
robustly: the median and the median absolute deviation (MAD, scaled by 1.4826 to match a standard
deviation for normal data), so the outliers themselves do not hide in a widened spread. A host is
flagged on a figure when it is beyond `threshold` scaled MADs *and* at least `min_deviation`
(relative) from the median: the second condition keeps a very tight type (MAD near 0) from flagging
a host for 1% of noise. Fewer than three hosts give no verdict: with two, neither is the odd one.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlalchemy as sa

THRESHOLD = 3.5        # scaled MADs (Iglewicz and Hoaglin's cut-off for the modified z-score)
MIN_DEVIATION = 0.10   # ... and at least 10% off the type's median
MIN_HOSTS = 3
MAD_SCALE = 1.4826


@dataclass(frozen=True)
class Figure:
    """A key figure: the best (or, for latency, the lowest) value of a kernel at a cache level."""

    name: str
    label: str                 # a table's column
    kernels: tuple[str, ...]   # the first the type has measured at this level is used
    level: int | None          # streams.ws_level: 1, 2, 3 = L1..L3, 0 = memory; None: no level
    metric: str                # bandwidth_gbs | gflops | latency_ns
    one_thread: bool           # at the fewest threads measured, else at the most (the node's figures: v_nodes)
    higher_is_better: bool = True
    largest_ws: bool = False   # only the largest working set measured there (v_nodes' memory bandwidth)


FIGURES = (
    Figure("memory_triad_gbs", "triad GB/s", ("triad",), 0, "bandwidth_gbs", one_thread=False, largest_ws=True),
    Figure("l1_gbs", "L1 GB/s", ("load", "triad"), 1, "bandwidth_gbs", one_thread=True),
    Figure("l2_gbs", "L2 GB/s", ("load", "triad"), 2, "bandwidth_gbs", one_thread=True),
    Figure("l3_gbs", "L3 GB/s", ("load", "triad"), 3, "bandwidth_gbs", one_thread=True),
    Figure("memory_latency_ns", "latency ns", ("chase",), 0, "latency_ns", one_thread=True, higher_is_better=False),
    Figure("fp64_peak_gflops", "FP64 GFLOP/s", ("peak_fma",), None, "gflops", one_thread=False),
)
_KERNELS = sorted({k for f in FIGURES for k in f.kernels})

# every run of the key kernels in each host's latest profile of the type
_RUNS = f"""
SELECT p.host, p.uid AS profile_uid, p.started_at, u.name AS ub, c.threads, c.ws_bytes, lv.value AS ws_level,
       r.bandwidth_gbs, r.gflops, r.latency_ns
FROM profile_runs r
JOIN (SELECT profile_id FROM v_latest_profile WHERE node_id = :node) latest
     ON latest.profile_id = r.profile_id
JOIN profiles p ON p.profile_id = r.profile_id
JOIN ub_configs c ON c.config_id = r.config_id
JOIN microbenchmarks u ON u.ub_id = c.ub_id
LEFT JOIN signatures lv ON lv.owner_kind = 'profile_run' AND lv.owner_id = r.run_id
     AND lv.source = 'streams' AND lv.metric = 'ws_level'
WHERE u.name IN ({", ".join(f"'{k}'" for k in _KERNELS)})"""


@dataclass
class Spread:
    """A figure's distribution over the type's hosts."""

    median: float
    mad: float          # scaled (comparable to a standard deviation)
    hosts: int


@dataclass
class HostHealth:
    node: str
    host: str | None
    profile_uid: str
    measured_at: object
    values: dict[str, float] = field(default_factory=dict)
    deviation: dict[str, float] = field(default_factory=dict)   # relative to the median: -0.5 = half
    mads: dict[str, float] = field(default_factory=dict)        # signed, in scaled MADs
    flags: list[str] = field(default_factory=list)


@dataclass
class TypeHealth:
    node: str
    spreads: dict[str, Spread]
    hosts: list[HostHealth]

    @property
    def judged(self) -> bool:
        return len(self.hosts) >= MIN_HOSTS


def _figure_values(rows: list[dict], fig: Figure) -> dict:
    """{host: value} of one figure; hosts without it are left out."""
    at_level = [r for r in rows if fig.level is None or (r["ws_level"] is not None and r["ws_level"] == fig.level)]
    kernel = next((k for k in fig.kernels if any(r["ub"] == k for r in at_level)), None)
    chosen = [r for r in at_level if r["ub"] == kernel and r[fig.metric] is not None and r[fig.metric] > 0]
    best = max if fig.higher_is_better else min
    out: dict = {}
    for host in {r["host"] for r in chosen}:
        mine = [r for r in chosen if r["host"] == host]
        count = (min if fig.one_thread else max)(r["threads"] for r in mine)
        mine = [r for r in mine if r["threads"] == count]
        if fig.largest_ws:     # a smaller memory-level working set can be faster (part of it in cache)
            largest = max(r["ws_bytes"] or 0 for r in mine)
            mine = [r for r in mine if (r["ws_bytes"] or 0) == largest]
        out[host] = float(best(r[fig.metric] for r in mine))
    return out


def _judge(host: HostHealth, name: str, value: float, spread: Spread, threshold: float,
           min_deviation: float) -> None:
    rel = value / spread.median - 1 if spread.median else 0.0
    off = value - spread.median
    z = off / spread.mad if spread.mad > 0 else (0.0 if off == 0 else math.copysign(math.inf, off))
    host.values[name], host.deviation[name], host.mads[name] = value, rel, z
    if spread.hosts >= MIN_HOSTS and abs(z) > threshold and abs(rel) >= min_deviation:
        host.flags.append(name)


def type_health(conn: sa.Connection, node: str, threshold: float = THRESHOLD,
                min_deviation: float = MIN_DEVIATION) -> TypeHealth:
    """Every host of node type `node` against its peers (one-line error for an unknown type)."""
    import sqlalchemy as sa

    from registry.nodes import require_node_id

    node_id = require_node_id(conn, node)
    rows = [dict(r._mapping) for r in conn.execute(sa.text(_RUNS), {"node": node_id})]
    hosts: dict = {}
    for r in sorted(rows, key=lambda r: (r["host"] is None, r["host"] or "")):
        hosts.setdefault(r["host"], HostHealth(node, r["host"], r["profile_uid"], r["started_at"]))
    spreads = {}
    for fig in FIGURES:
        values = _figure_values(rows, fig)
        if not values:
            continue
        med = statistics.median(values.values())
        mad = statistics.median(abs(v - med) for v in values.values())
        spreads[fig.name] = spread = Spread(med, MAD_SCALE * mad, len(values))
        for host, value in values.items():
            _judge(hosts[host], fig.name, value, spread, threshold, min_deviation)
    return TypeHealth(node, spreads, list(hosts.values()))


def fleet_health(conn: sa.Connection, node: str | None = None, threshold: float = THRESHOLD,
                 min_deviation: float = MIN_DEVIATION) -> list[TypeHealth]:
    """`node`'s health, or that of every type with a profile."""
    import sqlalchemy as sa

    names = [node] if node else list(conn.execute(sa.text(
        "SELECT DISTINCT n.name FROM nodes n JOIN profiles p ON p.node_id = n.node_id ORDER BY n.name")).scalars())
    return [type_health(conn, name, threshold, min_deviation) for name in names]


LABELS = {f.name: f.label for f in FIGURES}


def host_rows(health: TypeHealth) -> tuple[list[str], list[dict]]:
    """(columns, one row per host) for a table: each figure's value with its deviation from the
    type's median, the flagged figures, and the medians last."""
    figures = list(health.spreads)
    rows = []
    for h in health.hosts:
        row = {"host": h.host, "profile": h.profile_uid[:8]}
        row.update({LABELS[n]: f"{h.values[n]:.4g} {h.deviation[n]:+.0%}" for n in figures if n in h.values})
        row["flags"] = ", ".join(LABELS[n] for n in h.flags) if h.flags else \
            ("" if health.judged else f"(< {MIN_HOSTS} hosts)")
        rows.append(row)
    rows.append({"host": "median", **{LABELS[n]: f"{s.median:.4g}" for n, s in health.spreads.items()}})
    return ["host", "profile", *(LABELS[n] for n in figures), "flags"], rows
