"""`nodereg export` and `nodereg import bundle`: move registry data between registries.

The bundle module (pandas, pyarrow) is imported inside the commands: `nodereg` starts fast.
"""

from pathlib import Path

import typer

from registry.cli.app import app, import_app, state
from registry.cli.output import console, print_json


@app.command("export")
def export(ctx: typer.Context, path: Path = typer.Argument(..., help="New directory, or a file ending in .zip."),
           force: bool = typer.Option(False, "--force", help="Replace an existing bundle at PATH.")) -> None:
    """Export the registry as a bundle (Parquet tables + manifest)."""
    from registry.io.bundle import export_bundle

    reg = state(ctx).registry(readonly=True)
    with reg.connect() as conn:
        manifest = export_bundle(conn, path, replace=force)
    rows = sum(manifest["tables"].values())
    console.print(f"exported {rows} rows in {len(manifest['tables'])} tables to {path} "
                  f"(schema {manifest['schema_version']})")


@import_app.command("bundle")
def import_bundle_cmd(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Bundle directory or .zip file."),
    rename: bool = typer.Option(False, "--rename", help="Import a node whose name clashes (different hardware) "
                                                         "under a new name instead of failing."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Import a bundle; rows already present are skipped, so importing twice adds nothing."""
    from registry.io.bundle import import_bundle

    reg = state(ctx).registry()
    result = reg.write(lambda conn: import_bundle(conn, path, rename=rename))
    if as_json:
        print_json({"added": result["added"], "renamed": result["renamed"]})
        return
    added = ", ".join(f"{n} {t}" for t, n in result["added"].items()) or "nothing new"
    console.print(f"imported {path}: {added}")
    for old, new in result["renamed"].items():
        console.print(f"node {old!r} imported as {new!r}")
