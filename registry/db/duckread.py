"""A DuckDB registry read without SQLAlchemy: the quick start of reading commands (`nodereg nodes`,
`nodereg match`).

Importing SQLAlchemy with its DuckDB dialect and opening an engine takes about 0.4 s of CPU: most of
the 0.3 s start-up target of a command whose query takes milliseconds (issue 30,
scripts/bench_startup.py), and a third of `match` over 10,000 nodes (scripts/bench_scale.py). A
command that only reads may open its registry here: a DuckDB file given as a path or a plain
`duckdb:///` URL (or the default one) that is at this nodereg's schema is opened `read_only`
through the duckdb module itself. The QuickReader then stands in for a SQLAlchemy connection
wherever the reading code runs its SQL through `registry.db.statement.execute` and
`registry.db.read.read_arrays`: the same SQL text with the same `:name` parameters, and results with
the part of SQLAlchemy's Result that the readers use (rows by position and by name, `first`, `one`,
`scalar`, `scalars`, `mappings`).

Anything else (a URL with options, PostgreSQL, a missing, locked or foreign file, a schema to
migrate, any error) returns None, and the caller opens the registry the usual way
(registry.db.open_registry), which reports what is wrong in its own words: no check and no message
here duplicates it.
"""

import re
from collections import namedtuple
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

from registry.db.migrations import latest_version
from registry.db.url import duckdb_file

# SQLAlchemy text()'s bind parameters (`:name`, not `::type` casts; its own pattern), as DuckDB's `$name`
_PARAM = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")


class Rows:
    """A fetched result, read as SQLAlchemy's Result is: iterated as rows (tuples whose fields are
    also attributes by column name), or through the methods below."""

    def __init__(self, names: list[str], items: list, make=None):
        self.names = names
        self._raw = items       # rows as fetched (plain tuples); or values (`scalars`), or {column: value} (`mappings`)
        self._make = make       # a fetched tuple as a row, on first use (`plain` skips it: read_arrays' 10,000-row reads)

    @classmethod
    def fetched(cls, cursor) -> "Rows":
        names = [d[0] for d in cursor.description]
        return cls(names, cursor.fetchall(), namedtuple("Row", names, rename=True)._make)

    @property
    def _items(self) -> list:
        if self._make is not None:
            self._raw, self._make = [self._make(r) for r in self._raw], None
        return self._raw

    def __iter__(self):
        return iter(self._items)

    def keys(self) -> list[str]:
        return list(self.names)

    def plain(self) -> list:
        """The rows as fetched, read by position only (registry.db.read's columns)."""
        return self._raw

    def all(self) -> list:
        return list(self._items)

    fetchall = all

    def first(self):
        return self._items[0] if self._items else None

    def one(self):
        if len(self._items) != 1:
            raise LookupError(f"expected one row, got {len(self._items)}")
        return self._items[0]

    def scalar(self):
        return self._items[0][0] if self._items else None

    def scalar_one(self):
        return self.one()[0]

    def scalar_one_or_none(self):
        return self.one()[0] if self._items else None

    def scalars(self) -> "Rows":
        return Rows(self.names[:1], [r[0] for r in self._raw])

    def mappings(self) -> "Rows":
        return Rows(self.names, [dict(zip(self.names, r)) for r in self._raw])


@dataclass
class QuickReader:
    """An open read-only DuckDB registry at this nodereg's schema (see `open_current`); also its
    own connection (`connect`)."""

    con: object           # a DuckDBPyConnection
    version: int
    dialect = SimpleNamespace(name="duckdb")

    def native(self, sql: str, params: dict | None = None):
        """`sql` (SQLAlchemy text() style, `:name` parameters) run by DuckDB: its result relation.
        Parameters the text does not name are left out, as SQLAlchemy leaves them (DuckDB refuses them)."""
        named = set(_PARAM.findall(sql))
        return self.con.execute(_PARAM.sub(r"$\1", sql), {k: v for k, v in (params or {}).items() if k in named})

    def rows(self, sql: str, params: dict | None = None) -> Rows:
        return Rows.fetched(self.native(sql, params))

    def dicts(self, sql: str, params: dict | None = None) -> list[dict]:
        """The rows of one SELECT as {column: value} (as `Registry.dicts`)."""
        return self.rows(sql, params).mappings().all()

    @classmethod
    def if_current(cls, con, error: type[Exception]):
        """A reader of the open connection `con` if its registry is at this nodereg's schema; else
        None, `con` closed (`error`: the driver's exceptions)."""
        try:
            version = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        except error:
            version = None
        if version != latest_version():
            con.close()
            return None
        return cls(con, version)

    @contextmanager
    def connect(self):
        """Itself, as `Registry.connect()` yields a connection."""
        yield self

    def close(self) -> None:
        self.con.close()


def open_current(cli_value: str | None) -> QuickReader | None:
    """The registry that `--db cli_value` names, read-only, if it is a DuckDB file at this
    nodereg's schema that opens at once; None otherwise (open it with open_registry)."""
    path = duckdb_file(cli_value)
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
    return QuickReader.if_current(con, duck.Error)
