"""`nodereg profile`: what it stores, on which CPUs it runs, its errors, and interruption."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends

from registry.db import open_registry
from registry.profile import catalog, profiler
from registry.profile.runner import Measurement
from registry.profile.summary import summarize
from registry.profile.sweep import Config

CPUS = sorted(os.sched_getaffinity(0))
FAST = ("--quick", "--reps", "2")



def rows(db_url: str, sql: str) -> list[tuple]:
    reg = open_registry(db_url, readonly=True)
    try:
        with reg.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        reg.close()


@pytest.mark.alone   # latency L1 < memory: measured figures
def test_profile_stores_a_complete_profile(cli, db_url, binary):
    res = cli("profile", "one", "--cpus", str(CPUS[0]), *FAST, "--kernels", "triad,load,chase,peak_fma,mbw1c,mbw2r",
              "--json")
    assert res.code == 0, res.err
    summary = json.loads(res.out)
    assert summary["memory_triad_gbs"]["1"] > 0 and summary["fp64_peak_gflops"]["1"] > 0
    assert summary["l1_load_gbs"] > 0 and summary["l2_load_gbs"] > 0
    assert set(summary["latency_ns"]) == {"L1", "L2", "L3", "memory"}
    assert summary["latency_ns"]["L1"] < summary["latency_ns"]["memory"]
    assert summary["duration_s"] > 0 and summary["cpu_list"] == str(CPUS[0])

    (node,) = rows(db_url, "SELECT name, n_cpus, cpu_list FROM nodes")
    assert node[:2] == ("one", 1) and node[2] in (str(CPUS[0]), None)
    (prof,) = rows(db_url, "SELECT mode, status, cpu_list, cflags FROM profiles")
    assert prof[:3] == ("custom", "complete", str(CPUS[0])) and "-fopenmp" in prof[3]
    runs = rows(db_url, "SELECT count(*), sum(reps) FROM profile_runs")[0]
    assert runs[0] == summary["configs"] and runs[1] == 2 * runs[0]
    assert rows(db_url, "SELECT count(*) FROM profile_reps")[0][0] == runs[1]
    # every run has its 'streams' signature; thesis configs their positional descriptors
    assert rows(db_url, "SELECT count(DISTINCT owner_id) FROM signatures WHERE owner_kind = 'profile_run' "
                        "AND source = 'streams' AND metric = 'tpi_us'")[0][0] == runs[0]
    streams = rows(db_url, """
        SELECT s.stream_index, s.access, s.pattern, s.dtype, s.stride_bytes FROM ub_streams s
        JOIN ub_configs c ON c.config_id = s.config_id JOIN microbenchmarks u ON u.ub_id = c.ub_id
        WHERE u.name = 'mbw2r' ORDER BY c.config_id, s.stream_index""")
    assert streams and {s[:4] for s in streams} == {(0, "C", "seq", "f64"), (1, "P", "random", "f64")}
    sig = dict(rows(db_url, """
        SELECT g.metric, g.value FROM signatures g JOIN profile_runs r ON r.run_id = g.owner_id
        JOIN ub_configs c ON c.config_id = r.config_id JOIN microbenchmarks u ON u.ub_id = c.ub_id
        WHERE u.name = 'mbw2r' AND g.owner_kind = 'profile_run' ORDER BY r.run_id LIMIT 20"""))
    assert sig["n_streams"] == 2 and sig["s1.random"] == 1 and sig["s0.shared"] == 1 and sig["s1.shared"] == 0
    (best,) = rows(db_url, "SELECT memory_triad_gbs, fp64_gflops FROM v_nodes")
    assert best[0] > 0 and best[1] > 0
    assert rows(db_url, "SELECT count(*) FROM profile_runs WHERE checksum IS NULL OR median_s <= 0")[0][0] == 0


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")
def test_two_cpu_node_sweeps_thread_counts(cli, db_url, binary):
    res = cli("profile", "two", "--cpus", f"{CPUS[0]},{CPUS[1]}", *FAST, "--kernels", "triad,peak_fma", "--json")
    assert res.code == 0, res.err
    summary = json.loads(res.out)
    assert set(summary["memory_triad_gbs"]) == {"1", "2"} and set(summary["fp64_peak_gflops"]) == {"1", "2"}
    # the node's figures, as `nodes` quotes them: each kernel at the most threads measured (#32 point 9)
    (node,) = rows(db_url, "SELECT memory_triad_gbs, fp64_gflops FROM v_nodes")
    assert summary["fp64_gflops"] == summary["fp64_peak_gflops"]["2"] == pytest.approx(node[1], abs=1e-3)
    assert summary["memory_bandwidth_gbs"] == pytest.approx(node[0], abs=1e-3)
    assert rows(db_url, "SELECT DISTINCT c.threads FROM profile_runs r JOIN ub_configs c USING (config_id) "
                        "ORDER BY 1") == [(1,), (2,)]


def test_cpus_restricts_the_cpus_actually_used(binary):
    cpu = CPUS[-1]
    opts = profiler.ProfileOptions(node="last", mode="quick", cpus=[cpu], reps=1,
                                   kernels=catalog.select("load,mbw1p,peak_fma"))
    prep = profiler.prepare(opts)
    assert prep.inventory.cpus == [cpu] and prep.plan.threads == [1]
    record = profiler.measure(opts, prep)
    assert record.measurements and all(m.cpus_used == (cpu,) for m in record.measurements)


def test_the_gemm_figure_is_its_memory_points():
    """The summary's fp64_gemm_gflops is gemm with C beyond the caches (the matrix product that
    compute-bound applications run), not its best level: gemm's L2 config, faster, is left out."""
    def measured(level: str, n: int, seconds: float) -> Measurement:
        config = Config(catalog.get("gemm"), 1, "compact", (0,), n=n, level=level, ws_level=level)
        return Measurement(config, [seconds] * 3, 1, 1, 0.0, 0.0, 2e9, (0,), False)

    got = summarize([measured("L2", 128, 0.04), measured("memory", 4032, 0.05)])["compute"]
    assert got == {"fp64_gemm_gflops": {"1": 40.0}}


@both_backends
def test_same_config_on_two_nodes_is_one_config_row(cli, db_url, binary):
    for name, cpu in (("a", CPUS[0]), ("b", CPUS[-1])):
        res = cli("profile", name, "--cpus", str(cpu), *FAST, "--kernels", "peak_fma,mbw1c")
        assert res.code == 0, res.err
    configs = rows(db_url, "SELECT count(*) FROM ub_configs")[0][0]
    per_node = rows(db_url, "SELECT n.name, count(*) FROM profile_runs r JOIN profiles p USING (profile_id) "
                            "JOIN nodes n USING (node_id) GROUP BY n.name ORDER BY 1")
    assert per_node == [("a", configs), ("b", configs)]


@pytest.mark.parametrize("args,fragment", [
    (("--cpus", "zero"), "malformed CPU list"),
    (("--cpus", "4096"), "not online"),
    (("--kernels", "triad,nope"), "unknown microbenchmark 'nope'"),
    (("--quick", "--full"), "exclude each other"),
    (("--cpus", str(CPUS[0]), "--threads", "2"), "threads must be 1..1"),
    (("--threads", "x"), "malformed --threads"),
    (("--reps", "0"), "at least 1"),
])
def test_bad_options_are_one_line_errors(cli, db_url, args, fragment):
    assert_one_line_error(cli("profile", "n", *args), fragment)


def test_missing_compiler_is_a_one_line_error(cli, db_url, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert_one_line_error(cli("profile", "n", "--quick", "--kernels", "peak_fma"), "no C compiler found")
    assert rows(db_url, "SELECT count(*) FROM nodes")[0][0] == 0


def test_empty_node_name(cli, db_url):
    assert_one_line_error(cli("profile", " ", "--quick"), "must not be empty")


def _driver_of(parent: int, binary: Path) -> int | None:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            exe = os.readlink(proc / "exe")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and exe == str(binary):
            return int(proc.name)
    return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@both_backends
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_interrupted_profile_leaves_nothing(db_url, binary, sig):
    env = dict(os.environ, NODEREG_DB=db_url)
    proc = subprocess.Popen([sys.executable, "-m", "registry", "profile", "victim", "--quick"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, driver = time.monotonic() + 60, None
    while driver is None and time.monotonic() < deadline and proc.poll() is None:
        driver = _driver_of(proc.pid, binary)
        time.sleep(0.05)
    assert driver is not None, proc.communicate()
    time.sleep(1.0)          # well into the measurements
    assert proc.poll() is None, "the profile finished before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}.get(sig, -signal.SIGKILL), err
    assert "Traceback" not in err
    if sig != signal.SIGKILL:   # it says what happened, like `trace` does
        assert "nothing was stored" in err.splitlines()[-1], err
    deadline = time.monotonic() + 10
    while _alive(driver) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(driver), "the driver outlived the profile"
    for table in ("nodes", "profiles", "profile_runs", "profile_reps", "ub_configs", "signatures"):
        assert rows(db_url, f"SELECT count(*) FROM {table}")[0][0] == 0, table
