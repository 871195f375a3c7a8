"""`nodereg import sparecores DIR [--specs DIR]`: Spare Cores server types as nodes, a suite and apps.

The import module (pandas) is loaded inside the command, so that every other command starts
without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from registry.cli.app import import_app, state
from registry.cli.evaluate import _progress
from registry.cli.output import print_json, print_table, say


@import_app.command("sparecores")
def import_sparecores_cmd(
    ctx: typer.Context,
    directory: Path = typer.Argument(..., help="A clone of SpareCores/sc-inspector-data (the folder holding "
                                               "data/<vendor>/<server>/<task>/)."),
    specs: Path = typer.Option(None, "--specs", help="A clone of SpareCores/sc-data-dumps: the vendors' specs fill "
                                                     "what lscpu lacks (memory, GPUs, hypervisor)."),
    workers: int = typer.Option(min(4, os.cpu_count() or 1), "--workers", min=1,
                                help="Processes that parse server folders."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import Spare Cores measurements (CC BY-SA 4.0): each server type a node (VENDOR:SERVER), its
    micro-benchmarks a profile of suite 'sparecores', its application results measured runs."""
    from registry.io.sparecores.store import import_sparecores

    reg = state(ctx).registry()
    with _progress("importing servers") as advance:
        summary = import_sparecores(reg, directory, specs, workers=workers,
                                    progress=lambda done, of: advance(done, of))
    out = summary.as_dict()
    if as_json:
        print_json(out)
        return
    tasks, servers, failed = out.pop("tasks_skipped"), out.pop("servers_skipped"), out.pop("failed")
    added = out.pop("added")
    rows = [{"field": k, "value": v} for k, v in out.items()]
    rows += [{"field": f"added: {what}", "value": n} for what, n in added.items()]
    rows += [{"field": f"servers skipped: {why}", "value": n} for why, n in sorted(servers.items())]
    rows.append({"field": "servers failed", "value": len(failed)})
    print_table(rows, ["field", "value"], title="sparecores import (data: Spare Cores, CC BY-SA 4.0)")
    skipped = [{"task": key.split(": ", 1)[0], "reason": key.split(": ", 1)[1], "servers": n}
               for key, n in tasks.items()]
    print_table(skipped, ["task", "reason", "servers"], title="tasks skipped", empty="no task skipped")
    for line in failed:
        say(f"failed: {line}")
