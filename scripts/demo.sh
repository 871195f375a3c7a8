#!/usr/bin/env bash
# Set up nodereg in .venv, profile this machine into the default registry (a DuckDB file in your
# data directory) with the quick suite, and show what was stored.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NODEREG_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# pip says what it does, one line per package (about a minute on a fresh .venv: numpy, pandas,
# scipy, scikit-learn, matplotlib, DuckDB), rather than a silent minute
echo "installing nodereg and its dependencies into $VENV ..."
"$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -e . |
    { grep --line-buffered -E '^(Collecting|Installing|Successfully|Requirement already satisfied: nodereg)' || true; }
NODE=${1:-$(hostname)}
"$VENV/bin/nodereg" profile "$NODE" --quick
"$VENV/bin/nodereg" nodes
cat <<NEXT

Next: put nodereg on your PATH and look around (README.md, "A short tour"):
    source $VENV/bin/activate
    nodereg nodes show "$NODE"
    nodereg report node "$NODE" --out node.html
    nodereg trace --name myapp --out myapp.json -- ./myapp args
    nodereg match myapp.json
Many unstable configurations above? The host was busy; on an idle host re-run
    nodereg profile "$NODE" --wait-idle 600
NEXT
