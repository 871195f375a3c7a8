"""kill -9 in the middle of a write leaves a consistent registry: all of the import, or none of it."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import sqlalchemy as sa
from conftest import both_backends
from registry_data import populate

from registry.db import open_registry
from registry.db.write import insert_rows
from registry.doctor import check


def _big_bundle(tmp_path):
    src = f"duckdb:///{tmp_path / 'src.duckdb'}"
    reg = open_registry(src)
    with reg.begin() as conn:
        ids = populate(conn)
        n = 400_000
        insert_rows(conn, "trace_samples", pd.DataFrame({
            "trace_id": ids["trace_id"], "t_s": [1.0 + i * 1e-3 for i in range(n)], "metric": "probe", "value": 1.0}))
    reg.close()
    subprocess.run([sys.executable, "-m", "registry", "--db", src, "export", str(tmp_path / "b")], check=True)
    return tmp_path / "b"


@both_backends
def test_kill_during_import(tmp_path, db_url):
    bundle = _big_bundle(tmp_path)
    open_registry(db_url).close()
    proc = subprocess.Popen([sys.executable, "-m", "registry", "--db", db_url, "import", "bundle", str(bundle)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.2)  # past start-up, inside the import transaction
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    reg = open_registry(db_url)
    with reg.connect() as conn:
        assert check(conn) == []
        samples = conn.execute(sa.text("SELECT count(*) FROM trace_samples")).scalar()
        nodes = conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar()
    reg.close()
    assert (nodes, samples) in ((0, 0), (1, 400_010))
