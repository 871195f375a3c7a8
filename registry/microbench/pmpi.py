"""The PMPI interposition library (microbench/shim/pmpi_shim.c): built with the node's MPI, and
what it records per rank read back.

Preloaded into every rank of an MPI program (LD_PRELOAD, passed on by the launcher) with
NODEREG_PMPI_OUT naming a directory, each rank writes one file at MPI_Finalize: per MPI function
the calls, the time inside them and the bytes sent; a time line of bins (MPI time, calls,
messages and bytes, collectives, peers) from which the phases' computation/communication split is
taken (registry.trace.mpi); per peer the messages and bytes sent; and the rank's time between
MPI_Init and MPI_Finalize; and per marker phase (the program's markers call into the library) the
same figures, call by call.
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


@dataclass(frozen=True)
class Bin:
    """One stretch of a rank's time line: [start_s, start_s + the rank's bin_s), on the rank's clock."""

    index: int
    mpi_s: float
    calls: int
    msgs: int            # point-to-point messages the rank sent
    msg_bytes: int
    coll: int            # collective calls
    coll_bytes: int
    peers: int           # bit (world rank % 64) per peer touched


@dataclass(frozen=True)
class Marked:
    """A marker phase on one rank, counted call by call (the program's markers tell the library)."""

    occurrences: int
    phase_s: float       # the rank's own time in the phase (innermost open phase)
    totals: Bin          # its MPI time, calls, messages, ... (index 0)


@dataclass
class Rank:
    """What one rank spent in MPI: per function, over time (bins) and per peer, and in all between
    MPI_Init and MPI_Finalize."""

    rank: int
    size: int
    pid: int
    host: str = ""
    init_mono_s: float = 0.0      # MPI_Init's end on the rank's host, CLOCK_MONOTONIC
    init_real_s: float = 0.0      # ... and CLOCK_REALTIME (ranks on other hosts)
    bin_s: float = 0.0
    wall_s: float = 0.0
    mpi_s: float = 0.0
    functions: dict[str, Call] = field(default_factory=dict)
    bins: list[Bin] = field(default_factory=list)
    peers: dict[int, tuple[int, int]] = field(default_factory=dict)   # world rank -> (messages, bytes) sent
    marked: dict[str, "Marked"] = field(default_factory=dict)   # marker phase -> its figures, call by call

    @property
    def mpi_share(self) -> float:
        """The fraction of the rank's MPI lifetime spent inside MPI calls."""
        return self.mpi_s / self.wall_s if self.wall_s > 0 else 0.0


def _line(fields: list[str], ranks: dict[int, Rank]) -> None:
    kind = fields[0]
    if kind == "H" and len(fields) == 8:
        pid, rank, size = map(int, fields[1:4])
        entry = ranks.setdefault(rank, Rank(rank, size, pid))
        entry.host = fields[4]
        entry.init_mono_s, entry.init_real_s, entry.bin_s = (int(v) / 1e9 for v in fields[5:8])
    elif kind == "F" and len(fields) == 8:
        pid, rank, size = map(int, fields[1:4])
        entry = ranks.setdefault(rank, Rank(rank, size, pid))
        entry.functions[fields[4]] = Call(int(fields[5]), int(fields[6]) / 1e9, int(fields[7]))
    elif kind == "B" and len(fields) == 11:
        values = list(map(int, fields[1:]))
        entry = ranks[values[1]]
        entry.bins.append(Bin(values[2], values[3] / 1e9, *values[4:]))
    elif kind == "P" and len(fields) == 6:
        _, rank, peer, msgs, sent = map(int, fields[1:])
        ranks[rank].peers[peer] = (msgs, sent)
    elif kind == "M" and len(fields) == 13:
        values = [int(v) for v in fields[4:]]
        ranks[int(fields[2])].marked[fields[3]] = Marked(values[0], values[1] / 1e9,
                                                         Bin(0, values[2] / 1e9, *values[3:]))
    elif kind == "T" and len(fields) == 7:
        pid, rank, size, start, end, inside = map(int, fields[1:])
        entry = ranks.setdefault(rank, Rank(rank, size, pid))
        entry.wall_s, entry.mpi_s = (end - start) / 1e9, inside / 1e9
    else:
        raise ValueError


def read(lines: Iterable[str]) -> list[Rank]:
    """Ranks (by rank number) from the shim's lines; a malformed line is a UserError."""
    ranks: dict[int, Rank] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            _line(line.rstrip("\n").split("\t"), ranks)
        except (ValueError, KeyError):
            raise UserError(f"PMPI record line {number} is malformed: {line.strip()[:80]!r}") from None
    return [ranks[r] for r in sorted(ranks)]


def read_dir(path: Path) -> list[Rank]:
    """Every rank's records in the directory the shim wrote to (one file per rank)."""
    lines: list[str] = []
    try:
        for f in sorted(Path(path).glob("pmpi.*.tsv")):
            lines += f.read_text().splitlines()
    except OSError as exc:
        raise UserError(f"cannot read the PMPI records in {path}: {exc.strerror}") from None
    return read(lines)
