"""Who may change a registry's schema, and the backup taken before a migration destroys data.

A PostgreSQL registry is shared by many people and many nodereg versions: only `nodereg migrate`
(or `init`) changes its schema, when its admin chooses; every other command on an older schema says
which version it needs and how to migrate, and reads what it can meanwhile. A DuckDB file is one
user's: it is migrated when opened, and the command says so on stderr.

A migration that deletes rows or drops tables (migrate.Plan.destructive) first saves every table of
the registry as an export bundle (registry/io/bundle.py), which `nodereg import bundle` reads back.
"""

from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

from registry.db import migrate as _migrate
from registry.db.url import mask
from registry.errors import UserError


def how_to_migrate(url: sa.URL) -> str:
    return (f"its admin runs `nodereg --db {mask(url)} migrate` (`--dry-run` first shows each step and "
            "what it deletes; docs/storage.md)")


def require_schema(version: int, url: sa.URL, *, readonly: bool) -> None:
    """PostgreSQL, from the command line: a writable open needs this nodereg's schema exactly; a
    read-only one goes on with an older schema (see `behind`)."""
    latest = _migrate.latest_version()
    if not version:
        raise UserError(f"{mask(url)} holds no nodereg registry yet: create it with `nodereg --db {mask(url)} init`")
    if version == latest:
        return
    if not readonly:
        raise UserError(f"this registry has schema version {version}; this nodereg needs {latest} to write to it: "
                        + how_to_migrate(url))


def behind(registry) -> str | None:
    """The warning for a registry read at an older schema than this nodereg's (None: it is current)."""
    latest = _migrate.latest_version()
    if registry.version >= latest:
        return None
    return (f"warning: this registry has schema version {registry.version}, older than this nodereg's ({latest}); "
            f"reading it as it is: {how_to_migrate(registry.url)}")


def require_current(registry, command: str) -> None:
    """For commands that read columns an older schema lacks (match, accuracy): one line saying why not."""
    latest = _migrate.latest_version()
    if registry.version < latest:
        raise UserError(f"`nodereg {command}` needs schema version {latest}; this registry has {registry.version}: "
                        + how_to_migrate(registry.url))


def on_open(engine: sa.Engine, url: sa.URL, path: Path | None, announce) -> int:
    """Migrate a registry as it is opened (DuckDB from the command line; any backend from the library),
    saving its data beside the file first when a step destroys some. Returns the version after."""
    def before_destroying(conn, steps):
        target = path.with_name(f"{path.name}.schema{steps.version}-{_stamp()}.zip") if path else None
        if target is None:
            raise UserError("a pending migration deletes data: run `nodereg migrate` (it saves a bundle first)")
        save_bundle(conn, steps, target, announce)

    with engine.connect() as conn:
        before = _migrate.current_version(conn)
    if before and announce is not None:
        announce(f"migrating registry {mask(url)} from schema {before} to {_migrate.latest_version()} "
                 "(a DuckDB file is migrated when opened; `nodereg migrate --dry-run` lists the steps)")
    return _migrate.migrate(engine, before_destroying=before_destroying)[1]


def save_bundle(conn: sa.Connection, steps: _migrate.Plan, target: Path, announce) -> None:
    """Every table of the registry, as the bundle at `target`, in one snapshot."""
    from registry.io.bundle import export_bundle

    what = "; ".join(f"{m.file}: {', '.join(m.destroys)}" for m in steps.destructive)
    if announce is not None:
        announce(f"saving the registry to {target} first: pending migrations delete data ({what})")
    tables = sorted(sa.inspect(conn).get_table_names())
    export_bundle(conn, target, tables=tables)


def default_backup(url: sa.URL, version: int) -> Path:
    """Where `nodereg migrate` saves a PostgreSQL registry before destroying data: the user's data directory."""
    import platformdirs

    name = f"{url.database or 'registry'}-schema{version}-{_stamp()}.zip"
    return Path(platformdirs.user_data_dir("nodereg")) / "backups" / name


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
