"""Measured runs: how long an application took on a node at a thread count.

Runs are the ground truth the models are fitted on (scaling) and judged by (evaluate). They come
one at a time (`nodereg runs add`) or from a CSV file with the columns ``app,node,threads,time_s``
(`nodereg import runs`). Unknown apps and nodes are created on the way (a node created this way
has no inventory: ``source = 'runs'``); repeated rows are kept as repetitions. A CSV import is all
or nothing: every row is checked before anything is written, and the first bad row is named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from registry.apps import ensure_app, find_app_id, require_app_id
from registry.db import utcnow
from registry.db.names import check_name
from registry.db.write import insert_rows, new_uid
from registry.errors import UserError
from registry.io.runs_csv import RunRow, check_run, read_runs_csv
from registry.nodes import ensure_node, find_node_id, require_node_id
from registry.values import command_line


def add_runs(conn: sa.Connection, rows: list[RunRow], source: str, provenance: dict | None = None) -> list[str]:
    """Write runs (creating apps and nodes as needed); returns their uids in order. `provenance`:
    columns every row shares (a `nodereg run` batch: command_json, exit_status, batch_uid)."""
    node_ids = {n: ensure_node(conn, n, source="runs") for n in dict.fromkeys(r.node for r in rows)}
    app_ids = {a: ensure_app(conn, a) for a in dict.fromkeys(r.app for r in rows)}
    now = utcnow()
    uids = [new_uid() for _ in rows]
    insert_rows(conn, "runs", pd.DataFrame({
        "uid": uids, "app_id": [app_ids[r.app] for r in rows], "node_id": [node_ids[r.node] for r in rows],
        "threads": pd.array([r.threads for r in rows], dtype="Int64"), "time_s": [r.time_s for r in rows],
        "source": source, "created_at": now, **(provenance or {})}))
    return uids


def add_timed_runs(conn: sa.Connection, app: str, node: str, threads: int, times_s: list[float],
                   argv: list[str]) -> str:
    """Store the successful repetitions of one `nodereg run` as a batch; returns the batch's uid."""
    batch = new_uid()
    rows = [RunRow(check_name(app, "app"), node, *check_run(threads, t)) for t in times_s]
    add_runs(conn, rows, "run", {"command_json": json.dumps(argv), "exit_status": 0, "batch_uid": batch})
    return batch


def add_run(conn: sa.Connection, app: str, node: str, threads, time_s, source: str = "cli") -> str:
    n, t = check_run(threads, time_s)
    return add_runs(conn, [RunRow(check_name(app, "app"), check_name(node, "node"), n, t)], source)[0]


@dataclass
class ImportSummary:
    runs: int
    apps_created: list[str]
    nodes_created: list[str]


def import_runs_csv(conn: sa.Connection, path: Path) -> ImportSummary:
    """Import a runs CSV inside the caller's transaction (nothing is written if any row is bad)."""
    rows = read_runs_csv(path)
    new_apps = [a for a in dict.fromkeys(r.app for r in rows) if find_app_id(conn, a) is None]
    new_nodes = [n for n in dict.fromkeys(r.node for r in rows) if find_node_id(conn, n) is None]
    add_runs(conn, rows, "csv")
    return ImportSummary(len(rows), new_apps, new_nodes)


def load_runs(conn: sa.Connection, app: str, node: str) -> pd.DataFrame:
    """Runs of `app` on `node` with a thread count (columns threads, time_s), oldest first."""
    app_id, node_id = require_app_id(conn, app), require_node_id(conn, node)
    frame = pd.DataFrame(conn.execute(sa.text(
        "SELECT threads, time_s FROM runs WHERE app_id = :a AND node_id = :n AND threads IS NOT NULL "
        "ORDER BY run_id"), {"a": app_id, "n": node_id}).fetchall(), columns=["threads", "time_s"])
    if frame.empty:
        raise UserError(f"no runs of {app!r} on {node!r} with a thread count: add some with " +
                        command_line("nodereg", "runs", "add", app, node, "--threads", "N", "--time", "S"))
    return frame.astype({"threads": int, "time_s": float})


def list_runs(conn: sa.Connection, app: str | None = None, node: str | None = None) -> list[dict]:
    sql = ("SELECT a.name AS app, n.name AS node, r.threads, r.time_s, r.source, r.created_at, r.uid "
           "FROM runs r JOIN apps a ON a.app_id = r.app_id JOIN nodes n ON n.node_id = r.node_id")
    where, args = [], {}
    if app is not None:
        require_app_id(conn, app)
        where.append("a.name = :app")
        args["app"] = app
    if node is not None:
        require_node_id(conn, node)
        where.append("n.name = :node")
        args["node"] = node
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY a.name, n.name, r.threads, r.run_id"
    return [dict(r._mapping) for r in conn.execute(sa.text(sql), args)]
