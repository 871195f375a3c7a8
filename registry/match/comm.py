"""The communication part of an MPI application's phases, projected with each node's communication
profile (issue #31 item 3; docs/mpi.md, "Predictions").

A phase traced under the PMPI library (registry.trace.mpi) carries its computation/communication
split: `comm_share`, the mean over ranks of the time inside MPI. `nodereg match` projects the
computation part as any phase (registry.match.project: the phase less its communication, with the
signature it had) and the communication part here: the measured seconds times the target's
communication model over the base's (registry.models.comm: hockney or branikas), for the phase's
messages, bytes and collectives per rank at the rank count asked for. Waiting for neighbours is
part of the measured communication and scales with it.

A node without MPI figures keeps the phase's communication time (said in a warning); so does every
node when the base has none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from registry.db.statement import execute
from registry.errors import UserError
from registry.fleet import fabric_node
from registry.models.base import NodePrediction
from registry.models.comm import SOURCE, CommModel, CommProfile, JacobiFigure, create
from registry.values import command_line

if TYPE_CHECKING:
    import sqlalchemy as sa

DEFAULT_MODEL = "hockney"
MIN_REL_ERROR = 0.1    # the communication part's interval: at least +-10%

_MPI_ROWS = """
SELECT n.name AS node, u.name AS kernel, c.threads AS ranks, c.placement, c.config_key, r.value, r.tpi_us, r.profile_id
FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id
JOIN microbenchmarks u ON u.ub_id = c.ub_id JOIN profiles p ON p.profile_id = r.profile_id
JOIN nodes n ON n.node_id = p.node_id
WHERE u.family = 'mpi' AND r.value IS NOT NULL AND r.value > 0"""


def load_profiles(conn: sa.Connection) -> dict[str, CommProfile]:
    """Every node's communication profile: its latest profile holding MPI figures."""
    latest: dict[str, int] = {}
    rows = execute(conn, _MPI_ROWS).mappings().all()
    for r in rows:
        latest[r["node"]] = max(latest.get(r["node"], -1), r["profile_id"])
    out: dict[str, CommProfile] = {}
    for r in rows:
        if r["profile_id"] != latest[r["node"]]:
            continue
        key = json.loads(r["config_key"])
        if key.get("bytes") is None:
            continue
        profile = out.setdefault(r["node"], CommProfile(r["node"]))
        if r["kernel"] == "jacobi":
            profile.jacobi.append(JacobiFigure(int(r["ranks"]), r["placement"], int(key["bytes"]), int(key["msgs"]),
                                               16 * int(key["n"]) ** 2, int(key["ops"]), float(r["value"]),
                                               float(r["tpi_us"] or 0.0)))
            continue
        profile.points.setdefault(r["kernel"], []).append((int(r["ranks"]), r["placement"], int(key["bytes"]),
                                                          float(r["value"])))
    return out


def threads_per_rank(meta: dict) -> int:
    """The OpenMP threads per rank a trace saw (its `omp_max_threads`; 1: none)."""
    return max(1, int(meta.get("omp_max_threads") or 1))


@dataclass(frozen=True)
class ParallelShare:
    """The share of a rank's computation its threads divide, from the OpenMP regions of a trace: the
    regions' time per rank over the rank's time outside MPI, `f`, at `threads` per rank; as a share
    of the single-thread time, phi = f t / ((1 - f) + f t)."""

    f: float
    threads: int
    source: str

    @property
    def phi(self) -> float:
        return self.f * self.threads / ((1 - self.f) + self.f * self.threads)


@dataclass(frozen=True)
class RankShare:
    """The share of a rank count's computation that more ranks do not divide (start-up, set-up,
    replicated work), from the app's traces at several rank counts (Amdahl over ranks): each
    trace's computation, its time outside MPI, is c = a + b / ranks (least squares); `serial` =
    a / (a + b), a share of the one-rank computation."""

    serial: float
    counts: tuple[int, ...]     # the rank counts it was fitted on

    def factor(self, traced: int, ranks: int) -> float:
        """The computation at `ranks` over that at `traced` ranks."""
        s = self.serial
        return (s + (1 - s) / ranks) / (s + (1 - s) / traced)


@dataclass
class CommInputs:
    """What projecting an MPI app reads beyond the projection's: the nodes' communication profiles,
    the model, the ranks x threads it was traced at and the ones it is projected to."""

    model: str
    profiles: dict[str, CommProfile]
    traced_ranks: int
    traced_threads: int                         # OpenMP threads per rank (1: none)
    ranks: int                                  # projected to
    threads: int
    base_cpus: int
    # the app's MPI traces on its node: (ranks x threads, wall seconds, the slowest rank's MPI
    # seconds), Barnes's SEP training runs (registry.match.scaled)
    traced_runs: list[tuple[int, float, float]] = field(default_factory=list)
    threads_asked: bool = False                 # --threads: the program runs that many (and --configs tries up to it)
    parallel: ParallelShare | None = None       # how much of a rank's computation its threads share (None: unknown)
    rank_share: RankShare | None = None         # how much of it more ranks do not divide (None: unknown, all divides)
    fabric: str | None = None                   # --fabric: the fabric node (fabric:TYPE) the ranks talk through
    fitted: dict[str, CommModel | None] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)      # node -> why its model could not be fitted

    def at(self, ranks: int, threads: int | None = None) -> CommInputs:
        return replace(self, ranks=ranks, threads=threads or self.threads)

    @property
    def cpus(self) -> int:
        """The CPUs the computation is projected on: ranks x threads."""
        return self.ranks * self.threads

    @property
    def division(self) -> float:
        """How the computation changes from the traced ranks x threads to the projected ones, up to
        the base node's CPUs (the projection compares each node with the base at the same count,
        capped by its CPUs): the ranks divide it but its serial share, where traces at two rank counts
        measured one (RankShare; all of it otherwise: strong scaling); within a rank, the threads
        divide its parallel share (Amdahl), all of it when that is unknown."""
        cpus = min(self.cpus, self.base_cpus)
        ranks = min(self.ranks, cpus)
        phi = self.parallel.phi if self.parallel else 1.0
        per_rank = ((1 - phi) + phi * ranks / cpus) / ((1 - phi) + phi / self.traced_threads)
        by_ranks = self.rank_share.factor(self.traced_ranks, ranks) if self.rank_share else self.traced_ranks / ranks
        return by_ranks * per_rank

    def ranks_said(self) -> str | None:
        """What the division assumed about the ranks, when they differ from the traced ones."""
        if self.ranks == self.traced_ranks:
            return None
        if self.rank_share is None:
            return (f"ranks: the app's traces on its node are all at {self.traced_ranks} ranks, so the ranks are taken "
                    "to divide all of its computation (a program's start-up and set-up do not: trace it at another "
                    "rank count too to measure what does not divide)")
        counts = ", ".join(map(str, self.rank_share.counts))
        return (f"ranks: {self.rank_share.serial:.0%} of the app's one-rank computation does not divide among ranks "
                f"(Amdahl, fitted on its traces at {counts} ranks)")

    def threads_said(self) -> str | None:
        """What the division assumed about the threads, when they differ from the traced ones."""
        if self.threads == self.traced_threads:
            return None
        if self.parallel is None:
            return (f"threads per rank: the app's traces on its node show no OpenMP regions, so its {self.threads} "
                    "threads per rank are taken to share all of its computation (a threaded BLAS traced at one "
                    "thread per rank shows none: trace it at more threads per rank to measure its parallel share)")
        return (f"threads per rank: {self.parallel.phi:.0%} of a rank's single-thread computation runs in OpenMP "
                f"regions ({self.parallel.source}); the threads divide that share (Amdahl)")

    def node_model(self, node: str) -> CommModel | None:
        """The node's fitted model (None: no usable MPI figures there)."""
        if node not in self.fitted:
            profile = self.profiles.get(node)
            try:
                self.fitted[node] = create(self.model).fit(profile) if profile else None
            except UserError as exc:
                self.fitted[node], self.refused[node] = None, str(exc)
        return self.fitted[node]


def load(conn: sa.Connection, trace, base_cpus: int, *, model: str = DEFAULT_MODEL,
         ranks: int | None = None, threads: int | None = None, fabric: str | None = None) -> CommInputs | None:
    """The communication inputs of `trace` (None: not an MPI trace, and no rank or thread count asked
    for). `threads`: threads per rank the program runs (OpenMP or a threaded BLAS, which the trace
    may not see: a run at one thread per rank shows none). `fabric`: a node type whose fabric
    profile (`nodereg fleet mpi TYPE`) the ranks talk through, between nodes."""
    doc = trace.meta.get("mpi")
    create(model)                                   # an unknown model fails before any work
    if not doc:
        if ranks is not None or threads is not None or fabric is not None:
            flag = "ranks" if ranks is not None else "threads" if threads is not None else "fabric"
            raise UserError(f"--{flag} projects an MPI program's ranks x "
                            f"threads, and the trace of {trace.name!r} has no ranks: trace it through its launcher "
                            "(nodereg trace -- mpirun -np N ...)")
        return None
    for flag, value in (("--ranks", ranks), ("--threads", threads)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be 1 or more")
    traced, traced_threads = int(doc["ranks"]), threads_per_rank(trace.meta)
    runs = _mpi_traces(conn, trace)
    profiles = load_profiles(conn)
    if fabric is not None and fabric_node(fabric) not in profiles:
        raise UserError(f"no fabric profile of {fabric!r} (node {fabric_node(fabric)}): measure it between two of its "
                        f"hosts with {command_line('nodereg', 'fleet', 'mpi', fabric, '-w', 'HOSTS')}")
    return CommInputs(model, profiles, traced, traced_threads, ranks or traced, threads or traced_threads,
                      base_cpus, [(r.cpus, r.wall_s, r.max_mpi_s) for r in runs if r.max_mpi_s is not None],
                      threads_asked=threads is not None, parallel=parallel_share(runs),
                      rank_share=rank_share(runs, traced_threads),
                      fabric=fabric_node(fabric) if fabric is not None else None)


_TRACES = """
SELECT t.uid, t.wall_s, t.meta_json,
       (SELECT SUM(ph.weight) FROM phases ph WHERE ph.trace_id = t.trace_id AND ph.method = 'omp') AS omp_weight
FROM traces t JOIN apps a ON a.app_id = t.app_id JOIN nodes n ON n.node_id = t.node_id
WHERE a.name = :a AND n.name = :n AND t.status = 'ok' ORDER BY t.trace_id"""


@dataclass
class MpiTrace:
    """One MPI trace of the app on its node, as the projection reads it."""

    uid: str
    ranks: int
    threads: int                    # OpenMP threads per rank seen (1: none)
    wall_s: float
    comm_share: float               # the mean rank's share of the run in MPI
    max_mpi_s: float | None         # the slowest rank's MPI seconds (Barnes's per-processor MAX)
    omp_weight: float | None        # the OpenMP regions' time over the wall time, summed over the ranks (None:
                                    # the shim saw no region; 0: only regions too short to be phases)

    @property
    def cpus(self) -> int:
        return self.ranks * self.threads


def _mpi_traces(conn: sa.Connection, trace) -> list[MpiTrace]:
    """Every MPI trace of the app on the trace's node, oldest first."""
    out = []
    for uid, wall, meta_json, omp_weight in execute(conn, _TRACES, {"a": trace.name, "n": trace.node}):
        meta = json.loads(meta_json or "{}")
        doc = meta.get("mpi") or {}
        if not doc.get("ranks") or not wall:
            continue
        per_rank = doc.get("per_rank") or []
        out.append(MpiTrace(uid, int(doc["ranks"]), threads_per_rank(meta), float(wall),
                            float(doc.get("comm_share") or 0.0),
                            max(float(r["mpi_s"]) for r in per_rank) if per_rank else None,
                            None if meta.get("omp_max_threads") is None else float(omp_weight or 0.0)))
    return out


def parallel_share(runs: list[MpiTrace]) -> ParallelShare | None:
    """The share of a rank's computation its threads divide, from the app's trace with OpenMP regions
    at the most threads per rank (the latest of those): a threaded BLAS enters none at one thread
    per rank. None: no trace saw a region."""
    seen = [r for r in runs if r.omp_weight is not None]
    if not seen:
        return None
    best = max(reversed(seen), key=lambda r: r.threads)   # (max keeps the first of ties: the latest)
    computing = max(1e-9, 1 - best.comm_share)
    f = min(1.0, best.omp_weight / best.ranks / computing)
    return ParallelShare(f, best.threads, f"trace {best.uid[:8]} at {best.ranks} x {best.threads}")


def rank_share(runs: list[MpiTrace], threads: int) -> RankShare | None:
    """The serial share of the app's computation across ranks, from its traces at `threads` per rank
    (the traced one's) at two or more rank counts; None with fewer. Each trace's computation is its
    wall time outside MPI (the mean rank's share); c = a + b / ranks is fitted by least squares,
    a and b kept non-negative."""
    same = [r for r in runs if r.threads == threads]
    counts = sorted({r.ranks for r in same})
    if len(counts) < 2:
        return None
    inverse = np.array([1.0 / r.ranks for r in same])
    computing = np.array([r.wall_s * (1 - r.comm_share) for r in same])
    b, a = np.polyfit(inverse, computing, 1)
    a, b = max(float(a), 0.0), max(float(b), 0.0)
    return RankShare(a / (a + b), tuple(counts)) if a + b > 0 else None


def _added(a: NodePrediction, b: NodePrediction) -> NodePrediction:
    return NodePrediction(a.node, a.predicted_s + b.predicted_s, a.low_s + b.low_s, a.high_s + b.high_s,
                          {**a.explanation, **b.explanation}, a.warnings + b.warnings)


def _scaled(p: NodePrediction, factor: float) -> NodePrediction:
    return replace(p, predicted_s=p.predicted_s * factor, low_s=p.low_s * factor, high_s=p.high_s * factor)


def project_phase(phase, time_s: float, comm: CommInputs | None, base: str, nodes: list[str],
                  compute: Callable):
    """`compute(phase, seconds)` -> PhaseResult projects a phase's computation (at comm.cpus CPUs,
    the caller's fixed thread count); in an MPI app, its time is divided among the projected ranks
    x threads (CommInputs.division), and a phase with an MPI split gets its communication part
    added, projected here."""
    sig = phase.signature.get(SOURCE) if comm is not None else None
    if comm is None:
        return compute(phase, time_s)
    share = min(1.0, max(0.0, float(sig.get("comm_share") or 0.0))) if sig else 0.0
    computing = replace(phase, signature={k: v for k, v in phase.signature.items() if k != SOURCE})
    result = compute(computing, time_s * (1 - share))
    if comm.division != 1:
        result.predictions = {n: _scaled(p, comm.division) for n, p in result.predictions.items()}
    for said in (comm.ranks_said(), comm.threads_said()):
        if said and said not in result.warnings:
            result.warnings.append(said)
    if not sig:
        return result
    comm_s = time_s * share
    wss_mb = phase.signature.get("proc", {}).get("wss_mb")    # the process tree's: every rank's (boosted reads it)
    if wss_mb and math.isfinite(wss_mb):
        sig = {**sig, "wss_bytes": wss_mb * 2**20}
    parts, warnings = communication(sig, comm_s, comm, base, nodes)
    result.predictions = {n: _added(p, parts[n]) for n, p in result.predictions.items()}
    result.time_s = time_s
    result.warnings += [f"phase {phase.name}: {w}" for w in warnings if w not in result.warnings]
    return result


def communication(sig: dict, comm_s: float, comm: CommInputs, base: str, nodes: list[str]):
    """Per node, the phase's communication seconds (base: `comm_s` at the traced rank count)."""
    base_model = comm.node_model(base)
    warnings = []
    if comm.ranks == 1:
        zero = {n: NodePrediction(n, 0.0, 0.0, 0.0, {"comm_s": 0.0}) for n in nodes}
        return zero, warnings
    base_t = base_model.seconds(sig, comm.traced_ranks) if base_model else 0.0
    if base_model is None or base_t <= 0:
        why = comm.refused.get(base) or (f"the base node {base} has no MPI figures for the {comm.model} model "
                                         f"(nodereg profile {base} --kernels mpi)")
        warnings.append(f"{why}; the communication time ({comm_s:.3g} s) is kept on every node")
    out, kept = {}, []
    if comm.fabric:
        warnings.append(f"communication between nodes: projected on every node with the figures of {comm.fabric} "
                        "(nodereg fleet mpi), the base's with its own")
    for n in nodes:
        model = comm.node_model(comm.fabric or n)
        if base_model is None or base_t <= 0 or model is None:
            if base_model is not None and model is None:
                kept.append(n)
            out[n] = NodePrediction(n, comm_s, comm_s, comm_s, {"comm_s": comm_s})
            continue
        predicted = comm_s * model.seconds(sig, comm.ranks) / base_t
        err = max(MIN_REL_ERROR, getattr(model, "rel_rmse", getattr(model, "rel_spread", 0.0)))
        out[n] = NodePrediction(n, predicted, predicted * (1 - err), predicted * (1 + err), {"comm_s": predicted})
        warnings += [w for w in model.warnings if w not in warnings]
    if kept:
        warnings.append(f"no MPI figures on {', '.join(kept[:3])}{' ...' if len(kept) > 3 else ''}: their "
                        f"communication time is kept at the base's")
    return out, warnings
