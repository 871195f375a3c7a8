"""Profiling a node end to end: inventory, plan, build, measure, then one transaction to store.

The registry is only touched twice: briefly at the start (to fail early on a bad registry) and at
the end, when the measured profile is written in one transaction. Measuring holds no database
lock, so other commands can use the registry meanwhile, and an interrupted profile writes nothing.
"""

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from registry import __version__
from registry.db import Registry, utcnow
from registry.db.names import check_name
from registry.errors import UserError
from registry.inventory import Inventory, collect, compiler_version
from registry.microbench.build import build_flags_description
from registry.microbench import jacobi, mpi
from registry.microbench.driver import Driver, driver_binary
from registry.profile import cachegrind_pass, mpi_runner, runner, signatures, sweep
from registry.profile.catalog import Microbenchmark
from registry.profile.placement import Cpu, read_topology
from registry.profile.stats import RepPolicy
from registry.profile.store import ProfileRecord, store_profile
from registry.measure import cachegrind


@dataclass
class ProfileOptions:
    node: str
    mode: str = "default"                       # quick | default | full
    cpus: list[int] | None = None               # restricted node configuration
    threads: list[int] | None = None
    reps: int | None = None                     # fixed repetitions
    kernels: list[Microbenchmark] | None = None
    cachegrind: bool = False                    # add cachegrind signatures (registry.profile.cachegrind_pass)
    host: str | None = None                     # host recorded for the profile (default: this hostname)

    @property
    def stored_mode(self) -> str:
        """What the profiles table records: a filtered sweep is 'custom'."""
        return "custom" if self.kernels is not None or self.threads is not None else self.mode


@dataclass
class Prepared:
    inventory: Inventory
    topology: list[Cpu]
    plan: sweep.Plan
    policy: RepPolicy


def prepare(opts: ProfileOptions) -> Prepared:
    """Inventory and plan (no measurement yet)."""
    check_name(opts.node, "node")
    if opts.reps is not None and opts.reps < 1:
        raise UserError("--reps must be at least 1")
    if opts.cachegrind:
        cachegrind.require()
    if opts.host is not None and not opts.host.strip():
        raise UserError("--host must not be empty")
    inv = collect(opts.cpus)
    if opts.host is not None:  # `nodereg fleet` names the host as its scheduler does
        inv = dataclasses.replace(inv, hostname=opts.host.strip())
    topology = read_topology(inv.cpus)
    wants_mpi = opts.kernels is None or any(ub.family == "mpi" for ub in opts.kernels)
    plan = sweep.plan(inv, topology, opts.mode, opts.kernels, opts.threads,
                      mpi_missing=mpi.missing() if wants_mpi else None)
    if not plan.configs:
        raise UserError("nothing to measure: the chosen kernels and threads give no configuration"
                        + "".join(f" ({note})" for note in plan.notes))
    return Prepared(inv, topology, plan, RepPolicy.for_mode(opts.mode, opts.reps))


def _split(configs: list[sweep.Config]) -> tuple[list[sweep.Config], list[sweep.Config]]:
    """(the driver's configurations, the MPI kernels' ones)."""
    return [c for c in configs if c.ub.family != "mpi"], [c for c in configs if c.ub.family == "mpi"]


def build(prep: Prepared) -> None:
    """Build (or find in the cache) what the plan runs, so a build error comes before measuring."""
    local, distributed = _split(prep.plan.configs)
    if local:
        driver_binary()
    if distributed:
        node_mpi = mpi.find()
        if any(c.ub.name != "jacobi" for c in distributed):
            mpi.binary(node_mpi)
        if any(c.ub.name == "jacobi" for c in distributed):
            jacobi.binary(node_mpi)


def measure(opts: ProfileOptions, prep: Prepared,
            advance: Callable[[sweep.Config, float], None] = lambda c, w: None) -> ProfileRecord:
    """Build the kernels, measure every planned configuration (then the signatures of its
    representatives, see registry.profile.signatures, and with `opts.cachegrind` their cachegrind
    pass; the MPI kernels last, through registry.profile.mpi_runner), and return the unstored
    profile."""
    started, t0 = utcnow(), time.monotonic()
    local, distributed = _split(prep.plan.configs)
    llc = prep.inventory.last_level_cache()
    measurements, sigs = [], {}
    if local:
        with Driver(driver_binary()) as driver:
            measurements = runner.measure(runner.execution_order(local), driver, prep.policy, advance)
            sigs = signatures.measure_all(driver, local, llc.size_bytes if llc else None, advance,
                                          signatures.passes_for(measurements))
    measurements += mpi_runner.measure(distributed, prep.policy, advance)
    if opts.cachegrind:
        for key, metrics in cachegrind_pass.measure_all(prep.plan.configs, prep.inventory, advance).items():
            sigs.setdefault(key, {})["cachegrind"] = metrics
    return ProfileRecord(node=opts.node, inventory=prep.inventory, mode=opts.stored_mode, measurements=measurements,
                         started_at=started, finished_at=utcnow(), duration_s=time.monotonic() - t0,
                         tool_version=__version__, compiler=compiler_version(), cflags=build_flags_description(),
                         signatures=sigs)


def save(reg: Registry, record: ProfileRecord) -> int:
    """Store the profile in one transaction. Another writer may add the same new configs at the
    same moment (a shared PostgreSQL registry): the transaction is then retried, and finds them."""
    return reg.write(lambda conn: store_profile(conn, record))
