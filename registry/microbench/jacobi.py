"""Branikas 2024's Jacobi data generator (microbench/ub_jacobi.c): built and launched as the MPI
kernels are (registry.microbench.mpi: the node's `mpicc`, its launcher, the same Open MPI settings,
time limit and one-line failures).

One launch runs every configuration of a rank count: a configuration is a rank's grid side N,
the halo depth (rows per message), the messages per time step and the operations per point;
the program calibrates the time steps of a repetition and reports, per repetition, the whole
steps' time and the time in each of the two phases (halo exchange, sweep).
"""

from collections.abc import Sequence
from pathlib import Path

from registry.microbench import mpi
from registry.microbench.build import compile_c, source

SOURCE = "ub_jacobi.c"
BINARY = "nodereg-ub-jacobi"


def binary(node_mpi: mpi.Mpi) -> Path:
    """The generator built with the node's MPI (cached like the other kernels)."""
    return compile_c([source(SOURCE)], BINARY, openmp=False, libs=(), cc=node_mpi.mpicc, identity=node_mpi.version,
                     depends=[source(mpi.COMMON)])


def spec(n: int, depth: int, msgs: int, ops: int) -> str:
    """A configuration as the program reads it."""
    return f"{n}:{depth}:{msgs}:{ops}"


def launch(node_mpi: mpi.Mpi, program: Path, cpus: Sequence[int], configs: Sequence[tuple[int, int, int, int]],
           reps: int, target_s: float, timeout_s: float) -> tuple[dict, list[dict]]:
    """Run the (n, depth, msgs, ops) `configs` on one rank per CPU: (where the ranks ran: {cpus,
    hosts}, one record per configuration: {n, depth, msgs, ops, bytes, ws, steps, times, comm, comp,
    checksum})."""
    cmd = [*mpi.launcher(node_mpi, len(cpus)), str(program), ",".join(map(str, cpus)),
           ",".join(spec(*c) for c in configs), str(reps), f"{target_s:g}"]
    return mpi.run(node_mpi, cmd, list(cpus), timeout_s)


def check(node_mpi: mpi.Mpi, program: Path, cpus: Sequence[int], config: tuple[int, int, int, int], steps: int,
          timeout_s: float = 60.0) -> list[list[float]]:
    """The global grid after `steps` steps of `config` from the initial one (the program's check mode)."""
    cmd = [*mpi.launcher(node_mpi, len(cpus)), str(program), ",".join(map(str, cpus)), "check", spec(*config),
           str(steps)]
    _, records = mpi.run(node_mpi, cmd, list(cpus), timeout_s)
    return records[0]["grid"]
