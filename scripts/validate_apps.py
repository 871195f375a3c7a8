"""Validate `nodereg match` on programs nobody here wrote (docs/validation.md quotes what this prints).

Programs: the NAS Parallel Benchmarks (C++/OpenMP port, built at run time from
../shared/workloads/npb-cpp-omp.tar.gz) and programs from Debian and PyPI (xz and zstd compressing a
generated file, sysbench memory, a numpy matrix product), installed with apt-get when missing.
Node variants: every CPU-subset shape of this host (1, 2, 4, ... CPUs up to all; compact and
scatter placements where they differ; two SMT siblings of one core where the host has SMT), each
profiled (`nodereg profile --quick`) unless the registry has it already.

Each program is traced once on the base variant (`nodereg trace`), measured there (`nodereg run`),
predicted on every variant (`nodereg match`, from the median of the traced and measured base
runs), measured on every other variant, and the table comes from `nodereg accuracy`, with each
program's own run-to-run spread beside its error and, on the base, the traced run against the
measured ones.

    .venv/bin/python scripts/validate_apps.py [--quick] [--programs cg.A,xz,...] [--db URL] [--keep]

Run it on a quiet machine: other load moves the measured times, not the predictions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from platformdirs import user_cache_dir
from rich.console import Console
from rich.table import Table

from registry import cpulist
from registry.db import open_registry
from registry.io.tracefile import read_trace
from registry.profile.placement import placements, read_topology

REPO = Path(__file__).resolve().parent.parent
NPB_ARCHIVE = REPO.parent / "shared" / "workloads" / "npb-cpp-omp.tar.gz"
NPB_DEFAULT = ("cg.A", "mg.A", "ep.A", "ft.A", "is.A", "bt.W", "lu.W", "sp.W")
OTHER_DEFAULT = ("xz", "zstd", "sysbench-memory", "numpy-matmul")
QUICK = ("cg.W", "mg.W", "is.W", "xz", "numpy-matmul")
APT_PACKAGES = {"xz": "xz-utils", "zstd": "zstd", "sysbench": "sysbench"}
INPUT_MB = 16
MEASURED_S = 8.0     # a short program is repeated until one node's runs add up to this (see `repetitions`)
MAX_REPEAT = 9
console = Console(stderr=True, highlight=False)


@dataclass
class Variant:
    name: str
    cpus: tuple[int, ...]


@dataclass
class Program:
    name: str           # app name in the registry
    argv: list[str]
    team: int | None = None   # a fixed team of threads whatever the node's CPUs (xz -T2): told to nodereg


def chosen_variants(prefix: str, sizes: str | None, compact_only: bool) -> list[Variant] | str:
    """The variants of `--sizes` (comma-separated CPU counts; None: the default) and
    `--compact-only`, or the error to print."""
    mine = len(os.sched_getaffinity(0))
    try:
        counts = sorted({int(n) for n in sizes.split(",")}) if sizes else None
    except ValueError:
        return f"--sizes {sizes!r} is not a comma-separated list of CPU counts"
    if counts and not all(1 <= n <= mine for n in counts):
        return f"--sizes {sizes}: each must be between 1 and {mine} (the CPUs this process may use)"
    return variants(prefix, counts, compact_only)


def variants(prefix: str, sizes: list[int] | None = None, compact_only: bool = False) -> list[Variant]:
    """Every CPU-subset shape of the CPUs this process may use: 1, 2, 4, ... and all of them (or the
    `sizes` asked for), in each placement that uses different CPUs (compact only when asked: a
    16-CPU host has 15 shapes, each profiled), and two SMT siblings of one core where cores have them."""
    mine = sorted(os.sched_getaffinity(0))
    topology = read_topology(mine)
    if sizes is None:
        sizes = sorted({n for n in (2 ** k for k in range(len(mine).bit_length())) if n <= len(mine)} | {len(mine)})
    found: dict[tuple[int, ...], str] = {}
    for n in sizes:
        for placement, cpus in placements(topology, n).items():
            if compact_only and placement != "compact":
                continue
            found.setdefault(tuple(sorted(cpus)), f"{prefix}-{n}c" + ("" if placement == "compact" else f"-{placement}"))
    if compact_only:
        return [Variant(name, cpus) for cpus, name in found.items()]
    by_core: dict[tuple[int, int], list[int]] = {}
    for cpu in topology:
        by_core.setdefault((cpu.package, cpu.core), []).append(cpu.cpu)
    siblings = next((sorted(c)[:2] for c in by_core.values() if len(c) >= 2), None)
    if siblings:
        found.setdefault(tuple(siblings), f"{prefix}-2c-smt")
    return [Variant(name, cpus) for cpus, name in found.items()]


def nodereg(db: str, *args: str, quiet: bool = True, team: int | None = None) -> subprocess.CompletedProcess:
    """One nodereg command; the program's own output (and nodereg's tables) go to /dev/null when `quiet`.
    `team`: the program runs that many threads on every node, which nodereg reads from OMP_NUM_THREADS
    (registry/measure/onnode.py: `trace` stores it, `run` records it, `match` keeps the team on a node of
    fewer CPUs, where its threads take turns)."""
    env = None if team is None else {**os.environ, "OMP_NUM_THREADS": str(team)}
    return subprocess.run([sys.executable, "-m", "registry", "--db", db, *args], text=True, env=env,
                          stdout=subprocess.DEVNULL if quiet else subprocess.PIPE, stderr=subprocess.PIPE)


def unusable_model(name: str) -> str | None:
    """Why `match --model NAME` would fail here, or None. Checked before any profile or run: a lent
    machine ran a whole suite's profiles and runs once, then every `match` failed (the checkout was on
    PYTHONPATH but not installed, so no model entry point existed)."""
    from registry.errors import UserError
    from registry.models.plugins import model_class

    try:
        model_class(name)
    except UserError as exc:
        return str(exc)
    return None


def failed(proc: subprocess.CompletedProcess) -> str | None:
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def profiled(db: str) -> set[str]:
    reg = open_registry(db)  # writable: creates a new registry (no nodereg command runs meanwhile)
    with reg.connect() as conn:
        names = {r[0] for r in conn.execute(sa.text(
            "SELECT DISTINCT n.name FROM profiles p JOIN nodes n ON n.node_id = p.node_id WHERE p.status = 'complete'"))}
    reg.close()
    return names


def ensure_tools(names: list[str]) -> None:
    """apt-get install the Debian packages of the programs asked for that are missing (as root only)."""
    wanted = {APT_PACKAGES[t] for t in APT_PACKAGES if shutil.which(t) is None
              and any(n == t or n.startswith(t + "-") for n in names)}
    if not wanted:
        return
    if os.geteuid() != 0:
        console.print(f"note: not root, cannot install {', '.join(sorted(wanted))}: those programs are skipped")
        return
    console.print(f"installing {', '.join(sorted(wanted))} (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-qq", *sorted(wanted)], env=env, check=False,
                   stdout=subprocess.DEVNULL)


def build_npb(work: Path, name: str, archive: Path) -> Path:
    """bin/KERNEL.CLASS of the NPB C++/OpenMP port, built in `work` from the shared archive."""
    kernel, klass = name.split(".")
    root = work / "NPB-OMP"
    if not root.exists():
        if not archive.is_file():
            raise RuntimeError(f"no NPB archive at {archive} (--npb-archive)")
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
    binary = root / "bin" / f"{kernel}.{klass}"
    if not binary.exists():
        proc = subprocess.run(["make", kernel, f"CLASS={klass}"], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0 or not binary.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"make {kernel} CLASS={klass} failed: {tail[0]}")
    return binary


def input_file(work: Path) -> Path:
    """INPUT_MB MiB that compress like ordinary data: text-like runs interleaved with random bytes."""
    path = work / f"input-{INPUT_MB}m.bin"
    if not path.exists():
        import numpy as np

        rng = np.random.default_rng(0)
        words = [b"node", b"registry ", b"trace,", b"phase ", b"1234 ", b"bandwidth\n", b"latency "]
        with open(path, "wb") as f:
            for _ in range(INPUT_MB):
                text = b"".join(words[i] for i in rng.integers(0, len(words), 60_000))[: 768 * 1024]
                f.write(text + rng.bytes(1024 * 1024 - len(text)))
    return path


def program(name: str, work: Path, threads: int, archive: Path) -> Program:
    """The command of `name`. Programs without a thread variable get a fixed worker count (the host's
    CPUs), so that every variant does the same work, and nodereg is told that team (`Program.team`);
    the compressors cut the input into 2 MiB blocks, so that their threads have work to share (xz's
    default block at -3 is 12 MiB)."""
    if name.split(".")[0] in ("cg", "mg", "ep", "ft", "is", "bt", "lu", "sp") and "." in name:
        return Program(f"npb-{name}", [str(build_npb(work, name, archive))])
    if name == "xz":
        return Program("xz", ["xz", f"-T{threads}", "-3", "--block-size=2MiB", "-c", "-k",
                                    str(input_file(work))], threads)
    if name == "zstd":
        return Program("zstd", ["zstd", f"-T{threads}", "-17", "-B2097152", "-c", "-q",
                                      str(input_file(work))], threads)
    if name == "sysbench-memory":
        return Program(name, ["sysbench", "memory", f"--threads={threads}", "--time=0", "--memory-block-size=1M",
                              "--memory-total-size=40G", "--memory-oper=read", "run"], threads)
    if name == "numpy-matmul":
        code = ("import numpy as np\na = np.random.default_rng(0).random((2000, 2000))\n"
                "for _ in range(8):\n    a = a @ a\n    a /= np.abs(a).max()\nprint(float(a.sum()))")
        return Program(name, [sys.executable, "-c", code])
    raise ValueError(f"unknown program {name!r} (NPB: KERNEL.CLASS such as cg.A; others: {', '.join(OTHER_DEFAULT)})")


def runnable(name: str, work: Path, archive: Path) -> Program | None:
    """The program `name` (built or generated in `work`), or None, said why, where it cannot run here."""
    try:
        prog = program(name, work, len(os.sched_getaffinity(0)), archive)
    except (RuntimeError, ValueError) as exc:
        console.print(f"  [skipped] {name}: {exc}")
        return None
    if shutil.which(prog.argv[0]) is None:
        console.print(f"  [skipped] {name}: {prog.argv[0]} is not installed")
        return None
    return prog


def repetitions(least: int, traced_s: float, measured_s: float = MEASURED_S) -> int:
    """Repetitions of each measured run: at least `least`, more for a short program, so that one node's
    runs add up to `measured_s` (its time from the trace on the base, the fastest variant), up to
    MAX_REPEAT. A program of about a second moved by 10-40% between runs on the 2-vCPU guest (NPB CG.A,
    IS.A, BT.W: docs/validation.md), and the median of three such runs is one of them."""
    return max(least, min(MAX_REPEAT, math.ceil(measured_s / max(traced_s, 1e-3))))


def measure(db: str, prog: Program, nodes: list[Variant], repeat: int, args) -> None:
    """`repeat` runs on each node, interleaved (one on each node in turn, `repeat` rounds) rather than
    node after node: the guest's speed drifts by 10-20% over minutes (another tenant of the host),
    and node after node that drift lands in the ratio between the nodes, which is what `match`
    predicts. Interleaved, it moves every node's runs alike."""
    console.print(f"  runs on {', '.join(v.name for v in nodes)}, interleaved ({repeat}x)")
    failing: set[str] = set()
    for _ in range(repeat):
        for v in nodes:
            if v.name in failing:
                continue
            if err := failed(nodereg(db, "run", v.name, "--name", prog.name, "--repeat", "1",
                                     "--timeout", str(args.timeout), "--", *prog.argv, team=prog.team)):
                console.print(f"  run on {v.name} failed: {err}")
                failing.add(v.name)


def validate(prog: Program, db: str, base: Variant, targets: list[Variant], work: Path, args) -> str | None:
    """Trace on the base, measure on every variant (interleaved), then predict; the trace's uid (None: it
    failed). `match` reads the app's runs on its base node only (registry/match/project.py, _BASE_RUNS)
    and projects from the median of the traced run and those; the runs on the other variants are not
    among its inputs, so measuring them before `match` tells it nothing, and lets their runs share the
    rounds with the base's."""
    out = work / f"{prog.name}.trace.json"
    console.print(f"  trace on {base.name}")
    if err := failed(nodereg(db, "trace", "--name", prog.name, "--node", base.name, "--timeout", str(args.timeout),
                             "--out", str(out), "--", *prog.argv, team=prog.team)):
        console.print(f"  [skipped] trace failed: {err}")
        return None
    trace = read_trace(out)
    measure(db, prog, [base, *(v for v in targets if v != base)], repetitions(args.repeat, trace.wall_s, args.measured_s), args)
    names = ",".join(v.name for v in targets)
    if err := failed(nodereg(db, "match", trace.meta["uid"], "--nodes", names, "--model", args.model, "--json",
                             quiet=False)):
        console.print(f"  [skipped] match failed: {err}")
        return None
    return trace.meta["uid"]


def report(db: str, uids: set[str], model: str, cpus_of: dict[str, str]) -> None:
    # the runs on the other variants are measured before `match` (interleaved, see `measure`) and
    # match reads only the base's: they check the predictions all the same
    proc = nodereg(db, "accuracy", "--model", model, "--all-runs", "--json", quiet=False)
    if err := failed(proc):
        console.print(f"error: {err}")
        return
    doc = json.loads(proc.stdout)
    cells = [c for c in doc["cells"] if c["trace_uid"] in uids]
    sets = [s for s in doc["sets"] if s["trace_uid"] in uids]
    table = Table(title=f"nodereg match ({model}) against nodereg run, on {os.uname().nodename}")
    for col in ("program", "node", "CPUs", "predicted s", "measured s", "runs", "error", "own spread",
                "traced vs measured"):
        table.add_column(col, justify="left" if col in ("program", "node", "CPUs") else "right")
    for c in cells:
        # on the base: the base time `match` started from, and the one traced run against the measured ones
        gap = f"{c['traced_gap']:+.1%}" if c["base"] and c["traced_gap"] is not None else ""
        table.add_row(c["app"], c["node"] + (" (base)" if c["base"] else ""), cpus_of.get(c["node"], "?"),
                      f"{c['predicted_s']:.3g}", f"{c['measured_s']:.3g}", str(c["runs"]), f"{c['error']:+.1%}",
                      f"{c['spread']:.1%}", gap)
    out = Console() if sys.stdout.isatty() else Console(width=160)   # a file gets the whole table, not 80 columns
    out.print(table)
    errors = [abs(c["error"]) for c in cells if not c["base"]]
    if not errors:
        console.print("no prediction away from the base node was measured")
        return
    ranked = [s for s in sets if s["top1"] is not None]
    rhos = [s["spearman"] for s in ranked if s["spearman"] is not None]
    lines = [f"median |error| {statistics.median(errors):.1%}, worst {max(errors):.1%} over {len(errors)} "
             f"predictions of {len({c['app'] for c in cells})} programs (targets: <= 10%, <= 25%)",
             f"median own spread {statistics.median(c['spread'] for c in cells if not c['base']):.1%}"]
    gaps = [abs(c["traced_gap"]) for c in cells if c["base"] and c["traced_gap"] is not None]
    if gaps:
        lines.append(f"base: median |traced - measured| {statistics.median(gaps):.1%} (one traced run's own noise)")
    if ranked:
        lines.append(f"ranking: median Spearman {statistics.median(rhos):.2f}, " if rhos else "ranking: ")
        lines[-1] += (f"top-1 {sum(s['top1'] for s in ranked) / len(ranked):.0%}, "
                      f"mean regret {statistics.mean(s['regret'] for s in ranked):.1%} over {len(ranked)} programs")
    out.print("\n".join(lines), highlight=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", help="comma-separated subset: NPB KERNEL.CLASS (cg.A, is.S, ...) and "
                                           f"{', '.join(OTHER_DEFAULT)}")
    parser.add_argument("--quick", action="store_true", help=f"fewer programs ({', '.join(QUICK)}) and 2 repetitions")
    parser.add_argument("--db", help="registry URL (default: a DuckDB file in the work directory). Its profiled "
                                     "variants are reused; so are runs of the same programs stored earlier")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory (builds, inputs, the default registry) in the user cache, "
                             "and reuse it next time")
    parser.add_argument("--repeat", type=int, help="least repetitions of each measured run (default 3; --quick 2); "
                                                   f"a short program gets more, up to {MAX_REPEAT}, so that one "
                                                   f"node's runs add up to {MEASURED_S:g} s")
    parser.add_argument("--model", default="similarity", help="projection model of `nodereg match`")
    parser.add_argument("--base", help="base variant to trace on (default: the one with every CPU)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed to one run")
    parser.add_argument("--npb-archive", type=Path, default=NPB_ARCHIVE, help=f"default: {NPB_ARCHIVE}")
    parser.add_argument("--prefix", default="val", help="prefix of the variants' node names")
    parser.add_argument("--measured-s", type=float, default=MEASURED_S,
                        help=f"a short program is repeated until its runs on the base add up to this (default "
                             f"{MEASURED_S:g}; a quiet many-core host needs fewer than this guest)")
    parser.add_argument("--sizes", help="comma-separated CPU counts of the variants (default: 1, 2, 4, ... "
                                        "and all); each must be at most the CPUs this process may use")
    parser.add_argument("--compact-only", action="store_true",
                        help="only the compact placement of each size (no scatter, no SMT pair)")
    args = parser.parse_args()
    args.repeat = args.repeat or (2 if args.quick else 3)
    if err := unusable_model(args.model):
        console.print(f"error: {err}")
        return 2
    names = [n.strip() for n in args.programs.split(",") if n.strip()] if args.programs else \
        list(QUICK if args.quick else NPB_DEFAULT + OTHER_DEFAULT)
    if args.keep:
        work = Path(user_cache_dir("nodereg")) / "validate"
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="nodereg-validate-"))
    db = args.db or f"duckdb:///{work / 'validate.duckdb'}"
    try:
        shapes = chosen_variants(args.prefix, args.sizes, args.compact_only)
        if isinstance(shapes, str):
            console.print(f"error: {shapes}")
            return 2
        cpus_of = {v.name: cpulist.format(v.cpus) for v in shapes}
        base = next((v for v in shapes if v.name == args.base), None) if args.base else max(shapes, key=lambda v: len(v.cpus))
        if base is None:
            console.print(f"error: --base {args.base} is none of the variants: {', '.join(cpus_of)}")
            return 2
        console.print(f"work directory {work}; registry {db}")
        console.print("variants: " + ", ".join(f"{v.name} (CPUs {cpus_of[v.name]})" for v in shapes))
        done = profiled(db)
        for v in shapes:
            if v.name not in done:
                console.print(f"profiling {v.name} (CPUs {cpus_of[v.name]}, --quick)")
                if err := failed(nodereg(db, "profile", v.name, "--cpus", cpus_of[v.name], "--quick")):
                    console.print(f"error: profiling {v.name} failed: {err}")
                    return 1
        ensure_tools(names)
        uids = set()
        for i, name in enumerate(names, 1):
            console.print(f"[{i}/{len(names)}] {name}")
            prog = runnable(name, work, args.npb_archive)
            if prog is None:
                continue
            if uid := validate(prog, db, base, shapes, work, args):
                uids.add(uid)
        if uids:
            report(db, uids, args.model, cpus_of)
        return 0 if uids else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
