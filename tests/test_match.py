"""nodereg match on a small registry whose node speeds are known by construction.

Three nodes: the base `b` (2 CPUs), `fast` (2 CPUs, compute x2 and memory x1.5 of the base) and
`one` (1 CPU: compute at one core's speed, memory at 70% of the base's two-core bandwidth). A trace
on `b` has a compute phase, a memory phase and an idle phase; the projection must follow each
phase's kind and the thread count it would run at on each node. With a scaling model, a fourth
node `quad` (4 CPUs of the base's speed) is predicted with the app's own curve.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import assert_one_line_error, both_backends

from registry.db import open_registry
from registry.match import references
from registry.nodes import ensure_node
from registry.trace import store
from registry.trace.tracefile import write_trace
from registry_data import fake_inventory, profile_at_speeds, three_phase_trace

@pytest.fixture
def registry(db_url, tmp_path):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2), ("one", 1)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        store.save(conn, three_phase_trace())
    reg.close()
    return write_trace(three_phase_trace(), tmp_path / "app.json")

pytestmark = both_backends


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


def test_only_configs_signed_on_the_base_are_references(db_url, registry):
    """The unsigned non-temporal triad is measured on every node but is no reference: it could never
    be a neighbour, and must not weigh in the per-node median ratio."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profiles = references.load_profiles(conn, "b")
    reg.close()
    refs, _ = references.reference_set(profiles, references.threads_on(profiles, "all", 2))
    assert sorted(refs.feature_matrix.rows) == ["load|L2", "peak_fma|{}", "triad|memory"]
    assert "triad|memory|nt" in profiles.key_names.tolist()
    assert not np.isnan(refs.feature_matrix.values).all(axis=1).any()


def test_predictions_are_stored_and_file_argument_works(cli, sql_reader, registry):
    assert cli("match", str(registry), "--top", "2").code == 0
    stored = json.loads(cli("sql", "SELECT node, model_name, node_rank FROM v_predictions ORDER BY node_rank",
                            "-f", "json").out)
    assert [r["node"] for r in stored] == ["fast", "b", "one"] and stored[0]["model_name"] == "similarity"
    explained = {r["node"]: json.loads(r["explanation_json"]) for r in json.loads(cli(
        "sql", "SELECT n.name AS node, p.explanation_json FROM predictions p JOIN nodes n ON n.node_id = p.node_id",
        "-f", "json").out)}
    # the matches (the same for every node) are stored once, in the base node's row
    assert explained["b"]["phases"][0]["matches"] and "matches_in" not in explained["b"]
    assert explained["one"]["matches_in"] == "b" and "matches" not in explained["one"]["phases"][0]
    assert explained["one"]["phases"][0]["predicted_s"] > explained["fast"]["phases"][0]["predicted_s"]


def test_match_on_duckdb_does_not_import_pandas(db_url, registry):
    """Importing pandas alone is a sixth of `nodereg match` on a 10,000-node registry (docs/match.md)."""
    if not db_url.startswith("duckdb"):
        pytest.skip("PostgreSQL results are read through pandas")
    code = ("import sys\nfrom registry.cli import main\nsys.argv = ['nodereg', 'match', 'app', '--json']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('pandas', 'pyarrow', 'sklearn') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NODEREG_DB": db_url})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout[:res.stdout.rindex("[")])["predictions"]
    assert res.stdout.strip().splitlines()[-1] == "[]"


def test_match_errors(cli, registry, tmp_path):
    assert_one_line_error(cli("match", "app", "--model", "nope"), "unknown model 'nope'")
    assert_one_line_error(cli("match", "app", "--model", "downey"), "no runs of 'app' on 'b'")
    assert_one_line_error(cli("match", "nothing-like-this"), "no trace")
    assert_one_line_error(cli("match", "app", "--nodes", "fast,ghost"), "ghost")
    other = three_phase_trace(node="ghost")
    assert_one_line_error(cli("match", str(write_trace(other, tmp_path / "g.json"))), "not registered")
    (tmp_path / "bad.json").write_text("{ not json")
    assert_one_line_error(cli("match", str(tmp_path / "bad.json")), "corrupt")
    doc = json.loads(registry.read_text())
    (tmp_path / "new.json").write_text(json.dumps({**doc, "version": 99}))
    assert_one_line_error(cli("match", str(tmp_path / "new.json")), "newer")
    (tmp_path / "zero.json").write_text(json.dumps({**doc, "wall_s": 0.0}))   # found by tests/fuzz_readers.py
    assert_one_line_error(cli("match", str(tmp_path / "zero.json")), "lasted 0 s")


def test_base_without_profile(cli, db_url, tmp_path):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "b", fake_inventory())
        store.save(conn, three_phase_trace())
    reg.close()
    assert_one_line_error(cli("match", "app"), "has no profile")


def test_scaling_model_extends_the_projection_to_more_cores(cli, db_url, registry):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profile_at_speeds(conn, "quad", 4, base=False)
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
