"""Measured runs: how long an application took on a node at a thread count.

Runs are the ground truth the models are fitted on (scaling) and judged by (evaluate). They come
one at a time (`nodereg runs add`) or from a CSV file with the columns ``app,node,threads,time_s``
(`nodereg import runs`). Unknown apps and nodes are created on the way (a node created this way
has no inventory: ``source = 'runs'``); repeated rows are kept as repetitions. A CSV import is all
or nothing: every row is checked before anything is written, and the first bad row is named. It is
also idempotent: each row gets an import key (app, node, threads, time, input and which repetition
of that row in the file it is), and rows whose key is stored already are skipped, so importing a
file again, or a file that grew, adds only what is new.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
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
from registry.workload import identity
from registry.values import command_line


def add_runs(conn: sa.Connection, rows: list[RunRow], source: str, provenance: dict | None = None,
             import_keys: list[str] | None = None) -> list[str]:
    """Write runs (creating apps and nodes as needed); returns their uids in order. `provenance`:
    columns every row shares (a `nodereg run` batch: command_json, exit_status, batch_uid)."""
    node_ids = {n: ensure_node(conn, n, source="runs") for n in dict.fromkeys(r.node for r in rows)}
    app_ids = {a: ensure_app(conn, a) for a in dict.fromkeys(r.app for r in rows)}
    now = utcnow()
    uids = [new_uid() for _ in rows]
    insert_rows(conn, "runs", pd.DataFrame({
        "uid": uids, "app_id": [app_ids[r.app] for r in rows], "node_id": [node_ids[r.node] for r in rows],
        "threads": pd.array([r.threads for r in rows], dtype="Int64"), "time_s": [r.time_s for r in rows],
        "source": source, "created_at": now, **(provenance or {}), **_identity_columns(rows, import_keys)}))
    return uids


def _identity_columns(rows: list[RunRow], import_keys: list[str] | None) -> dict:
    """The input and import-key columns (schema 16), where any row has one."""
    out = {}
    if any(r.input is not None for r in rows):
        out["input"] = [r.input for r in rows]
    if import_keys:
        out["import_key"] = import_keys
    return out


def add_timed_runs(conn: sa.Connection, app: str, node: str, threads: int, times_s: list[float],
                   argv: list[str], input_label: str | None = None) -> str:
    """Store the successful repetitions of one `nodereg run` as a batch; returns the batch's uid."""
    batch = new_uid()
    workload = identity(argv, input_label)
    rows = [RunRow(check_name(app, "app"), node, *check_run(threads, t), workload) for t in times_s]
    add_runs(conn, rows, "run", {"command_json": json.dumps(argv), "exit_status": 0, "batch_uid": batch})
    return batch


def add_run(conn: sa.Connection, app: str, node: str, threads, time_s, source: str = "cli",
            input_label: str | None = None) -> str:
    n, t = check_run(threads, time_s)
    label = check_name(input_label, "input") if input_label is not None else None
    return add_runs(conn, [RunRow(check_name(app, "app"), check_name(node, "node"), n, t, label)], source)[0]


@dataclass
class ImportSummary:
    runs: int
    apps_created: list[str]
    nodes_created: list[str]
    already: int = 0          # rows stored by an earlier import of the same rows


def import_keys(rows: list[RunRow]) -> list[str]:
    """Each row's identity: its values and which repetition of identical rows in the file it is."""
    seen: Counter = Counter()
    keys = []
    for r in rows:
        values = (r.app, r.node, r.threads, repr(r.time_s), r.input)
        seen[values] += 1
        keys.append(hashlib.sha256(json.dumps([*values, seen[values]]).encode()).hexdigest()[:32])
    return keys


def import_runs_csv(conn: sa.Connection, path: Path) -> ImportSummary:
    """Import a runs CSV inside the caller's transaction (nothing is written if any row is bad);
    rows imported before are skipped."""
    rows = read_runs_csv(path)
    keys = import_keys(rows)
    stored = {k for (k,) in conn.execute(sa.text("SELECT import_key FROM runs WHERE import_key IS NOT NULL"))}
    fresh = [(r, k) for r, k in zip(rows, keys) if k not in stored]
    new_apps = [a for a in dict.fromkeys(r.app for r, _ in fresh) if find_app_id(conn, a) is None]
    new_nodes = [n for n in dict.fromkeys(r.node for r, _ in fresh) if find_node_id(conn, n) is None]
    if fresh:
        add_runs(conn, [r for r, _ in fresh], "csv", import_keys=[k for _, k in fresh])
    return ImportSummary(len(fresh), new_apps, new_nodes, already=len(rows) - len(fresh))


def load_runs(conn: sa.Connection, app: str, node: str, input_label: str | None = None) -> pd.DataFrame:
    """Runs of `app` on `node` with a thread count (columns threads, time_s), oldest first.

    `input_label`: only runs of that input (and runs whose input is unknown). Without it, runs of
    two or more known inputs are refused: a scaling curve through runs of different inputs measures
    the inputs, not the threads."""
    app_id, node_id = require_app_id(conn, app), require_node_id(conn, node)
    frame = pd.DataFrame(conn.execute(sa.text(
        "SELECT threads, time_s, input FROM runs WHERE app_id = :a AND node_id = :n AND threads IS NOT NULL "
        "ORDER BY run_id"), {"a": app_id, "n": node_id}).fetchall(), columns=["threads", "time_s", "input"])
    if frame.empty:
        raise UserError(f"no runs of {app!r} on {node!r} with a thread count: add some with " +
                        command_line("nodereg", "runs", "add", app, node, "--threads", "N", "--time", "S"))
    inputs = sorted(set(frame["input"].dropna()))
    if input_label is not None:
        frame = frame[frame["input"].isna() | (frame["input"] == input_label)]
        if frame.empty:
            raise UserError(f"no runs of {app!r} on {node!r} on input {input_label!r} (its inputs: "
                            f"{', '.join(inputs)})")
    elif len(inputs) > 1:
        raise UserError(f"the runs of {app!r} on {node!r} are of {len(inputs)} inputs ({', '.join(inputs[:4])}"
                        f"{', ...' if len(inputs) > 4 else ''}): choose one with --input")
    return frame[["threads", "time_s"]].astype({"threads": int, "time_s": float}).reset_index(drop=True)


def list_runs(conn: sa.Connection, app: str | None = None, node: str | None = None) -> list[dict]:
    sql = ("SELECT a.name AS app, n.name AS node, r.threads, r.time_s, r.source, r.created_at, r.uid, r.input "
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
