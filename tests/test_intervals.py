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
