"""Traces in the registry: apps, traces, trace_samples, phases and their signatures (owner_kind 'phase').

`save` writes one trace inside the caller's transaction (all of it or nothing); `load` reads it back
into the same `Trace` the file format holds, so a stored trace can be exported again.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import TYPE_CHECKING

from registry.apps import ensure_app
from registry.db import utcnow
from registry.db.statement import execute
from registry.db.write import allocate_ids, insert_returning, insert_rows, new_uid
from registry.errors import UserError
from registry.io.tracefile import Phase, Trace
from registry.nodes import require_node_id
from registry.trace.capacity import capacity
from registry.values import finite_json

if TYPE_CHECKING:
    import pandas as pd
    import sqlalchemy as sa


def save(conn: sa.Connection, trace: Trace, *, source: str = "trace") -> tuple[int, str]:
    """Store `trace`; returns (trace_id, uid).

    The trace's identity is `trace.meta["uid"]`, set here on first save (so a file written afterwards
    names the stored trace); saving a trace whose uid is already stored changes nothing and returns it.
    """
    node_id = require_node_id(conn, trace.node)
    uid = trace.meta.setdefault("uid", new_uid())
    existing = execute(conn, "SELECT trace_id FROM traces WHERE uid = :u", {"u": uid}).scalar_one_or_none()
    if existing is not None:
        return existing, uid
    started = _timestamp(trace.started_at)
    meta = {"host": trace.host, "sources": trace.sources, "cachegrind": trace.cachegrind, **trace.meta}
    trace_id = insert_returning(conn, "traces", {
        "uid": uid, "app_id": ensure_app(conn, trace.name), "node_id": node_id,
        "command_json": json.dumps(trace.command), "exit_status": trace.exit_status, "status": trace.status,
        "wall_s": trace.wall_s, "threads": trace.threads, "interval_s": trace.interval_s, "source": source,
        "started_at": started, "meta_json": json.dumps(finite_json(meta), allow_nan=False),
        **({"input": trace.meta["input"]} if trace.meta.get("input") else {}),   # (schema 16's column)
        **{k: v for k, v in capacity(trace.samples, trace.interval_s).items() if v is not None}}, "trace_id")
    insert_rows(conn, "trace_samples", _sample_rows(trace_id, trace.samples))
    ids = allocate_ids(conn, "phases_id_seq", len(trace.phases))
    insert_rows(conn, "phases", [
        {"phase_id": pid, "trace_id": trace_id, "idx": i, "name": p.name, "method": p.method,
         "start_s": p.start_s, "end_s": p.end_s, "weight": p.weight, "time_s": p.time_s,
         "iterations": p.iterations, "calls": p.calls, "intervals_json": json.dumps(p.intervals)}
        for i, (pid, p) in enumerate(zip(ids, trace.phases))])
    insert_rows(conn, "phase_streams", [
        {"phase_id": pid, "stream_index": j, **st} for pid, p in zip(ids, trace.phases) for j, st in enumerate(p.streams)])
    insert_rows(conn, "signatures", [
        {"owner_kind": "phase", "owner_id": pid, "source": src, "metric": metric, "value": float(value)}
        for pid, p in zip(ids, trace.phases) for src, metrics in p.signature.items()
        for metric, value in metrics.items() if value is not None and math.isfinite(value)])
    return trace_id, uid


def _sample_rows(trace_id: int, samples: dict[str, list]) -> pd.DataFrame:
    import pandas as pd  # here: loading a trace (`nodereg match`) does not need pandas

    times = samples.get("t_s", [])
    frame = pd.DataFrame({k: v for k, v in samples.items() if k != "t_s"}, index=pd.Index(times, name="t_s"))
    long = frame.reset_index().melt(id_vars="t_s", var_name="metric", value_name="value").dropna()
    long.insert(0, "trace_id", trace_id)
    return long


def _timestamp(text: str):
    try:
        return datetime.fromisoformat(text).replace(tzinfo=None)
    except (TypeError, ValueError):
        return utcnow()


def load(conn: sa.Connection, trace_id: int) -> Trace:
    """A stored trace as a `Trace` (the inverse of `save`)."""
    row = execute(conn,
        "SELECT t.*, a.name AS app_name, n.name AS node_name FROM traces t JOIN apps a ON a.app_id = t.app_id "
        "JOIN nodes n ON n.node_id = t.node_id WHERE t.trace_id = :id", {"id": trace_id}).mappings().first()
    if row is None:
        raise UserError(f"no trace with id {trace_id}")
    meta = json.loads(row["meta_json"] or "{}")
    phase_rows = execute(conn, "SELECT * FROM phases WHERE trace_id = :id ORDER BY idx",
                              {"id": trace_id}).mappings().all()
    sigs: dict[int, dict[str, dict[str, float]]] = {}
    for owner, src, metric, value in execute(conn,
            "SELECT s.owner_id, s.source, s.metric, s.value FROM signatures s JOIN phases p "
            "ON s.owner_kind = 'phase' AND s.owner_id = p.phase_id WHERE p.trace_id = :id", {"id": trace_id}):
        sigs.setdefault(owner, {}).setdefault(src, {})[metric] = value
    streams: dict[int, list[dict]] = {}
    for r in execute(conn,
            "SELECT s.* FROM phase_streams s JOIN phases p ON p.phase_id = s.phase_id WHERE p.trace_id = :id "
            "ORDER BY s.phase_id, s.stream_index", {"id": trace_id}).mappings():
        streams.setdefault(r["phase_id"], []).append(
            {k: r[k] for k in ("size_elems", "stride_bytes", "dtype", "elem_bytes", "access", "pattern")})
    phases = [Phase(name=p["name"], method=p["method"], start_s=p["start_s"], end_s=p["end_s"],
                    weight=p["weight"], time_s=p["time_s"], calls=p["calls"] or 1,
                    intervals=json.loads(p["intervals_json"]) if p.get("intervals_json")
                    else [[p["start_s"], p["end_s"]]],
                    signature=sigs.get(p["phase_id"], {}), iterations=p["iterations"],
                    streams=streams.get(p["phase_id"], [])) for p in phase_rows]
    cells = {(t, m): None if v is None or v != v else v for t, m, v in execute(conn,
        "SELECT t_s, metric, value FROM trace_samples WHERE trace_id = :id", {"id": trace_id})}
    times = sorted({t for t, _ in cells})
    sample_cols = {"t_s": times, **{m: [cells.get((t, m)) for t in times] for m in sorted({m for _, m in cells})}}
    meta["uid"] = row["uid"]
    host = meta.pop("host", "")
    sources = meta.pop("sources", ["proc"])
    cachegrind = meta.pop("cachegrind", None)
    return Trace(name=row["app_name"], node=row["node_name"], host=host or "",
                 command=json.loads(row["command_json"] or "[]"), exit_status=row["exit_status"],
                 status=row["status"], wall_s=row["wall_s"], interval_s=row["interval_s"],
                 started_at=row["started_at"].isoformat() if row["started_at"] else "", sources=sources,
                 phases=phases, samples=sample_cols, threads=row["threads"], cachegrind=cachegrind, meta=meta)
