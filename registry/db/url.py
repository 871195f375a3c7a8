"""Which registry to open: --db, then NODEREG_DB, then a DuckDB file in the user's data directory."""

import os
from pathlib import Path

import platformdirs
import sqlalchemy as sa

from registry.errors import UserError

ENV_VAR = "NODEREG_DB"


def default_url() -> str:
    path = Path(platformdirs.user_data_dir("nodereg")) / "registry.duckdb"
    return f"duckdb:///{path}"


def resolve_url(cli_value: str | None = None) -> sa.URL:
    """The registry URL as a parsed SQLAlchemy URL; a bare file path means a DuckDB file."""
    text = cli_value or os.environ.get(ENV_VAR) or default_url()
    if "://" not in text:
        text = f"duckdb:///{Path(text).expanduser().resolve()}"
    try:
        url = sa.make_url(text)
    except sa.exc.ArgumentError:
        raise UserError(f"invalid registry URL {mask(text)!r}: expected e.g. duckdb:///path/registry.duckdb "
                        "or postgresql://user@host/dbname") from None
    if url.get_backend_name() not in ("duckdb", "postgresql"):
        raise UserError(f"unsupported registry backend {url.get_backend_name()!r} in {mask(url)}: "
                        "use duckdb:/// or postgresql://")
    if url.get_backend_name() == "postgresql" and url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    return url


def mask(url: sa.URL | str) -> str:
    """The URL as text with any password hidden: safe to print."""
    if isinstance(url, str):
        try:
            url = sa.make_url(url)
        except sa.exc.ArgumentError:
            return "<unparseable URL>"
    return url.render_as_string(hide_password=True)


def duckdb_path(url: sa.URL) -> Path | None:
    """The file behind a DuckDB URL (None for in-memory or other backends)."""
    if url.get_backend_name() != "duckdb" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)
