"""Numbered SQL migrations from schema/migrations, recorded in the schema_version table.

A file `NNNN_name.sql` holds statements separated by lines containing only ';' (so that a
statement may itself contain semicolons in strings). Each migration runs in its own transaction.

Each applied migration is recorded with the checksum of the statements it ran (comments and
spacing aside, so that a reworded comment changes nothing); a file that no longer matches what a
registry applied is refused before anything else runs: a registry's history is then unknown.
Migrations that delete rows or drop tables or columns are named by `Plan.destructive`, so that
the caller can save the data first (registry/db/upgrade.py).

On PostgreSQL the whole upgrade runs under an advisory lock: two admins (or a fleet's jobs on a
fresh registry) that migrate at once take turns; the second finds nothing left to do. A DuckDB
file admits one writer at a time already.

Why our own runner and not Alembic or yoyo: what a site needs here is a checksum of each applied
file, a dry run, knowing which steps destroy data (to save it first), the same SQL files on DuckDB
and PostgreSQL, and registries created by earlier nodereg versions with this schema_version table.
yoyo has no DuckDB backend; Alembic keeps one revision id per database (no per-file checksum, no
record of steps merged from parallel lines of work, which this runner applies by the recorded
set), and its Python revisions would replace the portable SQL files that are the schema's
documentation. Each of these needs code of ours on top; the runner is about 150 lines.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa

from registry import __version__
from registry.db import migrations
from registry.db.migrations import Migration, available, latest_version  # noqa: F401 - read through here too
from registry.db.time import utcnow
from registry.errors import UserError
from registry.values import listed

_LOCK_KEY = 0x6E6F646572656701  # the advisory lock of schema changes ('nodereg', 1)
VERSION_DDL = """CREATE TABLE schema_version (
    version      INTEGER PRIMARY KEY,
    name         VARCHAR NOT NULL,
    applied_at   TIMESTAMP NOT NULL,
    tool_version VARCHAR NOT NULL
)"""
CHECKSUMS_FROM = 15   # the migration that adds schema_version.checksum


def current_version(conn: sa.Connection) -> int:
    """Schema version of the registry behind `conn`; 0 for an empty database."""
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(sa.text("SELECT coalesce(max(version), 0) FROM schema_version")).scalar_one()


def check_compatible(version: int) -> None:
    if version > migrations.latest_version():
        raise UserError(f"this registry has schema version {version}, newer than this nodereg "
                        f"({__version__}, schema {migrations.latest_version()}): upgrade nodereg to use it")


@dataclass
class Plan:
    """Where a registry stands against this nodereg's migrations, before anything runs."""

    version: int                  # the registry's schema version (0: empty)
    pending: list[Migration]      # to apply, in order
    changed: list[Migration]      # applied with other statements than their file holds now

    @property
    def destructive(self) -> list[Migration]:
        """Pending migrations that delete or drop data of an existing registry."""
        return [m for m in self.pending if m.destroys] if self.version else []

    def refuse_changed(self) -> None:
        if self.changed:
            files = listed([m.file for m in self.changed], "migration file")
            raise UserError(f"{files} {'differs' if len(self.changed) == 1 else 'differ'} from what this registry applied (checksum): "
                            "the file was changed after it ran; restore it from the nodereg release that "
                            "applied it (`nodereg migrate --dry-run` lists the registry's state)")


def plan(conn: sa.Connection, target: int | None = None) -> Plan:
    """What `migrate` would do on the registry behind `conn` (reads only)."""
    version = current_version(conn)
    check_compatible(version)
    applied = _applied(conn) if version else {}
    shipped = migrations.available()
    pending = [m for m in shipped if m.version not in applied and (target is None or m.version <= target)]
    changed = [m for m in shipped if applied.get(m.version) not in (None, m.checksum)]
    return Plan(version, pending, changed)


def _applied(conn: sa.Connection) -> dict[int, str | None]:
    """{version: recorded checksum (None: applied before checksums were kept)}."""
    if _has_checksums(conn):
        return dict(conn.execute(sa.text("SELECT version, checksum FROM schema_version")).fetchall())
    return {v: None for (v,) in conn.execute(sa.text("SELECT version FROM schema_version"))}


def _has_checksums(conn: sa.Connection) -> bool:
    return bool(conn.execute(sa.text(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'schema_version' AND column_name = 'checksum'")).scalar_one())


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


def migrate(engine: sa.Engine, *, target: int | None = None, before_destroying=None) -> tuple[int, int]:
    """Apply every migration the registry has not recorded yet (up to `target`), in order; returns
    (version before, after).

    By the recorded set, not by "newer than the highest": a migration numbered below one already
    applied (merged from a parallel line of work) is still applied. `before_destroying(conn, plan)`
    runs first, under the lock, when a pending migration deletes or drops data (a backup).
    """
    with engine.connect() as conn, _schema_lock(conn):
        with conn.begin():
            steps = plan(conn, target)
            steps.refuse_changed()
            if not steps.pending:
                return steps.version, steps.version
            if not steps.version and not sa.inspect(conn).has_table("schema_version"):
                conn.execute(sa.text(VERSION_DDL))
        if steps.destructive and before_destroying is not None:
            before_destroying(conn, steps)
        for mig in steps.pending:
            with conn.begin():
                for stmt in mig.statements():
                    conn.execute(sa.text(stmt))
                if mig.version in COMPLETIONS:
                    _complete(conn, COMPLETIONS[mig.version])
                _record(conn, mig)
        with conn.begin():
            _fill_checksums(conn)
            after = current_version(conn)
    return steps.version, after


# Python steps that complete a migration in its own transaction: derived rows that SQL cannot
# compute, for the data already there ("module:function", called with the connection)
COMPLETIONS = {22: "registry.profile.vectors:pack_all", 23: "registry.profile.vectors:store_uncompressed"}


def _complete(conn: sa.Connection, step: str) -> None:
    import importlib

    module, _, function = step.partition(":")
    getattr(importlib.import_module(module), function)(conn)


def _record(conn: sa.Connection, mig: Migration) -> None:
    row = {"v": mig.version, "n": mig.name, "t": utcnow(), "tv": __version__, "c": mig.checksum}
    if _has_checksums(conn):
        conn.execute(sa.text("INSERT INTO schema_version (version, name, applied_at, tool_version, checksum) "
                             "VALUES (:v, :n, :t, :tv, :c)"), row)
    else:
        conn.execute(sa.text("INSERT INTO schema_version (version, name, applied_at, tool_version) "
                             "VALUES (:v, :n, :t, :tv)"), row)


def _fill_checksums(conn: sa.Connection) -> None:
    """Migrations applied before checksums were kept get the checksum of their file now (trusted once,
    as an upgrade from a release that did not record them)."""
    if not _has_checksums(conn):
        return
    for mig in migrations.available():
        conn.execute(sa.text("UPDATE schema_version SET checksum = :c WHERE version = :v AND checksum IS NULL"),
                     {"c": mig.checksum, "v": mig.version})
