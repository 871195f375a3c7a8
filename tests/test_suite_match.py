"""The trace path onto imported suites: this machine's suite profile (`profile --suite sparecores`),
`match` with an imported suite's configs as references, and `nodes like`.

The registry is small and synthetic, so the right answer is known: the base node `b` has our
kernels' profile and a Spare Cores suite profile; two imported types measured the suite at known
speeds; a node `fast` has only our kernels. A compute phase is matched to the stress-ng cpu
config, a memory phase to membench's read from memory, and each is projected by that config's
ratio imported-node / b.
"""

import json
import math
import shutil

import numpy as np
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends, fetch_rows

from registry.db import open_registry, utcnow
from registry.db.write import insert_returning, insert_rows, new_uid
from registry.io.tracefile import Phase, Trace
from registry.nodes import ensure_node
from registry.runs import add_run
from registry.profile.suite import plan as suite_plan
from registry.profile.suite.membench import kernel_config
from registry.profile.suite.store import SuiteProfile, SuiteResult, store_suite_profile
from registry.trace import store
from registry_data import fake_inventory, profile_at_speeds

CPU, READ, SHA = ("sparecores:stressng:cpu", "sparecores:membench:read:128MiB", "sparecores:openssl:sha256:16384")
# the base's figures, and the imported types' (rates, higher is faster); threads 1 or 0 (all)
HERE = {(CPU, 1): 100.0, (CPU, 0): 200.0, (READ, 0): 10_000.0, (SHA, 0): 1e9}
IMPORTED = {"aws:x": (2, {(CPU, 1): 200.0, (CPU, 0): 400.0, (READ, 0): 10_000.0, (SHA, 0): 4e9}),
            "aws:y": (4, {(CPU, 1): 100.0, (CPU, 0): 400.0, (READ, 0): 5_000.0, (SHA, 0): 1e9})}
SIGNATURES = {CPU: {"cpu_util": 1.98, "wss_llc": 0.01}, READ: {"cpu_util": 1.98, "wss_llc": 8.0},
              SHA: {"cpu_util": 1.98, "wss_llc": 0.001}}


def _suite_config(key: str, threads: int) -> suite_plan.SuiteConfig:
    task, what, *params = key.split(":")[1:]
    params = tuple(int(p[:-3]) * 1024 if p.endswith("MiB") else int(p) for p in params)
    family = {"membench": "bandwidth", "openssl": "crypto"}.get(task, "compute")
    return suite_plan.SuiteConfig(task, what, params, threads, family)


def _base_suite(conn, figures: dict) -> None:
    """The base `b`'s Spare Cores suite profile: these (key, threads) -> rate figures, SIGNATURES' signatures."""
    results = [SuiteResult(_suite_config(key, threads), value, {"proc": SIGNATURES[key]})
               for (key, threads), value in figures.items()]
    now = utcnow()
    store_suite_profile(conn, SuiteProfile("b", fake_inventory(), results, now, now, 1.0, "test"))


def _imported(conn, name: str, cpus: int, figures: dict, model: str) -> None:
    """An imported type as the importer stores it: mode 'import', suite 'sparecores', value and time-like median_s."""
    node_id = ensure_node(conn, name, fake_inventory(cpus=tuple(range(cpus)), model=model), source="import")
    conn.execute(sa.text("UPDATE nodes SET cpu_family = NULL, cpu_vendor = NULL WHERE node_id = :id"), {"id": node_id})
    prof = insert_returning(conn, "profiles", {"uid": new_uid(), "node_id": node_id, "mode": "import",
                                               "suite": "sparecores", "started_at": utcnow(), "status": "complete"}, "profile_id")
    for (key, threads), value in figures.items():
        full = f"{key}:{'1t' if threads == 1 else 'all'}"
        cid = conn.execute(sa.text("SELECT config_id FROM ub_configs WHERE config_key = :k"), {"k": full}).scalar_one()
        insert_rows(conn, "profile_runs", [{"profile_id": prof, "config_id": cid, "reps": 1, "median_s": 1 / value,
                                            "value": value, "unstable": False}])


def _trace(phases: dict) -> Trace:
    """An app traced on b: one phase of 10 s per (name, (cpu_util, wss_llc))."""
    out, start = [], 0.0
    for name, (util, wss) in phases.items():
        out.append(Phase(name, "auto", start, start + 10, 10 / (10 * len(phases)), 10.0,
                         signature={"proc": {"cpu_util": util, "wss_llc": wss}}))
        start += 10
    return Trace(name="app", node="b", host="h", command=["app"], exit_status=0, status="ok", wall_s=start,
                 interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc"], phases=out)


@pytest.fixture
def suite_registry(db_url):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2)):
            profile_at_speeds(conn, node, cpus, base=node == "b")   # our kernels on b and fast
        _base_suite(conn, HERE)
        _imported(conn, "aws:x", *IMPORTED["aws:x"], model="Test CPU 9000")
        _imported(conn, "aws:y", *IMPORTED["aws:y"], model="Other CPU")
        store.save(conn, _trace({"compute": (1.98, 0.01), "memory": (1.98, 8.0)}))
    reg.close()


def _match(cli, *extra):
    res = cli("match", "app", "--json", "--no-store", "--option", "k=1", "--option", "shrink=0", *extra)
    assert res.code == 0, res.err
    out = json.loads(res.out)
    return out, {p["node"]: p["predicted_s"] for p in out["predictions"]}


@both_backends
def test_phases_are_projected_by_their_suite_configs_ratios(cli, suite_registry):
    out, pred = _match(cli)
    assert out["suite"] == "sparecores"             # the suite b shares with the most nodes
    assert set(pred) == {"b", "aws:x", "aws:y"}     # `fast` has only our kernels
    phases = {p["name"]: p for p in out["phases"]}
    assert phases["compute"]["matches"][0]["config"] == CPU
    assert phases["memory"]["matches"][0]["config"] == READ
    # x: compute 2x faster on all CPUs (400 vs 200), memory the same: 5 + 10; y (4 CPUs): compute
    # 400 vs 200 again, memory read at half the rate: 5 + 20
    assert pred["b"] == pytest.approx(20.0, rel=0.01)
    assert pred["aws:x"] == pytest.approx(15.0, rel=0.03)
    assert pred["aws:y"] == pytest.approx(25.0, rel=0.03)


def test_an_excluded_micro_benchmark_is_no_reference(cli, suite_registry):
    """Checking stress-ng itself: its configs leave the references, so the compute phase falls to the
    next nearest (openssl's sha256: 4x faster on x, as fast on y)."""
    out, pred = _match(cli, "--exclude", "sparecores:stressng")
    phases = {p["name"]: p for p in out["phases"]}
    assert phases["compute"]["matches"][0]["config"] == SHA
    assert all(not m["config"].startswith("sparecores:stressng") for p in out["phases"] for m in p["matches"])
    assert pred["aws:x"] == pytest.approx(2.5 + 10, rel=0.03)
    assert pred["aws:y"] == pytest.approx(10 + 20, rel=0.03)
    assert out["excluded_references"] == ["sparecores:stressng"]


def test_our_kernels_are_never_mixed_with_the_suite(cli, suite_registry):
    out, pred = _match(cli, "--suite", "nodereg")
    assert set(pred) == {"b", "fast"}
    assert all(not m["config"].startswith("sparecores:") for p in out["phases"] for m in p["matches"])
    res = cli("match", "app", "--suite", "sparecores", "--nodes", "fast", "--no-store")
    assert_one_line_error(res, "fast")
    res = cli("match", "app", "--suite", "spec2017", "--no-store")
    assert_one_line_error(res, "spec2017")


def test_nodes_like_ranks_same_cpu_first_and_shows_each_figure(cli, suite_registry):
    res = cli("nodes", "like", "b", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    # x has b's CPU model (its figures are further apart); y only the nearer figures
    assert [r["node"] for r in out["like"]] == ["aws:x", "aws:y"]
    assert out["like"][0]["match"] == "same CPU model"
    figures = {f["config"]: f for f in out["figures"]}
    assert out["figures_of"] == "aws:x" and len(figures) == 4
    assert figures[f"{CPU}:1t"]["diff"] == pytest.approx(1.0)
    assert figures[f"{READ}:all"]["diff"] == pytest.approx(0.0)
    res = cli("nodes", "like", "b", "--figures", "aws:y")
    assert res.code == 0 and "aws:y" in res.out
    assert_one_line_error(cli("nodes", "like", "fast"), "fast", "sparecores")


def test_suite_keys_follow_the_import():
    configs = suite_plan.plan(quick=True, available={"cpu", "branch"})
    keys = [c.key for c in configs]
    assert "sparecores:stressngfull:cpu-div16:1t" in keys and "sparecores:stressng:cpu_all:all" in keys
    assert "sparecores:membench:read:16KiB:all" in keys and "sparecores:membench:latency:128MiB:1t" in keys
    assert "sparecores:bw_mem:rd:512MB:all" in keys and "sparecores:bw_mem:wr:16KB:all" in keys
    assert "sparecores:openssl:sha256:16384:all" in keys
    assert not any(":qsort:" in k for k in keys)          # not known to this (pretend) stress-ng
    read = next(c for c in configs if c.key == "sparecores:membench:read:512KiB:all")
    kc = kernel_config(read, fake_inventory(cpus=(0,)))
    assert (kc.ub.name, kc.threads, kc.n * 8) == ("load", 1, 512 * 1024)


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed (apt-get install -y stress-ng)")
def test_profile_measures_the_suite_here(cli, db_url):
    res = cli("profile", "here", "--suite", "sparecores", "--kernels", "stressngfull", "--quick", "--json")
    assert res.code == 0, res.err
    rows = fetch_rows(db_url, """
        SELECT c.config_key, c.threads, c.unit, c.higher_is_better, r.value, r.median_s, p.mode, u.suite
        FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id JOIN profiles p ON p.profile_id = r.profile_id
        JOIN microbenchmarks u ON u.ub_id = c.ub_id ORDER BY c.config_key""")
    assert [r["config_key"] for r in rows] == ["sparecores:stressngfull:cpu-div16:1t",
                                               "sparecores:stressngfull:cpu-div16:all"]
    for r in rows:
        assert r["value"] > 0 and r["median_s"] == pytest.approx(1 / r["value"])
        assert (r["unit"], r["higher_is_better"], r["mode"], r["suite"]) == ("bogo ops/s", True, "suite", "sparecores")
    assert [r["threads"] for r in rows] == [1, 0]
    sigs = fetch_rows(db_url, "SELECT DISTINCT metric FROM signatures WHERE source = 'proc'")
    assert {"cpu_util", "wss_llc"} <= {s["metric"] for s in sigs}
    # `nodes like` without a node: the one whose suite profile this host measured, alone here
    assert_one_line_error(cli("nodes", "like"), "'here'", "no other node")
    assert_one_line_error(cli("profile", "here", "--suite", "spec"), "spec")
    assert_one_line_error(cli("profile", "here", "--suite", "sparecores", "--kernels", "passmark"), "passmark")


def test_a_phase_on_a_shared_host_is_split_by_its_demand(cli, db_url):
    """Two busy processes that got 0.8 of the 2 CPUs between them and waited 1.2 CPU-s/s on the run
    queue (other load on the host) are a parallel phase, not a serial one: projected with the
    all-CPU configs (2x faster on aws:y's 4 CPUs), not the one-thread ones (as fast on y)."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        _base_suite(conn, HERE)
        _imported(conn, "aws:y", *IMPORTED["aws:y"], model="Other CPU")
        trace = _trace({"shared": (0.8, 0.01)})
        trace.phases[0].signature["sched"] = {"demand": 2.0}
        store.save(conn, trace)
    reg.close()
    out, pred = _match(cli)
    assert out["phases"][0]["serial_share"] == 0
    assert pred["aws:y"] == pytest.approx(5.0, rel=0.03)


def test_demand_counts_the_cpus_a_tree_waited_for():
    """Two busy processes on one CPU: the tree keeps at most one CPU busy, but both were runnable all
    along, so CPU use plus run-queue wait says two (what they would use on a host of their own)."""
    import sys

    from registry.measure import runner
    from registry.measure.signature import sched_demand, spans_in

    spin = "import time\nt = time.time()\nwhile time.time() - t < 1.2: pass"
    cmd = ["sh", "-c", f'"{sys.executable}" -c "{spin}" & "{sys.executable}" -c "{spin}"; wait']
    run = runner.run(cmd, cpus=[0], wss=False)
    assert run.status == "ok"
    middle = spans_in(run.samples, [[0.3, run.wall_s - 0.3]])
    util = sum(r["cpu_util"] * s for r, s in middle) / sum(s for _, s in middle)
    assert util <= 1.05
    assert sched_demand(middle) == pytest.approx(2.0, abs=0.3)


def test_a_config_that_fails_twice_is_left_out_and_said_not_the_whole_profile(monkeypatch):
    """A stress-ng run that writes no metric once is tried again; one that fails twice is left out
    with a note, and the profile keeps every other config (it lost them all before)."""
    from registry.errors import UserError
    from registry.profile.suite import measure as suite_measure
    from registry.profile.suite.plan import plan

    configs = plan(quick=True, tasks=["stressngfull", "openssl"])
    flaky, broken = configs[0].key, configs[1].key
    tries: dict[str, int] = {}

    def run(config, n_cpus, seconds, llc_bytes):
        tries[config.key] = tries.get(config.key, 0) + 1
        if config.key == broken or (config.key == flaky and tries[flaky] == 1):
            raise UserError("stress-ng wrote no bogo-ops-per-second-real-time metric")
        return 100.0, {"proc": {"cpu_util": 1.0}}

    monkeypatch.setattr(suite_measure.tools, "missing_tools", lambda configs: [])
    monkeypatch.setattr(suite_measure.tools, "run", run)
    prof = suite_measure.measure("here", configs, fake_inventory(), 1.0, quick=True)
    assert [r.config.key for r in prof.results] == [c.key for c in configs if c.key != broken]
    assert tries[flaky] == 2 and tries[broken] == 2
    assert prof.notes == [f"{broken} left out: stress-ng wrote no bogo-ops-per-second-real-time metric (twice)"]
    monkeypatch.setattr(suite_measure.tools, "run", lambda *a: (_ for _ in ()).throw(UserError("no figure")))
    with pytest.raises(UserError, match="no config of the suite could be measured here"):
        suite_measure.measure("here", configs, fake_inventory(), 1.0, quick=True)


def test_a_type_that_did_not_run_a_reference_gets_it_filled_in_from_its_other_figures(cli, db_url):
    """Spare Cores' older types lack the stress-ng task. Sixty imported types ran it, eight did not;
    on every type its figure follows openssl's (the same per-type speed). A type without it is
    projected as its twin that ran it, not from the other references alone, and `match` says so."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        _base_suite(conn, HERE)
        for i in range(68):
            speed = 1 + (i % 30) / 10
            figures = {(CPU, 1): 150.0 * speed, (CPU, 0): 600.0 * speed, (READ, 0): 4000.0 * (1 + i % 7),
                       (SHA, 0): 4e9 * speed}
            if i >= 60:                                     # types 60-67 did not run stress-ng
                figures = {k: v for k, v in figures.items() if k[0] != CPU}
            _imported(conn, f"aws:t{i}", 4, figures, model="Test CPU 9000")
        store.save(conn, _trace({"compute": (1.98, 0.01)}))
    reg.close()
    out, pred = _match(cli, "--option", "k=2")
    # t62 and its twin t32 (the same speed; READ differs, which the compute phase barely weighs)
    assert pred["aws:t62"] == pytest.approx(pred["aws:t32"], rel=0.01)
    said = [w for w in out["warnings"] if "filled in" in w]
    assert said and all("on 8 of 69 nodes" in w for w in said)
    assert "1 of the 3 references" in said[0]
    # and each prediction says which of its nearest references it did not measure
    filled = {p["node"]: p["filled_in"] for p in out["predictions"]}
    assert filled["aws:t62"] == [CPU] and filled["aws:t32"] == []
    assert cli("match", "app", "--option", "k=2").code == 0          # stored, with it in the explanation
    stored = {r["name"]: r["explanation_json"] for r in fetch_rows(
        db_url, "SELECT n.name, p.explanation_json FROM predictions p JOIN nodes n ON n.node_id = p.node_id "
                "WHERE n.name IN ('aws:t62', 'aws:t32')")}
    assert json.loads(stored["aws:t62"])["filled_in"] == [CPU] and "filled_in" not in json.loads(stored["aws:t32"])


@both_backends
def test_references_that_move_like_the_measured_apps_outvote_those_that_do_not(cli, db_url):
    """Sixty imported types measured a one-thread app (Geekbench clang, single-core) that moves with
    openssl's sha256 at one thread (the same per-type speed), while their one-thread stress-ng cpu figures
    move erratically. A serial phase as near the one as the other is projected by sha256's ratios: the
    app's runs give stress-ng a poor track record, and its vote a small prior (registry.match.track).
    Leaving the app out (`--exclude`) leaves no app to judge by, and the two vote alike again; neither
    an all-CPU app (its runs are not one-thread runs) nor the traced app's own runs judge."""
    here = {(CPU, 1): 100.0, (SHA, 1): 5e8, (READ, 0): 10_000.0}
    reg = open_registry(db_url)
    with reg.begin() as conn:
        _base_suite(conn, here)
        erratic = np.random.default_rng(0).uniform(0.4, 2.5, 60)
        for i in range(60):
            speed = 1 + (i % 30) / 10
            _imported(conn, f"aws:t{i}", 4, {(CPU, 1): 150.0 * erratic[i], (READ, 0): 4000.0 * (1 + i % 7),
                                              (SHA, 1): 1e9 * speed}, model="Test CPU 9000")
            add_run(conn, "geekbench:clang:single", f"aws:t{i}", 1, 10.0 / speed, source="import")
            add_run(conn, "geekbench:clang:multi", f"aws:t{i}", 4, 10.0 * erratic[i], source="import")
            add_run(conn, "app", f"aws:t{i}", 1, 10.0 * erratic[i])      # the traced app itself never judges
        # one CPU of two busy; between the cpu config (wss 0.01) and sha256 (0.001) in log working set
        store.save(conn, _trace({"serial": (0.99, 0.00316)}))
    reg.close()
    out, pred = _match(cli, "--option", "k=2")
    matches = {m["config"]: m for m in out["phases"][0]["matches"]}
    assert matches[SHA]["vote_prior"] == 1.0 and matches[CPU]["vote_prior"] < 0.1
    by_sha = {f"aws:t{i}": 10 * 5e8 / (1e9 * (1 + (i % 30) / 10)) for i in range(60)}
    off = [abs(math.log(pred[n] / t)) for n, t in by_sha.items()]
    assert np.median(off) < 0.1
    said = cli("match", "app", "--no-store", "--option", "k=2")
    assert said.code == 0 and "by its track record" in said.out        # the table's reason says so too
    assert cli("match", "app", "--option", "k=2").code == 0                # and the stored explanation
    stored = [json.loads(r["explanation_json"])["phases"][0] for r in fetch_rows(
        db_url, "SELECT explanation_json FROM predictions")]
    assert [{m["config"]: m["vote_prior"] for m in p["matches"]}[CPU] < 0.1 for p in stored if "matches" in p] == [True]
    out, alike = _match(cli, "--option", "k=2", "--exclude", "geekbench:clang:single")
    assert all("vote_prior" not in m for m in out["phases"][0]["matches"])
    assert np.median([abs(math.log(alike[n] / t)) for n, t in by_sha.items()]) > 2 * np.median(off)
