"""Corredor (2011) on programs traced here: `match --model corredor` vs the default model, two CPUs -> one.

Two nodes of this host are profiled (`--mode`, default: the default sweep, which has the thesis's
kernel family; `quick` has two of its kernels at one size per cache level): `two` (CPUs 0-1, the
base) and `one` (CPU 0). Each program is traced on `two` with the stream probe (`nodereg trace
--streams`) and measured on both nodes (`--runs` plain runs pinned to CPUs 0-1 and to CPU 0 in turn,
against the guest's drift; on CPU 0 OpenMP uses one thread; medians); the runs on `two` are stored
(`nodereg runs add`), so that `match` starts from the median of the traced and the measured runs, as
it does for any app with runs on its base node (one traced run here was 60% slower than the plain
ones). Then the models predict its time on `one`. Programs: tests/programs/matmul.c and nbody.c, and
NPB kernels class W (BT by default; SP, LU, CG, MG, FT, EP, IS by name) from the shared workloads
tarball (built as scripts/validate_apps.py builds it; class S runs 0.1-0.3 s, mostly OpenMP start-
up). The inputs run about a second unprobed, so that start-up and scheduling noise do not dominate;
the probe (our valgrind tool) runs them 15-30x slower, BT W takes minutes. `--small` takes inputs of
10-30 ms instead, to check the pipeline quickly (its figures mean nothing). Printed per program: the
probe and its slowdown, the streams found, the winning config and index (or the fallback), the
measured times and the prediction and signed error on `one` of: corredor as `nodereg match` runs it
(estimate=auto: the thesis's estimate where the winner's time per iteration scores in the zones,
else the ratio form; a phase no config survives the discards for is projected by the default model
from its signature), corredor with `--option estimate=ratio`, the thesis's method alone (`--option
estimate=thesis --option unmatched=remainder`: such a phase joins the unprojected rest) and the
default model; and the share of the time corredor's own winners project. On a shared, busy machine
the figures are indicative.

usage: python scripts/eval_corredor_probe.py [--db duckdb:///tmp/eval.duckdb] [--programs matmul,nbody,bt]
                                             [--mode default|quick] [--small] [--skip-profile] [--runs 3]
                                             [--npb PATH.tar.gz]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from validate_apps import NPB_ARCHIVE, build_npb

ROOT = Path(__file__).resolve().parent.parent
# about a second on two CPUs (bt: NPB class); --small: 10-30 ms
NPB = ("bt", "sp", "lu", "cg", "mg", "ft", "ep", "is")   # NPB kernels, built from the shared archive
INPUTS = {"matmul": ["1000"], "nbody": ["8000", "2"], **{k: ["W"] for k in NPB}}
SMALL = {"matmul": ["200"], "nbody": ["1000", "2"], **{k: ["S"] for k in NPB}}


def nodereg(db: str, *args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "registry", "--db", db, *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"nodereg {' '.join(args)} failed: {res.stderr.strip().splitlines()[-1:]}")
    return res.stdout


def build(name: str, inputs: list[str], tmp: Path, npb: Path) -> list[str]:
    if name in NPB:
        return [str(build_npb(tmp, f"{name}.{inputs[0]}", npb))]
    exe = tmp / name
    subprocess.run(["cc", "-O2", "-fopenmp", "-fno-tree-vectorize", str(ROOT / "tests" / "programs" / f"{name}.c"),
                    "-o", str(exe), "-lm"], check=True)
    return [str(exe), *inputs]


def measured(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    """`runs` plain runs on CPUs 0-1 and on CPU 0, alternating: the guest's speed drifts 10-20% over
    minutes, which a block of runs on one node and then a block on the other would turn into error."""
    times: dict[str, list[float]] = {"0,1": [], "0": []}
    for _ in range(runs):
        for cpus, out in times.items():
            start = time.monotonic()
            subprocess.run(["taskset", "-c", cpus, *argv], check=True, stdout=subprocess.DEVNULL)
            out.append(time.monotonic() - start)
    return times["0,1"], times["0"]


def predicted(db: str, app: str, model: str, *options: str) -> tuple[float, dict]:
    flags = [f for o in options for f in ("--option", o)]
    out = json.loads(nodereg(db, "match", app, "--model", model, *flags, "--nodes", "one,two", "--json", "--no-store"))
    by_node = {p["node"]: p["predicted_s"] for p in out["predictions"]}
    return by_node["one"], out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="registry URL (default: a temporary DuckDB file)")
    ap.add_argument("--programs", default="matmul,nbody,bt",
                    help=f"matmul, nbody and NPB kernels ({', '.join(NPB)}; class W, --small: S)")
    ap.add_argument("--skip-profile", action="store_true", help="the registry already has `one` and `two`")
    ap.add_argument("--mode", choices=("default", "quick"), default="default", help="the profiles' sweep")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--npb", type=Path, default=NPB_ARCHIVE)
    ap.add_argument("--small", action="store_true", help="10-30 ms inputs: a quick check of the pipeline")
    args = ap.parse_args()
    programs = args.programs.split(",")
    unknown = [p for p in programs if p not in INPUTS]
    if unknown:
        raise SystemExit(f"unknown program(s) {', '.join(unknown)}: choose from {', '.join(INPUTS)}")
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"duckdb:///{tmp}/eval.duckdb"
        if not args.skip_profile:
            mode = ["--quick"] if args.mode == "quick" else []
            nodereg(db, "profile", "two", *mode, "--cpus", "0-1")
            nodereg(db, "profile", "one", *mode, "--cpus", "0")
        rows = []
        for name in programs:
            argv = build(name, (SMALL if args.small else INPUTS)[name], Path(tmp), args.npb)
            try:
                out = nodereg(db, "trace", "--node", "two", "--name", name, "--streams", "--json", "--", *argv)
            except SystemExit as exc:   # e.g. a phase with more streams than the index combines (NPB SP)
                print(f"{name}: left out: {exc}")
                continue
            trace = json.loads(out[out.index("{"):])   # after what the program itself printed
            streams = [(p["name"], p["streams"]) for p in trace["phases"] if p.get("streams")]
            probe = trace["meta"]["streams"]   # a failed probe: `trace` failed above
            runs_two, runs_one = measured(argv, args.runs)
            for t in runs_two:   # match starts from the median of the traced and the measured runs on the base
                nodereg(db, "runs", "add", name, "two", "--threads", "2", "--time", f"{t:.6f}")
            real_two, real_one = statistics.median(runs_two), statistics.median(runs_one)
            corredor_one, doc = predicted(db, name, "corredor")
            ratio_one, _ = predicted(db, name, "corredor", "estimate=ratio")
            thesis_one, _ = predicted(db, name, "corredor", "estimate=thesis", "unmatched=remainder")
            default_one, _ = predicted(db, name, "similarity")
            own = sum(p["time_s"] for p in doc["phases"] if p["projected_by"] == "corredor") / doc["base_time_s"]
            rows.append((name, real_two, real_one, own, corredor_one, ratio_one, thesis_one, default_one))
            winners = [(p["name"], p["projected_by"], p["matches"][:1]) for p in doc["phases"]]
            print(f"{name} ({' '.join(argv[1:]) or Path(argv[0]).name}): probe {probe['probe']} {probe['probe_s']:.1f} s "
                  f"= {probe['probe_s'] / probe['program_s']:.0f}x the traced run ({probe['program_s']:.2f} s); "
                  f"streams {streams}; projected by {winners}")
        print(f"\n{'program':<8} {'two_s':>7} {'one_s':>7} {'own':>5} {'corredor':>9} {'err%':>6} {'ratio':>8} "
              f"{'err%':>6} {'thesis':>8} {'err%':>6} {'default':>8} {'err%':>6}")
        for name, two, one, own, *models in rows:
            print(f"{name:<8} {two:7.3f} {one:7.3f} {own:5.0%} "
                  + " ".join(f"{p:8.3f} {(p - one) / one * 100:+6.1f}" for p in models))


if __name__ == "__main__":
    main()
