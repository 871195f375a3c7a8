"""doctor: finds orphans, incomplete rows and drift; --fix repairs what can be repaired."""

import json

import sqlalchemy as sa
from conftest import both_backends
from registry_data import populate

from registry.db import open_registry


def _break(db_url, *statements):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        populate(conn)
        for stmt in statements:
            conn.execute(sa.text(stmt))
    reg.close()


@both_backends
def test_clean_registry(cli, db_url):
    _break(db_url)
    res = cli("doctor")
    assert res.code == 0 and "no problems" in res.out


@both_backends
def test_orphans_found_and_fixed(cli, db_url):
    _break(db_url, "DELETE FROM traces", "DELETE FROM profile_reps WHERE rep = 0 AND run_id = "
                   "(SELECT min(run_id) FROM profile_runs)", "DELETE FROM apps")
    res = cli("doctor", "--json")
    assert res.code == 1
    problems = {(p["kind"], p["table"]) for p in json.loads(res.out)["problems"]}
    assert {("orphan", "phases"), ("orphan", "trace_samples"), ("orphan", "runs"), ("orphan", "predictions")} <= problems
    fixed = json.loads(cli("doctor", "--fix", "--json").out)["repaired"]
    # phases went first round, then their streams and signatures became orphans and went too
    assert fixed["phases"] == 2 and fixed["phase_streams"] == 2 and fixed["runs"] == 3
    assert cli("doctor").code == 0


def test_drift_is_reported_not_fixed(cli, db_url):
    _break(db_url, "DROP VIEW v_phases")
    res = cli("doctor", "--fix", "--json")
    assert res.code == 1
    assert [p["table"] for p in json.loads(res.out)["problems"] if p["kind"] == "drift"] == ["v_phases"]
