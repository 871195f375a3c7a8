"""The MPI microbenchmarks (microbench/ub_mpi.c): found, built and launched with the node's own MPI.

The kernels are built with the system's MPI compiler wrapper (`mpicc`) and started by its launcher
(`mpirun`, or the one NODEREG_MPIRUN names), once per rank count and placement; every rank pins
itself to its CPU, so the launcher is told to bind nothing. With Open MPI (Debian's openmpi-bin):

- `--allow-run-as-root` when running as root: Open MPI refuses root otherwise, and profiles on
  cluster nodes and in CI containers are often taken as root;
- `--oversubscribe`: Open MPI counts its slots from the cores it sees (a cgroup, a restricted
  `--cpus` node, hardware threads hidden from it) and refuses more ranks than slots, while the
  ranks here are placed by the profile itself;
- OMPI_MCA_pml=ob1 and OMPI_MCA_btl=self,vader: ranks on one node talk through shared memory
  (vader), and Open MPI does not probe network fabrics (UCX, libfabric, TCP interfaces), which
  warns or waits on hosts without them;
- OMPI_MCA_plm=isolated and OMPI_MCA_ras=^slurm,gridengine: the ranks start on this node only,
  even inside a batch job (`nodereg fleet` profiles in Slurm jobs), where Open MPI would otherwise
  take the job's allocation and start ranks through srun (absent on some compute nodes; a job
  step that may not fit the allocation). Any of them already set in the environment is kept (a
  node that needs another transport; OMPI_MCA_btl_vader_single_copy_mechanism=none where the
  kernel refuses cross-memory attach between ranks, as in some containers).

A launch runs under a time limit; past it, or on Ctrl-C, the launcher's whole process tree (every
rank) is killed. A launch that fails or stops early gives a one-line error and no measurement.
"""

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from registry.errors import UserError
from registry.measure.runner import kill_tree
from registry.microbench.build import compile_c, source

SOURCE = "ub_mpi.c"
COMMON = "ub_mpi_common.h"      # what it shares with the Jacobi generator (registry.microbench.jacobi)
BINARY = "nodereg-ub-mpi"
INSTALL_HINT = "install an MPI with its compiler wrapper, e.g. apt-get install openmpi-bin libopenmpi-dev"
OPEN_MPI_ENV = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,vader", "OMPI_MCA_plm": "isolated",
                "OMPI_MCA_ras": "^slurm,gridengine"}


@dataclass(frozen=True)
class Mpi:
    """The node's MPI: its compiler wrapper, launcher, and what it is."""

    mpicc: str
    mpirun: str
    version: str          # first line the wrapper reports (part of the build's cache key)
    open_mpi: bool


def missing() -> str | None:
    """Why the MPI kernels cannot run here (None: they can)."""
    launcher = os.environ.get("NODEREG_MPIRUN", "mpirun")
    absent = [name for name in ("mpicc", launcher) if not shutil.which(name)]
    return f"no MPI found ({' and '.join(absent)} not on PATH)" if absent else None


def find(needed_by: str = "the mpi kernels need one") -> Mpi:
    """The node's MPI, or a UserError that says what needs one and how to install one."""
    why = missing()
    if why:
        raise UserError(f"{why}: {needed_by}; {INSTALL_HINT}")
    mpicc = shutil.which("mpicc")
    try:   # Open MPI's wrapper names itself; other MPIs' wrappers reject the option
        res = subprocess.run([mpicc, "--showme:version"], capture_output=True, text=True, timeout=30)
        text = res.stdout.strip() if res.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    # Open MPI takes the directory its launcher was started from as its installation prefix: found
    # through a symlinked directory (/bin -> /usr/bin) that is '/', which it refuses
    found = Path(shutil.which(os.environ.get("NODEREG_MPIRUN", "mpirun")))
    mpirun = str(found.parent.resolve() / found.name)
    return Mpi(mpicc, mpirun, text.splitlines()[0] if text else "", "Open MPI" in text)


def binary(mpi: Mpi) -> Path:
    """The kernels built with the node's MPI (cached like the other kernels)."""
    return compile_c([source(SOURCE)], BINARY, openmp=False, libs=(), cc=mpi.mpicc, identity=mpi.version,
                     depends=[source(COMMON)])


def launcher(mpi: Mpi, ranks: int) -> list[str]:
    """The launcher's command line up to the program, for `ranks` ranks (see the module's docstring)."""
    launch = [mpi.mpirun]
    if mpi.open_mpi:
        launch += ["--oversubscribe", "--bind-to", "none"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return [*launch, "-n", str(ranks)]


def environment(mpi: Mpi) -> dict[str, str]:
    """The launcher's environment: ours for Open MPI, under the node's own OMPI_MCA_* settings."""
    return {**(OPEN_MPI_ENV if mpi.open_mpi else {}), **os.environ}


def command(mpi: Mpi, program: Path, cpus: Sequence[int], kernels: Sequence[str], sizes: Sequence[int],
            reps: int, target_s: float) -> list[str]:
    """The command line that runs the kernels on one rank per CPU of `cpus`."""
    return [*launcher(mpi, len(cpus)), str(program), ",".join(map(str, cpus)), ",".join(kernels),
            ",".join(map(str, sizes)), str(reps), f"{target_s:g}"]


def _failure(stderr: str, code: int) -> str:
    """The one line that says why a launch failed: the kernels' own error, else the launcher's."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not set(ln.strip()) <= set("-*=")]
    for line in lines:
        if line.startswith('{"error"'):
            try:
                return json.loads(line)["error"]
            except (ValueError, KeyError):
                break
    return (lines[0][:200] if lines else "no message") + f" (exit status {code})"


def launch(mpi: Mpi, program: Path, cpus: Sequence[int], kernels: Sequence[str], sizes: Sequence[int], reps: int,
           target_s: float, timeout_s: float) -> tuple[list[int], list[dict]]:
    """Run the kernels on one rank per CPU; (the CPU each rank ran on, one record per kernel and
    size: {kernel, bytes, iters, times})."""
    return run(mpi, command(mpi, program, cpus, kernels, sizes, reps, target_s), cpus, timeout_s)


def run(mpi: Mpi, cmd: list[str], cpus: Sequence[int], timeout_s: float) -> tuple[list[int], list[dict]]:
    """Run a kernel program's launch `cmd` (one rank per CPU of `cpus`): the CPU each rank ran on,
    and the program's records (JSON lines between its {"cpus"} and {"done"} lines) of a kernel."""
    env = environment(mpi)
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True, env=env,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except BaseException as exc:   # the time limit, Ctrl-C, SIGTERM: no rank outlives the profile
            kill_tree(proc.pid)
            proc.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise UserError(f"the MPI launch ({len(cpus)} ranks on CPUs {','.join(map(str, cpus))}) did not "
                                f"finish within {timeout_s:g} s (NODEREG_MPI_TIMEOUT): every rank was killed") from None
            raise
        err.seek(0)
        stderr = err.read()
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not records or not records[-1].get("done") or "cpus" not in records[0]:
        raise UserError(f"the MPI launch ({Path(mpi.mpirun).name} -n {len(cpus)}) failed: "
                        f"{_failure(stderr, proc.returncode)}")
    return records[0]["cpus"], [r for r in records[1:-1] if "kernel" in r]
