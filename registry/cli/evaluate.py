"""`nodereg import lumos DIR` and `nodereg evaluate`: external measurements in, honest accuracy out.

The evaluation and import modules (pandas, scikit-learn) are imported inside the commands, so that
every other command starts without them.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer
from rich.progress import BarColumn, TaskProgressColumn, TimeElapsedColumn

from registry.cli.app import app, import_app, state
from registry.cli.output import err_console, print_json, print_table, say, text_column
from registry.cli.progress import Progress
from registry.errors import UserError


@contextmanager
def _progress(description: str, total: int | None = None):
    columns = (text_column("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console) as progress:
        task = progress.add_task(description, total=total)

        def advance(done: int | None = None, of: int | None = None) -> None:
            if of is not None:
                progress.update(task, completed=done, total=of)
            else:
                progress.advance(task)
        yield advance


@import_app.command("lumos")
def import_lumos_cmd(
    ctx: typer.Context,
    directory: Path = typer.Argument(..., help="A cloud folder of the Lumos dataset: DIR/<interval>/<vm>/<run>/ "
                                               "or DIR/<vm>/<run>/ (each run: report.json + sar.csv)."),
    cloud: str = typer.Option(None, "--cloud",
                              help="Cloud name (node names are CLOUD/VM). Default: the folder's name."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import the Lumos dataset: each VM type a node, each workload an app with its runs and sar traces."""
    from registry.io.lumos import import_lumos

    reg = state(ctx).registry()
    with _progress("reading runs") as advance:
        summary = import_lumos(reg, directory, cloud, progress=lambda done, of: advance(done, of))
    out = summary.as_dict()
    if as_json:
        print_json(out)
        return
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(out.pop("skipped").items())) or "none"
    unknown = ", ".join(out.pop("vm_types_not_understood")) or "none"
    rows = [{"field": k, "value": v} for k, v in out.items()] + [{"field": "skipped", "value": skipped},
                                                                  {"field": "VM type names not understood",
                                                                   "value": unknown}]
    print_table(rows, ["field", "value"], title=f"lumos import: {summary.cloud}")


def _model_list(text: str | None, data) -> tuple[list[str], list[str]]:
    """The models to evaluate on `data` (an evaluate.EvalData), and those skipped as unable to serve."""
    from registry import evaluate as ev

    servable, skipped = ev.servable_models(data)
    if not text:
        return servable, skipped
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--models needs at least one model name")
    unknown = [n for n in names if n not in servable]
    if unknown:
        raise UserError(f"cannot evaluate {', '.join(unknown)}: the models that can serve here are "
                        f"{', '.join(servable) or 'none'}")
    return names, []


def _options_by_model(texts: list[str] | None, names: list[str]) -> dict[str, dict[str, str]]:
    """`--option MODEL.KEY=VALUE` (or KEY=VALUE when one model is evaluated) as options per model."""
    from registry.models.options import parse_assignments

    out: dict[str, dict[str, str]] = {}
    for key, value in parse_assignments(texts).items():
        model, dot, option = key.rpartition(".")
        if not dot:
            if len(names) != 1:
                raise UserError(f"--option {key}=...: with several models, name the model: MODEL.{key}=VALUE")
            model = names[0]
        if model not in names:
            raise UserError(f"--option {key}=...: {model!r} is not among the evaluated models ({', '.join(names)})")
        out.setdefault(model, {})[option] = value
    return out


def _seed_list(seed: list[int] | None, text: str | None) -> list[int]:
    """--seed (repeatable) and --seeds '0,1,2' / '3-5' together; default 0, 1, 2."""
    from registry.cpulist import parse as parse_list

    out = list(seed or [])
    if text:
        try:
            out += parse_list(text)
        except UserError:
            raise UserError(f"--seeds {text!r}: expected seeds like 0,1,2 or 3-5") from None
    return sorted(set(out)) or [0, 1, 2]


def _pct(value):
    return None if value is None else round(100 * value, 2)


@app.command("evaluate")
def evaluate_cmd(
    ctx: typer.Context,
    base: str = typer.Option(None, "--base", help="Base node (its traces are the queries). Default: the node with "
                                                  "traces of the most apps measured elsewhere."),
    models: str = typer.Option(None, "--models", help="Comma-separated models (default: every installed projection "
                                                      "model that can serve, baselines included)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    predictions: Path = typer.Option(None, "--predictions", help="Write every prediction to this CSV: "
                                                                  "model,app,node,predicted_s,actual_s,fold."),
    option: list[str] = typer.Option(None, "--option", metavar="[MODEL.]KEY=VALUE",
                                     help="Set a model option (repeatable; MODEL. may be left out when one model "
                                          "is evaluated); `nodereg models NAME` lists them."),
    split: str = typer.Option("app", "--split", help="app: leave one app out; size: leave one data size out "
                                                     "(train on the other sizes); size-pair: train on one data "
                                                     "size, predict the next one up or down (tiny->small and "
                                                     "back); cloud: choose the model on --select-base's cloud, "
                                                     "score on --base's."),
    select: bool = typer.Option(False, "--select", help="Also the model chosen per fold by nested cross-validation "
                                                        "inside the training apps only (row 'selected')."),
    select_base: str = typer.Option(None, "--select-base", help="--split cloud: the base node of the cloud the model "
                                                                "is chosen on."),
    calibrate: int = typer.Option(None, "--calibrate", min=1, help="Cross-node prediction on an imported suite: "
                                  "each app measured on K nodes of different CPU families, predicted on every "
                                  "node of another family (docs/crossarch.md)."),
    seed: list[int] = typer.Option(None, "--seed", help="--calibrate: a seed of the calibration draw (repeatable; "
                                                        "default 0, 1, 2)."),
    seeds: str = typer.Option(None, "--seeds", help="--calibrate: seeds as a list, e.g. 0,1,2 or 3-5."),
    suite: str = typer.Option("sparecores", "--suite", help="--calibrate: the imported suite whose profiles serve."),
    calibrate_on: str = typer.Option(None, "--calibrate-on", help="--calibrate: draw the calibration nodes from this "
                                     "architecture only (aarch64 or x86_64): every fold predicts across "
                                     "architectures (docs/crossarch.md)."),
    input_label: str = typer.Option(None, "--input", help="Only the traces and runs of this input (a label or "
                                                          "digest; runs of an unknown input are kept). Without it, "
                                                          "each app's runs of its base trace's input."),
) -> None:
    """Accuracy of the projection models on measured runs (MAPE, top-1/3, regret, noise floor), by a split."""
    from registry import evaluate as ev

    if calibrate is not None:
        from registry.cli.evaluate_calibrate import run_calibrate

        if split != "app" or select or base or select_base or option or input_label:
            raise UserError("--calibrate K takes none of --split, --select, --base, --select-base, --option, "
                            "--input")

        run_calibrate(ctx, calibrate, _seed_list(seed, seeds), suite, models, predictions, as_json, calibrate_on)
        return
    if seed or seeds or calibrate_on:
        raise UserError("--seed, --seeds and --calibrate-on only serve --calibrate K")
    if split not in ev.SPLITS:
        raise UserError(f"--split must be one of {', '.join(ev.SPLITS)}, not {split!r}")
    if (split == "cloud") != (select_base is not None):
        raise UserError("--split cloud needs --select-base NODE (the base of the cloud the model is chosen on), "
                        "and --select-base only serves it")
    reg = state(ctx).registry(readonly=True)
    cloud = split == "cloud"
    data = ev.load(reg, base, same_cloud=cloud, input_label=input_label)
    names, skipped = _model_list(models, data)
    options = _options_by_model(option, names)
    chooser = ev.load(reg, select_base, same_cloud=True, input_label=input_label) if cloud else None
    held = len(chooser.apps) + len(data.apps) if cloud else sum(len(h) for *_, h in ev.folds(data, split))
    work = held * len(names) + select * held
    with _progress(f"split {split}", work) as advance:
        results = ev.evaluate_cross(chooser, data, names, on_app=advance, options=options) if cloud else \
            ev.evaluate(data, names, on_app=advance, split=split, select=select, options=options)
    if predictions is not None:
        try:
            ev.predictions_frame(results).to_csv(predictions, index=False)
        except OSError as exc:
            raise UserError(f"cannot write {predictions}: {exc.strerror}") from None
    noise = ev.noise_floor(data.runs)
    rows = [{"model": r.name, "kind": r.kind, "apps": r.metrics["apps"], "predictions": r.metrics["cells"],
             "mape_pct": _pct(r.metrics["mape"]), "median_ape_pct": _pct(r.metrics["median_ape"]),
             "top1_pct": _pct(r.metrics["top1"]), "top3_pct": _pct(r.metrics["top3"]),
             "regret_pct": _pct(r.metrics["regret"]), "cost_regret_pct": _pct(r.metrics["cost_regret"]),
             "interval_coverage_pct": _pct(r.metrics["coverage"]),
             "run_mape_pct": _pct(r.metrics["run_mape"]) if "run_mape" in r.metrics else None,
             "seconds": round(r.seconds, 2), "error": r.error, "chosen": r.chosen} for r in results]
    per_fold = [{"model": r.name, "fold": fold, "apps": m["apps"], "mape_pct": _pct(m["mape"]),
                 "top1_pct": _pct(m["top1"]), "top3_pct": _pct(m["top3"]), "regret_pct": _pct(m["regret"])}
                for r in results for fold, m in ev.fold_scores(r).items()] if split in ("size", "size-pair") else []
    if as_json:
        print_json({"base": data.base_node, "split": split, "select_base": chooser and chooser.base_node,
                    "apps": len(data.apps), "nodes": list(data.actual_s.columns),
                    "noise_floor": {**noise, "mape_pct": _pct(noise["mape"]),
                                    "median_ape_pct": _pct(noise["median_ape"])},
                    "models": rows, **({"per_fold": per_fold} if per_fold else {}), "not_evaluated": skipped})
        return
    table = [{"model": r["model"], "apps": r["apps"], "MAPE %": r["mape_pct"], "med APE %": r["median_ape_pct"],
              "top-1 %": r["top1_pct"], "top-3 %": r["top3_pct"], "regret %": r["regret_pct"],
              "cost regret %": r["cost_regret_pct"], "s": r["seconds"],
              "error": r["error"] and "failed (see below)"} for r in rows]
    columns = ["model", "apps", "MAPE %", "med APE %", "top-1 %", "top-3 %", "regret %",
               *(["cost regret %"] if data.prices is not None else []), "s"]
    print_table(table, columns + (["error"] if any(r["error"] for r in rows) else []),
                title=f"split {split}, base {data.base_node}: {len(data.apps)} apps x "
                      f"{data.actual_s.shape[1]} other nodes")
    if per_fold:
        print_table([{"model": f["model"], "fold": f["fold"], "apps": f["apps"], "MAPE %": f["mape_pct"],
                      "top-1 %": f["top1_pct"], "top-3 %": f["top3_pct"], "regret %": f["regret_pct"]}
                     for f in per_fold], title="per fold (held-out size, or training size -> predicted size)")
    for r in results:
        if r.chosen:
            on = f" on {chooser.base_node}'s cloud" if cloud else " per fold"
            say(f"selected{on}: " + ", ".join(f"{m} ({n})" for m, n in r.chosen.items()), err=True)
    baselines = [r.name for r in results if r.kind == "baseline"]
    if baselines:
        say(f"baselines: {', '.join(baselines)} (see docs/evaluation.md)", err=True)
    if noise["mape"] is not None:
        say(f"noise floor (one run vs the median of the others, {noise['runs']} runs): "
            f"MAPE {_pct(noise['mape'])}%, median {_pct(noise['median_ape'])}%", err=True)
    for line in skipped:
        say(f"not evaluated: {line}", err=True)
    for r in rows:
        if r["error"]:
            say(f"{r['model']} failed: {' '.join(str(r['error']).split())[:300]}", err=True)
