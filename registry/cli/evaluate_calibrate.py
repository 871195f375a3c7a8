"""`nodereg evaluate --calibrate K`: the cross-node evaluation on an imported suite (registry.crossarch),
as tables, JSON and a predictions CSV."""

from __future__ import annotations

from pathlib import Path

import typer

from registry.cli.app import state
from registry.cli.output import print_json, print_table, say
from registry.errors import UserError
from registry.values import listed


def _models(text: str | None) -> list[str]:
    """The projection models named (default: every installed one that serves a calibration reference
    set: similar-runs and the single-ratio baselines, and any plugin that declares no other need)."""
    from registry.models import plugins
    from registry.models.base import NEEDS_SIGNATURES

    infos, _ = plugins.discover()
    usable = [i.name for i in infos if i.kind == "projection" and set(i.needs) <= {NEEDS_SIGNATURES}
              and i.name in CALIBRATION_MODELS]
    if not text:
        return usable
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = {i.name for i in infos if i.kind == "projection"}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UserError(f"--models: {listed(unknown, 'unknown projection model') if unknown else 'no projection model given'}; "
                        f"installed: {', '.join(sorted(known))}")
    return names


# the models built for a reference set seen from calibration nodes and run by default (the others expect
# signatures of traced runs on one base node; they may still be named with --models, as may the learned
# models paris and similar-runs-gbt, which fit boosted trees in every fold: minutes per seed, not seconds)
CALIBRATION_MODELS = ("similar-runs", "vcpu-ratio", "best-micro-ratio", "geekbench-ratio")


def run_calibrate(ctx: typer.Context, k: int, seeds: list[int], suite: str, models: str | None,
                  predictions: Path | None, as_json: bool, on: str | None = None) -> None:
    from registry.cli.evaluate import _progress
    from registry.crossarch import evaluate as cal
    from registry.crossarch import report
    from registry.crossarch.data import load

    names = _models(models)
    data = load(state(ctx).registry(readonly=True), suite)
    if not data.apps:
        raise UserError(f"no app has measured runs on the nodes of the suite {suite!r}")
    if predictions is not None and predictions.parent and not predictions.parent.is_dir():
        raise UserError(f"cannot write {predictions}: no directory {predictions.parent}")
    with _progress(f"calibrate K={k}", len(data.apps) * len(seeds)) as advance:
        result = cal.run(data, names, k, seeds, on_fold=advance, on=on)
    if predictions is not None:
        try:
            result.predictions.to_csv(predictions, index=False)
        except OSError as exc:
            raise UserError(f"cannot write {predictions}: {exc.strerror}") from None
    summary = cal.summary(data, result)
    main = next((n for n in names if result.kinds.get(n) == "model"), None)
    checks = report.targets(summary, k, main, on) if main else []
    if as_json:
        print_json({"calibrate": k, "calibrate_on": on, "seeds": seeds, "suite": suite, "apps": len(data.apps),
                    "nodes": len(data.nodes), "summary": summary, "errors": result.errors,
                    "seconds": {m: round(s, 2) for m, s in result.seconds.items()},
                    "targets": [{"target": t, "met": ok} for t, ok in checks]})
        return
    title = (f"K={k} calibration nodes of different CPU families{f', all {on}' if on else ''}, "
             f"seeds {','.join(map(str, seeds))}: "
             f"{len(data.apps)} apps, {len(data.nodes)} nodes")
    print_table(report.overall_rows(summary), title=title)
    for what, rows, columns in report.slice_tables(summary):
        print_table(rows, columns, title=what)
    for model, why in result.errors.items():
        say(f"not evaluated: {model}: {why}", err=True)
    for text, ok in checks:
        say(f"target {'met' if ok else 'NOT met'}: {main}: {text}", err=True)
