"""A full disk or a read-only file system: one clear line, and nothing half-written."""

import subprocess

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error
from registry_data import populate

from registry.db import open_registry


@pytest.fixture
def small_fs(tmp_path):
    """A 3 MiB tmpfs (needs root, as in CI); skipped where mounting is not allowed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _bundle_with_samples(tmp_path, cli, n):
    src = f"duckdb:///{tmp_path / 'src.duckdb'}"
    reg = open_registry(src)
    with reg.begin() as conn:
        ids = populate(conn)
        conn.execute(sa.text("INSERT INTO trace_samples SELECT :t, 10 + i / 1000.0, 'm', i FROM range(:n) r(i)"),
                     {"t": ids["trace_id"], "n": n})
    reg.close()
    assert cli("--db", src, "export", tmp_path / "b").code == 0
    return tmp_path / "b"


def test_disk_full_during_import(tmp_path, cli, small_fs):
    # 200,000 samples need ~23 MB once imported (measured: 34 MB for 300,000), far beyond the ~1.2 MB the
    # 3 MiB file system has left after `init` (1.8 MB); 2,000,000 took seconds more to prove the same
    bundle = _bundle_with_samples(tmp_path, cli, 200_000)
    url = f"duckdb:///{small_fs / 'r.duckdb'}"
    assert cli("--db", url, "init").code == 0
    assert_one_line_error(cli("--db", url, "import", "bundle", bundle), "disk is full", "nothing was written")
    res = cli("--db", url, "sql", "SELECT count(*) AS n FROM nodes", "-f", "csv")
    assert res.out.splitlines() == ["n", "0"]


def test_read_only_file_system(tmp_path, cli, small_fs):
    url = f"duckdb:///{small_fs / 'r.duckdb'}"
    assert cli("--db", url, "init").code == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    assert cli("--db", url, "nodes").code == 0  # reading works
    assert_one_line_error(cli("--db", url, "import", "bundle", tmp_path), "cannot write the registry", "Read-only")
    assert_one_line_error(cli("--db", f"duckdb:///{small_fs / 'new.duckdb'}", "init"), "cannot write the registry")
