"""Calibrated intervals, one rule (issue 28, item 3): never zero-width on a target node, the base time's
noise included, conformal calibration on checked predictions said by `match`, coverage reported by
`nodereg accuracy` per model and version."""

import json
import math
from datetime import timedelta

import pytest
import sqlalchemy as sa
from conftest import both_backends

from registry.db import open_registry, utcnow
from registry.db.write import insert_rows, new_uid
from registry.io.tracefile import Phase, Trace
from registry.models import intervals
from registry_data import three_node_registry


def test_interval_arithmetic():
    low, high = intervals.combine(10.0, 10.0, 10.0)                     # a point gets the floor
    assert low == pytest.approx(10 * math.exp(-intervals.MIN_HALF_WIDTH)) and high > 10.0
    low, high = intervals.combine(10.0, 9.0, 12.0, 0.1)                 # root sum of squares, per side
    assert math.log(10 / low) == pytest.approx(math.hypot(math.log(10 / 9), 0.1))
    assert math.log(high / 10) == pytest.approx(math.hypot(math.log(1.2), 0.1))
    assert intervals.score(10.0, 9.0, 12.0, 12.0) == pytest.approx(1.0)
    assert intervals.score(10.0, 9.0, 12.0, 12.0, applied_scale=2.0) == pytest.approx(2.0)
    # 9 scores 0.1 .. 0.9 and one of 5: the 80% quantile is the ceil(11 * 0.8) = 9th smallest
    assert intervals.conformal_scale([0.1 * i for i in range(1, 10)] + [5.0]) == pytest.approx(0.9)
    assert intervals.base_noise([10.0]) == 0.0 and intervals.base_noise([9.0, 11.0]) > 0
    # a calibration scale below 1 narrows the model's interval, never below the floor
    low, high = intervals.scaled(10.0, 5.0, 20.0, 0.5)
    assert (low, high) == (pytest.approx(10 / 2 ** 0.5), pytest.approx(10 * 2 ** 0.5))
    low, high = intervals.scaled(10.0, 9.5, 10.6, 0.1)
    assert (low, high) == (pytest.approx(10 * math.exp(-intervals.MIN_HALF_WIDTH)),
                           pytest.approx(10 * math.exp(intervals.MIN_HALF_WIDTH)))


def _blind_trace():
    """A trace whose only phase shares no feature with the references (no signature at all)."""
    return Trace(name="app", node="b", host="h", command=["app"], exit_status=0, status="ok", wall_s=10.0,
                 interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc"],
                 phases=[Phase("short", "auto", 0.0, 10.0, 1.0, 10.0, signature={"proc": {"cpu_util": 1.98}})])


def test_no_shared_feature_gets_a_warning_and_an_interval_not_a_point(cli, db_url):
    three_node_registry(db_url, _blind_trace())
    doc = json.loads(cli("match", "app", "--json", "--no-store").out)
    for p in doc["predictions"]:
        assert p["high_s"] / p["low_s"] > 1.05, p                   # never zero-width
    assert any("shares no usable feature with the references" in w for w in doc["warnings"])
    assert doc["calibration"]["method"] == "uncalibrated" and doc["calibration"]["checks"] == 0


def test_match_says_its_calibration_and_accuracy_its_coverage(cli, db_url):
    three_node_registry(db_url)
    assert cli("match", "app").code == 0                            # stores a set (uncalibrated)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        made = conn.execute(sa.text("SELECT max(created_at) FROM predictions")).scalar_one()
        rows = conn.execute(sa.text("SELECT p.app_id, p.node_id, p.predicted_s, n.n_cpus FROM predictions p "
                                    "JOIN nodes n ON n.node_id = p.node_id WHERE p.node_id <> p.base_node_id")).all()
        runs = []
        for i, (app_id, node_id, predicted, cpus) in enumerate(rows):
            runs.append({"app_id": app_id, "node_id": node_id, "threads": cpus, "time_s": predicted * (1.02 + i)})
        insert_rows(conn, "runs", [{"uid": new_uid(), "source": "cli", "created_at": made + timedelta(seconds=1),
                                    **r} for r in runs])
    reg.close()
    acc = json.loads(cli("accuracy", "--json").out)
    summary = acc["summary"][0]
    # fast measured 2% above its prediction (inside), one 2.02x (outside)
    assert (summary["intervals"], summary["coverage"], summary["nominal"]) == (2, 0.5, 0.8)
    text = cli("match", "app", "--no-store").out
    assert "uncalibrated (2 checked predictions of similarity" in text
    # ten more checked sets: enough for a conformal scale
    reg = open_registry(db_url)
    with reg.begin() as conn:
        base = conn.execute(sa.text("SELECT * FROM predictions WHERE node_id <> base_node_id")).mappings().all()
        copies = []
        for k in range(5):
            for row in base:
                copies.append({**{c: row[c] for c in row.keys() if c != "prediction_id"}, "uid": new_uid(),
                               "inputs_digest": f"copy{k}", "created_at": made - timedelta(seconds=k + 1)})
        insert_rows(conn, "predictions", copies)
    reg.close()
    res = cli("match", "app", "--json", "--no-store")
    cal = json.loads(res.out)["calibration"]
    assert cal["method"] == "conformal" and cal["checks"] == 12 and cal["scale"] > 1.0
    assert "by conformal calibration on 12 checked predictions" in cli("match", "app", "--no-store").out


@both_backends
def test_profile_dispersion_widens_the_nodes_it_comes_from(cli, db_url):
    """A node whose profile's repetitions scatter (stored cv) is predicted less surely; the other
    nodes keep their intervals. A noisy base profile widens every target, not the base's own row."""
    three_node_registry(db_url)

    def widths() -> dict[str, float]:
        doc = json.loads(cli("match", "app", "--json", "--no-store").out)
        return {p["node"]: math.log(p["high_s"] / p["low_s"]) for p in doc["predictions"]}

    def set_cv(node: str, cv: float) -> None:
        reg = open_registry(db_url)
        with reg.begin() as conn:
            conn.execute(sa.text("UPDATE profile_runs SET cv = :cv WHERE profile_id IN (SELECT p.profile_id FROM "
                                 "profiles p JOIN nodes n ON n.node_id = p.node_id WHERE n.name = :n)"),
                         {"cv": cv, "n": node})
        reg.close()

    for node in ("b", "fast", "one"):
        set_cv(node, 0.0)
    quiet = widths()
    set_cv("fast", 0.3)
    noisy = widths()
    assert noisy["fast"] > quiet["fast"] + 0.3          # 1.28 x 0.3 added in quadrature to a narrower one
    assert noisy["one"] == pytest.approx(quiet["one"]) and noisy["b"] == pytest.approx(quiet["b"])
    set_cv("b", 0.3)
    base_noisy = widths()
    assert base_noisy["one"] > quiet["one"] + 0.3 and base_noisy["b"] == pytest.approx(quiet["b"])


def _registry_with_a_partial_node(db_url, monkeypatch):
    """three_node_registry, except that node `one` measured only the compute kernel of the base's four
    (as Spare Cores types without the 85-stressor task or membench measured few of the suite's configs)."""
    import registry_data

    from registry.trace import store

    reg = open_registry(db_url)
    with reg.begin() as conn:
        registry_data.profile_at_speeds(conn, "b", 2, base=True)
        registry_data.profile_at_speeds(conn, "fast", 2, base=False)
        with monkeypatch.context() as m:
            m.setattr(registry_data, "KERNELS", registry_data.KERNELS[:1])
            registry_data.profile_at_speeds(conn, "one", 1, base=False)
        store.save(conn, registry_data.three_phase_trace())
    reg.close()


def test_nodes_that_measured_part_of_the_base_profile_are_a_group_of_their_own(cli, db_url, monkeypatch):
    """Issue 28, item 3: on the imported types the model's own intervals were 30x too wide where the
    node measured the whole suite and too narrow where it measured a few configs: one conformal
    scale cannot fit both, so each group has its own, and each prediction says its group."""
    _registry_with_a_partial_node(db_url, monkeypatch)
    doc = json.loads(cli("match", "app", "--json", "--no-store").out)
    groups = {p["node"]: p["interval_group"] for p in doc["predictions"]}
    assert groups == {"b": "nodereg:full", "fast": "nodereg:full", "one": "nodereg:partial"}
    assert set(doc["calibration"]["groups"]) == {"nodereg:full", "nodereg:partial"}
    assert cli("match", "app").code == 0
    reg = open_registry(db_url)
    with reg.connect() as conn:
        said = dict(conn.execute(sa.text("SELECT n.name, p.explanation_json FROM predictions p JOIN nodes n "
                                         "ON n.node_id = p.node_id")).all())
    reg.close()
    assert json.loads(said["one"])["interval_group"] == "nodereg:partial"
    assert json.loads(said["fast"])["interval_group"] == "nodereg:full"


def test_a_shipped_calibration_scales_its_group_until_the_registry_has_checked_enough(cli, db_url, monkeypatch):
    """A group with fewer than MIN_CHECKS checked predictions in the registry takes the calibration
    shipped with nodereg for the same model version (scripts/validate_sparecores.py
    --calibration-out); another version's is never used; the registry's own checks replace it."""
    from registry.match import calibration
    from registry.models.similarity import SimilarityModel

    _registry_with_a_partial_node(db_url, monkeypatch)

    def widths() -> dict[str, float]:
        doc = json.loads(cli("match", "app", "--json", "--no-store").out)
        return {p["node"]: math.log(p["high_s"] / p["predicted_s"]) for p in doc["predictions"]}, doc

    own, _ = widths()
    entry = {"checks": 500, "scale": 2.0, "measured_by": "a test"}
    monkeypatch.setattr(calibration, "_shipped_entries", lambda: {("similarity", "0.0.1", "nodereg:partial"): entry})
    assert widths()[0] == own                                           # another version's: not used
    monkeypatch.setattr(calibration, "_shipped_entries",
                        lambda: {("similarity", SimilarityModel.version, "nodereg:partial"): entry})
    shipped, doc = widths()
    assert shipped["one"] == pytest.approx(2.0 * own["one"]) and shipped["fast"] == pytest.approx(own["fast"])
    by_group = doc["calibration"]["groups"]
    assert by_group["nodereg:partial"]["source"] == "shipped" and by_group["nodereg:partial"]["scale"] == 2.0
    assert by_group["nodereg:full"]["method"] == "uncalibrated"
    text = cli("match", "app", "--no-store").out
    assert "intervals on nodereg:partial nodes: 80% by the conformal calibration shipped with nodereg" in text
    # twelve checked predictions of `one` in this registry: its own scale replaces the shipped one
    assert cli("match", "app").code == 0
    reg = open_registry(db_url)
    with reg.begin() as conn:
        row = conn.execute(sa.text("SELECT p.* FROM predictions p JOIN nodes n ON n.node_id = p.node_id "
                                   "WHERE n.name = 'one'")).mappings().one()
        copies = [{**{c: row[c] for c in row.keys() if c != "prediction_id"}, "uid": new_uid(),
                   "inputs_digest": f"copy{k}", "created_at": row["created_at"] - timedelta(seconds=k + 1)}
                  for k in range(11)]
        insert_rows(conn, "predictions", copies)
        insert_rows(conn, "runs", [{"uid": new_uid(), "source": "cli", "app_id": row["app_id"], "node_id": row["node_id"],
                                    "threads": 1, "time_s": row["predicted_s"] * 1.01,
                                    "created_at": row["created_at"] + timedelta(seconds=1)}])
    reg.close()
    cal = json.loads(cli("match", "app", "--json", "--no-store").out)["calibration"]["groups"]["nodereg:partial"]
    assert (cal["source"], cal["checks"]) == ("registry", 12) and cal["scale"] != 2.0


def test_the_validation_scores_and_holds_out_program_families(monkeypatch):
    """scripts/validate_sparecores.py's calibration: scores against the model's own interval (the
    scale match applied divided out), relative to each group's same-CPU type; a family is scored
    with the scale of the other families' scores."""
    from script_module import script_module

    with script_module("validate_sparecores") as v:
        doc = {"predictions": [
            {"node": "same", "predicted_s": 2.0, "low_s": 1.0, "high_s": 4.0, "interval_group": "s:full", "interval_scale": 1.0},
            {"node": "x", "predicted_s": 4.0, "low_s": 2.0, "high_s": 16.0, "interval_group": "s:full", "interval_scale": 2.0},
            {"node": "y", "predicted_s": 4.0, "low_s": 3.0, "high_s": 5.0, "interval_group": "s:partial"}]}
        meas = {"same": 1.0, "x": 4.0, "y": 2.0, "other": 1.0}
        got = v.scores(doc, meas, {"full suite": "same", "partial suite": "other"})
        # x: ratio 2 predicted, 4 measured: ln 2 above, own upper half-width ln(16/4) / 2 = ln 2: score 1.0
        assert got["s:full"] == [pytest.approx(1.0)] and "s:partial" not in got   # y's same-CPU type was not predicted
        results = [{"program": f"{fam}-{i}:compress", "scores": {"s:full": [0.5 if fam == "a" else 3.0] * 4}}
                   for fam in "ab" for i in range(3)]
        cal = v.held_out(results)["s:full"]
        assert cal["programs"] == 6 and cal["checks"] == 24
        # held out, family a gets b's scale (3.0: all of a inside), b gets a's (0.5: none of b)
        assert cal["held_out_inside"] == 0.5 and cal["held_out_program_median"] == 0.5
        assert cal["scale"] == 3.0 and cal["own_inside"] == 0.5
        # what --calibration-out writes is what `match` reads
        written = v.shipped_entries({"s:full": cal}, programs=6)
    from registry.match import calibration
    from registry.models.similarity import SimilarityModel

    entries = {(e["model"], e["version"], e["group"]): e for e in written["entries"]}
    monkeypatch.setattr(calibration, "_shipped_entries", lambda: entries)
    read = calibration.shipped("similarity", SimilarityModel.version, "s:full")
    assert (read.scale, read.checks, read.calibrated) == (3.0, 24, True) and "6 programs" in read.shipped


def test_validate_sparecores_compares_ratios_to_a_single_type_or_a_same_cpu_group():
    """scripts/validate_sparecores.py's comparison: ratios to one same-CPU type carry that type's own
    measurement into every node's error; to the geometric mean of a group of them, one type measured
    twice too slow moves the anchor by a third of that (three types), not all of it."""
    from script_module import script_module

    with script_module("validate_sparecores") as v:
        nodes = {f"n{i}": 1.0 + i for i in range(5)}
        pred = {**nodes, "a": 1.0, "b": 1.0, "c": 1.0}
        meas = {**nodes, "a": 2.0, "b": 1.0, "c": 1.0}        # type a ran the app twice as slow as predicted
        one = v.compare(pred, meas, "a")
        group = v.compare(pred, meas, ["a", "b", "c"])
        assert one["nodes"] == 7 and group["nodes"] == 5       # the anchors are not scored
        assert one["median_abs_error"] == pytest.approx(1.0)   # every ratio off by a's factor 2
        assert group["median_abs_error"] == pytest.approx(2 ** (1 / 3) - 1)
        assert group["spearman"] == pytest.approx(1.0)
        assert v.compare(pred, meas, ["x", "y"]) is None       # no anchor measured: nothing to compare


@both_backends
def test_accuracy_reports_the_coverage_of_each_interval_group(cli, db_url, monkeypatch):
    """`nodereg accuracy` says how each group's intervals held (each is calibrated apart), beside
    the coverage per model; predictions stored without a group (older ones) count in no group."""
    _registry_with_a_partial_node(db_url, monkeypatch)
    assert cli("match", "app").code == 0
    reg = open_registry(db_url)
    with reg.begin() as conn:
        rows = conn.execute(sa.text("SELECT p.app_id, p.node_id, p.predicted_s, p.high_s, p.created_at, n.n_cpus, "
                                    "n.name FROM predictions p JOIN nodes n ON n.node_id = p.node_id "
                                    "WHERE p.node_id <> p.base_node_id")).all()
        # fast measured at its prediction (inside), one at twice its interval's high end (outside)
        insert_rows(conn, "runs", [{"uid": new_uid(), "source": "cli", "app_id": app_id, "node_id": node_id,
                                    "threads": cpus, "time_s": predicted if name == "fast" else 2 * high,
                                    "created_at": made + timedelta(seconds=1)}
                                   for app_id, node_id, predicted, high, made, cpus, name in rows])
    reg.close()
    summary = json.loads(cli("accuracy", "--json").out)["summary"][0]
    assert summary["coverage"] == 0.5
    assert summary["coverage_by_group"] == {"nodereg:full": {"intervals": 1, "coverage": 1.0},
                                            "nodereg:partial": {"intervals": 1, "coverage": 0.0}}
    out = cli("accuracy").out
    assert "coverage per interval group" in out and "nodereg:partial" in out
    from fastapi.testclient import TestClient

    from registry.web.app import create_app

    with TestClient(create_app(db_url), raise_server_exceptions=False) as client:    # the web view's accuracy page
        page = client.get("/accuracy")
    assert page.status_code == 200 and "Interval coverage per group of nodes" in page.text
    assert "nodereg:partial" in page.text
