"""The test process ends as any Python process does (tests/conftest.py): atexit handlers and
finalisers run, the exit status is pytest's, and only nanobind's leak report is dropped from stderr."""

import os
import subprocess
import sys
from pathlib import Path

INNER = '''
import atexit, os

atexit.register(lambda: open({marker!r}, "w").close())


class Late:
    """Writes to stderr at interpreter finalisation, after every atexit handler."""

    def __del__(self, write=os.write):
        write(2, b"nanobind: leaked 1 instances!\\n - leaked instance 0x1 of type \\"x\\"\\nlate line\\n")


late = Late()


def test_fails():
    assert False
'''


def test_the_test_process_finishes_normally(tmp_path):
    marker = tmp_path / "atexit-ran"
    (tmp_path / "test_inner.py").write_text(INNER.format(marker=str(marker)))
    tests = Path(__file__).parent
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                          "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])})
    assert res.returncode == 1, res.stdout + res.stderr
    assert marker.exists()
    assert "late line" in res.stderr and "nanobind" not in res.stderr and "leaked" not in res.stderr
