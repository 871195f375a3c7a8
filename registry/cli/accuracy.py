"""`nodereg accuracy [APP]`: stored predictions against the runs measured since (registry/accuracy.py)."""

import typer

from registry.cli.app import app, current_reader, state
from registry.cli.output import print_json, print_table, say


def _pct(value) -> str | None:
    return None if value is None or value != value else f"{value:+.1%}"   # None or NaN: nothing to show


@app.command("accuracy")
def accuracy(
    ctx: typer.Context,
    app_name: str = typer.Argument(None, metavar="[APP]", help="Only this application (default: every one)."),
    model: str = typer.Option(None, "--model", "-m", help="Only the predictions of this model."),
    all_runs: bool = typer.Option(False, "--all-runs", help="Also the runs measured before the prediction "
                                                            "(by default only later runs check it)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """How far the stored predictions (`nodereg match`) were from the measured runs (`nodereg run`):
    per app and node the error, per app the ranking of the target nodes (Spearman over 4 or more,
    top-1, regret), per model the summary. Uses the latest prediction set per trace and model and
    the runs of the same input measured after it (--all-runs: also those before)."""
    import sqlalchemy as sa

    from registry import accuracy as acc

    with current_reader(state(ctx), "accuracy").connect() as conn:
        if app_name is None and model is None and not conn.execute(sa.text("SELECT count(*) FROM predictions")).scalar():
            if as_json:      # nothing stored yet: a state to describe, as `nodereg traces` does, not an error
                print_json({"cells": [], "sets": [], "summary": []})
            else:
                say("no predictions yet: `nodereg match APP` stores them, `nodereg run NODE -- CMD` "
                    "measures the runs they are compared with", err=True)
            return
        result = acc.assess(acc.load(conn, app_name, model, all_runs=all_runs))
    if as_json:
        print_json(result.to_dict())
        return
    cells = [{**r, "error": _pct(r["error"]), "spread": f"{r['spread']:.1%}", "base": "base" if r["base"] else "",
              "traced_gap": _pct(r["traced_gap"])} for r in result.to_dict()["cells"]]
    print_table(cells, ["app", "model_name", "node", "base", "threads", "predicted_s", "measured_s", "runs",
                        "spread", "error", "traced_gap"], title="predicted and measured, per app and node")
    sets = [{**r, "regret": _pct(r["regret"]), "top1": None if r["top1"] is None else ("yes" if r["top1"] else "no"),
             "spearman": "n/a" if r["spearman"] is None else f"{r['spearman']:.2f}"}
            for r in result.to_dict()["sets"]]
    print_table(sets, ["app", "model_name", "model_version", "base_node", "nodes", "spearman", "top1", "regret"],
                title="ranking of the nodes, per app")
    summary = [{**r, **{k: None if r[k] is None or r[k] != r[k] else f"{r[k]:.1%}" for k in
                        ("median_abs_error", "worst_abs_error", "median_spread", "top1_rate", "mean_regret",
                         "coverage", "nominal")}}
               for r in result.to_dict()["summary"]]
    print_table(summary, ["model_name", "model_version", "apps", "cells", "median_abs_error", "worst_abs_error",
                          "median_spread", "median_spearman", "top1_rate", "mean_regret", "intervals", "coverage",
                          "nominal"], title="summary, per model (coverage: share of intervals holding the measurement)")
    by_group = [{**r, "coverage": f"{r['coverage']:.1%}", "nominal": f"{r['nominal']:.1%}"}
                for r in result.group_coverage()]
    if by_group:      # (`match` calibrates each group of nodes apart: registry.match.calibration)
        print_table(by_group, ["model_name", "model_version", "interval_group", "intervals", "coverage", "nominal"],
                    title="coverage per interval group")
