"""Start-up (issue 30, item 7): the command line imports the heavy libraries only in the commands that
use them. `nodereg --help` importing SQLAlchemy and numpy took about 0.9 s of CPU against the 0.3 s
target (scripts/bench_startup.py measures it); this guards the import graph, which is what a
stray module-level import breaks."""

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "pandas", "sqlalchemy", "duckdb", "sklearn", "scipy", "pyarrow", "psycopg")

_PROBE = """
import json, sys
sys.argv = ["nodereg", *{args!r}]
import registry.cli
if sys.argv[1:]:
    try:
        registry.cli.main()
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["nodes", "--help"]])
def test_the_command_line_starts_without_heavy_libraries(args):
    res = subprocess.run([sys.executable, "-c", _PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                         text=True, timeout=60)
    loaded = json.loads(res.stderr.strip().splitlines()[-1])
    assert loaded == [], f"`nodereg {' '.join(args)}` imported {loaded}"
