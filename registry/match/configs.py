"""`nodereg match APP --configs`: ranks x threads per node type for an MPI (+ OpenMP) application,
after Castellanos 2014 (issue #31 item 3; docs/mpi.md, "Choosing ranks x threads").

Castellanos models a hybrid master/worker application per machine and picks the configuration
(workers x threads) by an exhaustive arg-min over the feasible ones (registry.models.mob:
best_configuration); here every candidate's time comes from the projection itself: the
computation part of each phase projected at ranks x threads CPUs, the communication part with the
node's communication model at that rank count (registry.match.comm). Candidates are the powers of
two of ranks and threads whose product fits the node's CPUs (threads only for a program traced
with OpenMP threads, the hybrid case, or up to `--threads T` for one that runs them unseen: a
threaded BLAS, or OpenMP traced at one thread per rank). Each node's choice comes with its
reasons: the runner-up and by how much, what the communication costs at the chosen rank count,
and the efficiency index E = ranks x T^2 / T_c (Castellanos eq. 4.9; T_c, the 1 x 1 time) that
says how well the CPUs are used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from registry.errors import UserError
from registry.match.comm import threads_per_rank
from registry.match.project import Inputs, project
from registry.models.mob import best_configuration, efficiency_index


def candidates(cpus: int, max_threads: int) -> list[tuple[int, int]]:
    """(ranks, threads), powers of two, with ranks x threads <= cpus and threads <= max_threads (1
    for a program that runs no threads: more would idle)."""
    powers = [1 << k for k in range(cpus.bit_length()) if 1 << k <= cpus]
    return [(r, t) for r in powers for t in powers if t <= max_threads and r * t <= cpus]


class _Lookup:
    """What best_configuration asks of a model: predictions for the candidate rows."""

    def __init__(self, times: dict[tuple[int, int], float]) -> None:
        self.times = times

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.array([self.times[(int(r), int(t))] for r, t in zip(rows["ranks"], rows["threads"])])


@dataclass
class Choice:
    node: str
    ranks: int
    threads: int
    predicted_s: float
    comm_s: float
    e_index: float
    tried: int
    reasons: list[str]

    def to_dict(self) -> dict:
        return {"node": self.node, "ranks": self.ranks, "threads": self.threads, "predicted_s": self.predicted_s,
                "comm_s": self.comm_s, "efficiency_index": self.e_index, "configs_tried": self.tried,
                "reasons": self.reasons}


def recommend(inputs: Inputs, model: str, options: dict | None = None) -> list[Choice]:
    """Per target node, the fastest ranks x threads, with reasons."""
    if inputs.comm is None:
        raise UserError(f"--configs chooses ranks x threads for an MPI program, and the trace of "
                        f"{inputs.found.trace.name!r} has no ranks: trace it through its launcher "
                        "(nodereg trace -- mpirun -np N ...)")
    cpus = inputs.profiles.n_cpus
    hybrid = threads_per_rank(inputs.found.trace.meta) > 1
    asked = inputs.comm.threads if inputs.comm.threads_asked else None
    grid = sorted({c for n in inputs.targets for c in candidates(cpus[n], asked or (cpus[n] if hybrid else 1))})
    times: dict[str, dict[tuple[int, int], tuple[float, float]]] = {n: {} for n in inputs.targets}
    for ranks, threads in grid:
        at = replace(inputs, comm=inputs.comm.at(ranks, threads))
        result = project(at, model=model, options=options, fixed_threads=ranks * threads)
        comm_by_node = {n: sum(p.predictions[n].explanation.get("comm_s", 0.0) for p in result.phases
                               if n in p.predictions) for n in inputs.targets}
        for n in result.nodes:
            if ranks * threads <= cpus[n.node]:
                times[n.node][(ranks, threads)] = (n.predicted_s, comm_by_node[n.node])
    # what the threads were assumed to divide (registry.match.comm), when other thread counts were tried
    said = next((inputs.comm.at(r, t).threads_said() for r, t in grid if t != inputs.comm.traced_threads), None)
    return [_choose(node, found, said) for node, found in times.items() if found]


def _choose(node: str, found: dict[tuple[int, int], tuple[float, float]], threads_said: str | None) -> Choice:
    rows = pd.DataFrame([{"ranks": r, "threads": t} for r, t in found])
    best, value = best_configuration(_Lookup({k: v[0] for k, v in found.items()}), rows)
    r, t = int(best["ranks"]), int(best["threads"])
    predicted, comm_s = found[(r, t)]
    serial = found.get((1, 1), (predicted, 0.0))[0]
    e_index = float(efficiency_index(r, predicted, serial))
    ordered = sorted(found.items(), key=lambda kv: kv[1][0])
    reasons = [f"fastest of {len(found)} ranks x threads configs that fit its CPUs" if len(found) > 1 else
               "the only ranks x threads config that fits its CPUs"]
    if len(ordered) > 1:
        (r2, t2), (p2, _) = ordered[1]
        reasons.append(f"next: {r2} x {t2} at {p2:.3g} s ({100 * (p2 / predicted - 1):+.0f}%)")
    if comm_s > 0:
        reasons.append(f"communication {comm_s:.3g} s ({comm_s / predicted:.0%}) at {r} ranks")
    more = [(k, v) for k, v in found.items() if k[0] > r and k[0] * k[1] >= r * t]
    if more:
        (rm, tm), (pm, cm) = min(more, key=lambda kv: kv[1][0])
        if cm > comm_s:
            reasons.append(f"{rm} ranks would add {cm - comm_s:.3g} s of communication ({rm} x {tm}: {pm:.3g} s)")
    if threads_said:
        reasons.append(threads_said)
    return Choice(node, r, t, float(value), comm_s, e_index, len(found), reasons)
