"""`nodereg fleet submit|status|collect` (profile a node type on every host through Slurm) and
`nodereg health` (which hosts of a type are off their peers). docs/fleet.md."""

import shlex
import sys
from pathlib import Path

import platformdirs
import typer

from registry.cli.app import app, state
from registry.cli.output import print_json, print_table, say
from registry.errors import UserError
from registry.health import MIN_DEVIATION, THRESHOLD
from registry.values import command_line, plural

fleet_app = typer.Typer(help="Profile a node type on every host of a Slurm cluster; follow and collect the jobs.",
                        no_args_is_help=True)
app.add_typer(fleet_app, name="fleet")

_LOG_DIR = typer.Option(None, "--log-dir", envvar="NODEREG_FLEET_DIR", show_envvar=True,
                        help="Directory of the jobs' scripts, manifests and logs, which the compute nodes "
                             "must reach (default: fleet/ in your data directory).")


def _log_dir(path: Path | None) -> Path:
    return (path or Path(platformdirs.user_data_dir("nodereg")) / "fleet").expanduser().resolve()


def _check_profile_args(node: str, args: list[str]) -> None:
    """Parse the options passed through to `nodereg profile` now, not on every host later."""
    from typer.exceptions import TyperException  # what the parser raises on a bad option

    if any(a == "--host" or a.startswith("--host=") for a in args):
        raise UserError("the fleet passes --host to each task itself (to name hosts otherwise: --as-hosts)")
    command = typer.main.get_command(app).commands["profile"]
    try:
        command.make_context("profile", [node, *args])
    except TyperException as exc:
        raise UserError(f"profile options {shlex.join(args)!r}: {exc.format_message()}") from None


def _shared_registry(ctx: typer.Context, dry_run: bool, one_writer: bool = False) -> str:
    """The URL the tasks store into: a PostgreSQL registry that holds no password (the script would);
    with `one_writer` (a job that stores one profile from one node) a DuckDB file on a shared file
    system will do too."""
    from registry.db import mask, resolve_url
    from registry.db.url import duckdb_path

    url = resolve_url(state(ctx).db_url)
    path = duckdb_path(url)
    if one_writer and path is not None:
        if not dry_run:
            state(ctx).registry()
            state(ctx).close()   # DuckDB admits one process at a time: the job's, now
        return f"duckdb:///{Path(path).resolve()}"
    if url.get_backend_name() != "postgresql":
        raise UserError(f"the hosts of a fleet store into one shared PostgreSQL registry (--db postgresql://...), "
                        f"not {mask(url)}; or pass --to-dir DIR to write bundles and `nodereg fleet collect DIR`")
    if url.password:
        raise UserError("the registry URL holds a password, which the batch script would carry: put it in "
                        "~/.pgpass or PGPASSWORD (the tasks inherit your environment) instead")
    if not dry_run:
        state(ctx).registry()   # reachable, and migrated once, before any task starts
        state(ctx).close()
    return url.render_as_string(hide_password=False)


@fleet_app.command("submit", context_settings={"ignore_unknown_options": True})
def submit(
    ctx: typer.Context,
    node: str = typer.Argument(..., help="Node type to profile (the name `match` ranks)."),
    profile_args: list[str] = typer.Argument(None, metavar="[-- PROFILE OPTIONS...]",
                                             help="Options for `nodereg profile` on each host, e.g. -- --quick."),
    nodelist: str = typer.Option(None, "--nodelist", "-w", help="Hosts, as a Slurm host list (cn[01-16],gpu7); "
                                                               "default: every node of the partition."),
    partition: str = typer.Option(None, "--partition", "-p", help="Slurm partition to run in."),
    exclusive: bool = typer.Option(False, "--exclusive", help="Each host to itself while it is profiled "
                                                              "(co-runners disturb the figures)."),
    to_dir: Path = typer.Option(None, "--to-dir", help="Write one bundle per host into this shared directory "
                                                       "(for compute nodes that cannot reach the registry); "
                                                       "merge them with `nodereg fleet collect DIR`."),
    log_dir: Path = _LOG_DIR,
    as_hosts: str = typer.Option(None, "--as-hosts", help="Record the tasks under these host names instead of "
                                                          "the Slurm node names, one task each (a one-host test "
                                                          "cluster posing as several hosts)."),
    sbatch_args: list[str] = typer.Option(None, "--sbatch", help="Another sbatch option for the job, e.g. "
                                                                 "--sbatch=--time=20 (repeatable)."),
    nodereg_cmd: str = typer.Option(None, "--nodereg", help="How the compute nodes run nodereg (default: this "
                                                            "Python with -m registry)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the batch script; submit nothing."),
) -> None:
    """Profile node type NODE on every host: one Slurm job array, one task per host."""
    from registry.fleet import submit as submit_mod
    from registry.fleet.job import FleetJob

    args = list(profile_args or [])
    _check_profile_args(node, args)
    db_url = None if to_dir else _shared_registry(ctx, dry_run)
    hosts, pins = submit_mod.plan_hosts(nodelist, partition, as_hosts)
    job = FleetJob(node, hosts, pins, _log_dir(log_dir),
                   shlex.split(nodereg_cmd) if nodereg_cmd else [sys.executable, "-m", "registry"],
                   db_url=db_url, to_dir=to_dir.expanduser().resolve() if to_dir else None, profile_args=args,
                   partition=partition, exclusive=exclusive, sbatch_args=list(sbatch_args or []))
    if dry_run:
        sys.stdout.write(job.script())
        return
    job_id = submit_mod.submit(job)
    say(f"submitted job {job_id}: {plural(len(hosts), 'task')} profiling {node} on "
        f"{', '.join(hosts[:8])}{' ...' if len(hosts) > 8 else ''}; logs in {job.log_dir}. "
        f"Follow it with {command_line('nodereg', 'fleet', 'status', job_id)}")


@fleet_app.command("status")
def status(
    ctx: typer.Context,
    job_id: str = typer.Argument(None, metavar="[JOB]", help="Job id (default: the latest submitted)."),
    log_dir: Path = _LOG_DIR,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Each host's task (pending, running, done, failed) and whether its profile has landed (in the
    job's registry, or as a bundle in its --to-dir)."""
    from registry.fleet import job as job_mod
    from registry.fleet import status as status_mod

    job = job_mod.load(_log_dir(log_dir), job_id)
    tasks = status_mod.task_states(job)
    landed, note = status_mod.landed(job)
    for t in tasks:
        t.profile = landed.get(t.host)
    line = status_mod.summary(job, tasks)
    if as_json:
        print_json({"job": job.job_id, "node": job.node, "summary": line, "note": note,
                    "tasks": [t.to_dict() for t in tasks]})
        return
    rows = [{**t.to_dict(), "profile": (t.profile or "")[:8] if not job.to_dir else t.profile} for t in tasks]
    print_table(rows, ["task", "host", "slurm_node", "state", "profile", "detail"], title=f"fleet job {job.job_id}")
    say(line)
    if note:
        say(f"note: {note}", err=True)


@fleet_app.command("collect")
def collect(ctx: typer.Context, directory: Path = typer.Argument(..., help="The --to-dir of the fleet jobs."),
            as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Merge the bundles the tasks wrote into the registry (one transaction; again adds nothing)."""
    from registry.fleet import collect as collect_mod

    paths = collect_mod.bundles(directory)
    added = state(ctx).registry().write(lambda conn: collect_mod.collect(conn, paths))
    if as_json:
        print_json({"bundles": [p.name for p in paths], "added": added})
        return
    detail = ", ".join(f"{n} {t}" for t, n in added.items()) or "nothing new"
    say(f"collected {plural(len(paths), 'bundle')} from {directory}: {detail}")


@app.command("health")
def health(
    ctx: typer.Context,
    node: str = typer.Argument(None, help="Node type (default: every type)."),
    threshold: float = typer.Option(THRESHOLD, "--threshold", min=0,
                                    help="Flag a figure beyond this many scaled MADs from the type's median ..."),
    min_deviation: float = typer.Option(MIN_DEVIATION, "--min-deviation", min=0,
                                        help="... and at least this far from it, relative (0.1 = 10%)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Each host of a node type against its peers: memory triad, L1/L2/L3 bandwidth, latency, FP peak."""
    from registry.health import fleet_health, host_rows

    with state(ctx).registry(readonly=True).connect() as conn:
        types = fleet_health(conn, node, threshold, min_deviation)
    if as_json:
        print_json([{"node": t.node, "judged": t.judged, "spreads": {k: vars(v) for k, v in t.spreads.items()},
                     "hosts": [vars(h) for h in t.hosts]} for t in types])
        return
    if not types:
        say("no profiles registered yet: run `nodereg profile NODE` or `nodereg fleet submit NODE`", err=True)
    for t in types:
        flagged = sum(bool(h.flags) for h in t.hosts)
        columns, rows = host_rows(t)
        print_table(rows, columns, title=f"{t.node}: {plural(len(t.hosts), 'host')}, {flagged} flagged "
                                         f"(beyond {threshold:g} MADs and {min_deviation:.0%} of the median)")
