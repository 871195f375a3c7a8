"""`nodereg trace -- CMD ARG...`: run an application once on a node, store its phases and signatures."""

import os
import shlex
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from registry import cpulist
from registry.cli.app import app, state
from registry.cli.output import err_console, print_json, print_table, say
from registry.errors import UserError
from registry.inventory import Inventory, collect
from registry.measure.onnode import node_cpus
from registry.values import command_line, plural

if TYPE_CHECKING:
    import sqlalchemy as sa

TIMEOUT_EXIT = 124
SHOWN_METRICS = (("proc", "cpu_util"), ("proc", "threads_active"), ("proc", "rss_mb"), ("proc", "wss_mb"),
                 ("proc", "wss_llc"), ("mix", "fp_share"), ("mix", "fp_per_load"), ("counters", "ipc"),
                 ("cachegrind", "ll_mpki"), ("mpi", "comm_share"))


def _node_row(conn: "sa.Connection", name: str | None) -> dict | None:
    """The node to trace on: `name`; else the one node profiled on this host, or of several the one that
    is the whole host (no CPU restriction). None when no node has been profiled here."""
    from registry.nodes import node_location
    import sqlalchemy as sa

    if name is None:
        host = socket.gethostname()
        found = conn.execute(sa.text(
            "SELECT DISTINCT n.name, n.cpu_list FROM profiles p JOIN nodes n ON n.node_id = p.node_id "
            "WHERE p.host = :h ORDER BY n.name"), {"h": host}).fetchall()
        whole = [n for n, cpu_list in found if not cpu_list]
        if not found:
            return None
        if len(found) > 1 and len(whole) != 1:
            listed = ", ".join(f"{n} ({cpulist.named(c)})" if c else f"{n} (whole host)" for n, c in found)
            raise UserError(f"{len(found)} nodes have been profiled on this host ({host}): choose one with "
                            f"--node NODE ({listed})")
        name = whole[0] if len(found) > 1 else found[0][0]
    return node_location(conn, name)


def _host_node(conn: "sa.Connection") -> tuple[dict, Inventory]:
    """A host with no profiled node: the trace is recorded against its inventory, as a node named after
    it (created with the trace; `nodereg profile HOST` later makes it a base node)."""
    import sqlalchemy as sa

    host = socket.gethostname()
    inventory = collect(sorted(os.sched_getaffinity(0)))  # restricted when this process is (taskset, Slurm)
    known = conn.execute(sa.text("SELECT host FROM nodes WHERE name = :n"), {"n": host}).first()
    if known is not None and known.host not in (None, host):
        raise UserError(f"no node has been profiled on this host ({host}), and the node named {host!r} was "
                        f"measured on host {known.host!r}: pass --node NODE")
    return {"name": host, "host": host, "cpu_list": None}, inventory


@app.command("trace", context_settings={"ignore_unknown_options": True})
def trace(
    ctx: typer.Context,
    command: list[str] = typer.Argument(None, metavar="-- CMD [ARG...]", help="The command to trace."),
    name: str = typer.Option(None, "--name", help="Application name (default: the command's file name)."),
    node: str = typer.Option(None, "--node", help="Node to trace on (default: this host's profiled node, "
                                                      "the one that is the whole host when there are several)."),
    interval: float = typer.Option(0.1, "--interval", min=0.001, help="Sampling interval, seconds."),
    timeout: float = typer.Option(None, "--timeout", min=0.001,
                                  help="Kill the command's tree after this many seconds."),
    cachegrind: bool = typer.Option(False, "--cachegrind",
                                    help="Add a valgrind cachegrind pass with the node's caches."),
    cachegrind_sample: float = typer.Option(None, "--cachegrind-sample", min=0.001, metavar="S",
                                            help="Stop the cachegrind pass after S seconds and keep what it "
                                                 "counted (the run's start): its instruction mix at a bounded "
                                                 "cost; implies --cachegrind."),
    probe_cmd: str = typer.Option(None, "--probe-cmd", help="Command (reduced input) for the cachegrind pass, "
                                                            "split like a shell would but never run by one."),
    omp: bool = typer.Option(True, "--omp/--no-omp", help="Time OpenMP parallel regions (GCC libgomp shim)."),
    mix: bool = typer.Option(True, "--mix/--no-mix", help="Sample where the program runs with perf's cpu-clock "
                             "timer (no hardware counters needed) for the instruction mix of its phases (source "
                             "mix), where perf can sample."),
    mpi: bool = typer.Option(True, "--mpi/--no-mpi", help="When CMD is an MPI launcher (mpirun, mpiexec, srun), "
                                                        "follow every rank with the PMPI library: each phase's "
                                                        "computation/communication split (docs/mpi.md)."),
    streams: bool = typer.Option(False, "--streams", help="Add a stream-probe pass (valgrind with nodereg's tool, "
                                                          "same input; 15-30x slower, hundreds of times with the "
                                                          "lackey fallback): the memory streams that "
                                                          "`match --model corredor` needs (docs/corredor.md)."),
    probe_timeout: float = typer.Option(None, "--probe-timeout", min=0.001,
                                        help="Stop the stream probe after this many seconds (default: 1000x "
                                             "the traced run, at least 120); the trace is kept without streams."),
    out: Path = typer.Option(None, "--out", help="Also write the portable trace file (JSON) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the trace as JSON."),
    input_label: str = typer.Option(None, "--input", help="The input it runs on, as a label (default: a digest "
                                                          "of the command line and the files it names)."),
) -> None:
    """Run CMD once, sample its whole process tree, find its phases and store them with their signatures.

    Exits with CMD's own exit status (124 when --timeout killed it).
    """
    from registry.db.names import check_name
    from registry.nodes import ensure_node, node_inventory

    # imported here: phase detection (numpy, ruptures) is not needed by other commands' start-up
    from registry.io.tracefile import write_trace
    from registry.measure.runner import Interrupted, check_command
    from registry.trace import store
    from registry.trace.tracer import trace_command
    from registry.workload import identity

    argv = list(command or [])
    check_command(argv)
    check_name(Path(argv[0]).name if name is None else name, "app")   # before anything runs or is stored
    workload = identity(argv, input_label)
    cachegrind = cachegrind or cachegrind_sample is not None
    probe = shlex.split(probe_cmd) if probe_cmd else None
    if probe_cmd is not None and not probe:
        raise UserError("--probe-cmd is empty")
    if probe and not cachegrind:
        raise UserError("--probe-cmd is the input of the cachegrind pass: add --cachegrind")
    if probe:
        check_command(probe)
    if streams:
        from registry.measure.streams import check_available
        check_available()
    if out:
        _check_writable(out)
    if mpi:
        from registry.trace.mpi import check
        check(argv)
    with state(ctx).registry().begin() as conn:
        node_row = _node_row(conn, node)
        host_inventory = None
        if node_row is None:
            node_row, host_inventory = _host_node(conn)
        inventory = host_inventory or node_inventory(conn, node_row["name"])
    cpus = node_cpus(node_row, "trace on that host (signatures compare only on the same node)")
    state(ctx).close()  # no DuckDB file lock while the command runs (reopened, with --wait, to store)
    runs_on = cpulist.named(cpus or sorted(os.sched_getaffinity(0)))
    say(f"tracing {shlex.join(argv)} on node {node_row['name']}, {runs_on}"
        f"{'' if cpus else ' (all this process may use)'} (every {interval:g} s)", err=True)
    if host_inventory:
        say(f"note: no node has been profiled on this host: the trace is recorded against its "
            f"inventory as node {node_row['name']!r}; `nodereg match` will need --base NODE (a "
            f"profiled node of the same hardware), or a profile of this host "
            f"({command_line('nodereg', 'profile', node_row['name'])})", err=True)
    spinner = []  # no live display while the command runs: its own output owns the terminal

    def status(message: str) -> None:
        """A long step after the run (a valgrind pass): a spinner at a terminal, a line elsewhere (a
        spinner draws nothing there, and these steps take 20-100 times the run)."""
        if not err_console.is_terminal:
            say(f"{message} ...", err=True)
            return
        spinner.append(err_console.status(Text(message)))
        spinner[-1].start()

    try:
        result, notes = trace_command(
            argv, name=name or Path(argv[0]).name, node=node_row["name"], interval_s=interval,
            timeout_s=timeout, cpus=cpus, inventory=inventory, cachegrind=cachegrind, probe_cmd=probe,
            cachegrind_sample_s=cachegrind_sample, omp=omp, mpi=mpi, streams=streams, probe_timeout_s=probe_timeout,
            status=status, mix=mix)
        result.meta["input"] = workload
    except (Interrupted, KeyboardInterrupt):  # (typer would turn a KeyboardInterrupt into a silent exit 130)
        raise UserError(f"interrupted: {argv[0]} and its children were terminated; nothing was stored",
                        exit_code=130) from None
    finally:
        for s in spinner:
            s.stop()
    for note in notes:
        say(f"note: {note}", err=True)
    try:
        with state(ctx).registry().begin() as conn:  # one transaction: an interrupt here rolls it back
            if host_inventory:
                ensure_node(conn, node_row["name"], host_inventory, source="trace")
            trace_id, uid = store.save(conn, result)
    except KeyboardInterrupt:
        raise UserError("interrupted while storing the trace: nothing was stored", exit_code=130) from None
    if out:
        try:
            write_trace(result, out)
        except KeyboardInterrupt:
            raise UserError(f"interrupted: trace {uid} is stored, {out} was not written", exit_code=130) from None
    if as_json:
        print_json({"trace_id": trace_id, "uid": uid, **result.to_dict()})
    else:
        _print_phases(result)
    say(f"trace {uid} stored ({result.status}, {result.wall_s:.2f} s, {plural(len(result.phases), 'phase')})"
        + (f"; written to {out}" if out else ""), err=True)
    probe_error = (result.meta.get("streams") or {}).get("error")
    if probe_error and result.status == "ok":
        err_console.print(f"error: {probe_error} (the trace is stored without them)", highlight=False)
        raise typer.Exit(1)
    if result.status == "timeout":
        err_console.print(f"error: {argv[0]} ran past --timeout {timeout:g} s: its process tree was killed",
                          highlight=False)
        raise typer.Exit(TIMEOUT_EXIT)
    if result.exit_status != 0:
        err_console.print(f"error: {argv[0]} exited with status {result.exit_status} (trace stored as failed)",
                          highlight=False)
    raise typer.Exit(result.exit_status)


def _check_writable(out: Path) -> None:
    """Refuse an --out path that cannot be written before running anything."""
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise UserError(f"--out {out} is a directory")
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        raise UserError(f"--out {out}: directory {probe} is not writable")


def _print_phases(result) -> None:
    rows = []
    for p in result.phases:
        row = {"phase": p.name, "method": p.method, "start_s": p.start_s, "end_s": p.end_s, "weight": p.weight,
               "calls": p.calls}
        for src, metric in SHOWN_METRICS:
            value = p.signature.get(src, {}).get(metric)
            if value is not None:
                row[metric] = value
        if p.streams:
            row["streams"] = " ".join(f"{st['size_elems']}/{st['stride_bytes']}/{st['elem_bytes']}B/{st['access']}"
                                      for st in p.streams)
        rows.append(row)
    columns = ["phase", "method", "start_s", "end_s", "weight", "calls"]
    columns += [m for _, m in SHOWN_METRICS if any(m in r for r in rows)]
    columns += ["streams"] if any("streams" in r for r in rows) else []
    print_table(rows, columns, title=f"{result.name}: {result.status}, {result.wall_s:.2f} s")
