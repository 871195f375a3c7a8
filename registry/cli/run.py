"""`nodereg run NODE -- CMD ARG...`: time a command on a registered node of this host, store the runs.

The measured side of `nodereg accuracy`: `match` predicts an app's time on a node, `run` measures it
there, with the same CPUs and thread variables as `trace` (registry/measure/onnode.py).

A failed repetition (non-zero exit, killed, timeout) stores nothing, not even the repetitions
before it: a failed run is not a timing, and every reader of `runs` (scaling fits, evaluate, the
match base time, accuracy) takes each row as one. Marking failed rows instead would leave each of
those readers one forgotten filter away from fitting a crash's time. The failure is reported, and
nodereg exits with the command's status (124 on timeout).
"""

import os
import shlex
import socket
import statistics
from pathlib import Path

import typer

from registry import cpulist
from registry.cli.app import app, state
from registry.cli.output import print_json, print_table, say
from registry.errors import UserError
from registry.measure.onnode import node_cpus, thread_count
from registry.values import plural

TIMEOUT_EXIT = 124
STDERR_FD = 2  # the process's stderr (sys.stderr may be a stand-in without a descriptor)


@app.command("run", context_settings={"ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    node: str = typer.Argument(..., help="Registered node of this host to run on."),
    command: list[str] = typer.Argument(None, metavar="-- CMD [ARG...]", help="The command to time."),
    name: str = typer.Option(None, "--name", help="Application name (default: the command's file name)."),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Repetitions (each stored; the median is shown)."),
    timeout: float = typer.Option(None, "--timeout", min=0.001,
                                  help="Kill the command's tree when one repetition runs longer than this (s)."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored batch as JSON (the command's own "
                                                       "output then goes to stderr)."),
    input_label: str = typer.Option(None, "--input", help="The input it runs on, as a label (default: a digest "
                                                          "of the command line and the files it names)."),
) -> None:
    """Run CMD on NODE's CPUs with NODE's thread count, REPEAT times; store every repetition.

    Exits with CMD's own exit status (124 when --timeout killed it); a failed repetition stores nothing.
    """
    from registry.db.names import check_name
    from registry.measure.runner import Interrupted, check_command
    from registry.measure.timed import time_command
    from registry.nodes import node_location
    from registry.runs import add_timed_runs

    argv = list(command or [])
    if not argv:
        raise UserError("no command given: nodereg run NODE [OPTIONS] -- CMD [ARG...]", exit_code=2)
    app_name = check_name(Path(argv[0]).name if name is None else name, "app")
    check_command(argv)
    if input_label is not None:
        check_name(input_label, "input")     # before the command runs
    with state(ctx).registry().connect() as conn:
        location = node_location(conn, node)
    if not location["host"]:
        raise UserError(f"node {node!r} has no recorded host (it came from measured runs or an import): "
                        f"`nodereg run` measures nodes profiled or traced on this host ({socket.gethostname()})")
    cpus = node_cpus(location, "run it on that host")
    threads = thread_count(cpus)
    state(ctx).close()  # no DuckDB file lock while the command runs
    runs_on = cpulist.named(cpus or sorted(os.sched_getaffinity(0)))
    say(f"running {shlex.join(argv)} on node {node}, {runs_on}, {plural(threads, 'thread')}, "
        f"{plural(repeat, 'time')}", err=True)

    def progress(i: int, seconds: float) -> None:
        say(f"  repetition {i}/{repeat}: {seconds:.3f} s", err=True)

    try:
        # with --json, stdout is nodereg's JSON alone: the command's own output goes to stderr
        timing = time_command(argv, repeat=repeat, timeout_s=timeout, cpus=cpus, progress=progress,
                              stdout=STDERR_FD if as_json else None)
    except (Interrupted, KeyboardInterrupt):
        raise UserError(f"interrupted: {argv[0]} and its children were terminated; nothing was stored",
                        exit_code=130) from None
    failed = timing.failed
    if failed is not None:
        which = f"repetition {len(timing.times_s) + 1} of {repeat}"
        if failed.status == "timeout":
            raise UserError(f"{argv[0]} ran past --timeout {timeout:g} s ({which}): its process tree was killed; "
                            "nothing was stored", exit_code=TIMEOUT_EXIT)
        raise UserError(f"{argv[0]} exited with status {failed.exit_status} ({which}): a failed run is not a "
                        "timing; nothing was stored", exit_code=failed.exit_status)
    try:
        batch = state(ctx).registry().write(
            lambda conn: add_timed_runs(conn, app_name, node, threads, timing.times_s, argv, input_label))
    except KeyboardInterrupt:
        raise UserError("interrupted while storing the runs: nothing was stored", exit_code=130) from None
    median = statistics.median(timing.times_s)
    doc = {"batch_uid": batch, "app": app_name, "node": node, "threads": threads, "command": argv,
           "times_s": timing.times_s, "median_s": median}
    if as_json:
        print_json(doc)
    else:
        print_table([{"app": app_name, "node": node, "threads": threads, "repetitions": repeat, "median_s": median,
                      "min_s": min(timing.times_s), "max_s": max(timing.times_s)}])
    say(f"{plural(repeat, 'run')} of {app_name} on {node} stored (batch {batch})", err=True)
