"""The PMPI interposition library (microbench/shim/pmpi_shim.c): preloaded into the ranks of an
unchanged MPI program (tests/programs/mpi_ring.c, whose communication is known), it records per
rank the calls, bytes and time in MPI. Skips without an MPI unless NODEREG_REQUIRE_MPI=1."""

import subprocess
from pathlib import Path

import pytest
from mpi_node import node_mpi  # noqa: F401 (a fixture)

from registry.errors import UserError
from registry.microbench import mpi, pmpi
from registry.microbench.build import compile_c

RING = Path(__file__).parent / "programs" / "mpi_ring.c"
STEPS = 60


@pytest.fixture(scope="module")
def built(node_mpi):  # noqa: F811
    return node_mpi, pmpi.library(node_mpi), compile_c([RING], "mpi_ring", openmp=False, libs=(), cc=node_mpi.mpicc)


def test_shim_records_every_rank_without_changing_the_program(built, tmp_path):
    node_mpi, library, ring = built
    out = tmp_path / "pmpi"
    out.mkdir()
    # a waiting rank yields its CPU (a shared test machine: see test_mpi_kernels)
    env = {**mpi.environment(node_mpi), "OMPI_MCA_mpi_yield_when_idle": "1", pmpi.OUT_ENV: str(out),
           "LD_PRELOAD": str(library)}
    res = subprocess.run([*mpi.launcher(node_mpi, 2), str(ring), str(STEPS)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"ring done: 2 ranks, {STEPS} steps" in res.stdout      # the program ran as it does without the shim
    ranks = pmpi.read_dir(out)
    assert [r.rank for r in ranks] == [0, 1] and {r.size for r in ranks} == {2}
    assert len({r.pid for r in ranks}) == 2
    for r in ranks:
        assert set(r.functions) == {"MPI_Sendrecv", "MPI_Allreduce"}
        assert r.functions["MPI_Sendrecv"].calls == STEPS and r.functions["MPI_Sendrecv"].bytes_sent == STEPS * 1024
        assert r.functions["MPI_Allreduce"].calls == STEPS // 10
        assert r.functions["MPI_Allreduce"].bytes_sent == STEPS // 10 * 8 * 8
        assert r.mpi_s == pytest.approx(sum(c.time_s for c in r.functions.values()), rel=1e-6)
        assert 0 < r.mpi_s <= r.wall_s and 0 < r.mpi_share <= 1
        # the time line adds up to the totals; every message went to the other rank
        assert sum(b.mpi_s for b in r.bins) == pytest.approx(r.mpi_s, rel=1e-6)
        assert sum(b.msgs for b in r.bins) == STEPS and sum(b.msg_bytes for b in r.bins) == STEPS * 1024
        assert sum(b.coll for b in r.bins) == STEPS // 10 and sum(b.calls for b in r.bins) == STEPS + STEPS // 10
        assert {b.peers for b in r.bins if b.msgs} == {1 << (1 - r.rank)}
        assert r.peers == {1 - r.rank: (STEPS, STEPS * 1024)}
        assert r.bin_s == pytest.approx(0.0001) and r.host and r.init_real_s > 1.6e9


def test_without_the_output_variable_nothing_is_written(built, tmp_path):
    node_mpi, library, ring = built
    env = {**{k: v for k, v in mpi.environment(node_mpi).items() if k != pmpi.OUT_ENV}, "LD_PRELOAD": str(library)}
    res = subprocess.run([*mpi.launcher(node_mpi, 1), str(ring), "3"], env=env, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert list(tmp_path.iterdir()) == []


def test_malformed_records_are_one_error():
    assert pmpi.read(["F\t1\t0\t2\tMPI_Send\t3\t4000\t24\n", "T\t1\t0\t2\t0\t2000000000\t4000\n"])[0].mpi_share == \
        pytest.approx(2e-6)
    with pytest.raises(UserError, match="line 1 is malformed"):     # a bin of a rank with no header
        pmpi.read(["B\t1\t0\t0\t5\t1\t1\t8\t0\t0\t2\n"])
    with pytest.raises(UserError, match="line 2 is malformed"):
        pmpi.read(["F\t1\t0\t2\tMPI_Send\t3\t4000\t24\n", "F\t1\tzero\n"])
