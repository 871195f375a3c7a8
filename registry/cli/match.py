"""`nodereg match`: predicted time of a traced app on every registered node, ranked, with reasons."""

import typer

from registry.cli.app import app, state
from registry.cli.output import console, err_console, print_json, print_table


@app.command()
def match(
    ctx: typer.Context,
    trace: str = typer.Argument(..., help="Trace file (nodereg trace --out), trace id (or prefix), or app name."),
    base: str = typer.Option(None, "--base", help="Base node (default: the node the trace was recorded on)."),
    nodes: str = typer.Option(None, "--nodes", help="Comma-separated target nodes (default: every profiled node)."),
    model: str = typer.Option("similarity", "--model", "-m",
                              help="Projection model, or a scaling model (downey, amdahl, ...) to combine the "
                                   "projection with the app's measured runs on the base node (see `nodereg models`)."),
    top: int = typer.Option(None, "--top", min=1, help="Show only the K fastest nodes."),
    explain: bool = typer.Option(False, "--explain", help="Per phase: matched configs and per-node times."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    no_store: bool = typer.Option(False, "--no-store", help="Only show the predictions; store nothing."),
) -> None:
    """Rank the registered nodes by the predicted time of a traced application."""
    from registry.match.project import load_inputs, model_identity, project
    from registry.match.scaled import project_scaled
    from registry.match.stored import inputs_digest, latest_digest, store_predictions
    from registry.trace.lookup import find_trace

    identity = model_identity(model)  # an unknown model fails before any work
    targets = [n.strip() for n in nodes.split(",") if n.strip()] if nodes else None
    st = state(ctx)
    with _reader(st).connect() as conn:
        found = find_trace(conn, trace)
        inputs = load_inputs(conn, found, base=base, nodes=targets, model=model)
        digest = None if no_store else inputs_digest(conn, inputs, identity)
        if digest is not None and latest_digest(conn, inputs, identity[0]) == digest:
            digest = None  # this set is stored already
    st.close()  # DuckDB: no file lock while projecting (other processes may write meanwhile)
    scaling = identity[0] != model  # a scaling model is combined with the projection, named after both
    result = project_scaled(inputs, model) if scaling else project(inputs, model=model)
    if digest is not None:
        st.registry().write(lambda conn: store_predictions(conn, inputs, result, digest))
    if top:
        result.nodes = result.nodes[:top]
    if as_json:
        print_json(result.to_dict(explain=explain))
        return
    rows = [{"rank": n.rank, "node": n.node, "predicted_s": n.predicted_s,
             "interval_s": f"{n.low_s:.3g} - {n.high_s:.3g}", "speedup": n.speedup, "threads": n.threads}
            for n in result.nodes]
    print_table(rows, title=f"{result.app} traced on {result.base} ({result.base_time_s:.3g} s), "
                            f"model {result.model}, coverage {result.coverage:.0%}")
    for phase in result.phases:
        reason = ", ".join(f"{m['config']} ({m['similarity']:.2f})" for m in phase.matches[:3]) or \
            ("waits, not computing: same time everywhere" if phase.mode == "idle" else "")
        console.print(f"  phase {phase.name}: {phase.time_s:.3g} s, threads {phase.mode}; nearest: {reason}")
        if explain:
            print_table([{"node": n, "predicted_s": p.predicted_s, "low_s": p.low_s, "high_s": p.high_s,
                          "threads": phase.threads.get(n)} for n, p in phase.predictions.items()])
    for w in result.warnings:
        err_console.print(f"warning: {w}")


def _reader(st):
    """The registry, read-only, at this nodereg's schema: an older one is migrated first (through a
    writable open), since `match` reads and stores columns the older schema lacks."""
    from registry.db.migrate import current_version, latest_version

    reg = st.registry(readonly=True)
    with reg.connect() as conn:
        if current_version(conn) >= latest_version():
            return reg
    st.registry()
    return st.registry(readonly=True)
