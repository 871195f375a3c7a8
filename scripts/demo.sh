#!/usr/bin/env bash
# Set up nodereg in .venv, profile this machine into the default registry (a DuckDB file in your
# data directory) with the quick suite, and show what was stored.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NODEREG_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e .
NODE=${1:-$(hostname)}
"$VENV/bin/nodereg" profile "$NODE" --quick
"$VENV/bin/nodereg" nodes
