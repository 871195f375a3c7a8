"""Estimation (tpi x iterations, or the ratio form), phases summed, remainder fallback, coverage,
and the CorredorModel adapter around it."""

import pandas as pd
import pytest

from registry.db import open_registry
from registry.errors import UserError
from registry.models.corredor.model import CorredorModel, PhasesQuery
from registry.models.corredor.estimate import estimate_phase
from registry.models.corredor.index import Phase, Profile, Stream
from registry.models.corredor.zones import load_zones
from registry.models.base import NEEDS_STREAMS, Query, ReferenceSet
from registry.models.plugins import model_class


@pytest.fixture(scope="module")
def zones(tmp_path_factory):
    reg = open_registry(f"duckdb:///{tmp_path_factory.mktemp('est') / 'r.duckdb'}")
    with reg.connect() as conn:
        z = load_zones(conn)
    reg.close()
    return z


def s(size_kb, stride=8, access="C"):
    return Stream.from_kb(size_kb, stride, 8, access)


SEQ = Profile("seq(1000,8)", (s(1000),), 0.002)           # matches the streaming phase
JUMP = Profile("jump(4000,600)", (s(4000, 600, "P"),), 1.0)   # matches the strided phase
NODE_TPI = {"seq(1000,8)": {"base": 0.002, "fast": 0.001, "slow": 0.004},
            "jump(4000,600)": {"base": 1.0, "fast": 0.8, "slow": 1.5}}

STREAMING = Phase("stream", (s(1000),), 0.002, 60.0, 30e9)          # 0.002 us x 30e9 = 60 s
STRIDED = Phase("strided", (s(4000, 600, "P"),), 1.0, 20.0)         # iterations unknown: ratio form
SERIAL = Phase("io", (s(10, 4096, "P"),), 50.0, 10.0, 0.2e6)        # no similar profile


def test_estimate_is_tpi_on_the_node_times_iterations():
    assert estimate_phase(STREAMING, SEQ, NODE_TPI, "slow", "base").estimate_s == pytest.approx(120.0)
    est = estimate_phase(STREAMING, SEQ, NODE_TPI, "fast", "base")
    assert (est.estimate_s, est.method, est.config) == (pytest.approx(30.0), "tpi x iterations", "seq(1000,8)")


def test_without_iterations_the_phase_time_scales_by_the_tpi_ratio():
    est = estimate_phase(STRIDED, JUMP, NODE_TPI, "slow", "base")
    assert est.estimate_s == pytest.approx(30.0) and est.method == "time x tpi ratio"
    # on the base node, the profile's own tpi stands in when node_tpi lacks the base entry
    assert estimate_phase(STRIDED, JUMP, {"jump(4000,600)": {"slow": 3.0}}, "slow", "base").estimate_s == 60.0
    missing = estimate_phase(STRIDED, JUMP, NODE_TPI, "other", "base")
    assert (missing.estimate_s, missing.method) == (None, "config not measured")


def test_the_ratio_form_can_be_asked_for_with_iterations_known():
    slower = Phase("stream", (s(1000),), 0.003, 90.0, 30e9)   # 1.5x its winner's tpi
    assert estimate_phase(slower, SEQ, NODE_TPI, "base", "base").estimate_s == pytest.approx(60.0)
    est = estimate_phase(slower, SEQ, NODE_TPI, "slow", "base", ratio=True)
    assert (est.estimate_s, est.method) == (pytest.approx(180.0), "time x tpi ratio")
    assert estimate_phase(slower, SEQ, NODE_TPI, "base", "base", ratio=True).estimate_s == pytest.approx(90.0)


def fitted(zones):
    return CorredorModel(zones).fit(profiles=[SEQ, JUMP], node_tpi=NODE_TPI, base_node="base")


def test_phases_are_summed_and_the_remainder_follows_the_projected_part(zones):
    preds = {p.node: p for p in fitted(zones).predict_phases([STREAMING, STRIDED, SERIAL], ["base", "fast", "slow"],
                                                             total_s=100.0)}
    slow = preds["slow"]
    # phases: 120 + 30 = 150 vs 60 + 20 = 80 on base; remainder 100 - 80 = 20 (io + the rest) x 150/80
    assert slow.explanation["coverage"] == pytest.approx(0.8)
    assert slow.explanation["remainder_base_s"] == pytest.approx(20.0)
    assert slow.predicted_s == pytest.approx(150 + 20 * 150 / 80)
    # interval: the remainder between unchanged (x1) and the slowest projected phase (x2)
    assert (slow.low_s, slow.high_s) == (pytest.approx(170.0), pytest.approx(190.0))
    fast = preds["fast"]
    assert fast.predicted_s == pytest.approx(30 + 16 + 20 * 46 / 80)
    assert (fast.low_s, fast.high_s) == (pytest.approx(46 + 20 * 0.5), pytest.approx(46 + 20))
    assert preds["base"].predicted_s == pytest.approx(100.0) and preds["base"].low_s == preds["base"].high_s
    phases = {p["phase"]: p for p in slow.explanation["phases"]}
    assert phases["stream"]["winner"] == "seq(1000,8)" and phases["stream"]["index"] == 125
    assert phases["io"]["winner"] is None and phases["io"]["method"] == "no similar profile"


def test_a_config_missing_on_a_node_lowers_that_nodes_coverage(zones):
    tpi = {**NODE_TPI, "jump(4000,600)": {"base": 1.0, "fast": 0.8}}
    model = CorredorModel(zones).fit(profiles=[SEQ, JUMP], node_tpi=tpi, base_node="base")
    preds = {p.node: p for p in model.predict_phases([STREAMING, STRIDED], ["fast", "slow"], total_s=80.0)}
    assert preds["fast"].explanation["coverage"] == pytest.approx(1.0) and not preds["fast"].warnings
    assert preds["slow"].explanation["coverage"] == pytest.approx(0.75)
    assert preds["slow"].predicted_s == pytest.approx(120 + 20 * 2)
    assert any("jump(4000,600)" in w and "slow" in w for w in preds["slow"].warnings)


def test_a_config_with_no_time_on_the_base_projects_with_the_remainder(zones):
    """A ratio to a time per iteration of 0 on the base node is no estimate (it divided by zero)."""
    tpi = {**NODE_TPI, "jump(4000,600)": {"base": 0.0, "slow": 1.5}}
    est = estimate_phase(STRIDED, JUMP, tpi, "slow", "base")
    assert (est.estimate_s, est.method) == (None, "no base time")
    model = CorredorModel(zones).fit(profiles=[SEQ, JUMP], node_tpi=tpi, base_node="base")
    (pred,) = model.predict_phases([STREAMING, STRIDED], ["slow"], total_s=80.0)
    assert pred.explanation["coverage"] == pytest.approx(0.75) and pred.predicted_s == pytest.approx(120 + 20 * 2)
    assert any("no time on the base node base" in w for w in pred.warnings)


def test_nothing_matched_keeps_the_base_time_and_warns(zones):
    (pred,) = fitted(zones).predict_phases([SERIAL], ["slow"], total_s=40.0)
    assert pred.predicted_s == 40.0 and pred.explanation["coverage"] == 0
    assert any("no phase could be projected" in w for w in pred.warnings)


def test_predict_takes_a_phases_query(zones):
    model = fitted(zones)
    (pred,) = model.predict(PhasesQuery.of("app", [STREAMING]), ["slow"])
    assert pred.predicted_s == pytest.approx(120.0) and pred.explanation["coverage"] == pytest.approx(1.0)
    with pytest.raises(UserError, match="stream descriptors"):
        model.predict(Query("app", pd.Series(dtype=float), 10.0), ["slow"])


def test_model_declares_its_needs_and_refuses_bad_fits(zones):
    assert model_class("corredor") is CorredorModel      # the entry point of pyproject.toml
    assert CorredorModel.name == "corredor" and NEEDS_STREAMS in CorredorModel.needs
    with pytest.raises(UserError, match="zones"):
        CorredorModel().fit(profiles=[SEQ], node_tpi=NODE_TPI, base_node="base")
    refs = ReferenceSet("base", pd.DataFrame(), pd.DataFrame())
    with pytest.raises(UserError, match="stream descriptors"):
        CorredorModel(zones).fit(refs)
    with pytest.raises(UserError, match="duplicate"):
        CorredorModel(zones).fit(profiles=[SEQ, SEQ], node_tpi=NODE_TPI, base_node="base")
    with pytest.raises(UserError, match="not fitted"):
        CorredorModel(zones).predict_phases([STREAMING], ["slow"])


def test_params_round_trip_the_thresholds(zones):
    model = fitted(zones)
    again = CorredorModel.from_params(model.params())
    assert again.zones == model.zones and again.rules == model.rules and again.base_node == "base"
    assert "zones version 1" in model.describe()
    ratio = CorredorModel(zones, estimate="ratio", unmatched="remainder")
    assert CorredorModel.from_params(ratio.params()).option_values() == {"estimate": "ratio", "unmatched": "remainder"}
