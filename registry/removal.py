"""Removing single facts: a trace, an application, measured runs. Each is one transaction (the
caller's), children first as registry/db/relations.py derives them (references are logical); what
is left is what `doctor` would call consistent. Nodes are removed by registry.nodes.remove_node.
"""

import sqlalchemy as sa

from registry.db.relations import remove
from registry.db.statement import execute
from registry.errors import UserError
from registry.trace.lookup import by_uid_prefix


def trace_ids(conn: sa.Connection, uids: list[str]) -> list[int]:
    """The traces with these uids (or unique prefixes), or an error naming the first that matches
    none or several."""
    ids = []
    for uid in uids:
        found = execute(conn, *by_uid_prefix(uid)).fetchall()
        exact = [row.trace_id for row in found if row.uid == uid]
        if len(exact or found) != 1:
            what = "no trace" if not found else f"{len(found)} traces"
            raise UserError(f"{what} with uid {uid!r}: `nodereg traces` lists them")
        ids.append((exact or [found[0].trace_id])[0])
    return ids


def remove_traces(conn: sa.Connection, ids: list[int]) -> dict[str, int]:
    """Traces with their phases, samples, signatures and the predictions made from them."""
    params = {f"t{i}": v for i, v in enumerate(ids)}
    return remove(conn, "traces", f"trace_id IN ({', '.join(':' + k for k in params)})", params)


def remove_app(conn: sa.Connection, app_id: int) -> dict[str, int]:
    """An application with its traces, runs and predictions."""
    return remove(conn, "apps", "app_id = :id", {"id": app_id})


def remove_runs(conn: sa.Connection, uids: list[str]) -> int:
    """Measured runs by uid or unique uid prefix (tables show 8 characters); every one must name
    exactly one run (else nothing is removed)."""
    removed = 0
    for uid in uids:
        found = conn.execute(sa.select(sa.column("uid")).select_from(sa.table("runs")).where(
            sa.column("uid").startswith(uid, autoescape=True)).limit(2)).scalars().all()
        exact = [u for u in found if u == uid]
        if len(exact or found) != 1:
            what = "no run" if not found else "several runs"
            raise UserError(f"{what} with uid {uid!r}: `nodereg runs list` shows them")
        removed += conn.execute(sa.text("DELETE FROM runs WHERE uid = :u"), {"u": (exact or found)[0]}).rowcount
    return removed
