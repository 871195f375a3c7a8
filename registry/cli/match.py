"""`nodereg match`: predicted time of a traced app on every registered node, ranked, with reasons."""

import contextlib

import typer

from registry.cli.app import app, model_options_flag, state
from registry.cli.match_output import (interval_said, match_said, names, no_nearest_said, phase_set_said,
                                        summarise_warnings, tied_ranks)
from registry.cli.output import print_json, print_table, say
from registry.errors import UserError


def _facts_meanwhile(st, conn, read):
    """`read(conn)`, the registry closed after it (no file lock on DuckDB, no transaction on PostgreSQL
    while `match` projects: other processes may write meanwhile); returns its result's getter. On a
    quick reader (registry/db/duckread.py, pgread.py) it reads in a thread while the projection,
    which needs no registry, runs (0.1 s of a 10,000-node match on PostgreSQL, issue 30); on a
    SQLAlchemy connection, whose pool keeps a connection per thread, at once."""
    if getattr(conn, "rows", None) is None:
        value = read(conn)
        conn.close()    # (then the caller's `with` finds it closed)
        st.close()
        return lambda: value
    from concurrent.futures import ThreadPoolExecutor

    def read_then_close():
        try:
            return read(conn)
        finally:
            st.close()

    pool = ThreadPoolExecutor(1)
    reading = pool.submit(read_then_close)
    pool.shutdown(wait=False)       # (the thread ends when its reading does)
    return reading.result


def _node_facts(conn, inputs, identity: tuple[str, str], options: dict, no_store: bool, portable: bool) -> tuple:
    """What ranking the projected nodes reads besides the projection's inputs: (caveats, the digest
    of a prediction set to store or None, prices, memory, what each node can run: None with --portable or
    where the trace recorded no binary to check; the profiles' dispersion, registry.match.project.Inputs)."""
    from registry.match import caveats as caveats_mod
    from registry.match.calibration import load_dispersion
    from registry.match.capacity import node_memory
    from registry.match.portability import node_offers
    from registry.match.stored import inputs_digest, latest_digest
    from registry.prices import current_prices

    dispersion = load_dispersion(conn, inputs.suite)   # (first: the projection waits for it at its end)
    caveats = caveats_mod.profile_caveats(conn, [inputs.base, *inputs.targets]) + \
        caveats_mod.working_set_caveats(conn, inputs.phases, inputs.base, inputs.targets, inputs.suite)
    digest = None if no_store else inputs_digest(conn, inputs, identity, options)
    if digest is not None and latest_digest(conn, inputs, identity[0]) == digest:
        digest = None  # this set is stored already
    needs = inputs.found.trace.meta.get("binary")    # (none recorded: nothing to check, no node's offer read)
    return (caveats, digest, current_prices(conn), node_memory(conn), None if portable or not needs else node_offers(conn),
            dispersion)


@app.command()
def match(
    ctx: typer.Context,
    trace: str = typer.Argument(..., help="App name (its latest trace), trace uid (or prefix), or trace file "
                                                    "(nodereg trace --out; read as a file when it contains / or ends "
                                                    "in .json)."),
    base: str = typer.Option(None, "--base", help="Base node (default: the node the trace was recorded on)."),
    nodes: str = typer.Option(None, "--nodes", help="Comma-separated target nodes (default: every profiled node)."),
    model: str = typer.Option("similarity", "--model", "-m",
                              help="Projection model, or a scaling model (downey, amdahl, ...) to combine the "
                                   "projection with the app's measured runs on the base node (see `nodereg models`)."),
    option: list[str] = model_options_flag(),
    top: int = typer.Option(None, "--top", min=1, help="Show only the K fastest nodes."),
    explain: bool = typer.Option(False, "--explain", help="Per phase: matched configs and per-node times."),
    objective: str = typer.Option("time", "--objective", help="Rank by predicted time, or by cost per run "
                                                               "(node price x predicted time; `nodereg nodes set`)."),
    deadline: float = typer.Option(None, "--deadline", help="Leave out nodes predicted slower than S seconds."),
    budget: float = typer.Option(None, "--budget", help="Leave out nodes whose predicted cost per run exceeds X."),
    suite: str = typer.Option(None, "--suite", help="Compare with this suite's configs: 'nodereg' (our kernels) "
                                                    "or an imported one ('sparecores'); default: the one the base "
                                                    "and the target nodes share, profiled on most nodes "
                                                    "(--from-runs: 'sparecores')."),
    exclude: list[str] = typer.Option(None, "--exclude", metavar="PREFIX",
                                      help="Leave configs whose key starts with PREFIX out of the references, "
                                           "and apps whose name does out of the track record that weighs their "
                                           "votes (repeatable; e.g. sparecores:openssl when checking openssl "
                                           "itself, compression:gzip when checking a gzip program)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    no_store: bool = typer.Option(False, "--no-store", help="Only show the predictions; store nothing."),
    from_runs: bool = typer.Option(False, "--from-runs", help="APP measured on 1-3 node types of an imported suite: "
                                                              "projected onto every other node (docs/crossarch.md)."),
    runs_on: str = typer.Option(None, "--runs-on", help="--from-runs: only the runs on these nodes (comma-separated)."),
    ranks: int = typer.Option(None, "--ranks", min=1, help="An MPI app (traced through its launcher): predict it at "
                                                           "N ranks (its communication with each node's MPI "
                                                           "profile; computation on N x its threads per rank CPUs)."),
    threads: int = typer.Option(None, "--threads", min=1, help="An MPI app: OpenMP (or threaded BLAS) threads per "
                                                               "rank, with --ranks (default: as traced); with "
                                                               "--configs, the most threads per rank it tries."),
    comm_model: str = typer.Option("hockney", "--comm-model", help="Communication model of an MPI app's phases: "
                                                                   "hockney (latency/bandwidth fit of the ping-pong), "
                                                                   "branikas (Exchange model) or boosted (boosted "
                                                                   "trees on the ping-pong and Exchange); docs/mpi.md."),
    fabric: str = typer.Option(None, "--fabric", help="An MPI app whose ranks span nodes of this type: its "
                                                       "communication on every node with the fabric profile "
                                                       "that `nodereg fleet mpi TYPE` measured between them."),
    configs: bool = typer.Option(False, "--configs", help="An MPI app: recommend ranks x threads per node type "
                                                          "(Castellanos), with the reasons."),
    portable: bool = typer.Option(False, "--portable", help="The app runs on any architecture (interpreted, JIT, "
                                                            "or rebuilt for each node): rank the nodes that cannot "
                                                            "run the traced binary too."),
) -> None:
    """Rank the registered nodes by the predicted time of a traced application."""
    from registry.match.blas import one_blas_thread
    from registry.match.heap import keep_freed_memory

    keep_freed_memory()     # millions of runs in arrays made and dropped: their pages reused, not faulted again
    one_blas_thread()       # (before numpy loads: no BLAS thread spinning beside the reading one)
    if from_runs or runs_on:
        from registry.cli.match_runs import match_from_runs
        from registry.models.options import parse_assignments

        name = "similar-runs" if model == "similarity" else model
        match_from_runs(state(ctx).reader(), trace, model=name, options=parse_assignments(option),
                        suite=suite or "sparecores", runs_on=runs_on, objective=objective, top=top, as_json=as_json)
        return
    from registry.match import caveats as caveats_mod
    from registry.match.capacity import apply_capacity
    from registry.match.portability import apply_portability
    from registry.match.cost import apply_objective, check_objective
    from registry.match.project import load_inputs, model_identity, project
    from registry.match.scaled import project_scaled
    from registry.match.stored import store_predictions
    from registry.trace.capacity import capacity
    from registry.trace.lookup import find_trace

    from registry.models.options import parse_assignments
    from registry.models.plugins import create

    check_objective(objective, deadline, budget)
    identity = model_identity(model)  # an unknown model fails before any work
    if identity[0] != model and (ranks or threads or configs or fabric):   # (an MPI trace with a scaling model: its runs' counts)
        raise UserError(f"--ranks, --threads, --fabric and --configs project with the projection model; --model {model} scales with the "
                        "runs' thread counts: use one or the other")
    options = parse_assignments(option)
    create(model, options=options)    # ... and so does a bad option
    targets = [n.strip() for n in nodes.split(",") if n.strip()] if nodes else None
    st = state(ctx)
    with st.reader(current_for="match").connect() as conn:
        found = find_trace(conn, trace)
        if found.note:
            say(f"note: {found.note}", err=True)
        comm = {"model": comm_model, "ranks": ranks, "threads": threads, "fabric": fabric}
        inputs = load_inputs(conn, found, base=base, nodes=targets, model=model, suite=suite,
                             exclude=tuple(exclude or ()), comm=comm, dispersion=configs)
        facts = None if configs else \
            _facts_meanwhile(st, conn, lambda c: _node_facts(c, inputs, identity, options, no_store, portable))
        if facts is not None:
            inputs.dispersion = lambda: facts()[5]
    if configs:
        st.close()
        from registry.cli.match_configs import print_configs
        return print_configs(inputs, model, options, as_json)
    scaling = identity[0] != model  # a scaling model is combined with the projection, named after both
    fixed = inputs.comm.cpus if inputs.comm is not None else None    # an MPI app keeps its ranks x threads
    try:
        result = project_scaled(inputs, model, options) if scaling else \
            project(inputs, model=model, options=options, fixed_threads=fixed)
    except BaseException:
        with contextlib.suppress(Exception):
            facts()     # the reading ends, and closes the registry, before the projection's error is said
        raise
    caveats, digest, prices, memory, offers, _ = facts()
    caveats_mod.apply(result, caveats, inputs.base)
    trace = inputs.found.trace
    apply_capacity(result, capacity(trace.samples, trace.interval_s)["peak_rss_bytes"], memory)
    if offers is not None:
        apply_portability(result, trace.meta.get("binary"), offers)
    if digest is not None:
        st.registry().write(lambda conn: store_predictions(conn, inputs, result, digest))
    apply_objective(result, prices, objective, deadline, budget)
    if top:
        result.nodes = result.nodes[:top]
    if as_json:
        print_json({**result.to_dict(explain=explain), "suite": inputs.suite, "excluded_references": list(inputs.exclude),
                    "caveats": [c.to_dict() for c in caveats]})
        return
    shown, ties = tied_ranks(result.nodes, result.objective)
    rows = [{"rank": r, "node": n.node, "predicted_s": n.predicted_s,
             "interval_s": f"{n.low_s:.3g} - {n.high_s:.3g}", "speedup": n.speedup, "threads": n.threads,
             **_cost_columns(n)} for r, n in zip(shown, result.nodes)]
    if all(n.cost is None for n in result.nodes):     # no prices: no empty cost columns
        rows = [{k: v for k, v in r.items() if not k.startswith("cost")} for r in rows]
    suite_note = f", suite {inputs.suite}" if inputs.suite != "nodereg" else ""
    print_table(rows, title=f"{result.app} on {result.base}: {_base_time(inputs)}, "
                            f"model {result.model}{suite_note}, coverage {result.coverage:.0%}, by {result.objective}")
    for tie in ties:
        say(f"tie: {names(tie)}: each one's prediction lies inside the other's interval; the difference is "
            "within the uncertainty, so they share a rank")
    for x in result.excluded:
        say(f"left out: {x['node']}: {x['reason']}", err=True)
    if inputs.calibration is not None:
        for line in inputs.calibration.describe():
            say(line)
    how = interval_said(result.nodes[0]) if result.nodes else None
    if how:
        say(how)
    said = phase_set_said(inputs.found.trace.phases, inputs.phases)
    if said:
        say(said)
    for phase in result.phases:
        reason = "; ".join(match_said(m) for m in phase.matches[:3]) or \
            ("waits, not computing: same time everywhere" if phase.mode == "idle" else
             no_nearest_said(phase, result.base))
        serial = f", {phase.serial_share:.0%} of it on one CPU" if 0 < phase.serial_share < 1 else ""
        by = f" (projected by {phase.projected_by})" if phase.projected_by else ""
        say(f"  phase {phase.name}: {phase.time_s:.3g} s, threads {phase.mode}{serial}; nearest{by}: {reason}")
        if explain:
            print_table([{"node": n, "predicted_s": p.predicted_s, "low_s": p.low_s, "high_s": p.high_s,
                          "threads": phase.threads.get(n)} for n, p in phase.predictions.items()])
    for w in summarise_warnings(result.warnings, [result.base, *(n.node for n in result.nodes),
                                                  *(x["node"] for x in result.excluded)]):
        say(f"warning: {w}", err=True)


def _base_time(inputs) -> str:
    """Which base time the projection starts from: the traced run's, or the median with the runs."""
    traced, used = float(inputs.found.trace.wall_s), inputs.base_time_s
    same = len(inputs.runs) == 0 or abs(used - traced) < 1e-9 * max(1.0, traced)
    return (f"traced run {traced:.3g} s" if same else
            f"base time {used:.3g} s (median of the traced run, {traced:.3g} s, and measured runs)")


def _cost_columns(n) -> dict:
    """Cost per run with its interval, where the node has a price."""
    if n.cost is None:
        return {"cost": None, "cost_interval": None}
    return {"cost": f"{n.cost:.3g} {n.currency}", "cost_interval": f"{n.cost_low:.3g} - {n.cost_high:.3g}"}

