"""`nodereg trace`: the command end to end, the node it runs on, and every error path."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa
from conftest import assert_one_line_error

from registry.db import open_registry, utcnow
from registry.db.write import insert_returning, new_uid
from registry.inventory import collect
from registry.nodes import ensure_node
from registry.trace.tracefile import read_trace

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
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.text(
            "SELECT t.trace_id, t.status, t.exit_status, a.name AS app, n.name AS node, "
            "(SELECT count(*) FROM phases p WHERE p.trace_id = t.trace_id) AS phases, "
            "(SELECT count(*) FROM trace_samples s WHERE s.trace_id = t.trace_id) AS samples "
            "FROM traces t JOIN apps a ON a.app_id = t.app_id JOIN nodes n ON n.node_id = t.node_id "
            "ORDER BY t.trace_id"))]
    reg.close()
    return rows


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


def test_node_restriction_applies_to_the_command(cli, db_url, tmp_path):
    _node(db_url, "core0", cpus=[0])
    seen = tmp_path / "affinity"
    res = cli("trace", "--node", "core0", "--", PY, "-c",
              f"import os; open({str(seen)!r}, 'w').write(str(sorted(os.sched_getaffinity(0))))")
    assert res.code == 0, res.err
    assert seen.read_text() == "[0]"


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


def test_no_profiled_node_on_this_host(cli, db_url):
    assert_one_line_error(cli("trace", "--", "true"), "nodereg profile")


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
