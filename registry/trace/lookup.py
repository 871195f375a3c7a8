"""Find the trace a user names: an app name (its latest trace), a trace uid (or a unique prefix of
one), or a trace file.

Shared by every command that takes a TRACE argument (`match`, `report trace`, `report match`), so they
accept the same things in the same order and word an unknown name the same way. `nodereg trace`
names the app after the program, so in the build directory `match twophase` would find both the app
and the executable `./twophase`: the registry comes first, and a text is taken as a file first only
when it looks like a path (it contains `/` or ends in `.json`). When the other reading exists too, the
lookup says which one it used and how to ask for the other (`Located.note`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from registry.db.statement import execute
from registry.errors import UserError
from registry.io.tracefile import Trace, read_trace
from registry.trace import store

if TYPE_CHECKING:
    import sqlalchemy as sa


@dataclass
class Located:
    """Where a TRACE argument points: a file (`path`) or a stored trace (`trace_id`, `uid`)."""

    path: Path | None
    trace_id: int | None
    uid: str | None
    note: str | None = None   # said to the user when the text could have meant something else


@dataclass
class FoundTrace:
    trace: Trace
    trace_id: int | None     # None: read from a file whose trace is not in this registry
    uid: str | None
    note: str | None = None


def looks_like_path(text: str) -> bool:
    return "/" in text or text.lower().endswith(".json")


def _is_file(path: Path) -> bool:
    """Whether `path` is a file; False for a name the OS refuses to look up (longer than a file name
    may be: Path.is_file raises then)."""
    try:
        return path.is_file()
    except OSError:
        return False


def locate(conn: sa.Connection, text: str) -> Located:
    """Which trace `text` names (see the module's docstring); a one-line error when none."""
    path = Path(text)
    if looks_like_path(text):
        stored = _in_registry(conn, text, prefixes=False)
        note = (f"{text!r} read as a trace file; the registry also has a trace or app of that name "
                f"(a name without `/` or `.json` is looked up there)") if stored else None
        return Located(path, None, None, note)
    stored = _in_registry(conn, text, prefixes=True)
    if stored:
        note = (f"{text!r} taken as the {stored[2]} in the registry; for the file of that name write ./{text}"
                if _is_file(path) else None)
        return Located(None, stored[0], stored[1], note)
    if _is_file(path):
        return Located(path, None, None)
    raise UserError(f"unknown trace {text!r}: not a trace uid, uid prefix, app name or trace file"
                    f"{_known_apps(conn)}")


def _in_registry(conn: sa.Connection, text: str, *, prefixes: bool) -> tuple[int, str, str] | None:
    """(trace_id, uid, what matched) for a uid, an app name (its latest trace) or a unique uid prefix."""
    row = execute(conn, "SELECT trace_id, uid FROM traces WHERE uid = :t", {"t": text}).first()
    if row:
        return row[0], row[1], "trace uid"
    row = execute(conn,
        "SELECT t.trace_id, t.uid FROM traces t JOIN apps a ON a.app_id = t.app_id WHERE a.name = :n "
        "ORDER BY t.started_at DESC, t.trace_id DESC LIMIT 1", {"n": text}).first()
    if row:
        return row[0], row[1], "app"
    if not prefixes:
        return None
    sql, params = by_uid_prefix(text)
    rows = execute(conn, sql + " ORDER BY uid LIMIT 5", params).fetchall()
    if len(rows) > 1:
        some = ", ".join(r[1][:12] for r in rows[:4])
        raise UserError(f"trace uid prefix {text!r} is ambiguous ({some}, ...): give more of the uid")
    return (rows[0][0], rows[0][1], "trace uid prefix") if rows else None


def _known_apps(conn: sa.Connection) -> str:
    apps = execute(conn, "SELECT DISTINCT a.name FROM apps a JOIN traces t ON t.app_id = a.app_id "
                         "ORDER BY a.name LIMIT 8").scalars().all()
    return f" (apps with traces: {', '.join(apps)})" if apps else " (the registry has no traces yet)"


def find_trace(conn: sa.Connection, text: str) -> FoundTrace:
    """The trace `text` names, read from its file or loaded from the registry."""
    where = locate(conn, text)
    if where.path is None:
        return FoundTrace(store.load(conn, where.trace_id), where.trace_id, where.uid, where.note)
    trace = read_trace(where.path)
    uid = trace.meta.get("uid")
    trace_id = execute(conn, "SELECT trace_id FROM traces WHERE uid = :u", {"u": uid}).scalar_one_or_none() \
        if uid else None
    return FoundTrace(trace, trace_id, uid if trace_id is not None else None, where.note)


def by_uid_prefix(prefix: str) -> tuple[str, dict]:
    """(SQL, parameters) of the traces (trace_id, uid) whose uid starts with `prefix`, taken
    literally: '%', '_' and the escape character are escaped, in a LIKE ... ESCAPE clause that
    DuckDB and PostgreSQL both read."""
    literal = prefix.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return "SELECT trace_id, uid FROM traces WHERE uid LIKE :prefix ESCAPE '/'", {"prefix": literal + "%"}
