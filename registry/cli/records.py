"""`nodereg traces`, `nodereg apps` and `nodereg runs rm`: list and remove single facts, so that a
wrong trace or run can be taken back without SQL. Each removal is one transaction."""

import typer

from registry.cli.app import app, confirm, remove_confirmed, state
from registry.cli.models import runs_app
from registry.cli.output import print_json, print_table, say
from registry.values import plural

traces_app = typer.Typer(help="List and remove traces.", invoke_without_command=True)
app.add_typer(traces_app, name="traces")
apps_app = typer.Typer(help="List and remove applications.", invoke_without_command=True)
app.add_typer(apps_app, name="apps")

_YES = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")
_JSON = typer.Option(False, "--json", help="Print JSON.")
_TRACES_SQL = """
SELECT t.uid, a.name AS app, n.name AS node, t.status, t.wall_s, t.started_at,
       (SELECT count(*) FROM phases p WHERE p.trace_id = t.trace_id) AS phases
FROM traces t JOIN apps a ON a.app_id = t.app_id JOIN nodes n ON n.node_id = t.node_id
ORDER BY t.trace_id"""
_APPS_SQL = """
SELECT a.name, (SELECT count(*) FROM traces t WHERE t.app_id = a.app_id) AS traces,
       (SELECT count(*) FROM runs r WHERE r.app_id = a.app_id) AS runs, a.created_at
FROM apps a ORDER BY a.name"""


def _list(ctx: typer.Context, sql: str, as_json: bool, empty: str) -> None:
    import sqlalchemy as sa

    with state(ctx).registry(readonly=True).connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.text(sql))]
    if as_json:
        print_json(rows)
    else:
        print_table(rows, empty=empty)


def _said(counts: dict[str, int], skip: str) -> str:
    detail = ", ".join(f"{n} {t}" for t, n in counts.items() if n and t != skip)
    return f" ({detail})" if detail else ""


@traces_app.callback()
def list_traces(ctx: typer.Context, as_json: bool = _JSON) -> None:
    """List the stored traces (with `rm`: remove some)."""
    if ctx.invoked_subcommand is None:
        _list(ctx, _TRACES_SQL, as_json, "no traces yet: run `nodereg trace --name APP -- CMD`")


@traces_app.command("rm")
def traces_rm(ctx: typer.Context, uids: list[str] = typer.Argument(..., metavar="UID...",
                                                                   help="Trace uids (or unique prefixes)."),
              yes: bool = _YES) -> None:
    """Remove traces with their phases, samples, signatures and predictions."""
    from registry.removal import remove_traces, trace_ids

    counts = remove_confirmed(ctx, yes, lambda conn: trace_ids(conn, uids), remove_traces,
                              f"Remove {plural(len(uids), 'trace')}?", f"refusing to remove {plural(len(uids), 'trace')}")
    say(f"removed {plural(counts['traces'], 'trace')}" + _said(counts, "traces"))


@apps_app.callback()
def list_apps(ctx: typer.Context, as_json: bool = _JSON) -> None:
    """List the applications (with `rm`: remove one)."""
    if ctx.invoked_subcommand is None:
        _list(ctx, _APPS_SQL, as_json, "no applications yet")


@apps_app.command("rm")
def apps_rm(ctx: typer.Context, name: str = typer.Argument(..., help="Application name."), yes: bool = _YES) -> None:
    """Remove an application with its traces, runs and predictions."""
    from registry.apps import require_app_id
    from registry.removal import remove_app

    counts = remove_confirmed(ctx, yes, lambda conn: require_app_id(conn, name), remove_app,
                              f"Remove application {name!r} with its traces and runs?", f"refusing to remove app {name!r}")
    say(f"removed app {name}" + _said(counts, "apps"))


@runs_app.command("rm")
def runs_rm(ctx: typer.Context, uids: list[str] = typer.Argument(..., metavar="UID...",
                                                                 help="Run uids (`nodereg runs list` shows them)."),
            yes: bool = _YES) -> None:
    """Remove measured runs (all named, or none)."""
    from registry.removal import remove_runs

    confirm(yes, f"Remove {plural(len(uids), 'run')}?", f"refusing to remove {plural(len(uids), 'run')}")
    with state(ctx).registry().begin() as conn:
        removed = remove_runs(conn, uids)
    say(f"removed {plural(removed, 'run')}")
