"""A DuckDB registry read without SQLAlchemy: the quick start of read-only listings (`nodereg nodes`).

Importing SQLAlchemy with its DuckDB dialect takes about 0.25 s of CPU, most of the 0.3 s start-up
target of a command whose query takes milliseconds (issue 30, scripts/bench_startup.py). A command
that only runs SELECTs may open its registry here: a DuckDB file given as a path (or the default
one) that is at this nodereg's schema is opened `read_only` through the duckdb module itself, and
`dicts` runs the same SQL text with the same `:name` parameters as `Registry.dicts` does through
SQLAlchemy. Anything else (a URL, PostgreSQL, a missing, locked or foreign file, a schema to
migrate, any error) returns None, and the caller opens the registry the usual way
(registry.db.open_registry), which reports what is wrong in its own words: no check and no
message here duplicates it.
"""

import re
from dataclasses import dataclass

from registry.db.migrations import latest_version
from registry.db.url import plain_path

# SQLAlchemy text()'s bind parameters (`:name`, not `::type` casts), written as DuckDB's `$name`
_PARAM = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")


@dataclass
class QuickReader:
    """An open read-only DuckDB registry at this nodereg's schema (see `open_current`)."""

    con: object           # a DuckDBPyConnection
    version: int

    def dicts(self, sql: str, params: dict | None = None) -> list[dict]:
        """The rows of one SELECT as {column: value}."""
        cur = self.con.execute(_PARAM.sub(r"$\1", sql), params or {})
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def close(self) -> None:
        self.con.close()


def open_current(cli_value: str | None) -> QuickReader | None:
    """The registry that `--db cli_value` names, read-only, if it is a DuckDB file at this
    nodereg's schema that opens at once; None otherwise (open it with open_registry)."""
    path = plain_path(cli_value)
    if path is None or not path.is_file():
        return None
    try:  # the C extension alone: the duckdb package's Python layer around it takes 0.1 s more to import
        import _duckdb as duck
    except ImportError:  # pragma: no cover - a duckdb without that layer (before 1.4)
        import duckdb as duck

    try:
        con = duck.connect(str(path), read_only=True)
    except duck.Error:
        return None
    try:
        version = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    except duck.Error:
        version = None
    if version != latest_version():
        con.close()
        return None
    return QuickReader(con, version)
