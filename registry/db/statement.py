"""One SQL statement, with `:name` parameters, on whichever connection a command holds: a SQLAlchemy
connection, or a QuickReader (registry/db/duckread.py), which reads a DuckDB registry without
importing SQLAlchemy. Code on a reading command's path (`match`) runs its SQL through here, so that
the same function serves both; the result reads as SQLAlchemy's Result does."""

from collections.abc import Mapping


def execute(conn, sql: str, params: Mapping | list[Mapping] | None = None):
    """Run `sql` on `conn` with `params` (a list of them: once per item, on SQLAlchemy); returns its
    result (rows, `first`, `scalar`, `mappings`...)."""
    rows = getattr(conn, "rows", None)
    if rows is not None:    # a QuickReader
        return rows(sql, params)
    import sqlalchemy as sa

    return conn.execute(sa.text(sql), params or {})
