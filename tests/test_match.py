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
from datetime import datetime

import numpy as np
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends

from registry import __version__
from registry.db import migrate, migrations, open_registry
from registry.errors import UserError
from registry.match import project as project_module
from registry.match import references
from registry.db.write import insert_returning, insert_rows, new_uid
from registry.models.similarity import WEIGHTS_VERSION
from registry.nodes import ensure_node
from registry.profile.vectors import store_vectors
from registry.trace import store
from registry.trace.lookup import find_trace
from registry.io.tracefile import write_trace
from registry_data import fake_inventory, profile_at_speeds, three_phase_trace

def _populate(db_url) -> str:
    """Three profiled nodes and the app's trace on `b`; returns the trace's uid."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2), ("one", 1)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        _, uid = store.save(conn, three_phase_trace())
    reg.close()
    return uid


@pytest.fixture
def registry(db_url, tmp_path):
    _populate(db_url)
    return write_trace(three_phase_trace(), tmp_path / "app.json")


def _query(db_url, sql: str) -> list[dict]:
    reg = open_registry(db_url)
    try:
        with reg.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(sa.text(sql))]
    finally:
        reg.close()


def _sets(db_url) -> list[tuple]:
    """The stored prediction sets, oldest first: (model, version, digest, rows)."""
    return [tuple(r.values()) for r in _query(db_url, (
        "SELECT model_name, model_version, inputs_digest, count(*) AS n FROM predictions "
        "GROUP BY model_name, model_version, inputs_digest, created_at ORDER BY min(prediction_id)"))]

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


def test_a_partly_parallel_phase_is_split_by_its_cpu_use(cli, registry, tmp_path):
    """A compute phase that kept 1.25 of b's 2 CPUs busy ran, by Amdahl's law, 75% of its time on one
    CPU: on `one` that part keeps its time (same core speed) and the rest doubles, 10 s -> 12.5 s,
    not 10 s (the phase rounded to one thread) nor 20 s (the phase taken as parallel)."""
    trace = three_phase_trace()
    trace.name, trace.wall_s = "partial", 10.0
    trace.phases = [trace.phases[0]]
    trace.phases[0].weight, trace.phases[0].signature["proc"]["cpu_util"] = 1.0, 1.25
    res = cli("match", str(write_trace(trace, tmp_path / "partial.json")), "--json", "--explain", "--no-store")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    pred = {p["node"]: p for p in out["predictions"]}
    # (within 5%: the model blends the nearest configs and shrinks toward the node's median ratio)
    assert pred["one"]["predicted_s"] == pytest.approx(12.5, rel=0.05)
    assert pred["fast"]["predicted_s"] == pytest.approx(5.0, rel=0.05)   # twice the core speed either way
    (phase,) = out["phases"]
    assert phase["serial_share"] == pytest.approx(0.75)
    assert phase["per_node"]["one"]["predicted_s"] == pred["one"]["predicted_s"]
    assert {m["threads"] for m in phase["matches"]} == {1, 2}      # both parts' references are shown


def test_only_configs_signed_on_the_base_are_references(db_url, registry):
    """The unsigned non-temporal triad is measured on every node but is no reference: it could never
    be a neighbour, and must not weigh in the per-node median ratio."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profiles = references.load_profiles(conn, "b")
    reg.close()
    refs, _, _ = references.reference_set(profiles, references.threads_on(profiles, "all", 2))
    assert sorted(refs.feature_matrix.rows) == ["load|L2", "peak_fma|{}", "triad|memory"]
    assert "triad|memory|nt" in profiles.key_names.tolist()
    assert not np.isnan(refs.feature_matrix.values).all(axis=1).any()


def _gemm_profile(conn, node: str, n: int, gflops: float) -> int:
    """A profile of `node` with one gemm run at its memory point, N = `n` (as `nodereg profile` stores
    it: bytes and flops, no bandwidth figure, the level in the streams signature); its profile_id."""
    node_id = ensure_node(conn, node, fake_inventory())
    prof = insert_returning(conn, "profiles", {"uid": new_uid(), "node_id": node_id, "mode": "test",
                                               "started_at": datetime.now(), "status": "complete"}, "profile_id")
    ub_id = conn.exec_driver_sql("SELECT ub_id FROM microbenchmarks WHERE name = 'gemm'").scalar() or \
        insert_returning(conn, "microbenchmarks", {"name": "gemm", "family": "compute", "n_streams": 0}, "ub_id")
    cid = insert_returning(conn, "ub_configs", {"ub_id": ub_id, "config_key": json.dumps({"ub": "gemm", "n": n}),
                                                "threads": 1, "placement": "compact",
                                                "params_json": json.dumps({"n": n})}, "config_id")
    flops = 2 * n * n * 64
    run = insert_returning(conn, "profile_runs", {
        "profile_id": prof, "config_id": cid, "reps": 3, "unstable": False, "flops_per_rep": flops,
        "bytes_per_rep": 16 * n * (n + 64), "median_s": flops / (gflops * 1e9), "gflops": gflops}, "run_id")
    insert_rows(conn, "signatures", [{"owner_kind": "profile_run", "owner_id": run, "source": "streams",
                                      "metric": "ws_level", "value": 0.0}])
    return prof


def test_gemm_is_one_reference_per_level_whatever_each_nodes_n(db_url):
    """gemm's N follows each node's caches (here 1984 and 4032 at the memory point), so its configs are
    one reference per level, as the memory kernels' are, and its throughput is its flops per second,
    not the bytes it counts too (8 (N + K) / (N K) bytes per flop: another ratio at each N), whether
    read from the runs or from the packed profiles."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ids = [_gemm_profile(conn, node, n, gflops) for node, n, gflops in (("b", 1984, 40.0), ("fast", 4032, 80.0))]

    def read() -> dict:
        with reg.connect() as conn:
            p = references.load_profiles(conn, "b")
        assert p.key_names[p.key].tolist() == ["gemm|memory"] * 2
        return dict(zip(p.node_names[p.node].tolist(), p.throughput.tolist()))

    assert read() == pytest.approx({"b": 40e9, "fast": 80e9})
    with reg.begin() as conn:
        assert store_vectors(conn, ids) == 2
    assert read() == pytest.approx({"b": 40e9, "fast": 80e9})
    reg.close()


def test_one_thread_runs_of_one_machine_are_pooled(db_url, registry):
    """b and one made of CPUs of one host: their one-thread runs measured one core, so each key's
    becomes the geometric mean of the two (the memory triad: 8 and 8.4 GB/s); runs at 2 threads
    and nodes of other hosts (fast: none known) keep their own."""
    def triad(profiles, node, threads):
        at = ((profiles.node_names[profiles.node] == node) & (profiles.threads == threads)
              & (profiles.key_names[profiles.key] == "triad|memory"))
        return profiles.throughput[at].tolist()

    reg = open_registry(db_url)
    with reg.begin() as conn:
        alone = references.load_profiles(conn, "b")
        conn.execute(sa.text("UPDATE profiles SET host = 'h' WHERE node_id IN "
                             "(SELECT node_id FROM nodes WHERE name IN ('b', 'one'))"))
        pooled = references.load_profiles(conn, "b")
    reg.close()
    assert triad(alone, "b", 1) == pytest.approx([8e9]) and triad(alone, "one", 1) == pytest.approx([8.4e9])
    assert triad(pooled, "b", 1) == triad(pooled, "one", 1) == pytest.approx([(8e9 * 8.4e9) ** 0.5])
    assert triad(pooled, "b", 2) == triad(alone, "b", 2) and triad(pooled, "fast", 1) == triad(alone, "fast", 1)


def test_a_cpu_subset_of_the_base_machine_is_slower_by_at_most_its_cpu_ratio(cli, db_url, registry):
    """b (2 CPUs) and one (1 CPU) made of one host's CPUs, b's two-thread bandwidth 2.5x what the
    profile says (3.75x one thread, as this guest's noisy profiles read up to 3.2x): the memory
    phase, on both CPUs of b, is predicted at most 2x slower on one (half the CPUs), with a
    warning; one on another host keeps the configs' ratio."""
    def memory_phase_on_one() -> tuple[float, list[str]]:
        res = cli("match", "app", "--json", "--no-store", "--explain")
        assert res.code == 0, res.err
        doc = json.loads(res.out)
        (phase,) = [p for p in doc["phases"] if p["name"] == "memory"]
        return phase["per_node"]["one"]["predicted_s"], doc["warnings"]

    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE profile_runs SET median_s = median_s / 2.5 WHERE profile_id IN (SELECT "
                             "p.profile_id FROM profiles p JOIN nodes n ON n.node_id = p.node_id WHERE n.name = 'b') "
                             "AND config_id IN (SELECT config_id FROM ub_configs WHERE threads = 2) AND bytes_per_rep > 0"))
    reg.close()
    apart, said = memory_phase_on_one()
    assert apart > 2.5 * 10.0 and not any("own machine" in w for w in said)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE profiles SET host = 'h' WHERE node_id IN "
                             "(SELECT node_id FROM nodes WHERE name IN ('b', 'one'))"))
    reg.close()
    together, said = memory_phase_on_one()
    assert 10.0 < together <= 2 * 10.0 * 1.0001
    assert any("phase memory: on 1 node of the base node's own machine" in w for w in said), said


def test_a_fixed_team_on_fewer_cpus_takes_turns(cli, db_url, registry):
    """An app told to run 2 threads (OMP_NUM_THREADS when traced, as `xz -T2` runs two whatever the
    node) keeps them on `one` (1 CPU), where they take turns: the memory phase there is one thread's
    time x 2 (b's one-thread triad at 8 GB/s, one's at 8.4: 10 s x 8 / 8.4 x 2 = 19 s for its parallel
    98%), not the time of the work split over one CPU as a team that adapts runs it (10 s x 12 / 8.4
    = 14.3 s); said in a warning. `fast` (2 CPUs) is predicted alike either way."""
    def per_node() -> tuple[dict, list[str]]:
        res = cli("match", "app", "--json", "--no-store", "--explain")
        assert res.code == 0, res.err
        doc = json.loads(res.out)
        (phase,) = [p for p in doc["phases"] if p["name"] == "memory"]
        return {n: v["predicted_s"] for n, v in phase["per_node"].items()}, doc["warnings"]

    adapting, said = per_node()
    assert 14.0 < adapting["one"] < 14.5 and not any("fixed team" in w for w in said)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE traces SET threads = 2"))
    reg.close()
    fixed, said = per_node()
    assert 0.98 * 10 * 8 / 8.4 * 2 < fixed["one"] < 0.98 * 10 * 8 / 8.4 * 2 + 0.3
    assert fixed["fast"] == pytest.approx(adapting["fast"])
    assert "phase memory: a fixed team of 2 threads on one (1 CPU): its threads take turns there, projected as " \
           "one thread's time x 2 / CPUs (the cost of switching between them is not in the profiles)" in said


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


@pytest.mark.parametrize("form", ["url", "path"])
def test_match_imports_neither_pandas_nor_sqlalchemy(db_url, registry, form):
    """Importing pandas alone is a sixth of `nodereg match` on a 10,000-node registry (docs/match.md),
    on either backend; SQLAlchemy with its dialect a third: a registry at this nodereg's schema is
    read without it, a DuckDB file given as a path (registry/db/duckread.py) and PostgreSQL
    (registry/db/pgread.py); a `duckdb:///` URL goes through SQLAlchemy."""
    if form == "path" and not db_url.startswith("duckdb"):
        pytest.skip("a PostgreSQL registry is named by its URL")
    quick = form == "path" or not db_url.startswith("duckdb")
    heavy = ("pandas", "pyarrow", "sklearn") + (("sqlalchemy",) if quick else ())
    code = ("import sys\nfrom registry.cli import main\nsys.argv = ['nodereg', 'match', 'app', '--json', '--no-store']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NODEREG_DB": db_url if form == "url" else _path_of(db_url)})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout[:res.stdout.rindex("[")])["predictions"]
    assert res.stdout.strip().splitlines()[-1] == "[]"


def _path_of(duckdb_url: str) -> str:
    return duckdb_url.removeprefix("duckdb:///")


def test_match_read_quick_says_what_it_says_through_sqlalchemy(cli, db_url, registry, monkeypatch):
    """Read without SQLAlchemy (a DuckDB file given as a path, a PostgreSQL URL) or through it (the
    quick readers declined): the same predictions, the same errors, and the set is stored all the same."""
    from registry.db import duckread, pgread

    asks = [("match", "app", "--json", "--no-store"), ("match", str(registry), "--json", "--no-store", "--explain"),
            ("match", "nothing-like-this"), ("match", "app", "--nodes", "fast,ghost"), ("match", "%")]
    monkeypatch.setenv("NODEREG_DB", _path_of(db_url) if db_url.startswith("duckdb") else db_url)
    said = {"quick": [cli(*ask) for ask in asks]}
    with monkeypatch.context() as m:
        for module in (duckread, pgread):
            m.setattr(module, "open_current", lambda _: None)
        said["sqlalchemy"] = [cli(*ask) for ask in asks]
    assert said["quick"] == said["sqlalchemy"]
    assert json.loads(said["quick"][0].out)["predictions"] and said["quick"][2].code == 1
    assert cli("match", "app").code == 0 and len(_sets(db_url)) == 1     # read quick, stored through SQLAlchemy


def test_match_errors(cli, registry, tmp_path):
    assert_one_line_error(cli("match", "app", "--model", "nope"), "unknown model 'nope'")
    assert_one_line_error(cli("match", "app", "--model", "downey"), "no runs of 'app' on 'b'")
    assert_one_line_error(cli("match", "nothing-like-this"), "unknown trace")
    assert_one_line_error(cli("match", "x" * 300), "unknown trace")   # longer than a file name: not an OSError
    assert_one_line_error(cli("match", "app", "--nodes", "fast,ghost"), "ghost")
    other = three_phase_trace(node="ghost")
    assert_one_line_error(cli("match", str(write_trace(other, tmp_path / "g.json"))), "--base NODE")
    assert_one_line_error(cli("match", "app", "--base", "fast"), "recorded on 'b', not on 'fast'")
    (tmp_path / "bad.json").write_text("{ not json")
    assert_one_line_error(cli("match", str(tmp_path / "bad.json")), "corrupt")
    doc = json.loads(registry.read_text())
    (tmp_path / "new.json").write_text(json.dumps({**doc, "version": 99}))
    assert_one_line_error(cli("match", str(tmp_path / "new.json")), "newer")
    (tmp_path / "zero.json").write_text(json.dumps({**doc, "wall_s": 0.0}))   # found by tests/fuzz_readers.py
    assert_one_line_error(cli("match", str(tmp_path / "zero.json")), "lasted 0 s")


def test_uid_prefix_is_literal(db_url, registry):
    """'%' and '_' in a uid prefix are characters, not LIKE wildcards."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for uid in ("x_1", "xa1"):
            trace = three_phase_trace()
            trace.meta["uid"] = uid
            store.save(conn, trace)
        assert find_trace(conn, "x_").uid == "x_1"
        for text in ("%", "_", "x%"):
            with pytest.raises(UserError, match="unknown trace"):
                find_trace(conn, text)
    reg.close()


def test_base_without_profile(cli, db_url, tmp_path):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "b", fake_inventory())
        store.save(conn, three_phase_trace())
    reg.close()
    assert_one_line_error(cli("match", "app"), "has no profile")


def test_trace_of_an_unprofiled_host_needs_a_base(cli, db_url, registry, tmp_path):
    """`nodereg trace` on a host with no profile records the trace against the host's node: match asks
    for --base, and with it projects as from that base."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "host", fake_inventory(), source="trace")
        store.save(conn, three_phase_trace(node="host"))
    reg.close()
    path = write_trace(three_phase_trace(node="host"), tmp_path / "host.json")
    assert_one_line_error(cli("match", str(path)), "recorded on 'host', which has no profile", "--base NODE")
    assert_one_line_error(cli("match", str(path), "--model", "downey"), "--base NODE")
    res = cli("match", str(path), "--base", "b", "--json")
    assert res.code == 0, res.err
    on_base = json.loads(cli("match", str(registry), "--json").out)["predictions"]
    assert json.loads(res.out)["base"] == "b" and json.loads(res.out)["predictions"] == on_base


def test_scaling_model_extends_the_projection_to_more_cores(cli, db_url, registry):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profile_at_speeds(conn, "quad", 4, base=False)
    reg.close()
    # the app on b: 40 s on 1 thread, 21 s on 2 (as traced): Amdahl's serial fraction 0.05
    for threads, time_s in ((1, 40.0), (2, 21.0)):
        assert cli("runs", "add", "--new", "app", "b", "--threads", str(threads), "--time", str(time_s)).code == 0
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
    # each prediction set names its model and version: the scaling model's with the projection's
    similarity = f"{__version__}+weights{WEIGHTS_VERSION}"   # the similarity weights are the model's
    assert [s[:2] for s in _sets(db_url)] == [("amdahl+similarity", f"{__version__}+{similarity}"),
                                             ("similarity", similarity)]
    assert out["model_version"] == f"{__version__}+{similarity}"


def test_model_options_change_the_projection_and_its_stored_set(cli, db_url, registry):
    def predicted(*args):
        res = cli("match", "app", "--json", *args)
        assert res.code == 0, res.err
        return {p["node"]: p["predicted_s"] for p in json.loads(res.out)["predictions"]}

    default = predicted()
    assert predicted("--option", "k=5") == default                       # the default, said out loud
    assert predicted("--option", "k=1", "--option", "shrink=1") != default
    assert len(_sets(db_url)) == 3                                        # a set per set of options
    assert_one_line_error(cli("match", "app", "--option", "k=0"), "model 'similarity' option k=0: out of range")
    assert_one_line_error(cli("match", "app", "--option", "kk=1"), "model 'similarity' has no option 'kk'")


def test_looks_at_an_unchanged_registry_store_one_set(cli, db_url, registry):
    """Every look stored the same set again (4 copies after 4 looks); now one set per trace, model and
    state of what the prediction is made from."""
    for args in ([], ["--json"], ["--explain"], ["--json", "--explain", "--top", "1"]):
        assert cli("match", "app", *args).code == 0
    (first,) = _sets(db_url)
    assert first[:2] == ("similarity", f"{__version__}+weights{WEIGHTS_VERSION}") and first[3] == 3
    # a run on another node is not an input of this prediction
    assert cli("runs", "add", "--new", "app", "fast", "--threads", "2", "--time", "9").code == 0
    assert cli("match", "app").code == 0
    assert _sets(db_url) == [first]
    # a run on the base node (the base time) and a newly profiled node are: a new set each
    assert cli("runs", "add", "--new", "app", "b", "--threads", "2", "--time", "20").code == 0
    assert cli("match", "app", "--json").code == 0
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profile_at_speeds(conn, "quad", 4, base=False)
    reg.close()
    assert cli("match", "app").code == 0
    assert cli("match", "app").code == 0
    sets = _sets(db_url)
    assert [n for *_, n in sets] == [3, 3, 4] and len({d for _, _, d, _ in sets}) == 3


def test_a_state_seen_before_replaces_its_older_set(cli, db_url, registry):
    """Back to an earlier state (the newly profiled node removed): its set is stored anew, as the latest,
    and the older copy goes."""
    assert cli("match", "app").code == 0
    (before,) = _sets(db_url)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profile_at_speeds(conn, "quad", 4, base=False)
    reg.close()
    assert cli("match", "app").code == 0
    assert cli("nodes", "rm", "quad", "--yes").code == 0
    assert cli("match", "app").code == 0
    sets = _sets(db_url)
    assert len(sets) == 2 and sets[-1] == before and sets[0][2] != before[2]


def test_no_store_shows_and_stores_nothing(cli, db_url, registry):
    res = cli("match", "app", "--no-store", "--json")
    assert res.code == 0, res.err
    assert [p["node"] for p in json.loads(res.out)["predictions"]] == ["fast", "b", "one"]
    assert _sets(db_url) == []


def test_v_predictions_names_the_trace_and_base_and_compares_runs_at_the_same_thread_count(cli, db_url, tmp_path):
    """The measured median mixed every thread count: on `b` the median of 1- and 2-thread runs."""
    uid = _populate(db_url)
    for node, threads, time_s in (("b", 1, 40.0), ("b", 2, 21.0), ("b", 2, 23.0), ("one", 1, 41.0),
                                  ("one", 2, 30.0), ("one", 2, 31.0)):
        assert cli("runs", "add", "--new", "app", node, "--threads", str(threads), "--time", str(time_s)).code == 0
    assert cli("match", "app").code == 0
    assert cli("match", str(write_trace(three_phase_trace(), tmp_path / "file.json"))).code == 0  # not in the registry
    rows = _query(db_url, "SELECT trace_uid, base_node, node, threads, measured_runs, measured_s, abs_rel_error, "
                          "predicted_s FROM v_predictions")
    stored = {r["node"]: r for r in rows if r["trace_uid"] == uid}
    assert {r["base_node"] for r in rows} == {"b"} and sum(r["trace_uid"] is None for r in rows) == 3
    assert (stored["b"]["threads"], stored["b"]["measured_runs"], stored["b"]["measured_s"]) == (2, 2, 22.0)
    assert (stored["one"]["threads"], stored["one"]["measured_runs"], stored["one"]["measured_s"]) == (1, 1, 41.0)
    assert stored["fast"]["measured_s"] is None
    assert stored["one"]["abs_rel_error"] == pytest.approx(abs(stored["one"]["predicted_s"] - 41.0) / 41.0)


def _during_projection(monkeypatch, action) -> list:
    """Run `action()` once, when `match` projects its first phase; returns the list its result goes to."""
    seen = []
    project_phase = project_module._project_phase

    def meanwhile(*args, **kwargs):
        if not seen:
            seen.append(action())
        return project_phase(*args, **kwargs)

    monkeypatch.setattr(project_module, "_project_phase", meanwhile)
    return seen


def _writes_meanwhile(db_url) -> str:
    """Another process adds a run; on PostgreSQL, also what this process holds open then."""
    res = subprocess.run([sys.executable, "-m", "registry", "--db", db_url, "runs", "add", "--new", "other", "b",
                          "--threads", "1", "--time", "1"], capture_output=True, text=True, timeout=120)
    if res.returncode:
        return res.stderr
    if db_url.startswith("postgresql"):
        eng = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
        with eng.connect() as conn:
            open_here = conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%'")).scalar_one()
        eng.dispose()
        if open_here:
            return f"{open_here} transaction(s) open"
    return "written"


def test_match_projects_with_no_registry_transaction_open(cli, db_url, registry, monkeypatch):
    """It computed inside its write transaction: on DuckDB holding the file lock for the whole projection.
    While it projects now, another process writes to a DuckDB registry; on PostgreSQL no transaction of
    this process is open."""
    seen = _during_projection(monkeypatch, lambda: _writes_meanwhile(db_url))
    res = cli("match", "app")
    assert res.code == 0, res.err
    assert seen == ["written"]
    assert _sets(db_url)[0][3] == 3 and _query(db_url, "SELECT name FROM apps WHERE name = 'other'")


def test_a_node_removed_while_match_projects_stores_nothing(cli, db_url, registry, monkeypatch):
    seen = _during_projection(monkeypatch, lambda: subprocess.run(
        [sys.executable, "-m", "registry", "--db", db_url, "nodes", "rm", "one", "--yes"], timeout=120).returncode)
    assert_one_line_error(cli("match", "app"), "one left the registry while `match` computed")
    assert seen == [0] and _sets(db_url) == []


@pytest.mark.empty_registry
def test_migration_7_keeps_one_of_identical_sets_and_finds_their_base(cli, db_url, monkeypatch, tmp_path):
    """A registry at schema 6 with repeated looks stored (the same set twice, then another one, and a
    trace file's set): `nodereg migrate` (saving the registry first: 0007 deletes rows) brings it up
    to date; the older copy goes, each set gets its base node."""
    every = migrate.available()
    monkeypatch.setattr(migrations, "available", lambda: [m for m in every if m.version < 7])
    uid = _populate(db_url)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        trace_id = conn.execute(sa.text("SELECT trace_id FROM traces")).scalar_one()
        app_id = conn.execute(sa.text("SELECT app_id FROM apps")).scalar_one()
        nodes = dict(conn.execute(sa.text("SELECT name, node_id FROM nodes")).fetchall())
        for minute, trace, predicted in ((1, trace_id, 10.0), (2, trace_id, 10.0), (3, trace_id, 11.0),
                                         (4, None, 10.0)):
            insert_rows(conn, "predictions", [{
                "uid": new_uid(), "trace_id": trace, "app_id": app_id, "node_id": nodes[node],
                "model_name": "similarity", "model_version": None, "threads": 2, "predicted_s": predicted + i,
                "low_s": None, "high_s": None, "node_rank": i + 1, "coverage": 1.0,
                "explanation_json": '{"base":"b","phases":[]}' if trace is None else "{}",
                "created_at": datetime(2026, 1, 1, 0, minute)} for i, node in enumerate(("b", "fast"))])
    reg.close()
    monkeypatch.setattr(migrations, "available", lambda: every)
    assert cli("migrate", "--backup", str(tmp_path / "schema6.zip")).code == 0
    assert (tmp_path / "schema6.zip").exists()
    assert cli("match", "app").code == 0
    rows = _query(db_url, "SELECT trace_uid, base_node, node, predicted_s, inputs_digest, created_at "
                          "FROM v_predictions WHERE inputs_digest IS NULL ORDER BY created_at, node")
    assert [(r["trace_uid"], r["created_at"].minute, r["predicted_s"]) for r in rows] == [
        (uid, 2, 10.0), (uid, 2, 11.0), (uid, 3, 11.0), (uid, 3, 12.0), (None, 4, 10.0), (None, 4, 11.0)]
    assert {r["base_node"] for r in rows} == {"b"}
    assert [n for *_, n in _sets(db_url)][-1] == 3    # and the look stored its own set


def test_the_headline_interval_is_the_phases_bounds_taken_through_said_steps(cli, db_url, registry):
    """#32: a headline of 0.44 - 55.7 s beside phases whose bounds added up to 4.91 - 4.99 s. Each node's
    interval starts from its phases' summed bounds, and every step that widens it (the base time's
    noise, a caveat of the base profile here: partial, x1.25) is recorded, applied in order and said."""
    reg = open_registry(db_url)
    with reg.begin() as conn:   # the base node's profile measured only some kernels: every interval x1.25
        conn.execute(sa.text("UPDATE profiles SET mode = 'custom' WHERE node_id = "
                             "(SELECT node_id FROM nodes WHERE name = 'b')"))
    reg.close()
    out = json.loads(cli("match", "app", "--json", "--explain", "--no-store").out)
    for pred in out["predictions"]:
        steps = pred["interval_steps"]
        phase_low = sum(p["per_node"][pred["node"]]["low_s"] for p in out["phases"])
        phase_high = sum(p["per_node"][pred["node"]]["high_s"] for p in out["phases"])
        assert steps[0]["step"] == "the phases' bounds, summed"
        assert (steps[0]["low_s"], steps[0]["high_s"]) == (pytest.approx(phase_low), pytest.approx(phase_high))
        assert (steps[-1]["low_s"], steps[-1]["high_s"]) == (pred["low_s"], pred["high_s"])
        assert steps[-1]["step"].startswith("the profiles' caveats x1.2")
        assert steps[-1]["low_s"] == pytest.approx(steps[-2]["low_s"] / 1.25)
        assert steps[-1]["high_s"] == pytest.approx(steps[-2]["high_s"] * 1.25)
        for before, after in zip(steps, steps[1:]):   # uncalibrated: each step only widens
            assert after["low_s"] <= before["low_s"] and after["high_s"] >= before["high_s"], steps
    res = cli("match", "app", "--no-store")
    said = " ".join(res.out.split())
    top = out["predictions"][0]
    assert (f"interval of {top['node']}: the phases' bounds, summed: {top['interval_steps'][0]['low_s']:.3g} - "
            f"{top['interval_steps'][0]['high_s']:.3g} s;") in said
    assert f"the profiles' caveats x1.2 (see the warnings): {top['low_s']:.3g} - {top['high_s']:.3g} s" in said
