"""The figures of a `--calibrate K` evaluation as tables, and the issue's targets checked against them
(printed beside the baselines; docs/crossarch.md)."""

from __future__ import annotations

from registry.crossarch.evaluate import CLOUD, DIRECTIONS
from registry.io.sparecores.apps import GROUPS

# the groups issue 27's targets name; an app of another group (llm) is shown, not held to them
TARGET_GROUPS = ("geekbench-single", "geekbench-multi", "compression", "redis-web")
ARCH_SLICES = ("x86->arm", "arm->x86")


def pct(value):
    return None if value is None else round(100 * value, 1)


def overall_rows(summary: list[dict]) -> list[dict]:
    """One row per model: its figures over every fold."""
    return [{"model": r["model"], "kind": r["kind"], "folds": r["folds"], "predictions": r["predictions"],
             "median err %": pct(r["median_ae"]), "p90 err %": pct(r["p90_ae"]),
             "Spearman": None if r["spearman"] is None else round(r["spearman"], 3), "top-1 %": pct(r["top1"]),
             "regret %": pct(r["regret"]), "coverage %": pct(r["coverage"])}
            for r in summary if r["slice"] == "all"]


def _pivot(summary: list[dict], slices: list[str], measure: str, label=str) -> tuple[list[dict], list[str]]:
    """One row per model, one column per slice (named `label(slice)`): `measure` in %. A model without
    the measure anywhere (no intervals: the baselines' coverage) has no row."""
    rows: dict[str, dict] = {}
    for r in summary:
        if r["slice"] in slices:
            rows.setdefault(r["model"], {"model": r["model"]})[label(r["slice"])] = pct(r[measure])
    columns = [label(s) for s in slices]
    return [r for r in rows.values() if any(r.get(c) is not None for c in columns)], ["model", *columns]


def slice_rows(summary: list[dict], measure: str = "median_ae") -> tuple[list[dict], list[str]]:
    """One row per model, one column per slice (app group, x86->arm, arm->x86): `measure` in %."""
    return _pivot(summary, [s for s in (*GROUPS, *ARCH_SLICES) if any(r["slice"] == s for r in summary)], measure)


def cloud_rows(summary: list[dict], measure: str = "median_ae") -> tuple[list[dict], list[str]]:
    """One row per model, one column per target cloud (`measure` in %); no rows where the targets were
    of one cloud."""
    clouds = sorted({r["slice"] for r in summary if r["slice"].startswith(CLOUD)})
    return _pivot(summary, clouds, measure, lambda s: s[len(CLOUD):])


MEASURES = {"median_ae": "median absolute error %", "p90_ae": "90th percentile absolute error %",
            "coverage": "80% interval coverage %"}


def slice_tables(summary: list[dict], measures=("median_ae", "coverage")) -> list[tuple[str, list[dict], list[str]]]:
    """(title, rows, columns) of each measure by app group and across architectures, then by the
    targets' cloud where they were of several."""
    out = []
    for by, what in ((slice_rows, "by app group and across architectures"), (cloud_rows, "by the targets' cloud")):
        for measure in measures:
            rows, columns = by(summary, measure)
            if rows:
                out.append((f"{MEASURES[measure]} {what}", rows, columns))
    return out


def targets(summary: list[dict], k: int, model: str, on: str | None = None) -> list[tuple[str, bool | None]]:
    """The issue's targets for `model` at this K: (what, met?) with None where there is no figure. Calibrated
    on one architecture (`on`), the folds follow another rule than the one the targets were set on: only
    the comparison with the baselines across architectures is checked."""
    by = {(r["model"], r["slice"]): r for r in summary}
    mine = by.get((model, "all"))
    if mine is None or mine["median_ae"] is None:
        return []
    out: list[tuple[str, bool | None]] = []
    if k >= 3:
        if on is None:
            out += [(f"median error {pct(mine['median_ae'])}% <= 10%", mine["median_ae"] <= 0.10),
                    (f"90th percentile {pct(mine['p90_ae'])}% <= 30%", mine["p90_ae"] <= 0.30),
                    (f"median Spearman {mine['spearman']:.3f} >= 0.95", (mine["spearman"] or 0) >= 0.95)]
        rivals = sorted({m for m, s in by if s == "all" and m != model and by[(m, s)]["kind"] != "model"})
    else:
        if on is None:
            out.append((f"median error {pct(mine['median_ae'])}% <= 15%", mine["median_ae"] <= 0.15))
        rivals = ["geekbench-ratio"]
    slices = (DIRECTIONS[on],) if on is not None else (*TARGET_GROUPS, *(("x86->arm",) if k >= 3 else ()))
    for s in slices:
        me = by.get((model, s))
        for rival in rivals:
            other = by.get((rival, s))
            if me is None or other is None or me["median_ae"] is None or other["median_ae"] is None:
                continue
            out.append((f"{s}: {pct(me['median_ae'])}% < {rival} {pct(other['median_ae'])}%",
                        me["median_ae"] < other["median_ae"]))
    if mine["coverage"] is not None and on is None:
        out.append((f"80% interval covers {pct(mine['coverage'])}% (70-90%)", 0.70 <= mine["coverage"] <= 0.90))
    return out
