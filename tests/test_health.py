"""`nodereg health`: hosts of a type against their peers, robustly (median, MAD, a relative floor)."""

import json

import pytest
from conftest import assert_one_line_error
from fleet_data import memory_only, store_hosts

from registry.db import open_registry
from registry.health import type_health
from registry.report.node import node_report

PEERS = {"a": 1.0, "b": 1.02, "c": 0.98, "d": 1.01}


@pytest.fixture
def fleet(db_url):
    """Type t on five hosts; the registry's URL (closed: the CLI opens it in this process too)."""
    reg = open_registry(db_url)
    store_hosts(reg, "t", {**PEERS, "slow-mem": memory_only(0.5)})
    reg.close()
    return db_url


def health_of(url: str, node: str):
    reg = open_registry(url)
    try:
        with reg.connect() as conn:
            return type_health(conn, node)
    finally:
        reg.close()


def test_a_host_with_slow_memory_is_flagged_on_memory_figures_only(fleet):
    health = health_of(fleet, "t")
    assert health.judged and set(health.spreads) == {"memory_triad_gbs", "l1_gbs", "l2_gbs", "l3_gbs",
                                                     "memory_latency_ns", "fp64_peak_gflops"}
    flags = {h.host: h.flags for h in health.hosts}
    assert flags == {"a": [], "b": [], "c": [], "d": [], "slow-mem": ["memory_triad_gbs", "memory_latency_ns"]}
    slow = health.hosts[-1]
    assert slow.deviation["memory_triad_gbs"] == pytest.approx(-0.5)   # the median is a's 1.0
    assert slow.deviation["memory_latency_ns"] == pytest.approx(1.0)   # twice the latency
    assert slow.mads["memory_triad_gbs"] < -3.5 and health.spreads["l1_gbs"].median == pytest.approx(1.0)


def test_thresholds_and_the_cli(cli, fleet):
    res = cli("health", "t", "--json")
    assert res.code == 0, res.err
    (out,) = json.loads(res.out)
    assert out["node"] == "t" and out["judged"] and out["spreads"]["memory_triad_gbs"]["hosts"] == 5
    assert [h["host"] for h in out["hosts"] if h["flags"]] == ["slow-mem"]
    # half the bandwidth and twice the latency, but a floor of 150%: nothing flagged; a loose MAD threshold, the same
    (loose,) = json.loads(cli("health", "t", "--json", "--min-deviation", "1.5").out)
    assert not any(h["flags"] for h in loose["hosts"])
    (wide,) = json.loads(cli("health", "--json", "--threshold", "1000").out)
    assert not any(h["flags"] for h in wide["hosts"])
    table = cli("health")
    assert table.code == 0 and "t: 5 hosts, 1 flagged" in table.out and "median" in table.out
    assert_one_line_error(cli("health", "nope"), "nope")


def test_a_tight_type_does_not_flag_noise_and_two_hosts_give_no_verdict(db_url):
    reg = open_registry(db_url)
    store_hosts(reg, "tight", {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.97})   # MAD 0: 3% is infinitely many MADs
    store_hosts(reg, "pair", {"a": 1.0, "b": 0.3})
    reg.close()
    tight, pair = health_of(db_url, "tight"), health_of(db_url, "pair")
    assert not any(h.flags for h in tight.hosts) and tight.hosts[-1].mads["fp64_peak_gflops"] == float("-inf")
    assert not pair.judged and not any(h.flags for h in pair.hosts)


def test_the_node_report_shows_the_hosts(fleet):
    reg = open_registry(fleet)
    with reg.connect() as conn:
        report = node_report(conn, "t")
    reg.close()
    (table,) = [s for s in report.sections if getattr(s, "title", "").startswith("Hosts")]
    assert table.title == "Hosts (5)" and table.columns[:3] == ["host", "profile", "triad GB/s"]
    assert [r[0] for r in table.rows] == ["a", "b", "c", "d", "slow-mem", "median"]
    assert table.rows[4][-1] == "triad GB/s, latency ns"


def test_the_memory_figure_is_the_nodes_own(db_url):
    """health's memory bandwidth is v_hosts' (and v_nodes'): triad at the most threads and its largest
    working set. A default sweep measures memory at several sizes, and the smaller ones, partly in
    cache, ran faster; health took the best of them, `nodes` the largest (two values of one figure)."""
    import dataclasses

    import sqlalchemy as sa

    from fleet_data import CPU
    from registry.db import utcnow
    from registry.db.write import new_uid
    from registry.profile import catalog, profiler
    from registry.profile.runner import Measurement
    from registry.profile.store import ProfileRecord, store_profile

    prep = profiler.prepare(profiler.ProfileOptions("plan", "full", cpus=[CPU], threads=[1],
                                                    kernels=catalog.select("triad")))
    memory = sorted({c.ws_bytes for c in prep.plan.configs if c.ws_level == "memory"})
    assert len(memory) >= 2                              # the case: several memory-level sizes
    reg = open_registry(db_url)
    for host in ("a", "b", "c"):
        ms = [Measurement(c, times=[1e-3 * c.ws_bytes / memory[0]] * 2, iterations=1000, passes=1, checksum=1.0,
                          bytes_per_rep=1e6, flops_per_rep=0.0, cpus_used=(CPU,), unstable=False)
              for c in prep.plan.configs]               # the larger the working set, the slower
        now = utcnow()
        record = ProfileRecord("t", dataclasses.replace(prep.inventory, hostname=host), "custom", ms, now, now, 1.0,
                               "test", None, None, uid=new_uid())
        reg.write(lambda conn, r=record: store_profile(conn, r))
    with reg.connect() as conn:
        want = {h: v for h, v in conn.execute(sa.text("SELECT host, memory_triad_gbs FROM v_hosts WHERE node = 't'"))}
    reg.close()
    got = {h.host: h.values["memory_triad_gbs"] for h in health_of(db_url, "t").hosts}
    assert got == pytest.approx(want)
    assert min(want.values()) < 1e6 / 1e-3 / 1e9           # the largest size's, not the fastest's 1 GB/s
