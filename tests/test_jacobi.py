"""Branikas 2024's Jacobi data generator (microbench/ub_jacobi.c, kernel `jacobi` of the mpi family)
and the boosted communication model trained on it (registry.models.comm.BoostedModel).

The stencil is checked against a numpy reference, its messages against the PMPI library's counts,
its stored rows against their definitions (and the sum of the grid, which the stencil keeps), the
model against a synthetic node whose law is known. Tests that launch ranks skip without an MPI
(NODEREG_REQUIRE_MPI=1 makes them fail instead; .ci/run installs Open MPI)."""

import json
import math
import os
import subprocess

import numpy as np
import pytest
from conftest import assert_one_line_error, both_backends, fetch_rows
from mpi_node import node_mpi, path_without_mpi  # noqa: F401 (fixtures)

from registry.errors import UserError
from registry.match.comm import load_profiles
from registry.db import open_registry
from registry.microbench import jacobi, mpi, pmpi
from registry.models.comm import BoostedModel, CommProfile, JacobiFigure
from registry.profile import catalog, sweep
from registry.profile.placement import Cpu

two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two ranks need two CPUs")
JACOBI = catalog.get("jacobi")


def reference(ranks: int, n: int, steps: int) -> np.ndarray:
    """The global grid after `steps` Jacobi steps, periodic both ways, in the kernel's order of sums."""
    i, j = np.meshgrid(np.arange(ranks * n), np.arange(n), indexing="ij")
    u = ((7 * i + 13 * j) % 17) / 16.0
    for _ in range(steps):
        u = 0.25 * (((np.roll(u, 1, 0) + np.roll(u, -1, 0)) + np.roll(u, 1, 1)) + np.roll(u, -1, 1))
    return u


def test_plan_sweeps_the_papers_parameters():
    topo = [Cpu(c, 0, c, 0) for c in range(4)]
    for mode, count in (("quick", 8), ("default", 36), ("full", 120)):
        notes: list[str] = []
        configs = sweep.mpi_configs([JACOBI], topo, [1, 2, 4], mode, notes)
        assert not notes and {c.threads for c in configs} == {2, 4}
        assert len(configs) == 2 * count == len({c.key for c in configs})
    c = next(c for c in configs if c.threads == 4 and c.n == 1024 and c.msg_bytes == 16 * 1024 * 8 and c.msgs == 8)
    assert c.placement == "compact" and c.ops in (1, 16)
    assert json.loads(c.key) == {"ub": "jacobi", "threads": 4, "placement": "compact", "bytes": 131072, "ranks": 4,
                                 "n": 1024, "msgs": 8, "ops": c.ops}
    # a rank's two arrays with 16 ghost rows each side, and six scratch messages
    assert c.ws_bytes == (2 * (1024 + 32) * 1024 * 8 + 6 * 131072) * 4
    assert [ub.name for ub in catalog.select("jacobi")] == ["jacobi"] and JACOBI in catalog.select("mpi")


@two_cpus
def test_stencil_equals_the_python_reference(node_mpi):  # noqa: F811
    program = jacobi.binary(node_mpi)
    for ranks in (2, 3):     # 3: the neighbours above and below differ (two ranks share one CPU)
        grid = jacobi.check(node_mpi, program, [0, 1, 0][:ranks], (6, 2, 5, 3), 7)
        assert np.array_equal(np.array(grid), reference(ranks, 6, 7))


@two_cpus
def test_messages_follow_the_halo(node_mpi, tmp_path):  # noqa: F811
    """The PMPI library counts what each rank sent: per step MSGS messages of DEPTH rows of N doubles,
    alternately to the rank above and below."""
    out = tmp_path / "pmpi"
    out.mkdir()
    n, depth, msgs, steps = 8, 3, 5, 4
    env = {**mpi.environment(node_mpi), "OMPI_MCA_mpi_yield_when_idle": "1", pmpi.OUT_ENV: str(out),
           "LD_PRELOAD": str(pmpi.library(node_mpi))}
    cmd = [*mpi.launcher(node_mpi, 3), str(jacobi.binary(node_mpi)), "0,1,0", "check", jacobi.spec(n, depth, msgs, 1),
           str(steps)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for r in pmpi.read_dir(out):
        sent = r.functions["MPI_Isend"]
        assert sent.calls == steps * msgs and sent.bytes_sent == steps * msgs * depth * n * 8
        above, below = (r.rank - 1) % 3, (r.rank + 1) % 3
        assert r.peers == {above: (steps * 3, steps * 3 * depth * n * 8), below: (steps * 2, steps * 2 * depth * n * 8)}


@two_cpus
@both_backends
def test_profile_stores_the_generator(cli, db_url, node_mpi, monkeypatch):  # noqa: F811
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")    # a shared test machine (see test_mpi_kernels)
    res = cli("profile", "jac", "--quick", "--kernels", "jacobi", "--threads", "2", "--reps", "3", "--json")
    assert res.code == 0, res.err
    summary = json.loads(res.out)
    assert summary["jacobi"][0]["configs"] == 8 and summary["mpi"] == []
    rows = fetch_rows(db_url, """
        SELECT c.config_key, c.unit, c.higher_is_better, r.value, r.tpi_us, r.iterations, r.bytes_per_rep,
               r.bandwidth_gbs, r.checksum, r.reps
        FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id""")
    assert len(rows) == 8
    for r in rows:
        key = json.loads(r["config_key"])
        assert key["ub"] == "jacobi" and key["ranks"] == 2 and key["ops"] == 1 and r["reps"] == 3
        assert r["unit"] == "us" and r["higher_is_better"] is False
        # the halo exchange is part of the step; the step is at least as long as the mean rank's exchange
        assert 0 < r["value"] <= r["tpi_us"] and r["iterations"] >= 4
        assert r["bytes_per_rep"] == key["msgs"] * key["bytes"] * r["iterations"]
        assert r["bandwidth_gbs"] == pytest.approx(r["bytes_per_rep"] / (r["value"] * 1e-6 * r["iterations"]) / 1e9,
                                                   rel=0.05)
        assert r["checksum"] == pytest.approx(reference(2, key["n"], 0).sum(), rel=1e-9)   # the stencil keeps the sum
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        profile = load_profiles(conn)["jac"]
    reg.close()
    assert len(profile.jacobi) == 8 and not profile.points
    model = BoostedModel().fit(profile)
    assert model.source == "jacobi" and "8 jacobi figures" in model.describe()


def test_no_mpi_is_one_line(cli, path_without_mpi):  # noqa: F811
    res = cli("profile", "nompi", "--kernels", "jacobi")
    assert_one_line_error(res, "no MPI found", "apt-get install openmpi-bin")


def _law_us(m: float, ranks: int, msgs: int, ws: int, ops: int) -> float:
    """A node's time per message: 2 us and 8 GB/s; more ranks contend (+40% a doubling); more
    messages a step queue (+10% a doubling); a memory-bound sweep over a working set beyond the
    caches leaves the ranks out of step (+50%)."""
    slow = 1.5 if ops == 1 and ws > 8 * 2**20 else 1.0
    return (2.0 + m / 8e9 * 1e6) * (1 + 0.4 * math.log2(ranks / 2)) * (1 + 0.1 * math.log2(msgs / 2)) * slow


def _synthetic(ranks=(2, 4, 8)) -> CommProfile:
    figures = [JacobiFigure(r, "compact", d * n * 8, k, 16 * n * n, o, k * _law_us(d * n * 8, r, k, 16 * n * n, o),
                            1000.0)
               for r in ranks for n in (128, 512, 2048) for d in (1, 4, 16, 64) for k in (2, 4, 8) for o in (1, 16)]
    return CommProfile("syn", jacobi=figures)


def test_boosted_model_recovers_a_known_law():
    profile = _synthetic()
    model = BoostedModel().fit(profile)
    assert model.source == "jacobi" and model.figures == len(profile.jacobi) == 216

    def error(m, r, k, n, o):
        return abs(model.message_s(r, m, msgs=k, ws_bytes=16 * n * n, ops=o) * 1e6 / _law_us(m, r, k, 16 * n * n, o) - 1)

    on = [error(d * n * 8, r, k, n, o) for r in (2, 4, 8) for n in (128, 512, 2048) for d in (1, 4, 16, 64)
          for k in (2, 4, 8) for o in (1, 16)]
    assert np.median(on) < 0.05 and max(on) < 0.25
    # between the measured sizes, ranks in the sweep: the backbone's slope carries the trend
    between = [error(1.5 * d * n * 8, r, 4, n, 16) for r in (2, 4, 8) for n in (128, 512) for d in (1, 4, 16)]
    assert np.median(between) < 0.15
    # the load: a memory-bound sweep over a large working set slows the exchange, as the law says
    assert model.message_s(4, 65536, msgs=4, ws_bytes=16 * 2048**2, ops=1) > \
        1.3 * model.message_s(4, 65536, msgs=4, ws_bytes=16 * 2048**2, ops=16)
    # a phase carries no messages per step, working set or load: the mean (in log) over the sweep's
    combos = [(k, 16 * n * n, o) for k in (2, 4, 8) for n in (128, 512, 2048) for o in (1, 16)]
    mean = math.exp(np.mean([math.log(_law_us(65536, 4, *c)) for c in combos]))
    assert model.message_s(4, 65536) * 1e6 == pytest.approx(mean, rel=0.1)
    assert model.point_to_point_s(100, 100 * 65536, 4) == pytest.approx(100 * model.message_s(4, 65536), rel=1e-9)
    # a phase whose trace read its working set (the process tree's, over 4 ranks: 64 MiB each) gets it
    big = {"msgs": 100, "msg_bytes": 100 * 65536, "coll": 0, "wss_bytes": 4 * 16 * 2048**2}
    assert model.seconds(big, 4) == pytest.approx(100 * model.message_s(4, 65536, ws_bytes=16 * 2048**2), rel=1e-9)
    mean_big = math.exp(np.mean([math.log(_law_us(65536, 4, k, 16 * 2048**2, o)) for k in (2, 4, 8) for o in (1, 16)]))
    assert model.seconds(big, 4) / 100 * 1e6 == pytest.approx(mean_big, rel=0.1)
    assert not model.warnings
    model.message_s(16, 65536)
    assert model.warnings == ["syn: the boosted model was trained on 2..8 ranks, not 16: its trees add their edge value "
                              "there, the log-log backbone the trend"]


def test_too_few_jacobi_figures():
    """Fewer than 8: the model falls back on the ping-pong and Exchange figures, or refuses in one line."""
    few = _synthetic().jacobi[:3]
    pingpong = [(2, "same_ccx", m, 1.0 + m / 1e4) for m in (8, 64, 512, 4096, 32768, 262144, 2097152, 4194304)]
    model = BoostedModel().fit(CommProfile("mixed", {"pingpong": pingpong}, jacobi=few))
    assert model.source == "pingpong/exchange" and model.figures == 8
    with pytest.raises(UserError) as err:
        BoostedModel().fit(CommProfile("tiny", {"pingpong": pingpong[:2]}, jacobi=few))
    assert str(err.value) == ("node 'tiny' has 2 ping-pong or Exchange figures and 3 Jacobi figures: the boosted "
                              "model needs 8 or more of either, at two message sizes or more (nodereg profile tiny "
                              "--kernels mpi)")
