"""The MPI kernels (microbench/ub_mpi.c, docs/mpi.md): planning, real figures and what is stored,
and the bad cases: no MPI on the node, a launcher that fails, one that hangs.

Tests that launch ranks need an MPI (Open MPI from Debian's packages): they skip with the reason
where it is missing, and fail instead with NODEREG_REQUIRE_MPI=1 (.ci/run installs it)."""

import dataclasses
import json
import os
import socket
import stat
import time
from pathlib import Path

import pytest
from conftest import assert_one_line_error, both_backends, fetch_rows
from mpi_node import node_mpi, path_without_mpi  # noqa: F401 (fixtures)

from registry.errors import UserError
from registry.inventory import Inventory
from registry.microbench import mpi
from registry.profile import catalog, sweep
from registry.profile.placement import Cpu, pair_placements

MPI_KERNELS = [ub for ub in catalog.ALL if ub.family == "mpi" and ub.name != "jacobi"]   # IMB's (jacobi: test_jacobi)
two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two ranks need two CPUs")


def _two_sockets() -> list[Cpu]:
    """2 sockets x 2 core complexes x 2 cores x 2 SMT threads (CPU c and c + 16 share a core)."""
    cpus = []
    for core in range(8):
        package, llc = core // 4, core // 2 * 2
        cpus += [Cpu(core, package, core, llc), Cpu(core + 16, package, core, llc)]
    return cpus


def test_pairs_follow_the_topology():
    big = _two_sockets()
    assert pair_placements(big) == {"same_ccx": (0, 1), "same_socket": (0, 2), "cross_socket": (0, 4)}
    one_complex = [Cpu(0, 0, 0, 0), Cpu(1, 0, 1, 0)]
    assert pair_placements(one_complex) == {"same_ccx": (0, 1)}
    smt_only = [Cpu(0, 0, 0, 0), Cpu(1, 0, 0, 0)]   # two hardware threads of one core: no pair of cores
    assert pair_placements(smt_only) == {}


def test_plan_ranks_placements_and_sizes():
    big = _two_sockets()
    notes: list[str] = []
    configs = sweep.mpi_configs(MPI_KERNELS, big, [1, 2, 4, 8], "default", notes)
    assert not notes
    sizes = sorted({c.msg_bytes for c in configs})
    assert sizes[0] == 8 and sizes[-1] == 4 * 1024 * 1024 and len(sizes) == 11
    by = {(c.ub.name, c.threads, c.placement) for c in configs}
    assert {p for k, r, p in by if k == "pingpong"} == {"same_ccx", "same_socket", "cross_socket"}
    assert {r for k, r, _ in by if k == "pingpong"} == {2}          # ping-pong: pairs only
    # 8 ranks fill every core whatever the placement: measured once, as compact
    assert {(r, p) for k, r, p in by if k == "exchange" and r > 2} == {(4, "compact"), (4, "scatter"), (8, "compact")}
    c = next(c for c in configs if c.ub.name == "exchange" and c.threads == 8)
    assert len(set(c.cpus)) == 8 and not set(c.cpus) & set(range(16, 32))   # one rank per core
    assert json.loads(c.key) == {"ub": "exchange", "threads": 8, "placement": "compact", "bytes": c.msg_bytes,
                                 "ranks": 8}
    assert len({c.key for c in configs}) == len(configs)
    notes = []
    assert sweep.mpi_configs(MPI_KERNELS, big, [1], "default", notes) == [] and "at least 2 ranks" in notes[0]


def _inventory() -> Inventory:
    from registry.inventory import collect
    return collect()


def test_plan_without_mpi_notes_or_refuses():
    inv, topo = _inventory(), [Cpu(0, 0, 0, 0), Cpu(1, 0, 1, 0)]
    plan = sweep.plan(inv, topo, "default", None, [1, 2], mpi_missing="no MPI found (mpicc not on PATH)")
    assert not any(c.ub.family == "mpi" for c in plan.configs)
    assert any("MPI kernels were skipped: no MPI found" in n for n in plan.notes)
    with_mpi = sweep.plan(inv, topo, "default", None, [1, 2])
    assert {c.ub.name for c in with_mpi.configs if c.ub.family == "mpi"} == {"pingpong", "exchange", "allreduce",
                                                                              "jacobi"}
    with pytest.raises(UserError, match="asks for MPI kernels but no MPI found"):
        sweep.plan(inv, topo, "default", catalog.select("mpi"), [2], mpi_missing="no MPI found (mpicc not on PATH)")


def test_no_mpi_is_one_line(cli, db_url, path_without_mpi):  # noqa: F811
    assert mpi.missing() == "no MPI found (mpicc and mpirun not on PATH)"
    assert cli("init").code == 0
    res = cli("profile", "nompi", "--kernels", "mpi")
    assert_one_line_error(res, "no MPI found", "apt-get install openmpi-bin")
    assert fetch_rows(db_url, "SELECT count(*) AS n FROM profiles")[0]["n"] == 0


def _rows(db_url: str) -> dict[tuple, dict]:
    rows = fetch_rows(db_url, """
        SELECT u.name, u.family, c.config_key, c.threads, c.placement, c.unit, c.higher_is_better,
               r.median_s, r.min_s, r.reps, r.iterations, r.value, r.bandwidth_gbs, r.bytes_per_rep
        FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id
        JOIN microbenchmarks u ON u.ub_id = c.ub_id""")
    return {(r["name"], json.loads(r["config_key"])["bytes"]): r for r in rows}


@two_cpus
@both_backends
def test_profile_measures_and_stores_the_mpi_kernels(cli, db_url, node_mpi, monkeypatch):  # noqa: F811
    # A waiting rank yields its CPU: on a shared test machine a spinning rank can hold the CPU its
    # peer needs for a whole time slice (milliseconds per round trip). A node profile does not set it.
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    res = cli("profile", "comm", "--quick", "--kernels", "pingpong,exchange,allreduce", "--threads", "2", "--reps", "5",
              "--json")
    assert res.code == 0, res.err
    summary = json.loads(res.out)
    rows = _rows(db_url)
    big = 4 * 1024 * 1024
    assert sorted({b for _, b in rows}) == [8, 1024, 65536, big]
    assert len(rows) == summary["configs"] == 12
    for (name, size), r in rows.items():
        key = json.loads(r["config_key"])
        assert r["family"] == "mpi" and key["ranks"] == r["threads"] == 2 and key["placement"] == r["placement"]
        assert r["unit"] == "us" and r["higher_is_better"] is False and r["reps"] == 5
        # the figure is the median time per operation in microseconds (one-way: half a round trip)
        per_op_us = r["median_s"] / r["iterations"] * 1e6 / (2 if name == "pingpong" else 1)
        assert r["value"] > 0 and r["value"] == pytest.approx(per_op_us)
        assert (r["bandwidth_gbs"] is None) == (name == "allreduce")
    assert fetch_rows(db_url, "SELECT count(*) AS n FROM profile_reps")[0]["n"] == 5 * len(rows)

    # Plausibility, from each config's fastest repetition (the test machine may be shared).
    def per_op_s(name: str, size: int) -> float:
        return rows[(name, size)]["min_s"] / rows[(name, size)]["iterations"]

    def best_gbs(size: int) -> float:
        return rows[("pingpong", size)]["bytes_per_rep"] / rows[("pingpong", size)]["min_s"] / 1e9

    assert 0 < per_op_s("pingpong", 8) / 2 < 1e-3
    # bandwidth rises with the message size, but far slower than the message: a plateau, where a
    # latency-bound 4 MiB message would be 524288 times the 8-byte figure
    assert best_gbs(8) < best_gbs(65536) and best_gbs(8) < best_gbs(big) < best_gbs(8) * big / 8 / 10
    for name in ("exchange", "allreduce"):   # a 4 MiB step costs far more than an 8-byte one
        assert per_op_s(name, big) > 10 * per_op_s(name, 8) and per_op_s(name, big) > per_op_s(name, 1024)
    pingpong = next(r for r in summary["mpi"] if r["kernel"] == "pingpong")
    assert pingpong["ranks"] == 2 and pingpong["smallest_bytes"] == 8 and pingpong["peak_gbs"] > 0


def _one_line_error(res, *fragments: str) -> None:
    """The error contract, less the busy-host warning a shared test machine earns (it is printed
    before anything is measured, and is not what these tests are about)."""
    err = "".join(ln for ln in res.err.splitlines(keepends=True) if not ln.startswith("warning: the host is busy"))
    assert_one_line_error(dataclasses.replace(res, err=err), *fragments)


@two_cpus
def test_kernels_start_on_this_node_inside_a_batch_job(node_mpi, monkeypatch):  # noqa: F811
    """Inside a Slurm job (as `nodereg fleet` runs profiles) Open MPI would take the job's allocation
    and start ranks through srun; the node-local profile starts them here."""
    for var, value in {"SLURM_JOB_ID": "123", "SLURM_JOBID": "123", "SLURM_NODELIST": "elsewhere",
                       "SLURM_JOB_NODELIST": "elsewhere", "SLURM_TASKS_PER_NODE": "1", "SLURM_NNODES": "1"}.items():
        monkeypatch.setenv(var, value)
    cpus = sorted(os.sched_getaffinity(0))[:2]
    ran, records = mpi.launch(node_mpi, mpi.binary(node_mpi), cpus, ["pingpong"], [8], 2, 0.001, 60)
    assert ran["cpus"] == cpus and ran["hosts"] == [socket.gethostname()] * 2 and records[0]["kernel"] == "pingpong" and len(records[0]["times"]) == 2


def test_launcher_found_through_a_symlinked_directory(node_mpi, monkeypatch):  # noqa: F811
    """With /bin first on PATH (a link to /usr/bin on merged-/usr systems) Open MPI's launcher took
    '/' as its prefix and refused to start: the launcher is run from its real directory."""
    if not Path("/bin").is_symlink() or not (Path("/bin") / Path(node_mpi.mpirun).name).exists():
        pytest.skip("/bin is not a link to the launcher's directory here")
    monkeypatch.setenv("PATH", "/bin:" + os.environ["PATH"])
    found = mpi.find().mpirun
    assert Path(found).parent == Path("/bin").resolve()
    cpu = sorted(os.sched_getaffinity(0))[0]
    ran, _ = mpi.launch(mpi.find(), mpi.binary(node_mpi), [cpu], ["allreduce"], [8], 1, 0.001, 60)
    assert ran["cpus"] == [cpu]


def _fake_launcher(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-mpirun"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


@two_cpus
def test_hanging_launcher_is_killed_with_its_ranks(cli, db_url, node_mpi, tmp_path, monkeypatch):  # noqa: F811
    pids = tmp_path / "pids"
    # a launcher whose "ranks" (children, one of them in its own session) never finish
    launcher = _fake_launcher(tmp_path, f"sleep 300 & echo $! >> {pids}\nsetsid sleep 301 & echo $! >> {pids}\n"
                                        f"echo $$ >> {pids}\nwait\n")
    monkeypatch.setenv("NODEREG_MPIRUN", str(launcher))
    monkeypatch.setenv("NODEREG_MPI_TIMEOUT", "2")
    t0 = time.monotonic()
    res = cli("profile", "stuck", "--kernels", "pingpong", "--threads", "2", "--reps", "1")
    _one_line_error(res, "did not finish within 2 s", "every rank was killed")
    assert time.monotonic() - t0 < 30
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 3
    deadline = time.monotonic() + 5
    while not all(map(_gone, started)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(map(_gone, started)), started
    assert fetch_rows(db_url, "SELECT count(*) AS n FROM profiles")[0]["n"] == 0


@two_cpus
def test_failing_launcher_is_one_line(cli, db_url, node_mpi, tmp_path, monkeypatch):  # noqa: F811
    launcher = _fake_launcher(tmp_path, "echo '------' >&2\necho 'no slots left for 2 ranks' >&2\nexit 3\n")
    monkeypatch.setenv("NODEREG_MPIRUN", str(launcher))
    res = cli("profile", "broken", "--kernels", "exchange", "--threads", "2", "--reps", "1")
    _one_line_error(res, "failed: no slots left for 2 ranks (exit status 3)")
    assert fetch_rows(db_url, "SELECT count(*) AS n FROM profiles")[0]["n"] == 0
