"""`nodereg export` and `nodereg import bundle`: move registry data between registries.

The bundle module (pandas, pyarrow) is imported inside the commands: `nodereg` starts fast.
"""

from pathlib import Path

import typer

from registry.cli.app import app, import_app, state
from registry.cli.output import print_json, say
from registry.errors import UserError
from registry.io.limits import Limits

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str, option: str) -> int:
    """'8G', '500M', '1048576': bytes."""
    number, unit = text.strip().upper().rstrip("IB") or "0", ""
    if number[-1:] in _UNITS:
        number, unit = number[:-1], number[-1]
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a size such as 500M or 8G") from None
    if not 0 < value < 2**63:
        raise UserError(f"{option} {text!r}: expected a size above 0")
    return int(value)


@app.command("export")
def export(ctx: typer.Context, path: Path = typer.Argument(..., help="New directory, or a file ending in .zip."),
           force: bool = typer.Option(False, "--force", help="Replace an existing bundle at PATH.")) -> None:
    """Export the registry as a bundle (Parquet tables + manifest)."""
    from registry.io.bundle import export_bundle

    reg = state(ctx).registry(readonly=True)
    with reg.connect() as conn:
        manifest = export_bundle(conn, path, replace=force)
    rows = sum(manifest["tables"].values())
    say(f"exported {rows} rows in {len(manifest['tables'])} tables to {path} "
        f"(schema {manifest['schema_version']})")


@import_app.command("bundle")
def import_bundle_cmd(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Bundle directory or .zip file."),
    rename: bool = typer.Option(False, "--rename", help="Import a node whose name clashes (different hardware) "
                                                         "under a new name instead of failing."),
    max_size: str = typer.Option("8G", "--max-size", metavar="SIZE",
                                 help="Refuse a bundle that unpacks to more than this (bytes; K, M, G suffixes)."),
    max_members: int = typer.Option(Limits.max_members, "--max-members", min=1,
                                    help="Refuse a bundle of more files than this."),
    max_rows: int = typer.Option(Limits.max_rows, "--max-rows", min=1, help="Refuse a table of more rows than this."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Import a bundle; rows already present are skipped, so importing twice adds nothing. The limits
    are checked before anything is unpacked: a bundle over one is refused whole."""
    from registry.io.bundle import import_bundle

    limits = Limits(parse_size(max_size, "--max-size"), max_members, max_rows)
    reg = state(ctx).registry()
    result = reg.write(lambda conn: import_bundle(conn, path, rename=rename, limits=limits))
    if as_json:
        print_json({"added": result["added"], "renamed": result["renamed"]})
        return
    added = ", ".join(f"{n} {t}" for t, n in result["added"].items()) or "nothing new"
    say(f"imported {path}: {added}")
    for old, new in result["renamed"].items():
        say(f"node {old!r} imported as {new!r}")
