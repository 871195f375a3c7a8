"""How the web server reads the registry: read-only, and never in a writer's way for long.

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
        self.duckdb = duckdb_path(url) is not None or url.get_backend_name() == "duckdb"
        self._engine = _engine(url)
        self._lock = threading.Lock()          # DuckDB: one open connection at a time
        self._snapshots: OrderedDict[str, tuple[float, object]] = OrderedDict()
        self._memo: dict[str, tuple[object, object]] = {}

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

    def read(self, key: str, work):
        """`work(conn)` on a fresh read-only connection; (result, None), or (last result, Stale)
        while a writer holds the file. Raises Busy when there is no snapshot of `key`."""
        try:
            with self.connect() as conn:
                result = work(conn)
        except RegistryLocked as exc:
            with self._lock_snapshots():
                kept = self._snapshots.get(key)
            if kept is None:
                raise Busy(str(exc)) from None
            return kept[1], Stale(kept[0], str(exc))
        with self._lock_snapshots():
            self._snapshots[key] = (time.time(), result)
            self._snapshots.move_to_end(key)
            while len(self._snapshots) > SNAPSHOTS:
                self._snapshots.popitem(last=False)
        return result, None

    def memo(self, conn: sa.Connection, name: str, stamp, build):
        """`build(conn)`, kept until `stamp` (what the registry's content was when it was built) changes:
        for what is costly to derive and changes only when a writer adds data (the node-type summary)."""
        kept = self._memo.get(name)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        value = build(conn)
        self._memo[name] = (stamp, value)
        return value

    _snap_lock = threading.Lock()

    @contextmanager
    def _lock_snapshots(self):
        with self._snap_lock:
            yield

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
