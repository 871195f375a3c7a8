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

Across nodes (`nodereg fleet mpi`, a Slurm job of several nodes: `per_node` ranks on each) none
of the node-local settings apply: Open MPI takes the job's allocation and starts its daemons
through Slurm, and picks the fabric's transport itself (UCX, libfabric, TCP: what a real MPI
program of the site gets); the launcher places `per_node` ranks on each node and each rank pins
itself to a CPU the job was given there (the kernels' `local` CPUs).

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


def launcher(mpi: Mpi, ranks: int, per_node: int | None = None) -> list[str]:
    """The launcher's command line up to the program, for `ranks` ranks (`per_node` on each node of
    a job across nodes; see the module's docstring)."""
    launch = [mpi.mpirun]
    if mpi.open_mpi:
        launch += ["--oversubscribe"] if per_node is None else ["--map-by", f"ppr:{per_node}:node", "--rank-by", "node"]
        launch += ["--bind-to", "none"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return [*launch, "-n", str(ranks)]


def environment(mpi: Mpi, across_nodes: bool = False) -> dict[str, str]:
    """The launcher's environment: ours for Open MPI on one node, under the node's own OMPI_MCA_*
    settings; the job's own across nodes."""
    return {**(OPEN_MPI_ENV if mpi.open_mpi and not across_nodes else {}), **os.environ}


def command(mpi: Mpi, program: Path, cpus: Sequence[int] | int, kernels: Sequence[str], sizes: Sequence[int],
            reps: int, target_s: float, per_node: int | None = None) -> list[str]:
    """The command line that runs the kernels on one rank per CPU of `cpus`, or on `cpus` ranks
    placed `per_node` to a node, each on a CPU of its node's own (`local`)."""
    ranks, where = (cpus, "local") if per_node else (len(cpus), ",".join(map(str, cpus)))
    return [*launcher(mpi, ranks, per_node), str(program), where, ",".join(kernels),
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


def launch(mpi: Mpi, program: Path, cpus: Sequence[int] | int, kernels: Sequence[str], sizes: Sequence[int],
           reps: int, target_s: float, timeout_s: float, per_node: int | None = None) -> tuple[dict, list[dict]]:
    """Run the kernels on one rank per CPU (or `cpus` ranks, `per_node` to a node: see `command`);
    (where the ranks ran: {cpus, hosts}, one record per kernel and size: {kernel, bytes, iters, times})."""
    return run(mpi, command(mpi, program, cpus, kernels, sizes, reps, target_s, per_node), cpus, timeout_s, per_node)


def run(mpi: Mpi, cmd: list[str], cpus: Sequence[int] | int, timeout_s: float,
        per_node: int | None = None) -> tuple[dict, list[dict]]:
    """Run a kernel program's launch `cmd` (its ranks as `launch` says them): where the ranks ran
    ({cpus, hosts}: the program's first line) and its records of a kernel, up to its {"done"} line."""
    env = environment(mpi, across_nodes=per_node is not None)
    ranks = cpus if per_node else len(cpus)
    where = f"{ranks} ranks, {per_node} per node" if per_node else f"{ranks} ranks on CPUs {','.join(map(str, cpus))}"
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True, env=env,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except BaseException as exc:   # the time limit, Ctrl-C, SIGTERM: no rank outlives the profile
            kill_tree(proc.pid)
            proc.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise UserError(f"the MPI launch ({where}) did not "
                                f"finish within {timeout_s:g} s (NODEREG_MPI_TIMEOUT): every rank was killed") from None
            raise
        err.seek(0)
        stderr = err.read()
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not records or not records[-1].get("done") or "cpus" not in records[0]:
        raise UserError(f"the MPI launch ({Path(mpi.mpirun).name} -n {ranks}) failed: "
                        f"{_failure(stderr, proc.returncode)}")
    return records[0], [r for r in records[1:-1] if "kernel" in r]
