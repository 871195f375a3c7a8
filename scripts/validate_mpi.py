"""Validate the MPI side of `nodereg` (issue #31 item 4) on MPI programs nobody here wrote.

Programs, from Debian's packages (installed with apt-get when missing and this runs as root):
- LAMMPS (package lammps, inputs from lammps-examples): the 3-d Lennard-Jones melt
  (examples/melt/in.melt) and the 2-d crack (examples/crack/in.crack), run as they ship.
  LAMMPS reports its own MPI task timing breakdown: its `Comm` share is compared with the share
  the trace measured (target: within 5 points). Ranks only: Debian builds it without OpenMP.
- HPC Challenge (package hpcc), with its example input at N = 1500 (HPL, DGEMM, STREAM, PTRANS,
  RandomAccess, FFT, b_eff); the grid P x Q = 1 x ranks. Its BLAS is OpenBLAS's OpenMP build
  (libopenblas0-openmp, found through LD_LIBRARY_PATH whatever the system's libblas.so.3
  alternative), so it runs threads per rank (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS) in HPL and
  DGEMM, its other tests on one thread. --no-hpcc leaves it out. It runs without Open MPI's
  mpi_yield_when_idle: with it, its MPIRandomAccess, which polls for messages, took 2.6-5.9 s
  instead of 0.2-0.6 s, and the whole run at 1 rank 13 s instead of 2.4 s (a rank that yields on
  every poll, measured here).
- NWChem (package nwchem-openmpi; Fortran over Global Arrays on MPI): a B3LYP energy of one water
  molecule in the cc-pVTZ basis, the textbook input of its documentation (the package ships no
  example inputs; the script writes this one), about 0.5 s a run here; threads per rank in its BLAS
  (OpenBLAS, as hpcc). Its runs leave Open MPI's mpi_yield_when_idle unset: with it set, Global
  Arrays' one-sided progress never completed (Open MPI 4.1.4: a 3.6 s run still waiting after
  60 s, with or without the trace).
- GROMACS (package gromacs, its MPI build gmx_mpi: MPI ranks x OpenMP threads, `-ntomp`): 1,000
  steps of molecular dynamics of a 3 nm box of SPC water (884 molecules, PME), built with its own
  tools from the water box and force field it ships (gmx solvate, gmx grompp). It reports its own
  time accounting: its communication rows are compared with the trace's share as LAMMPS's are.
Not used: mpi4py programs (Debian's python3-mpi4py ships no demo programs; its demos are only in
the source distribution), the NAS Parallel Benchmarks' MPI version (no Debian package; its Fortran
sources are not available here).

On this node: a quick profile and the MPI kernels (`nodereg profile NODE --quick`, `--kernels
mpi --quick`, skipped when the registry has them), then per program: measured wall times at every
ranks x threads configuration that fits the node (powers of two, the same grid `match --configs`
chooses from; threads only for the programs that run them), --reps each, median; one trace at the
most ranks and 1 thread (`nodereg trace -- mpirun -np R ...`); a prediction of every
configuration from it (`nodereg match APP --ranks R --threads T --nodes NODE`) and the recommended
one (`--configs`, with `--threads` the most threads per rank measured). A program that runs threads
is traced first at 1 rank x its most threads as well: the OpenMP regions of that trace tell
`match` how much of a rank's computation its threads divide (a threaded BLAS enters none at one
thread per rank). With --base-runs, the plain runs at the traced configuration are stored as the
base node's measured runs first (the base time is then their median with the traced run's, as a
user who measured some runs gets). Printed: predicted vs measured, the CPUs each run kept busy (its CPU time over
its wall time: threads that run show as more than one per rank), the errors and their median, the
recommended configuration against the measured best, and the MPI shares. A configuration the
program does not run (a program may refuse a rank count: GROMACS when no domain decomposition of
its box fits that many ranks) or that outlasts --timeout (every rank killed) is left out and listed
with its reason; the trace is then at the most ranks that ran.

    .venv/bin/python scripts/validate_mpi.py [--db PATH] [--reps 3] [--no-hpcc] [--timeout 600]
        [--programs melt,crack,hpcc,nwchem,gromacs]

Run it on a quiet machine: on a shared one, ranks that wait for a descheduled neighbour inflate
both the communication share and the wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from registry.match.configs import candidates
from registry.measure.runner import kill_tree
from registry.microbench import mpi
from registry.profile.sweep import QUICK_KERNELS

EXAMPLES = Path("/usr/share/lammps/examples")
HPCC_INPUT = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
OPENBLAS = Path("/usr/lib/x86_64-linux-gnu/openblas-openmp")     # libblas.so.3 and libopenblas.so.0 of its OpenMP build
GROMACS_TOP = Path("/usr/share/gromacs/top")
# NWChem's input (no example ships with the package): one water molecule, B3LYP, cc-pVTZ
NWCHEM_INPUT = """start h2o
title "water B3LYP/cc-pVTZ"
geometry units angstrom
  O  0.000  0.000  0.117
  H  0.000  0.757 -0.467
  H  0.000 -0.757 -0.467
end
basis
  * library cc-pvtz
end
dft
  xc b3lyp
end
task dft energy
"""
# GROMACS: SPC water in a 3 nm box (its own spc216 box, OPLS-AA), PME electrostatics, 1,000 steps of 2 fs
GROMACS_MDP = """integrator = md
dt = 0.002
nsteps = 1000
cutoff-scheme = Verlet
coulombtype = PME
rcoulomb = 1.0
rvdw = 1.0
constraints = h-bonds
tcoupl = v-rescale
tc-grps = System
tau-t = 0.1
ref-t = 300
nstenergy = 500
nstlog = 500
"""
# GROMACS's time accounting rows that are communication (or waiting for it) between ranks
GROMACS_COMM_ROWS = ("DD comm. load", "DD comm. bounds", "Comm. coord.", "Wait + Comm. F", "Comm. energies",
                     "PME redist. X/F", "PME 3D-FFT Comm.")
NODEREG = [sys.executable, "-m", "registry"]
BEST_WITHIN = 0.05        # the target: the recommended configuration within 5% of the measured best


@dataclass
class Program:
    name: str
    tool: str
    packages: tuple[str, ...]
    needs: tuple[Path, ...] = ()    # files the packages bring besides the tool
    yields: bool = True             # may run with mpi_yield_when_idle (ranks give the CPU up while they wait)
    threaded: bool = False          # runs threads per rank (OpenMP, or its BLAS: OpenBLAS's OpenMP build)

    def argv(self, ranks: int, threads: int, work: Path) -> list[str]:
        """The program's command line (after the launcher), its input written into `work`."""
        if self.tool == "lmp":
            example = {"melt": "melt/in.melt", "crack": "crack/in.crack"}[self.name]
            return ["lmp", "-in", str(EXAMPLES / example), "-log", str(self._log(ranks, threads, work)),
                    "-screen", "none"]
        if self.tool == "hpcc":
            _hpcc_input(ranks, work)
            return ["hpcc"]
        if self.tool == "gmx_mpi":
            return ["gmx_mpi", "-quiet", "mdrun", "-s", "water.tpr", "-ntomp", str(threads), "-nb", "cpu",
                    "-pin", "off", "-g", str(self._log(ranks, threads, work))]
        return [self.tool, "h2o.nw"]

    def prepare(self, work: Path) -> None:
        """The input files every configuration's run reads (hpcc's, which names the rank count, is
        written by argv)."""
        if self.tool == "gmx_mpi":
            _gromacs_input(work)
        elif self.tool == "nwchem.openmpi":
            (work / "h2o.nw").write_text(NWCHEM_INPUT)

    def environment(self, threads: int) -> dict[str, str]:
        """How the thread count reaches the program: OpenMP's and OpenBLAS's variables (1 for a
        program without threads, as for the others), and OpenBLAS's OpenMP build on the library path."""
        env = {"OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
        if self.tool == "gmx_mpi":
            env["GMX_MAXBACKUP"] = "-1"          # no numbered backups of its output files
        if OPENBLAS in self.needs:
            env["LD_LIBRARY_PATH"] = ":".join(p for p in (str(OPENBLAS), os.environ.get("LD_LIBRARY_PATH")) if p)
        return env

    def installed(self) -> bool:
        return bool(shutil.which(self.tool)) and all(n.exists() for n in self.needs)

    def configurations(self, cpus: int) -> list[tuple[int, int]]:
        """(ranks, threads) measured: the grid `match --configs` chooses from on a node of `cpus` CPUs."""
        return candidates(cpus, cpus if self.threaded else 1)

    def own_comm_share(self, ranks: int, threads: int, work: Path) -> float | None:
        """The program's own figure of its MPI share, where it reports one: LAMMPS's `Comm` %total,
        GROMACS's communication rows of its time accounting."""
        log = self._log(ranks, threads, work)
        if not log.exists():
            return None
        if self.tool == "lmp":
            found = re.search(r"^Comm\s*\|.*\|\s*([\d.]+)\s*$", log.read_text(), re.M)
            return float(found.group(1)) / 100 if found else None
        return gromacs_comm_share(log.read_text())

    def _log(self, ranks: int, threads: int, work: Path) -> Path:
        return work / f"{self.name}.{ranks}x{threads}.log"


PROGRAMS = {p.name: p for p in (
    Program("melt", "lmp", ("lammps", "lammps-examples"), (EXAMPLES,)),
    Program("crack", "lmp", ("lammps", "lammps-examples"), (EXAMPLES,)),
    Program("hpcc", "hpcc", ("hpcc", "libopenblas0-openmp"), (HPCC_INPUT, OPENBLAS), yields=False, threaded=True),
    Program("nwchem", "nwchem.openmpi", ("nwchem-openmpi", "libopenblas0-openmp"), (OPENBLAS,), yields=False,
            threaded=True),
    Program("gromacs", "gmx_mpi", ("gromacs",), (GROMACS_TOP,), threaded=True))}


def gromacs_comm_share(log: str) -> float | None:
    """The share of GROMACS's wall time in its communication rows (the last column of its "R E A L
    C Y C L E" table, % of the total; None: no such table, e.g. a run on one rank has no rows)."""
    table = log.split("R E A L   C Y C L E", 1)
    if len(table) < 2:
        return None
    rows = [re.split(r"\s{2,}", line.strip()) for line in table[1].splitlines()]
    shares = [float(cells[-1]) for cells in rows if cells[0] in GROMACS_COMM_ROWS]
    return sum(shares) / 100 if shares else None


def _hpcc_input(ranks: int, work: Path) -> None:
    """hpccinf.txt (read from the working directory) from the packaged example: N = 1500, P x Q = 1 x ranks."""
    lines = HPCC_INPUT.read_text().splitlines()
    lines[5] = "1500         Ns"
    lines[10] = "1            Ps"
    lines[11] = f"{ranks}            Qs"
    (work / "hpccinf.txt").write_text("\n".join(lines) + "\n")


def _gromacs_input(work: Path) -> None:
    """water.tpr in `work`, built with GROMACS's own serial tools from the water box it ships."""
    env = {**os.environ, "GMX_MAXBACKUP": "-1"}
    solvate = subprocess.run(["gmx", "-quiet", "solvate", "-cs", "spc216.gro", "-box", "3", "3", "3", "-o",
                              "water.gro"], cwd=work, env=env, capture_output=True, text=True)
    if solvate.returncode != 0:
        raise SystemExit(f"error: gmx solvate failed: {solvate.stderr.strip()[-300:]}")
    molecules = (len((work / "water.gro").read_text().splitlines()) - 3) // 3
    (work / "topol.top").write_text('#include "oplsaa.ff/forcefield.itp"\n#include "oplsaa.ff/spc.itp"\n'
                                    f"[ system ]\nwater\n[ molecules ]\nSOL {molecules}\n")
    (work / "md.mdp").write_text(GROMACS_MDP)
    grompp = subprocess.run(["gmx", "-quiet", "grompp", "-f", "md.mdp", "-c", "water.gro", "-p", "topol.top", "-o",
                             "water.tpr"], cwd=work, env=env, capture_output=True, text=True)
    if grompp.returncode != 0:
        raise SystemExit(f"error: gmx grompp failed: {grompp.stderr.strip()[-300:]}")


def ensure_installed(programs: list[Program]) -> list[Program]:
    """The programs whose tools are here, installing missing ones with apt-get when root."""
    usable = []
    for p in programs:
        if not p.installed() and os.geteuid() == 0:
            print(f"installing {' '.join(p.packages)} (apt-get)", flush=True)
            subprocess.run(["apt-get", "install", "-y", *p.packages], capture_output=True, check=False)
        if p.installed():
            usable.append(p)
        else:
            print(f"skipped {p.name}: {p.tool} is not installed and could not be ({' '.join(p.packages)})")
    return usable


def nodereg(*args, env: dict, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    res = subprocess.run([*NODEREG, *map(str, args)], env=env, capture_output=True, text=True, cwd=cwd)
    if check and res.returncode != 0:
        raise SystemExit(f"error: nodereg {' '.join(map(str, args))} failed: {res.stderr.strip()[-400:]}")
    return res


class RunFailed(Exception):
    """A configuration the program did not run: it failed (GROMACS refuses a rank count when no
    domain decomposition of its box fits) or outlasted --timeout; the others are still measured."""


def measure(cmd: list[str], env: dict, cwd: Path, timeout_s: float) -> tuple[float, float]:
    """(wall seconds, CPU seconds of every process of the run: ranks and their threads)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                text=True, start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:   # every rank goes, not only the launcher
            kill_tree(proc.pid)
            proc.wait()
            raise RunFailed(f"did not finish within {timeout_s:g} s (--timeout): every rank was killed") from None
        wall = time.monotonic() - start
        err.seek(0)
        stderr = err.read()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not set(ln.strip()) <= set("-*=")]
        raise RunFailed(f"exit status {proc.returncode}: {' '.join(lines[-3:])[-300:] or 'no message'}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


@dataclass
class Row:
    program: str
    ranks: int
    threads: int
    measured_s: float
    cpus_busy: float
    predicted_s: float
    traced: bool
    share: float | None = None
    own: float | None = None


def validate(p: Program, node: str, node_mpi, base_env: dict, work: Path, reps: int,
             base_runs: bool = False, timeout_s: float = 600, half_ranks: bool = False) -> tuple[list[Row], dict]:
    """One program: every configuration measured and predicted, and the recommended one. A
    configuration the program does not run is left out, with its reason (RunFailed). `half_ranks`:
    also traced at half the traced ranks (first: the base trace stays the latest), so that `match`
    fits the share of the computation more ranks do not divide (registry.match.comm.RankShare)."""
    env = {**base_env, **({"OMPI_MCA_mpi_yield_when_idle": "1"} if p.yields else {})}
    grid = p.configurations(os.cpu_count() or 1)
    p.prepare(work)
    measured, samples, failed = {}, {}, {}
    for r, t in grid:
        cmd = [*mpi.launcher(node_mpi, r), *p.argv(r, t, work)]
        try:
            runs = [measure(cmd, {**env, **p.environment(t)}, work, timeout_s) for _ in range(reps)]
        except RunFailed as why:
            failed[(r, t)] = str(why)
            print(f"{p.name}: {r} x {t} failed, left out: {why}", flush=True)
            continue
        samples[(r, t)] = [w for w, _ in runs]
        measured[(r, t)] = (statistics.median(w for w, _ in runs), statistics.median(c / w for w, c in runs))
        print(f"{p.name}: {r} x {t} measured {measured[(r, t)][0]:.3g} s, {measured[(r, t)][1]:.2f} CPUs busy",
              flush=True)
    if (1, 1) not in measured:
        raise SystemExit(f"error: {p.name} did not run on 1 rank: {failed[(1, 1)]}")
    # the most ranks that ran (a program may refuse the most: GROMACS's smallest domain), at 1 thread
    traced, most = (max(r for r, t in measured if t == 1), 1), max(t for _, t in measured)
    # the base trace (the latest) at the most ranks, where the communication shows; before it, a
    # threaded program at 1 rank x its most threads: a threaded BLAS enters OpenMP regions only at
    # more than one thread, and `match` reads the share its threads divide from them
    half = [(traced[0] // 2, 1)] if half_ranks and traced[0] > 1 else []
    for r, t in [*([(1, most)] if most > 1 else []), *half, traced]:
        trace_file = work / f"{p.name}.{r}x{t}.trace.json"   # (the program's own output may share stdout)
        nodereg("trace", "--node", node, "--name", f"{p.name}-mpi", "--out", trace_file, "--",
                *mpi.launcher(node_mpi, r), *p.argv(r, t, work), env={**env, **p.environment(t)}, cwd=work)
    if base_runs:   # the plain runs at the traced configuration: the base time is their median with the trace's
        for wall in samples[traced]:
            nodereg("runs", "add", f"{p.name}-mpi", node, "--threads", traced[0] * traced[1], "--time", f"{wall:.6f}",
                    env=env)
    share = json.loads(trace_file.read_text())["meta"]["mpi"]["comm_share"]
    own = p.own_comm_share(*traced, work)
    threads_flag = ["--threads", most] if p.threaded else []
    rows = []
    for (r, t), (wall, busy) in measured.items():
        res = json.loads(nodereg("match", f"{p.name}-mpi", "--ranks", r, "--threads", t, "--nodes", node, "--json",
                                 "--no-store", env=env).stdout)
        rows.append(Row(p.name, r, t, wall, busy, res["predictions"][0]["predicted_s"], (r, t) in [traced, *half],
                        share if (r, t) == traced else None, own if (r, t) == traced else None))
    conf = json.loads(nodereg("match", f"{p.name}-mpi", "--configs", *threads_flag, "--nodes", node, "--json",
                              "--no-store", env=env).stdout)["configs"][0]
    best = min(measured, key=lambda k: measured[k][0])
    chosen = (conf["ranks"], conf["threads"])
    return rows, {"recommended": chosen, "best": best, "best_s": measured[best][0],
                  "recommended_s": measured[chosen][0] if chosen in measured else None, "failed": failed}


def report(rows: list[Row], recommended: dict[str, dict]) -> None:
    print(f"\n{'program':<8} {'ranks x threads':>15} {'measured s':>11} {'CPUs busy':>9} {'predicted s':>12} "
          f"{'error':>7} {'MPI share':>10} {'own share':>10}")
    for x in rows:
        config = f"{x.ranks} x {x.threads}{' (traced)' if x.traced else ''}"
        print(f"{x.program:<8} {config:>15} {x.measured_s:>11.3f} {x.cpus_busy:>9.2f} {x.predicted_s:>12.3f} "
              f"{100 * (x.predicted_s / x.measured_s - 1):>+6.1f}% {'' if x.share is None else f'{x.share:.1%}':>10} "
              f"{'' if x.own is None else f'{x.own:.1%}':>10}")
    errors = [abs(x.predicted_s / x.measured_s - 1) for x in rows]
    projected = [abs(x.predicted_s / x.measured_s - 1) for x in rows if not x.traced]
    print(f"median |error| {100 * statistics.median(errors):.1f}% over {len(errors)} predictions"
          + (f"; {100 * statistics.median(projected):.1f}% over the {len(projected)} configurations other than the "
             "traced ones" if projected else ""))
    hits = 0
    for name, c in recommended.items():
        ok = c["recommended_s"] is not None and c["recommended_s"] <= (1 + BEST_WITHIN) * c["best_s"]
        hits += ok
        (r, t), (br, bt) = c["recommended"], c["best"]
        chosen = "not measured" if c["recommended_s"] is None else f"{c['recommended_s']:.3g} s"
        for (fr, ft), why in c.get("failed", {}).items():
            print(f"{name}: {fr} x {ft} left out: {why}")
        print(f"{name}: recommended {r} x {t}; measured best {br} x {bt} ({c['best_s']:.3g} s); the recommended "
              f"one {chosen}: {'within 5% of the best' if ok else 'NOT within 5%'}")
    print(f"recommended configuration within 5% of the measured best for {hits} of {len(recommended)} programs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, help="registry file (default: a temporary one)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--no-hpcc", action="store_true")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds one run may take; past it every rank is killed and the configuration is left out")
    ap.add_argument("--base-runs", action="store_true",
                    help="store the plain runs at the traced configuration as measured runs of the base node "
                         "(`nodereg runs add`), so that the base time is their median with the traced run's, as "
                         "validate_apps.py's runs are (default: the traced run alone)")
    ap.add_argument("--half-ranks", action="store_true",
                    help="also trace each program at half the traced ranks, so that `match` fits what more ranks "
                         "do not divide (Amdahl over ranks; default: one traced rank count, ranks divide everything)")
    args = ap.parse_args()
    why = mpi.missing()
    if why:
        raise SystemExit(f"error: {why}: {mpi.INSTALL_HINT}")
    node_mpi = mpi.find()
    names = [n for n in args.programs.split(",") if n and not (args.no_hpcc and n == "hpcc")]
    unknown = sorted(set(names) - set(PROGRAMS))
    if unknown:
        raise SystemExit(f"error: unknown program(s) {', '.join(unknown)} (known: {', '.join(PROGRAMS)})")
    programs = ensure_installed([PROGRAMS[n] for n in names])
    with tempfile.TemporaryDirectory(prefix="validate-mpi-") as tmp:
        work = Path(tmp)
        db = args.db or work / "registry.duckdb"
        base_env = {**mpi.environment(node_mpi), "NODEREG_DB": f"duckdb:///{db}", "OMP_NUM_THREADS": "1"}
        env = {**base_env, "OMPI_MCA_mpi_yield_when_idle": "1"}
        node = socket.gethostname()
        print(f"{node_mpi.version}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; registry {db}",
              flush=True)
        have = nodereg("nodes", "--json", env=env, check=False)
        if node not in have.stdout:
            # one profile with the MPI kernels (match reads the node's latest profile: one of the MPI
            # kernels alone has no signatures to compare phases with), at the thread and rank counts
            # the configurations use (powers of two): on a 16-core node the default's every count up
            # to 8 would take minutes the validation does not need
            counts = ",".join(str(1 << k) for k in range((os.cpu_count() or 1).bit_length()))
            kernels = ",".join([*QUICK_KERNELS, "mpi"])          # the quick sweep's kernels and the MPI family
            print(f"profiling this node (quick, with its MPI kernels, threads {counts}) ...", flush=True)
            nodereg("profile", node, "--quick", "--kernels", kernels, "--threads", counts, env=env)
        rows, recommended = [], {}
        for p in programs:
            found, recommended[p.name] = validate(p, node, node_mpi, base_env, work, args.reps, args.base_runs,
                                                  args.timeout, args.half_ranks)
            rows += found
            report(found, {p.name: recommended[p.name]})   # each program's figures as soon as they are in
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    report(rows, recommended)


if __name__ == "__main__":
    main()
