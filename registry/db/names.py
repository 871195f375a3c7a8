"""Rows identified by name (nodes, apps): look-up, and the one-line error that lists what exists."""

import sqlalchemy as sa

from registry.errors import UserError


def find_id(conn: sa.Connection, table: str, key: str, name: str) -> int | None:
    return conn.execute(sa.text(f"SELECT {key} FROM {table} WHERE name = :n"), {"n": name}).scalar_one_or_none()


def require_id(conn: sa.Connection, table: str, key: str, name: str, noun: str) -> int:
    """The id of `name`, or a UserError naming a few that do exist."""
    found = find_id(conn, table, key, name)
    if found is None:
        known = [r[0] for r in conn.execute(sa.text(f"SELECT name FROM {table} ORDER BY name LIMIT 8"))]
        hint = f" (known: {', '.join(known)})" if known else f" (the registry has no {noun}s yet)"
        raise UserError(f"unknown {noun} {name!r}{hint}")
    return found
