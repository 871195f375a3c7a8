"""kill -9 in the middle of a write leaves a consistent registry: all of the import, or none of it."""

import os
import signal
import subprocess
import sys
import time

import sqlalchemy as sa
from conftest import both_backends
from registry_data import populate

from registry.db import open_registry
from registry.db.relations import SPECS
from registry.doctor import check


def _bundle(tmp_path):
    src = f"duckdb:///{tmp_path / 'src.duckdb'}"
    reg = open_registry(src)
    with reg.begin() as conn:
        populate(conn)
    reg.close()
    subprocess.run([sys.executable, "-m", "registry", "--db", src, "export", str(tmp_path / "b")], check=True)
    return tmp_path / "b"


# The real `nodereg import bundle`, held inside its transaction once its first bulk rows are written:
# the test wraps the bundle module's bulk insert in this process only (nothing in nodereg waits for a test).
_IMPORT_THAT_WAITS = """
import pathlib, sys, time
from registry.io import bundle
from registry.cli import main

written, signal_file = bundle.insert_rows, pathlib.Path(sys.argv[1])
def insert_then_wait(conn, table, rows):
    n = written(conn, table, rows)
    signal_file.touch()
    time.sleep(60)
    return n
bundle.insert_rows = insert_then_wait
sys.argv = ["nodereg", *sys.argv[2:]]
main()
"""


@both_backends
def test_kill_during_import(tmp_path, db_url):
    """The import is killed after its first rows are written, inside its transaction (held there by
    the test's wrapper above): nothing of it may be stored."""
    bundle = _bundle(tmp_path)
    open_registry(db_url).close()
    inside = tmp_path / "inside-the-transaction"
    proc = subprocess.Popen([sys.executable, "-c", _IMPORT_THAT_WAITS, str(inside), "--db", db_url, "import", "bundle",
                             str(bundle)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not inside.exists():
            assert proc.poll() is None, "the import ended before writing anything"
            assert time.monotonic() < deadline, "the import never wrote its first rows"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    reg = open_registry(db_url)
    with reg.connect() as conn:
        assert check(conn) == []
        stored = {spec.table: conn.execute(sa.text(f"SELECT count(*) FROM {spec.table}")).scalar() for spec in SPECS}
    reg.close()
    assert stored == dict.fromkeys(stored, 0)
