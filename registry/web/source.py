"""How the web server reads the registry: read-only, and never in a writer's way for long.

Each page's result is kept with the registry's content stamp (Source.stamp) and served again while
the stamp is unchanged: on DuckDB that check does not even open the file.

DuckDB lets one process write a file or several read it, not both. The server therefore opens the
file read-only for one request at a time and closes it at once (a `nodereg profile`, `import` or
`match` started with `--wait` gets in between requests). While a writer holds the file the server
retries for a moment, then answers from the last snapshot of the same page and says so; with no
snapshot, a 503 page that asks to retry. PostgreSQL has no such lock: a pool of read-only
connections.

Every connection is the read-only path of `nodereg sql` (registry/db/query.py): DuckDB opened
`read_only` with external access off; PostgreSQL in READ ONLY transactions. Nothing here writes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa

from registry.db import db_error, is_driver_error, open_registry
from registry.db.url import duckdb_path, mask, resolve_url
from registry.errors import RegistryLocked

SNAPSHOTS = 256          # pages remembered for the time a writer holds the file


@dataclass
class Stale:
    """A page answered from its snapshot: when that was read, and why the registry could not be."""

    taken_at: float
    reason: str


class Busy(Exception):
    """A writer holds the DuckDB file and this page has no snapshot yet."""


class Source:
    """The registry as the server reads it (thread-safe)."""

    def __init__(self, url_text: str | None, lock_wait_s: float = 1.0):
        url = resolve_url(url_text)
        # create or bring the schema up to date once, as `nodereg sql` does on first use
        open_registry(url_text, readonly=True, wait_s=10.0).close()
        self.url = url
        self.display_url = mask(url)
        self.lock_wait_s = lock_wait_s
        self.duckdb = url.get_backend_name() == "duckdb"
        self._engine = _engine(url)
        self._lock = threading.Lock()          # DuckDB: one open connection at a time
        self.path = duckdb_path(url)
        self._snapshots: OrderedDict[str, tuple[float, object, object]] = OrderedDict()  # key -> (time, stamp, result)
        self._memo: dict[str, tuple[object, object]] = {}
        self._snap_lock = threading.Lock()
        self._local = threading.local()

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    @contextmanager
    def connect(self):
        """A read-only connection for one request (DuckDB: waits up to lock_wait_s for a writer)."""
        if not self.duckdb:
            with self._engine.connect() as conn:
                yield conn
            return
        with self._lock:
            deadline = time.monotonic() + self.lock_wait_s
            while True:
                try:
                    conn = self._engine.connect()
                    break
                except Exception as exc:  # noqa: BLE001 - a lock becomes RegistryLocked, the rest re-raised
                    err = db_error(exc, self.url) if is_driver_error(exc) else exc
                    if not isinstance(err, RegistryLocked) or time.monotonic() >= deadline:
                        raise err from None
                    time.sleep(0.05)
            try:
                yield conn
            finally:
                conn.close()

    def stamp(self, conn: sa.Connection | None = None):
        """What the registry's content is now: on DuckDB the file's and its write-ahead log's size and
        time of change (every commit changes one of them; read without opening the file), on
        PostgreSQL row counts and highest keys of the tables the pages show, and the server's count
        of changed rows (`conn` needed)."""
        if self.path is not None:
            return tuple((p.stat().st_size, p.stat().st_mtime_ns) if p.exists() else None
                         for p in (self.path, self.path.with_name(self.path.name + ".wal")))
        from registry.web.queries import STAMP_SQL

        return tuple(conn.execute(sa.text(STAMP_SQL + ", (SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) "
                                                       "FROM pg_stat_user_tables)")).one())

    def read(self, key: str, work):
        """`work(conn)` on a fresh read-only connection, or its result from before when the registry has
        not changed since; (result, None), or (last result, Stale) while a writer holds the file.
        Raises Busy when a writer holds it and `key` has no snapshot."""
        with self._snap_lock:
            kept = self._snapshots.get(key)
        if kept is not None and self.path is not None and kept[1] == self.stamp():
            return kept[2], None   # unchanged: the writer-free answer, without opening the file
        try:
            with self.connect() as conn:
                stamp = self.stamp(conn)
                if kept is not None and kept[1] == stamp:
                    return kept[2], None
                self._local.stamp = stamp
                result = work(conn)
        except RegistryLocked as exc:
            if kept is None:
                raise Busy(str(exc)) from None
            return kept[2], Stale(kept[0], str(exc))
        with self._snap_lock:
            self._snapshots[key] = (time.time(), stamp, result)
            self._snapshots.move_to_end(key)
            while len(self._snapshots) > SNAPSHOTS:
                self._snapshots.popitem(last=False)
        return result, None

    def memo(self, conn: sa.Connection, name: str, build):
        """`build(conn)`, kept while the registry's content is unchanged: what several pages derive
        from the same costly query (the node-type summary at 10,000 types). Inside `read` only."""
        stamp = self._local.stamp
        with self._snap_lock:
            kept = self._memo.get(name)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        value = build(conn)
        with self._snap_lock:
            self._memo[name] = (stamp, value)
        return value

    def close(self) -> None:
        self._engine.dispose()


def _engine(url: sa.URL) -> sa.Engine:
    if url.get_backend_name() == "duckdb":
        eng = sa.create_engine(url, connect_args={"read_only": True}, poolclass=sa.pool.NullPool)

        @sa.event.listens_for(eng, "connect")
        def _no_files(dbapi_conn, _record):  # as `nodereg sql`: a read-only DuckDB still reads and writes files
            dbapi_conn.execute("SET enable_external_access = false")
        return eng
    return sa.create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=4).execution_options(
        postgresql_readonly=True)
