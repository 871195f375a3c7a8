"""Registry administration and inspection: init, inventory, sql."""

from enum import Enum

import typer

from registry import inventory as inventory_mod
from registry.cli.app import app, state
from registry.cli.output import console, print_csv, print_json, print_table
from registry.db import reader as reader_mod
from registry.db import resolve_url
from registry.db.migrate import current_version, latest_version
from registry.db.query import run_readonly
from registry.errors import UserError


@app.command()
def init(
    ctx: typer.Context,
    reader: str = typer.Option(None, "--reader", metavar="ROLE",
                               help=f"PostgreSQL: create (or update) the read-only role `nodereg sql` runs as, "
                                    f"e.g. {reader_mod.DEFAULT_ROLE} (superuser connection; docs/storage.md)."),
) -> None:
    """Create the registry (or migrate it to this version's schema)."""
    if reader is not None and resolve_url(state(ctx).db_url).get_backend_name() != "postgresql":
        raise UserError("--reader is for PostgreSQL registries: on DuckDB `nodereg sql` is read-only by its connection")
    reg = state(ctx).registry()
    with reg.connect() as conn:
        version = current_version(conn)
    console.print(f"registry {reg.display_url}: schema version {version} (latest {latest_version()})")
    if reader is not None:
        with reg.begin() as conn:
            readable = reader_mod.setup(conn, reader)
        console.print(f"read-only role {reader}: SELECT on {readable} tables and views; `nodereg sql` runs as it. "
                      f"Let an analyst's login use it: GRANT {reader} TO LOGIN_ROLE")


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
                     "value": f"{_human(c.size_bytes)} x {c.instances}, shared by {c.shared_by} CPU(s)"})
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


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command()
def sql(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="One SQL statement; it runs read-only (docs/storage.md)."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
) -> None:
    """Run a read-only SQL query against the registry (views: see schema/README.md)."""
    columns, rows = run_readonly(state(ctx).registry(readonly=True), query)
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

    reg = state(ctx).registry()
    with reg.begin() as conn:
        problems = doctor_mod.check(conn)
        repaired = doctor_mod.fix(conn) if fix and any(p.fixable for p in problems) else {}
    if as_json:
        print_json({"problems": [p.__dict__ for p in problems], "repaired": repaired})
    elif not problems:
        console.print(f"registry {reg.display_url}: no problems found")
    else:
        print_table([p.__dict__ for p in problems], ["kind", "table", "detail", "fixable"], title="problems")
        if repaired:
            console.print("repaired: " + ", ".join(f"{n} {t}" for t, n in repaired.items()))
        elif any(p.fixable for p in problems):
            console.print("run `nodereg doctor --fix` to repair what can be repaired")
    left = [p for p in problems if not p.fixable or not fix]
    if left:
        raise typer.Exit(1)
