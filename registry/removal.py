"""Removing single facts: a trace, an application, measured runs. Each is one transaction (the
caller's), children first, since references are logical (registry/db/relations.py); what is left is
what `doctor` would call consistent. Nodes are removed by registry.nodes.remove_node.
"""

import sqlalchemy as sa

from registry.errors import UserError
from registry.trace.lookup import by_uid_prefix

_PHASES = "SELECT phase_id FROM phases WHERE trace_id IN ({traces})"


def _delete(conn: sa.Connection, steps, params: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for table, where in steps:
        res = conn.execute(sa.text(f"DELETE FROM {table} WHERE {where}"), params)
        counts[table] = counts.get(table, 0) + max(res.rowcount or 0, 0)
    return counts


def _trace_steps(traces: str) -> list[tuple[str, str]]:
    """Delete steps for the traces selected by the SQL `traces` (a query of trace_ids), children first."""
    phases = _PHASES.format(traces=traces)
    return [("signatures", f"owner_kind = 'phase' AND owner_id IN ({phases})"),
            ("phase_streams", f"phase_id IN ({phases})"),
            ("phases", f"trace_id IN ({traces})"),
            ("trace_samples", f"trace_id IN ({traces})"),
            ("predictions", f"trace_id IN ({traces})"),
            ("traces", f"trace_id IN ({traces})")]


def trace_ids(conn: sa.Connection, uids: list[str]) -> list[int]:
    """The traces with these uids (or unique prefixes), or an error naming the first that matches
    none or several."""
    ids = []
    for uid in uids:
        found = conn.execute(by_uid_prefix(uid)).fetchall()
        exact = [row.trace_id for row in found if row.uid == uid]
        if len(exact or found) != 1:
            what = "no trace" if not found else f"{len(found)} traces"
            raise UserError(f"{what} with uid {uid!r}: `nodereg traces` lists them")
        ids.append((exact or [found[0].trace_id])[0])
    return ids


def remove_traces(conn: sa.Connection, ids: list[int]) -> dict[str, int]:
    params = {f"t{i}": v for i, v in enumerate(ids)}
    selected = f"SELECT trace_id FROM traces WHERE trace_id IN ({', '.join(':' + k for k in params)})"
    return _delete(conn, _trace_steps(selected), params)


def remove_app(conn: sa.Connection, app_id: int) -> dict[str, int]:
    """An application with its traces, runs and predictions."""
    steps = [*_trace_steps("SELECT trace_id FROM traces WHERE app_id = :id"),
             ("predictions", "app_id = :id"), ("runs", "app_id = :id"), ("apps", "app_id = :id")]
    return _delete(conn, steps, {"id": app_id})


def remove_runs(conn: sa.Connection, uids: list[str]) -> int:
    """Measured runs by uid; every uid must exist (else nothing is removed)."""
    removed = 0
    for uid in uids:
        n = conn.execute(sa.text("DELETE FROM runs WHERE uid = :u"), {"u": uid}).rowcount
        if not n:
            raise UserError(f"no run with uid {uid!r}: `nodereg runs list` shows them")
        removed += n
    return removed
