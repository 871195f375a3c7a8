"""`nodereg match --model corredor` on a trace whose phase carries memory streams.

Two nodes: the base `two` (2 CPUs) and `one` (1 CPU). Each profile measures two thesis configs
(mbw1c and mbw1p over 10,000 doubles, stride 8) at every thread count with known times per
iteration. The traced phase has one private stream of 10,000 doubles and the time per iteration
of mbw1p on `two`, so the index is 125 for mbw1p, and the estimate on `one` is mbw1p's tpi there
times the base iterations times 2/1 (the phase's work split over one thread instead of two).
"""

import json

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error

from registry.db import open_registry, utcnow
from registry.db.write import insert_returning, insert_rows, new_uid
from registry.io.tracefile import Phase, Trace, write_trace
from registry.nodes import ensure_node
from registry.trace import store
from registry_data import fake_inventory, three_node_registry

TPI = {("two", 2): {"mbw1p": 0.002, "mbw1c": 0.004}, ("two", 1): {"mbw1p": 0.0018, "mbw1c": 0.0019},
       ("one", 1): {"mbw1p": 0.0025, "mbw1c": 0.0026}}
STREAM = {"size_elems": 10_000, "stride_bytes": 8, "dtype": "8B", "elem_bytes": 8, "access": "P", "pattern": "seq"}


def _config(conn, ub: str, threads: int) -> int:
    ub_id = conn.execute(sa.text("SELECT ub_id FROM microbenchmarks WHERE name = :n"), {"n": ub}).scalar_one_or_none() or \
        insert_returning(conn, "microbenchmarks", {"name": ub, "family": "thesis", "n_streams": 1}, "ub_id")
    access = "P" if ub == "mbw1p" else "C"
    key = json.dumps({"placement": "compact", "streams": [[10_000, 8, "f64", access, "seq"]], "threads": threads,
                      "ub": ub}, sort_keys=True, separators=(",", ":"))
    cid = conn.execute(sa.text("SELECT config_id FROM ub_configs WHERE config_key = :k"), {"k": key}).scalar_one_or_none()
    if cid is None:
        cid = insert_returning(conn, "ub_configs", {"ub_id": ub_id, "config_key": key, "threads": threads,
                                                    "placement": "compact", "params_json": "{}"}, "config_id")
        insert_rows(conn, "ub_streams", [{"config_id": cid, "stream_index": 0, **STREAM, "dtype": "f64",
                                          "access": access}])
    return cid


def _trace(streams=(STREAM,), iterations=4.5e9, cpu_util=1.98, omp_threads=None, node="two",
           signature=None) -> Trace:
    phase = Phase("main._omp_fn.0", "omp", 0.5, 9.5, 0.9, 9.0, iterations=iterations, streams=list(streams),
                  signature=signature or {"proc": {"cpu_util": cpu_util}})
    return Trace(name="mm", node=node, host="h", command=["mm"], exit_status=0, status="ok", wall_s=10.0,
                 interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc", "streams"], phases=[phase],
                 meta={"omp_max_threads": omp_threads})


@pytest.fixture
def registry(db_url, tmp_path):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("two", 2), ("one", 1)):
            node_id = ensure_node(conn, node, fake_inventory(cpus=tuple(range(cpus))))
            prof = insert_returning(conn, "profiles", {"uid": new_uid(), "node_id": node_id, "mode": "test",
                                                       "started_at": utcnow(), "status": "complete"}, "profile_id")
            for threads in range(1, cpus + 1):
                for ub, tpi in TPI[(node, threads)].items():
                    insert_rows(conn, "profile_runs", [{
                        "profile_id": prof, "config_id": _config(conn, ub, threads), "reps": 3, "unstable": False,
                        "iterations": 1000, "tpi_us": tpi, "median_s": tpi * 1e-3, "bytes_per_rep": 8e3 * threads}])
        store.save(conn, _trace())
    reg.close()
    return tmp_path


def test_corredor_matches_and_estimates_by_the_thesis(cli, registry):
    res = cli("match", "mm", "--model", "corredor", "--json", "--explain")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    (phase,) = out["phases"]
    best = phase["matches"][0]
    assert json.loads(best["config"])["ub"] == "mbw1p" and best["index"] == 125 and best["similarity"] == 1.0
    per_node = phase["per_node"]
    assert per_node["two"]["predicted_s"] == pytest.approx(0.002e-6 * 4.5e9)          # tpi x iterations
    assert per_node["one"]["predicted_s"] == pytest.approx(0.0025e-6 * 4.5e9 * 2)      # x t_base / t_one
    total = {p["node"]: p["predicted_s"] for p in out["predictions"]}
    assert total["one"] == pytest.approx(22.5 + 1.0 * 22.5 / 9.0)    # the remainder scales like the phase
    assert out["model"] == "corredor" and out["coverage"] == pytest.approx(0.9)
    assert "nearest: mbw1p: 1 stream: 10000 f64, stride 8 B, private, seq (1.00)" in \
        cli("match", "mm", "--model", "corredor", "--no-store").out


def test_corredor_predictions_are_stored_with_reasons(cli, registry, db_url):
    assert cli("match", "mm", "--model", "corredor").code == 0
    reg = open_registry(db_url)
    with reg.connect() as conn:
        rows = conn.execute(sa.text("SELECT n.name, p.explanation_json FROM predictions p JOIN nodes n "
                                    "ON n.node_id = p.node_id WHERE p.model_name = 'corredor'")).fetchall()
    reg.close()
    explained = {name: json.loads(text) for name, text in rows}
    assert set(explained) == {"one", "two"}
    assert json.loads(explained["two"]["phases"][0]["matches"][0]["config"])["ub"] == "mbw1p"


def test_trace_file_carries_the_streams(cli, registry):
    path = write_trace(_trace(), registry / "mm.json")
    res = cli("match", str(path), "--model", "corredor", "--json", "--no-store")
    assert res.code == 0, res.err
    assert json.loads(res.out)["phases"][0]["matches"][0]["index"] == 125


def test_an_openmp_region_uses_its_team_not_a_short_runs_cpu_samples(cli, registry):
    path = write_trace(_trace(cpu_util=0.6, omp_threads=2), registry / "short.json")
    res = cli("match", str(path), "--model", "corredor", "--json", "--explain", "--no-store")
    assert res.code == 0, res.err
    per_node = json.loads(res.out)["phases"][0]["per_node"]
    assert per_node["two"]["threads"] == 2 and per_node["one"]["threads"] == 1
    assert per_node["one"]["predicted_s"] == pytest.approx(0.0025e-6 * 4.5e9 * 2)


def test_a_trace_without_streams_names_the_command(cli, registry):
    path = write_trace(_trace(streams=()), registry / "plain.json")
    assert_one_line_error(cli("match", str(path), "--model", "corredor"), "nodereg trace --streams -- CMD")



def test_the_ratio_estimate_keeps_the_phases_own_time_on_the_base(cli, registry):
    """A phase 1.5x slower per iteration than its winner (3e9 iterations in 9 s: 0.003 us vs 0.002):
    the thesis's estimate on the other node carries that difference; --option estimate=ratio scales
    the phase's 9 s by the winner's change from the base node to the other node, and so does the
    default, auto, since the winner's tpi scores nothing in the zones (d% 33 > 20)."""
    path = write_trace(_trace(iterations=3e9), registry / "slower.json")
    per_node = {}
    for option in ("estimate=thesis", "estimate=ratio", "estimate=auto"):
        res = cli("match", str(path), "--model", "corredor", "--option", option, "--json", "--explain", "--no-store")
        assert res.code == 0, res.err
        per_node[option] = {n: v["predicted_s"] for n, v in json.loads(res.out)["phases"][0]["per_node"].items()}
    # the thesis's estimate on every node, the base included (0.002 us x 3e9: 6 s, not the phase's 9 s)
    assert per_node["estimate=thesis"] == {"two": pytest.approx(0.002e-6 * 3e9),
                                           "one": pytest.approx(0.0025e-6 * 3e9 * 2)}
    assert per_node["estimate=ratio"] == {"two": pytest.approx(9.0), "one": pytest.approx(9.0 * 0.0025 * 2 / 0.002)}
    assert per_node["estimate=auto"] == per_node["estimate=ratio"]   # tpi 33% off: iZ 0, so the ratio form


def test_a_phase_no_config_represents_is_projected_from_its_signature(cli, db_url, tmp_path):
    """registry_data's three nodes (signatures on the base b) plus mbw1p, whose time per iteration
    is a tenth of the phase's (d% 90 > 80: discarded, no winner). The phase is then projected as
    the similarity model projects it, and says so; unmatched=remainder keeps the thesis's rule
    (nothing projected: the base time everywhere)."""
    trace = _trace(node="b", iterations=9.0 / 0.02e-6, signature={"proc": {"cpu_util": 1.98, "wss_llc": 8.0}})
    three_node_registry(db_url, trace)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2), ("one", 1)):
            prof = conn.execute(sa.text("SELECT max(p.profile_id) FROM profiles p JOIN nodes n ON n.node_id = "
                                        "p.node_id WHERE n.name = :n"), {"n": node}).scalar_one()
            insert_rows(conn, "profile_runs", [{
                "profile_id": prof, "config_id": _config(conn, "mbw1p", t), "reps": 3, "unstable": False,
                "iterations": 1000, "tpi_us": 0.002, "median_s": 2e-6, "bytes_per_rep": 8e3 * t}
                for t in range(1, cpus + 1)])
    reg.close()

    def phase(*args):
        res = cli("match", "mm", "--json", "--explain", "--no-store", *args)
        assert res.code == 0, res.err
        out = json.loads(res.out)
        return out["phases"][0], out["warnings"]

    fallback, warnings = phase("--model", "corredor")
    default, _ = phase("--model", "similarity")
    thesis, thesis_warnings = phase("--model", "corredor", "--option", "unmatched=remainder")
    assert fallback["projected_by"] == "similarity" and default["projected_by"] == "similarity"
    assert fallback["per_node"] == default["per_node"]
    assert fallback["per_node"]["one"]["predicted_s"] > 1.3 * fallback["per_node"]["b"]["predicted_s"]
    assert any("survives the thesis's discards" in w and "time per iteration by 90%" in w for w in warnings)
    assert thesis["projected_by"] == "corredor" and thesis["matches"] == []
    assert {n: v["predicted_s"] for n, v in thesis["per_node"].items()} == pytest.approx({"b": 9.0, "fast": 9.0,
                                                                                        "one": 9.0})
    assert any("no phase could be projected" in w for w in thesis_warnings)
    shown = cli("match", "mm", "--model", "corredor", "--no-store")
    assert "nearest (projected by similarity)" in shown.out and '{"' not in shown.out + shown.err


def test_the_time_per_iteration_follows_the_base_time_not_the_traced_run_alone(cli, registry):
    """Two measured runs of 20 s on the base: the base time is the median (20 s, not the traced
    10 s), the phase 90% of it, so its time per iteration is 18 s / 4.5e9 = 0.004 us: mbw1c's,
    which wins the tie at index 100 (mbw1p: same access, tpi 50% off) and estimates 18 s on the base."""
    for _ in range(2):
        assert cli("runs", "add", "--new", "mm", "two", "--threads", "2", "--time", "20").code == 0
    res = cli("match", "mm", "--model", "corredor", "--json", "--explain", "--no-store")
    assert res.code == 0, res.err
    (phase,) = json.loads(res.out)["phases"]
    assert json.loads(phase["matches"][0]["config"])["ub"] == "mbw1c" and phase["matches"][0]["index"] == 100
    assert phase["per_node"]["two"]["predicted_s"] == pytest.approx(0.004e-6 * 4.5e9)

