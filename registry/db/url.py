"""Which registry to open: --db, then NODEREG_DB, then a DuckDB file in the user's data directory.

The one documented form for a DuckDB registry is its path, absolute or relative (`--db ~/reg.duckdb`,
`--db runs/reg.duckdb`); PostgreSQL takes a URL (`postgresql://user@host/db`). SQLAlchemy's
`duckdb:///` URLs are still read, with SQLAlchemy's meaning (three slashes and a relative path, four
for an absolute one), and a URL whose relative reading names a missing directory while its absolute
reading exists (`duckdb:///home/me/x.duckdb`) is an error that says so. A file that is not a DuckDB
database (`--db trace.json`) is refused: DuckDB would otherwise read it as something else or start
an empty database beside it, and writes would land nowhere the user looks.

SQLAlchemy is imported by the functions that parse URLs, not with this module: a DuckDB file given
as a path, or by a plain `duckdb:///` URL, is found without it (`duckdb_file`, the quick start of
read-only commands, registry/db/duckread.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from registry.errors import UserError

if TYPE_CHECKING:
    import sqlalchemy as sa

ENV_VAR = "NODEREG_DB"
_DUCKDB_URL = "duckdb:///"      # SQLAlchemy's prefix of a DuckDB file (then a relative path, or / and an absolute one)


def default_path() -> Path:
    return Path(platformdirs.user_data_dir("nodereg")) / "registry.duckdb"


def default_url() -> str:
    return f"duckdb:///{default_path()}"


def plain_path(cli_value: str | None = None) -> Path | None:
    """The DuckDB file named by a path (--db, then NODEREG_DB) or the default registry, absolute;
    None when a URL names the registry (resolve_url reads those)."""
    text = cli_value or os.environ.get(ENV_VAR)
    if not text:
        return default_path()
    return None if "://" in text else Path(text).expanduser().resolve()


def duckdb_file(cli_value: str | None = None) -> Path | None:
    """The DuckDB file that --db (then NODEREG_DB, then the default) names, found without SQLAlchemy:
    a path (`plain_path`), or a `duckdb:///` URL with nothing but a file in it, read as SQLAlchemy
    reads it (`duckdb:////abs.duckdb`, `duckdb:///rel.duckdb`); None for anything else (PostgreSQL,
    in-memory, a query string, escapes), which resolve_url reads. Importing SQLAlchemy and its DuckDB
    dialect costs a read-only command about 0.4 s: `match APP --from-runs` over 2,723 imported nodes
    took 1.35 s with the URL and 0.9 s with the path (docs/crossarch.md)."""
    path = plain_path(cli_value)
    if path is not None:
        return path
    text = cli_value or os.environ.get(ENV_VAR) or ""
    name = text.removeprefix(_DUCKDB_URL)
    if name == text or not name or name == ":memory:" or any(c in name for c in "?#%"):
        return None
    return Path(name).resolve()


def resolve_url(cli_value: str | None = None) -> sa.URL:
    """The registry URL as a parsed SQLAlchemy URL; a bare file path means a DuckDB file."""
    import sqlalchemy as sa

    path = plain_path(cli_value)
    text = f"duckdb:///{path}" if path is not None else cli_value or os.environ.get(ENV_VAR)
    try:
        url = sa.make_url(text)
    except sa.exc.ArgumentError:
        raise UserError(f"invalid registry URL {mask(text)!r}: expected a DuckDB file's path "
                        "(e.g. ~/registry.duckdb) or postgresql://user@host/dbname") from None
    if url.get_backend_name() not in ("duckdb", "postgresql"):
        raise UserError(f"unsupported registry backend {url.get_backend_name()!r} in {mask(url)}: "
                        "give a DuckDB file's path or a postgresql:// URL")
    if url.get_backend_name() == "postgresql" and url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    path = duckdb_path(url)
    if path is not None:
        _check_duckdb_file(path)
    return url


# the first bytes of every DuckDB database file: a checksum (8 bytes), then the magic "DUCK"
_DUCKDB_MAGIC = (8, b"DUCK")
_OTHER_FORMATS = {".json", ".csv", ".tsv", ".parquet", ".zip", ".gz", ".tar", ".html", ".png", ".svg", ".txt",
                  ".sql", ".py", ".c"}


def _check_duckdb_file(path: Path) -> None:
    """A one-line error for a path that cannot be (or become) a DuckDB registry."""
    if not path.is_absolute() and not path.parent.is_dir() and Path("/", path).parent.is_dir():
        raise UserError(f"registry directory {path.parent} does not exist here; duckdb:/// with three slashes is "
                        f"relative to the current directory: for /{path} pass --db /{path}")
    if path.is_file():
        offset, magic = _DUCKDB_MAGIC
        with open(path, "rb") as f:
            head = f.read(offset + len(magic))
        if head and head[offset:] != magic:
            raise UserError(f"registry file {path} is not a valid DuckDB database (pass --db a .duckdb file, or a "
                            "postgresql:// URL)")
    elif not path.exists() and path.suffix.lower() in _OTHER_FORMATS:
        raise UserError(f"refusing to create a registry named {path} ({path.suffix} is another format): "
                        "pass --db a .duckdb file, or a postgresql:// URL")


def mask(url: sa.URL | str) -> str:
    """The URL as text with any password hidden: safe to print. A DuckDB file is shown as its path,
    the form `--db` documents."""
    import sqlalchemy as sa

    if isinstance(url, str):
        try:
            url = sa.make_url(url)
        except sa.exc.ArgumentError:
            return "<unparseable URL>"
    path = duckdb_path(url)
    return str(path) if path is not None else url.render_as_string(hide_password=True)


def duckdb_path(url: sa.URL) -> Path | None:
    """The file behind a DuckDB URL (None for in-memory or other backends)."""
    if url.get_backend_name() != "duckdb" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)
