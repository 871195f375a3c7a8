"""Find the trace a user names: a trace file, a trace uid (or a unique prefix of one), or an app name.

Shared by every command that takes a TRACE argument (match, report), so they accept the same things.
"""

from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from registry.errors import UserError
from registry.trace import store
from registry.io.tracefile import Trace, read_trace


@dataclass
class FoundTrace:
    trace: Trace
    trace_id: int | None     # None: read from a file whose trace is not in this registry
    uid: str | None


def find_trace(conn: sa.Connection, text: str) -> FoundTrace:
    path = Path(text)
    if path.suffix == ".json" or path.is_file():
        trace = read_trace(path)
        uid = trace.meta.get("uid")
        trace_id = conn.execute(sa.text("SELECT trace_id FROM traces WHERE uid = :u"), {"u": uid}).scalar_one_or_none() \
            if uid else None
        return FoundTrace(trace, trace_id, uid if trace_id is not None else None)
    rows = conn.execute(sa.text("SELECT trace_id, uid FROM traces WHERE uid = :t"), {"t": text}).fetchall() or \
        conn.execute(by_uid_prefix(text)).fetchall()
    if len(rows) > 1:
        raise UserError(f"trace id prefix {text!r} is ambiguous ({len(rows)} traces): give more characters")
    if not rows:
        rows = conn.execute(sa.text(
            "SELECT t.trace_id, t.uid FROM traces t JOIN apps a ON a.app_id = t.app_id WHERE a.name = :n "
            "ORDER BY t.started_at DESC, t.trace_id DESC LIMIT 1"), {"n": text}).fetchall()
    if not rows:
        raise UserError(f"no trace {text!r}: give a trace file, a trace id (see `nodereg sql \"SELECT DISTINCT trace_uid, "
                        "app, node FROM v_phases\"`) or the name of a traced app")
    trace_id, uid = rows[0]
    return FoundTrace(store.load(conn, trace_id), trace_id, uid)


def by_uid_prefix(prefix: str) -> sa.Select:
    """Traces whose uid starts with `prefix`, taken literally: SQLAlchemy escapes '%' and '_' (and its
    escape character) and writes a LIKE ... ESCAPE clause that DuckDB and PostgreSQL both read."""
    return sa.select(sa.column("trace_id"), sa.column("uid")).select_from(sa.table("traces")).where(
        sa.column("uid").startswith(prefix, autoescape=True))
