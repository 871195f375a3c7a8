"""Predicting MPI applications (issue #31 item 3): the communication models (hockney, branikas),
the communication part of a phase projected with each node's MPI profile, `match --ranks`, and
`match --configs` (ranks x threads per node type). The MPI profiles are written with known
latency and bandwidth; the models must recover them."""

import json
import math

import numpy as np
import pytest
from conftest import assert_one_line_error, both_backends
from registry_data import profile_at_speeds

from registry.db import open_registry, utcnow
from registry.db.write import insert_returning
from registry.io.tracefile import Phase, Trace
from registry.nodes import ensure_node
from registry.errors import UserError
from registry.models.comm import BoostedModel, BranikasModel, CommProfile, HockneyModel, create
from registry.trace import store

SIZES = [8, 128, 2048, 32768, 524288, 4194304]
ALPHA_US = {"b": 1.0, "fast": 0.5, "slowcomm": 1.0, "fabric:cn": 10.0}   # the fabric: `nodereg fleet mpi cn`
BETA = {"b": 5e9, "fast": 20e9, "slowcomm": 0.5e9, "fabric:cn": 1e9}


def pingpong(alpha_us, beta):
    return [(2, "same_ccx", m, alpha_us + m / beta * 1e6) for m in SIZES]


def test_hockney_recovers_latency_and_bandwidth():
    model = HockneyModel().fit(CommProfile("x", {"pingpong": pingpong(1.5, 8e9)}))
    assert model.alpha == pytest.approx(1.5e-6, rel=1e-6) and 1 / model.inv_beta == pytest.approx(8e9, rel=1e-6)
    # 100 messages of 1 MiB and 10 allreduces of 8 B (measured at 2 ranks: 3 us at 8 B, 30 us at 8 KiB)
    model.profile.points["allreduce"] = [(2, "same_ccx", 8, 3.0), (2, "same_ccx", 8192, 30.0)]
    sig = {"msgs": 100, "msg_bytes": 100 * 2**20, "coll": 10, "coll_bytes": 80}
    assert model.seconds(sig, 2) == pytest.approx(100 * 1.5e-6 + 100 * 2**20 / 8e9 + 10 * 3e-6, rel=1e-6)


def test_branikas_base_from_the_papers_exchange_table():
    """Table 6.1 of Branikas 2024 (IMB Exchange, 64 nodes, us): the paper derives Base = 6.10 us."""
    table = {32768: [27.49, 43.77, 66.73, 116.48, 235.55], 262144: [136.91, 250.50, 453.08, 923.11, 1897.49],
             2097152: [980.38, 1900.20, 3679.86, 7520.41, 15333.66]}
    points = [(ppn, "node", m, us) for m, row in table.items() for ppn, us in zip((1, 2, 4, 8, 16), row)]
    model = BranikasModel().fit(CommProfile("paper", {"exchange": points}))
    assert model.base_s == pytest.approx(6.10e-6, rel=0.1)
    errors = [abs(model.exchange_s(p, m) * 1e6 / us - 1) for p, _, m, us in points if m >= 262144]
    assert np.median(errors) < 0.1          # the model holds for the large messages it is made for


def _per_message_us(m, ranks):
    """A node whose MPI switches protocol at 64 KiB (eager: 1 us latency; rendezvous: 6 us) at
    10 GB/s, and whose ranks contend for memory: each doubling of ranks adds half the time."""
    return ((1.0 if m < 65536 else 6.0) + m / 10e9 * 1e6) * (1 + 0.5 * math.log2(ranks / 2))


def test_boosted_trees_fit_a_known_profile():
    sizes = [2**k for k in range(3, 23)]
    points = {"exchange": [(r, pl, m, 2 * _per_message_us(m, r) * slower) for r in (2, 4, 8) for m in sizes
                           for pl, slower in (("compact", 1), ("scatter", 2))],
              "pingpong": [(2, pl, m, _per_message_us(m, 2) * slower) for m in sizes
                           for pl, slower in (("same_ccx", 1), ("cross_socket", 3))]}
    model = BoostedModel().fit(CommProfile("x", points))    # (from the closest placements: compact, same_ccx)

    def error(m, r):
        return abs(model.message_s(r, m) * 1e6 / _per_message_us(m, r) - 1)

    assert np.median([error(m, r) for m in sizes for r in (2, 4, 8)]) < 0.05
    # between the measured sizes (not across the step at 64 KiB), where trees are piecewise constant
    # and the backbone's slope carries the trend
    between = [error(1.5 * m, r) for m in sizes[:-1] if not 32768 <= m < 65536 for r in (2, 4, 8)]
    assert np.median(between) < 0.15
    backbone = np.exp(np.column_stack([np.ones(1), [[math.log2(1000), 1.0, 1.0]]]) @ model.backbone)[0] * 1e6
    assert abs(backbone / _per_message_us(1000, 2) - 1) > 0.3 > error(1000, 2)    # the trees, not the backbone, fit it
    assert not model.warnings
    model.message_s(16, 4096)
    assert model.warnings == ["x: the boosted model was trained on 2..8 ranks, not 16: its trees add their edge value "
                              "there, the log-log backbone the trend"]
    # a phase: 100 messages of 1 MiB at 4 ranks
    assert model.point_to_point_s(100, 100 * 2**20, 4) == pytest.approx(100 * _per_message_us(2**20, 4) * 1e-6,
                                                                         rel=0.1)


def test_boosted_trees_refuse_too_few_figures():
    few = CommProfile("tiny", {"pingpong": [(2, "same_ccx", m, 1.0 + m / 1e4) for m in (8, 1024, 65536)]})
    with pytest.raises(UserError) as err:
        BoostedModel().fit(few)
    assert "\n" not in str(err.value) and str(err.value).startswith(
        "node 'tiny' has 3 ping-pong or Exchange figures: the boosted model needs 8 or more")


def test_a_model_that_refuses_the_base_says_why(cli, registry, db_url):
    """The base's profile holds too few figures for the boosted model: match goes on, keeping the
    communication time, and the warning gives the model's reason."""
    registry(mpi_nodes=("fast",))
    reg = open_registry(db_url)
    with reg.begin() as conn:
        _mpi_profile(conn, "b", sizes=SIZES[:3])
    reg.close()
    res = cli("match", "mpiapp", "--json", "--no-store", "--comm-model", "boosted", "--nodes", "b,fast")
    assert res.code == 0, res.err
    assert any("node 'b' has 6 ping-pong or Exchange figures: the boosted model needs 8 or more" in w
               and w.endswith("the communication time (8 s) is kept on every node") for w in json.loads(res.out)["warnings"])


def test_an_unknown_communication_model_is_refused():
    with pytest.raises(Exception, match="unknown communication model 'nope'"):
        create("nope")


def _mpi_profile(conn, node, sizes=SIZES):
    """Ping-pong (alpha, beta of the node), exchange and allreduce figures, as `profile --kernels mpi` stores them."""
    node_id = conn.exec_driver_sql(f"SELECT node_id FROM nodes WHERE name = '{node}'").scalar()
    prof = insert_returning(conn, "profiles", {"uid": f"mpi{node}", "node_id": node_id, "mode": "custom",
                                               "started_at": utcnow(), "status": "complete"}, "profile_id")
    for kernel in ("pingpong", "exchange", "allreduce"):
        ub_id = conn.exec_driver_sql(f"SELECT ub_id FROM microbenchmarks WHERE name = '{kernel}'").scalar() or \
            insert_returning(conn, "microbenchmarks", {"name": kernel, "family": "mpi", "n_streams": 0}, "ub_id")
        for m in sizes:
            key = json.dumps({"bytes": m, "placement": "same_ccx", "ranks": 2, "threads": 2, "ub": kernel,
                              "node": node})
            cid = insert_returning(conn, "ub_configs", {"ub_id": ub_id, "config_key": key, "threads": 2,
                                                        "placement": "same_ccx", "unit": "us"}, "config_id")
            one_way = ALPHA_US[node] + m / BETA[node] * 1e6
            value = {"pingpong": one_way, "exchange": 2 * one_way, "allreduce": 2 * one_way}[kernel]
            insert_returning(conn, "profile_runs", {"profile_id": prof, "config_id": cid, "reps": 3, "median_s": 1.0,
                                                    "unstable": False, "value": value}, "run_id")


def _mpi_trace(comm_share=0.8, msgs=1000, msg_bytes=1000 * 2**20, threads=None):
    """An MPI app traced on b at 2 ranks: a compute phase (10 s) and a halo phase (10 s, `comm_share` in MPI)."""
    mpi = {"comm_share": comm_share, "comm_share_max": comm_share, "ranks": 2.0, "msgs": msgs, "msg_bytes": msg_bytes,
           "coll": 0.0, "coll_bytes": 0.0, "calls": 2.0 * msgs, "peers": 1.0}
    phases = [Phase("compute", "marker", 0, 10, 0.5, 10.0, signature={"proc": {"cpu_util": 1.98, "wss_llc": 0.01}}),
              Phase("halo", "marker", 10, 20, 0.5, 10.0,
                    signature={"proc": {"cpu_util": 1.98, "wss_llc": 0.01}, "mpi": mpi})]
    return Trace(name="mpiapp", node="b", host="h", command=["mpirun", "-np", "2", "app"], exit_status=0, status="ok",
                 wall_s=20.0, interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc", "mpi"], phases=phases,
                 meta={"mpi": {"ranks": 2}, "omp_max_threads": threads})


@pytest.fixture
def registry(db_url):
    def build(trace=None, mpi_nodes=("b", "fast", "slowcomm")):
        reg = open_registry(db_url)
        with reg.begin() as conn:
            for node in ("b", "fast", "slowcomm", "one"):
                profile_at_speeds(conn, node, 1 if node == "one" else 2, base=node == "b")
            for node in mpi_nodes:
                _mpi_profile(conn, node)
            store.save(conn, trace or _mpi_trace())
        reg.close()
    return build


@pytest.fixture(autouse=True)
def speeds(monkeypatch):
    """The compute speeds of the nodes (registry_data.SPEEDS): the same for b, fast and slowcomm."""
    import registry_data
    monkeypatch.setitem(registry_data.SPEEDS, "fast", registry_data.SPEEDS["b"])
    monkeypatch.setitem(registry_data.SPEEDS, "slowcomm", registry_data.SPEEDS["b"])


def _hockney_s(node, msgs, nbytes):
    return msgs * ALPHA_US[node] * 1e-6 + nbytes / BETA[node]


@both_backends
def test_the_communication_part_moves_with_each_nodes_mpi_profile(cli, registry):
    registry()
    res = cli("match", "mpiapp", "--json", "--explain", "--no-store")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    halo = next(p for p in doc["phases"] if p["name"] == "halo")["per_node"]
    compute = next(p for p in doc["phases"] if p["name"] == "compute")["per_node"]
    base_comm = 0.8 * 10.0
    for node in ("fast", "slowcomm"):
        ratio = _hockney_s(node, 1000, 1000 * 2**20) / _hockney_s("b", 1000, 1000 * 2**20)
        # the same compute speed everywhere: the computation part (2 s) stays, the communication scales
        assert halo[node]["predicted_s"] == pytest.approx(0.2 * compute[node]["predicted_s"] + base_comm * ratio,
                                                          rel=0.02)
    assert halo["b"]["predicted_s"] == pytest.approx(10.0, rel=0.02)
    # the node without MPI figures keeps the base's communication time, and is told
    assert halo["one"]["predicted_s"] == pytest.approx(0.2 * compute["one"]["predicted_s"] + base_comm, rel=0.02)
    assert any("no MPI figures on one" in w for w in doc["warnings"])
    order = [p["node"] for p in doc["predictions"]]
    assert order.index("fast") < order.index("b") < order.index("slowcomm")


def test_branikas_and_the_rank_count(cli, registry):
    registry()
    by_model = {}
    for model in ("hockney", "branikas"):
        res = cli("match", "mpiapp", "--json", "--explain", "--no-store", "--comm-model", model, "--nodes", "b,fast")
        assert res.code == 0, res.err
        by_model[model] = {p["node"]: p["predicted_s"] for p in json.loads(res.out)["predictions"]}
    assert by_model["branikas"]["fast"] < by_model["branikas"]["b"]
    res = cli("match", "mpiapp", "--json", "--no-store", "--comm-model", "boosted")
    assert res.code == 0, res.err
    boosted = {p["node"]: p["predicted_s"] for p in json.loads(res.out)["predictions"]}
    assert boosted["fast"] < boosted["b"] < boosted["slowcomm"]
    # Branikas's model is linear in the ranks per node: at 4 ranks the exchange takes twice as long
    at = {}
    for ranks in (2, 4):
        res = cli("match", "mpiapp", "--json", "--explain", "--no-store", "--comm-model", "branikas", "--nodes", "b",
                  "--ranks", ranks)
        assert res.code == 0, res.err
        halo = next(p for p in json.loads(res.out)["phases"] if p["name"] == "halo")["per_node"]["b"]
        at[ranks] = halo["predicted_s"]
    # (the computation stays: 4 ranks on 2 CPUs share them) and the communication, 8 s at 2 ranks, doubles
    assert at[4] - at[2] == pytest.approx(8.0, rel=0.02)
    # 1 rank: no communication at all
    res = cli("match", "mpiapp", "--json", "--explain", "--no-store", "--nodes", "b", "--ranks", 1)
    one = next(p for p in json.loads(res.out)["phases"] if p["name"] == "halo")["per_node"]["b"]
    assert one["predicted_s"] < 0.2 * 10 * 2.5      # only the computation, at 1 CPU instead of 2


def _jacobi_profile(conn, node, slower, slower_big=None):
    """A later profile of `node` with Jacobi figures only (what `profile --kernels jacobi` stores):
    the halo exchange per step of a law in message size, working set and load, times `slower`
    (`slower_big` at the larger working set, 16 MiB a rank)."""
    node_id = conn.exec_driver_sql(f"SELECT node_id FROM nodes WHERE name = '{node}'").scalar()
    prof = insert_returning(conn, "profiles", {"uid": f"jac{node}", "node_id": node_id, "mode": "custom",
                                               "started_at": utcnow(), "status": "complete"}, "profile_id")
    ub_id = insert_returning(conn, "microbenchmarks", {"name": "jacobi", "family": "mpi", "n_streams": 0}, "ub_id") \
        if node == "b" else conn.exec_driver_sql("SELECT ub_id FROM microbenchmarks WHERE name = 'jacobi'").scalar()
    for n in (128, 1024):
        for depth in (1, 16, 128):
            for msgs, ops in ((2, 1), (8, 1), (2, 16), (8, 16)):
                m = depth * n * 8
                key = json.dumps({"bytes": m, "msgs": msgs, "n": n, "ops": ops, "placement": "compact", "ranks": 2,
                                  "threads": 2, "ub": "jacobi", "node": node})
                cid = insert_returning(conn, "ub_configs", {"ub_id": ub_id, "config_key": key, "threads": 2,
                                                            "placement": "compact", "unit": "us"}, "config_id")
                factor = slower_big if slower_big and n == 1024 else slower
                per_message = (2.0 + m / 5e3) * (1.5 if ops == 1 and n == 1024 else 1.0) * factor
                insert_returning(conn, "profile_runs", {"profile_id": prof, "config_id": cid, "reps": 3,
                                                        "median_s": 1.0, "unstable": False, "value": msgs * per_message,
                                                        "tpi_us": 3 * msgs * per_message}, "run_id")


def _boosted_on_jacobi(cli, registry, db_url, trace, fast_big):
    """Match `trace` with boosted on Jacobi profiles of b (3x slower than fast's law) and fast (at
    16 MiB a rank `fast_big` x slower): (the halo phase's and the compute phase's per-node figures,
    the warnings)."""
    registry(trace, mpi_nodes=("b", "fast"))
    reg = open_registry(db_url)
    with reg.begin() as conn:
        _jacobi_profile(conn, "b", 3.0)
        _jacobi_profile(conn, "fast", 1.0, slower_big=fast_big)
    reg.close()
    res = cli("match", "mpiapp", "--json", "--explain", "--no-store", "--comm-model", "boosted", "--nodes", "b,fast")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    phases = {p["name"]: p["per_node"] for p in doc["phases"]}
    return phases["halo"], phases["compute"], doc["warnings"]


@both_backends
def test_boosted_reads_each_nodes_jacobi_figures(cli, registry, db_url):
    """The nodes' latest profiles hold the Jacobi generator: `boosted` trains on them, and the
    communication part moves by the ratio of the two nodes' exchanges (a third on `fast`)."""
    halo, compute, warnings = _boosted_on_jacobi(cli, registry, db_url, _mpi_trace(), None)
    assert halo["fast"]["predicted_s"] == pytest.approx(0.2 * compute["fast"]["predicted_s"] + 0.8 * 10.0 / 3, rel=0.02)
    assert not any("boosted" in w for w in warnings)    # 1 MiB messages, 2 ranks: inside the sweep


def test_boosted_reads_the_phases_working_set(cli, registry, db_url):
    """The halo phase's trace read a working set of 32 MB (16 MiB a rank): `fast` exchanges as slowly
    as `b` there (only its small working sets are three times faster), and the prediction says so."""
    trace = _mpi_trace()
    trace.phases[1].signature["proc"]["wss_mb"] = 32.0
    halo, compute, _ = _boosted_on_jacobi(cli, registry, db_url, trace, 3.0)
    assert halo["fast"]["predicted_s"] == pytest.approx(0.2 * compute["fast"]["predicted_s"] + 0.8 * 10.0, rel=0.05)


def test_configs_trade_computation_for_communication(cli, registry):
    registry()
    res = cli("match", "mpiapp", "--configs", "--json", "--no-store")
    assert res.code == 0, res.err
    chosen = {c["node"]: c for c in json.loads(res.out)["configs"]}
    # the same CPUs: 2 ranks halve the computation; on the slow network their communication costs more
    assert (chosen["fast"]["ranks"], chosen["fast"]["threads"]) == (2, 1)
    assert (chosen["slowcomm"]["ranks"], chosen["slowcomm"]["threads"]) == (1, 1)
    assert chosen["one"]["ranks"] == 1 and chosen["one"]["configs_tried"] == 1
    assert chosen["fast"]["comm_s"] > 0 and chosen["slowcomm"]["comm_s"] == 0
    assert any("ranks would add" in r for r in chosen["slowcomm"]["reasons"])
    assert chosen["fast"]["efficiency_index"] > 0
    text = cli("match", "mpiapp", "--configs", "--no-store")
    assert text.code == 0 and "fast: 2 x 1" in text.out


def test_a_hybrid_app_is_offered_threads(cli, registry):
    """Traced at 2 threads per rank, both ranks' computation in OpenMP regions."""
    hybrid = _mpi_trace(threads=2)
    hybrid.phases.append(Phase("region", "omp", 0, 20, 2.0, 20.0))
    registry(hybrid)
    res = cli("match", "mpiapp", "--configs", "--json", "--no-store", "--nodes", "slowcomm")
    (choice,) = json.loads(res.out)["configs"]
    assert (choice["ranks"], choice["threads"]) == (1, 2) and choice["configs_tried"] == 3


def test_threads_per_rank_divide_the_computation_and_leave_the_communication(cli, registry):
    """Traced at 2 ranks x 1 thread (20 s on b: 10 s computing, then a halo phase of 2 s computing and
    8 s in MPI). 1 rank x 2 threads: the same 2 CPUs compute, nothing to communicate; 1 x 1: half the CPUs."""
    registry()

    doc = _matched(cli, "--ranks", 1, "--threads", 2)
    assert doc["predictions"][0]["predicted_s"] == pytest.approx(12.0, rel=0.02)
    assert any("show no OpenMP regions, so its 2 threads per rank are taken to share all" in w for w in doc["warnings"])
    assert _matched(cli, "--ranks", 1)["predictions"][0]["predicted_s"] == pytest.approx(24.0, rel=0.02)
    assert _matched(cli, "--ranks", 2, "--threads", 1)["predictions"][0]["predicted_s"] == pytest.approx(20.0, rel=0.02)


def _matched(cli, *flags):
    res = cli("match", "mpiapp", "--json", "--no-store", "--nodes", "b", *flags)
    assert res.code == 0, res.err
    return json.loads(res.out)


@pytest.mark.parametrize("region_weight, expected_s", [(0.5, 16.0), (None, 24.0)])
def test_threads_divide_the_share_a_trace_saw_in_openmp_regions(cli, registry, db_url, region_weight, expected_s):
    """Also traced at 1 rank x 2 threads (earlier): OpenMP regions half its run (f = 0.5 at 2 threads:
    2/3 of the single-thread time parallel), or regions too short to be phases (a threaded BLAS
    with little to do: none of it). From the 2 x 1 trace, 1 x 2 is the 12 s of computation x 2
    ranks' worth, of which the threads halve the parallel share: 24 x (1/3 + 2/3 / 2) = 16 s."""
    threaded = _mpi_trace(threads=2)
    threaded.meta["mpi"] = {"ranks": 1, "comm_share": 0.0}
    if region_weight:
        threaded.phases.append(Phase("region", "omp", 0, 20, region_weight, 5.0))
    registry(threaded)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        store.save(conn, _mpi_trace())      # the latest: the base of the projection
    reg.close()
    doc = _matched(cli, "--ranks", 1, "--threads", 2)
    assert doc["predictions"][0]["predicted_s"] == pytest.approx(expected_s, rel=0.02)
    share = "67%" if region_weight else "0%"
    assert any(f"{share} of a rank's single-thread computation runs in OpenMP regions" in w for w in doc["warnings"])
    assert _matched(cli, "--ranks", 1)["predictions"][0]["predicted_s"] == pytest.approx(24.0, rel=0.02)


def test_ranks_divide_what_traces_at_two_rank_counts_say_they_divide(cli, registry, db_url):
    """Traced at 1 rank (18 s, no MPI) and then at 2 (20 s, 8 of them in MPI: 12 s computing): the
    computation c = a + b / ranks gives a = 6, b = 12, a third of the one-rank computation serial.
    1 rank from the 2-rank trace: 12 s x (1/3 + 2/3) / (1/3 + 1/3) = 18 s, the measured run, where
    ranks dividing everything said 24 s; the warning says what was assumed either way."""
    one = _mpi_trace(comm_share=0.0)
    one.wall_s, one.meta["mpi"] = 18.0, {"ranks": 1, "comm_share": 0.0}
    one.phases = [Phase("compute", "marker", 0, 18, 1.0, 18.0, signature={"proc": {"cpu_util": 0.99, "wss_llc": 0.01}})]
    registry(one)
    two = _mpi_trace()
    two.meta["mpi"]["comm_share"] = 0.4
    reg = open_registry(db_url)
    with reg.begin() as conn:
        store.save(conn, two)      # the latest: the base of the projection
    reg.close()
    doc = _matched(cli, "--ranks", 1)
    assert doc["predictions"][0]["predicted_s"] == pytest.approx(18.0, rel=0.02)
    assert any("33% of the app's one-rank computation does not divide among ranks" in w and "at 1, 2 ranks" in w
               for w in doc["warnings"])
    assert _matched(cli, "--ranks", 2)["predictions"][0]["predicted_s"] == pytest.approx(20.0, rel=0.02)


def test_one_rank_count_traced_divides_everything_and_says_so(cli, registry):
    registry()
    doc = _matched(cli, "--ranks", 1)
    assert doc["predictions"][0]["predicted_s"] == pytest.approx(24.0, rel=0.02)
    assert any("traces on its node are all at 2 ranks, so the ranks are taken to divide all" in w for w in doc["warnings"])


def test_configs_try_the_threads_asked_for(cli, registry):
    """A program traced at one thread per rank (a threaded BLAS the trace does not see): --threads 2
    adds 1 x 2, which wins on the slow network (no communication, the same CPUs)."""
    registry()
    tried, said = {}, {}
    for flags in ((), ("--threads", 2)):
        res = cli("match", "mpiapp", "--configs", "--json", "--no-store", "--nodes", "slowcomm", *flags)
        assert res.code == 0, res.err
        (choice,) = json.loads(res.out)["configs"]
        tried[flags] = (choice["ranks"], choice["threads"], choice["configs_tried"])
        said[flags] = [r for r in choice["reasons"] if r.startswith("threads per rank")]
    assert tried == {(): (1, 1, 2), ("--threads", 2): (1, 2, 3)}
    assert said[()] == [] and "taken to share all of its computation" in said[("--threads", 2)][0]


def test_bad_requests_are_one_line_errors(cli, registry, db_url):
    registry()
    assert_one_line_error(cli("match", "mpiapp", "--comm-model", "nope"), "unknown communication model 'nope'")
    assert_one_line_error(cli("match", "mpiapp", "--ranks", 4, "--model", "amdahl"), "--ranks, --threads, --fabric and --configs")
    assert_one_line_error(cli("match", "mpiapp", "--threads", 2, "--model", "amdahl"), "--ranks, --threads, --fabric and --configs")
    reg = open_registry(db_url)
    plain = _mpi_trace()
    plain.name, plain.meta = "plain", {}
    with reg.begin() as conn:
        store.save(conn, plain)
    reg.close()
    assert_one_line_error(cli("match", "plain", "--ranks", 2), "has no ranks: trace it through its launcher")
    assert_one_line_error(cli("match", "plain", "--configs"), "has no ranks")
    assert_one_line_error(cli("match", "plain", "--threads", 2), "--threads projects an MPI program's ranks x threads")


@both_backends
def test_traces_at_several_rank_counts_give_barnes_sep(cli, registry, db_url):
    """Traced at 1, 2, 4 and 8 ranks: computation 16/q s, communication growing (0.5 q s); the
    scaling model is fitted on the traces with their split, and loglog takes SEP."""
    registry()
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for q in (1, 4, 8, 2):
            t = _mpi_trace()
            comm = 0.5 * q
            t.wall_s = 16.0 / q + comm
            t.meta = {"mpi": {"ranks": q, "per_rank": [{"rank": r, "mpi_s": comm} for r in range(q)]}}
            store.save(conn, t)
    reg.close()
    res = cli("match", "mpiapp", "--model", "loglog", "--json", "--no-store", "--nodes", "b")
    assert res.code == 0, res.err
    said = [w for w in json.loads(res.out)["warnings"] if "MPI traces" in w]
    assert said and "ranks x threads 1, 2, 4, 8" in said[0] and said[0].endswith("technique SEP")


def test_the_base_time_takes_runs_at_the_traced_rank_count(cli, registry):
    """Traced at 1 rank on a 2-CPU base: the measured runs at 1 (not at the base's 2 CPUs) join it."""
    trace = _mpi_trace()
    trace.meta = {"mpi": {"ranks": 1}}
    registry(trace)
    for threads, seconds in ((1, 30), (1, 30), (2, 5)):
        assert cli("runs", "add", "mpiapp", "b", "--threads", threads, "--time", seconds).code == 0
    res = cli("match", "mpiapp", "--json", "--no-store", "--nodes", "b")
    assert res.code == 0, res.err
    assert json.loads(res.out)["base_time_s"] == pytest.approx(30.0)


@both_backends
def test_a_fabric_profile_carries_the_communication_between_nodes(cli, registry, db_url):
    registry()
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "fabric:cn")
        _mpi_profile(conn, "fabric:cn")
    reg.close()
    plain = json.loads(cli("match", "mpiapp", "--json", "--explain", "--no-store").out)
    assert "fabric:cn" not in [p["node"] for p in plain["predictions"]]   # a fabric is no node to run on
    res = cli("match", "mpiapp", "--json", "--explain", "--no-store", "--fabric", "cn")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert "fabric:cn" not in [p["node"] for p in doc["predictions"]]
    assert any("fabric:cn" in w for w in doc["warnings"])
    halo = next(p for p in doc["phases"] if p["name"] == "halo")["per_node"]
    compute = next(p for p in doc["phases"] if p["name"] == "compute")["per_node"]
    # every node's communication now goes through the fabric: the base's measured 8 s scaled by the
    # fabric's Hockney time over the base node's own (shared memory) one, the same on every node
    ratio = _hockney_s("fabric:cn", 1000, 1000 * 2**20) / _hockney_s("b", 1000, 1000 * 2**20)
    for node in ("b", "fast", "slowcomm", "one"):
        assert halo[node]["predicted_s"] == pytest.approx(0.2 * compute[node]["predicted_s"] + 8.0 * ratio, rel=0.02)
    assert_one_line_error(cli("match", "mpiapp", "--fabric", "nope"), "no fabric profile of 'nope'",
                          "nodereg fleet mpi nope")
