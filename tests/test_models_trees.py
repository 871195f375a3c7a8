"""The tree models: MOB (Castellanos 2014) and gradient-boosted trees (gbt), engines and plugins."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import ExtraTreesRegressor, HistGradientBoostingRegressor, RandomForestRegressor

from registry.errors import UserError
from registry.models.base import Query, ReferenceSet
from registry.models.forest import ForestModel, TreeEnsemble
from registry.models.gbt import GbtModel, _TreeEnsemble
from registry.models.mob import (MobModel, MobTree, best_configuration, efficiency_index, fluctuation_test,
                                 suplm_pvalue, thesis_weights)

# -- MOB engine ----------------------------------------------------------------------------------


def sine_frame(seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 2 * np.pi, n)
    return pd.DataFrame({"x": x, "x2": x**2, "noise": rng.normal(size=n)}), np.sin(x) + rng.normal(0, 0.1, n)


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_mob_sine_with_quadratic_leaves_splits_near_3_2(seed):
    """The thesis's golden example (Figure 4.1): the first split of sin(x) + noise is near x = 3.2."""
    frame, y = sine_frame(seed)
    tree = MobTree(["x", "x2"], ["x", "noise"], minsplit=25).fit(frame, y)
    assert tree.root.split["variable"] == "x"
    assert 2.8 <= tree.root.split["cut"] <= 3.4
    noise_test = next(t for t in tree.root.tests if t["variable"] == "noise")
    assert noise_test["p_adj"] > 0.05
    pred = tree.predict(frame)
    assert np.sqrt(np.mean((pred - np.sin(frame.x)) ** 2)) < 0.06


def test_suplm_pvalues_match_published_critical_values():
    """Andrews (1993) / Stock-Watson sup-LM critical values, one parameter, 15% trimming: 7.12, 8.68, 12.16."""
    assert suplm_pvalue(7.12, 1, 0.15) == pytest.approx(0.10, abs=0.015)
    assert suplm_pvalue(8.68, 1, 0.15) == pytest.approx(0.05, abs=0.01)
    assert suplm_pvalue(12.16, 1, 0.15) == pytest.approx(0.01, abs=0.005)


def test_fluctuation_test_is_quiet_on_a_stable_model_and_loud_on_a_break():
    rng = np.random.default_rng(7)
    z = pd.Series(rng.uniform(0, 1, 400))
    x = np.column_stack([np.ones(400), rng.normal(size=400)])
    stable = x @ [1.0, 2.0] + rng.normal(0, 0.1, 400)
    broken = stable + np.where(z > 0.5, 1.0, 0.0) * x[:, 1]
    for y, small in ((stable, False), (broken, True)):
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        _, p = fluctuation_test(x * (y - x @ coef)[:, None], np.ones(400), z, 0.1)
        assert (p < 0.01) == small


def test_fluctuation_test_on_a_categorical_variable():
    rng = np.random.default_rng(8)
    group = pd.Series(rng.choice(["a", "b", "c"], 300))
    x = np.column_stack([np.ones(300), rng.normal(size=300)])
    y = x @ [1.0, 1.0] + np.where(group == "c", 2.0, 0.0) + rng.normal(0, 0.1, 300)
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    stat, p = fluctuation_test(x * (y - x @ coef)[:, None], np.ones(300), group, 0.1)
    assert stat > 50 and p < 1e-6
    frame = pd.DataFrame({"g": group, "x1": x[:, 1]})
    tree = MobTree(["x1"], ["g"], minsplit=30).fit(frame, y)
    assert sorted(tree.root.split["left_levels"]) in (["a", "b"], ["c"])


def test_mob_respects_minsplit_weights_and_bonferroni():
    frame, y = sine_frame(3, 200)
    tree = MobTree(["x", "x2"], ["x"], minsplit=40).fit(frame, y, weights=np.full(200, 0.5))
    for node in tree.all_nodes():
        assert node.weight >= 40 or node.id == 0
    tests = MobTree(["x"], ["x", "noise"], minsplit=25, max_depth=0, bonferroni=True).fit(frame, y).root.tests
    raw = MobTree(["x"], ["x", "noise"], minsplit=25, max_depth=0, bonferroni=False).fit(frame, y).root.tests
    assert [t["p_adj"] for t in tests] == [min(1.0, 2 * t["p"]) for t in raw]


def test_mob_separates_regressors_from_partitioning_variables():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"w": rng.uniform(1, 10, 300), "threads": rng.choice([1, 2, 4], 300)})
    y = np.where(frame.threads >= 2, 3.0, 1.0) * frame.w + rng.normal(0, 0.05, 300)
    tree = MobTree(["w"], ["threads"], minsplit=25).fit(frame, y)
    assert tree.root.split == {"variable": "threads", "cut": 1.5}
    assert [round(n.fit.coef[1], 1) for n in tree.all_nodes() if n.is_leaf()] == [1.0, 3.0]


def test_mob_relative_objective_and_round_trip():
    frame, y = sine_frame(2)
    tree = MobTree(["x", "x2"], ["x"], minsplit=25, objective="relative").fit(frame, y + 3)
    back = MobTree.from_dict(json.loads(json.dumps(tree.to_dict())))
    assert np.allclose(back.predict(frame), tree.predict(frame))
    assert back.describe() == tree.describe()
    with pytest.raises(UserError, match="objective"):
        MobTree(["x"], ["x"], objective="median")


def test_thesis_weights_favour_short_runs():
    w = thesis_weights([0.001, 0.004, 0.016])
    assert w.tolist() == pytest.approx([5.0, 3.0, 1.0])


def test_best_configuration_and_efficiency_index():
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"workers": rng.integers(2, 29, 300).astype(float), "inv": 0.0})
    frame["inv"] = 1 / frame.workers
    y = 0.01 * frame.workers + 2.0 * frame.inv
    tree = MobTree(["workers", "inv"], ["workers"], minsplit=25).fit(frame, y)
    candidates = pd.DataFrame({"workers": np.arange(2.0, 29.0)})
    candidates["inv"] = 1 / candidates.workers
    best, value = best_configuration(tree, candidates)
    assert best.workers == 14                          # argmin of 0.01 w + 2/w
    assert value == pytest.approx(0.01 * 14 + 2 / 14, rel=1e-6)
    best_e, _ = best_configuration(tree, candidates,
                                   score=lambda c, t: efficiency_index(c.workers, t, 2.0))
    assert best_e.workers < best.workers               # the efficiency index also charges for workers
    assert efficiency_index([4], [0.5], [2.0]).tolist() == [0.5]


# -- projection data for the plugins ---------------------------------------------------------------

NODES = ["base", "a", "b", "c", "d", "e"]
NODE_FEATURES = pd.DataFrame({"bw": [10, 20, 5, 40, 15, 8], "peak": [100, 80, 300, 150, 120, 60]}, index=NODES)


def true_log_ratio(mem: float, node: str) -> float:
    f = NODE_FEATURES
    return mem * np.log(f.bw["base"] / f.bw[node]) + (1 - mem) * np.log(f.peak["base"] / f.peak[node])


def reference_set(count: int = 60, seed: int = 0) -> ReferenceSet:
    rng = np.random.default_rng(seed)
    mem = rng.uniform(0, 1, count)
    feats = pd.DataFrame({"x.mem": mem, "x.other": rng.normal(size=count)}, index=[f"r{i}" for i in range(count)])
    ratios = pd.DataFrame({n: [true_log_ratio(m, n) + rng.normal(0, 0.01) for m in mem] for n in NODES},
                          index=feats.index)
    ratios["base"] = 0.0
    ratios.loc["r0", "e"] = np.nan                     # unmeasured pairs are allowed
    return ReferenceSet("base", feats, ratios, NODE_FEATURES)


def query(mem: float) -> Query:
    return Query("q", pd.Series({"x.mem": mem, "x.other": 0.0}), 10.0)


# -- gbt ------------------------------------------------------------------------------------------


def test_tree_ensemble_export_predicts_like_scikit_learn():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    x[rng.random(300) < 0.1, 1] = np.nan
    y = np.nan_to_num(x[:, 1]) * 2 + x[:, 0] ** 2
    model = HistGradientBoostingRegressor(max_iter=15, random_state=0).fit(x, y)
    ens = _TreeEnsemble.from_dict(json.loads(json.dumps(_TreeEnsemble.from_sklearn(model).to_dict())))
    assert np.allclose(ens.predict(x), model.predict(x), atol=1e-10)


def test_gbt_predicts_inside_the_training_range_and_round_trips():
    m = GbtModel(max_iter=40, learning_rate=0.15).fit(reference_set(count=40))
    preds = m.predict(query(0.6), ["a", "c", "e"])
    for p in preds:
        assert p.predicted_s == pytest.approx(10 * np.exp(true_log_ratio(0.6, p.node)), rel=0.08)
        assert p.low_s <= p.predicted_s <= p.high_s
        assert p.warnings == []
    back = GbtModel.from_params(json.loads(json.dumps(m.params())))
    assert [p.predicted_s for p in back.predict(query(0.6), ["a", "c", "e"])] == [p.predicted_s for p in preds]
    assert "training rows" in m.describe()


def test_gbt_flags_or_refuses_extrapolation():
    refs = reference_set(count=15)
    p = GbtModel(max_iter=10).fit(refs).predict(query(1.8), ["a"])[0]
    assert any(w.startswith("extrapolation: sig:x.mem = 1.8") for w in p.warnings)
    with pytest.raises(UserError, match="refuses to extrapolate"):
        GbtModel(extrapolation="refuse", max_iter=10).fit(refs).predict(query(1.8), ["a"])
    with pytest.raises(UserError, match="no profile features for node"):
        GbtModel(max_iter=10).fit(refs).predict(query(0.5), ["zzz"])


def test_gbt_with_few_rows_uses_the_residual_band():
    m = GbtModel(max_iter=20).fit(reference_set(count=6))
    assert m.residual_band is not None and not m.quantiles
    assert any("training residuals" in w for w in m.warnings)
    p = m.predict(query(0.5), ["b"])[0]
    assert p.low_s <= p.predicted_s <= p.high_s


def test_feature_models_need_node_features():
    refs = reference_set()
    refs.node_features = None
    with pytest.raises(UserError, match="node profile features"):
        GbtModel().fit(refs)


# -- mob plugin -----------------------------------------------------------------------------------


def test_mob_projection_learns_the_ratio_per_signature_region():
    m = MobModel(minsplit=30).fit(reference_set(count=120))
    preds = m.predict(query(0.3), ["a", "b", "d"])
    for p in preds:
        assert p.predicted_s == pytest.approx(10 * np.exp(true_log_ratio(0.3, p.node)), rel=0.05)
        assert p.low_s < p.predicted_s < p.high_s
    back = MobModel.from_params(json.loads(json.dumps(m.params())))
    assert [p.predicted_s for p in back.predict(query(0.3), ["a"])] == [preds[0].predicted_s]
    assert "split on sig:x.mem" in m.describe()


def test_projection_rows_notes_and_missing_query_features():
    refs = reference_set(count=20)
    refs.node_features = NODE_FEATURES.drop(index=["base", "e"])       # no base features, node e unprofiled
    m = GbtModel(max_iter=10).fit(refs)
    assert any("base node 'base' has no profile features" in w for w in m.warnings)
    assert any("no profile features for nodes base, e:" in w for w in m.warnings)
    p = m.predict(Query("q", pd.Series({"x.mem": 0.5}), 1.0), ["a"])[0]
    assert any("the query lacks sig:x.other" in w for w in p.warnings)


# -- forest ---------------------------------------------------------------------------------------


def test_forest_export_predicts_like_scikit_learn():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 4))
    y = np.column_stack([x[:, 0] > 0, x[:, 1] * x[:, 2]]).astype(float)
    for cls in (ExtraTreesRegressor, RandomForestRegressor):
        model = cls(n_estimators=7, random_state=0).fit(x, y)
        exported = TreeEnsemble(json.loads(json.dumps(TreeEnsemble.from_sklearn(model).to_dict())))
        assert np.allclose(exported.per_tree(x).mean(axis=0), model.predict(x), atol=1e-10)


def test_forest_learns_the_ratio_from_the_signature_and_round_trips():
    refs = reference_set()
    model = ForestModel(n_estimators=40).fit(refs)
    for mem in (0.2, 0.8):
        by_node = {p.node: p for p in model.predict(query(mem), ["a", "b", "c"])}
        for node, p in by_node.items():
            truth = 10.0 * np.exp(true_log_ratio(mem, node))
            assert p.predicted_s == pytest.approx(truth, rel=0.08)
            assert p.low_s <= p.predicted_s <= p.high_s
    # the signature matters: ignoring it (the node's median ratio) is far worse at the extremes
    flat = 10.0 * np.exp(refs.log_ratio["b"].median())
    lone = model.predict(query(0.05), ["b"])[0].predicted_s
    truth = 10.0 * np.exp(true_log_ratio(0.05, "b"))
    assert abs(lone - truth) < 0.3 * abs(flat - truth)
    back = ForestModel.from_params(json.loads(json.dumps(model.params())))
    again = back.predict(query(0.5), ["a", "e"])
    first = model.predict(query(0.5), ["a", "e"])
    assert [p.predicted_s for p in again] == pytest.approx([p.predicted_s for p in first])
    assert "80 trees" in back.describe()


def test_forest_unknown_nodes_missing_features_and_errors():
    refs = reference_set(count=20)
    model = ForestModel(kinds=("extra",), n_estimators=10).fit(refs)
    p = model.predict(Query("q", pd.Series({"x.mem": 0.5}), 10.0), ["a", "zzz"])   # x.other missing: filled
    assert np.isfinite(p[0].predicted_s)
    assert np.isnan(p[1].predicted_s) and "zzz" in p[1].warnings[0]
    with pytest.raises(UserError):
        ForestModel(kinds=("boosted",))
    with pytest.raises(UserError):
        ForestModel().fit(reference_set(count=1))
    with pytest.raises(UserError):
        ForestModel().predict(query(0.5), ["a"])
