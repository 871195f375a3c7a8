"""Opening a registry: engine creation, first-use initialisation, read-only mode, lock waits.

When an open may change a schema, and when it must not: see open_registry.

Read-only is enforced by the database connection (DuckDB `read_only`, PostgreSQL read-only
transactions), never by inspecting SQL text.
"""

import re
import time
from dataclasses import dataclass

import sqlalchemy as sa

from registry.db import migrate as _migrate
from registry.db import upgrade as _upgrade
from registry.db.url import default_url, duckdb_path, mask, resolve_url
from registry.errors import RegistryLocked, StorageError, UserError

_LOCK = re.compile(r"Conflicting lock is held in (?P<prog>.+?) \(PID (?P<pid>\d+)\)")


@dataclass
class Registry:
    """An open registry: the engine plus what callers need to know about it."""

    engine: sa.Engine
    url: sa.URL
    readonly: bool
    version: int = 0     # its schema version when opened

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def display_url(self) -> str:
        return mask(self.url)

    def begin(self):
        """A transaction: everything inside commits together or not at all."""
        return self.engine.begin()

    def connect(self):
        return self.engine.connect()

    def dicts(self, sql: str, params: dict | None = None) -> list[dict]:
        """The rows of one SELECT as {column: value} (also a QuickReader's, registry/db/duckread.py)."""
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(sa.text(sql), params or {})]

    def write(self, work, retries: int = 3):
        """Run `work(conn)` in one transaction; retry when a concurrent writer won a race.

        Two writers adding the same uid or name at once: the loser's transaction fails with an
        integrity error and rolls back whole; on retry it sees the winner's rows and skips them.
        """
        for attempt in range(retries):
            try:
                with self.engine.begin() as conn:
                    return work(conn)
            except Exception as exc:  # noqa: BLE001 - only integrity races are retried
                if not _is_conflict(exc) or attempt == retries - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def close(self) -> None:
        self.engine.dispose()


def open_registry(url_text: str | None = None, *, readonly: bool = False, wait_s: float = 0.0,
                  migrate: bool = True, site: bool = False, announce=None) -> Registry:
    """Open the registry at `url_text` (see resolve_url).

    A read-only open never creates a registry and never changes a PostgreSQL schema. A writable
    open with `migrate` creates a missing registry and brings an older schema up to date, except
    with `site` (the command line): there a PostgreSQL registry must be at this nodereg's schema
    already (`nodereg migrate` or `init` change it, registry/db/upgrade.py), while a DuckDB file,
    a single user's, is migrated on open, read-only too, with `announce(line)` telling so.
    """
    url = resolve_url(url_text)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return _open(url, readonly=readonly, migrate=migrate, site=site, announce=announce)
        except RegistryLocked:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _open(url: sa.URL, *, readonly: bool, migrate: bool, site: bool, announce) -> Registry:
    path = duckdb_path(url)
    if path is not None:
        if path.exists() and path.is_dir():
            raise UserError(f"registry path {path} is a directory, not a DuckDB file")
        if readonly and not path.exists():
            raise UserError(f"there is no registry at {path}: a read-only command creates none "
                            "(`nodereg init` or `nodereg profile NODE` create one; check --db or NODEREG_DB)")
        _make_parent(path)
    eng = _engine(url, readonly=readonly)
    version = _probe_version(eng, url)
    try:
        _migrate.check_compatible(version)
        if site and path is None:
            _upgrade.require_schema(version, url, readonly=readonly)
        elif migrate and version < _migrate.latest_version() and (not readonly or (site and path is not None)):
            if readonly:   # a DuckDB file: migrated through a short writable open, then read
                eng.dispose()
                if not version:
                    raise UserError(f"{path} holds no nodereg registry: `nodereg init` creates one there")
                eng = _engine(url, readonly=False)
            version = _upgrade.on_open(eng, url, path, announce if site else None)
            if readonly:
                eng.dispose()
                eng = _engine(url, readonly=True)
        elif readonly and not version and (migrate or site):
            raise UserError(f"{mask(url)} holds no nodereg registry yet: `nodereg init` creates one "
                            "(a read-only command creates none)")
    except UserError:
        eng.dispose()
        raise
    except Exception as exc:  # noqa: BLE001 - any driver failure becomes one line
        eng.dispose()
        raise db_error(exc, url) from None
    return Registry(eng, url, readonly=readonly, version=version)


def _make_parent(path) -> None:
    """Only the default registry's directory is created: a directory missing from a URL given by
    hand is more likely a typo than a wish (`duckdb:///nonexistent_dir/x.duckdb`)."""
    if path.parent.is_dir():
        return
    if path != duckdb_path(resolve_url(default_url())):
        raise UserError(f"cannot create registry {path}: directory {path.parent} does not exist "
                        "(create it first, or check the --db URL)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the registry directory {path.parent}: {exc.strerror}") from None


def _probe_version(eng: sa.Engine, url: sa.URL) -> int:
    try:
        with eng.connect() as conn:
            return _migrate.current_version(conn)
    except Exception as exc:  # noqa: BLE001
        eng.dispose()
        raise db_error(exc, url) from None


def _engine(url: sa.URL, *, readonly: bool) -> sa.Engine:
    if url.get_backend_name() == "duckdb":
        args = {"read_only": True} if readonly else {}
        return sa.create_engine(url, connect_args=args, poolclass=sa.pool.SingletonThreadPool)
    try:
        eng = sa.create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError:
        raise UserError("PostgreSQL support needs psycopg: pip install 'nodereg[postgres]'") from None
    if readonly:
        eng = eng.execution_options(postgresql_readonly=True)
    return eng


def _is_conflict(exc: BaseException) -> bool:
    """A unique-key conflict, raised through SQLAlchemy or by a driver's bulk path (COPY, DataFrame scan)."""
    return any(cls.__name__ in ("IntegrityError", "ConstraintException") for cls in type(exc).__mro__)


def is_driver_error(exc: BaseException) -> bool:
    """An error raised by the database (through SQLAlchemy, or by a driver's bulk path directly)."""
    return isinstance(exc, sa.exc.SQLAlchemyError) or type(exc).__module__.split(".")[0] in (
        "duckdb", "_duckdb", "psycopg")


def _root_message(exc: BaseException) -> str:
    """First line of the most telling error in the chain.

    A failed write inside a transaction often surfaces as "transaction is aborted" raised by the
    rollback; the real cause (disk full, constraint, ...) is the exception it replaced.
    """
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(getattr(exc, "orig", None) or exc)
        exc = exc.__cause__ or exc.__context__
    lines = [(str(e).strip().splitlines() or [type(e).__name__])[0] for e in chain]
    return next((ln for ln in lines if "transaction is aborted" not in ln.lower()), lines[0])


def db_error(exc: BaseException, url: sa.URL | None = None) -> UserError:
    """Translate any database/driver exception into one clear line."""
    first = _root_message(exc)
    where = f" ({mask(url)})" if url is not None else ""
    m = _LOCK.search(first)
    if m:
        return RegistryLocked(f"registry{where} is in use by another process (PID {m['pid']}: {m['prog']}); "
                         "wait for it, or pass --wait SECONDS")
    low = first.lower()
    if "no space left" in low or "disk full" in low:
        return StorageError(f"the registry's disk is full{where}: nothing was written ({first})")
    if "read-only file system" in low or "permission denied" in low:
        return StorageError(f"cannot write the registry{where}: {first}")
    if "read-only" in low or "read only" in low:
        return UserError(f"the registry is opened read-only; statement rejected: {first}")
    if "not a valid duckdb database" in low or "corrupt" in low:
        return UserError(f"registry file{where} is not a valid DuckDB database: {first}")
    return UserError(f"database error{where}: {first}")
