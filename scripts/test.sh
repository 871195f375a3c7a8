#!/usr/bin/env bash
# Set up (a virtual environment with the project and its test extras) and run the test suite.
# The example model plugin of tests/plugin_example, which proves the plugin contract from outside the
# package, is installed into a temporary directory on this run's PYTHONPATH only: it never lands in
# the .venv you use (where `nodereg models` would list it).
# The tests run in 2 worker processes (pytest-xdist, `--dist loadfile` in pyproject.toml): much of
# a test's time is waiting (subprocesses, sleeps, the disk), and one process used 0.63 of a CPU
# (565 s of CPU in 875 s) of the guide's 2-core target. NODEREG_TEST_WORKERS=N for another count,
# 0 for one process (what --pdb needs).
# Usage: bash scripts/test.sh [pytest args...]   (NODEREG_NO_PG=1: no throw-away PostgreSQL)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NODEREG_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --quiet --disable-pip-version-check)
"${PIP[@]}" install -e '.[test]'
if "${PIP[@]}" show nodereg-plugin-example >/dev/null 2>&1; then   # put there by an older scripts/test.sh
    "${PIP[@]}" uninstall -y nodereg-plugin-example
fi
PLUGIN_DIR=$(mktemp -d)
trap 'rm -rf "$PLUGIN_DIR"' EXIT
"${PIP[@]}" install --no-deps --target "$PLUGIN_DIR" tests/plugin_example
export PYTHONPATH="$PLUGIN_DIR${PYTHONPATH:+:$PYTHONPATH}"
export NODEREG_REQUIRE_PLUGIN_EXAMPLE=1   # installed above: its tests must not skip
PYTEST=("$VENV/bin/python" -m pytest -n "${NODEREG_TEST_WORKERS:-2}")
# The PostgreSQL half of the tests needs a server. Without one (no PGHOST) and where Debian's
# pg_virtualenv exists, run inside a throw-away cluster, as .ci/run does; .ci/run starts one itself
# (PGHOST is set then, so this does not nest). Otherwise those cases are skipped, and pytest's
# summary says why (-rs in pyproject.toml). The server logs no ERROR lines: many tests provoke
# errors on purpose, and pg_virtualenv prints the server's log after a failed run, where a hundred
# expected errors would bury the one that matters.
if [ -z "${PGHOST:-}" ] && [ -z "${NODEREG_NO_PG:-}" ] && command -v pg_virtualenv >/dev/null; then
    pg_virtualenv -t -o log_min_messages=fatal -o log_min_error_statement=panic \
        "${PYTEST[@]}" "$@"
else
    "${PYTEST[@]}" "$@"
fi
