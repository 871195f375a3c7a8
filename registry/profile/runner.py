"""Measuring a plan: every configuration through the driver, repeated until its median settles.

Nothing is written here: measurements stay in memory until the whole profile is stored in one
transaction (registry.profile.store), so an interrupted profile leaves nothing behind.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from registry.microbench.driver import Driver, DriverError
from registry.profile.stats import RepPolicy, Summary, summarize
from registry.profile.sweep import Config


@dataclass
class Measurement:
    config: Config
    times: list[float]          # seconds per repetition (slowest thread), every repetition
    iterations: int             # loop iterations of the slowest thread per repetition
    passes: int
    checksum: float | None
    bytes_per_rep: float
    flops_per_rep: float
    cpus_used: tuple[int, ...]  # where each thread ran (sched_getcpu), thread order
    unstable: bool
    # jacobi: each repetition's seconds in the halo exchange and in the sweep (mean rank); its
    # times are the whole steps' (slowest rank)
    comm_times: list[float] | None = None
    comp_times: list[float] | None = None

    @property
    def stats(self) -> Summary:
        return summarize(self.times)

    @property
    def tpi_us(self) -> float:
        """Median time per iteration of the slowest thread, microseconds (the thesis's metric)."""
        return self.stats.median / self.iterations * 1e6

    @property
    def bandwidth_gbs(self) -> float | None:
        if self.config.ub.family not in ("thesis", "bandwidth", "mpi") or not self.bytes_per_rep:
            return None
        return self.bytes_per_rep / summarize(self.comm_times or self.times).median / 1e9

    @property
    def gflops(self) -> float | None:
        return self.flops_per_rep / self.stats.median / 1e9 if self.flops_per_rep else None

    @property
    def latency_ns(self) -> float | None:
        return self.stats.median / self.iterations * 1e9 if self.config.ub.family == "latency" else None

    @property
    def value(self) -> float | None:
        """The kernel's own figure in its unit (catalog: unit), for kernels that have one: the MPI
        kernels' microseconds per operation (one-way for the ping-pong: half its round trip)."""
        if self.config.ub.unit != "us":
            return None
        if self.comm_times:
            return self.per_step_us(self.comm_times)
        return self.tpi_us / (2 if self.config.ub.name == "pingpong" else 1)

    def per_step_us(self, times: list[float]) -> float:
        """Median microseconds per iteration (jacobi: per time step) of `times`."""
        return summarize(times).median / self.iterations * 1e6


def estimate_s(config: Config, policy: RepPolicy) -> float:
    """Rough seconds a configuration takes (weights the progress bar so its ETA means something)."""
    if config.ub.family == "mpi":   # calibration, then every repetition policy allows (registry.profile.mpi)
        rep_s = policy.target_s
        if config.ub.name == "jacobi":   # at least 4 steps of a sweep: ~1.5 ns an operation, 16 bytes a point at 5 GB/s
            rep_s = max(rep_s, 4 * config.n ** 2 * (config.ops * 1.5e-9 + 16 / 5e9))
        return (policy.max_reps + 8) * rep_s + 0.05
    rep_s = max(policy.target_s, config.ws_bytes / 5e9)
    return min((policy.min_reps + 2) * rep_s, policy.budget_s + 2 * rep_s) + config.ws_bytes / 4e9 + 0.002


def measure_one(driver: Driver, config: Config, policy: RepPolicy) -> Measurement:
    reply = driver.run({**config.driver_args(), "reps": policy.first_reps, "target": policy.target_s})
    times = list(reply["times"])
    while (extra := policy.more_needed(times)) > 0:
        times += driver.more(extra)
    used = tuple(reply["cpus"])
    if used != config.cpus:
        raise DriverError(f"threads pinned to CPUs {list(config.cpus)} ran on {list(used)}: "
                          "CPU pinning does not work here")
    return Measurement(config, times, int(reply["iters"]), int(reply["passes"]), reply.get("checksum"),
                       float(reply["bytes"]), float(reply["flops"]), used, policy.is_unstable(times))


def measure(configs: Sequence[Config], driver: Driver, policy: RepPolicy,
            advance: Callable[[Config, float], None] = lambda c, w: None) -> list[Measurement]:
    """Measure every configuration in order; `advance(config, weight)` after each one."""
    out = []
    for config in configs:
        out.append(measure_one(driver, config, policy))
        advance(config, estimate_s(config, policy))
    return out


def execution_order(configs: Sequence[Config]) -> list[Config]:
    """Group configurations so the driver reuses its buffers: by threads and placement, then
    kernel, largest working set first (later, smaller ones fit in what is already allocated)."""
    return sorted(configs, key=lambda c: (c.threads, c.placement, c.ub.family, c.ub.name, -c.ws_bytes))
