"""Registry administration and inspection: init, inventory, sql."""

from enum import Enum

import sqlalchemy as sa
import typer

from registry import inventory as inventory_mod
from registry.cli.app import app, state
from registry.cli.output import console, print_csv, print_json, print_table
from registry.db import db_error
from registry.db.migrate import current_version, latest_version
from registry.errors import UserError


@app.command()
def init(ctx: typer.Context) -> None:
    """Create the registry (or migrate it to this version's schema)."""
    reg = state(ctx).registry()
    with reg.connect() as conn:
        version = current_version(conn)
    console.print(f"registry {reg.display_url}: schema version {version} (latest {latest_version()})")


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
    query: str = typer.Argument(..., help="SQL to run; the connection is read-only."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
) -> None:
    """Run a read-only SQL query against the registry (views: see schema/README.md)."""
    reg = state(ctx).registry(readonly=True)
    try:
        with reg.connect() as conn:
            result = conn.exec_driver_sql(query)  # verbatim: no bind-parameter parsing
            if not result.returns_rows:
                raise UserError("the statement returned no rows")
            columns = list(result.keys())
            rows = [tuple(r) for r in result]
    except sa.exc.SQLAlchemyError as exc:
        raise db_error(exc) from None
    if fmt is Format.csv:
        print_csv(rows, columns)
    elif fmt is Format.json:
        print_json([dict(zip(columns, r)) for r in rows])
    else:
        print_table([dict(zip(columns, r)) for r in rows], columns)


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
