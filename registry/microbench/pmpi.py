"""The PMPI interposition library (microbench/shim/pmpi_shim.c): built with the node's MPI, and
what it records per rank read back.

Preloaded into every rank of an MPI program (LD_PRELOAD, passed on by the launcher) with
NODEREG_PMPI_OUT naming a file, it appends per rank and MPI function the calls, the time inside
them and the bytes the rank sent, then the rank's time between MPI_Init and MPI_Finalize. This is
the measuring half of issue #31 item 2 (docs/mpi.md); `nodereg trace` does not use it yet.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from registry.errors import UserError
from registry.microbench import mpi
from registry.microbench.build import compile_c, source

SOURCE = "shim/pmpi_shim.c"
LIBRARY = "libnodereg-pmpi.so"
OUT_ENV = "NODEREG_PMPI_OUT"


def library(node_mpi: mpi.Mpi) -> Path:
    """The shim built with the node's MPI (cached like the kernels)."""
    return compile_c([source(SOURCE)], LIBRARY, shared=True, openmp=False, libs=(), cc=node_mpi.mpicc,
                     identity=node_mpi.version)


@dataclass(frozen=True)
class Call:
    calls: int
    time_s: float
    bytes_sent: int


@dataclass
class Rank:
    """What one rank spent in MPI: per function, and in all between MPI_Init and MPI_Finalize."""

    rank: int
    size: int
    pid: int
    wall_s: float = 0.0
    mpi_s: float = 0.0
    functions: dict[str, Call] = field(default_factory=dict)

    @property
    def mpi_share(self) -> float:
        """The fraction of the rank's MPI lifetime spent inside MPI calls."""
        return self.mpi_s / self.wall_s if self.wall_s > 0 else 0.0


def read(lines: Iterable[str]) -> list[Rank]:
    """Ranks (by rank number) from the shim's lines; a malformed line is a UserError."""
    ranks: dict[int, Rank] = {}
    for number, line in enumerate(lines, 1):
        fields = line.rstrip("\n").split("\t")
        try:
            if fields[0] == "F" and len(fields) == 8:
                pid, rank, size = map(int, fields[1:4])
                entry = ranks.setdefault(rank, Rank(rank, size, pid))
                entry.functions[fields[4]] = Call(int(fields[5]), int(fields[6]) / 1e9, int(fields[7]))
            elif fields[0] == "T" and len(fields) == 7:
                pid, rank, size, start, end, inside = map(int, fields[1:])
                entry = ranks.setdefault(rank, Rank(rank, size, pid))
                entry.wall_s, entry.mpi_s = (end - start) / 1e9, inside / 1e9
            elif line.strip():
                raise ValueError
        except ValueError:
            raise UserError(f"PMPI record line {number} is malformed: {line.strip()[:80]!r}") from None
    return [ranks[r] for r in sorted(ranks)]


def read_file(path: Path) -> list[Rank]:
    try:
        with open(path) as f:
            return read(f)
    except OSError as exc:
        raise UserError(f"cannot read the PMPI records {path}: {exc.strerror}") from None
