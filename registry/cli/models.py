"""`nodereg models`, `nodereg runs`, `nodereg import runs` and `nodereg scaling`.

The models and runs modules (numpy, pandas, scipy) are imported inside the commands: `nodereg`
starts fast.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from registry.cli.app import app, import_app, model_options_flag, state
from registry.cli.output import print_json, print_table, say
from registry.errors import UserError
from registry.values import command_line, plural

if TYPE_CHECKING:
    import sqlalchemy as sa

SCALING_MODELS = ("downey", "loglog", "amdahl", "usl", "ensemble")
DEFAULT_SCALING_MODEL = "downey"   # lowest median error on the real series (docs/models.md)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.I)


@app.command("models")
def models_command(name: str = typer.Argument(None, metavar="[NAME]", help="Show this model and its options."),
                   as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the installed prediction models (plugins of the entry-point group nodereg.models); those
    that break the plugin contract are reported as not usable, with the reason."""
    from registry.models import plugins

    if name is not None:
        _show_model(plugins, name, as_json)
        return
    infos, warnings = plugins.discover()
    rows = [{"name": i.name, "kind": i.kind, "version": i.version, "needs": ", ".join(i.needs),
             "description": i.description} for i in infos]
    if as_json:
        print_json({"models": rows, "warnings": warnings})
    else:
        print_table(rows, ["name", "kind", "version", "description"], empty="no models installed",
                    one_line=["description"])
        say("`nodereg models NAME`: what a model needs, its whole description and its options", err=True)
    for w in warnings:
        say(f"warning: {w}", err=True, style="yellow")


def _show_model(plugins, name: str, as_json: bool) -> None:
    """`nodereg models NAME`: what the model is, and its options (what `--option KEY=VALUE` sets)."""
    cls = plugins.model_class(name)
    about = {"name": cls.name, "kind": cls.kind, "version": str(cls.version), "needs": sorted(cls.needs),
             "baseline": cls.baseline, "description": cls.description}
    options = [o.describe() for o in cls.options]
    if as_json:
        print_json({**about, "options": options})
        return
    print_table([{"field": k, "value": ", ".join(v) if isinstance(v, list) else v} for k, v in about.items()],
                ["field", "value"], title=f"model {cls.name}")
    print_table(options, ["option", "type", "default", "range", "help"], empty=f"{cls.name} has no options",
                title="options (--option KEY=VALUE)")


runs_app = typer.Typer(help="Measured runs: add, list, remove.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


@runs_app.command("add")
def runs_add(ctx: typer.Context, app_name: str = typer.Argument(..., metavar="APP", help="Application name."),
             node: str = typer.Argument(..., help="Node name."),
             threads: int = typer.Option(..., "--threads", min=1, help="Threads (or processes) the run used."),
             time_s: float = typer.Option(..., "--time", help="Measured run time in seconds."),
             input_label: str = typer.Option(None, "--input", help="The input it ran on (a label); runs of "
                                                                   "different inputs are never compared."),
             new: bool = typer.Option(False, "--new", help="Create APP or NODE if not registered yet (without it: "
                                                           "asked at a terminal, refused otherwise).")) -> None:
    """Record one measured run of APP on NODE."""
    from registry.db.names import check_name
    from registry.runs import add_run

    check_name(app_name, "app")
    check_name(node, "node")
    reg = state(ctx).registry()
    with reg.connect() as conn:
        unknown = _unknown_names(conn, app_name, node)
    if unknown and not new:   # a typo (`runs add twophase tow`) must not become a node (docs/first-hour.md)
        what = " and ".join(f"{noun} {name!r}{hint}" for noun, name, hint in unknown)
        if not sys.stdin.isatty():
            raise UserError(f"unknown {what}: pass --new to create {'them' if len(unknown) > 1 else 'it'}")
        if not typer.confirm(f"Create {what}?"):
            raise UserError("nothing stored")
    with reg.begin() as conn:
        created = _unknown_names(conn, app_name, node)
        uid = add_run(conn, app_name, node, threads, time_s, source="cli", input_label=input_label)
    say(f"run {uid}: {app_name} on {node}, {plural(threads, 'thread')}, {time_s:g} s")
    if created:
        undo = [command_line("nodereg", f"{noun}s", "rm", name, "--yes") for noun, name, _ in created]
        say(f"note: created {' and '.join(f'{noun} {name!r}' for noun, name, _ in created)}; "
            f"{' and '.join(undo)} undo{'es' if len(undo) == 1 else ''} it (with this run)", err=True)


def _unknown_names(conn, app_name: str, node: str) -> list[tuple[str, str, str]]:
    """(noun, name, ' (did you mean ...?)') for APP and NODE where the registry has no such name."""
    import sqlalchemy as sa

    from registry.apps import find_app_id
    from registry.nodes import find_node_id

    out = []
    for noun, name, find, table in (("app", app_name, find_app_id, "apps"), ("node", node, find_node_id, "nodes")):
        if find(conn, name) is None:
            known = conn.execute(sa.text(f"SELECT name FROM {table}")).scalars().all()
            near = difflib.get_close_matches(name, known, n=1)
            out.append((noun, name, f" (did you mean {near[0]!r}?)" if near else ""))
    return out


@runs_app.command("list")
def runs_list(ctx: typer.Context, app_name: str = typer.Option(None, "--app", help="Only this application."),
              node: str = typer.Option(None, "--node", help="Only this node."),
              as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List measured runs."""
    from registry.runs import list_runs

    with state(ctx).registry(readonly=True).connect() as conn:
        rows = list_runs(conn, app_name, node)
    if as_json:
        print_json(rows)
    else:
        print_table(rows, ["app", "node", "threads", "time_s", "source", "created_at", "uid"], empty="no runs")


@import_app.command("runs")
def import_runs(ctx: typer.Context,
                path: Path = typer.Argument(..., metavar="FILE.csv", help="CSV with columns app,node,threads,time_s.")
                ) -> None:
    """Import measured runs from a CSV file (all rows or none)."""
    from registry.runs import import_runs_csv

    reg = state(ctx).registry()
    with reg.begin() as conn:
        summary = import_runs_csv(conn, path)
    extra = []
    if summary.apps_created:
        extra.append(f"new apps: {', '.join(summary.apps_created)}")
    if summary.nodes_created:
        extra.append(f"new nodes: {', '.join(summary.nodes_created)}")
    if summary.already:
        extra.append(f"{summary.already} imported before, skipped")
    say(f"imported {plural(summary.runs, 'run')} from {path}" + (f" ({'; '.join(extra)})" if extra else ""))


def parse_threads(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise UserError(f"--predict takes thread counts separated by commas (e.g. 8,16,32), not {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise UserError(f"--predict takes thread counts >= 1 separated by commas, not {text!r}")
    return sorted(set(values))


def parse_size(text: str) -> float:
    m = _SIZE.match(text or "")
    if not m:
        raise UserError(f"--working-set takes a size like 48M, 1.5G or 65536, not {text!r}")
    return float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ")


def node_caches(conn: "sa.Connection", node: str) -> list:
    """The node's data caches as CacheLevel (for the working-set warning)."""
    import sqlalchemy as sa

    from registry.models.base import CacheLevel

    rows = conn.execute(sa.text(
        "SELECT c.level, c.size_bytes, c.shared_by, c.instances FROM node_caches c JOIN nodes n "
        "ON n.node_id = c.node_id WHERE n.name = :n AND c.cache_type IN ('Data', 'Unified') ORDER BY c.level"),
        {"n": node})
    return [CacheLevel(int(r.level), int(r.size_bytes), int(r.shared_by or 1), int(r.instances or 1)) for r in rows]


@app.command("scaling")
def scaling(ctx: typer.Context, app_name: str = typer.Argument(..., metavar="APP", help="Application name."),
            node: str = typer.Option(..., "--node", help="Node whose runs are fitted."),
            model_name: str = typer.Option(DEFAULT_SCALING_MODEL, "--model",
                                           help=f"Scaling model: {'|'.join(SCALING_MODELS)} (or another installed "
                                                "scaling plugin)."),
            max_train: int = typer.Option(None, "--max-train-threads", min=1,
                                          help="Fit only the runs with at most this many threads."),
            predict: str = typer.Option(None, "--predict",
                                        help="Thread counts to predict, e.g. 8,16,32 (default: the counts above "
                                             "the training limit that have runs, else twice the largest)."),
            working_set: str = typer.Option(None, "--working-set",
                                            help="The app's working set (e.g. 48M), for the cache-crossing warning."),
            input_label: str = typer.Option(None, "--input", help="Fit only the runs of this input (a label or "
                                                                  "digest, as `runs list --json` shows; needed "
                                                                  "when the runs are of several inputs)."),
            option: list[str] = model_options_flag(),
            save: bool = typer.Option(False, "--save", help="Store the fitted model in the registry."),
            as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Fit a scaling model on APP's runs on NODE and predict runtimes at other thread counts."""
    from registry.models import plugins
    from registry.models.backtest import backtest
    from registry.models.base import ScalingContext
    from registry.models.options import parse_assignments
    from registry.models.store import save_model
    from registry.runs import load_runs

    options = parse_assignments(option)
    model = plugins.create(model_name, kind="scaling", options=options)
    ws = parse_size(working_set) if working_set else None
    reg = state(ctx).registry(readonly=not save)
    with reg.connect() as conn:
        runs = load_runs(conn, app_name, node, input_label)
        caches = node_caches(conn, node)
    train = runs if max_train is None else runs[runs.threads <= max_train]
    if train.empty:
        raise UserError(f"no runs of {app_name!r} on {node!r} with <= {max_train} threads")
    model.fit(train.threads.to_numpy(), train.time_s.to_numpy(), ScalingContext(working_set_bytes=ws, caches=caches))
    limit = int(train.threads.max())
    if predict:
        targets = parse_threads(predict)
    else:
        targets = sorted({int(n) for n in runs.threads if n > limit}) or [2 * limit]
    preds = model.predict(targets)
    measured = runs.groupby("threads").time_s.median()
    warnings = list(model.warnings) + [f"at {plural(p.threads, 'thread')}: {w}" for p in preds for w in p.warnings]
    check = backtest(lambda: plugins.create(model_name, options=options), train.threads.to_numpy(),
                     train.time_s.to_numpy())
    if check is not None and check.warning():
        warnings.append(check.warning())
    uid = None
    if save:
        with reg.begin() as conn:
            uid = save_model(conn, model, f"app={app_name} node={node} max_threads={limit}")
    rows = []
    for p in preds:
        m = float(measured[p.threads]) if p.threads in measured.index else None
        rows.append({"threads": p.threads, "predicted_s": p.predicted_s, "low_s": p.low_s, "high_s": p.high_s,
                     "measured_s": m, "error": None if m is None else (p.predicted_s - m) / m})
    if as_json:
        print_json({"predictions": rows, "warnings": warnings, "model": model.name,
                    "description": model.describe(), "trained_on": sorted({int(n) for n in train.threads}),
                    "saved_uid": uid})
        return
    say(model.describe())
    counts = sorted(set(train.threads))
    say(f"trained on {plural(len(train), 'run')} at {', '.join(map(str, counts))} thread{'s' if counts != [1] else ''}")
    for r in rows:
        r["error"] = None if r["error"] is None else f"{r['error']:+.1%}"
    print_table(rows, ["threads", "predicted_s", "low_s", "high_s", "measured_s", "error"],
                title=f"{app_name} on {node} ({model.name})")
    for w in warnings:
        say(f"warning: {w}", err=True, style="yellow")
    if uid:
        say(f"saved model {uid}")
