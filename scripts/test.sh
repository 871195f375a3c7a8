#!/usr/bin/env bash
# Set up (a fresh virtual environment with the project and its test extras, and the example model
# plugin of tests/plugin_example, which proves the plugin contract from outside the package) and run
# the test suite.
# Usage: bash scripts/test.sh [pytest args...]   (NODEREG_NO_PG=1: no throw-away PostgreSQL)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NODEREG_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]' -e tests/plugin_example
export NODEREG_REQUIRE_PLUGIN_EXAMPLE=1   # installed above: its tests must not skip
# The PostgreSQL half of the tests needs a server. Without one (no PGHOST) and where Debian's
# pg_virtualenv exists, run inside a throw-away cluster, as .ci/run does; .ci/run starts one itself
# (PGHOST is set then, so this does not nest). Otherwise those cases are skipped, and pytest's
# summary says why (-rs in pyproject.toml).
if [ -z "${PGHOST:-}" ] && [ -z "${NODEREG_NO_PG:-}" ] && command -v pg_virtualenv >/dev/null; then
    exec pg_virtualenv -t "$VENV/bin/python" -m pytest "$@"
fi
exec "$VENV/bin/python" -m pytest "$@"
