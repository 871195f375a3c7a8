"""One "latest profile" for every reader: the one measured last, full before partial (issue 28, item 6).

An old profile imported after a newer one, or a partial `--kernels` run, must not become the profile
the references, the caveats, the stored inputs and the analyst views use."""

import json
from datetime import timedelta

import sqlalchemy as sa
from conftest import both_backends

from registry.db import open_registry, utcnow
from registry.db.write import insert_returning, new_uid
from registry.match.caveats import profile_caveats
from registry_data import three_node_registry

pytestmark = both_backends


def _copy_profile(conn, node: str, *, mode: str, measured_at, slower: float) -> str:
    """Another profile of `node`: its latest runs `slower` times slower, measured at `measured_at`."""
    node_id, old = conn.execute(sa.text(
        "SELECT p.node_id, max(p.profile_id) FROM profiles p JOIN nodes n ON n.node_id = p.node_id "
        "WHERE n.name = :n GROUP BY p.node_id"), {"n": node}).one()
    uid = new_uid()
    new = insert_returning(conn, "profiles", {"uid": uid, "node_id": node_id, "mode": mode,
                                              "started_at": measured_at, "status": "complete"}, "profile_id")
    conn.execute(sa.text(
        "INSERT INTO profile_runs (profile_id, config_id, reps, unstable, flops_per_rep, bytes_per_rep, median_s) "
        "SELECT :new, config_id, reps, unstable, flops_per_rep, bytes_per_rep, median_s * :x FROM profile_runs "
        "WHERE profile_id = :old"), {"new": new, "old": old, "x": slower})
    return uid


def _predictions(cli) -> dict:
    res = cli("match", "app", "--json", "--no-store")
    assert res.code == 0, res.err
    return {p["node"]: round(p["predicted_s"], 9) for p in json.loads(res.out)["predictions"]}


def test_an_older_profile_imported_later_or_a_partial_one_is_not_the_latest(cli, db_url):
    three_node_registry(db_url)
    before = _predictions(cli)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        current = conn.execute(sa.text("SELECT p.uid FROM profiles p JOIN nodes n ON n.node_id = p.node_id "
                                       "WHERE n.name = 'fast'")).scalar_one()
        _copy_profile(conn, "fast", mode="default", measured_at=utcnow() - timedelta(days=30), slower=4.0)
        _copy_profile(conn, "fast", mode="custom", measured_at=utcnow() + timedelta(minutes=5), slower=4.0)
        only_partial = _copy_profile(conn, "one", mode="custom", measured_at=utcnow() + timedelta(minutes=5),
                                     slower=1.0)
        conn.execute(sa.text("DELETE FROM profile_runs WHERE profile_id IN (SELECT profile_id FROM profiles p "
                             "JOIN nodes n ON n.node_id = p.node_id WHERE n.name = 'one' AND p.mode <> 'custom')"))
        conn.execute(sa.text("DELETE FROM profiles WHERE profile_id IN (SELECT profile_id FROM profiles p "
                             "JOIN nodes n ON n.node_id = p.node_id WHERE n.name = 'one' AND p.mode <> 'custom')"))
    with reg.connect() as conn:
        latest = dict(conn.execute(sa.text(
            "SELECT n.name, p.uid FROM v_latest_profile l JOIN profiles p ON p.profile_id = l.profile_id "
            "JOIN nodes n ON n.node_id = l.node_id WHERE l.newest")).fetchall())
        assert latest["fast"] == current and latest["one"] == only_partial   # a partial one where there is no other
        assert {c.node for c in profile_caveats(conn, ["fast", "one"]) if c.kind == "partial"} == {"one"}
        assert conn.execute(sa.text("SELECT DISTINCT profile_uid FROM v_profile WHERE node = 'fast'")).scalar_one() \
            == current
    reg.close()
    after = _predictions(cli)       # (one's copied runs lack their cache-level signatures: not compared)
    assert {n: after[n] for n in ("b", "fast")} == {n: before[n] for n in ("b", "fast")}
