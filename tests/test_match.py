"""nodereg match on a small registry whose node speeds are known by construction.

Three nodes: the base `b` (2 CPUs), `fast` (2 CPUs, compute x2 and memory x1.5 of the base) and
`one` (1 CPU: compute at one core's speed, memory at 70% of the base's two-core bandwidth). A trace
on `b` has a compute phase, a memory phase and an idle phase; the projection must follow each
phase's kind and the thread count it would run at on each node. With a scaling model, a fourth
node `quad` (4 CPUs of the base's speed) is predicted with the app's own curve.
"""

import json

import pytest
from conftest import assert_one_line_error

from registry.db import open_registry, utcnow
from registry.db.write import insert_returning, insert_rows, new_uid
from registry.nodes import ensure_node
from registry.trace import store
from registry.trace.tracefile import Phase, Trace, write_trace
from registry_data import fake_inventory

# node -> (compute GFLOP/s per core, memory GB/s at 1 thread, memory GB/s at 2 threads)
SPEEDS = {"b": (10.0, 8.0, 12.0), "fast": (20.0, 12.0, 18.0), "one": (10.0, 8.4, None), "quad": (10.0, 8.0, 12.0)}
KERNELS = [("peak_fma", "compute", None), ("triad", "bandwidth", 0), ("load", "bandwidth", 2)]


def _profile(conn, node, cpus, base):
    node_id = ensure_node(conn, node, fake_inventory(cpus=tuple(range(cpus))))
    prof = insert_returning(conn, "profiles", {"uid": new_uid(), "node_id": node_id, "mode": "test",
                                               "started_at": utcnow(), "status": "complete"}, "profile_id")
    fma, bw1, bw2 = SPEEDS[node]
    for ub, family, level in KERNELS:
        ub_id = conn.exec_driver_sql(f"SELECT ub_id FROM microbenchmarks WHERE name = '{ub}'").scalar() or \
            insert_returning(conn, "microbenchmarks", {"name": ub, "family": family, "n_streams": 1}, "ub_id")
        for threads in range(1, cpus + 1):
            key = json.dumps({"ub": ub, "threads": threads, "node_cpus": cpus})  # sizes differ per node
            cid = insert_returning(conn, "ub_configs", {"ub_id": ub_id, "config_key": f"{node}:{key}",
                                                        "threads": threads, "placement": "compact",
                                                        "params_json": "{}" if family == "compute" else
                                                        json.dumps({"n": 1000 * cpus})}, "config_id")
            if family == "compute":
                work = {"flops_per_rep": 1e9 * threads, "median_s": 1e9 / (fma * 1e9)}
            else:
                bw = (bw1, bw2)[min(threads, 2) - 1] * (3.0 if level == 2 else 1.0)  # saturated beyond 2
                work = {"bytes_per_rep": 1e9, "median_s": 1.0 / bw}
            run = insert_returning(conn, "profile_runs", {"profile_id": prof, "config_id": cid, "reps": 3,
                                                          "unstable": False, **work}, "run_id")
            sigs = [("streams", "ws_level", level)] if level is not None else []
            if base:
                sigs += [("proc", "cpu_util", threads * 0.99), ("proc", "wss_llc", {None: 0.01, 0: 8.0, 2: 0.2}[level])]
            insert_rows(conn, "signatures", [{"owner_kind": "profile_run", "owner_id": run, "source": s,
                                              "metric": m, "value": float(v)} for s, m, v in sigs])


def _trace(node="b"):
    def phase(name, start, util, wss):
        return Phase(name, "auto", start, start + 10, 10 / 21, 10.0,
                     signature={"proc": {"cpu_util": util, "wss_llc": wss}})
    phases = [phase("compute", 0, 1.98, 0.01), phase("memory", 10, 1.98, 8.0),
              Phase("sleep", "auto", 20, 21, 1 / 21, 1.0, signature={"proc": {"cpu_util": 0.01}})]
    return Trace(name="app", node=node, host="h", command=["app"], exit_status=0, status="ok", wall_s=21.0,
                 interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc"], phases=phases)


@pytest.fixture
def registry(db_url, tmp_path):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2), ("one", 1)):
            _profile(conn, node, cpus, base=node == "b")
        store.save(conn, _trace())
    reg.close()
    return write_trace(_trace(), tmp_path / "app.json")


def test_projection_follows_phase_kind_and_threads(cli, registry):
    res = cli("match", "app", "--json", "--explain")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    pred = {p["node"]: p for p in out["predictions"]}
    assert [p["node"] for p in out["predictions"]] == ["fast", "b", "one"]
    assert pred["b"]["predicted_s"] == pytest.approx(21.0, rel=0.01)
    # fast: compute 10/2 + memory 10/1.5 + sleep 1; one: compute 10*2 + memory 10*12/8.4 + 1
    assert pred["fast"]["predicted_s"] == pytest.approx(5 + 10 / 1.5 + 1, rel=0.08)
    assert pred["one"]["predicted_s"] == pytest.approx(20 + 10 * 12 / 8.4 + 1, rel=0.08)
    assert (pred["one"]["threads"], pred["fast"]["threads"]) == (1, 2)
    phases = {p["name"]: p for p in out["phases"]}
    assert phases["sleep"]["mode"] == "idle" and phases["sleep"]["per_node"]["one"]["predicted_s"] == 1.0
    assert phases["compute"]["matches"][0]["config"].startswith("peak_fma")
    assert phases["memory"]["matches"][0]["config"] == "triad|memory"
    assert all(p["low_s"] <= p["predicted_s"] <= p["high_s"] for p in out["predictions"])


def test_predictions_are_stored_and_file_argument_works(cli, registry):
    assert cli("match", str(registry), "--top", "2").code == 0
    stored = json.loads(cli("sql", "SELECT node, model_name, node_rank FROM v_predictions ORDER BY node_rank",
                            "-f", "json").out)
    assert [r["node"] for r in stored] == ["fast", "b", "one"] and stored[0]["model_name"] == "similarity"


def test_match_errors(cli, registry, tmp_path):
    assert_one_line_error(cli("match", "app", "--model", "nope"), "unknown model 'nope'")
    assert_one_line_error(cli("match", "app", "--model", "downey"), "no runs of 'app' on 'b'")
    assert_one_line_error(cli("match", "nothing-like-this"), "no trace")
    assert_one_line_error(cli("match", "app", "--nodes", "fast,ghost"), "ghost")
    other = _trace(node="ghost")
    assert_one_line_error(cli("match", str(write_trace(other, tmp_path / "g.json"))), "not registered")
    (tmp_path / "bad.json").write_text("{ not json")
    assert_one_line_error(cli("match", str(tmp_path / "bad.json")), "corrupt")
    doc = json.loads(registry.read_text())
    (tmp_path / "new.json").write_text(json.dumps({**doc, "version": 99}))
    assert_one_line_error(cli("match", str(tmp_path / "new.json")), "newer")


def test_base_without_profile(cli, db_url, tmp_path):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "b", fake_inventory())
        store.save(conn, _trace())
    reg.close()
    assert_one_line_error(cli("match", "app"), "has no profile")


def test_scaling_model_extends_the_projection_to_more_cores(cli, db_url, registry):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        _profile(conn, "quad", 4, base=False)
    reg.close()
    # the app on b: 40 s on 1 thread, 21 s on 2 (as traced): Amdahl's serial fraction 0.05
    for threads, time_s in ((1, 40.0), (2, 21.0)):
        assert cli("runs", "add", "app", "b", "--threads", str(threads), "--time", str(time_s)).code == 0
    res = cli("match", "app", "--model", "amdahl", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    pred = {p["node"]: p for p in out["predictions"]}
    # quad at 2 threads runs as b does (21 s); at its 4 CPUs Amdahl gives 40 * (0.05 + 0.95 / 4) = 11.5 s
    assert pred["quad"]["predicted_s"] == pytest.approx(11.5, rel=0.02) and pred["quad"]["threads"] == 4
    assert pred["b"]["predicted_s"] == pytest.approx(21.0, rel=0.01)
    # no more CPUs than the base: the projection alone, as without the scaling model
    plain = {p["node"]: p for p in json.loads(cli("match", "app", "--json").out)["predictions"]}
    assert pred["one"]["predicted_s"] == pytest.approx(plain["one"]["predicted_s"], rel=1e-6)
    assert out["model"] == "amdahl+similarity" and [p["node"] for p in out["predictions"]][0] == "quad"
    assert all(p["low_s"] <= p["predicted_s"] <= p["high_s"] for p in out["predictions"])
    assert_one_line_error(cli("match", "app", "--model", "downey"), "needs runs at >= 3 thread counts")
