"""`nodereg run`: timing a command on a node of this host, storing its repetitions, and every error path."""

import json
import socket
import sys
import time
from pathlib import Path

import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends, fetch_rows
from test_trace_cli import _alive, _sleeper, _wait_for

from registry.db import open_registry
from registry.inventory import collect
from registry.nodes import ensure_node

PY = sys.executable


def _node(db_url, name="core0", cpus=(0,), host=None):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        node_id = ensure_node(conn, name, collect(list(cpus) if cpus else None))
        if host:
            conn.execute(sa.text("UPDATE nodes SET host = :h WHERE node_id = :id"), {"h": host, "id": node_id})
    reg.close()


def _runs(db_url):
    """The stored runs, and how many apps exist (a failed `run` must not leave its app behind)."""
    rows = fetch_rows(db_url, "SELECT a.name AS app, n.name AS node, r.threads, r.time_s, r.source, r.command_json, "
                              "r.exit_status, r.batch_uid FROM runs r JOIN apps a ON a.app_id = r.app_id "
                              "JOIN nodes n ON n.node_id = r.node_id ORDER BY r.run_id")
    return rows, len(fetch_rows(db_url, "SELECT app_id FROM apps"))


@both_backends
def test_run_stores_every_repetition_pinned_with_the_nodes_threads(cli, db_url, tmp_path):
    _node(db_url)
    seen = tmp_path / "seen"
    code = (f"import os; open({str(seen)!r}, 'a').write(repr((sorted(os.sched_getaffinity(0)), "
            "os.environ['OMP_NUM_THREADS'], os.environ['OPENBLAS_NUM_THREADS'])) + '\\n')")
    res = cli("run", "core0", "--name", "probe", "--repeat", "3", "--json", "--", PY, "-c", code)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["threads"] == 1 and len(doc["times_s"]) == 3
    assert doc["median_s"] == sorted(doc["times_s"])[1]
    assert seen.read_text().splitlines() == ["([0], '1', '1')"] * 3
    rows, _ = _runs(db_url)
    assert [r["time_s"] for r in rows] == doc["times_s"]
    assert {(r["app"], r["node"], r["threads"], r["source"], r["exit_status"], r["batch_uid"]) for r in rows} == \
        {("probe", "core0", 1, "run", 0, doc["batch_uid"])}
    assert json.loads(rows[0]["command_json"]) == [PY, "-c", code]
    res = cli("sql", "SELECT repetitions, median_s FROM v_run_batches", "--format", "csv")
    if res.code == 0:  # PostgreSQL: `nodereg sql` needs the reader role (tests/test_sql_readonly.py)
        assert res.out.splitlines()[1] == f"3,{doc['median_s']}"


def test_users_thread_count_wins_and_is_stored(cli, db_url, tmp_path, monkeypatch):
    _node(db_url, "whole", cpus=None)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    seen = tmp_path / "seen"
    res = cli("run", "whole", "--repeat", "1", "--name", "t", "--", PY, "-c",
              f"import os; open({str(seen)!r}, 'w').write(os.environ['MKL_NUM_THREADS'])")
    assert res.code == 0, res.err
    assert seen.read_text() == "3"
    rows, _ = _runs(db_url)
    assert [(r["app"], r["threads"]) for r in rows] == [("t", 3)]


@both_backends
def test_crash_propagates_the_status_and_stores_nothing(cli, db_url, tmp_path):
    """The second repetition fails: the first, successful one is not stored either."""
    _node(db_url)
    flag = tmp_path / "flag"
    code = f"import os, sys\nif os.path.exists({str(flag)!r}): sys.exit(5)\nopen({str(flag)!r}, 'w')\n"
    res = cli("run", "core0", "--", PY, "-c", code)
    assert res.code == 5
    assert_last_line_error(res, "status 5 (repetition 2 of 3)", "nothing was stored")
    assert "repetition 1/3" in res.err
    assert _runs(db_url) == ([], 0)
    res = cli("run", "core0", "--", "sh", "-c", "exit 3")   # run directly: sh is the command, not our shell
    assert res.code == 3
    assert_last_line_error(res, "status 3 (repetition 1 of 3)")
    assert _runs(db_url) == ([], 0)


@both_backends
def test_hang_is_killed_with_its_tree_and_stores_nothing(cli, db_url, tmp_path):
    _node(db_url)
    pids = tmp_path / "pids"
    start = time.monotonic()
    res = cli("run", "core0", "--timeout", "1.5", "--", PY, "-c", _sleeper(pids))
    assert time.monotonic() - start < 10
    assert res.code == 124
    assert_last_line_error(res, "ran past --timeout 1.5 s", "nothing was stored")
    child, grandchild = _wait_for(pids, 1)
    assert not _alive(child) and not _alive(grandchild)
    assert _runs(db_url) == ([], 0)


def assert_last_line_error(res, *fragments):
    """A failure after the command ran: nodereg's progress lines, then one `error:` line, last."""
    lines = res.err.strip().splitlines()
    assert [ln for ln in lines if ln.startswith("error:")] == lines[-1:], res.err
    assert "Traceback" not in res.err and all(f in lines[-1] for f in fragments), (fragments, lines[-1])


@both_backends
def test_bad_input_is_one_line_and_runs_nothing(cli, db_url, tmp_path):
    _node(db_url)
    _node(db_url, "remote", host="elsewhere-host")
    _node(db_url, "bare", cpus=None)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE nodes SET host = NULL WHERE name = 'bare'"))
    reg.close()
    marker = tmp_path / "ran"
    assert_one_line_error(cli("run", "nope", "--", "touch", marker), "unknown node 'nope'")
    assert_one_line_error(cli("run", "remote", "--", "touch", marker), "'elsewhere-host'", socket.gethostname())
    assert_one_line_error(cli("run", "bare", "--", "touch", marker), "no recorded host")
    res = cli("run", "core0", "--", "no-such-command-xyz")
    assert_one_line_error(res, "command not found: no-such-command-xyz")
    assert res.code == 127
    assert_one_line_error(cli("run", "core0"), "no command given")
    # a mistyped option is not a program to look for (#32: `run n --threads 0 -- true` said "command not
    # found: --threads", exit 127; a mistyped command line exits 2, as the README says)
    res = cli("run", "core0", "--threads", "2", "--", "touch", marker)
    assert_one_line_error(res, "no such option: --threads", "after `--`")
    assert res.code == 2
    assert_one_line_error(cli("run", "core0", "--name", " a", "--", "touch", marker), "app name")
    assert not marker.exists()
    assert _runs(db_url) == ([], 0)


def test_json_stays_parseable_when_the_command_prints(db_url, tmp_path):
    """A real process (the in-process runner's capture does not see the child's file descriptors)."""
    import os
    import subprocess

    _node(db_url)
    proc = subprocess.run([PY, "-m", "registry", "--db", db_url, "run", "core0", "--repeat", "1", "--json", "--",
                           PY, "-c", "print('noise from the program')"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["times_s"] and "noise from the program" in proc.stderr
