"""`nodereg evaluate`: leave-one-app-out without peeking, the metrics, the noise floor, the CLI."""

import csv
import json

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends
from lumos_synth import BASE, VMS, make_dataset

from registry import evaluate as ev
from registry.db import open_registry
from registry.db.write import insert_rows
from registry.errors import UserError
from registry.io.lumos import import_lumos
from registry.models.similarity import SimilarityModel
from registry.models.baselines import MedianRatioBaseline
from registry.models.forest import ForestModel


@pytest.fixture(scope="module")
def synth_registry(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval")
    url = f"duckdb:///{tmp / 'r.duckdb'}"
    reg = open_registry(url)
    import_lumos(reg, make_dataset(tmp / "synth", n_apps=12))
    reg.close()
    return url


def _data(url, base=BASE):
    reg = open_registry(url, readonly=True)
    try:
        return ev.load(reg, base)
    finally:
        reg.close()


def test_load_builds_the_leave_one_out_tables(synth_registry):
    data = _data(synth_registry)
    assert data.base_node == f"synth/{BASE}"
    assert len(data.apps) == 13                                  # 12 + the Hive one
    assert set(data.actual_s.columns) == {f"synth/{v}" for v in VMS if v != BASE}
    assert "sar.cpu_sat_frac" in data.features.columns and "meta.framework_hive" in data.features.columns
    refs = data.references(without=data.apps[0])
    assert data.apps[0] not in refs.features.index and len(refs.features) == 12
    assert refs.feature_weights == {}   # the similarity model brings its own
    # ratios are ln(median on node / median on base)
    app, node = data.apps[1], "synth/c6.large"
    runs = data.runs[(data.runs.app == app)]
    expected = np.log(runs[runs.node == node].time_s.median() / runs[runs.node == data.base_node].time_s.median())
    assert refs.log_ratio.at[app, node] == pytest.approx(expected)
    assert data.node_features.loc["synth/g6.2xlarge", "n_cpus"] == 8


def test_similarity_beats_ignoring_the_signature(synth_registry):
    data = _data(synth_registry)
    sim = ev.evaluate_model(data, SimilarityModel, "similarity")
    flat = ev.evaluate_model(data, MedianRatioBaseline, "median-ratio", "baseline")
    assert sim.error is None and flat.error is None
    assert sim.metrics["cells"] == len(data.apps) * 3
    assert sim.metrics["mape"] < 0.6 * flat.metrics["mape"]
    assert sim.metrics["regret"] <= flat.metrics["regret"]


@pytest.mark.parametrize("make", [SimilarityModel, lambda: ForestModel(n_estimators=20)], ids=["similarity", "forest"])
def test_no_peeking_at_the_held_out_runs(synth_registry, tmp_path, make):
    """Doubling an app's runs on the other nodes changes its truth and the others' answers, never its own."""
    url = f"duckdb:///{tmp_path / 'copy.duckdb'}"
    reg = open_registry(url)
    src = open_registry(synth_registry, readonly=True)
    held = "spark_work5_tiny"
    with src.connect() as a, reg.begin() as b:
        for table in ("nodes", "apps", "runs", "traces", "phases", "signatures"):
            insert_rows(b, table, pd.read_sql(sa.text(f"SELECT * FROM {table}"), a))
    src.close()
    reg.close()
    before = ev.evaluate_model(_data(url), make, "m").predictions.set_index(["app", "node"])
    reg = open_registry(url)
    with reg.begin() as conn:
        conn.execute(sa.text("""UPDATE runs SET time_s = 2 * time_s WHERE app_id = (SELECT app_id FROM apps
                                WHERE name = :app) AND node_id <> (SELECT node_id FROM nodes WHERE name = :base)"""),
                     {"app": held, "base": f"synth/{BASE}"})
    reg.close()
    after = ev.evaluate_model(_data(url), make, "m").predictions.set_index(["app", "node"])
    own_before, own_after = before.loc[held], after.loc[held]
    np.testing.assert_allclose(own_after["predicted_s"], own_before["predicted_s"])
    np.testing.assert_allclose(own_after["actual_s"], 2 * own_before["actual_s"])
    others = before.index.get_level_values("app") != held
    assert not np.allclose(after["predicted_s"][others], before["predicted_s"][others])


class _Failing(MedianRatioBaseline):
    raises: Exception

    def predict(self, query, nodes):
        raise self.raises


@pytest.mark.parametrize("exc", [UserError("too few references"), ValueError("Input contains NaN"),
                                 np.linalg.LinAlgError("Singular matrix")], ids=["user", "value", "linalg"])
def test_a_model_that_cannot_serve_the_data_is_reported(synth_registry, exc):
    failing = type("Failing", (_Failing,), {"raises": exc})
    result = ev.evaluate_model(_data(synth_registry), failing, "failing")
    # a UserError's message is the reason in words; another error keeps its type's name
    said = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
    assert result.error == said, result.error
    assert result.metrics["cells"] == 0


@pytest.mark.parametrize("exc", [TypeError("unsupported operand"), AttributeError("no attribute 'x'"),
                                 KeyError("feature")], ids=["type", "attribute", "key"])
def test_a_bug_in_a_model_surfaces(synth_registry, exc):
    failing = type("Failing", (_Failing,), {"raises": exc})
    with pytest.raises(type(exc)):
        ev.evaluate_model(_data(synth_registry), failing, "failing")


def test_score_by_hand():
    p = pd.DataFrame({"app": ["a", "a", "b", "b"], "node": ["n1", "n2", "n1", "n2"],
                      "predicted_s": [10.0, 12.0, 20.0, 15.0], "actual_s": [8.0, 12.0, 20.0, 25.0]})
    m = ev.score(p)
    apes = [0.25, 0.0, 0.0, 0.4]
    assert m["mape"] == pytest.approx(np.mean(apes))
    assert m["median_ape"] == pytest.approx(np.median(apes))
    # a: predicted fastest n1 (10 < 12), truly fastest n1 (8): top-1, no regret
    # b: predicted fastest n2 (15), truly n1 (20 < 25): regret 25/20 - 1
    assert m["top1"] == pytest.approx(0.5)
    assert m["regret"] == pytest.approx((0 + 0.25) / 2)
    assert ev.score(p.iloc[0:0])["mape"] is None
    assert m["coverage"] is None                                   # no intervals given
    banded = p.assign(low_s=p.predicted_s * 0.9, high_s=p.predicted_s * 1.1)
    assert ev.score(banded)["coverage"] == pytest.approx(0.5)      # 12 and 20 inside, 8 and 25 outside


def test_noise_floor_by_hand():
    runs = pd.DataFrame({"app": ["a"] * 3 + ["b"] * 2 + ["c"], "node": ["n"] * 6,
                         "time_s": [10.0, 11.0, 12.0, 20.0, 22.0, 5.0]})
    f = ev.noise_floor(runs)
    errs = [abs(10 - 11.5) / 11.5, abs(11 - 11) / 11, abs(12 - 10.5) / 10.5, 2 / 22, 2 / 20]
    assert f["mape"] == pytest.approx(np.mean(errs))
    assert f["runs"] == 5 and f["cells"] == 2


def test_servable_models_and_the_base_node(synth_registry):
    data = _data(synth_registry)
    names, skipped = ev.servable_models(data)
    assert "similarity" in names
    assert any(line.startswith("corredor:") and "streams" in line for line in skipped)
    reg = open_registry(synth_registry, readonly=True)
    with reg.connect() as conn:
        assert ev.resolve_node(conn, "g6.xlarge")[1] == f"synth/{BASE}"
        with pytest.raises(UserError, match="no node"):
            ev.resolve_node(conn, "nope")
    reg.close()


def test_cli_evaluate(cli, synth_registry, tmp_path):
    out_csv = tmp_path / "pred.csv"
    result = cli("--db", synth_registry, "evaluate", "--base", BASE, "--models", "similarity,median-ratio",
                 "--json", "--predictions", str(out_csv))
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["base"] == f"synth/{BASE}" and report["apps"] == 13
    by_name = {m["model"]: m for m in report["models"]}
    assert set(by_name) == {"similarity", "median-ratio"}
    assert by_name["similarity"]["mape_pct"] < by_name["median-ratio"]["mape_pct"]
    assert 0 < report["noise_floor"]["mape_pct"] < 5
    with out_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["model", "app", "node", "predicted_s", "actual_s", "fold"]
    assert len(rows) == 2 * 13 * 3
    table = cli("--db", synth_registry, "evaluate", "--models", "similarity")
    assert table.code == 0 and "similarity" in table.out and "noise floor" in table.err


def test_cli_evaluate_with_model_options(cli, synth_registry):
    def mape(*args):
        result = cli("--db", synth_registry, "evaluate", "--base", BASE, "--json", *args)
        assert result.code == 0, result.err
        return {m["model"]: m["mape_pct"] for m in json.loads(result.out)["models"]}

    default = mape("--models", "similarity,knn5-sar")
    assert mape("--models", "similarity", "--option", "k=5") == {"similarity": default["similarity"]}
    changed = mape("--models", "similarity,knn5-sar", "--option", "similarity.k=1", "--option", "knn5-sar.k=1")
    assert changed["similarity"] != default["similarity"] and changed["knn5-sar"] != default["knn5-sar"]
    for args, message in [(["--models", "similarity,knn5-sar", "--option", "k=1"], "name the model: MODEL.k=VALUE"),
                          (["--models", "similarity", "--option", "gbt.k=1"], "'gbt' is not among the evaluated"),
                          (["--models", "similarity", "--option", "k=0"], "option k=0: out of range [1, inf]")]:
        assert_one_line_error(cli("--db", synth_registry, "evaluate", *args), message)


def test_cli_evaluate_errors(cli, synth_registry, tmp_path):
    assert_one_line_error(cli("--db", synth_registry, "evaluate", "--models", "corredor"), "cannot evaluate corredor")
    assert_one_line_error(cli("--db", synth_registry, "evaluate", "--base", "nope"), "no node called 'nope'")
    empty = f"duckdb:///{tmp_path / 'empty.duckdb'}"
    assert_one_line_error(cli("--db", empty, "evaluate"), "no registry", "creates none")
    assert cli("--db", empty, "init").code == 0
    assert_one_line_error(cli("--db", empty, "evaluate"), "nothing to evaluate")


def test_run_level_mape_by_hand():
    """README-style scoring: each base run x the predicted ratio against each single run on the node."""
    p = pd.DataFrame({"app": ["a", "b"], "node": ["n1", "n1"], "base_s": [10.0, 4.0],
                      "predicted_s": [20.0, 4.0], "actual_s": [21.0, 5.0]})
    runs = pd.DataFrame({"app": ["a", "a", "a", "a", "b", "b", "b"],
                         "node": ["base", "base", "n1", "n1", "base", "n1", "other"],
                         "time_s": [9.0, 11.0, 20.0, 22.0, 4.0, 5.0, 1.0]})
    # a: ratio 2, base runs 9 and 11 -> 18 and 22 against runs 20 and 22; b: ratio 1, 4 against 5
    apes = [2 / 20, 4 / 22, 2 / 20, 0 / 22, 1 / 5]
    assert ev.run_mape(p, runs, "base") == pytest.approx(np.mean(apes))
    m = ev.score(p, runs, "base")
    assert m["run_mape"] == pytest.approx(np.mean(apes))
    assert m["mape"] == pytest.approx(np.mean([1 / 21, 1 / 5]))       # the cell-level metric is unchanged
    assert ev.score(p)["run_mape"] is None


def test_forest_serves_and_beats_ignoring_the_signature(synth_registry):
    data = _data(synth_registry)
    forest = ev.evaluate_model(data, lambda: ForestModel(n_estimators=30), "forest")
    flat = ev.evaluate_model(data, MedianRatioBaseline, "median-ratio", "baseline")
    assert forest.error is None
    assert forest.metrics["mape"] < 0.8 * flat.metrics["mape"]
    assert forest.metrics["run_mape"] is not None
    assert (forest.predictions["base_s"] == data.base_time_s.reindex(forest.predictions["app"]).to_numpy()).all()


def test_top3_and_cost_regret_by_hand():
    p = pd.DataFrame({"app": ["a"] * 4 + ["b"] * 4, "node": ["n1", "n2", "n3", "n4"] * 2,
                      "predicted_s": [9.0, 10.0, 11.0, 12.0, 14.0, 10.0, 11.0, 12.0],
                      "actual_s": [13.0, 10.0, 11.0, 12.0, 10.0, 12.0, 11.0, 13.0]})
    # a chose n1 (4th fastest: outside the top 3); b chose n2 (3rd fastest: inside)
    prices = pd.Series({"n1": 1.0, "n2": 2.0, "n3": 1.0})
    m = ev.score(p, prices=prices)
    assert m["top3"] == pytest.approx(0.5) and m["top1"] == 0.0
    # priced nodes only. a: predicted costs 9, 20, 11 -> n1; measured 13, 20, 11: 13 / 11 - 1.
    # b: predicted 14, 20, 11 -> n3; measured 10, 24, 11: 11 / 10 - 1
    assert m["cost_regret"] == pytest.approx((13 / 11 - 1 + 11 / 10 - 1) / 2)
    assert ev.score(p)["cost_regret"] is None


def test_cli_evaluate_reports_cost_regret_when_prices_exist(cli, synth_registry, tmp_path):
    url = f"duckdb:///{tmp_path / 'priced.duckdb'}"
    import shutil
    shutil.copy(synth_registry.removeprefix("duckdb:///"), url.removeprefix("duckdb:///"))
    prices = tmp_path / "p.csv"
    prices.write_text("node,price_per_hour,currency\n" + "".join(
        f"synth/{vm},{0.05 * cpus},USD\n" for vm, cpus in VMS.items()))
    assert cli("--db", url, "import", "prices", str(prices)).code == 0
    out = json.loads(cli("--db", url, "evaluate", "--models", "median-ratio", "--json").out)
    assert out["models"][0]["cost_regret_pct"] is not None and out["models"][0]["top3_pct"] >= 0
    plain = json.loads(cli("--db", synth_registry, "evaluate", "--models", "median-ratio", "--json").out)
    assert plain["models"][0]["cost_regret_pct"] is None


def test_leave_one_size_out_never_trains_on_the_held_out_size(synth_registry, monkeypatch):
    data = _data(synth_registry)
    sizes = data.sizes()
    assert set(sizes) == {"tiny", "small"}
    folds = ev.folds(data, "size")
    assert [label for label, *_ in folds] == ["small", "tiny"]
    assert sorted(a for *_, held in folds for a in held) == sorted(sizes.index)
    seen = []
    real = ev.EvalData.references_of
    monkeypatch.setattr(ev.EvalData, "references_of", lambda self, keep: seen.append(list(keep)) or real(self, keep))
    result = ev.evaluate_model(data, MedianRatioBaseline, "median-ratio", split="size")
    assert result.metrics["apps"] == len(sizes)
    for (_, _, held), train in zip(folds, seen, strict=True):
        assert not set(held) & set(train) and {sizes[a] for a in train if a in sizes} == set(sizes) - {sizes[held[0]]}


def test_size_split_needs_two_sizes(synth_registry):
    data = _data(synth_registry)
    data.features = data.features.drop(columns=[ev.SIZE_FEATURE])
    with pytest.raises(UserError, match="at least two data sizes"):
        ev.folds(data, "size")


def test_select_chooses_inside_the_training_apps_only(synth_registry, monkeypatch):
    data = _data(synth_registry)
    calls = []
    real = ev.inner_mape
    monkeypatch.setattr(ev, "inner_mape", lambda d, cls, train, k=5: calls.append((cls.name, list(train)))
                        or real(d, cls, train, k))
    result = ev.evaluate_selected(data, [SimilarityModel, MedianRatioBaseline], split="size")
    folds = ev.folds(data, "size")
    assert sum(result.chosen.values()) == len(folds)
    assert result.chosen == {"similarity": 2}          # the signature matters here, ratios alone do not
    for (_, _, held), (_, train) in zip(folds, calls[::2], strict=True):
        assert not set(held) & set(train)
    sim = ev.evaluate_model(data, SimilarityModel, "similarity", split="size")
    assert result.metrics["mape"] == pytest.approx(sim.metrics["mape"])


def test_rf_sar_baseline_serves_and_beats_ignoring_the_signature(synth_registry):
    from registry.models.baselines import RfSarBaseline
    data = _data(synth_registry)
    rf = ev.evaluate_model(data, RfSarBaseline, "rf-sar", "baseline")
    flat = ev.evaluate_model(data, MedianRatioBaseline, "median-ratio", "baseline")
    assert rf.error is None and rf.metrics["cells"] == flat.metrics["cells"]
    assert rf.metrics["mape"] < flat.metrics["mape"]


def test_cli_splits(cli, synth_registry, tmp_path):
    out = cli("--db", synth_registry, "evaluate", "--split", "size", "--select", "--models",
              "similarity,median-ratio", "--json")
    assert out.code == 0, out.err
    report = json.loads(out.out)
    assert report["split"] == "size"
    rows = {m["model"]: m for m in report["models"]}
    assert rows["selected"]["chosen"] == {"similarity": 2} and rows["selected"]["top3_pct"] is not None
    assert_one_line_error(cli("--db", synth_registry, "evaluate", "--split", "nope"), "--split must be one of")
    assert_one_line_error(cli("--db", synth_registry, "evaluate", "--split", "cloud"), "--select-base")


def test_cli_cross_cloud_chooses_on_one_cloud_and_scores_on_the_other(cli, tmp_path):
    url = f"duckdb:///{tmp_path / 'two.duckdb'}"
    reg = open_registry(url)
    import_lumos(reg, make_dataset(tmp_path / "a", n_apps=8), cloud="east")
    import_lumos(reg, make_dataset(tmp_path / "b", n_apps=8, seed=5), cloud="west")
    reg.close()
    out = cli("--db", url, "evaluate", "--split", "cloud", "--base", f"east/{BASE}", "--select-base",
              f"west/{BASE}", "--models", "similarity,median-ratio", "--json")
    assert out.code == 0, out.err
    report = json.loads(out.out)
    assert report["select_base"] == f"west/{BASE}" and all(n.startswith("east/") for n in report["nodes"])
    rows = {m["model"]: m for m in report["models"]}
    (picked,) = rows["selected"]["chosen"]
    assert rows["selected"]["mape_pct"] == rows[picked]["mape_pct"]


def test_rf_sar_fits_references_unmeasured_on_a_node_and_metrics_nobody_has():
    from registry.models.base import Query, ReferenceSet
    from registry.models.baselines import RfSarBaseline
    feats = pd.DataFrame({"sar.busy": [0.1, 0.5, 0.9, 0.7], "sar.none": [np.nan] * 4}, index=list("abcd"))
    ratios = pd.DataFrame({"n1": [0.0, 0.2, 0.4, np.nan], "n2": [np.nan, -0.1, -0.3, -0.2]}, index=list("abcd"))
    model = RfSarBaseline(n_estimators=10).fit(ReferenceSet("base", feats, ratios))
    preds = model.predict(Query("q", {"sar.busy": 0.9}, 10.0), ["n1", "n2", "n3"])
    assert np.isfinite(preds[0].predicted_s) and np.isfinite(preds[1].predicted_s)
    assert np.isnan(preds[2].predicted_s)          # no reference measured there


def _three_sizes() -> ev.EvalData:
    """8 apps of sizes tiny (rank 0), small (1) and large (2): an app's ratio on node n2 grows with its size."""
    apps = [f"a{i}" for i in range(8)]
    rank = [0, 0, 0, 1, 1, 1, 2, 2]
    feats = pd.DataFrame({ev.SIZE_FEATURE: rank, "sar.busy": np.linspace(0.2, 0.9, 8)}, index=apps, dtype=float)
    actual = pd.DataFrame({"n1": [10.0] * 8, "n2": [10.0 * (1 + r) for r in rank]}, index=apps)
    runs = pd.DataFrame({"app": apps, "node": ["base"] * 8, "time_s": [10.0] * 8})
    return ev.EvalData("base", feats, pd.Series(10.0, index=apps), actual, runs)


def test_size_pair_trains_on_one_size_and_predicts_the_adjacent_one():
    data = _three_sizes()
    folds = ev.folds(data, "size-pair")
    assert [label for label, *_ in folds] == ["tiny->small", "small->tiny", "small->large", "large->small"]
    sizes = data.sizes()
    for label, train, held in folds:
        src, dst = label.split("->")
        assert set(sizes[train]) == {src} and set(sizes[held]) == {dst}
    result = ev.evaluate_model(data, MedianRatioBaseline, "median-ratio", split="size-pair")
    # the small apps are predicted twice (from tiny and from large), each a choice of its own
    assert len(result.predictions) == 2 * (3 + 3 + 3 + 2) and result.metrics["apps"] == 8
    by_fold = result.predictions.groupby("fold")["predicted_s"]
    assert by_fold.max()["tiny->small"] == pytest.approx(10.0)     # tiny apps run as fast on n2 as on n1
    assert by_fold.max()["large->small"] == pytest.approx(30.0)    # large apps 3x slower on n2: no tiny seen


def test_regret_counts_an_app_once_per_fold():
    rows = pd.DataFrame({"fold": ["x", "x", "y", "y"], "app": ["a"] * 4, "node": ["n1", "n2"] * 2,
                         "predicted_s": [1.0, 2.0, 2.0, 1.0], "actual_s": [1.0, 2.0, 1.0, 2.0]})
    scored = ev.score(rows)
    assert scored["regret"] == pytest.approx(0.5) and scored["top1"] == pytest.approx(0.5)
    assert scored["apps"] == 1


def test_cli_size_pair(cli, synth_registry):
    out = cli("--db", synth_registry, "evaluate", "--split", "size-pair", "--select", "--models",
              "similarity,median-ratio", "--json")
    assert out.code == 0, out.err
    report = json.loads(out.out)
    rows = {m["model"]: m for m in report["models"]}
    assert rows["selected"]["chosen"] == {"similarity": 2}      # tiny->small and small->tiny
    folds = {(f["model"], f["fold"]): f for f in report["per_fold"]}
    assert set(folds) == {(m, f) for m in rows for f in ("tiny->small", "small->tiny")}
    sim = [folds["similarity", f] for f in ("tiny->small", "small->tiny")]
    assert sum(f["apps"] for f in sim) == rows["similarity"]["apps"]    # each app predicted in one fold here
    pooled = sum(f["apps"] * f["regret_pct"] for f in sim) / rows["similarity"]["apps"]
    assert pooled == pytest.approx(rows["similarity"]["regret_pct"], abs=0.02)
    table = cli("--db", synth_registry, "evaluate", "--split", "size-pair", "--models", "median-ratio")
    assert table.code == 0 and "per fold" in table.out and "tiny->small" in table.out


def test_eval_lumos_script_reports_each_size_pair_direction(synth_registry, capsys):
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("eval_lumos", Path(__file__).parents[1] / "scripts" / "eval_lumos.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    split = script.size_split(_data(synth_registry), ["similarity", "rf-sar"], "size-pair")
    assert set(split["per_size"]["similarity"]) == {"tiny->small", "small->tiny"}
    assert {w["fold"] for w in split["costliest_choices"]["rf-sar"]} <= {"tiny->small", "small->tiny"}
    rows = {r["model"]: r for r in split["models"]}
    assert split["target_met"] == (rows["selected"]["regret_pct"] <= rows["rf-sar"]["regret_pct"]
                                   and rows["selected"]["mape_pct"] <= rows["rf-sar"]["mape_pct"] + 0.3)
    script.show_size_split(split)
    assert "train on one data size, predict the adjacent one" in capsys.readouterr().out


@both_backends
def test_runs_of_another_input_are_not_mixed_in(db_url, tmp_path):
    """One app traced and run on input 'small' also has runs 10x longer on 'large' on every node: by
    default evaluate compares the runs of its trace's input (the truth unchanged), `--input large`
    leaves the app out (its trace is of another input), `--input small` keeps it as it was."""
    from registry.db.write import new_uid

    url = db_url
    reg = open_registry(url)
    import_lumos(reg, make_dataset(tmp_path / "synth", n_apps=4))
    reg.close()
    before = _data(url)
    app = before.apps[0]
    reg = open_registry(url)
    with reg.begin() as conn:
        app_id = conn.execute(sa.text("SELECT app_id FROM apps WHERE name = :a"), {"a": app}).scalar_one()
        conn.execute(sa.text("UPDATE traces SET input = 'small' WHERE app_id = :a"), {"a": app_id})
        conn.execute(sa.text("UPDATE runs SET input = 'small' WHERE app_id = :a"), {"a": app_id})
        rows = conn.execute(sa.text("SELECT node_id, threads, time_s, source, created_at FROM runs WHERE app_id = :a"),
                            {"a": app_id}).mappings().all()
        insert_rows(conn, "runs", [{**r, "uid": new_uid(), "app_id": app_id, "time_s": 10 * r["time_s"],
                                    "input": "large"} for r in rows])
    reg.close()
    after = _data(url)
    pd.testing.assert_series_equal(after.actual_s.loc[app], before.actual_s.loc[app])
    assert after.base_time_s[app] == pytest.approx(before.base_time_s[app])
    reg = open_registry(url, readonly=True)
    try:
        assert app not in ev.load(reg, f"synth/{BASE}", input_label="large").apps
        small = ev.load(reg, f"synth/{BASE}", input_label="small")
    finally:
        reg.close()
    pd.testing.assert_series_equal(small.actual_s.loc[app], before.actual_s.loc[app])
