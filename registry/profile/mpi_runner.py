"""Measuring the planned mpi configurations: one MPI launch per rank count and placement.

Starting ranks costs far more than a configuration (about half a second with Open MPI), so every
kernel and message size of one (ranks, placement) runs in one launch of microbench/ub_mpi.c, which
calibrates each to the mode's repetition length and times the repetitions itself. There is no
conversation with a running launch as with the driver: each configuration gets the most
repetitions its policy allows (exactly --reps N where given), and is flagged unstable by the same
rule as the other kernels. As with them, nothing is written here, and a launch that fails, hangs
past its time limit or reports ranks on other CPUs than planned stops the profile (nothing stored).
"""

import os
from collections.abc import Callable, Sequence
from itertools import groupby

from registry.errors import UserError
from registry.microbench import jacobi, mpi
from registry.profile.runner import Measurement, estimate_s
from registry.profile.stats import RepPolicy
from registry.profile.sweep import Config

MIN_TIMEOUT_S = 120.0   # a launch's time limit: at least this, else 10x its estimate
MESSAGES = {"pingpong": 2, "exchange": 4, "allreduce": 0}   # bytes moved per operation / message size


def timeout_s(configs: Sequence[Config], policy: RepPolicy) -> float:
    """The time limit of the launch that runs `configs`: NODEREG_MPI_TIMEOUT seconds if set."""
    text = os.environ.get("NODEREG_MPI_TIMEOUT")
    if text:
        try:
            value = float(text)
        except ValueError:
            value = 0.0
        if value <= 0:
            raise UserError(f"NODEREG_MPI_TIMEOUT={text!r}: expected a positive number of seconds")
        return value
    return max(MIN_TIMEOUT_S, 10 * sum(estimate_s(c, policy) for c in configs))


def _launch_key(config: Config) -> tuple:
    return config.threads, config.placement, config.cpus, config.ub.name == "jacobi"


def measure(configs: Sequence[Config], policy: RepPolicy,
            advance: Callable[[Config, float], None] = lambda c, w: None) -> list[Measurement]:
    """Measure the mpi `configs` (none: nothing is built or launched)."""
    if not configs:
        return []
    node_mpi = mpi.find()
    reps = policy.min_reps if policy.fixed else policy.max_reps
    out = []
    for (_, _, cpus, grid), group in groupby(sorted(configs, key=_launch_key), key=_launch_key):
        group = list(group)
        if grid:
            out += _measure_jacobi(node_mpi, cpus, group, policy, reps, advance)
            continue
        program = mpi.binary(node_mpi)
        kernels = list(dict.fromkeys(c.ub.kernel for c in group))
        sizes = sorted({c.msg_bytes for c in group})
        ran, records = mpi.launch(node_mpi, program, cpus, kernels, sizes, reps, policy.target_s,
                                  timeout_s(group, policy))
        out += measurements(group, records, pinned(cpus, ran), policy, advance)
    return out


def pinned(cpus: tuple[int, ...], ran: dict) -> tuple[int, ...]:
    """The CPUs a launch's ranks ran on (its first record), which must be those they were pinned to."""
    if tuple(ran["cpus"]) != cpus:
        raise UserError(f"MPI ranks pinned to CPUs {list(cpus)} ran on {ran['cpus']}: CPU pinning does not work here")
    return cpus


def measurements(group: Sequence[Config], records: Sequence[dict], ran_on: Sequence[int], policy: RepPolicy,
                 advance: Callable[[Config, float], None]) -> list[Measurement]:
    """The measurements of the configs of one launch, from its records (one per kernel and size)."""
    found = {(r["kernel"], r["bytes"]): r for r in records}
    out = []
    for config in group:
        rec = found.get((config.ub.kernel, config.msg_bytes))
        if rec is None:
            raise UserError(f"the MPI launch reported no {config.ub.name} of {config.msg_bytes} bytes")
        times, iters = [float(t) for t in rec["times"]], int(rec["iters"])
        out.append(Measurement(config, times, iters, 1, None, MESSAGES[config.ub.kernel] * config.msg_bytes * iters,
                               0.0, tuple(ran_on), policy.is_unstable(times)))
        advance(config, estimate_s(config, policy))
    return out


def _jacobi_params(config: Config) -> tuple[int, int, int, int]:
    return config.n, config.msg_bytes // (8 * config.n), config.msgs, config.ops


def _measure_jacobi(node_mpi: mpi.Mpi, cpus: tuple[int, ...], group: list[Config], policy: RepPolicy, reps: int,
                    advance: Callable[[Config, float], None]) -> list[Measurement]:
    """The Jacobi data generator's configurations of one rank count, in one launch: per
    configuration the steps' times, and apart the halo exchange's and the sweep's."""
    program = jacobi.binary(node_mpi)
    ran, records = jacobi.launch(node_mpi, program, cpus, [_jacobi_params(c) for c in group], reps,
                                 policy.target_s, timeout_s(group, policy))
    ran_on = pinned(cpus, ran)
    found = {(r["n"], r["depth"], r["msgs"], r["ops"]): r for r in records}
    out = []
    for config in group:
        rec = found.get(_jacobi_params(config))
        if rec is None:
            raise UserError(f"the MPI launch reported no jacobi of {jacobi.spec(*_jacobi_params(config))}")
        steps, times = int(rec["steps"]), [float(t) for t in rec["times"]]
        out.append(Measurement(config, times, steps, 1, float(rec["checksum"]), config.msgs * config.msg_bytes * steps,
                               0.0, tuple(ran_on), policy.is_unstable(times),
                               comm_times=[float(t) for t in rec["comm"]], comp_times=[float(t) for t in rec["comp"]]))
        advance(config, estimate_s(config, policy))
    return out
