"""A DuckDB registry held by another process: a clear message naming the holder, or --wait."""

import subprocess
import sys
import time

from conftest import assert_one_line_error

HOLD = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); time.sleep(float(sys.argv[2]))"


def _holder(path, seconds):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_writer_gets_clear_message_then_waits(cli, tmp_path, db_url):
    path = tmp_path / "registry.duckdb"
    assert cli("init").code == 0
    holder = _holder(path, 30)
    try:
        res = cli("--wait", "0", "nodes")
        assert_one_line_error(res, "in use by another process", f"PID {holder.pid}", "--wait")
    finally:
        holder.kill()
        holder.wait()
    holder = _holder(path, 1.0)
    start = time.monotonic()
    res = cli("--wait", "20", "nodes")
    holder.wait()
    assert res.code == 0, res.err
    assert time.monotonic() - start >= 0.5


def test_trace_waits_to_store_when_another_process_took_the_registry_meanwhile(cli, tmp_path, db_url):
    # the tracer closes the registry while the command runs; a holder takes it then; --wait must
    # cover the store at the end, not only the first open
    from test_trace_cli import _node, _traces

    path = tmp_path / "registry.duckdb"
    _node(db_url)
    trace = subprocess.Popen([sys.executable, "-m", "registry", "--db", db_url, "--wait", "20", "trace", "--node",
                              "base", "--", sys.executable, "-c", "import time; time.sleep(1.0)"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert trace.stderr.readline().startswith("tracing")  # printed once the registry is closed
    holder = _holder(path, 2.0)
    _, err = trace.communicate(timeout=60)
    holder.wait()
    assert trace.returncode == 0, err
    assert len(_traces(db_url)) == 1
