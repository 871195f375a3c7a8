"""`nodereg health`: which hosts of a node type are off their peers. docs/fleet.md."""

import typer

from registry.cli.app import app, state
from registry.cli.output import err_console, print_json, print_table
from registry.health import MIN_DEVIATION, THRESHOLD


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
        err_console.print("no profiles registered yet: run `nodereg profile NODE` or `nodereg fleet submit NODE`")
    for t in types:
        flagged = sum(bool(h.flags) for h in t.hosts)
        columns, rows = host_rows(t)
        print_table(rows, columns, title=f"{t.node}: {len(t.hosts)} host(s), {flagged} flagged "
                                         f"(beyond {threshold:g} MADs and {min_deviation:.0%} of the median)")
