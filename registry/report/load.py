"""What the reports read: node profiles and application traces, from the registry (or a trace file).

Node profiles come from the analyst view `v_profile` (the node's latest profile) joined with each
config's first stream (its stride) and the node's `node_caches`. Traces are named the way people
remember them: a trace uid, a unique uid prefix, an app name (its latest trace), or the path of a
trace file written by `nodereg trace --out` (read with `registry.io.tracefile.read_trace`).
Samples are stored long (trace_id, t_s, metric, value) and handed to the charts wide (one column
per metric).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from registry.errors import UserError
from registry.models.base import CacheLevel
from registry.nodes import require_node_id
from registry.values import command_line

_PROFILE_SQL = """
SELECT v.ub, v.family, v.config_key, v.threads, v.placement, v.ws_bytes, v.reps, v.median_s, v.cv,
       v.tpi_us, v.bandwidth_gbs, v.gflops, v.latency_ns, v.unstable, v.profile_uid, v.store_kind,
       s.stride_bytes, s.elem_bytes
FROM v_profile v
JOIN ub_configs c      ON c.config_key = v.config_key
LEFT JOIN ub_streams s ON s.config_id = c.config_id AND s.stream_index = 0
WHERE v.node = :node"""

_NUMERIC = ("threads", "ws_bytes", "reps", "median_s", "cv", "tpi_us", "bandwidth_gbs", "gflops", "latency_ns",
            "stride_bytes", "elem_bytes")


@dataclass
class NodeProfile:
    """A node's latest profile: one row per microbenchmark config, plus what the node is."""

    name: str
    node: dict                      # nodes row (headline inventory columns)
    profile: dict                   # the latest profiles row
    caches: list[CacheLevel]        # data/unified caches from L1 outwards
    rows: pd.DataFrame              # v_profile rows (+ stride_bytes, elem_bytes of stream 0)
    memo: dict = field(default_factory=dict, repr=False)   # curves derived from rows (registry.report.curves)

    def family(self, family: str) -> pd.DataFrame:
        return self.rows[self.rows["family"] == family]

    def headline(self) -> str:
        n = self.node
        parts = [n.get("cpu_model") or "unknown CPU"]
        if n.get("cores"):
            parts.append(f"{n['cores']} cores")
        if n.get("n_cpus"):
            parts.append(f"{n['n_cpus']} CPUs" + (f" ({n['cpu_list']})" if n.get("cpu_list") else ""))
        return ", ".join(parts)


def _records(conn: sa.Connection, sql: str, params: dict) -> list[dict]:
    return [dict(r._mapping) for r in conn.execute(sa.text(sql), params)]


def node_caches(conn: sa.Connection, node_id: int) -> list[CacheLevel]:
    """Data and unified caches by level (a level with both keeps its data cache: what a sweep crosses)."""
    by_level: dict[int, CacheLevel] = {}
    for r in _records(conn, "SELECT level, cache_type, size_bytes, shared_by, instances FROM node_caches "
                            "WHERE node_id = :id AND cache_type IN ('Data', 'Unified') "
                            "ORDER BY level, cache_type", {"id": node_id}):
        if r["level"] not in by_level or r["cache_type"] == "Data":
            by_level[r["level"]] = CacheLevel(int(r["level"]), int(r["size_bytes"]), int(r["shared_by"] or 1),
                                              int(r["instances"] or 1))
    return [by_level[k] for k in sorted(by_level)]


def node_profile(conn: sa.Connection, name: str) -> NodeProfile:
    """The node's latest profile; one-line errors for an unknown node or one without a profile."""
    node_id = require_node_id(conn, name)
    node = _records(conn, "SELECT name, cpu_model, n_cpus, cores, sockets, threads_per_core, memory_bytes, "
                          "max_mhz, cpu_list, host, compiler FROM nodes WHERE node_id = :id", {"id": node_id})[0]
    profile = _records(conn, "SELECT uid, mode, started_at, duration_s, tool_version, compiler, cflags "
                             "FROM profiles WHERE profile_id = (SELECT profile_id FROM v_latest_profile "
                             "WHERE node_id = :id AND newest)", {"id": node_id})
    rows = pd.DataFrame(_records(conn, _PROFILE_SQL, {"node": name}))
    if not profile or rows.empty:
        raise UserError(f"node {name!r} has no profile: run {command_line('nodereg', 'profile', name)} first")
    for col in _NUMERIC:
        rows[col] = pd.to_numeric(rows[col], errors="coerce").astype(float)
    rows["unstable"] = rows["unstable"].astype(bool)
    return NodeProfile(name, node, profile[0], node_caches(conn, node_id), rows)


@dataclass
class TracePhase:
    idx: int
    name: str
    method: str
    start_s: float
    end_s: float
    weight: float
    time_s: float | None
    calls: int | None = None
    iterations: float | None = None
    intervals: list[tuple[float, float]] = field(default_factory=list)
    signature: dict[str, dict[str, float]] = field(default_factory=dict)   # source -> metric -> value


@dataclass
class TraceData:
    """One application trace, whether it came from the registry or from a trace file."""

    label: str                      # how the report names it: the uid, or the file name
    app: str
    node: str
    status: str
    wall_s: float | None
    interval_s: float | None
    started_at: str
    command: list[str]
    samples: pd.DataFrame           # index t_s, one column per metric
    phases: list[TracePhase]
    trace_id: int | None = None     # registry id (None: a file that is not in the registry)
    uid: str | None = None
    source_file: str | None = None


def resolve_trace(conn: sa.Connection, ref: str) -> TraceData:
    """A trace named by app name (latest trace), uid, unique uid prefix or trace file path, the way
    `nodereg match` reads it (registry.trace.lookup.locate)."""
    from registry.trace.lookup import locate
    where = locate(conn, ref)
    return trace_from_file(conn, where.path) if where.path is not None else trace_from_registry(conn, where.trace_id)


def trace_from_registry(conn: sa.Connection, trace_id: int) -> TraceData:
    t = _records(conn, "SELECT t.uid, t.status, t.wall_s, t.interval_s, t.started_at, t.command_json, "
                       "a.name AS app, n.name AS node FROM traces t JOIN apps a ON a.app_id = t.app_id "
                       "JOIN nodes n ON n.node_id = t.node_id WHERE t.trace_id = :id", {"id": trace_id})[0]
    rows = conn.execute(sa.text("SELECT t_s, metric, value FROM trace_samples WHERE trace_id = :id"),
                        {"id": trace_id}).all()   # tuples: imported traces hold up to millions of samples
    long = pd.DataFrame(rows, columns=["t_s", "metric", "value"])
    long["value"] = pd.to_numeric(long["value"], errors="coerce")
    samples = long.pivot_table(index="t_s", columns="metric", values="value", aggfunc="mean", dropna=False) \
        if not long.empty else pd.DataFrame(index=pd.Index([], name="t_s"))
    sigs: dict[int, dict[str, dict[str, float]]] = {}
    for r in _records(conn, "SELECT s.owner_id, s.source, s.metric, s.value FROM signatures s "
                            "JOIN phases p ON p.phase_id = s.owner_id "
                            "WHERE s.owner_kind = 'phase' AND p.trace_id = :id", {"id": trace_id}):
        sigs.setdefault(r["owner_id"], {}).setdefault(r["source"], {})[r["metric"]] = \
            math.nan if r["value"] is None else float(r["value"])
    phases = [TracePhase(idx=r["idx"], name=r["name"] or f"phase {r['idx']}", method=r["method"],
                         start_s=float(r["start_s"]), end_s=float(r["end_s"]), weight=float(r["weight"]),
                         time_s=r["time_s"], calls=r["calls"], iterations=r["iterations"],
                         intervals=[(float(r["start_s"]), float(r["end_s"]))], signature=sigs.get(r["phase_id"], {}))
              for r in _records(conn, "SELECT phase_id, idx, name, method, start_s, end_s, weight, time_s, calls, "
                                      "iterations FROM phases WHERE trace_id = :id ORDER BY idx", {"id": trace_id})]
    try:
        command = [str(a) for a in json.loads(t["command_json"] or "[]")]
    except (TypeError, ValueError):
        command = [str(t["command_json"])]
    return TraceData(label=t["uid"], app=t["app"], node=t["node"], status=t["status"], wall_s=t["wall_s"],
                     interval_s=t["interval_s"], started_at=fmt_time(t["started_at"]), command=command,
                     samples=samples.sort_index(), phases=phases, trace_id=trace_id, uid=t["uid"])


def trace_from_file(conn: sa.Connection | None, path: Path) -> TraceData:
    """A trace file; linked to its registry trace (same app, node, start and wall time) when stored."""
    from registry.io.tracefile import read_trace
    tr = read_trace(path)
    cols = {k: v for k, v in tr.samples.items() if isinstance(v, list)}
    t_s = cols.pop("t_s", [])
    samples = pd.DataFrame({k: pd.to_numeric(pd.Series(v, dtype=object), errors="coerce").to_numpy(dtype=float)
                            for k, v in cols.items() if len(v) == len(t_s)},
                           index=pd.Index(pd.to_numeric(pd.Series(t_s, dtype=object)).to_numpy(dtype=float),
                                          name="t_s"))
    phases = [TracePhase(idx=i, name=p.name, method=p.method, start_s=p.start_s, end_s=p.end_s, weight=p.weight,
                         time_s=p.time_s, calls=p.calls, iterations=p.iterations,
                         intervals=[(float(a), float(b)) for a, b in p.intervals] or [(p.start_s, p.end_s)],
                         signature=p.signature)
              for i, p in enumerate(tr.phases)]
    data = TraceData(label=path.name, app=tr.name, node=tr.node, status=tr.status, wall_s=tr.wall_s,
                     interval_s=tr.interval_s, started_at=tr.started_at, command=tr.command,
                     samples=samples.sort_index(), phases=phases, source_file=str(path))
    if conn is not None:
        data.trace_id, data.uid = _stored_twin(conn, tr.name, tr.node, tr.started_at, tr.wall_s)
    return data


def _stored_twin(conn: sa.Connection, app: str, node: str, started_at: str, wall_s: float):
    """(trace_id, uid) of the registry trace a file was stored as, or (None, None)."""
    try:
        started = datetime.fromisoformat(started_at.replace("Z", "+00:00")).replace(tzinfo=None)
    except ValueError:
        return None, None
    for r in _records(conn, "SELECT t.trace_id, t.uid, t.started_at, t.wall_s FROM traces t "
                            "JOIN apps a ON a.app_id = t.app_id JOIN nodes n ON n.node_id = t.node_id "
                            "WHERE a.name = :a AND n.name = :n", {"a": app, "n": node}):
        stored = r["started_at"]
        if isinstance(stored, str):
            stored = datetime.fromisoformat(stored)
        if abs((stored - started).total_seconds()) <= 1.0 and r["wall_s"] is not None \
                and abs(r["wall_s"] - wall_s) <= 1e-3 * max(1.0, wall_s):
            return r["trace_id"], r["uid"]
    return None, None


def fmt_time(value) -> str:
    """A stored timestamp as people read it (to the second)."""
    return value.isoformat(sep=" ", timespec="seconds") if isinstance(value, datetime) else str(value or "")
