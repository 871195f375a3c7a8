"""`nodereg fleet mpi TYPE -w HOSTS`: the MPI kernels between nodes of a type, one Slurm job across
them, into the profile of node `fabric:TYPE` (docs/fleet.md, docs/mpi.md); `fleet mpi-task` is
what that job runs on its first node."""

import shlex
import sys
import time
from pathlib import Path

import typer
from rich.progress import SpinnerColumn

from registry.cli.app import state
from registry.cli.fleet import _LOG_DIR, _log_dir, _shared_registry, fleet_app
from registry.cli.output import err_console, print_json, print_table, say, text_column
from registry.cli.progress import Progress
from registry.errors import UserError
from registry.values import plural

_MODES = ("quick", "default", "full")


def _mode(value: str) -> str:
    if value not in _MODES:
        raise UserError(f"--mode {value!r}: expected one of {', '.join(_MODES)}")
    return value


@fleet_app.command("mpi")
def fabric(
    ctx: typer.Context,
    node: str = typer.Argument(..., help="Node type whose fabric is measured: stored as node fabric:TYPE."),
    nodelist: str = typer.Option(..., "--nodelist", "-w", help="The job's hosts, as a Slurm host list "
                                                               "(cn[01-02]): at least two."),
    per_node: int = typer.Option(1, "--ranks-per-node", min=1, help="MPI ranks on each host."),
    mode: str = typer.Option("default", "--mode", help="Message sizes and repetition length: quick (4 sizes), "
                                                       "default (11), full (20)."),
    reps: int = typer.Option(None, "--reps", min=1, help="Exactly N timed repetitions per kernel and size."),
    partition: str = typer.Option(None, "--partition", "-p", help="Slurm partition to run in."),
    exclusive: bool = typer.Option(False, "--exclusive", help="The hosts to the job alone while it measures."),
    timeout: float = typer.Option(1800, "--timeout", min=1, help="Seconds to wait for the job, pending time "
                                                                "included; past it the job is cancelled."),
    log_dir: Path = _LOG_DIR,
    sbatch_args: list[str] = typer.Option(None, "--sbatch", help="Another sbatch option, e.g. --sbatch=--time=20."),
    nodereg_cmd: str = typer.Option(None, "--nodereg", help="How the compute nodes run nodereg (default: this "
                                                            "Python with -m registry)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the batch script; submit nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The MPI kernels (ping-pong, Exchange, Allreduce) between hosts of type NODE: one Slurm job of
    all of them, started by the job's MPI over the fabric; stored as a profile of node fabric:NODE."""
    from registry.fleet import fabric as fabric_mod
    from registry.fleet import fabric_node, slurm

    db_url = _shared_registry(ctx, dry_run, one_writer=True)
    hosts = slurm.expand_hosts(nodelist)
    job = fabric_mod.FabricJob(node, hosts, per_node, _log_dir(log_dir),
                               shlex.split(nodereg_cmd) if nodereg_cmd else [sys.executable, "-m", "registry"],
                               db_url, _mode(mode), reps, partition, exclusive, list(sbatch_args or []))
    if dry_run:
        sys.stdout.write(job.script())
        return
    fabric_mod.check_hosts(hosts, partition)
    job_id = fabric_mod.submit(job)
    t0 = time.monotonic()
    columns = (SpinnerColumn(), text_column("{task.description}"), text_column("{task.fields[elapsed]}"))
    with Progress(*columns, console=err_console, plain="{task.description}") as progress:
        task = progress.add_task(f"fabric job {job_id}: pending", total=None, elapsed="")
        fabric_mod.wait(job, timeout, lambda st: progress.update(
            task, description=f"fabric job {job_id}: {st}", elapsed=f"{time.monotonic() - t0:.0f} s"))
    with state(ctx).registry(readonly=True).connect() as conn:
        profile = fabric_mod.latest(conn, fabric_node(node))
    if profile is None:
        raise UserError(f"fabric job {job_id} ended well but stored no profile of {fabric_node(node)}")
    if as_json:
        print_json({"job": job_id, **profile})
        return
    print_table(profile["rows"], ["kernel", "ranks", "nodes", "bytes", "us", "bandwidth_gbs", "unstable"],
                title=f"{profile['node']}: {profile['host']} ({plural(len(profile['rows']), 'figure')}, "
                      f"profile {profile['uid'][:8]})")


@fleet_app.command("mpi-task", hidden=True)
def fabric_task(
    ctx: typer.Context,
    node: str = typer.Argument(...),
    hosts: str = typer.Option(..., "--hosts"),
    per_node: int = typer.Option(1, "--ranks-per-node", min=1),
    mode: str = typer.Option("default", "--mode"),
    reps: int = typer.Option(None, "--reps", min=1),
) -> None:
    """Run inside the job `fleet mpi` submits, on its first node: measure and store (one transaction)."""
    from registry.fleet import fabric as fabric_mod
    from registry.profile.store import store_profile

    record = fabric_mod.measure(node, hosts.split(","), per_node, _mode(mode), reps)
    state(ctx).registry().write(lambda conn: store_profile(conn, record))
    say(f"stored profile {record.uid[:8]} of {record.node}: {plural(len(record.measurements), 'configuration')} "
        f"across {record.inventory.hostname}")
