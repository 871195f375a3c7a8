"""Cachegrind signatures of microbenchmark configs, comparable with `nodereg trace --cachegrind`.

On a node without hardware counters, cachegrind is how a phase's memory behaviour is measured
(simulated D1/LL misses with the node's real cache sizes), so `nodereg profile --cachegrind`
measures the same metrics for the representative configs (registry.profile.signatures), and the
matcher can then compare a phase's miss rates with theirs.

Only the kernel's steady state counts, not the driver's start-up or the data's first touch: each
config runs twice in a valgrind-compatible build of the driver (registry.microbench.build.
valgrind_flags), once with 1 and once with 3 timed repetitions. Both runs prepare and warm up the
same way, so the difference of their counts is exactly two steady-state repetitions. Each
repetition does about a million instructions of kernel work or more (`passes`), so that the
~4,500 instructions a repetition spends on pinning, timing and the barrier stay under 0.5%.
valgrind serialises the threads and runs 20-100x slower: a 512 MiB memory config takes about
8 s, the whole pass 1-2 minutes on a 2-core node. gemm's pass cannot be shortened (it is one whole
update of C, N^2 x 64 multiply-adds), so only its configs of at most GEMM_MADDS a pass are simulated
(in practice its L2 point): valgrind took 2 s a pass at N = 832 (L3 here), so ~45 s at 4032 (memory),
six passes a config.
"""

from collections.abc import Callable, Sequence

from registry.inventory import Inventory
from registry.microbench.driver import driver_binary, run_line
from registry.profile.catalog import GEMM_K
from registry.profile.signatures import representatives
from registry.profile.sweep import Config
from registry.measure import cachegrind as cg

REPS = (1, 3)
SWEEP_BYTES = 64 << 20    # bytes a repetition of a streaming kernel sweeps, at least
CHASE_PASSES = 1024       # x 1024 dependent loads
COMPUTE_PASSES = 1000     # ~1e6 instructions of FMA chains
_START_S = 0.3            # valgrind's start-up, per run
_S_PER_BYTE = 2e-9        # simulated seconds per byte of working set and pass (development VM)
GEMM_MADDS = 1 << 24      # gemm configs of at most this many multiply-adds a pass are simulated
_S_PER_MADD = 4.5e-8      # simulated seconds per gemm multiply-add (development VM: 2 s at N = 832)


def passes(config: Config) -> int:
    """Passes per repetition: enough kernel work to dwarf a repetition's fixed overhead."""
    if config.ub.family == "latency":
        return CHASE_PASSES
    if config.ub.name == "gemm":     # at least 64^3 multiply-adds, half a million instructions
        return 1
    if config.ws_bytes <= 0:
        return COMPUTE_PASSES
    return max(1, -(-SWEEP_BYTES // config.ws_bytes))


def estimate_s(config: Config) -> float:
    """Rough duration of `measure(config)`, for the progress bar: warm-up + 1 and warm-up + 3 reps.
    A chase's repetition is CHASE_PASSES x 1024 loads whatever its size: building and warming its
    chain (twice the array, per run) is what grows."""
    if config.ub.family == "latency":
        return len(REPS) * (_START_S + 2 * config.ws_bytes * _S_PER_BYTE)
    if config.ub.name == "gemm":
        return len(REPS) * _START_S + sum(1 + r for r in REPS) * gemm_madds(config) * _S_PER_MADD
    swept = max(config.ws_bytes * passes(config), SWEEP_BYTES)
    return len(REPS) * _START_S + sum(1 + r for r in REPS) * swept * _S_PER_BYTE


def gemm_madds(config: Config) -> int:
    """Multiply-adds of one pass of a gemm config (all threads)."""
    return config.n ** 2 * GEMM_K


def affordable(config: Config) -> bool:
    """Whether valgrind simulates `config` in seconds: every config but gemm's beyond GEMM_MADDS."""
    return config.ub.name != "gemm" or gemm_madds(config) <= GEMM_MADDS


def measure(config: Config, inv: Inventory) -> dict[str, float]:
    """The cachegrind metrics of two steady-state repetitions of `config` ({} if it did no work)."""
    binary = str(driver_binary(for_valgrind=True))
    totals = []
    for reps in REPS:
        line = run_line({"id": 1, **config.driver_args(), "reps": reps, "passes": passes(config)})
        totals.append(cg.run([binary], inv, stdin_text=line + "\nquit\n").total)
    return cg.steady_metrics(*totals)


def measure_all(configs: Sequence[Config], inv: Inventory,
                advance: Callable[[Config, float], None] = lambda c, w: None) -> dict[str, dict[str, float]]:
    """Cachegrind metrics of the representatives of `configs` that valgrind can afford, by config key."""
    out = {}
    for config in filter(affordable, representatives(configs)):
        metrics = measure(config, inv)
        if metrics:
            out[config.key] = metrics
        advance(config, estimate_s(config))
    return out
