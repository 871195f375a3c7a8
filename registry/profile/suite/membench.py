"""membench's and lmbench bw_mem's curves measured by our own kernels.

sc-membench gives every thread its own buffer of the size (copy: a source and a destination of that
size each) and reports read, write and copy bandwidth in MB/s with all CPUs busy, and the latency of
a dependent pointer chase on one thread. Our driver has the same operations: `load` (a read-reduce
of one array), `store` (ordinary stores), `copy`, and `chase` over one cache line per element. The
figures are ours, not membench's binary: where the two differ on one machine, every node's ratio to
this one carries the difference (`nodereg nodes like` shows how far apart they are).

bw_mem (`-P nproc`: a process per vCPU, each with its own buffer) reads (rd: a sum), writes (wr)
and updates in place (rdwr); here load, store and scale (a read and a write stream; in place is
not one of our kernels).
"""

from registry.inventory import Inventory
from registry.microbench.driver import Driver
from registry.profile import catalog, runner, signatures
from registry.profile.placement import placements, read_topology
from registry.profile.stats import RepPolicy
from registry.profile.suite.plan import SuiteConfig
from registry.profile.sweep import Config

KERNEL = {"read": "load", "write": "store", "copy": "copy", "latency": "chase", "rd": "load", "wr": "store",
          "rdwr": "scale"}


def kernel_config(config: SuiteConfig, inv: Inventory) -> Config:
    """Our driver's config for a membench or bw_mem operation and size (per thread)."""
    topology = read_topology(inv.cpus)
    threads = len(topology) if config.threads == 0 else config.threads
    cpus = placements(topology, threads)["compact"]
    ub = catalog.get(KERNEL[config.what])
    per_thread = config.per_thread_bytes
    if config.what == "latency":
        line = next((c.line_bytes for c in inv.data_caches() if c.line_bytes), 64)
        return Config(ub, threads, "compact", cpus, n=per_thread // line, line=line)
    # n: elements per array, split between the threads (copy and scale: a source and a destination each)
    return Config(ub, threads, "compact", cpus, n=per_thread // 8 * threads, nt=False)


def measure(driver: Driver, config: SuiteConfig, inv: Inventory, policy: RepPolicy) -> tuple[float, dict]:
    """(MB/s or ns, the config's signature), as the profile's own kernels are measured and signed."""
    kc = kernel_config(config, inv)
    m = runner.measure_one(driver, kc, policy)
    value = m.latency_ns if config.what == "latency" else m.bytes_per_rep / m.stats.median / 1e6
    llc = inv.last_level_cache()
    return float(value), signatures.measure(driver, kc, llc.size_bytes if llc else None)
