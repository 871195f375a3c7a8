"""Many writers on one PostgreSQL registry lose nothing (bundle imports racing on shared names and uids)."""

import os
import subprocess
import sys

import pytest
import sqlalchemy as sa
from registry_data import populate

from registry.db import open_registry


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_four_concurrent_imports(tmp_path, db_url):
    bundles = []
    for i in range(3):
        src = f"duckdb:///{tmp_path / f'src{i}.duckdb'}"
        reg = open_registry(src)
        with reg.begin() as conn:  # distinct nodes; the same app and microbenchmark configs in all
            populate(conn, node=f"node{i}", app="shared-app")
        reg.close()
        subprocess.run([sys.executable, "-m", "registry", "--db", src, "export", str(tmp_path / f"b{i}")], check=True)
        bundles.append(tmp_path / f"b{i}")
    bundles.append(bundles[0])  # the same bundle twice at once: uid races
    open_registry(db_url).close()
    env = {**os.environ, "NODEREG_DB": db_url}
    procs = [subprocess.Popen([sys.executable, "-m", "registry", "import", "bundle", str(b)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for b in bundles]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    reg = open_registry(db_url)
    with reg.connect() as conn:
        count = lambda t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()  # noqa: E731
        assert (count("nodes"), count("apps"), count("profiles"), count("runs"), count("ub_configs")) == (3, 1, 3, 9, 2)
        assert count("profile_reps") == 3 * 2 * 3 and count("ub_streams") == 2
    reg.close()
