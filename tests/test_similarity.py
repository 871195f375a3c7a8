"""The `similarity` projection model: neighbours, geometric means, shared features, weights as data."""

import json
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from registry.db import migrate, migrations, open_registry
from registry.models.similarity import WEIGHTS_VERSION, SimilarityModel, load_weights, prior_weight
from registry.models import plugins
from registry.models.base import Matrix, Query, ReferenceSet
from registry.models.store import load_model, save_model


def refs(features: dict, ratios: dict, weights=None) -> ReferenceSet:
    """References from {ref: {feature: value}} and {ref: {node: ratio}} (ratios, not logs)."""
    f = pd.DataFrame(features).T.astype(float)
    y = np.log(pd.DataFrame(ratios).T.astype(float)).reindex(f.index)
    return ReferenceSet("base", f, y, feature_weights=weights or {})


LINE = refs({"a": {"sar.x": 0.0}, "b": {"sar.x": 1.0}, "c": {"sar.x": 2.0}, "d": {"sar.x": 3.0}},
            {"a": {"n1": 1.0, "n2": 2.0}, "b": {"n1": 2.0, "n2": 2.0}, "c": {"n1": 4.0, "n2": 2.0},
             "d": {"n1": 8.0, "n2": 2.0}})


def predict(model, x: dict, base_s=10.0, nodes=("n1", "n2")):
    return {p.node: p for p in model.predict(Query("q", pd.Series(x, dtype=float), base_s), list(nodes))}


def test_nearest_reference_ratio_times_base_time():
    m = SimilarityModel(k=1, shrink=0.0).fit(LINE)
    out = predict(m, {"sar.x": 2.1})
    assert out["n1"].predicted_s == pytest.approx(40.0)
    assert out["n2"].predicted_s == pytest.approx(20.0)
    assert out["n1"].explanation["neighbours"][0]["reference"] == "c"


def test_weighted_geometric_mean_of_the_k_nearest():
    m = SimilarityModel(k=2, shrink=0.0).fit(LINE)
    query = Query("q", {"sar.x": 1.25}, 1.0)
    near = m.nearest(query, 2)
    assert [ref for ref, _ in near] == ["b", "c"]
    eps = 0.05 * np.median(m.distances(query))
    w = 1 / (np.array([d for _, d in near]) + eps)
    expected = np.exp((w * np.log([2.0, 4.0])).sum() / w.sum())
    out = predict(m, {"sar.x": 1.25}, base_s=1.0)
    assert out["n1"].predicted_s == pytest.approx(expected)
    assert 2.0 < out["n1"].predicted_s < 4.0
    # the interval comes from the neighbours' spread: none on n2 (all 2x), some on n1
    assert out["n2"].low_s == pytest.approx(out["n2"].high_s)
    assert out["n1"].low_s < out["n1"].predicted_s < out["n1"].high_s


def test_shrink_pulls_toward_the_node_median():
    plain = predict(SimilarityModel(k=1, shrink=0.0).fit(LINE), {"sar.x": 3.0}, base_s=1.0)["n1"].predicted_s
    shrunk = predict(SimilarityModel(k=1, shrink=0.5).fit(LINE), {"sar.x": 3.0}, base_s=1.0)["n1"].predicted_s
    median = np.exp(np.median(np.log([1, 2, 4, 8])))
    assert shrunk == pytest.approx(np.exp(0.5 * np.log(plain) + 0.5 * np.log(median)))


def test_only_references_measured_on_a_node_vote_there():
    r = refs({"a": {"sar.x": 0.0}, "b": {"sar.x": 1.0}, "c": {"sar.x": 5.0}},
             {"a": {"n1": 1.0, "n2": 3.0}, "b": {"n1": 2.0}, "c": {"n1": 4.0, "n2": 9.0}})
    out = predict(SimilarityModel(k=1, shrink=0.0).fit(r), {"sar.x": 1.0}, base_s=1.0)
    assert out["n1"].predicted_s == pytest.approx(2.0)       # b, the nearest
    assert out["n2"].predicted_s == pytest.approx(3.0)       # b was not measured on n2: a is next
    unknown = predict(SimilarityModel().fit(r), {"sar.x": 1.0}, nodes=("n9",))["n9"]
    assert np.isnan(unknown.predicted_s) and unknown.warnings


def test_distance_uses_only_the_features_both_have():
    r = refs({"a": {"sar.x": 0.0, "proc.y": 0.0}, "b": {"sar.x": 1.0, "proc.y": 9.0}, "c": {"sar.x": 2.0}},
             {"a": {"n1": 1.0}, "b": {"n1": 2.0}, "c": {"n1": 4.0}})
    m = SimilarityModel(k=1, shrink=0.0, relevance_power=0).fit(r)
    # the query has no proc.y, and a counters feature no reference has: both are ignored
    def distances(signature):
        return dict(zip(m.references, m.distances(Query("q", signature, 1.0))))

    assert distances({"sar.x": 1.0, "counters.z": 5.0})["b"] == pytest.approx(0.0)
    # c lacks proc.y: compared on sar.x alone
    assert distances({"sar.x": 2.0, "proc.y": 0.0})["c"] == pytest.approx(0.0)
    # nothing shared: no distance at all, the node median answers
    assert np.isnan(list(distances({"counters.z": 1.0}).values())).all()
    assert m.nearest(Query("q", {"counters.z": 1.0}, 1.0), 3) == []
    out = predict(m, {"counters.z": 1.0}, base_s=1.0, nodes=("n1",))
    assert out["n1"].predicted_s == pytest.approx(2.0)


def _misleading():
    """sar.good orders the references as their ratios do; sar.bad points the other way."""
    good = {"a": 0.0, "b": 1.0, "c": 2.0, "d": 3.0, "e": 4.0}
    bad = {"a": 4.0, "b": 0.2, "c": 3.1, "d": 1.0, "e": 0.0}
    ratio = {"a": 1.0, "b": 1.5, "c": 2.0, "d": 3.0, "e": 4.0}
    return ({k: {"sar.good": good[k], "sar.bad": bad[k]} for k in good}, {k: {"n1": v} for k, v in ratio.items()})


def test_learnt_relevance_favours_informative_features():
    feats, ratios = _misleading()
    m = SimilarityModel().fit(refs(feats, ratios))
    assert m.feature_weight["sar.good"] > 3 * m.feature_weight["sar.bad"]


def test_feature_weights_are_data():
    feats, ratios = _misleading()
    query = {"sar.good": 3.9, "sar.bad": 0.9}             # good says 'e' (4x), bad says 'd'
    flat = SimilarityModel(k=1, shrink=0.0, relevance_power=0)
    assert predict(flat.fit(refs(feats, ratios)), query, 1.0, ("n1",))["n1"].predicted_s == pytest.approx(3.0)
    off = refs(feats, ratios, weights={"sar.*": 1.0, "sar.bad": 0.0})
    assert predict(flat.fit(off), query, 1.0, ("n1",))["n1"].predicted_s == pytest.approx(4.0)
    explicit = SimilarityModel(k=1, shrink=0.0, relevance_power=0, weights={"*": 1.0, "sar.bad": 0.0})
    assert predict(explicit.fit(refs(feats, ratios)), query, 1.0, ("n1",))["n1"].predicted_s == pytest.approx(4.0)


def test_prior_weight_patterns():
    weights = {"*": 0.5, "sar.*": 2.0, "sar.cpu_busy_mean": 3.0}
    assert prior_weight("sar.cpu_busy_mean", weights) == 3.0
    assert prior_weight("sar.other", weights) == 2.0
    assert prior_weight("proc.rss", weights) == 0.5
    assert prior_weight("proc.rss", {}) == 1.0


def _migrated_to(url: str, last: int) -> None:
    """A registry as a nodereg whose newest migration was `last` left it."""
    older = [m for m in migrate.available() if m.version <= last]
    with mock.patch.object(migrations, "available", return_value=older):
        open_registry(url).close()


def test_shipped_weights_are_the_rows_migrations_0004_to_0006_inserted(tmp_path):
    url = f"duckdb:///{tmp_path / 'r.duckdb'}"
    _migrated_to(url, 6)
    reg = open_registry(url, migrate=False)
    with reg.connect() as conn:
        rows = conn.execute(sa.text("SELECT version, pattern, weight FROM similarity_weights")).fetchall()
    reg.close()
    in_schema: dict = {}
    for version, pattern, weight in rows:
        in_schema.setdefault(version, {})[pattern] = weight
    assert sorted(in_schema) == [1, 2, 3] and WEIGHTS_VERSION == 4
    for version, weights in in_schema.items():
        assert load_weights(version) == weights, version
    # version 4 (shipped with the model, after the schema stopped carrying weights) adds source mix
    assert load_weights() == {**in_schema[3], "mix.*": 1.0} and load_weights()["cachegrind.instructions"] == 0.0
    with pytest.raises(ValueError, match="shipped: \\[1, 2, 3, 4\\]"):
        load_weights(99)


def test_migration_9_drops_the_weights_table_and_predictions_stay(tmp_path):
    """A registry of schema 8 moves to 9; the model predicts as it did with the rows of version 3."""
    url = f"duckdb:///{tmp_path / 'r.duckdb'}"
    _migrated_to(url, 8)
    reg = open_registry(url, migrate=False)
    with reg.connect() as conn:
        before = {p: w for p, w in conn.execute(sa.text(
            "SELECT pattern, weight FROM similarity_weights WHERE version = 3"))}
    reg.close()
    reg = open_registry(url)
    with reg.connect() as conn:
        assert not sa.inspect(conn).has_table("similarity_weights")
        assert migrate.current_version(conn) == migrate.latest_version()
    reg.close()
    mixed = refs({r: {"proc.cpu_util": c, "proc.wss_llc": w, "cachegrind.instructions": i}
                  for r, c, w, i in [("a", 1.0, 0.1, 5.0), ("b", 2.0, 8.0, 1.0), ("c", 1.5, 0.3, 9.0),
                                     ("d", 1.2, 6.0, 2.0)]},
                 {"a": {"n1": 1.0}, "b": {"n1": 3.0}, "c": {"n1": 1.2}, "d": {"n1": 2.5}})
    query = {"proc.cpu_util": 2.0, "proc.wss_llc": 7.0, "cachegrind.instructions": 5.0}
    shipped = SimilarityModel(k=2).fit(mixed)
    as_before = SimilarityModel(k=2, weights=before).fit(mixed)
    assert predict(shipped, query, nodes=("n1",)) == predict(as_before, query, nodes=("n1",))
    assert predict(shipped, query, nodes=("n1",)) != predict(SimilarityModel(k=2, weights={"*": 1.0}).fit(mixed),
                                                                   query, nodes=("n1",))


def test_the_weights_version_goes_with_the_model():
    assert SimilarityModel.version.endswith(f"+weights{WEIGHTS_VERSION}")
    assert SimilarityModel().fit(LINE).params()["weights_version"] == WEIGHTS_VERSION
    assert SimilarityModel(weights={"*": 1.0}).fit(LINE).params()["weights_version"] is None
    given = refs({"a": {"sar.x": 0.0}, "b": {"sar.x": 1.0}, "c": {"sar.x": 2.0}},
                 {"a": {"n1": 1.0}, "b": {"n1": 2.0}, "c": {"n1": 4.0}}, weights={"sar.*": 2.0})
    fitted = SimilarityModel().fit(given)
    assert fitted.params()["weights_version"] is None
    assert SimilarityModel.from_params(fitted.params()).weights_version is None


def test_params_round_trip_and_plugin(tmp_path):
    m = SimilarityModel(k=3, shrink=0.2, relevance_power=1, weights={"*": 2.0}).fit(LINE)
    params = m.params()
    assert params["features"]["sar.x"]["weight"] == pytest.approx(1.0)
    # stored in the registry (JSON, keys sorted, NaN as null), loaded, never re-fitted:
    # the same predictions, on references with gaps, a feature compared as a log, unsorted names
    gappy = refs({r: {"sar.z": v, "proc.a": w, "proc.ws": 10.0 ** (2 * i)} for i, (r, v, w) in
                  enumerate([("r4", 0.0, 5.0), ("r1", 1.0, np.nan), ("r3", 2.5, 1.0), ("r2", 3.0, 2.0)])},
                 {"r4": {"n2": 1.0, "n1": 2.0}, "r1": {"n2": 2.0, "n1": np.nan}, "r3": {"n2": 4.0, "n1": 1.5},
                  "r2": {"n2": 8.0, "n1": 3.0}})
    reg = open_registry(f"duckdb:///{tmp_path / 'r.duckdb'}")
    for model in (m, SimilarityModel(k=2).fit(gappy)):
        with reg.begin() as conn:
            uid = save_model(conn, model, "test")
        with reg.connect() as conn:
            again = load_model(conn, uid)
        for q in ({"sar.x": 1.7}, {"sar.z": 0.2, "proc.a": 4.0, "proc.ws": 50.0}, {"sar.z": 2.0}):
            assert predict(again, q) == predict(model, q)
    reg.close()
    assert SimilarityModel(k=2).fit(gappy).log_columns == ["proc.ws"]
    assert plugins.model_class("similarity", kind="projection") is SimilarityModel
    assert "heaviest features" in m.describe()
    with pytest.raises(ValueError):
        SimilarityModel(k=0)


def test_arrays_and_frames_give_the_same_model():
    """`nodereg match` hands the model arrays (Matrix), evaluate and plugins DataFrames: one answer."""
    f = LINE.features.rename(index={"a": "a2"})                    # rows of the ratios in another order
    y = LINE.log_ratio.rename(index={"a": "a2"}).iloc[::-1]
    from_frames = ReferenceSet("base", f, y)
    from_arrays = ReferenceSet("base", Matrix.of(f), Matrix.of(y))
    assert from_arrays.features.equals(f) and from_arrays.ratio_matrix.rows == list(f.index)
    assert np.allclose(from_frames.ratio_matrix.values, y.loc[f.index].to_numpy())
    q = {"sar.x": 1.7}
    for k in (1, 3):
        a = predict(SimilarityModel(k=k).fit(from_frames), q)
        b = predict(SimilarityModel(k=k).fit(from_arrays), q)
        assert all(a[n].predicted_s == pytest.approx(b[n].predicted_s) for n in ("n1", "n2"))
    # a reference whose ratios are missing altogether is still a neighbour, measured nowhere
    short = ReferenceSet("base", Matrix.of(f), Matrix.of(y.drop(index="d")))
    assert np.isnan(short.ratio_matrix.values[list(f.index).index("d")]).all()


def test_references_about_as_near_that_disagree_widen_the_interval_too():
    """Not tied, but c has more than half b's vote (the query lies between them, nearer b): b and c
    scale x2 and x4 on n1, so the interval covers both and the explanation names them; a query right
    at b gives c little of a vote: nothing is widened."""
    m = SimilarityModel(k=2, shrink=0.0, z_interval=0.0).fit(LINE)
    between = predict(m, {"sar.x": 1.4})["n1"]
    assert sorted(between.explanation["disagree"]["references"]) == ["b", "c"]
    assert between.low_s <= 20.0 and between.high_s >= 40.0
    at_b = predict(m, {"sar.x": 1.05})["n1"]
    # near b: only the small widening for its distance from b (test_interval_widens_with_distance...)
    assert "disagree" not in at_b.explanation and at_b.low_s == pytest.approx(at_b.predicted_s, rel=0.1)


def test_interval_widens_with_distance_to_the_nearest_reference():
    """On n1 the ratio doubles per unit of x between neighbouring references, so a query half a unit
    from the nearest one is that uncertain, one at a reference is not; on n2 every reference scales
    alike, so distance says nothing there and the interval stays a point (before the floor that
    `match` adds)."""
    m = SimilarityModel(k=1, shrink=0.0, z_interval=0.0).fit(LINE)
    at_c, off_c, further = (predict(m, {"sar.x": x}) for x in (2.0, 2.3, 2.5))
    assert at_c["n1"].low_s == pytest.approx(at_c["n1"].predicted_s)
    widths = [p["n1"].high_s / p["n1"].low_s for p in (at_c, off_c, further)]
    assert widths[0] < widths[1] < widths[2] and widths[2] > 1.5
    assert all(p["n2"].low_s == pytest.approx(p["n2"].predicted_s) for p in (at_c, off_c, further))
    again = SimilarityModel.from_params(json.loads(json.dumps(m.params(), allow_nan=True)))
    assert predict(again, {"sar.x": 2.5})["n1"].low_s == pytest.approx(further["n1"].low_s)


TIED = refs({"load": {"sar.x": 1.0, "sar.y": 5.0}, "triad": {"sar.x": 1.0, "sar.y": 5.0},
             "mbw1c": {"sar.x": 1.0, "sar.y": 5.0}, "peak": {"sar.x": 9.0, "sar.y": 0.0},
             "other": {"sar.x": 5.0, "sar.y": 2.0}},
            {"load": {"n1": 1.0, "n2": 2.0}, "triad": {"n1": 1.3, "n2": 2.0}, "mbw1c": {"n1": 1.6, "n2": 2.05},
             "peak": {"n1": 2.0, "n2": 2.0}, "other": {"n1": 1.5, "n2": 2.0}})


def test_tied_references_that_disagree_widen_the_interval_and_say_so():
    """Three references at the same signature scale 1.0x-1.6x on n1: the interval covers them all and
    the explanation names them; on n2 they agree (within 15%): nothing is widened there."""
    from registry.match.project import _tie_warnings

    m = SimilarityModel(k=3, shrink=0.0).fit(TIED)
    narrow = SimilarityModel(k=3, shrink=0.0, z_interval=0.0).fit(TIED)
    out = predict(narrow, {"sar.x": 1.0, "sar.y": 5.0})
    assert out["n1"].low_s == pytest.approx(10.0) and out["n1"].high_s == pytest.approx(16.0)
    assert out["n1"].low_s < out["n1"].predicted_s < out["n1"].high_s
    disagree = out["n1"].explanation["disagree"]
    assert sorted(disagree["references"]) == ["load", "mbw1c", "triad"]
    assert disagree["ratios"] == pytest.approx([1.0, 1.6])
    assert "disagree" not in out["n2"].explanation
    assert out["n2"].low_s == pytest.approx(out["n2"].predicted_s)    # z = 0 and no disagreement: no band
    wide = predict(m, {"sar.x": 1.0, "sar.y": 5.0})["n1"]
    assert wide.low_s <= 10.0 + 1e-9 and wide.high_s >= 16.0 - 1e-9
    (warning,) = _tie_warnings("solve", out)
    assert "phase solve" in warning and "on 1 node (" in warning and "x1.00 to x1.60" in warning
    # a query near one reference only: no tie, no warning
    alone = predict(m, {"sar.x": 9.0, "sar.y": 0.0})
    assert not any("disagree" in p.explanation for p in alone.values()) and _tie_warnings("solve", alone) == []
