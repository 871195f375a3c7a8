#!/usr/bin/env bash
# Two nodes made of this host (CPU 0 alone, CPUs 0-1), three applications traced on the two-core
# node, predicted for the one-core node by `nodereg match`, then run there for real.
# Prints predicted vs measured per application; the figures go to docs/match.md.
#
# usage: bash scripts/demo_two_nodes.sh [--mode default|quick] [--repeat N] [--keep]
# A registry in a temporary directory is used (your own registry is not touched; --keep leaves
# that directory, with the traces and match answers, for a closer look); the machine
# should be otherwise idle: parallel programs are very sensitive to other load.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=default      # what `nodereg profile` does without options, as the issue asks
REPEAT=5
KEEP=
while [ $# -gt 0 ]; do
    case "$1" in
        --mode) MODE=$2; shift 2 ;;
        --repeat) REPEAT=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
NODEREG=${NODEREG:-$(command -v nodereg || echo .venv/bin/nodereg)}
PY=$(dirname "$NODEREG")/python
WORK=$(mktemp -d)
if [ -n "$KEEP" ]; then echo "== working directory (kept): $WORK" >&2; else trap 'rm -rf "$WORK"' EXIT; fi
export NODEREG_DB="duckdb:///$WORK/demo.duckdb"

for prog in mem_omp cpu_omp serial; do
    cc -O2 -fopenmp "scripts/demo/$prog.c" -o "$WORK/$prog"
done
declare -A ARGS=([mem_omp]=200 [cpu_omp]=16000 [serial]=1200)

echo "== profiling node 'one' (CPU 0) and node 'two' (CPUs 0,1), mode $MODE" >&2
MODEFLAG=(); [ "$MODE" = default ] || MODEFLAG=("--$MODE")
"$NODEREG" profile one --cpus 0 "${MODEFLAG[@]}" >/dev/null
"$NODEREG" profile two --cpus 0,1 "${MODEFLAG[@]}" >/dev/null

wall() {  # seconds a command takes (its output discarded)
    "$PY" -c 'import subprocess, sys, time
t = time.perf_counter(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(f"{time.perf_counter() - t:.4f}")' "$@"
}
for prog in mem_omp cpu_omp serial; do
    echo "== $prog: trace on 'two', run there $REPEAT times, match, then run on 'one' $REPEAT times" >&2
    "$NODEREG" trace --name "$prog" --node two --out "$WORK/$prog.trace.json" -- "$WORK/$prog" "${ARGS[$prog]}" >/dev/null
    for _ in $(seq "$REPEAT"); do   # the base node's own runs: match uses their median as the base time
        "$NODEREG" runs add --new "$prog" two --threads 2 --time "$(wall taskset -c 0,1 "$WORK/$prog" "${ARGS[$prog]}")" >/dev/null
    done
    "$NODEREG" match "$WORK/$prog.trace.json" --json > "$WORK/$prog.match.json"   # before any run on 'one'
    for _ in $(seq "$REPEAT"); do
        "$NODEREG" runs add --new "$prog" one --threads 1 --time "$(wall taskset -c 0 "$WORK/$prog" "${ARGS[$prog]}")" >/dev/null
    done
done

"$PY" - "$WORK" <<'PYEOF'
import json, subprocess, sys
work = sys.argv[1]
rows = json.loads(subprocess.run([sys.executable, "-m", "registry", "sql",
                                  "SELECT app, node, median_s, min_s, max_s FROM v_runs", "-f", "json"],
                                 capture_output=True, text=True, check=True).stdout)
measured = {(r["app"], r["node"]): r["median_s"] for r in rows}
spread = {(r["app"], r["node"]): f"{r['min_s']:.2f}-{r['max_s']:.2f}" for r in rows}   # the runs' own spread
print(f"{'app':10s} {'node':5s} {'base s':>9s} {'predicted s':>12s} {'interval s':>17s} {'measured s':>11s} "
      f"{'its runs s':>11s} {'error':>7s}")
errors = []
for prog in ("mem_omp", "cpu_omp", "serial"):
    m = json.load(open(f"{work}/{prog}.match.json"))
    for p in m["predictions"]:
        real = measured.get((prog, p["node"]))
        err = (p["predicted_s"] - real) / real if real else float("nan")
        if p["node"] == "one":
            errors.append(abs(err))
        print(f"{prog:10s} {p['node']:5s} {m['base_time_s']:9.2f} {p['predicted_s']:12.2f} "
              f"{p['low_s']:8.2f}-{p['high_s']:<8.2f} {real:11.2f} {spread.get((prog, p['node']), '-'):>11s} {err:+7.1%}")
print(f"max |error| on the one-core node: {max(errors):.1%}")
PYEOF
