"""Evaluate the scaling models (docs/models.md quotes what this prints).

1. Golden: Downey speed-ups of the Figure 2 settings (seed notes, models.md) to 2 decimals.
2. Synthetic sets with known answers: Barnes log-log coefficients (TOT with an input variable,
   SEP), Amdahl, Downey instances fitted from their own curves (both forms), MOB's sin(x) split.
3. Real strong-scaling series (scripts/data/, sources in scripts/data/README.md): train on the
   counts <= half the cores (the largest measured count), predict every count above, median
   relative error per series and over all held-out points, for loglog, downey, amdahl, usl, their
   log-space average (ensemble), the single model that Barnes's within-training check rates best
   ("selected"), and Extra-P (its default single-parameter modeler with negative exponents allowed,
   on the same split).

    .venv/bin/python scripts/eval_scaling.py [--no-extrap] [--json results.json]

Extra-P is optional (`pip install extrap`); without it its column is left empty.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from registry.models.amdahl import AmdahlModel
from registry.models.backtest import backtest
from registry.models.base import ScalingContext
from registry.models.downey import DowneyModel, raw_time, speedup
from registry.models.ensemble import EnsembleModel
from registry.models.loglog import LogLogModel
from registry.models.mob import MobTree
from registry.models.usl import UslModel

DATA = Path(__file__).parent / "data"
console = Console(width=170)   # the table has 10 columns: keep it readable in logs and pipes


def _load_golden() -> tuple[list[int], dict]:
    """The published Downey speed-up table (scripts/data/downey_golden.json; tests read it too)."""
    doc = json.loads((DATA / "downey_golden.json").read_text())
    return doc["n"], {(r["A"], r["sigma"]): r["speedup"] for r in doc["rows"]}


GOLDEN_N, GOLDEN = _load_golden()
SINGLE_MODELS = {"loglog": LogLogModel, "downey": DowneyModel, "amdahl": AmdahlModel, "usl": UslModel}
SCALING_MODELS = {**SINGLE_MODELS, "ensemble": EnsembleModel}
COLUMNS = [*SCALING_MODELS, "selected", "extrap"]
# Series transcribed after the usl and ensemble models were designed on the other nine: their figures
# are the out-of-sample check of those choices (docs/models.md).
ADDED_AFTER_DESIGN = {"spm_workers_24_n4096", "psort_bitonic_omp_10", "psort_sample_omp_10", "psort_radix_omp_10"}


def golden() -> dict:
    got = {k: np.round(speedup(GOLDEN_N, *k), 2).tolist() for k in GOLDEN}
    cells = sum(len(v) for v in GOLDEN.values())
    same = sum(a == b for k in GOLDEN for a, b in zip(got[k], GOLDEN[k]))
    return {"cells": cells, "identical": same}


def synthetic() -> dict:
    out = {}
    # Barnes TOT: log2 T = c0 + b log2 x + c1 log2 q + c2 (log2 q)^2
    x = np.repeat([100.0, 200.0, 400.0, 800.0], 5)
    q = np.tile([2.0, 4.0, 8.0, 16.0, 32.0], 4)
    truth = {"c0": 1.5, "b[n]": 0.9, "c1": -0.95, "c2": 0.04}
    t = 2 ** (truth["c0"] + truth["b[n]"] * np.log2(x) + truth["c1"] * np.log2(q) + truth["c2"] * np.log2(q) ** 2)
    m = LogLogModel().fit(q, t, ScalingContext(inputs={"n": x}))
    out["loglog_tot_max_coef_error"] = max(abs(m.tot.coefficients[k] - v) for k, v in truth.items())
    out["loglog_tot_form"] = m.tot.form
    # Barnes SEP: computation scales perfectly, communication grows
    q2 = np.array([2.0, 4, 8, 16, 32])
    comp, comm = 2 ** (8 - np.log2(q2)), 2 ** (1 + 0.5 * np.log2(q2))
    sep = LogLogModel().fit(q2, comp + comm, ScalingContext(comm_s={"MAX": comm}))
    pred = sep.predict([256])[0].predicted_s
    out["loglog_sep_technique"] = sep.technique
    out["loglog_sep_error_at_256"] = abs(pred - (1 + 2**5)) / (1 + 2**5)
    # Amdahl
    n = np.array([1, 2, 4, 8, 16])
    am = AmdahlModel().fit(n, 3 + 120 / n)
    out["amdahl_max_param_error"] = max(abs(am.serial_s - 3), abs(am.parallel_s - 120))
    # Downey: the golden instances (except sigma = 0: exactly linear up to A). Identifiable design: runs at
    # powers of two up to the first one past the saturation point (2A-1, or A + A sigma - sigma), predictions
    # at the next two. Unidentifiable design (runs only in the Amdahl-like first piece): the runner-up
    # warning must say so.
    errors = {"normalised": [], "raw": []}
    flagged = []
    for (A, s) in GOLDEN:
        if s == 0:
            continue
        limit = 2 * A - 1 if s <= 1 else A + A * s - s
        runs = 2.0 ** np.arange(0, int(np.ceil(np.log2(limit))) + 1)
        targets = [int(runs[-1] * 2), int(runs[-1] * 4)]
        for form in errors:
            times = raw_time(runs, A, s) if form == "raw" else 100.0 / speedup(runs, A, s)
            model = DowneyModel(form=form).fit(runs, times)
            for p in model.predict(targets):
                true = raw_time(p.threads, A, s) if form == "raw" else 100.0 / speedup(p.threads, A, s)
                errors[form].append(abs(p.predicted_s - true) / true)
        first_piece = 2.0 ** np.arange(0, int(np.log2(A / 2)) + 1)
        p = DowneyModel().fit(first_piece, 100.0 / speedup(first_piece, A, s)).predict([int(4 * A)])[0]
        flagged.append(any("runner-up" in w for w in p.warnings))
    out["downey_normalised_max_error"] = float(np.max(errors["normalised"]))
    out["downey_raw_max_error"] = float(np.max(errors["raw"]))
    out["downey_predictions"] = len(errors["raw"])
    out["downey_first_piece_only_runner_up_warned"] = f"{sum(flagged)}/{len(flagged)}"
    # MOB: sin(x) + noise with quadratic leaves
    cuts = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        xs = rng.uniform(0, 2 * np.pi, 600)
        frame = pd.DataFrame({"x": xs, "x2": xs**2, "noise": rng.normal(size=600)})
        tree = MobTree(["x", "x2"], ["x", "noise"], minsplit=25, max_depth=1).fit(frame, np.sin(xs) +
                                                                                 rng.normal(0, 0.1, 600))
        cuts.append(tree.root.split["cut"])
    out["mob_sine_first_split"] = {"mean": float(np.mean(cuts)), "min": float(np.min(cuts)),
                                   "max": float(np.max(cuts)), "runs": len(cuts)}
    return out


def extrap_predict(threads: np.ndarray, times: np.ndarray, targets: list[int]) -> list[float] | None:
    """Extra-P's default modeler on the same runs (median of repetitions), evaluated at the targets."""
    try:
        from extrap.entities.measurement import Measure
        from extrap.fileio.file_reader.text_file_reader import TextFileReader
        from extrap.modelers.model_generator import ModelGenerator
    except ImportError:
        return None
    frame = pd.DataFrame({"n": threads, "t": times})
    points = sorted(frame.n.unique())
    lines = ["PARAMETER p", "POINTS " + " ".join(str(int(p)) for p in points), "REGION main", "METRIC time"]
    lines += ["DATA " + " ".join(repr(float(v)) for v in frame.t[frame.n == p]) for p in points]
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "runs.txt"
        path.write_text("\n".join(lines) + "\n")
        experiment = TextFileReader().read_experiment(str(path))
        generator = ModelGenerator(experiment, modeler="default", use_measure=Measure.MEDIAN)
        generator.modeler.allow_negative_exponents = True
        generator.model_all()
        model = next(iter(generator.models.values()))
        return [float(v) for v in model.hypothesis.function.evaluate(np.array(targets, dtype=float))]


def select_by_backtest(checks: dict[str, float | None]) -> str:
    """The single model with the lowest within-training error (training runs only); the ensemble when
    no single model can be checked (too few counts <= p0/2)."""
    rated = {m: checks[m] for m in SINGLE_MODELS if checks.get(m) is not None}
    return min(rated, key=rated.get) if rated else "ensemble"


def real_series(use_extrap: bool) -> list[dict]:
    frame = pd.read_csv(DATA / "real_scaling.csv")
    rows = []
    groups = list(frame.groupby("series"))
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("real series", total=len(groups))
        for name, g in groups:
            cores = int(g.threads.max())
            train = g[g.threads <= cores / 2]
            held = g[g.threads > cores / 2].groupby("threads").time_s.median()
            targets = [int(n) for n in held.index]
            row = {"series": name, "cores": cores, "train": sorted(int(n) for n in train.threads.unique()),
                   "targets": targets, "errors": {}, "seconds": {}, "backtest": {}}
            for label, cls in SCALING_MODELS.items():
                start = time.perf_counter()
                preds = [p.predicted_s for p in cls().fit(train.threads.values, train.time_s.values).predict(targets)]
                row["seconds"][label] = time.perf_counter() - start
                row["errors"][label] = (np.abs(np.array(preds) - held.values) / held.values).tolist()
                check = backtest(cls, train.threads.values, train.time_s.values)
                row["backtest"][label] = None if check is None else check.median_error
            row["selected_model"] = select_by_backtest(row["backtest"])
            row["errors"]["selected"] = row["errors"][row["selected_model"]]
            if use_extrap:
                preds = extrap_predict(train.threads.values, train.time_s.values, targets)
                if preds is not None:
                    row["errors"]["extrap"] = (np.abs(np.array(preds) - held.values) / held.values).tolist()
            rows.append(row)
            progress.advance(task)
    return rows


def real_with_inputs() -> dict:
    """Barnes with an input variable: one log-log fit over all problem sizes (log2 ntot term) against
    a separate fit per size (log-log and Amdahl), trained on <= half the workers, predicting the rest."""
    frame = pd.read_csv(DATA / "real_scaling_inputs.csv")
    cores = int(frame.threads.max())
    train, held = frame[frame.threads <= cores / 2], frame[frame.threads > cores / 2]
    joint = LogLogModel().fit(train.threads.values, train.time_s.values,
                              ScalingContext(inputs={"ntot": train.ntot.values.astype(float)}))
    errors = {"loglog, one fit with log2 ntot": [], "loglog per size": [], "amdahl per size": []}
    for size, rows in held.groupby("ntot"):
        part = train[train.ntot == size]
        for _, r in rows.iterrows():
            preds = {"loglog, one fit with log2 ntot": joint.predict([int(r.threads)], inputs={"ntot": size})[0],
                     "loglog per size": LogLogModel().fit(part.threads.values, part.time_s.values)
                     .predict([int(r.threads)])[0],
                     "amdahl per size": AmdahlModel().fit(part.threads.values, part.time_s.values)
                     .predict([int(r.threads)])[0]}
            for k, p in preds.items():
                errors[k].append(abs(p.predicted_s - r.time_s) / r.time_s)
    return {"series": str(frame.series.iloc[0]), "train": sorted(int(n) for n in train.threads.unique()),
            "targets": sorted(int(n) for n in held.threads.unique()), "form": joint.tot.form,
            "median_error": {k: float(np.median(v)) for k, v in errors.items()}}


def show(golden_res: dict, synth: dict, real: list[dict], inputs: dict) -> None:
    console.print(f"[bold]Golden[/] Downey speed-up table: {golden_res['identical']}/{golden_res['cells']} cells "
                  "identical to 2 decimals")
    console.print("[bold]Synthetic[/]")
    for k, v in synth.items():
        console.print(f"  {k}: {v}")
    labels = [m for m in COLUMNS if any(m in r["errors"] for r in real)]
    table = Table(title="Real strong-scaling series: median relative error beyond the training range")
    for col in ["series", "train (threads)", "predicted"] + labels:
        table.add_column(col, justify="left" if col in ("series", "train (threads)", "predicted") else "right")
    for r in real:
        cells = [f"{np.median(r['errors'][m]):.1%}" if m in r["errors"] else "" for m in labels]
        table.add_row(r["series"], f"{r['train'][0]}..{r['train'][-1]} ({len(r['train'])})",
                      f"{r['targets'][0]}..{r['targets'][-1]} ({len(r['targets'])})", *cells)
    pooled = [f"{np.median([e for r in real for e in r['errors'].get(m, [])]):.1%}" for m in labels]
    per_series = [f"{np.median([np.median(r['errors'][m]) for r in real if m in r['errors']]):.1%}" for m in labels]
    within = [f"{sum(np.median(r['errors'][m]) <= 0.10 for r in real if m in r['errors'])}/{len(real)}"
              for m in labels]
    table.add_row("median of the series' medians", "", "", *per_series)
    table.add_row("median over all held-out points", "", "", *pooled)
    table.add_row("series with median <= 10%", "", "", *within)
    table.add_row("held-out points", "", "", *[str(sum(len(r["errors"].get(m, [])) for r in real)) for m in labels])
    for title, keep in (("the first nine series", lambda r: r["series"] not in ADDED_AFTER_DESIGN),
                        ("the series added after design", lambda r: r["series"] in ADDED_AFTER_DESIGN)):
        part = [r for r in real if keep(r)]
        if part:
            table.add_row(f"median over the held-out points of {title}", "", "",
                          *[f"{np.median([e for r in part for e in r['errors'].get(m, [])]):.1%}" for m in labels])
    console.print(table)
    console.print("selected by the within-training check: "
                  + ", ".join(f"{r['series']} {r['selected_model']}" for r in real))
    for m in SCALING_MODELS:
        flagged = [r["series"] for r in real if (r["backtest"].get(m) or 0) > 0.10]
        unchecked = [r["series"] for r in real if r["backtest"].get(m) is None]
        console.print(f"within-training check of {m} above 10%: {', '.join(flagged) or 'none'}"
                      + (f" (too few runs to check: {', '.join(unchecked)})" if unchecked else ""))
    console.print(f"[bold]Input variable[/] ({inputs['series']}, train {inputs['train']}, predict {inputs['targets']}, "
                  f"3 problem sizes): " + ", ".join(f"{k} {v:.1%}" for k, v in inputs["median_error"].items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-extrap", action="store_true", help="Skip the Extra-P comparison.")
    parser.add_argument("--json", type=Path, help="Also write the results as JSON to this file.")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    golden_res, synth = golden(), synthetic()
    real = real_series(not args.no_extrap)
    inputs = real_with_inputs()
    show(golden_res, synth, real, inputs)
    console.print(f"({time.perf_counter() - start:.0f} s)")
    if args.json:
        results = {"golden": golden_res, "synthetic": synth, "real": real, "inputs": inputs}
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
