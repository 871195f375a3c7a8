"""Registry administration and inspection: init, migrate, inventory, sql, doctor."""

from enum import Enum
from pathlib import Path

import typer

from registry import inventory as inventory_mod
from registry.cli.app import app, confirm, state
from registry.cli.output import print_csv, print_json, print_table, say
from registry.db import reader as reader_mod
from registry.errors import UserError
from registry.values import plural


@app.command()
def init(
    ctx: typer.Context,
    reader: str = typer.Option(None, "--reader", metavar="ROLE",
                               help=f"PostgreSQL: create (or update) the read-only role `nodereg sql` runs as, "
                                    f"e.g. {reader_mod.DEFAULT_ROLE} (superuser connection; docs/storage.md)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --no-backup: do not ask."),
    no_backup: bool = typer.Option(False, "--no-backup", help="Do not save the data a migration deletes (needs --yes)."),
) -> None:
    """Create the registry, or migrate it to this version's schema (as `nodereg migrate`)."""
    from registry.db import resolve_url

    if reader is not None and resolve_url(state(ctx).db_url).get_backend_name() != "postgresql":
        raise UserError("--reader is for PostgreSQL registries: on DuckDB `nodereg sql` is read-only by its connection")
    reg = _migrate_registry(ctx, backup=None, no_backup=no_backup, yes=yes)
    if reader is not None:
        with reg.begin() as conn:
            readable = reader_mod.setup(conn, reader)
        say(f"read-only role {reader}: SELECT on {readable} tables and views; `nodereg sql` runs as it. "
            f"Let an analyst's login use it: GRANT {reader} TO LOGIN_ROLE")


@app.command("migrate")
def migrate_cmd(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="List the pending migrations and what each deletes; "
                                                          "change nothing."),
    to: int = typer.Option(None, "--to", metavar="VERSION", min=1, help="Stop at this schema version."),
    backup: Path = typer.Option(None, "--backup", metavar="FILE.zip",
                                help="Where to save the registry before a migration that deletes data "
                                     "(default: beside a DuckDB file; your data directory for PostgreSQL)."),
    no_backup: bool = typer.Option(False, "--no-backup", help="Do not save the data a migration deletes (needs --yes)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --no-backup: do not ask."),
) -> None:
    """Bring the registry's schema up to this nodereg's: the only command (with `init`) that changes
    a PostgreSQL registry's schema. Each step is recorded with its checksum (docs/storage.md)."""
    if dry_run:
        _print_plan(ctx, to)
        return
    _migrate_registry(ctx, backup=backup, no_backup=no_backup, yes=yes, target=to)


def _print_plan(ctx: typer.Context, target: int | None) -> None:
    """What `migrate` would do; opens the registry read-only (a missing DuckDB file stays missing)."""
    from registry.db import open_registry, resolve_url
    from registry.db.migrate import latest_version, plan
    from registry.db.url import duckdb_path

    url = resolve_url(state(ctx).db_url)
    path = duckdb_path(url)
    if path is not None and not path.exists():
        say(f"there is no registry at {path}: `nodereg migrate` would create it at schema {latest_version()}")
        return
    reg = open_registry(state(ctx).db_url, readonly=True, migrate=False)
    try:
        with reg.connect() as conn:
            steps = plan(conn, target)
    finally:
        reg.close()
    steps.refuse_changed()
    rows = [{"version": m.version, "file": m.file, "deletes": "; ".join(m.destroys) if steps.version else ""}
            for m in steps.pending]
    print_table(rows, ["version", "file", "deletes"], title=f"registry {reg.display_url}: schema {steps.version}",
                empty=f"registry {reg.display_url}: schema {steps.version}, nothing to migrate")
    if steps.destructive:
        say("`nodereg migrate` saves the registry as a bundle before the steps that delete data "
            "(--backup FILE.zip; --no-backup --yes to skip)")
    say("dry run: nothing was changed")


def _migrate_registry(ctx: typer.Context, *, backup: Path | None, no_backup: bool, yes: bool,
                      target: int | None = None):
    """Open the registry as it is, apply what is pending (saving it first where a step deletes data)."""
    from registry.db import db_error, open_registry, resolve_url
    from registry.db.migrate import latest_version, migrate
    from registry.db.upgrade import default_backup, save_bundle
    from registry.db.url import duckdb_path

    url = resolve_url(state(ctx).db_url)
    if no_backup:
        confirm(yes, "Migrate without saving the data the migrations delete?", "refusing to migrate without a backup")
    reg = open_registry(state(ctx).db_url, wait_s=state(ctx).wait_s, migrate=False)
    state(ctx).adopt(reg)
    path = duckdb_path(url)

    def before_destroying(conn, steps):
        if no_backup:
            return
        target_file = backup or (path.with_name(f"{path.name}.schema{steps.version}.zip") if path
                                 else default_backup(url, steps.version))
        save_bundle(conn, steps, target_file, say)

    try:
        before, after = migrate(reg.engine, target=target, before_destroying=before_destroying)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - a driver failure in a migration: one line, that step rolled back
        raise db_error(exc, reg.url) from None
    reg.version = after
    if before == 0:       # a new registry: `migrated from schema 0` told a new user nothing (trial 4 of #32)
        say(f"registry {reg.display_url}: created (schema {after}{'' if after == latest_version() else f', latest {latest_version()}'})")
        return reg
    change = f"migrated from schema {before} to {after}" if after != before else f"schema version {after}"
    say(f"registry {reg.display_url}: {change} (latest {latest_version()})")
    return reg


def _inventory_rows(inv: inventory_mod.Inventory) -> list[dict]:
    rows = [
        {"item": "CPU model", "value": inv.cpu_model},
        {"item": "CPUs", "value": f"{inv.cpu_count} ({inv.cpu_list}{', restricted' if inv.restricted else ''})"},
        {"item": "sockets / cores / threads per core", "value": f"{inv.sockets} / {inv.cores} / {inv.threads_per_core}"},
        {"item": "NUMA nodes", "value": inv.numa_nodes},
        {"item": "memory", "value": f"{inv.memory_bytes / 2**30:.1f} GiB" if inv.memory_bytes else "unknown"},
        {"item": "frequency", "value": f"{inv.max_mhz:.0f} MHz" if inv.max_mhz else "unknown"},
        {"item": "ISA", "value": " ".join(inv.isa_flags)},
    ]
    for c in inv.caches:
        rows.append({"item": f"L{c.level} {c.type}",
                     "value": f"{_human(c.size_bytes)} x {c.instances}, shared by {plural(c.shared_by, 'CPU')}"})
    rows += [{"item": "kernel", "value": inv.kernel}, {"item": "OS", "value": inv.os},
             {"item": "compiler", "value": inv.compiler or "none found"}]
    return rows


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
    return str(n)


@app.command()
def inventory(
    cpus: str = typer.Option(None, "--cpus", help="Describe the configuration restricted to these CPUs, e.g. 0 or 0-3."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """This machine's hardware: CPU, caches, NUMA, memory, kernel, compiler (from sysfs/procfs)."""
    from registry import cpulist

    inv = inventory_mod.collect(cpulist.parse(cpus) if cpus else None)
    if as_json:
        print_json(inv.to_dict())
    else:
        print_table(_inventory_rows(inv), ["item", "value"], title=f"{inv.hostname}")


SQL_TIMEOUT_S = 300        # an analyst's query; longer ones hold up migrations (docs/storage.md)
SQL_MAX_ROWS = 1_000_000


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command()
def sql(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="One SQL statement; it runs read-only (docs/storage.md)."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    timeout: float = typer.Option(SQL_TIMEOUT_S, "--timeout", metavar="S", min=0,
                                  help="Seconds the statement may run; the database stops it then (0: no limit)."),
    max_rows: int = typer.Option(SQL_MAX_ROWS, "--max-rows", metavar="N", min=0,
                                 help="Refuse a result of more rows than this (0: no limit)."),
) -> None:
    """Run a read-only SQL query against the registry (views: see schema/README.md)."""
    from registry.db.query import Bounds, run_readonly

    columns, rows = run_readonly(state(ctx).registry(readonly=True), query, Bounds(timeout, max_rows))
    if fmt is Format.csv:
        print_csv(rows, columns)
    elif fmt is Format.json:
        print_json([dict(zip(columns, r)) for r in rows])
    else:
        print_table([dict(zip(columns, r)) for r in rows], columns, short_uids=False)


@app.command()
def doctor(
    ctx: typer.Context,
    fix: bool = typer.Option(False, "--fix", help="Delete orphans and incomplete rows (one transaction)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check the registry's integrity: orphans, incomplete runs, schema drift."""
    from registry import doctor as doctor_mod

    reg = state(ctx).registry(readonly=not fix)   # a check only reads
    with reg.begin() as conn:
        problems = doctor_mod.check(conn)
        repaired = doctor_mod.fix(conn) if fix and any(p.fixable for p in problems) else {}
    if as_json:
        print_json({"problems": [p.__dict__ for p in problems], "repaired": repaired})
    elif not problems:
        say(f"registry {reg.display_url}: no problems found")
    else:
        print_table([p.__dict__ for p in problems], ["kind", "table", "detail", "fixable"], title="problems")
        if repaired:
            say("repaired: " + ", ".join(f"{n} {t}" for t, n in repaired.items()))
        elif any(p.fixable for p in problems):
            say("run `nodereg doctor --fix` to repair what can be repaired")
    left = [p for p in problems if not p.fixable or not fix]
    if left:
        raise typer.Exit(1)
