"""Applications in the registry: looked up and created by name, one place for every writer."""

import sqlalchemy as sa

from registry.db import utcnow
from registry.db.write import get_or_create
from registry.errors import UserError


def find_app_id(conn: sa.Connection, name: str) -> int | None:
    return conn.execute(sa.text("SELECT app_id FROM apps WHERE name = :n"), {"n": name}).scalar_one_or_none()


def ensure_app(conn: sa.Connection, name: str, description: str | None = None) -> int:
    """The app's id, created on first use (race-safe with concurrent writers)."""
    if not name or not name.strip():
        raise UserError("an app name must not be empty")
    return get_or_create(conn, "apps", {"name": name}, {"description": description, "created_at": utcnow()},
                         "app_id")


def require_app_id(conn: sa.Connection, name: str) -> int:
    app_id = find_app_id(conn, name)
    if app_id is None:
        known = [r[0] for r in conn.execute(sa.text("SELECT name FROM apps ORDER BY name LIMIT 8"))]
        hint = f" (known: {', '.join(known)})" if known else " (the registry has no apps yet)"
        raise UserError(f"unknown app {name!r}{hint}")
    return app_id
