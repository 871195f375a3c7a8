"""Registry storage: URL resolution, engine, migrations and bulk writes (DuckDB and PostgreSQL)."""

from registry.db.engine import Registry, db_error, is_driver_error, open_registry
from registry.db.time import utcnow
from registry.db.url import mask, resolve_url

__all__ = ["Registry", "db_error", "is_driver_error", "mask", "open_registry", "resolve_url", "utcnow"]
