#!/usr/bin/env python
"""Import each Lumos cloud into a fresh registry and evaluate every projection model on it.

    .venv/bin/python scripts/eval_lumos.py [DATA] [--clouds alibaba:g6.xlarge,huawei:s6.xlarge.2]
                                           [--models m1,m2] [--grid] [--json]
                                           [--splits app,size,size-pair,cloud]

DATA is a folder holding the cloud folders (``alibaba/``, ``huawei/``), or the dataset archive
``lumos-alibaba-huawei.tar.gz`` (or a folder holding it), which is then extracted to a temporary
folder. Default: ../shared/datasets/lumos next to the repository. Nothing is written into the
project: registries and extracted data live in a temporary folder that is removed at the end.

Per cloud it prints: the import time (target < 60 s), the leave-one-app-out table of every model
that can serve plus the baselines, the noise floor, and the evaluation time of all models
(target < 120 s); then whether the best model meets MAPE <= 4.0 % and mean regret <= 1.0 %. Two
MAPEs per model: the issue's (per app and node, against the median of the measured runs; the
target is for this one) and the run-level one (each base run against each single run: the dataset
README's protocol as far as we can reproduce it; compare the README's figures with that column).

The splits (``--splits``, all by default): ``app`` (leave one app out, above); ``size`` (leave one
data size out: every app of one size held out at once, the others the references; with the model
chosen per fold by nested cross-validation inside the training apps, row ``selected``; and each
held-out size's own figures); ``size-pair`` (train on ONE data size, predict the adjacent one:
tiny -> small, small -> tiny, small -> large, large -> small, each direction's own figures beside
the pooled row; the same nested-CV choice); ``cloud`` (the model with the lowest leave-one-app-out MAPE on one
cloud, scored on the other: needs two clouds). Then whether the issue 20 targets hold: on
leave-one-size-out (and, reported the same way, on size-pair) the selected model's regret <=
rf-sar's and its MAPE at most 0.3 points above.

With --grid it also runs, on the first cloud only, the grid of `similarity` settings its defaults
were chosen on (the second cloud is the check).

It also prints a bound that CHEATS, clearly labelled: "oracle-knn" picks each held-out app's k
neighbours by the app's own measured ratios on the other nodes (what no real method can know) and
averages their ratios. It says how far any method that projects by neighbours could get on this
data; it is not a model and is never a candidate for "best".
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from registry import evaluate as ev
from registry.db import open_registry
from registry.io.lumos import import_lumos
from registry.models.similarity import SimilarityModel

TARGET_MAPE, TARGET_REGRET = 0.040, 0.010
DEFAULT_CLOUDS = "alibaba:g6.xlarge,huawei:s6.xlarge.2"
README = {"alibaba": {"median-ratio": 7.2, "knn5-sar": 4.9, "random forest": 4.4, "noise": 2.6},
          "huawei": {"median-ratio": 7.9, "knn5-sar": 5.2, "random forest": 4.7, "noise": 3.1}}


def data_root(arg: str | None, scratch: Path) -> Path:
    """The folder holding the cloud folders, extracting the archive when that is what we were given."""
    path = Path(arg) if arg else Path(__file__).resolve().parents[2] / "shared" / "datasets" / "lumos"
    if path.is_dir() and not any((path / c).is_dir() for c in README):
        archives = sorted(path.glob("*.tar.gz"))
        if not archives:
            sys.exit(f"error: {path} holds neither cloud folders nor a .tar.gz archive")
        path = archives[0]
    if path.is_file():
        out = scratch / "data"
        with tarfile.open(path) as tar:
            tar.extractall(out, filter="data")
        return out
    if not path.is_dir():
        sys.exit(f"error: {path} does not exist")
    return path


def oracle_knn(data: ev.EvalData, k: int = 3) -> dict:
    """CHEATING bound: neighbours chosen by the held-out app's own measured log ratios."""
    lr = data.log_ratio()
    rows = []
    for app in data.apps:
        others = lr.drop(index=app)
        dist = np.sqrt(((others - lr.loc[app]) ** 2).mean(axis=1))
        est = others.loc[dist.nsmallest(k).index].mean()
        for node in lr.columns:
            if np.isfinite(lr.at[app, node]) and np.isfinite(est[node]):
                rows.append({"app": app, "node": node, "predicted_s": data.base_time_s[app] * np.exp(est[node]),
                             "actual_s": data.actual_s.at[app, node]})
    return ev.score(pd.DataFrame(rows))


def twin_noise(data: ev.EvalData) -> dict:
    """APE of each of the near-identical Hive aggregations (AVG, MAX, MIN, SUM over the same table)
    predicted by the mean log ratio of its three twins: how much single-run noise alone costs."""
    lr = data.log_ratio()
    out = {}
    for size in ("small", "large"):
        twins = [a for a in (f"hive_aggregation{f}_{size}" for f in ("AVG", "MAX", "MIN", "SUM")) if a in lr.index]
        if len(twins) < 3:
            continue
        apes = []
        for app in twins:
            rest = lr.loc[[t for t in twins if t != app]].mean()
            apes.extend(np.abs(np.exp(rest - lr.loc[app]) - 1).dropna())
        out[size] = pct(float(np.mean(apes)))
    return out


def regret_by_app(result: ev.ModelResult, top: int = 3) -> list[dict]:
    """The apps that cost the most regret: the node chosen, the measured fastest, the regret (and
    the fold, where an app is predicted in several: size-pair)."""
    rows = []
    for (fold, app), g in ev.by_choice(result.predictions.dropna(subset=["predicted_s", "actual_s"])):
        chosen, best = g.loc[g["predicted_s"].idxmin()], g.loc[g["actual_s"].idxmin()]
        rows.append({"fold": fold, "app": app, "chosen": chosen["node"], "fastest": best["node"],
                     "regret_pct": pct(chosen["actual_s"] / best["actual_s"] - 1)})
    return sorted(rows, key=lambda r: -r["regret_pct"])[:top]


def similarity_grid(data: ev.EvalData) -> list[dict]:
    """Leave-one-app-out MAPE and regret of `similarity` over the grid its defaults were chosen on."""
    out = []
    for k in (3, 4, 5, 6, 8):
        for shrink in (0.0, 0.1, 0.2, 0.3):
            for power in (1.0, 2.0, 3.0):
                r = ev.evaluate_model(data, lambda: SimilarityModel(k=k, shrink=shrink, relevance_power=power), "s")
                out.append({"k": k, "shrink": shrink, "relevance_power": power,
                            "mape_pct": pct(r.metrics["mape"]), "regret_pct": pct(r.metrics["regret"])})
    return sorted(out, key=lambda r: r["mape_pct"])


def pct(x):
    return None if x is None else round(100 * x, 2)


def metric_row(r: ev.ModelResult) -> dict:
    return {"model": r.name, "kind": r.kind, "mape_pct": pct(r.metrics["mape"]),
            "median_ape_pct": pct(r.metrics["median_ape"]), "top1_pct": pct(r.metrics["top1"]),
            "top3_pct": pct(r.metrics["top3"]), "regret_pct": pct(r.metrics["regret"]),
            "interval_coverage_pct": pct(r.metrics["coverage"]), "run_mape_pct": pct(r.metrics["run_mape"]),
            "seconds": round(r.seconds, 1), "error": r.error, "chosen": r.chosen}


def size_split(data: ev.EvalData, names: list[str], split: str = "size") -> dict:
    """Split `size` or `size-pair`: every model and the nested-CV choice; the figures per fold (the
    held-out size, or the direction 'tiny->small')."""
    t0 = time.perf_counter()
    results = ev.evaluate(data, names, split=split, select=True)
    per_size = {r.name: {fold: {k: pct(m[k]) for k in ("mape", "regret", "top1")}
                         for fold, m in ev.fold_scores(r).items()} for r in results if r.error is None}
    rows = [metric_row(r) for r in results]
    costliest = {r.name: regret_by_app(r, top=5) for r in results
                 if r.name in ("selected", "rf-sar") and r.error is None}
    by = {r["model"]: r for r in rows}
    sel, rf = by.get("selected"), by.get("rf-sar")
    met = bool(sel and rf and not (sel["error"] or rf["error"]) and sel["regret_pct"] <= rf["regret_pct"]
               and sel["mape_pct"] <= rf["mape_pct"] + 0.3)
    return {"split": split, "models": rows, "per_size": per_size, "costliest_choices": costliest,
            "sizes": data.sizes().value_counts().to_dict(),
            "seconds": round(time.perf_counter() - t0, 1), "target_met": met}


def evaluate_cloud(root: Path, cloud: str, base: str, scratch: Path, models: list[str] | None,
                   grid: bool = False, splits: tuple[str, ...] = ("app", "size")) -> dict:
    url = f"duckdb:///{scratch / (cloud + '.duckdb')}"
    reg = open_registry(url)
    t0 = time.perf_counter()
    summary = import_lumos(reg, root / cloud, cloud)
    import_s = time.perf_counter() - t0
    reg.close()
    reg = open_registry(url, readonly=True)
    data = ev.load(reg, base)
    reg.close()
    names = models if models is not None else ev.servable_models(data)[0]
    t0 = time.perf_counter()
    results = ev.evaluate(data, names) if "app" in splits or "cloud" in splits else []
    eval_s = time.perf_counter() - t0
    rows = [metric_row(r) for r in results]
    scored = [r for r in results if r.kind == "model" and r.error is None]
    best = min(scored, key=lambda r: r.metrics["mape"]) if scored else None
    noise = ev.noise_floor(data.runs)
    oracle = oracle_knn(data)
    twins = twin_noise(data)
    extra = {"similarity_grid": similarity_grid(data)} if grid else {}
    if "size" in splits:
        extra["size_split"] = size_split(data, names)
    if "size-pair" in splits:
        extra["size_pair_split"] = size_split(data, names, "size-pair")
    return {**extra, "cloud": cloud, "base": data.base_node, "apps": len(data.apps), "nodes": data.actual_s.shape[1],
            "runs_imported": summary.runs_added, "traces_imported": summary.traces_added,
            "samples_imported": summary.samples_added, "import_s": round(import_s, 1),
            "evaluate_all_models_s": round(eval_s, 1), "models": rows,
            "noise_floor_mape_pct": pct(noise["mape"]),
            "oracle_knn_cheating": {"mape_pct": pct(oracle["mape"]), "regret_pct": pct(oracle["regret"])},
            "hive_twins_ape_pct": twins,
            "best_model_worst_regret": regret_by_app(best) if best else [],
            "readme_reference_pct": README.get(cloud),
            "best_model": best.name if best else None,
            "target_met": bool(best and best.metrics["mape"] <= TARGET_MAPE
                               and best.metrics["regret"] <= TARGET_REGRET)}


def show_rows(rows: list[dict]) -> None:
    print(f"{'model':14s} {'kind':9s} {'MAPE%':>7s} {'medAPE%':>8s} {'top-1%':>7s} {'top-3%':>7s} {'regret%':>8s}"
          f" {'s':>6s} {'in-interval%':>13s} {'run-MAPE%':>10s}")
    for r in rows:
        if r["error"]:
            print(f"{r['model']:14s} {r['kind']:9s} failed: {r['error']}")
            continue
        print(f"{r['model']:14s} {r['kind']:9s} {r['mape_pct']:7.2f} {r['median_ape_pct']:8.2f} "
              f"{r['top1_pct']:7.1f} {r['top3_pct']:7.1f} {r['regret_pct']:8.2f} {r['seconds']:6.1f} "
              f"{'' if r['interval_coverage_pct'] is None else r['interval_coverage_pct']:>13} "
              f"{'' if r['run_mape_pct'] is None else r['run_mape_pct']:>10}"
              + (f"  chosen: {r['chosen']}" if r.get("chosen") else ""))


def show_size_split(split: dict) -> None:
    title = {"size": "leave one data size out", "size-pair": "train on one data size, predict the adjacent one"}
    print(f"\n{title[split['split']]} (apps per size: {split['sizes']}; {split['seconds']} s):")
    show_rows(split["models"])
    held = " held out" if split["split"] == "size" else ""
    for model, folds in split["per_size"].items():
        print(f"  {model:14s} " + "; ".join(f"{fold}{held}: MAPE {m['mape']} %, regret {m['regret']} %, "
                                           f"top-1 {m['top1']} %" for fold, m in folds.items()))
    for model, worst in split["costliest_choices"].items():
        print(f"  {model}'s costliest choices: " + "; ".join(
            f"{w['app']}{'' if split['split'] == 'size' else ' (' + w['fold'] + ')'} chose {w['chosen']}, "
            f"fastest {w['fastest']}: {w['regret_pct']} %" for w in worst))
    print("target (selected: regret <= rf-sar's, MAPE <= rf-sar's + 0.3): "
          + ("MET" if split["target_met"] else "NOT met"))


def cross_cloud(reports: list[dict]) -> list[dict]:
    """The model with the lowest leave-one-app-out MAPE on one cloud (not a baseline), scored on the other."""
    out = []
    for a in reports:
        for b in reports:
            if a is b or not a["models"]:
                continue
            ok = [r for r in a["models"] if r["kind"] == "model" and r["error"] is None]
            picked = min(ok, key=lambda r: r["mape_pct"])["model"]
            scored = next(r for r in b["models"] if r["model"] == picked)
            out.append({"chosen_on": a["cloud"], "scored_on": b["cloud"], "model": picked, **{
                k: scored[k] for k in ("mape_pct", "top1_pct", "top3_pct", "regret_pct")}})
    return out


def show(report: dict) -> None:
    print(f"\n== {report['cloud']}: base {report['base']}, {report['apps']} apps x {report['nodes']} other nodes")
    print(f"import: {report['runs_imported']} runs, {report['traces_imported']} traces, "
          f"{report['samples_imported']:,} samples in {report['import_s']} s (target < 60 s)")
    if report["models"]:
        print("leave one app out:")
        show_rows(report["models"])
    o = report["oracle_knn_cheating"]
    print(f"{'oracle-knn':14s} {'CHEATS':9s} {o['mape_pct']:7.2f} {'':8s} {'':7s} {o['regret_pct']:8.2f}"
          "   <- neighbours chosen by the held-out app's own ratios: a bound, not a model")
    print(f"noise floor (one run vs the median of the others): {report['noise_floor_mape_pct']} %")
    ref = report["readme_reference_pct"]
    if ref:
        print("dataset README (its own protocol): " + ", ".join(f"{k} {v} %" for k, v in ref.items()))
    print("MAPE: per (app, node) against the median of the runs (the issue's metric, the one the target is "
          "for); run-MAPE: each base run x the predicted ratio against each single run (our reading of the "
          "README's protocol; its figures are compared with this column)")
    if report["hive_twins_ape_pct"]:
        print("Hive aggregation twins (AVG/MAX/MIN/SUM), each from the mean of the other three: "
              + ", ".join(f"{k} {v} %" for k, v in report["hive_twins_ape_pct"].items()))
    worst = report["best_model_worst_regret"]
    if worst:
        print(f"{report['best_model']}'s costliest choices (share of its mean regret: sum / {report['apps']} apps): "
              + "; ".join(f"{w['app']} chose {w['chosen']}, fastest {w['fastest']}: {w['regret_pct']} %"
                          for w in worst))
    if report["models"]:
        print(f"all models evaluated in {report['evaluate_all_models_s']} s (target < 120 s)")
    if "similarity_grid" in report:
        g = report["similarity_grid"]
        print(f"similarity grid ({len(g)} settings): MAPE {g[0]['mape_pct']} .. {g[-1]['mape_pct']} %; best five:")
        for row in g[:5]:
            print(f"  k={row['k']} shrink={row['shrink']} relevance_power={row['relevance_power']}: "
                  f"MAPE {row['mape_pct']} %, regret {row['regret_pct']} %")
    for key in ("size_split", "size_pair_split"):
        if key in report:
            show_size_split(report[key])
    if not report["models"]:
        return
    verdict = "MET" if report["target_met"] else "NOT met"
    print(f"best model: {report['best_model']}; target MAPE <= {100 * TARGET_MAPE:.1f} % and regret <= "
          f"{100 * TARGET_REGRET:.1f} %: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", help="dataset folder or archive (default ../shared/datasets/lumos)")
    parser.add_argument("--clouds", default=DEFAULT_CLOUDS, help=f"CLOUD:BASE_VM,... (default {DEFAULT_CLOUDS})")
    parser.add_argument("--models", help="comma-separated models (default: every one that can serve)")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument("--splits", default="app,size,size-pair,cloud",
                        help="splits to run (default app,size,size-pair,cloud)")
    parser.add_argument("--grid", action="store_true",
                        help="also run the similarity grid the defaults were chosen on, on the FIRST cloud only")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m] if args.models else None
    reports = []
    with tempfile.TemporaryDirectory(prefix="nodereg-lumos-") as tmp:
        scratch = Path(tmp)
        root = data_root(args.data, scratch)
        for i, item in enumerate(args.clouds.split(",")):
            cloud, _, base = item.partition(":")
            report = evaluate_cloud(root, cloud, base or None, scratch, models, grid=args.grid and i == 0,
                                    splits=tuple(args.splits.split(",")))
            reports.append(report)
            if not args.json:
                show(report)
    crossed = cross_cloud(reports) if "cloud" in args.splits.split(",") else []
    if args.json:
        print(json.dumps({"clouds": reports, "cross_cloud": crossed}, indent=2))
    else:
        for c in crossed:
            print(f"cross-cloud: chosen on {c['chosen_on']} ({c['model']}), scored on {c['scored_on']}: "
                  f"MAPE {c['mape_pct']} %, top-1 {c['top1_pct']} %, top-3 {c['top3_pct']} %, "
                  f"regret {c['regret_pct']} %")
        print("\nmeasured on a shared machine under load; times are wall clock")


if __name__ == "__main__":
    main()
