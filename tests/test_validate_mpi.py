"""scripts/validate_mpi.py, the parts that need no MPI program: the ranks x threads grid, how the
thread count reaches a program, GROMACS's own communication share, and the verdicts it prints."""

import time
from pathlib import Path

import pytest
from script_module import script_module


@pytest.fixture(scope="module")
def script():
    with script_module("validate_mpi") as module:
        yield module


def test_threads_only_for_the_programs_that_run_them(script):
    gromacs, melt = script.PROGRAMS["gromacs"], script.PROGRAMS["melt"]
    assert gromacs.configurations(2) == [(1, 1), (1, 2), (2, 1)]
    assert melt.configurations(2) == [(1, 1), (2, 1)]
    assert sorted(gromacs.configurations(4)) == [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1)]
    assert gromacs.configurations(1) == melt.configurations(1) == [(1, 1)]


def test_the_thread_count_reaches_the_program(script, tmp_path):
    gromacs, hpcc = script.PROGRAMS["gromacs"], script.PROGRAMS["hpcc"]
    argv = gromacs.argv(2, 4, tmp_path)
    assert argv[:3] == ["gmx_mpi", "-quiet", "mdrun"] and argv[argv.index("-ntomp") + 1] == "4"
    env = gromacs.environment(4)
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "4" and "LD_LIBRARY_PATH" not in env
    # hpcc's BLAS: OpenBLAS's OpenMP build first on the library path, whatever libblas.so.3 points to
    env = hpcc.environment(2)
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(script.OPENBLAS) and env["OMP_NUM_THREADS"] == "2"
    assert script.PROGRAMS["crack"].environment(1)["OMP_NUM_THREADS"] == "1"


GROMACS_LOG = """
     R E A L   C Y C L E   A N D   T I M E   A C C O U N T I N G

 Computing:          Num   Num      Call    Wall time         Giga-Cycles
                     Ranks Threads  Count      (s)         total sum    %
-----------------------------------------------------------------------------
 Domain decomp.         2    1         21       0.015          0.077   0.9
 Comm. coord.           2    1        980       0.008          0.043   0.5
 Force                  2    1       1001       1.156          6.002  71.3
 Wait + Comm. F         2    1       1001       0.013          0.067   0.8
 PME mesh               2    1       1001       0.326          1.693  20.1
 Comm. energies         2    1        101       0.006          0.033   0.4
-----------------------------------------------------------------------------
 Total                                          1.622          8.421 100.0
-----------------------------------------------------------------------------
 Breakdown of PME mesh computation
-----------------------------------------------------------------------------
 PME redist. X/F        2    1       2002       0.094          0.486   5.8
 PME spread             2    1       1001       0.060          0.312   3.7
 PME 3D-FFT Comm.       2    1       2002       0.023          0.119   1.4
"""


def test_gromacs_own_communication_share(script):
    # Comm. coord. + Wait + Comm. F + Comm. energies + PME redist. X/F + PME 3D-FFT Comm.
    assert script.gromacs_comm_share(GROMACS_LOG) == pytest.approx(0.089)
    assert script.gromacs_comm_share("no accounting: the run was killed") is None


def test_the_report_counts_the_recommendations_within_5_percent(script, capsys):
    rows = [script.Row("a", 1, 1, 10.0, 1.0, 11.0, False), script.Row("a", 2, 1, 5.0, 2.0, 4.0, True, 0.1, 0.12)]
    script.report(rows, {"a": {"recommended": (2, 1), "best": (2, 1), "best_s": 5.0, "recommended_s": 5.0},
                         "b": {"recommended": (1, 2), "best": (2, 1), "best_s": 5.0, "recommended_s": 5.3}})
    out = capsys.readouterr().out
    assert "median |error| 15.0% over 2 predictions; 10.0% over the 1 configurations" in out
    assert "b: recommended 1 x 2; measured best 2 x 1 (5 s); the recommended one 5.3 s: NOT within 5%" in out
    assert "within 5% of the measured best for 1 of 2 programs" in out


def test_a_configuration_that_fails_is_left_out_with_its_reason(script, tmp_path):
    with pytest.raises(script.RunFailed, match=r"exit status 3: .*no domain decomposition"):
        script.measure(["sh", "-c", "echo starting; echo 'There is no domain decomposition' >&2; exit 3"],
                       {}, tmp_path, 30)
    wall, cpu = script.measure(["sh", "-c", "exit 0"], {}, tmp_path, 30)
    assert 0 < wall < 30 and cpu >= 0


def test_a_run_past_the_timeout_is_killed_with_every_process_it_started(script, tmp_path):
    pidfile = tmp_path / "child.pid"
    # the launcher's stand-in starts a "rank" in the background and waits for it
    cmd = ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"]
    with pytest.raises(script.RunFailed, match="did not finish within 1 s"):
        script.measure(cmd, {}, tmp_path, 1)
    status = Path(f"/proc/{int(pidfile.read_text())}/status")
    deadline = time.monotonic() + 5          # a killed process may take a moment to be gone
    while status.exists() and "zombie" not in status.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not status.exists() or "zombie" in status.read_text()


def test_the_report_lists_the_configurations_left_out(script, capsys):
    rows = [script.Row("g", 1, 1, 10.0, 1.0, 10.5, False), script.Row("g", 8, 1, 2.0, 7.5, 2.1, True, 0.2, 0.19)]
    script.report(rows, {"g": {"recommended": (16, 1), "best": (8, 1), "best_s": 2.0, "recommended_s": None,
                               "failed": {(16, 1): "exit status 1: no domain decomposition"}}})
    out = capsys.readouterr().out
    assert "g: 16 x 1 left out: exit status 1: no domain decomposition" in out
    assert "the recommended one not measured: NOT within 5%" in out
