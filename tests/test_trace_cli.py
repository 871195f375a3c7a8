"""`nodereg trace`: the command end to end, the node it runs on, and every error path."""

import json
import shutil
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends, fetch_rows

from registry import cpulist
from registry.db import open_registry, utcnow
from registry.db.url import duckdb_path
from registry.db.write import insert_returning, new_uid
from registry.doctor import check
from registry.inventory import collect
from registry.nodes import ensure_node
from registry.io.tracefile import read_trace
from registry.measure import hotmix

PY = sys.executable


def _node(db_url, name="base", cpus=None, profile=False):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        node_id = ensure_node(conn, name, collect(cpus))
        if profile:
            insert_returning(conn, "profiles", {
                "uid": new_uid(), "node_id": node_id, "mode": "quick", "started_at": utcnow(),
                "host": socket.gethostname(), "status": "complete"}, "profile_id")
    reg.close()


def _traces(db_url):
    return fetch_rows(
        db_url,
        "SELECT t.trace_id, t.status, t.exit_status, a.name AS app, n.name AS node, "
        "(SELECT count(*) FROM phases p WHERE p.trace_id = t.trace_id) AS phases, "
        "(SELECT count(*) FROM trace_samples s WHERE s.trace_id = t.trace_id) AS samples "
        "FROM traces t JOIN apps a ON a.app_id = t.app_id JOIN nodes n ON n.node_id = t.node_id "
        "ORDER BY t.trace_id")


def _sleeper(pids: Path) -> str:
    """A child command that forks a grandchild, writes both pids to `pids`, and sleeps."""
    return ("import os, subprocess, time\n"
            "g = subprocess.Popen(['sleep', '30'])\n"
            f"open({str(pids)!r} + '.tmp', 'w').write(f'{{os.getpid()}} {{g.pid}}')\n"
            f"os.rename({str(pids)!r} + '.tmp', {str(pids)!r})\n"
            "time.sleep(30)\n")


def _wait_for(path: Path, timeout_s: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, "the traced command never started"
        time.sleep(0.05)
    return [int(p) for p in path.read_text().split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_trace_stores_phases_and_writes_the_file(cli, db_url, tmp_path):
    _node(db_url, profile=True)  # default node: this host's last profile
    out = tmp_path / "t.json"
    code = "import time\nfrom registry.trace.markers import phase\nwith phase('work'):\n    time.sleep(0.4)\n"
    res = cli("trace", "--name", "demo", "--out", out, "--json", "--", PY, "-c", code)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["status"] == "ok" and doc["node"] == "base" and doc["name"] == "demo"
    work = [p for p in doc["phases"] if p["method"] == "marker"]
    assert [p["name"] for p in work] == ["work"] and "proc" in work[0]["signature"]
    back = read_trace(out)
    assert back.command == [PY, "-c", code] and back.wall_s == doc["wall_s"]
    assert back.meta["uid"] == doc["uid"]  # the file names the stored trace
    (row,) = _traces(db_url)
    assert row["app"] == "demo" and row["status"] == "ok" and row["phases"] == len(doc["phases"])
    assert row["samples"] > 0


@pytest.mark.skipif(not hotmix.available(), reason="perf cannot record cpu-clock samples here")
def test_the_instruction_mix_is_sampled_unless_asked_not_to(cli, db_url):
    """Source mix by default where perf samples (a busy Python loop: the interpreter's own code,
    no FP), none with --no-mix, and perf is not sampled as part of the program (its CPU use)."""
    _node(db_url, profile=True)
    code = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 0.8:\n    pass\n"
    docs = {}
    for flag in ("--mix", "--no-mix"):
        res = cli("trace", "--name", "busy", "--json", flag, "--", PY, "-c", code)
        assert res.code == 0, res.err
        docs[flag] = json.loads(res.out)
    with_mix = [p["signature"]["mix"] for p in docs["--mix"]["phases"] if "mix" in p["signature"]]
    assert "mix" in docs["--mix"]["sources"] and with_mix
    assert max(m["branch_share"] for m in with_mix) > 0.05 and min(m["fp_per_load"] for m in with_mix) < 0
    assert "mix" not in docs["--no-mix"]["sources"]
    assert not any("mix" in p["signature"] for p in docs["--no-mix"]["phases"])
    for doc in docs.values():   # one busy thread: perf's own CPU time is not the program's
        assert max(p["signature"]["proc"]["cpu_util"] for p in doc["phases"]) < 1.15


def test_node_restriction_applies_to_the_command(cli, db_url, tmp_path):
    _node(db_url, "core0", cpus=[0])
    seen = tmp_path / "affinity"
    res = cli("trace", "--node", "core0", "--", PY, "-c",
              f"import os; open({str(seen)!r}, 'w').write(str((sorted(os.sched_getaffinity(0)), "
              "os.environ['OMP_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS'])))")
    assert res.code == 0, res.err
    assert seen.read_text() == "([0], '1', '1')"  # the node's thread count, as `nodereg run` gives it
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:  # not a thread count the user fixed: projected at each node's CPUs
        assert conn.execute(sa.text("SELECT threads FROM traces")).scalar_one() is None
    reg.close()


def test_failing_command_propagates_status_and_keeps_the_trace(cli, db_url):
    _node(db_url)
    res = cli("trace", "--node", "base", "--", PY, "-c", "import sys; sys.exit(3)")
    assert res.code == 3
    assert "exited with status 3" in res.err
    (row,) = _traces(db_url)
    assert row["status"] == "failed" and row["exit_status"] == 3


def test_command_not_found(cli, db_url):
    _node(db_url)
    assert_one_line_error(cli("trace", "--node", "base", "--", "no-such-command-xyz"), "command not found")
    assert _traces(db_url) == []


def test_unknown_node_fails_before_running_anything(cli, db_url, tmp_path):
    _node(db_url)
    marker = tmp_path / "ran"
    res = cli("trace", "--node", "nope", "--", "touch", marker)
    assert_one_line_error(res, "unknown node 'nope'")
    assert not marker.exists()


def test_no_profiled_node_on_this_host(cli, db_url, tmp_path):
    """The trace is recorded against the host's inventory; `match` then asks for a base node."""
    out = tmp_path / "t.json"
    res = cli("trace", "--name", "app", "--out", out, "--", PY, "-c", "import sys; sys.exit(3)")
    assert res.code == 3, res.err
    assert "match` will need --base NODE" in res.err
    assert cpulist.named(sorted(os.sched_getaffinity(0))) in res.err
    host = socket.gethostname()
    (row,) = _traces(db_url)
    assert row["node"] == host and row["exit_status"] == 3
    assert read_trace(out).node == host
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        n_cpus, source = conn.execute(sa.text("SELECT n_cpus, source FROM nodes WHERE name = :n"), {"n": host}).one()
    reg.close()
    assert (n_cpus, source) == (len(os.sched_getaffinity(0)), "trace")
    assert_one_line_error(cli("match", out), "--base NODE", host)


def test_several_profiled_nodes_take_the_whole_host(cli, db_url, tmp_path):
    _node(db_url, "core0", cpus=[0], profile=True)
    _node(db_url, "whole", profile=True)
    _node(db_url, "core0b", cpus=[0], profile=True)   # profiled last: it used to be chosen
    seen = tmp_path / "affinity"
    res = cli("trace", "--", PY, "-c", f"import os; open({str(seen)!r}, 'w').write(str(len(os.sched_getaffinity(0))))")
    assert res.code == 0, res.err
    assert "on node whole, CPU" in res.err
    assert int(seen.read_text()) == len(os.sched_getaffinity(0))


def test_several_restricted_nodes_ask_for_one(cli, db_url, tmp_path):
    _node(db_url, "core0", cpus=[0], profile=True)
    _node(db_url, "core0b", cpus=[0], profile=True)
    marker = tmp_path / "ran"
    res = cli("trace", "--", "touch", marker)
    assert_one_line_error(res, "--node NODE", "core0 (CPU 0)", "core0b (CPU 0)")
    assert not marker.exists()


def test_timeout_kills_the_whole_tree(cli, db_url, tmp_path):
    _node(db_url)
    pids = tmp_path / "pids"
    start = time.monotonic()
    res = cli("trace", "--node", "base", "--timeout", "1.5", "--", PY, "-c", _sleeper(pids))
    assert time.monotonic() - start < 10
    assert res.code == 124 and "timeout" in res.err
    child, grandchild = _wait_for(pids, 1)
    assert not _alive(child) and not _alive(grandchild)
    (row,) = _traces(db_url)
    assert row["status"] == "timeout"


def test_ctrl_c_terminates_the_child_and_writes_nothing(db_url, tmp_path):
    _node(db_url)
    pids = tmp_path / "pids"
    out = tmp_path / "t.json"
    env = {**os.environ, "NODEREG_DB": db_url}
    proc = subprocess.Popen([PY, "-m", "registry", "trace", "--node", "base", "--out", str(out), "--",
                             PY, "-c", _sleeper(pids)], env=env, stderr=subprocess.PIPE, text=True)
    child, grandchild = _wait_for(pids)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "error: interrupted" in err and "Traceback" not in err
    assert not _alive(child) and not _alive(grandchild)
    assert not out.exists() and not list(Path(tmp_path).glob(".t.json*"))
    assert _traces(db_url) == []


def test_bad_options_fail_before_running(cli, db_url, tmp_path):
    _node(db_url)
    assert_one_line_error(cli("trace", "--node", "base", "--probe-cmd", "true", "--", "true"), "--cachegrind")
    assert_one_line_error(cli("trace", "--node", "base", "--out", tmp_path, "--", "true"), "is a directory")
    assert_one_line_error(cli("trace", "--node", "base", "--"), "no command given")
    assert _traces(db_url) == []


def _trace_process(db_url, out: Path, *command: str) -> subprocess.Popen:
    """`nodereg trace` in the background, its temporary files in out's directory."""
    (out.parent / "tmp").mkdir()
    env = {**os.environ, "NODEREG_DB": db_url, "TMPDIR": str(out.parent / "tmp")}
    return subprocess.Popen([PY, "-m", "registry", "trace", "--node", "base", "--out", str(out), *command],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _consistent(db_url) -> list[dict]:
    """Doctor finds nothing; returns the stored traces."""
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        assert check(conn) == []
    reg.close()
    return _traces(db_url)


@both_backends
def test_kill_9_while_the_command_runs(db_url, tmp_path):
    """The tracer cannot catch SIGKILL: its watchdog kills the command's tree and removes its FIFO."""
    _node(db_url)
    pids, out = tmp_path / "pids", tmp_path / "t.json"
    proc = _trace_process(db_url, out, "--", PY, "-c", _sleeper(pids))
    child, grandchild = _wait_for(pids)
    assert list((tmp_path / "tmp").glob("nodereg-trace-*/phases.fifo"))
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while (_alive(child) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child) and not _alive(grandchild), "the traced command outlived the tracer"
    deadline = time.monotonic() + 10  # the watchdog removes the FIFO's directory after the kill
    while list((tmp_path / "tmp").glob("nodereg-*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not list((tmp_path / "tmp").glob("nodereg-*"))  # the runner's folder and the tracer's
    assert _consistent(db_url) == []
    assert not out.exists() and not list(tmp_path.glob(".t.json*"))


def _storing(pid: int, db_url: str, reader) -> bool:
    """Whether process `pid` is inside its transaction storing the trace (its only write).

    PostgreSQL: it holds a lock on trace_samples, so its traces row is written, uncommitted; asked
    on `reader`'s connection, opened once (opening one per poll took longer than a short store's
    transaction, which CI then missed). DuckDB: it has the file open (the tracer closes it while the
    command runs).
    """
    path = duckdb_path(sa.make_url(db_url))
    if path is not None:
        try:
            return any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{pid}/fd").iterdir())
        except OSError:  # a descriptor closed, or the process ended, meanwhile
            return False
    return bool(reader.execute(sa.text(
        "SELECT count(*) FROM pg_locks WHERE relation = CAST('trace_samples' AS regclass) "
        "AND pid <> pg_backend_pid()")).scalar())


@both_backends
def test_kill_9_while_the_trace_is_stored(db_url, tmp_path):
    """Killed inside the store transaction: no trace, or (if it committed first) a complete one."""
    _node(db_url)
    ended, out = tmp_path / "ended", tmp_path / "t.json"
    busy = ("import sys, time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.0:\n    sum(range(1000))\n"
            "open(sys.argv[1], 'w').close()\n")
    proc = _trace_process(db_url, out, "--interval", "0.002", "--", PY, "-c", busy, str(ended))  # ~500 samples
    deadline = time.monotonic() + 60
    reg = None if duckdb_path(sa.make_url(db_url)) else open_registry(db_url, readonly=True)
    reader = reg.connect().execution_options(isolation_level="AUTOCOMMIT") if reg else None
    try:
        while not (ended.exists() and _storing(proc.pid, db_url, reader)):
            assert proc.poll() is None and time.monotonic() < deadline, "the trace ended before it could be killed"
            time.sleep(0.005)
    finally:
        if reg is not None:
            reader.close()
            reg.close()
    time.sleep(0.02)  # DuckDB: past opening the file, into the writes
    proc.kill()
    proc.wait()
    traces = _consistent(db_url)
    assert traces == [] or (len(traces) == 1 and traces[0]["status"] == "ok" and traces[0]["phases"] > 0
                            and traces[0]["samples"] > 0)
    if out.exists():  # written (atomically) after the trace is stored
        assert traces and read_trace(out).phases


def _descendants(root: int) -> list[int]:
    from registry.measure import procfs
    return [pid for pid in procfs.tree(root) if pid != root]


def _cmdline(pid: int) -> str:
    """A process's command line; '' once it has exited (a descendant listed a moment ago may be gone:
    the full suite beside a CPU-bound job hit that race once)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_kill_9_during_the_cachegrind_pass(db_url, tmp_path):
    """The cachegrind pass (minutes under valgrind) dies with a killed tracer too."""
    _node(db_url)
    out = tmp_path / "t.json"
    proc = _trace_process(db_url, out, "--cachegrind", "--probe-cmd", "sleep 30", "--", "true")
    deadline, valgrind = time.monotonic() + 30, []
    while not valgrind and time.monotonic() < deadline:
        valgrind = [pid for pid in _descendants(proc.pid)
                    if "valgrind" in _cmdline(pid)]
        time.sleep(0.05)
    assert valgrind, "the cachegrind pass did not start"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in valgrind) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in valgrind), "valgrind outlived the tracer"
    assert _consistent(db_url) == [] and not out.exists()
    assert not list((tmp_path / "tmp").glob("nodereg-*"))


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_cachegrind_sample_bounds_the_pass_and_keeps_its_counts(cli, db_url, tmp_path):
    """`--cachegrind-sample S` stops valgrind after S seconds and keeps the instruction mix it counted:
    a probe input that runs minutes natively (hours under cachegrind) is sampled in seconds, with the
    branchy integer work of tests/programs/kinds.c's hash seen as such."""
    program = tmp_path / "kinds"
    subprocess.run(["cc", "-O2", "-o", str(program), str(Path(__file__).parent / "programs" / "kinds.c")],
                   check=True)
    _node(db_url)
    out = tmp_path / "t.json"
    started = time.monotonic()
    res = cli("trace", "--node", "base", "--cachegrind-sample", "2", "--out", out, "--probe-cmd",
              f"{program} hash 100000000000", "--", str(program), "hash", "3000000")
    assert res.code == 0, res.err
    assert time.monotonic() - started < 60
    assert "stopped after its 2 s sample" in res.err
    trace = read_trace(out)
    assert "cachegrind" in trace.sources and trace.cachegrind["sample_s"] == 2
    assert trace.cachegrind["total"]["branch_miss_rate"] > 0.1 and trace.cachegrind["total"]["instructions"] > 1e6


def test_process_tree_without_children_lists(tmp_path, monkeypatch):
    """Where /proc/PID/task/TID/children is missing (or vanished with its thread), the tree is found
    from the processes' parents: a grandchild is not lost."""
    from registry.measure import procfs

    pids = tmp_path / "pids"
    proc = subprocess.Popen([PY, "-c", _sleeper(pids)])
    try:
        child, grandchild = _wait_for(pids)
        monkeypatch.setattr(procfs, "CHILDREN", "/proc/{pid}/task/{tid}/no-such-file")
        assert procfs.tree(child) == [child, grandchild]
        assert grandchild in procfs.tree(os.getpid())
    finally:
        for pid in _descendants(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
