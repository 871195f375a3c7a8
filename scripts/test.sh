#!/usr/bin/env bash
# Set up (a fresh virtual environment with the project and its test extras, and the example model
# plugin of tests/plugin_example, which proves the plugin contract from outside the package) and run
# the test suite.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NODEREG_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]' -e tests/plugin_example
export NODEREG_REQUIRE_PLUGIN_EXAMPLE=1   # installed above: its tests must not skip
exec "$VENV/bin/python" -m pytest "$@"
