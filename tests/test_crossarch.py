"""Cross-node prediction from a few measured node types (registry.crossarch, models similar-runs and
the single-ratio baselines), on a synthetic world where the right answer is known: every node has a
per-core speed, a memory speed and a vCPU count; micro-benchmarks and apps are known mixes of them
plus noise, so a predictor that picks the wrong references or mis-scales fails."""

import csv
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from registry.crossarch import evaluate as cal
from registry.crossarch import report
from registry.crossarch.data import CrossData, single_threaded
from registry.crossarch.project import from_runs
from registry.crossarch.references import GEEKBENCH_SCORE, VCPUS, ReferenceBank, query
from registry.errors import UserError
from registry.io.sparecores.apps import app_family, app_group
from registry.models.base import Matrix, ReferenceSet
from registry.models.plugins import create
from registry.models.similar_runs import (OTHER_THREAD_PRIOR, OTHER_THREAD_PRIORS, SHARPNESS, Choice,
                                          column_quantile, family_codes, reliability_factor)
from conftest import assert_one_line_error, both_backends
from crossarch_synth import FAMILIES, synthetic_nodes

def world(seed=0, nodes_per_family=12, noise=0.01):
    """(CrossData, exponents of each app): cost = core^a * mem^b * (1 / vcpus)^c, log-normal noise."""
    rng = np.random.default_rng(seed)
    nodes = synthetic_nodes(rng, nodes_per_family, [2, 4, 8, 16, 32, 64])
    log_core, log_mem, log_cpu = (np.log(1 / nodes["core"]), np.log(1 / nodes["mem"]), -np.log(nodes["n_cpus"]))

    def cost(a, b, c, sd=noise):
        return np.exp(a * log_core + b * log_mem + c * log_cpu + rng.normal(0, sd, len(nodes)))

    configs = {}
    for i, (a, b) in enumerate([(1, 0), (0, 1), (0.5, 0.5), (0.8, 0.2), (0.2, 0.8), (1, 0.3), (0.3, 1)]):
        configs[f"sc:micro{i}:1t"] = cost(a, b, 0)
        configs[f"sc:micro{i}:all"] = cost(a, b, 1)
    mixes = {"geekbench:alpha:single": (0.9, 0.1, 0), "geekbench:beta:single": (0.6, 0.4, 0),
             "geekbench:gamma:single": (0.3, 0.7, 0), "geekbench:alpha:multi": (0.9, 0.1, 1),
             "geekbench:beta:multi": (0.6, 0.4, 1), "geekbench:gamma:multi": (0.3, 0.7, 0.9),
             "compression:zstd-1:compress:1t": (0.7, 0.3, 0), "compression:zstd-1:compress:all": (0.7, 0.3, 1),
             "compression:lz4-1:compress:1t": (0.4, 0.6, 0), "redis:set:p1": (0.5, 0.5, 0.5)}
    times = pd.DataFrame({app: cost(*abc) for app, abc in mixes.items()}, index=nodes.index)
    table = nodes[["architecture", "cpu_family", "n_cpus"]]
    return CrossData(pd.DataFrame(configs, index=nodes.index), times, table), mixes


def test_app_families_leave_out_related_variants():
    assert app_family("compression:zstd-3:compress:1t") == app_family("compression:zstd-22:decompress:all")
    assert app_family("geekbench:clang:single") == app_family("geekbench:clang:multi") != app_family(
        "geekbench:hdr:single")
    assert app_family("redis:set:p1") == app_family("redis:set:p64")
    assert app_family("myapp") == "myapp"


def test_references_leave_out_the_apps_family_and_add_the_baselines_rows():
    data, _ = world()
    bank = ReferenceBank(data)
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    refs = bank.reference_set(app_family("geekbench:alpha:single"), cal_nodes)
    rows = refs.feature_matrix.rows
    assert "geekbench:alpha:multi" not in rows and "geekbench:beta:single" in rows
    assert VCPUS in rows and GEEKBENCH_SCORE + "single" in rows
    # the score left the app's own workload out: the geometric mean of beta and gamma
    score = refs.ratio_matrix.values[rows.index(GEEKBENCH_SCORE + "single")]
    logs = np.log(data.times[["geekbench:beta:single", "geekbench:gamma:single"]]).mean(axis=1)
    assert np.allclose(score, logs - logs["Zen4-0"])
    q = query("geekbench:alpha:single", data.times["geekbench:alpha:single"], cal_nodes, True)
    assert q.signature["cal.Zen4-0"] == 0.0 and q.base_time_s == data.times.at["Zen4-0", "geekbench:alpha:single"]


@pytest.mark.parametrize("k", [1, 3])
def test_calibration_rule_takes_k_families_and_targets_none_of_them(k):
    data, _ = world()
    app = "compression:zstd-1:compress:1t"
    first, again, other = (cal.calibration_nodes(data, app, k, s) for s in (0, 0, 1))
    assert first == again and len(first) == k and first != other
    assert len({data.family(n) for n in first}) == k
    goal = cal.targets(data, app, first)
    assert goal and not {data.family(n) for n in goal} & {data.family(n) for n in first}
    assert cal.calibration_nodes(data, app, len(FAMILIES) + 1, 0) == []   # not that many families


def test_calibrating_on_one_architecture_makes_every_fold_cross_it():
    """The plain rule rarely draws K ARM nodes (2 folds of 642 at K = 3 on the shared data), so its
    ARM -> x86 figure rests on a handful of folds; --calibrate-on aarch64 draws from ARM alone."""
    data, _ = world()
    apps = ["compression:zstd-1:compress:1t", "geekbench:alpha:multi"]
    for app in apps:
        arm = cal.calibration_nodes(data, app, 2, 0, on="aarch64")
        assert len(arm) == 2 and {data.architecture(n) for n in arm} == {"aarch64"}
        assert cal.calibration_nodes(data, app, 3, 0, on="aarch64") == []     # only two ARM families
    plain = cal.summary(data, cal.run(data, ["similar-runs"], 2, [0, 1], apps=apps))
    result = cal.run(data, ["similar-runs", "geekbench-ratio"], 2, [0, 1], apps=apps, on="aarch64")
    summary = cal.summary(data, result)
    mine = {r["slice"]: r for r in summary if r["model"] == "similar-runs"}
    assert mine["all"]["folds"] == mine["arm->x86"]["folds"] == 4 and "x86->arm" not in mine
    assert not [r for r in plain if r["slice"] == "arm->x86" and r["folds"] == 4]
    checked = report.targets(summary, 2, "similar-runs", "aarch64")
    assert checked and all(what.startswith("arm->x86: ") for what, _ in checked)
    with pytest.raises(UserError, match="--calibrate-on"):
        cal.run(data, ["similar-runs"], 2, [0], apps=apps, on="sparc")


def test_similar_runs_finds_the_app_in_a_known_world_and_beats_the_baselines():
    """With 3 calibration nodes an app that is a mix of core and memory speed (and vCPUs) is found
    among the references: its error is near the noise, far below the single-ratio baselines'."""
    data, _ = world(noise=0.01)
    result = cal.run(data, ["similar-runs", "vcpu-ratio", "best-micro-ratio", "geekbench-ratio"], 3, [0, 1])
    table = {r["model"]: r for r in cal.summary(data, result) if r["slice"] == "all"}
    assert not result.errors
    mine = table["similar-runs"]
    assert mine["median_ae"] < 0.05 and mine["spearman"] > 0.95
    for baseline in ("vcpu-ratio", "geekbench-ratio"):
        assert mine["median_ae"] < table[baseline]["median_ae"]
    # per fold, the oracle over every reference bounds the one over the micro-benchmarks, which bounds
    # best-micro-ratio (one of its candidates, chosen on the calibration nodes, not in hindsight)
    frame = result.predictions.assign(ae=lambda f: (f["predicted_s"] / f["actual_s"] - 1).abs())
    fold = frame.groupby(["model", "app", "seed"])["ae"].median().unstack("model")
    assert (fold["oracle"] <= fold["oracle-micro"] + 1e-12).all()
    assert (fold["oracle-micro"] <= fold["best-micro-ratio"] + 1e-12).all()
    assert (fold["oracle"] < fold["oracle-micro"] - 1e-6).any()     # some app is best told by another app
    assert table["oracle-micro"]["kind"] == "oracle"
    assert 0.5 <= mine["coverage"] <= 1.0
    slices = {r["slice"] for r in cal.summary(data, result)}
    assert {"geekbench-single", "geekbench-multi", "compression", "redis-web"} <= slices
    # coverage by group: the models with intervals, not the baselines and the oracle (points only)
    rows, columns = report.slice_rows(cal.summary(data, result), "coverage")
    assert [r["model"] for r in rows] == ["similar-runs"] and "compression" in columns
    assert all(0 <= rows[0][c] <= 100 for c in columns[1:] if rows[0].get(c) is not None)


def test_the_micro_oracle_has_no_figure_where_no_micro_benchmark_was_measured_on_the_calibration():
    """A fold whose calibration nodes share no micro-benchmark (every reference an app) gets no
    `oracle-micro` prediction (NaN, left out of its figures), where the plain oracle still picks an app."""
    data, _ = world()
    app = "compression:zstd-1:compress:1t"
    calibration = cal.calibration_nodes(data, app, 3, 0)
    refs = ReferenceBank(data).reference_set(app_family(app), calibration)
    micro = refs.feature_matrix.columns.index("meta.micro")
    apps_only = refs.feature_matrix.values[:, micro] < 0.5
    rows = [r for r, k in zip(refs.feature_matrix.rows, apps_only) if k]
    refs = ReferenceSet(refs.base_node,
                        Matrix(rows, refs.feature_matrix.columns, refs.feature_matrix.values[apps_only]),
                        Matrix(rows, refs.ratio_matrix.columns, refs.ratio_matrix.values[apps_only]))
    q = query(app, data.times[app], calibration, True)
    sig = np.array([q.signature[c] for c in refs.feature_matrix.columns if c.startswith("cal.")])
    goal = np.arange(5)
    actual = np.log(data.times[app].to_numpy()[goal] / q.base_time_s)
    assert np.isnan(cal._oracle(refs, sig, goal, actual, micro=True)).all()
    assert np.isfinite(cal._oracle(refs, sig, goal, actual)).all()


def test_figures_split_by_the_targets_cloud_where_they_are_of_several():
    """A cloud the method was never designed on is checked the same way: its targets get a slice of
    their own (and none where every node is of one cloud)."""
    data, _ = world()
    apps = ["compression:zstd-1:compress:1t", "geekbench:alpha:multi"]
    one = cal.summary(data, cal.run(data, ["similar-runs"], 3, [0], apps=apps))
    assert not [r for r in one if r["slice"].startswith(cal.CLOUD)] and report.cloud_rows(one)[0] == []
    other = data.nodes.index.str.endswith(("-0", "-1", "-2"))
    data.nodes["vendor"] = np.where(other, "hcloud", "aws")
    result = cal.run(data, ["similar-runs", "vcpu-ratio"], 3, [0], apps=apps)
    summary = cal.summary(data, result)
    frame = result.predictions[result.predictions["model"] == "similar-runs"]
    hc = frame[frame["node"].isin(data.nodes.index[other])]
    mine = {r["slice"]: r for r in summary if r["model"] == "similar-runs"}
    assert mine["cloud:hcloud"]["predictions"] == len(hc) > 0
    assert mine["cloud:aws"]["predictions"] == len(frame) - len(hc)
    assert mine["cloud:hcloud"]["median_ae"] == pytest.approx((hc["predicted_s"] / hc["actual_s"] - 1).abs().median())
    rows, columns = report.cloud_rows(summary)
    assert columns == ["model", "aws", "hcloud"]
    assert {r["model"] for r in rows} == {"similar-runs", "vcpu-ratio", "oracle", "oracle-micro"}
    titles = [t for t, _, _ in report.slice_tables(summary)]
    assert "median absolute error % by the targets' cloud" in titles


def test_another_kind_of_app_is_shown_by_its_group_but_not_held_to_the_issues_targets():
    data, _ = world()
    data.times["llm:tiny-q4:tg16"] = data.costs["sc:micro1:all"] * 3.0     # memory-bound, like text generation
    result = cal.run(data, ["similar-runs", "geekbench-ratio"], 3, [0],
                     apps=["llm:tiny-q4:tg16", "compression:zstd-1:compress:1t"])
    summary = cal.summary(data, result)
    assert "llm" in report.slice_rows(summary)[1]
    # no other family of its group judges it: said on its predictions, not on a Geekbench workload's
    cal_nodes = cal.calibration_nodes(data, "llm:tiny-q4:tg16", 3, 0)
    bank = ReferenceBank(data)
    said = {app: create("similar-runs").fit(bank.reference_set(app_family(app), cal_nodes)).predict(
                query(app, data.times[app], cal_nodes, single_threaded(app)), list(data.nodes.index[:3]))[0].warnings
            for app in ("llm:tiny-q4:tg16", "geekbench:alpha:multi")}
    assert any("no other app family of its group (llm)" in w for w in said["llm:tiny-q4:tg16"])
    assert not any("no other app family" in w for w in said["geekbench:alpha:multi"])
    checked = [what for what, _ in report.targets(summary, 3, "similar-runs")]
    assert any(w.startswith("compression:") for w in checked) and not any(w.startswith("llm") for w in checked)


def test_vcpu_ratio_is_exact_for_an_app_that_scales_with_vcpus():
    data, _ = world()
    data.times["perfect"] = 100.0 / data.nodes["n_cpus"]
    result = cal.run(data, ["vcpu-ratio"], 1, [0], apps=["perfect"])
    p = result.predictions[result.predictions["model"] == "vcpu-ratio"]
    assert np.allclose(p["predicted_s"], p["actual_s"])


def test_predictions_rows_match_the_csv_contract():
    data, _ = world()
    result = cal.run(data, ["similar-runs"], 3, [0], apps=["redis:set:p1"])
    p = result.predictions
    assert list(p.columns[:8]) == ["model", "app", "node", "calibration", "predicted_s", "actual_s", "low_s",
                                   "high_s"]
    for _, row in p.iterrows():
        assert row["node"] not in row["calibration"].split(";")
        assert row["low_s"] <= row["predicted_s"] <= row["high_s"]


def test_from_runs_ranks_by_time_and_cost_and_warns_across_architectures():
    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    measured = {n: data.times.at[n, app] for n in ("Zen4-0", "IceLake-1")}
    data.prices = pd.Series(1.0 + np.arange(len(data.nodes)) % 5, index=data.nodes.index)
    ranked = from_runs(data, app, measured)
    assert [r.predicted_s for r in ranked] == sorted(r.predicted_s for r in ranked)
    assert not {"Zen4-0", "IceLake-1"} & {r.node for r in ranked}
    arm = [r for r in ranked if r.architecture == "aarch64"]
    assert arm and all(any("predicted from x86_64 runs only" in w for w in r.warnings) for r in arm)
    assert not any(w for r in ranked if r.architecture == "x86_64" for w in r.warnings)
    errors = [abs(r.predicted_s / data.times.at[r.node, app] - 1) for r in ranked]
    assert np.median(errors) < 0.1
    by_cost = from_runs(data, app, measured, objective="cost")
    assert [r.cost for r in by_cost] == sorted(r.cost for r in by_cost)


def test_from_runs_warns_on_a_node_that_sells_shared_vcpus():
    """A node whose vCPUs the vendor shares with other tenants is said to be one (its figures move with
    their load); the others are not, and a node table without the column warns of none."""
    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    measured = {n: data.times.at[n, app] for n in ("Zen4-0", "IceLake-1")}
    quiet = from_runs(data, app, measured)
    data.nodes["shared_vcpus"] = data.nodes.index == "Zen4-2"
    said = {r.node: any("shared vCPUs" in w for w in r.warnings) for r in from_runs(data, app, measured)}
    assert said["Zen4-2"] and sum(said.values()) == 1
    assert not any("shared vCPUs" in w for r in quiet for w in r.warnings)


def test_from_runs_warns_where_an_all_cpu_app_is_extrapolated_far_in_vcpus():
    """Measured on 2- and 4-vCPU nodes, an all-CPU app on a 32- or 64-vCPU node is 8x or more beyond them:
    said per node; a one-CPU app on the same nodes is not (its scaling is not extrapolated)."""
    data, _ = world()
    small = data.nodes[data.nodes["n_cpus"] <= 4]
    on = [small[small["cpu_family"] == fam].index[0] for fam in small["cpu_family"].unique()[:2]]
    for app, single in (("compression:zstd-1:compress:all", False), ("compression:lz4-1:compress:1t", True)):
        ranked = from_runs(data, app, {n: data.times.at[n, app] for n in on})
        top = max(data.nodes.loc[on, "n_cpus"])
        far = [r for r in ranked if data.nodes.at[r.node, "n_cpus"] > 7.4 * top]
        assert far
        said = [any("the app's scaling extrapolated" in w for w in r.warnings) for r in ranked]
        assert said == [(not single) and data.nodes.at[r.node, "n_cpus"] > 7.4 * top for r in ranked]


def test_a_node_without_the_apps_kind_of_references_is_not_predicted():
    """A node where none of the one-CPU references was measured (only all-CPU ones, as on some imported
    servers without Geekbench or single-thread runs) is left out, not predicted by all-CPU scaling."""
    data, _ = world()
    app, bare = "compression:lz4-1:compress:1t", "Zen3-3"
    data.costs.loc[bare, [c for c in data.costs.columns if c.endswith(":1t")]] = np.nan
    data.times.loc[bare, [a for a in data.times.columns if a.endswith((":1t", ":single"))]] = np.nan
    measured = {n: data.times.at[n, app] for n in ("Zen4-0", "IceLake-1")}
    ranked = {r.node for r in from_runs(data, app, measured)}
    assert bare not in ranked and "Zen3-4" in ranked
    assert len(ranked) == len(data.nodes) - 3


def test_from_runs_without_a_node_of_the_suite_is_a_user_error():
    data, _ = world()
    with pytest.raises(Exception, match="none of the nodes it was measured on"):
        from_runs(data, "x", {"elsewhere": 3.0})


def test_similar_runs_saved_and_loaded_predicts_the_same():
    data, _ = world()
    bank = ReferenceBank(data)
    cal_nodes = ["Zen4-0", "Graviton3-1"]
    model = create("similar-runs").fit(bank.reference_set("redis", cal_nodes))
    q = query("redis:set:p1", data.times["redis:set:p1"], cal_nodes, False)
    back = type(model).from_params(json.loads(json.dumps(model.params())))
    a, b = model.predict(q, ["Zen3-3", "Graviton4-2"]), back.predict(q, ["Zen3-3", "Graviton4-2"])
    flat = lambda preds: [v for p in preds for v in (p.predicted_s, p.low_s, p.high_s)]  # noqa: E731
    assert flat(a) == pytest.approx(flat(b))


def test_similar_runs_track_record_down_weights_an_erratic_reference():
    """A micro-benchmark that is erratic from node to node predicts the reference apps of other families
    badly: its track record (mean error, per app family, then over families) is far worse than a clean
    config's, so the prior all but drops it; the track record that chooses an inner target's references
    leaves the target's own family out."""
    data, _ = world()
    rng = np.random.default_rng(7)
    data.costs["sc:erratic:1t"] = np.exp(rng.normal(0, 0.5, len(data.nodes)))
    refs = ReferenceBank(data).reference_set(app_family("compression:lz4-1:compress:1t"),
                                             ["Zen4-0", "Graviton3-1", "IceLake-2"])
    model = create("similar-runs").fit(refs)
    E, E_minus, groups = model._track_records(True)
    rows = model.fitted["refs"]
    erratic, clean = rows.index("sc:erratic:1t"), rows.index("sc:micro2:1t")
    assert E[erratic] > 2 * E[clean]
    factor = reliability_factor(E, 0.02)
    assert factor.max() == 1.0 and factor[erratic] < 1e-3 * factor[clean]
    # leaving one family out: the mean over the other families' means
    families = family_codes(rows)
    targets = model.inner_targets(True)
    gb = families[rows.index("geekbench:alpha:single")]
    g = int(np.searchsorted(groups, gb))
    others = [t for t in targets if families[t] not in (gb, families[clean])]
    L = model.fitted["L"][:, model.scored_nodes()]
    F = model.fitted["F"].mean(axis=1)
    per_family = {}
    for t in others:
        per_family.setdefault(families[t], []).append(
            np.nanmean(np.abs(L[clean] + F[t] - F[clean] - L[t])))
    assert E_minus[clean, g] == pytest.approx(np.mean([np.mean(v) for v in per_family.values()]))
    tol, choice, _ = model._choose(True)
    assert choice.sharpness in (None, *SHARPNESS) and choice.other in (OTHER_THREAD_PRIOR, *OTHER_THREAD_PRIORS)


def test_similar_runs_chooses_per_query_among_the_settings_the_inner_cv_tried():
    """With 3 calibration nodes the setting is the one that did best on the reference apps whose pattern
    resembles the query's (one of those the inner cross-validation tried); with 1 node, where every
    pattern is alike, the thread class's choice."""
    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    for cal_nodes in (["Zen4-0", "Graviton3-1", "IceLake-2"], ["Zen4-0"]):
        model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
        explained = model.predict(query(app, data.times[app], cal_nodes, True), ["Zen3-3"])[0].explanation
        tol, choice, _ = model._choose(True, app_group(app))      # the scope predict uses
        setting = (explained["tolerance"], Choice(explained["app_weight"], explained["sharpness"], explained["other"]))
        tried = [(t, c) for t, c, *_ in model.fitted["tried"][model.scope(True, app_group(app))]]
        assert setting in tried and len(set(tried)) > 1
        if len(cal_nodes) == 1:
            assert setting == (tol, choice)
    # the query exactly like one reference app of a family of its own: its best setting wins
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    model._choose(True)
    rows = model.fitted["refs"]
    twin = rows.index("compression:zstd-1:compress:1t")
    targets = list(model.inner_targets(True))
    tried = model.fitted["tried"][True]
    model.tolerance = None
    q = model.fitted["F"][twin]
    local_tol, local, _ = model._local_choice(True, q)
    errors = {(t, c): per[targets.index(twin)] for t, c, per, *_ in tried}
    # within half the world's noise (0.01) of the twin's best setting; the worst ones err 2-3x that
    assert errors[(local_tol, local)] <= min(errors.values()) + 0.005 < max(errors.values())


def test_similar_runs_interval_widens_for_an_app_unlike_its_references():
    """Normalised conformal: the same app with one calibration run 0.6 log units off is unlike every
    reference (its misfit several times the fitting app's) and gets a wider interval on every node; with
    one calibration node nothing can be unlike: misfit 0, the interval still not a point."""
    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    fits = query(app, data.times[app], cal_nodes, True)
    off = dataclasses.replace(fits, signature={**fits.signature,
                                               "cal.IceLake-2": fits.signature["cal.IceLake-2"] + 0.6})
    targets = [n for n in data.times.index if n not in cal_nodes]
    close, far = model.predict(fits, targets), model.predict(off, targets)
    assert far[0].explanation["misfit"] > 2 * close[0].explanation["misfit"] > 0
    for a, b in zip(close, far):
        assert np.log(b.high_s / b.low_s) > 1.5 * np.log(a.high_s / a.low_s)
    one = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes[:1]))
    single = one.predict(query(app, data.times[app], cal_nodes[:1], True), targets)
    assert single[0].explanation["misfit"] == 0.0 and single[0].high_s > single[0].low_s


def test_similar_runs_interval_of_an_unscored_node_pools_its_architecture(monkeypatch):
    """A node without errors of its own (fewer than 10 inner targets measured on it) takes the quantile
    pooled over the scored nodes of its own architecture, so that where ARM nodes' errors are larger
    (x86 calibration nodes) an unscored ARM node's interval is wider than an unscored x86 node's."""
    monkeypatch.setattr("registry.models.similar_runs.INNER_NODES", 12)
    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    cal_nodes = ["Zen4-0", "Zen3-1", "IceLake-2"]
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    nodes = model.fitted["nodes"]
    scored = model.scored_nodes()
    arm = data.nodes.loc[nodes, "architecture"].to_numpy() == "aarch64"
    assert arm[scored].any() and (~arm[scored]).any()
    err = np.full((12, len(scored)), 0.05)
    err[:, arm[scored]] = 0.2
    widths = model._widths(err, np.zeros(12), scored)
    unscored = np.setdiff1d(np.arange(len(nodes)), scored)
    on_arm, on_x86 = widths.at(0.0)[unscored[arm[unscored]]], widths.at(0.0)[unscored[~arm[unscored]]]
    assert np.allclose(on_arm, 0.2) and np.allclose(on_x86, 0.05)


def test_similar_runs_interval_of_a_node_whose_apps_stray_is_its_own(monkeypatch):
    """The inner cross-validation chooses the settings on INNER_NODES nodes, but the interval's quantile
    comes from its errors on every node: a node outside that subset whose apps all stray from what its
    references say (a batch of runs unlike the rest) gets a wider interval than its siblings, not their
    pooled one."""
    monkeypatch.setattr("registry.models.similar_runs.INNER_NODES", 12)
    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    bank = ReferenceBank(data)
    model = create("similar-runs").fit(bank.reference_set(app_family(app), cal_nodes))
    nodes = model.fitted["nodes"]
    scored = {nodes[i] for i in model.scored_nodes()}
    odd = next(n for n in nodes if n not in scored and n not in cal_nodes and data.architecture(n) == "x86_64")
    data.times.loc[odd] *= np.exp(np.random.default_rng(3).normal(0, 0.4, data.times.shape[1]))
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    targets = [n for n in nodes if n not in cal_nodes and data.architecture(n) == "x86_64"]
    half = {p.node: np.log(p.high_s / p.predicted_s)
            for p in model.predict(query(app, data.times[app], cal_nodes, True), targets)}
    assert half[odd] > 2 * np.median([h for n, h in half.items() if n != odd])


def test_column_quantile_is_the_split_conformal_rank():
    """Of n values the ceil(0.8 (n + 1))-th smallest covers a new one 80% of the time; the ceil(0.8 n)-th
    only n / (n + 1) of that (75% for the 15 Geekbench workloads that judge one)."""
    x = np.arange(1.0, 16.0)[:, None].repeat(2, axis=1)
    x[10:, 1] = np.nan                                  # the second column: 10 values
    assert column_quantile(x, 0.8).tolist() == [13.0, 9.0]
    assert column_quantile(x[:4], 0.8).tolist() == [4.0, 4.0]      # past n: the largest
    assert np.isnan(column_quantile(x, 0.8, at_least=11)[1])


def test_similar_runs_interval_of_an_unscored_node_pools_nodes_of_its_size(monkeypatch):
    """An unscored node takes the quantile of the scored nodes of its architecture and of its size beside
    the calibration nodes (`_size_bins`): where errors grow with the extrapolation in vCPUs, a node far
    larger than every calibration node gets the far-larger nodes' width, one within their range theirs."""
    monkeypatch.setattr("registry.models.similar_runs.INNER_NODES", 30)
    data, _ = world()
    small = data.nodes[data.nodes["n_cpus"] <= 4]
    cal_nodes = [small[small["cpu_family"] == fam].index[0] for fam in small["cpu_family"].unique()[:3]]
    app = "compression:zstd-1:compress:all"
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    bins, scored = model._size_bins(), model.scored_nodes()
    assert {0, 3} <= set(bins[scored]) or {1, 3} <= set(bins[scored])
    err = np.where(bins[scored] >= 2, 0.3, 0.05)[None, :].repeat(12, axis=0)
    per_node = model._widths(err, np.zeros(12), scored).at(0.0)
    arch = model._architectures()
    pooled = {(arch[j], bins[j]) for j in scored}
    checked = [i for i in np.setdiff1d(np.arange(len(bins)), scored) if (arch[i], bins[i]) in pooled]
    assert {bins[i] >= 2 for i in checked} == {True, False}
    for i in checked:
        assert per_node[i] == pytest.approx(0.3 if bins[i] >= 2 else 0.05)


def test_similar_runs_interval_of_a_small_group_is_no_narrower_than_its_thread_class():
    """The static web server's references are judged on Redis alone (its app group has one other family).
    Here Redis moves exactly like a micro-benchmark, so its residuals alone would give a near-zero
    interval; the static web server's is the wider of that group's and the all-CPU class's at every
    node (one family's residuals are too few to calibrate on)."""
    data, _ = world()
    app = "static_web:1k:c1"
    data.times["redis:set:p1"] = data.costs["sc:micro2:all"] * 5.0
    data.times[app] = data.times["geekbench:beta:multi"] * 3.0
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    assert model.scope(False, "redis-web") == (False, "redis-web")
    targets = [n for n in data.times.index if n not in cal_nodes]
    got = model.predict(query(app, data.times[app], cal_nodes, False), targets)
    unlike = got[0].explanation["misfit"]
    where = {n: i for i, n in enumerate(model.fitted["nodes"])}
    idx = [where[n] for n in targets]
    half = np.array([np.log(p.high_s / p.predicted_s) for p in got])
    tol, choice, _ = model._local_choice(False, np.array([query(app, data.times[app], cal_nodes, False).signature[c]
                                                          for c in model.fitted["columns"]]), "redis-web")
    own = model._node_widths(False, "redis-web", tol, choice).at(unlike)[idx]
    wider = model._choose(False)[2].at(unlike)[idx]
    assert np.allclose(half, np.maximum(own, wider))
    assert (half > own * 1.01).any()


def test_the_offset_follows_the_calibration_node_most_like_the_target():
    """Where the app's gap to a reference differs between the calibration nodes, a node takes the gap of
    the calibration nodes it resembles (the references' relative standing on it), not their mean."""
    from registry.models.similar_runs import local_weights, node_distances, project

    # two references over three calibration nodes and a fourth node that is the third, 2x slower
    L = np.array([[0.0, 0.4, -0.3, -0.3 + np.log(2)], [0.0, -0.2, 0.5, 0.5 + np.log(2)]])
    F = L[:, :3]
    d = node_distances(F, L)
    assert d[2, 3] == pytest.approx(0.0, abs=1e-12) and d[0, 3] > 0.1 and d[1, 3] > 0.1
    local = local_weights(d, 0.1)
    assert np.allclose(local.sum(axis=0), 1.0) and local[2, 3] > 0.95 and local[0, 0] > 0.95
    q = F[:1] + np.array([[0.0, 0.0, 0.3]])        # like reference 0, but 0.3 slower on the third node
    prior = np.array([[1.0, 1e-9]])
    plain = project(F, L, q, prior, 1.0).log[0]
    near = project(F, L, q, prior, 1.0, local).log[0]
    assert plain[3] == pytest.approx(L[0, 3] + 0.1, abs=1e-6)      # the mean gap, 0.3 / 3
    assert near[3] == pytest.approx(L[0, 3] + 0.3, abs=0.02)       # the third node's gap
    # in the model: with K = 3 the offsets are local, with one calibration node there is one gap
    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    for cal_nodes, local_offsets in ((["Zen4-0", "Graviton3-1", "IceLake-2"], True), (["Zen4-0"], False)):
        model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
        assert (model._local(True) is not None) == local_offsets


def test_similar_runs_interval_widens_where_a_node_measured_few_of_the_weighted_references():
    """A node that measured only part of the references carrying the weight rests on fewer of them: its
    interval widens by 1 / sqrt(that share); the other nodes' intervals do not move."""
    from registry.models.similar_runs import pattern_weights, project

    data, _ = world()
    app = "compression:lz4-1:compress:1t"
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    q = query(app, data.times[app], cal_nodes, True)
    targets = [n for n in data.times.index if n not in cal_nodes]
    before = {p.node: np.log(p.high_s / p.low_s) for p in model.predict(q, targets)}
    f = model.fitted
    x = f["nodes"].index("Zen3-5")
    pattern = np.array([[q.signature[c] for c in f["columns"]]])
    tol, choice, _ = model._local_choice(True, pattern[0], "compression")
    prior = model._prior(True, choice, "compression")[None, :]
    w = pattern_weights(f["F"], pattern, prior, tol)[0][0]
    f["L"][np.argmax(w), x] = np.nan         # the reference carrying the most weight not measured there
    after = {p.node: np.log(p.high_s / p.low_s) for p in model.predict(q, targets)}
    share = project(f["F"], f["L"], pattern, prior, tol).share[0, x]
    assert share == pytest.approx(1 - w.max() / w.sum()) and 0.05 < share < 0.9
    assert after["Zen3-5"] == pytest.approx(before["Zen3-5"] / np.sqrt(share))
    assert all(after[n] == pytest.approx(before[n]) for n in targets if n != "Zen3-5")


def test_similar_runs_judges_references_on_the_querys_app_group():
    """Geekbench workloads scale with core speed, the (more numerous) compression algorithms with memory
    speed. Across the thread class the memory-like reference has the better track record; on the other
    Geekbench workloads, the core-like one. A Geekbench query at K = 1 (where the prior alone decides)
    is judged on its group and predicted near the noise; the same pattern under a name of no group
    falls back to the class's scope and is far off."""
    rng = np.random.default_rng(3)
    nodes = synthetic_nodes(rng, 10, [2, 8, 32])
    core, mem = np.log(1 / nodes["core"]), np.log(1 / nodes["mem"])
    noisy = lambda x: np.exp(x + rng.normal(0, 0.01, len(nodes)))  # noqa: E731
    configs = {"sc:core:1t": noisy(core), "sc:mem:1t": noisy(mem), "sc:core:all": noisy(core - np.log(nodes["n_cpus"]))}
    times = {f"geekbench:{w}:single": noisy(core) for w in ("alpha", "beta", "gamma", "delta", "eps")}
    times |= {f"compression:{a}-1:compress:1t": noisy(mem) for a in ("zstd", "lz4", "brotli", "gzip", "bzip2",
                                                                     "xz", "zpaq", "lzma")}
    data = CrossData(pd.DataFrame(configs, index=nodes.index), pd.DataFrame(times, index=nodes.index),
                     nodes[["architecture", "cpu_family", "n_cpus"]])
    app, cal_nodes = "geekbench:alpha:single", ["Zen4-0"]
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    rows = model.fitted["refs"]
    c, m = rows.index("sc:core:1t"), rows.index("sc:mem:1t")
    E_class, E_group = model._track_records(True)[0], model._track_records(True, "geekbench-single")[0]
    assert E_class[m] < E_class[c] and E_group[c] < E_group[m]
    assert model.scope(True, "geekbench-single") == (True, "geekbench-single")
    assert model.scope(True, "compression") == (True, "compression")
    assert model.scope(True, "redis-web") is True     # no app of the group: the class
    goal = cal.targets(data, app, cal_nodes)
    actual = data.times.loc[goal, app].to_numpy()
    q = query(app, data.times[app], cal_nodes, True)

    def error(name):
        preds = model.predict(type(q)(name, q.signature, q.base_time_s), goal)
        return np.median(np.abs(np.array([p.predicted_s for p in preds]) / actual - 1))

    assert error(app) < 0.05 and error("mine:app:single") > 2 * error(app)
    # a group of one other family (lz4's: zstd) chooses the settings on it, without a track record
    small, _ = world()
    lz4 = create("similar-runs").fit(ReferenceBank(small).reference_set(
        app_family("compression:lz4-1:compress:1t"), ["Zen4-0", "Graviton3-1", "IceLake-2"]))
    assert lz4.scope(True, "compression") == (True, "compression")
    assert [lz4.fitted["refs"][i] for i in lz4.inner_targets(True, "compression")] == ["compression:zstd-1:compress:1t"]
    assert lz4._choose(True, "compression")[1].sharpness is None


def test_a_node_the_favoured_references_miss_gets_the_plain_priors_prediction():
    """A sharp track record puts the weight on a few references; on a node where none of those was
    measured the plain prior's prediction serves (before: no prediction, the weight-share rule)."""
    data, _ = world()
    app, cal_nodes, bare = "compression:lz4-1:compress:1t", ["Zen4-0", "Graviton3-1", "IceLake-2"], "Zen3-3"
    model = create("similar-runs").fit(ReferenceBank(data).reference_set(app_family(app), cal_nodes))
    key = model.scope(True, "compression")   # the query's scope: its app group
    tol, plain, half = model._choose(True, "compression")
    sharp = plain._replace(sharpness=0.001)
    favoured = reliability_factor(model._track_records(True, "compression")[0], 0.001) > 1e-6
    column = model.fitted["nodes"].index(bare)
    model.fitted["L"][favoured, column] = np.nan
    model.tolerance = tol   # one setting: the per-query choice keeps it
    q = query(app, data.times[app], cal_nodes, True)
    model.fitted["choice"][key] = (tol, sharp, half)
    got = model.predict(q, [bare, "Zen3-4"])
    model.fitted["choice"][key] = (tol, Choice(plain.app_weight), half)
    want = model.predict(q, [bare])
    assert np.isfinite(got[0].predicted_s) and got[0].predicted_s == pytest.approx(want[0].predicted_s)
    assert got[0].explanation["sharpness"] == 0.001 and np.isfinite(got[1].predicted_s)


# ------------------------------------------------------------------------ through the CLI and a registry


def _import_world(cli, db_url, root):
    """Synthetic Spare Cores servers of several CPU families and speeds, imported."""
    from sparecores_synth import Server, write_server

    specs = [("AuthenticAMD", "AMD EPYC 9R14", 25, 17, "x86_64"), ("AuthenticAMD", "AMD EPYC 7R13", 25, 1, "x86_64"),
             ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8375C", 6, 106, "x86_64"),
             ("ARM", "Neoverse-V1", None, 1, "aarch64")]
    k = 0
    for vendor_id, model_name, family, model, arch in specs:
        for size, vcpus in (("large", 2), ("xlarge", 4), ("2xlarge", 8)):
            k += 1
            write_server(root, Server(name=f"t{k}.{size}", vcpus=vcpus, arch=arch, vendor_id=vendor_id,
                                      model_name=model_name, family=family, model=model,
                                      speed=0.7 + 0.1 * k))
    (root / "COMMIT").write_text("abcd1234\n")
    out = cli("--db", db_url, "import", "sparecores", str(root), "--workers", "1")
    assert out.code == 0, out.err


@both_backends
def test_cli_evaluate_calibrate_and_match_from_runs(cli, db_url, tmp_path):
    _import_world(cli, db_url, tmp_path / "clone")
    out = cli("--db", db_url, "evaluate", "--calibrate", "2", "--seeds", "0-1", "--json",
              "--predictions", str(tmp_path / "p.csv"))
    assert out.code == 0, out.err
    report = json.loads(out.out)
    models = {r["model"] for r in report["summary"]}
    assert {"similar-runs", "vcpu-ratio", "geekbench-ratio", "best-micro-ratio", "oracle"} <= models
    assert report["seeds"] == [0, 1]
    with open(tmp_path / "p.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and list(rows[0])[:8] == ["model", "app", "node", "calibration", "predicted_s", "actual_s",
                                          "low_s", "high_s"]
    assert all(len(r["calibration"].split(";")) == 2 and r["node"] not in r["calibration"] for r in rows)
    match = cli("--db", db_url, "match", "geekbench:clang:single", "--from-runs", "--runs-on",
                "aws:t1.large", "--json")
    assert match.code == 0, match.err
    ranked = json.loads(match.out)
    assert ranked["measured_on"] == ["aws:t1.large"] and len(ranked["nodes"]) == 11
    times = [n["predicted_s"] for n in ranked["nodes"]]
    assert times == sorted(times)
    arm = [n for n in ranked["nodes"] if n["architecture"] == "aarch64"]
    assert arm and all("predicted from x86_64 runs only" in " ".join(n["warnings"]) for n in arm)
    if db_url.startswith("duckdb:///"):   # the file by its path is read without SQLAlchemy: the same answer
        by_path = cli("--db", db_url.removeprefix("duckdb:///"), "match", "geekbench:clang:single", "--from-runs",
                      "--runs-on", "aws:t1.large", "--json")
        assert by_path.out == match.out


def test_cli_match_from_runs_warns_once_when_the_runs_fit_no_reference(cli, db_url, tmp_path):
    """An app whose three runs move like a reference app is predicted without a word; the same runs with
    one of them 0.6 log units off fit no reference: one warning below the table (not one per row) and
    wider intervals."""
    _import_world(cli, db_url, tmp_path / "clone")
    nodes = ["aws:t1.large", "aws:t4.large", "aws:t7.large"]
    like = json.loads(cli("--db", db_url, "sql", "--format", "json",
                          "SELECT n.name AS node, median(r.time_s) AS t FROM runs r JOIN apps a USING (app_id) "
                          "JOIN nodes n USING (node_id) WHERE a.name = 'compression:zstd-3:compress:1t' "
                          "GROUP BY n.name").out)
    times = {row["node"]: row["t"] for row in like}
    for app, off in (("mine:close", 1.0), ("mine:loose", np.exp(0.6))):
        for node in nodes:
            t = 2 * times[node] * (off if node == nodes[1] else 1.0)
            assert cli("--db", db_url, "runs", "add", app, node, "--threads", "1", "--time", str(t), "--new").code == 0
    widths = {}
    for app in ("mine:close", "mine:loose"):
        out = cli("--db", db_url, "match", app, "--from-runs", "--runs-on", ",".join(nodes))
        assert out.code == 0, out.err
        said = out.err.count("fit no reference closely")
        assert said == (app == "mine:loose") and "fit no reference" not in out.out
        ranked = json.loads(cli("--db", db_url, "match", app, "--from-runs", "--runs-on", ",".join(nodes),
                                "--json").out)
        assert len(ranked["warnings"]) == (app == "mine:loose")
        widths[app] = np.median([np.log(n["high_s"] / n["low_s"]) for n in ranked["nodes"]])
    assert widths["mine:loose"] > 1.5 * widths["mine:close"]


def test_app_runs_of_unknown_thread_count_are_not_one_thread_runs(cli, db_url, tmp_path):
    """Imported all-CPU results have no thread count (NULL): `match --from-runs` must take them as
    all-CPU, as `evaluate` does by the name; only runs that say one thread make an app one-thread."""
    from registry.crossarch.data import app_runs
    from registry.db import open_registry

    _import_world(cli, db_url, tmp_path / "clone")
    assert cli("--db", db_url, "runs", "add", "mine:serial", "aws:t1.large", "--threads", "1", "--time", "2",
               "--new").code == 0
    reg = open_registry(db_url, readonly=True)
    try:
        assert app_runs(reg, "geekbench:clang:multi")[1] is False
        assert app_runs(reg, "redis:set:p1")[1] is False
        assert app_runs(reg, "geekbench:clang:single")[1] is True
        assert app_runs(reg, "mine:serial")[1] is True
    finally:
        reg.close()


def test_cli_errors(cli, db_url, tmp_path):
    assert_one_line_error(cli("--db", db_url, "evaluate", "--calibrate", "3", "--seeds", "x"), "--seeds")
    assert_one_line_error(cli("--db", db_url, "evaluate", "--seed", "1"), "--calibrate")
    assert_one_line_error(cli("--db", db_url, "evaluate", "--calibrate", "3", "--split", "size"), "--split")
    assert_one_line_error(cli("--db", db_url, "evaluate", "--calibrate", "3"), "there is no registry")
    assert cli("--db", db_url, "init").code == 0
    assert_one_line_error(cli("--db", db_url, "evaluate", "--calibrate", "3"), "no node has a profile")
    _import_world(cli, db_url, tmp_path / "clone")
    assert_one_line_error(cli("--db", db_url, "match", "nosuchapp", "--from-runs"), "no measured runs")
    assert_one_line_error(cli("--db", db_url, "match", "geekbench:clang:single", "--from-runs", "--runs-on",
                              "aws:nope"), "no measured run on aws:nope")
    assert_one_line_error(cli("--db", db_url, "evaluate", "--calibrate", "2", "--models", "nope"), "--models")
    assert_one_line_error(cli("--db", db_url, "evaluate", "--calibrate-on", "aarch64"), "--calibrate")
    assert_one_line_error(cli("--db", db_url, "evaluate", "--calibrate", "1", "--calibrate-on", "sparc"),
                          "--calibrate-on")
    out = cli("--db", db_url, "evaluate", "--calibrate", "1", "--calibrate-on", "aarch64", "--seeds", "0",
              "--models", "similar-runs,geekbench-ratio", "--json", "--predictions", str(tmp_path / "arm.csv"))
    assert out.code == 0, out.err
    assert json.loads(out.out)["calibrate_on"] == "aarch64"
    with open(tmp_path / "arm.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {r["calibration"] for r in rows} <= {"aws:t10.large", "aws:t11.xlarge", "aws:t12.2xlarge"}
