"""Corredor (2011) on programs traced here: `match --model corredor` vs the default model, two CPUs -> one.

Two nodes of this host are profiled (`--quick`): `two` (CPUs 0-1, the base) and `one` (CPU 0).
Each program is traced on `two` with the stream probe (`nodereg trace --streams`), then both
models predict its time on `one`, which is measured (`--runs` plain runs pinned to CPU 0, median;
OpenMP then uses one thread). Programs: tests/programs/matmul.c and nbody.c, and NPB BT class S
from the shared workloads tarball (built with its own Makefile; its probe takes minutes).
Printed per program: the streams found, the winning config and index, the measured times and each
model's prediction and error on `one`. On a shared, busy machine the figures are indicative.

usage: python scripts/eval_corredor_probe.py [--db duckdb:///tmp/eval.duckdb] [--programs matmul,nbody]
                                             [--skip-profile] [--runs 3] [--npb PATH.tar.gz]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NPB = ROOT.parent.parent / "shared" / "workloads" / "npb-cpp-omp.tar.gz"
INPUTS = {"matmul": ["200"], "nbody": ["1000", "2"], "bt": []}   # small: the probe runs ~500x slower


def nodereg(db: str, *args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "registry", "--db", db, *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"nodereg {' '.join(args)} failed: {res.stderr.strip().splitlines()[-1:]}")
    return res.stdout


def build(name: str, tmp: Path, npb: Path) -> list[str]:
    if name == "bt":
        with tarfile.open(npb) as tar:
            tar.extractall(tmp, filter="data")
        subprocess.run(["make", "bt", "CLASS=S"], cwd=tmp / "NPB-OMP", check=True, capture_output=True)
        return [str(tmp / "NPB-OMP" / "bin" / "bt.S")]
    exe = tmp / name
    subprocess.run(["cc", "-O2", "-fopenmp", "-fno-tree-vectorize", str(ROOT / "tests" / "programs" / f"{name}.c"),
                    "-o", str(exe), "-lm"], check=True)
    return [str(exe), *INPUTS[name]]


def measured(argv: list[str], cpus: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run(["taskset", "-c", cpus, *argv], check=True, stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - start)
    return statistics.median(times)


def predicted(db: str, app: str, model: str) -> tuple[float, dict]:
    out = json.loads(nodereg(db, "match", app, "--model", model, "--nodes", "one,two", "--json", "--no-store"))
    by_node = {p["node"]: p["predicted_s"] for p in out["predictions"]}
    return by_node["one"], out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="registry URL (default: a temporary DuckDB file)")
    ap.add_argument("--programs", default="matmul,nbody,bt")
    ap.add_argument("--skip-profile", action="store_true", help="the registry already has `one` and `two`")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--npb", type=Path, default=NPB)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"duckdb:///{tmp}/eval.duckdb"
        if not args.skip_profile:
            nodereg(db, "profile", "two", "--quick", "--cpus", "0-1")
            nodereg(db, "profile", "one", "--quick", "--cpus", "0")
        rows = []
        for name in args.programs.split(","):
            argv = build(name, Path(tmp), args.npb)
            out = nodereg(db, "trace", "--node", "two", "--name", name, "--streams", "--json", "--", *argv)
            trace = json.loads(out[out.index("{"):])   # after what the program itself printed
            streams = [(p["name"], p["streams"]) for p in trace["phases"] if p.get("streams")]
            real_two, real_one = measured(argv, "0,1", args.runs), measured(argv, "0", args.runs)
            corredor_one, doc = predicted(db, name, "corredor")
            default_one, _ = predicted(db, name, "similarity")
            best = doc["phases"][0]["matches"][:1]
            rows.append((name, real_two, real_one, corredor_one, default_one))
            print(f"{name}: probe {trace['meta']['streams'].get('probe_s', 0):.0f} s; streams {streams}; "
                  f"winner {best}")
        print(f"\n{'program':<8} {'two_s':>7} {'one_s':>7} {'corredor':>9} {'err%':>6} {'default':>8} {'err%':>6}")
        for name, two, one, corr, dflt in rows:
            print(f"{name:<8} {two:7.3f} {one:7.3f} {corr:9.3f} {abs(corr - one) / one * 100:6.1f} {dflt:8.3f} "
                  f"{abs(dflt - one) / one * 100:6.1f}")


if __name__ == "__main__":
    main()
