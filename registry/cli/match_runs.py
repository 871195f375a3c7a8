"""`nodereg match APP --from-runs`: an app measured on a few node types, projected onto every node of
an imported suite (registry.crossarch.project; docs/crossarch.md)."""

from __future__ import annotations

from registry.cli.output import print_json, print_table, say
from registry.errors import UserError


def match_from_runs(registry, app: str, *, model: str, options: dict, suite: str, runs_on: str | None,
                    objective: str, top: int | None, as_json: bool) -> None:
    from registry.crossarch.data import app_runs, load, single_threaded
    from registry.crossarch.project import from_runs

    if objective not in ("time", "cost"):
        raise UserError(f"--objective must be time or cost, not {objective!r}")
    on = [n.strip() for n in runs_on.split(",") if n.strip()] if runs_on else None
    times, all_single = app_runs(registry, app, on)
    data = load(registry, suite)
    ranked = from_runs(data, app, times, model, options, single_threaded(app) or all_single, objective)
    measured = sorted(n for n in times if n in data.nodes.index)
    ignored = sorted(n for n in times if n not in data.nodes.index)
    shown = ranked[:top] if top else ranked
    # nodes where the references that resemble the app were not measured (models.similar_runs)
    unpredicted = len(data.nodes) - len(measured) - len(ranked) if objective == "time" else 0
    # a warning every node has (the app's own fit to its references) is said once, below the table
    common = [w for w in shown[0].warnings if all(w in r.warnings for r in ranked)] if shown else []
    if as_json:
        print_json({"app": app, "model": model, "suite": suite, "objective": objective, "measured_on": measured,
                    "ignored_runs_on": ignored, "not_predicted": unpredicted, "currency": data.currency,
                    "warnings": common, "nodes": [{"rank": i + 1, **r.__dict__} for i, r in enumerate(shown)]})
        return
    rows = [{"rank": i + 1, "node": r.node, "predicted_s": r.predicted_s,
             "interval_s": f"{r.low_s:.3g} - {r.high_s:.3g}",
             "cpu_family": r.cpu_family, "arch": r.architecture,
             "cost": None if r.cost is None else f"{r.cost:.3g} {data.currency}",
             "warnings": "; ".join(w for w in r.warnings if w not in common)} for i, r in enumerate(shown)]
    shown_columns = [c for c in rows[0] if c not in ("cost", "warnings") or any(r[c] for r in rows)] if rows else None
    print_table(rows, shown_columns, title=f"{app} measured on {', '.join(measured)}: predicted by {model}, by {objective} "
                            f"({len(ranked)} nodes)")
    if unpredicted:
        say(f"{unpredicted} nodes not predicted: the references that resemble {app} were not measured "
            "there", err=True)
    if ignored:
        say(f"runs not used (node not in the suite {suite!r}): {', '.join(ignored)}", err=True)
    for warning in common:
        say(f"warning: {app}: {warning}", err=True)
    cross = sum(any("predicted from" in w for w in r.warnings) for r in ranked)
    if cross:
        say(f"warning: {cross} nodes are of an architecture none of the measured nodes has", err=True)
