"""Numbered SQL migrations from schema/migrations, recorded in the schema_version table.

A file `NNNN_name.sql` holds statements separated by lines containing only ';' (so that a
statement may itself contain semicolons in strings). Each migration runs in its own transaction.

On PostgreSQL the whole upgrade runs under an advisory lock: the jobs of a fleet (`nodereg fleet`)
open a fresh or just-upgraded shared registry at the same moment; one migrates, the others wait for
it and then find nothing left to do (without the lock they raced to create the same tables). A
DuckDB file admits one writer at a time already.
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from registry import __version__
from registry.db.time import utcnow
from registry.errors import UserError
from registry.resources import data_dir

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x6E6F646572656701  # the advisory lock of schema changes ('nodereg', 1)
_VERSION_DDL = """CREATE TABLE schema_version (
    version      INTEGER PRIMARY KEY,
    name         VARCHAR NOT NULL,
    applied_at   TIMESTAMP NOT NULL,
    tool_version VARCHAR NOT NULL
)"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def statements(self) -> list[str]:
        text = self.path.read_text()
        parts = re.split(r"(?m)^\s*;\s*$", text)
        return [p.strip() for p in parts if _strip_comments(p).strip()]


def _strip_comments(sql: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


def available() -> list[Migration]:
    found = []
    for path in sorted((data_dir("schema") / "migrations").glob("*.sql")):
        m = _NAME.match(path.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), path))
    return found


def latest_version() -> int:
    return max(m.version for m in available())


def current_version(conn: sa.Connection) -> int:
    """Schema version of the registry behind `conn`; 0 for an empty database."""
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(sa.text("SELECT coalesce(max(version), 0) FROM schema_version")).scalar_one()


def check_compatible(version: int) -> None:
    if version > latest_version():
        raise UserError(f"this registry has schema version {version}, newer than this nodereg "
                        f"({__version__}, schema {latest_version()}): upgrade nodereg to use it")


@contextmanager
def _schema_lock(conn: sa.Connection) -> Iterator[None]:
    """Hold the schema-change lock for the block (PostgreSQL; a session lock, released on exit, or
    by the server if this process dies)."""
    if conn.dialect.name != "postgresql":
        yield
        return
    conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _LOCK_KEY})
    conn.commit()
    try:
        yield
    finally:
        if not conn.invalidated:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})
            conn.commit()


def migrate(engine: sa.Engine) -> tuple[int, int]:
    """Apply every migration the registry has not recorded yet, in order; returns (version before, after).

    By the recorded set, not by "newer than the highest": a migration numbered below one already
    applied (merged from a parallel line of work) is still applied.
    """
    with engine.connect() as conn, _schema_lock(conn):
        with conn.begin():
            before = current_version(conn)
            check_compatible(before)
            if not sa.inspect(conn).has_table("schema_version"):
                conn.execute(sa.text(_VERSION_DDL))
            applied = {v for (v,) in conn.execute(sa.text("SELECT version FROM schema_version"))}
        for mig in available():
            if mig.version in applied:
                continue
            with conn.begin():
                for stmt in mig.statements():
                    conn.execute(sa.text(stmt))
                conn.execute(sa.text("INSERT INTO schema_version (version, name, applied_at, tool_version) "
                                     "VALUES (:v, :n, :t, :tv)"),
                             {"v": mig.version, "n": mig.name, "t": utcnow(), "tv": __version__})
    return before, latest_version()
