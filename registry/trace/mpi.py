"""Tracing MPI programs: `nodereg trace -- mpirun|mpiexec|srun ... ./app` follows every rank.

When the command is an MPI launcher, the PMPI library (microbench/shim/pmpi_shim.c, built with the
node's MPI) is preloaded into every rank: through the environment the launcher passes on to the
ranks it starts here, and, for Open MPI's launcher, also `-x LD_PRELOAD -x NODEREG_PMPI_OUT` so
that ranks it starts on other hosts get it (srun and MPICH's hydra export the environment by
default). Each rank writes its records to a directory of its own files; for ranks on other hosts
that directory must be on a file system they share with this one (a cluster's home or scratch).

From the records, every phase of the trace (whatever found it: markers, OpenMP regions, change
points) gets its computation/communication split per rank: the MPI time, calls, messages, bytes,
collectives and peers of the phase. Marker phases are counted call by call (the C markers tell the
library which phase is open); other phases take what falls in their intervals on the library's
time line (bins of 0.1 ms in runs up to 3 s, shared out by overlap). The phase's signature gets
source `mpi` (the means over ranks, and the largest share); `trace.meta["mpi"]` keeps every rank's
figures, per phase and for the whole run.

A trace is refused, with nothing stored, when some ranks ran without the library while others had
it (a mixed trace: the split would describe a part of the program as the whole).
"""

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from registry.errors import UserError
from registry.io.tracefile import Phase
from registry.measure.runner import Marker
from registry.microbench import mpi, pmpi
from registry.models.comm import SOURCE
from registry.trace import phases as trace_phases

LAUNCHERS = {"mpirun", "mpiexec", "orterun", "mpirun.openmpi", "mpiexec.openmpi", "mpiexec.hydra", "mpirun.mpich",
             "mpiexec.mpich", "srun"}
NEEDED_BY = ("tracing an MPI program needs one (its PMPI library is built with the node's mpicc; --no-mpi traces "
             "the launcher's processes only)")


def check(argv: list[str]) -> None:
    """Before anything runs: an MPI is here to build the library with, when `argv` needs it."""
    if launcher(argv):
        mpi.find(NEEDED_BY)


def launcher(argv: list[str]) -> str | None:
    """The launcher's name when `argv` starts an MPI program through one, else None."""
    name = Path(argv[0]).name if argv else ""
    return name if name in LAUNCHERS else None


def _is_open_mpi(program: str) -> bool:
    """Open MPI's launcher names itself in --version ("mpirun (Open MPI) 4.1.4")."""
    try:
        res = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return "Open MPI" in res.stdout + res.stderr or "OpenRTE" in res.stdout + res.stderr


@dataclass
class Prepared:
    argv: list[str]
    env: dict


def prepare(argv: list[str], env: dict, out: Path) -> Prepared:
    """The launcher's command line and environment with the PMPI library preloaded into every rank,
    its records going to the directory `out`. A UserError when no MPI is here to build it with."""
    node_mpi = mpi.find(NEEDED_BY)
    shim = pmpi.library(node_mpi)
    out.mkdir(parents=True, exist_ok=True)
    env = {**env, "LD_PRELOAD": " ".join(p for p in (str(shim), env.get("LD_PRELOAD", "")) if p),
           pmpi.OUT_ENV: str(out)}
    argv = list(argv)
    program = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
    if launcher(argv) != "srun" and _is_open_mpi(program):
        argv[1:1] = ["-x", "LD_PRELOAD", "-x", pmpi.OUT_ENV]
    return Prepared(argv, env)


@dataclass
class PhaseRank:
    """One rank's share of one phase."""

    rank: int
    comm_s: float = 0.0
    calls: float = 0.0
    msgs: float = 0.0
    msg_bytes: float = 0.0
    coll: float = 0.0
    coll_bytes: float = 0.0
    peer_mask: int = 0

    def to_dict(self) -> dict:
        return {"rank": self.rank, "comm_s": self.comm_s, "calls": round(self.calls, 3), "msgs": round(self.msgs, 3),
                "msg_bytes": round(self.msg_bytes), "coll": round(self.coll, 3), "coll_bytes": round(self.coll_bytes),
                "peers": bin(self.peer_mask).count("1")}


def _origin(rank: pmpi.Rank, host: str, t0_monotonic: float, real_offset: float) -> float:
    """Where the rank's bin 0 starts, in seconds since the traced command started: the same host's
    CLOCK_MONOTONIC is the tracer's own; another host's is reached through CLOCK_REALTIME (as good
    as the hosts' clock synchronisation, milliseconds under NTP)."""
    if rank.host in (host, "-", ""):
        return rank.init_mono_s - t0_monotonic
    return rank.init_real_s - real_offset - t0_monotonic


def phase_ranks(rank: pmpi.Rank, intervals: list[list[float]], origin: float) -> PhaseRank:
    """The rank's MPI figures inside `intervals` (seconds since the command started): each bin's
    share is the part of it the intervals overlap (time and counts alike)."""
    out = PhaseRank(rank.rank)
    width = rank.bin_s
    for b in rank.bins:
        lo = origin + b.index * width
        hi = lo + width
        covered = sum(max(0.0, min(hi, e) - max(lo, s)) for s, e in intervals)
        if covered <= 0 or width <= 0:
            continue
        f = min(1.0, covered / width)
        out.comm_s += f * b.mpi_s
        out.calls += f * b.calls
        out.msgs += f * b.msgs
        out.msg_bytes += f * b.msg_bytes
        out.coll += f * b.coll
        out.coll_bytes += f * b.coll_bytes
        out.peer_mask |= b.peers
    return out


def check_complete(ranks: list[pmpi.Rank], launcher_name: str) -> None:
    """Every rank of the program wrote its records, or a UserError (a mixed trace)."""
    sizes = {r.size for r in ranks}
    size = max(sizes)
    missing = sorted(set(range(size)) - {r.rank for r in ranks})
    if len(sizes) > 1 or missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        raise UserError(f"mixed MPI trace: {'rank' if len(missing) == 1 else 'ranks'} {shown} of {size} wrote no PMPI records (started without the "
                        f"library: a launcher or wrapper in between that drops LD_PRELOAD, a statically linked "
                        f"rank, or ranks on a host whose files this one cannot read); pass the environment on "
                        f"through {launcher_name} and trace again; nothing was stored")


def _own_markers(ranks: list[pmpi.Rank], markers: list[Marker], wall_s: float) -> dict[int, dict[str, list]]:
    """Per rank, its own marker phases' intervals (markers name their process): ranks do not begin
    and end a phase at the same instant, and a rank's split is of its own phase time."""
    pids = {r.pid for r in ranks}
    return {pid: {p.name: p.intervals for p in trace_phases.marker_phases([m for m in markers if m.pid == pid], wall_s)}
            for pid in pids}


def attach(phases: list[Phase], ranks: list[pmpi.Rank], *, host: str, t0_monotonic: float,
           markers: list[Marker] = (), wall_s: float = 0.0) -> list[list[PhaseRank]]:
    """Every phase's split per rank, and its `mpi` signature: the means over ranks of the MPI time's
    share of the phase (comm_share; its largest, comm_share_max), the messages sent and their
    bytes, the collective calls and bytes, the calls and the peers, and the rank count. A marker
    phase is counted call by call where the program's markers told the library (C markers do),
    else over each rank's own marked intervals (markers name their process); other phases over
    their intervals, from the library's time line."""
    real_offset = time.time() - time.monotonic()
    origins = [_origin(r, host, t0_monotonic, real_offset) for r in ranks]
    own = _own_markers(ranks, list(markers), wall_s)
    out = []
    for p in phases:
        if p.method == "marker" and all(p.name in r.marked for r in ranks):
            out.append(_marked(p, ranks))
            continue
        whole = p.intervals or [[p.start_s, p.end_s]]
        spans = [(own[r.pid].get(p.name) if p.method == "marker" else None) or whole for r in ranks]
        per_rank = [phase_ranks(r, ivs, o) for r, ivs, o in zip(ranks, spans, origins)]
        out.append(per_rank)
        if not per_rank or any(sum(b - a for a, b in ivs) <= 0 for ivs in spans):
            continue
        _sign(p, per_rank, [sum(b - a for a, b in ivs) for ivs in spans])
    return out


def _marked(p: Phase, ranks: list[pmpi.Rank]) -> list[PhaseRank]:
    """A marker phase the library counted call by call on every rank: its exact figures."""
    per_rank = []
    for r in ranks:
        t = r.marked[p.name].totals
        per_rank.append(PhaseRank(r.rank, t.mpi_s, t.calls, t.msgs, t.msg_bytes, t.coll, t.coll_bytes, t.peers))
    if all(r.marked[p.name].phase_s > 0 for r in ranks):
        _sign(p, per_rank, [r.marked[p.name].phase_s for r in ranks])
    return per_rank


def _sign(p: Phase, per_rank: list[PhaseRank], spans: list[float]) -> None:
    """The phase's `mpi` signature from its ranks' figures and their time in it."""
    n = len(per_rank)
    shares = [min(1.0, pr.comm_s / span) for pr, span in zip(per_rank, spans)]
    p.signature[SOURCE] = {
        "comm_share": sum(shares) / n, "comm_share_max": max(shares), "ranks": float(n),
        "msgs": sum(pr.msgs for pr in per_rank) / n, "msg_bytes": sum(pr.msg_bytes for pr in per_rank) / n,
        "coll": sum(pr.coll for pr in per_rank) / n, "coll_bytes": sum(pr.coll_bytes for pr in per_rank) / n,
        "calls": sum(pr.calls for pr in per_rank) / n,
        "peers": sum(bin(pr.peer_mask).count("1") for pr in per_rank) / n}


def summary(ranks: list[pmpi.Rank], phases: list[Phase], per_phase: list[list[PhaseRank]], launcher_name: str) -> dict:
    """What `trace.meta["mpi"]` keeps: every rank's totals and its share of every phase."""
    return {
        "launcher": launcher_name, "ranks": len(ranks), "hosts": sorted({r.host for r in ranks}),
        "comm_share": sum(r.mpi_share for r in ranks) / len(ranks),
        "per_rank": [{"rank": r.rank, "host": r.host, "pid": r.pid, "wall_s": r.wall_s, "mpi_s": r.mpi_s,
                      "functions": {f: {"calls": c.calls, "time_s": c.time_s, "bytes": c.bytes_sent}
                                    for f, c in r.functions.items()},
                      "peers": {str(p): {"msgs": m, "bytes": b} for p, (m, b) in sorted(r.peers.items())}}
                     for r in ranks],
        "phases": [{"phase": p.name, "method": p.method, "ranks": [pr.to_dict() for pr in prs]}
                   for p, prs in zip(phases, per_phase)]}


def collect(phases: list[Phase], out: Path, *, status: str, launcher_name: str, host: str, t0_monotonic: float,
            markers: list[Marker] = (), wall_s: float = 0.0) -> tuple[dict | None, list[str]]:
    """Read the ranks' records, split every phase; (meta["mpi"] or None, notes). A run that did not
    finish keeps no split (its ranks never reached MPI_Finalize, where they write), said in a note."""
    ranks = pmpi.read_dir(out)
    if status != "ok":
        return None, [f"MPI split not recorded: the command {status} (ranks write their records at MPI_Finalize)"]
    if not ranks:
        return None, [f"no rank wrote PMPI records: the command {launcher_name} started is not an MPI program, or "
                      "it is linked statically against its MPI (the library is preloaded); traced as processes only"]
    check_complete(ranks, launcher_name)
    per_phase = attach(phases, ranks, host=host, t0_monotonic=t0_monotonic, markers=markers, wall_s=wall_s)
    return summary(ranks, phases, per_phase, launcher_name), []

