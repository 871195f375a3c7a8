"""Applications in the registry: looked up and created by name, one place for every writer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from registry.db import utcnow
from registry.db.names import check_name, find_id, require_id
from registry.db.write import get_or_create

if TYPE_CHECKING:
    import sqlalchemy as sa


def find_app_id(conn: sa.Connection, name: str) -> int | None:
    return find_id(conn, "apps", "app_id", name)


def ensure_app(conn: sa.Connection, name: str, description: str | None = None) -> int:
    """The app's id, created on first use (race-safe with concurrent writers)."""
    check_name(name, "app")
    return get_or_create(conn, "apps", {"name": name}, {"description": description, "created_at": utcnow()},
                         "app_id")


def require_app_id(conn: sa.Connection, name: str) -> int:
    return require_id(conn, "apps", "app_id", name, "app")
