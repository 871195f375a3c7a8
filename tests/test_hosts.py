"""Node types and hosts: each host's latest profile kept, the type's figures the median over them
(views, `nodes`, what `match` reads), old registries upgraded, `profile --host`."""

import json

import numpy as np
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends
from fleet_data import CPU, store_hosts

import registry.db.migrate as migrate
from registry.db import migrations, open_registry
from registry.match.references import load_profiles
from registry.nodes import ensure_node


def rows(reg, sql: str, **params) -> list[tuple]:
    with reg.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(sql), params)]


# the memory triad (with ordinary and with non-temporal stores: the same made-up speed)
TRIAD_MEMORY = "ub = 'triad' AND ws_bytes = (SELECT max(ws_bytes) FROM v_profile WHERE ub = 'triad')"


@both_backends
def test_a_type_on_three_hosts_is_their_median(db_url, cli):
    reg = open_registry(db_url)
    store_hosts(reg, "t", {"a": 1.0, "b": 2.0, "c": 4.0})
    store_hosts(reg, "t", {"a": 3.0})  # a profiled again: its latest profile counts, once
    per_host = rows(reg, f"SELECT DISTINCT host, bandwidth_gbs FROM v_host_profile WHERE {TRIAD_MEMORY} ORDER BY host")
    assert [(h, round(v, 6)) for h, v in per_host] == [("a", 3.0), ("b", 2.0), ("c", 4.0)]
    (typed,) = rows(reg, f"SELECT DISTINCT bandwidth_gbs, latency_ns, hosts, profile_uid FROM v_profile WHERE {TRIAD_MEMORY}")
    assert round(typed[0], 6) == 3.0 and typed[1] is None and typed[2] == 3 and typed[3] is None
    (chase,) = rows(reg, "SELECT DISTINCT latency_ns FROM v_profile WHERE ub = 'chase' "
                         "AND ws_bytes = (SELECT max(ws_bytes) FROM v_profile WHERE ub = 'chase')")
    assert round(chase[0], 3) == round(1000 / 3, 3)  # latency: 1000 ns / speed, median speed 3
    hosts = rows(reg, "SELECT host, profiles, memory_triad_gbs FROM v_hosts ORDER BY host")
    assert [(h, n, round(v, 6)) for h, n, v in hosts] == [("a", 2, 3.0), ("b", 1, 2.0), ("c", 1, 4.0)]
    reg.close()

    (listed,) = json.loads(cli("nodes", "--json").out)
    assert (listed["hosts"], listed["profiles"], round(listed["memory_triad_gbs"], 6)) == (3, 4, 3.0)
    shown = json.loads(cli("nodes", "show", "t", "--json").out)
    assert [h["host"] for h in shown["hosts"]] == ["a", "b", "c"]
    assert sorted({p["host"] for p in shown["profiles"]}) == ["a", "b", "c"]
    assert "hosts (latest profile of each" in cli("nodes", "show", "t").out


def test_match_reads_the_median_over_hosts(db_url):
    reg = open_registry(db_url)
    store_hosts(reg, "t", {"a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0})
    store_hosts(reg, "other", {"x": 1.0})
    with reg.connect() as conn:
        p = load_profiles(conn, "t")
    triad_memory = np.flatnonzero(p.key_names == "triad|memory")[0]
    on = lambda node: p.throughput[(p.node == list(p.node_names).index(node)) & (p.key == triad_memory)]  # noqa: E731
    assert on("t").tolist() == pytest.approx([3e9])   # bytes per second: median of 1, 2, 4, 8 GB/s
    assert on("other").tolist() == pytest.approx([1e9])
    reg.close()


@both_backends
@pytest.mark.empty_registry
def test_upgrade_gives_old_profiles_the_host_of_their_inventory(db_url, monkeypatch):
    older = [m for m in migrate.available() if m.version < 8]
    monkeypatch.setattr(migrations, "available", lambda: older)
    reg = open_registry(db_url)
    with reg.begin() as conn:  # as stored before hosts mattered: profiles without their host
        # (raw rows: the profile store of this version writes columns that version 7 lacks)
        typed = ensure_node(conn, "t", source="profile")
        conn.execute(sa.text("UPDATE nodes SET host = 'cn01' WHERE node_id = :n"), {"n": typed})
        bare = ensure_node(conn, "bare", source="import")   # no inventory: no host to give
        for uid, node in (("u-typed", typed), ("u-bare", bare)):
            conn.execute(sa.text("INSERT INTO profiles (uid, node_id, mode, started_at, status) "
                                 "VALUES (:u, :n, 'import', now(), 'complete')"), {"u": uid, "n": node})
    reg.close()
    monkeypatch.undo()
    reg = open_registry(db_url, migrate=False)
    migrate.migrate(reg.engine)   # the steps of `nodereg migrate` (0009 drops a table: no backup wanted here)
    assert rows(reg, "SELECT n.name, p.host FROM profiles p JOIN nodes n ON n.node_id = p.node_id ORDER BY 1") == \
        [("bare", None), ("t", "cn01")]
    assert rows(reg, "SELECT node, host FROM v_hosts ORDER BY node") == [("bare", None), ("t", "cn01")]
    assert rows(reg, "SELECT max(version) FROM schema_version") == [(migrate.latest_version(),)]
    reg.close()


def test_profile_records_the_host_it_is_told(cli, db_url, binary):
    res = cli("profile", "posed", "--cpus", str(CPU), "--quick", "--reps", "1", "--kernels", "peak_fma",
              "--threads", "1", "--host", "cn042", "--json")
    assert res.code == 0, res.err
    reg = open_registry(db_url)
    assert rows(reg, "SELECT p.host, n.host FROM profiles p JOIN nodes n ON n.node_id = p.node_id") == \
        [("cn042", "cn042")]
    reg.close()
    assert_one_line_error(cli("profile", "posed", "--host", " ", "--kernels", "peak_fma"), "--host must not be empty")
