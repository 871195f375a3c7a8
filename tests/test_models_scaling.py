"""The scaling models' maths: Amdahl, USL, Barnes's log-log regression, Downey/ADEPT, the ensemble, the
backtest."""

import json
from pathlib import Path

import numpy as np
import pytest

from registry.errors import UserError
from registry.models import downey
from registry.models.amdahl import AmdahlModel
from registry.models.backtest import backtest
from registry.models.base import CacheLevel, ScalingContext
from registry.models.downey import (DowneyModel, adjusted_weights, cross_size_guide_points, detect_anomalies,
                                    distance_weights, envelope, r_metric, raw_time, speedup)
from registry.models.ensemble import EnsembleModel
from registry.models.loglog import LogLogModel, fit_forms
from registry.models.usl import UslModel

# -- Amdahl -------------------------------------------------------------------------------------


def test_amdahl_recovers_serial_and_parallel_time():
    n = np.array([1, 2, 4, 8, 16])
    m = AmdahlModel().fit(n, 3.0 + 120.0 / n)
    assert m.serial_s == pytest.approx(3.0, rel=1e-9)
    assert m.parallel_s == pytest.approx(120.0, rel=1e-9)
    p = m.predict([64])[0]
    assert p.predicted_s == pytest.approx(3.0 + 120.0 / 64, rel=1e-9)
    assert p.low_s <= p.predicted_s <= p.high_s


def test_amdahl_interval_widens_with_noise_and_with_distance():
    rng = np.random.default_rng(3)
    n = np.repeat([1, 2, 4, 8], 3)
    t = (2.0 + 50.0 / n) * np.exp(rng.normal(0, 0.03, n.size))
    near, far = AmdahlModel().fit(n, t).predict([8, 256])
    assert near.high_s / near.low_s > 1.01
    assert far.high_s / far.low_s > near.high_s / near.low_s


def test_amdahl_exact_fit_warns_that_no_interval_is_estimated():
    m = AmdahlModel().fit([1, 2], [10.0, 6.0])
    assert any("interval is not estimated" in w for w in m.warnings)


def test_scaling_models_need_enough_thread_counts():
    with pytest.raises(UserError, match="different thread counts"):
        AmdahlModel().fit([4, 4, 4], [1.0, 1.1, 1.0])
    with pytest.raises(UserError, match=">= 3 different"):
        DowneyModel().fit([1, 2, 2], [4.0, 2.0, 2.1])
    with pytest.raises(UserError, match="positive"):
        LogLogModel().fit([1, 2, 4], [1.0, -1.0, 0.5])


# -- USL (Gunther) -------------------------------------------------------------------------------


def test_usl_recovers_sigma_kappa_and_the_optimum():
    n = np.array([1, 2, 4, 8, 16, 24])
    t1, sigma, kappa = 100.0, 0.05, 0.002
    t = t1 * (1 + sigma * (n - 1) + kappa * n * (n - 1)) / n            # Gunther's form
    m = UslModel().fit(n, t)
    assert m.sigma == pytest.approx(sigma, rel=1e-9) and m.kappa == pytest.approx(kappa, rel=1e-9)
    assert m.t1_s == pytest.approx(t1, rel=1e-9)
    assert m.peak_threads == pytest.approx(np.sqrt((1 - sigma) / kappa), rel=1e-9)   # sqrt(p / c)
    before, after = m.predict([20, 40])
    assert before.predicted_s == pytest.approx(t1 * (1 + sigma * 19 + kappa * 20 * 19) / 20, rel=1e-9)
    assert before.warnings == []
    assert after.predicted_s > before.predicted_s                      # retrograde beyond the optimum
    assert any("beyond the fitted optimum of 21.8 threads" in w for w in after.warnings)


def test_usl_without_contention_is_amdahl():
    n = np.array([1, 2, 4, 8, 16])
    t = 3.0 + 120.0 / n
    usl, amdahl = UslModel().fit(n, t), AmdahlModel().fit(n, t)
    assert usl.contention_s == pytest.approx(0.0, abs=1e-9) and usl.peak_threads == float("inf")
    assert [p.predicted_s for p in usl.predict([64])] == pytest.approx([p.predicted_s for p in amdahl.predict([64])])
    assert "never (no contention)" in usl.describe()


def test_usl_needs_three_thread_counts_and_round_trips():
    with pytest.raises(UserError, match=">= 3 different"):
        UslModel().fit([1, 2, 2], [4.0, 2.0, 2.1])
    m = UslModel().fit([1, 2, 4, 8], [10.0, 5.6, 3.5, 2.9])
    back = UslModel.from_params(m.params())
    assert back.predict([32])[0].predicted_s == pytest.approx(m.predict([32])[0].predicted_s, rel=1e-12)


# -- Barnes log-log ------------------------------------------------------------------------------


def test_loglog_recovers_known_coefficients_with_an_input_variable():
    """The golden test of the notes: synthetic log2-space data with known b and c."""
    x = np.repeat([100.0, 200.0, 400.0, 800.0], 5)
    q = np.tile([2.0, 4.0, 8.0, 16.0, 32.0], 4)
    b1, c0, c1, c2 = 0.9, 1.5, -0.95, 0.04
    t = 2 ** (c0 + b1 * np.log2(x) + c1 * np.log2(q) + c2 * np.log2(q) ** 2)
    m = LogLogModel().fit(q, t, ScalingContext(inputs={"n": x}))
    coefs = m.tot.coefficients
    assert m.tot.form == "Q"
    assert coefs["c0"] == pytest.approx(c0, abs=1e-9)
    assert coefs["b[n]"] == pytest.approx(b1, abs=1e-9)
    assert coefs["c1"] == pytest.approx(c1, abs=1e-9)
    assert coefs["c2"] == pytest.approx(c2, abs=1e-9)
    p = m.predict([128], inputs={"n": 300})[0]
    expected = 2 ** (c0 + b1 * np.log2(300) + c1 * 7 + c2 * 49)
    assert p.predicted_s == pytest.approx(expected, rel=1e-9)


def test_loglog_prefers_the_linear_form_when_the_quadratic_term_does_not_pay():
    q = np.repeat([1, 2, 4, 8, 16], 4).astype(float)
    noise = np.tile([0.02, -0.02, 0.01, -0.01], 5)   # repetitions scatter around a straight line
    t = 2 ** (6.0 - 0.8 * np.log2(q) + noise)
    fits = fit_forms(q, t, {})
    assert fits["L"].fit.sse == pytest.approx(fits["Q"].fit.sse)   # the quadratic term explains nothing ...
    assert fits["L"].rmse < fits["Q"].rmse                        # ... and the RMSE charges it a parameter
    m = LogLogModel().fit(q, t)
    assert m.tot.form == "L"
    assert m.tot.coefficients["c1"] == pytest.approx(-0.8, abs=1e-9)


def test_loglog_forced_form_and_missing_input_variable():
    q = np.array([1.0, 2, 4, 8])
    m = LogLogModel(form="Q").fit(q, 100 / q**0.9)
    assert m.tot.form == "Q"
    with pytest.raises(UserError, match="form must be"):
        LogLogModel(form="cubic")
    m = LogLogModel().fit(q, 100 / q, ScalingContext(inputs={"size": np.array([10.0, 10, 20, 20])}))
    with pytest.raises(UserError, match="input variable"):
        m.predict([16])


def test_loglog_sep_separates_when_communication_grows():
    q = np.array([2.0, 4, 8, 16, 32])
    comp = 2 ** (8.0 - 1.0 * np.log2(q))          # perfect strong scaling of computation
    comm = 2 ** (1.0 + 0.5 * np.log2(q))          # communication growing with q
    m = LogLogModel().fit(q, comp + comm, ScalingContext(comm_s={"MAX": comm}))
    assert m.technique == "SEP"
    assert m.sep["method"] == "MAX"
    assert m.sep["comp"].coefficients["c1"] == pytest.approx(-1.0, abs=1e-9)
    assert m.sep["comm"].coefficients["c1"] == pytest.approx(0.5, abs=1e-9)
    p = m.predict([256])[0]
    assert p.predicted_s == pytest.approx(2 ** (8 - 8) + 2 ** (1 + 4), rel=1e-9)
    assert sum(c["name"].startswith("SEP") for c in m.candidates) == 4


def test_loglog_keeps_tot_for_compute_bound_programs():
    q = np.array([2.0, 4, 8, 16])
    comp = 1000 / q
    comm = 0.5 / q                                 # tiny and shrinking
    m = LogLogModel().fit(q, comp + comm, ScalingContext(comm_s={"CP": comm}))
    assert m.technique == "TOT"
    assert any("SEP not needed" in w for w in m.warnings)


def test_loglog_warns_about_superlinear_speedup():
    q = np.array([1.0, 2, 4, 8])
    t = np.array([100.0, 45.0, 20.0, 9.0])          # > 2x per doubling
    m = LogLogModel().fit(q, t)
    assert any("superlinear speed-up measured from 1 to 2" in w for w in m.warnings)
    p = m.predict([32])[0]
    assert any("predicts superlinear speed-up at 32" in w for w in p.warnings)


def test_loglog_warns_when_the_working_set_crosses_a_cache_to_the_target():
    l2 = CacheLevel(level=2, size_bytes=1 << 20, shared_by=1, instances=64)
    q = np.array([1.0, 2, 4, 8])
    ctx = ScalingContext(working_set_bytes=24 * 2**20, caches=[l2])   # fits 1 MiB x n only from 24 threads
    m = LogLogModel().fit(q, 100 / q, ctx)
    near, far = m.predict([16, 32])
    assert not any("crosses the L2" in w for w in near.warnings)
    assert any("crosses the L2" in w for w in far.warnings)
    assert not any("inside the training range" in w for w in m.warnings)


def test_loglog_warns_when_the_working_set_crosses_a_cache_inside_the_training_range():
    l3 = CacheLevel(level=3, size_bytes=8 << 20, shared_by=4, instances=4)
    m = LogLogModel().fit([1, 2, 4, 8], [100.0, 50, 25, 12.5],
                          ScalingContext(working_set_bytes=12 * 2**20, caches=[l3]))
    assert any("inside the training range" in w for w in m.warnings)


def test_cache_capacity_counts_the_instances_threads_reach():
    l3 = CacheLevel(level=3, size_bytes=32, shared_by=8, instances=2)
    assert l3.capacity(1) == 32 and l3.capacity(8) == 32
    assert l3.capacity(9) == 64 and l3.capacity(64) == 64


def test_loglog_round_trip():
    q = np.array([2.0, 4, 8, 16, 32])
    comm = 2 ** (1.0 + 0.5 * np.log2(q))
    m = LogLogModel().fit(q, 256 / q + comm, ScalingContext(comm_s={"MAX": comm}))
    back = LogLogModel.from_params(m.params())
    assert back.describe() == m.describe()
    assert [p.predicted_s for p in back.predict([64, 128])] == [p.predicted_s for p in m.predict([64, 128])]


# -- Downey / ADEPT ------------------------------------------------------------------------------

GOLDEN_DOC = json.loads((Path(__file__).parents[1] / "scripts" / "data" / "downey_golden.json").read_text())
GOLDEN = {(r["A"], r["sigma"]): r["speedup"] for r in GOLDEN_DOC["rows"]}  # Figure 2 settings (models.md)


@pytest.mark.parametrize(("params", "row"), list(GOLDEN.items()))
def test_downey_reproduces_the_golden_speedup_table(params, row):
    got = np.round(speedup(GOLDEN_DOC["n"], *params), 2)
    assert got.tolist() == pytest.approx(row, abs=1e-9)


def test_downey_raw_time_is_t1_over_speedup_and_the_modes_meet_at_sigma_one():
    n = np.array([1, 3, 10, 50, 200])
    assert raw_time(n, 40, 0.5) == pytest.approx(40 / speedup(n, 40, 0.5))
    assert raw_time(n, 40, 3.0) == pytest.approx(40 * 4 / speedup(n, 40, 3.0))
    assert speedup(n, 40, 1.0) == pytest.approx(speedup(n, 40, 1.0 + 1e-12))


def test_downey_normalised_fit_recovers_an_instance_and_extrapolates():
    n = np.array([1, 2, 4, 6, 8, 10, 12, 16])
    m = DowneyModel().fit(n, 50 / speedup(n, 12, 0.5))
    for p in m.predict([20, 32]):
        assert p.predicted_s == pytest.approx(50 / speedup(p.threads, 12, 0.5), rel=1e-4)
        assert p.low_s <= p.predicted_s <= p.high_s
    ref = m.instances[16]
    assert ref["A"] == pytest.approx(12, rel=1e-3) and ref["sigma"] == pytest.approx(0.5, abs=1e-3)


def test_downey_raw_form_uses_the_envelope_and_recovers_the_instance():
    n = np.array([2, 4, 8, 16, 32])
    t = raw_time(n, 120, 0.6)
    env = envelope(n, t, 0.1)
    assert any(p.a_lo <= 120 <= p.a_hi and p.s_lo <= 0.6 <= p.s_hi for p in env)
    assert all(not (o != p and o.contains(p)) for o in env for p in env)
    m = DowneyModel(form="raw").fit(n, t)
    p = m.predict([128])[0]
    assert p.predicted_s == pytest.approx(raw_time(128, 120, 0.6), rel=2e-3)


def test_downey_raw_form_refuses_times_below_one_unit():
    with pytest.raises(UserError, match="T\\(inf\\) = 1"):
        DowneyModel(form="raw").fit([1, 2, 4], [2.0, 1.2, 0.8])


def test_downey_distance_weights():
    w = distance_weights(np.array([2.0, 4, 8, 16]), 32, q=2)
    assert w.tolist() == [2 * 30 - 30, 2 * 30 - 28, 2 * 30 - 24, 2 * 30 - 16]


def test_r_metric_flags_and_downweights_an_anomalous_run():
    n = np.array([2.0, 4, 8, 16, 32, 64])
    t = 100 / speedup(n, 200, 1.5)
    clean = r_metric(n, t)
    assert np.all(clean[1:] <= clean[:-1] * 1.1)
    t[3] *= 0.8                                      # the 16-thread run is too fast
    found = detect_anomalies(n, t, eps=0.1)
    assert list(found.deviation) == [3]
    d = found.deviation[3]
    assert 0 < d <= 10
    w = adjusted_weights(np.ones(6), found.deviation, theta=5)
    assert w[3] == pytest.approx(max(0.0, (5 - d) / 5)) and w[0] == 1
    m = DowneyModel().fit(n, t)
    assert any("16 threads looks anomalous" in x for x in m.warnings)


def test_r_metric_recognises_a_stepwise_pattern():
    n = np.array([1.0, 2, 3, 4, 5, 6, 7, 8])
    t = 80 / np.where(n <= 5, n, 1.6 * n)              # a cache step between 5 and 6 threads
    found = detect_anomalies(n, t, eps=0.1)
    assert found.phase_starts == [5] and not found.deviation
    m = DowneyModel().fit(n, t)
    w = m._weights(8)
    assert np.all(w[:5] == 0) and np.all(w[5:] > 0)


def test_downey_reliability_warnings():
    n = np.array([1, 2, 4, 8])
    linear = DowneyModel().fit(n, 100 / speedup(n, 120, 0.6)).predict([64])[0]
    assert any("runner-up instance" in w for w in linear.warnings)
    m = DowneyModel(form="raw").fit(np.array([2, 4, 8, 16, 32]), raw_time(np.array([2, 4, 8, 16, 32]), 120, 0.6))
    assert any("linear section" in w for w in m.predict([64])[0].warnings)
    bumpy = np.array([100.0, 40.0, 35.0, 12.0, 11.0])
    assert any("high fitting error" in w for w in DowneyModel().fit([1, 2, 4, 8, 16], bumpy).predict([32])[0].warnings)


def test_downey_round_trip_keeps_fitted_instances():
    n = np.array([1, 2, 4, 8, 16])
    m = DowneyModel().fit(n, 30 / speedup(n, 10, 0.8))
    first = m.predict([24])
    back = DowneyModel.from_params(m.params())
    assert back.instances.keys() == m.instances.keys()
    assert back.predict([24])[0].predicted_s == first[0].predicted_s
    assert back.describe() == m.describe()


def test_cross_size_guide_points_scale_the_base_size_runs():
    n, t, guide = cross_size_guide_points([1, 2, 4, 8], [10.0, 5.0, 2.6, 1.5], [1, 2], [40.0, 20.5])
    assert n.tolist() == [1, 2, 4, 8]
    assert guide.tolist() == [False, False, True, True]
    assert t[2:] == pytest.approx([2.6 * 4, 1.5 * 4])
    with pytest.raises(UserError, match="one thread count measured for both"):
        cross_size_guide_points([1, 2], [1.0, 0.5], [4, 8], [1.0, 0.6])


def test_backtest_flags_runs_that_do_not_follow_one_curve():
    n = np.array([1, 2, 4, 8, 12, 16])
    smooth = backtest(AmdahlModel, n, 1 + 99 / n)
    assert smooth.median_error < 1e-6 and smooth.warning() is None
    broken = backtest(AmdahlModel, n, np.array([100, 50, 25, 13, 30, 40.0]))
    assert broken.targets == [12, 16] and "median error" in broken.warning()
    assert backtest(DowneyModel, np.array([1, 2, 4]), np.array([3.0, 2, 1.5])) is None


def test_loglog_warning_paths_for_sep_input_and_exact_fits():
    q = np.array([2.0, 4, 8])
    m = LogLogModel().fit(q, 100 / q, ScalingContext(comm_s={"MAX": np.array([1.0, 0.0, 1.0])}))
    assert any("SEP/MAX: communication must be > 0" in w for w in m.warnings) and m.technique == "TOT"
    exact = LogLogModel().fit([1, 2], [10.0, 5.0])
    assert any("no log-RMSE and no interval" in w for w in exact.warnings)
    with pytest.raises(UserError, match="one positive value per run"):
        LogLogModel().fit(q, 100 / q, ScalingContext(inputs={"size": np.array([1.0, 2.0])}))


def test_downey_anomaly_notes_when_runs_are_too_few_to_tell():
    few = detect_anomalies(np.array([1.0, 2, 4]), np.array([10.0, 6.0, 2.0]), eps=0.1)
    assert not few.deviation and ">= 4 runs are needed" in few.notes[0]
    unexplained = detect_anomalies(np.array([1.0, 2, 4, 8]), np.array([17.5, 10.68, 4.72, 1.38]), eps=0.1)
    assert not unexplained.deviation and not unexplained.phase_starts
    assert ">= 5 runs are needed" in unexplained.notes[0]


def test_downey_raw_form_falls_back_to_the_whole_plane_without_an_envelope(monkeypatch):
    """Real runs always produced an envelope by +-80 %; the fallback is exercised by taking it away."""
    monkeypatch.setattr(downey, "envelope", lambda n, t, delta: [])
    n = np.array([2.0, 4, 8, 16, 32])
    p = DowneyModel(form="raw", grid=100).fit(n, raw_time(n, 120, 0.6)).predict([64])[0]
    assert any("no envelope instance" in w for w in p.warnings)
    assert p.predicted_s == pytest.approx(raw_time(64, 120, 0.6), rel=1e-6)


# -- ensemble ------------------------------------------------------------------------------------


def test_ensemble_is_the_geometric_mean_of_its_members():
    n = np.array([1, 2, 3, 4, 6, 8])
    t = 2.0 + 60.0 / n + 0.15 * (n - 1)
    targets = [12, 16]
    e = EnsembleModel().fit(n, t)
    members = [cls().fit(n, t).predict(targets) for cls in (AmdahlModel, UslModel, LogLogModel, DowneyModel)]
    for i, p in enumerate(e.predict(targets)):
        values = [m[i].predicted_s for m in members]
        assert p.predicted_s == pytest.approx(np.exp(np.mean(np.log(values))), rel=1e-9)
        assert p.low_s <= min(values) and p.high_s >= max(values)      # the interval spans the members
    assert "geometric mean of amdahl, usl, loglog, downey" in e.describe()


def test_ensemble_flags_disagreement_and_leaves_out_members_that_cannot_fit():
    n = np.array([1, 2, 4, 8])
    t = np.array([10.0, 5.2, 3.0, 2.6])                    # flattening fast: the members part ways at 64
    far = EnsembleModel(["amdahl", "usl", "loglog"]).fit(n, t).predict([64])[0]
    assert any("the models disagree by" in w for w in far.warnings)
    two = EnsembleModel().fit([1, 2], [10.0, 5.5])
    assert sorted(two.fitted) == ["amdahl", "loglog"]
    assert any("usl left out" in w for w in two.warnings) and any("downey left out" in w for w in two.warnings)
    with pytest.raises(UserError, match="ensemble members must be among"):
        EnsembleModel(["amdahl", "bogus"])
    with pytest.raises(UserError, match="not fitted"):
        EnsembleModel().predict([4])
