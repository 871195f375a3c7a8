"""Validate the MPI side of `nodereg` (issue #31 item 4) on MPI programs nobody here wrote.

Programs, from Debian's packages (installed with apt-get when missing and this runs as root):
- LAMMPS (package lammps, inputs from lammps-examples): the 3-d Lennard-Jones melt
  (examples/melt/in.melt) and the 2-d crack (examples/crack/in.crack), run as they ship.
  LAMMPS reports its own MPI task timing breakdown: its `Comm` share is compared with the share
  the trace measured (target: within 5 points).
- HPC Challenge (package hpcc), with its example input at N = 1500 (HPL, DGEMM, STREAM, PTRANS,
  RandomAccess, FFT, b_eff); the grid P x Q = 1 x ranks. --no-hpcc leaves it out (75 s a run at 2
  ranks on a shared 2-CPU machine).
- NWChem (package nwchem-openmpi; Fortran over Global Arrays on MPI): a B3LYP energy of one water
  molecule in the cc-pVTZ basis, the textbook input of its documentation (the package ships no
  example inputs; the script writes this one), about 3 s a run here. Its runs leave Open MPI's
  mpi_yield_when_idle unset: with it set, Global Arrays' one-sided progress never completed
  (Open MPI 4.1.4: a 3.6 s run still waiting after 60 s, with or without the trace).
Not used: mpi4py programs (Debian's python3-mpi4py ships no demo programs; its demos are only in
the source distribution), the NAS Parallel Benchmarks' MPI version (no Debian package; its Fortran
sources are not available here), LAMMPS with threads (Debian's LAMMPS is built without its OPENMP
package, so it runs ranks x 1 thread only).

On this node: a quick profile and the MPI kernels (`nodereg profile NODE --quick`, `--kernels
mpi --quick`, skipped when the registry has them), then per program: measured wall times at 1 and
2 ranks (plain mpirun, --reps each, median), one trace at 2 ranks (`nodereg trace -- mpirun -np
2 ...`), predictions at 1 and 2 ranks (`nodereg match APP --ranks R --nodes NODE`) and the
recommended configuration (`--configs`). Printed: predicted vs measured, the errors and their
median, the recommended vs the measured best rank count, and the MPI shares.

    .venv/bin/python scripts/validate_mpi.py [--db PATH] [--reps 3] [--no-hpcc] [--programs melt,crack,hpcc,nwchem]

Run it on a quiet machine: on a shared one, ranks that wait for a descheduled neighbour inflate
both the communication share and the wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from registry.microbench import mpi

EXAMPLES = Path("/usr/share/lammps/examples")
HPCC_INPUT = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
PACKAGES = {"lmp": ["lammps", "lammps-examples"], "hpcc": ["hpcc"], "nwchem.openmpi": ["nwchem-openmpi"]}
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
NODEREG = [sys.executable, "-m", "registry"]


@dataclass
class Program:
    name: str
    tool: str
    yields: bool = True     # may run with mpi_yield_when_idle (ranks give the CPU up while they wait)

    def argv(self, ranks: int, work: Path) -> list[str]:
        if self.tool == "lmp":
            example = {"melt": "melt/in.melt", "crack": "crack/in.crack"}[self.name]
            return ["lmp", "-in", str(EXAMPLES / example), "-log", str(work / f"{self.name}.{ranks}.log"),
                    "-screen", "none"]
        if self.tool == "hpcc":
            _hpcc_input(ranks, work)
            return ["hpcc"]
        (work / "h2o.nw").write_text(NWCHEM_INPUT)
        return [self.tool, "h2o.nw"]

    def own_comm_share(self, ranks: int, work: Path) -> float | None:
        """The program's own figure of its MPI share, where it reports one (LAMMPS's Comm %total)."""
        log = work / f"{self.name}.{ranks}.log"
        if self.tool != "lmp" or not log.exists():
            return None
        found = re.search(r"^Comm\s*\|.*\|\s*([\d.]+)\s*$", log.read_text(), re.M)
        return float(found.group(1)) / 100 if found else None


PROGRAMS = {"melt": Program("melt", "lmp"), "crack": Program("crack", "lmp"), "hpcc": Program("hpcc", "hpcc"),
            "nwchem": Program("nwchem", "nwchem.openmpi", yields=False)}


def _hpcc_input(ranks: int, work: Path) -> None:
    """hpccinf.txt (read from the working directory) from the packaged example: N = 1500, P x Q = 1 x ranks."""
    lines = HPCC_INPUT.read_text().splitlines()
    lines[5] = "1500         Ns"
    lines[10] = "1            Ps"
    lines[11] = f"{ranks}            Qs"
    (work / "hpccinf.txt").write_text("\n".join(lines) + "\n")


def ensure_installed(programs: list[Program]) -> list[Program]:
    """The programs whose tools are here, installing missing ones with apt-get when root."""
    usable = []
    for p in programs:
        if not shutil.which(p.tool) and os.geteuid() == 0:
            print(f"installing {' '.join(PACKAGES[p.tool])} (apt-get)", flush=True)
            subprocess.run(["apt-get", "install", "-y", *PACKAGES[p.tool]], capture_output=True, check=False)
        if shutil.which(p.tool) and (p.tool != "lmp" or EXAMPLES.exists()) and (p.tool != "hpcc" or HPCC_INPUT.exists()):
            usable.append(p)
        else:
            print(f"skipped {p.name}: {p.tool} is not installed and could not be ({' '.join(PACKAGES[p.tool])})")
    return usable


def nodereg(*args, env: dict, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    res = subprocess.run([*NODEREG, *map(str, args)], env=env, capture_output=True, text=True, cwd=cwd)
    if check and res.returncode != 0:
        raise SystemExit(f"error: nodereg {' '.join(map(str, args))} failed: {res.stderr.strip()[-400:]}")
    return res


def measure(cmd: list[str], env: dict, cwd: Path) -> float:
    start = time.monotonic()
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {res.stderr.strip()[-300:]}")
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, help="registry file (default: a temporary one)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--programs", default="melt,crack,hpcc,nwchem")
    ap.add_argument("--no-hpcc", action="store_true")
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
    ranks_grid = [r for r in (1, 2) if r <= (os.cpu_count() or 1)]
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
            print("profiling this node (quick) and its MPI kernels ...", flush=True)
            nodereg("profile", node, "--quick", env=env)
            nodereg("profile", node, "--kernels", "mpi", "--quick", env=env)
        rows, recommended = [], {}
        for p in programs:
            env = {**base_env, **({"OMPI_MCA_mpi_yield_when_idle": "1"} if p.yields else {})}
            measured = {}
            for r in ranks_grid:
                cmd = [*mpi.launcher(node_mpi, r), *p.argv(r, work)]
                measured[r] = statistics.median(measure(cmd, env, work) for _ in range(args.reps))
                print(f"{p.name}: {r} rank(s) measured {measured[r]:.3g} s", flush=True)
            trace_file = work / f"{p.name}.trace.json"   # (the program's own output may share stdout)
            nodereg("trace", "--node", node, "--name", f"{p.name}-mpi", "--out", trace_file, "--",
                    *mpi.launcher(node_mpi, 2), *p.argv(2, work), env=env, cwd=work)
            doc = json.loads(trace_file.read_text())
            share = doc["meta"]["mpi"]["comm_share"]
            own = p.own_comm_share(2, work)
            for r in ranks_grid:
                res = json.loads(nodereg("match", f"{p.name}-mpi", "--ranks", r, "--nodes", node, "--json",
                                         "--no-store", env=env).stdout)
                predicted = res["predictions"][0]["predicted_s"]
                rows.append((p.name, r, measured[r], predicted, share if r == 2 else None, own if r == 2 else None))
            conf = json.loads(nodereg("match", f"{p.name}-mpi", "--configs", "--nodes", node, "--json", "--no-store",
                                      env=env).stdout)["configs"][0]
            recommended[p.name] = (conf["ranks"], conf["threads"], min(measured, key=measured.get),
                                   min(measured.values()), measured[conf["ranks"]])
    print(f"\n{'program':<8} {'ranks':>5} {'measured s':>11} {'predicted s':>12} {'error':>7} {'MPI share':>10} "
          f"{'own share':>10}")
    errors = []
    for name, r, meas, pred, share, own in rows:
        errors.append(abs(pred / meas - 1))
        print(f"{name:<8} {r:>5} {meas:>11.3f} {pred:>12.3f} {100 * (pred / meas - 1):>+6.1f}% "
              f"{'' if share is None else f'{share:.1%}':>10} {'' if own is None else f'{own:.1%}':>10}")
    print(f"median |error| {100 * statistics.median(errors):.1f}% over {len(errors)} predictions")
    hits = 0
    for name, (r, t, best, best_s, chosen_s) in recommended.items():
        ok = chosen_s <= 1.05 * best_s
        hits += ok
        print(f"{name}: recommended {r} x {t}; measured best {best} x 1 ({best_s:.3g} s); the recommended one "
              f"{chosen_s:.3g} s: {'within 5% of the best' if ok else 'NOT within 5%'}")
    print(f"recommended configuration within 5% of the measured best for {hits} of {len(recommended)} programs")


if __name__ == "__main__":
    main()
