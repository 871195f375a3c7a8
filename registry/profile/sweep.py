"""Which configurations a profile measures, planned from the node's inventory.

Sizes follow the detected caches. Thesis kernels sweep the per-thread footprint (bytes one
thread walks: a shared region counts whole, a private region is the thread's own) from half of
L1 to at least four times the last-level cache on a fixed log grid (powers of two, or of the
square root of two in --full), so nodes with different caches still share most configurations
(the thesis compares one configuration across nodes), plus points at 0.75x and 1.5x of every
cache size where the grid has none within 15%. Bandwidth and latency kernels also run at one
working set per level: half of L1, the geometric middle of each later level, and 4x the
last-level cache for memory; private levels count once per core used, the last level once per
domain used. gemm, the compute kernel with a working set, runs at the same points from L2 out (its
memory point: 4x the last-level cache), its matrices' side N chosen for each (`gemm_configs`).
"""

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from registry.errors import UserError
from registry.inventory import Cache, Inventory
from registry.profile import catalog
from registry.profile.catalog import Microbenchmark
from registry.profile.placement import Cpu, pair_placements, placements
from registry.values import plural

MODES = ("quick", "default", "full")
# A virtual machine may report a smaller last-level cache than its host has: this development VM
# reports 32 MiB, yet 128 MiB still streams at twice its DRAM bandwidth. The memory point is
# therefore never below 512 MiB, where every cache of current server parts is left behind.
MEMORY_POINT_MIN = 512 * 1024 * 1024
MIN_ACCESSES = 16                   # a stream config needs this many accesses per pass
KB = 1024
# assumed when the inventory lists no caches (some VMs and ARM boards expose none)
FALLBACK_CACHES = (Cache(1, "Data", 32 * KB, 64, 1, 1), Cache(2, "Unified", 1024 * KB, 64, 1, 1),
                   Cache(3, "Unified", 32 * KB * KB, 64, 1, 1))


@dataclass(frozen=True)
class Stream:
    """A stream descriptor in the thesis's terms (size in elements, stride in bytes)."""

    size_elems: int
    stride_bytes: int
    dtype: str
    elem_bytes: int
    access: str      # C | P
    pattern: str     # seq | random

    def as_list(self) -> list:
        return [self.size_elems, self.stride_bytes, self.dtype, self.access, self.pattern]


@dataclass(frozen=True)
class Config:
    """One microbenchmark configuration on a given set of CPUs."""

    ub: Microbenchmark
    threads: int
    placement: str
    cpus: tuple[int, ...]
    streams: tuple[Stream, ...] = ()
    n: int | None = None         # bandwidth: elements per array; chase: lines per thread; gemm: N
    nt: bool = False             # bandwidth: non-temporal stores
    line: int | None = None      # chase: bytes per element
    # not identity: the level a level-point size was chosen for, and the level the working set fits
    level: str | None = field(default=None, compare=False)
    ws_level: str | None = field(default=None, compare=False)
    msg_bytes: int | None = None  # mpi: message size (threads: ranks, one per CPU of cpus)
    nodes: int | None = None      # mpi across nodes (`nodereg fleet mpi`): the job's nodes (threads: all its ranks)
    msgs: int | None = None       # jacobi: messages per time step (n: points per side of a rank's grid)
    ops: int | None = None        # jacobi: operations per grid point and step

    def params(self) -> dict:
        """The parameters that, with name, threads and placement, identify the configuration."""
        family = self.ub.family
        if family == "thesis":
            return {"streams": [s.as_list() for s in self.streams]}
        if family == "bandwidth":
            return {"n": self.n, "nt": int(self.nt)}
        if family == "latency":
            return {"n": self.n, "line": self.line}
        if family == "mpi":
            grid = {"n": self.n, "msgs": self.msgs, "ops": self.ops} if self.ub.name == "jacobi" else {}
            return {"bytes": self.msg_bytes, "ranks": self.threads, **({"nodes": self.nodes} if self.nodes else {}),
                    **grid}
        if self.ub.name == "gemm":
            return {"n": self.n}
        return {}

    @property
    def key(self) -> str:
        """Canonical text of every parameter: the identity of the config across nodes."""
        return json.dumps({"ub": self.ub.name, "threads": self.threads, "placement": self.placement,
                           **self.params()}, sort_keys=True, separators=(",", ":"))

    @property
    def ws_bytes(self) -> int:
        """Total working set of all threads."""
        if self.ub.family == "thesis":
            return sum(s.size_elems * s.elem_bytes * (self.threads if s.access == "P" else 1) for s in self.streams)
        if self.ub.family == "bandwidth":
            return self.n * 8 * catalog.ARRAYS[self.ub.name]
        if self.ub.family == "latency":
            return self.n * self.line * self.threads
        if self.ub.name == "jacobi":   # each rank's two arrays with their ghost rows, and scratch buffers
            return (2 * (self.n + 2 * self.msg_bytes // (8 * self.n)) * self.n * 8
                    + max(self.msgs - 2, 1) * self.msg_bytes) * self.threads
        if self.ub.family == "mpi":
            return 3 * self.msg_bytes * self.threads   # each rank's send and two receive buffers
        if self.ub.name == "gemm":     # C (N x N), A (N x K) and B (K x N)
            return 8 * self.n * (self.n + 2 * catalog.GEMM_K)
        return 0

    def descriptors(self) -> tuple[Stream, ...]:
        """The streams this configuration makes, by construction: a thesis kernel's own; for a
        bandwidth kernel each array, split between the threads (so private, n/threads elements
        each); for the chase its chain of pointers in random order; none for compute kernels (gemm's
        tiles of three matrices are not the read-reduce streams of the thesis's model)."""
        family = self.ub.family
        if family == "thesis":
            return self.streams
        if family == "bandwidth":
            per_thread = self.n // self.threads
            return tuple(Stream(per_thread, 8, "f64", 8, "P", "seq") for _ in range(catalog.ARRAYS[self.ub.name]))
        if family == "latency":
            return (Stream(self.n * self.line // 8, self.line, "i64", 8, "P", "random"),)
        return ()

    def driver_args(self) -> dict:
        args: dict = {"kernel": self.ub.kernel, "threads": self.threads, "cpus": self.cpus}
        if self.ub.family == "thesis":
            args.update(op=self.ub.op, dtype=self.ub.dtype)
            for slot, s in zip("ab", self.streams):
                args.update({f"{slot}.n": s.size_elems, f"{slot}.stride": s.stride_bytes,
                             f"{slot}.access": s.access, f"{slot}.pattern": s.pattern})
        elif self.ub.family == "bandwidth":
            args.update(n=self.n, nt=int(self.nt))
        elif self.ub.family == "latency":
            args.update(n=self.n, line=self.line)
        elif self.ub.name == "gemm":
            args.update(n=self.n)
        return args


@dataclass(frozen=True)
class SweepSettings:
    """How dense a mode's sweep is."""

    per_octave: int
    seq_strides: tuple[int | None, ...]       # None: one element
    random_strides: tuple[int, ...]
    pairs: tuple[tuple[int | None, int | None], ...]   # (stride a, stride b) of two-stream kernels
    ratios: tuple[tuple[int, int], ...]       # footprint split between streams a and b
    grid: bool                                # thesis sizes on the grid (else: level points only)
    bandwidth_grid: bool                      # bandwidth kernels on the grid too
    chase_grid: bool
    scatter: bool                             # also scatter placement where it differs
    chase_all_threads: bool


E = None  # "one element" in stride tables
SETTINGS = {
    "quick": SweepSettings(1, (E,), (600,), ((E, E),), ((4, 1),), grid=False, bandwidth_grid=False,
                           chase_grid=False, scatter=False, chase_all_threads=False),
    "default": SweepSettings(1, (E, 64, 600, 32000), (64, 600, 32000), ((E, E), (32000, E)), ((4, 1),),
                             grid=True, bandwidth_grid=False, chase_grid=True, scatter=True,
                             chase_all_threads=False),
    "full": SweepSettings(2, (E, 16, 32, 64, 128, 256, 512, 600, 1024, 4096, 8192, 32000),
                          (64, 256, 600, 4096, 32000),
                          ((E, E), (64, E), (600, E), (4096, E), (32000, E), (E, 64), (E, 600), (E, 32000),
                           (32000, 32000)),
                          ((4, 1), (1, 1), (1, 4)), grid=True, bandwidth_grid=True, chase_grid=True, scatter=True,
                          chase_all_threads=True),
}
# MPI message sizes: 8 B to 4 MiB (every power of two in --full, of four otherwise)
MPI_SIZES = {"quick": (8, 1024, 65536, 4 * KB * KB),
             "default": (*(8 * 4 ** k for k in range(10)), 4 * KB * KB),
             "full": tuple(2 ** k for k in range(3, 23))}
# The Jacobi data generator's sweep (Branikas 2024 swept working set, load, message size and count,
# nodes and ranks per node): per rank count, grid sides N (a rank's working set, two arrays of
# N x N doubles: 256 KiB, 1 MiB, 4 MiB, 16 MiB, 64 MiB for N = 128 .. 2048), halo depths (a message
# is DEPTH rows, DEPTH x N x 8 bytes; the paper's sizes were 1 to 100 x sqrt(working set), that is
# 1/2 to 50 rows), messages per step and operations per point (1: memory bound, 16: compute bound)
JACOBI_SWEEP = {"quick": ((128, 512), (1, 16), (2, 8), (1,)),
                "default": ((128, 256, 1024), (1, 4, 16), (2, 8), (1, 16)),
                "full": ((128, 256, 512, 1024, 2048), (1, 4, 16, 64), (2, 4, 8), (1, 16))}
QUICK_KERNELS = ("mbw1c", "mbw1p", "copy", "scale", "add", "triad", "load", "store", "chase", "peak_fma",
                 "scalar_fp64", "int_ops", "int_branch", "fp_chain", "gemm")
GEMM_MEMORY_LLCS = 4                # gemm's memory point, in last-level caches (in use)


def data_caches(inv: Inventory) -> list[Cache]:
    """One data/unified cache per level, L1 outwards (a fallback hierarchy if none are known)."""
    by_level: dict[int, Cache] = {}
    for c in inv.data_caches():
        by_level.setdefault(c.level, c)
    return [by_level[k] for k in sorted(by_level)] or list(FALLBACK_CACHES)


def _instances_used(cache: Cache, is_llc: bool, cpus: Sequence[int], topology: Sequence[Cpu],
                    threads_per_core: int) -> int:
    chosen = [t for t in topology if t.cpu in set(cpus)]
    if is_llc:
        return max(1, len({t.llc for t in chosen}))
    cores = len({(t.package, t.core) for t in chosen}) or len(cpus)
    per_instance_cores = max(1, cache.shared_by // max(1, threads_per_core))
    return max(1, min(cache.instances or cores, math.ceil(cores / per_instance_cores)))


def level_points(inv: Inventory, topology: Sequence[Cpu], cpus: Sequence[int]) -> dict[str, int]:
    """Total working set (bytes) that sits in each level for threads on `cpus`: {'L1': ..., 'memory': ...}."""
    caches = data_caches(inv)
    agg = [c.size_bytes * _instances_used(c, i == len(caches) - 1, cpus, topology, inv.threads_per_core)
           for i, c in enumerate(caches)]
    points = {f"L{caches[0].level}": agg[0] // 2}
    for prev, cache, size in zip(agg, caches[1:], agg[1:]):
        if size >= 2 * prev:
            points[f"L{cache.level}"] = int(math.sqrt(prev * size))
    points["memory"] = max(4 * agg[-1], MEMORY_POINT_MIN)
    return points


def llc_capacity(inv: Inventory, topology: Sequence[Cpu], cpus: Sequence[int]) -> int:
    """Bytes of last-level cache that threads on `cpus` have (once per domain in use)."""
    llc = data_caches(inv)[-1]
    return llc.size_bytes * _instances_used(llc, True, cpus, topology, inv.threads_per_core)


def level_of(inv: Inventory, topology: Sequence[Cpu], cpus: Sequence[int], ws_bytes: int) -> str:
    """The innermost level whose capacity (for threads on `cpus`) holds `ws_bytes`."""
    caches = data_caches(inv)
    for i, c in enumerate(caches):
        if ws_bytes <= c.size_bytes * _instances_used(c, i == len(caches) - 1, cpus, topology, inv.threads_per_core):
            return f"L{c.level}"
    return "memory"


def footprint_grid(inv: Inventory, per_octave: int) -> list[int]:
    """Per-thread footprints (bytes) from half of L1 to >= 4x the last-level cache."""
    caches = data_caches(inv)
    lo, hi = caches[0].size_bytes / 2, 4 * caches[-1].size_bytes
    k = math.ceil(math.log2(lo) * per_octave - 1e-9)
    grid = []
    while True:
        value = round(2 ** (k / per_octave) / 256) * 256
        grid.append(value)
        if value >= hi:
            break
        k += 1
    extra = []
    for c in caches:
        for factor in (0.75, 1.5):
            point = int(c.size_bytes * factor) // 256 * 256
            if lo <= point <= hi and all(abs(point - g) > 0.15 * g for g in grid):
                extra.append(point)
    return sorted(set(grid + extra))


def default_threads(n_cpus: int) -> list[int]:
    """1..n for small nodes; powers of two and n for big ones (a 128-CPU sweep of every count is waste)."""
    if n_cpus <= 8:
        return list(range(1, n_cpus + 1))
    counts = {1 << i for i in range(n_cpus.bit_length()) if (1 << i) <= n_cpus}
    return sorted(counts | {n_cpus})


def _elems(nbytes: float, elem: int, align: int = 64) -> int:
    return max(align, int(nbytes // elem) // align * align)


def _stream(ub: Microbenchmark, i: int, footprint: float, stride: int | None) -> Stream | None:
    e = ub.elem_bytes
    stride = e if stride is None else stride
    if stride % e:
        return None
    n = _elems(footprint, e)
    if n * e // stride < MIN_ACCESSES:
        return None
    return Stream(n, stride, ub.dtype, e, ub.access[i], ub.pattern[i])


def _thesis_streams(ub: Microbenchmark, footprint: int, s: SweepSettings) -> Iterable[tuple[Stream, ...]]:
    if ub.n_streams == 1:
        strides = s.random_strides if ub.pattern[0] == "random" else s.seq_strides
        for stride in strides:
            st = _stream(ub, 0, footprint, stride)
            if st:
                yield (st,)
        return
    if ub.pattern == ("seq", "random"):
        pairs = [(a, r) for a, _ in s.pairs if a in (E, 64) for r in s.random_strides]
    elif ub.pattern == ("random", "seq"):
        pairs = [(r, b) for _, b in s.pairs if b in (E, 64) for r in s.random_strides]
    else:
        pairs = list(s.pairs)
    for ra, rb in s.ratios:
        for sa, sb in dict.fromkeys(pairs):
            a = _stream(ub, 0, footprint * ra / (ra + rb), sa)
            b = _stream(ub, 1, footprint * rb / (ra + rb), sb)
            if a and b:
                yield (a, b)


@dataclass
class Plan:
    configs: list[Config]
    mode: str
    threads: list[int]
    notes: list[str] = field(default_factory=list)


def plan(inv: Inventory, topology: Sequence[Cpu], mode: str = "default",
         kernels: Sequence[Microbenchmark] | None = None, threads: Sequence[int] | None = None,
         memory_limit: int | None = None, mpi_missing: str | None = None) -> Plan:
    """The configurations of a profile of the node `inv` (threads on the CPUs of `topology`).

    `mpi_missing`: why the node cannot run the mpi kernels (registry.microbench.mpi.missing): the
    default sweep then goes without them, with a note; asking for them is an error."""
    if mode not in MODES:
        raise UserError(f"unknown profile mode {mode!r} (known: {', '.join(MODES)})")
    s = SETTINGS[mode]
    n_cpus = len(topology)
    if threads is None:
        threads = default_threads(n_cpus)
    bad = [t for t in threads if t < 1 or t > n_cpus]
    if bad:
        raise UserError(f"--threads {', '.join(map(str, bad))}: this node has {plural(n_cpus, 'CPU')} "
                        f"({inv.cpu_list}), so threads must be 1..{n_cpus}")
    threads = sorted(set(threads))
    notes = []
    if mpi_missing and kernels is not None and any(ub.family == "mpi" for ub in kernels):
        raise UserError(f"--kernels asks for MPI kernels but {mpi_missing}; "
                        "install an MPI, e.g. apt-get install openmpi-bin libopenmpi-dev")
    if kernels is None:
        kernels = [catalog.get(k) for k in QUICK_KERNELS] if mode == "quick" else list(catalog.ALL)
        if mpi_missing and mode != "quick":
            kernels = [ub for ub in kernels if ub.family != "mpi"]
            notes.append(f"the MPI kernels were skipped: {mpi_missing} (apt-get install openmpi-bin "
                         "libopenmpi-dev adds them)")
    mpi_kernels = [ub for ub in kernels if ub.family == "mpi"]
    kernels = [ub for ub in kernels if ub.family != "mpi"]
    limit = memory_limit or (inv.memory_bytes // 4 if inv.memory_bytes else 8 * KB**3)
    if not inv.data_caches() and kernels:
        notes.append("the inventory lists no caches: sizes assume L1 32 KiB, L2 1 MiB, L3 32 MiB")
    line = next((c.line_bytes for c in data_caches(inv) if c.line_bytes), 64)
    grid = footprint_grid(inv, s.per_octave)
    per_thread = level_points(inv, topology, [topology[0].cpu]) if topology else {}
    configs: list[Config] = []
    for t in threads:
        for placement, cpus in placements(topology, t).items():
            if placement == "scatter" and not s.scatter:
                continue
            points = level_points(inv, topology, cpus)
            for ub in kernels:
                configs += _configs_for(ub, t, placement, cpus, s, grid, points, per_thread, line, inv, topology,
                                        chase_threads=threads if s.chase_all_threads else threads[:1])
    configs += mpi_configs(mpi_kernels, topology, threads, mode, notes)
    kept = [c for c in configs if c.ws_bytes <= limit]
    if len(kept) < len(configs):
        notes.append(f"{plural(len(configs) - len(kept), 'configuration')} skipped: working set above "
                     f"{limit / KB**3:.1f} GiB (a quarter of memory)")
    unique: dict[str, Config] = {}
    for c in kept:
        unique.setdefault(c.key, c)   # the first keeps its level tag
    return Plan(list(unique.values()), mode, threads, notes)


def mpi_configs(kernels: Sequence[Microbenchmark], topology: Sequence[Cpu], threads: Sequence[int], mode: str,
                notes: list[str]) -> list[Config]:
    """The mpi kernels' configurations: one rank per core (never two on a core's SMT siblings
    while a core is free), at every rank count of `threads` from 2. Two ranks run at each pair
    placement the node has (pair_placements: same core complex, same socket, across sockets),
    the ping-pong only there; more ranks run the exchange and allreduce at the compact and
    scatter placements; the Jacobi data generator runs at the first (closest) of them."""
    if not kernels:
        return []
    ranks = [t for t in threads if t >= 2]
    if not ranks:
        notes.append("the MPI kernels need at least 2 ranks (one per CPU): skipped")
        return []
    out = []
    for r in ranks:
        where = pair_placements(topology) if r == 2 else placements(topology, r)
        for placement, cpus in where.items():
            if placement == "scatter" and not SETTINGS[mode].scatter:
                continue
            out += [Config(ub, r, placement, cpus, msg_bytes=size) for ub in kernels
                    if (r == 2 or ub.name != "pingpong") and ub.name != "jacobi" for size in MPI_SIZES[mode]]
        if where and any(ub.name == "jacobi" for ub in kernels):
            out += jacobi_configs(catalog.get("jacobi"), r, *next(iter(where.items())), mode)
    return out


def jacobi_configs(ub: Microbenchmark, ranks: int, placement: str, cpus: tuple[int, ...], mode: str) -> list[Config]:
    """The Jacobi data generator's configurations at `ranks` ranks, at the closest placement only
    (the sweep is the product of four parameters: one placement keeps it short)."""
    sides, depths, msgs, ops = JACOBI_SWEEP[mode]
    return [Config(ub, ranks, placement, cpus, n=n, msg_bytes=d * n * 8, msgs=m, ops=o)
            for n in sides for d in depths if d <= n for m in msgs for o in ops]


def _configs_for(ub: Microbenchmark, t: int, placement: str, cpus: tuple[int, ...], s: SweepSettings,
                 grid: list[int], points: dict[str, int], per_thread: dict[str, int], line: int,
                 inv: Inventory, topology: Sequence[Cpu], chase_threads: Sequence[int]) -> list[Config]:
    out: list[Config] = []
    if ub.family == "thesis":
        footprints = [(f, None) for f in grid] if s.grid else [(f, lvl) for lvl, f in per_thread.items()]
        for footprint, lvl in footprints:
            for streams in _thesis_streams(ub, footprint, s):
                c = Config(ub, t, placement, cpus, streams=streams, level=lvl)
                out.append(replace(c, ws_level=level_of(inv, topology, cpus, c.ws_bytes)))
    elif ub.family == "bandwidth":
        sizes = list(points.items())
        if s.bandwidth_grid:
            sizes += [(None, f * t) for f in grid]
        arrays = catalog.ARRAYS[ub.name]
        llc = llc_capacity(inv, topology, cpus)
        for lvl, ws in sizes:
            n = _elems(ws / arrays, 8, 64 * t)
            beyond_llc = n * 8 * arrays > llc
            # Beyond the last-level cache a writer runs with both store kinds: non-temporal stores
            # reach the memory's bandwidth (the headline figure); ordinary stores, which also read
            # every line they write, are what compiled loops do, and scale differently with threads.
            for nt in ((False, True) if beyond_llc and ub.name in catalog.WRITERS else (False,)):
                out.append(Config(ub, t, placement, cpus, n=n, nt=nt, level=lvl,
                                  ws_level=level_of(inv, topology, cpus, n * 8 * arrays)))
    elif ub.family == "latency":
        if t not in chase_threads:
            return out
        sizes = [(lvl, ws // t) for lvl, ws in points.items()]
        if s.chase_grid:
            sizes += [(None, f) for f in grid]
        for lvl, per in sizes:
            n = max(16, per // line)
            out.append(Config(ub, t, placement, cpus, n=n, line=line, level=lvl,
                              ws_level=level_of(inv, topology, cpus, n * line * t)))
    elif ub.name == "gemm":
        out += gemm_configs(ub, t, placement, cpus, points, inv, topology)
    else:
        out.append(Config(ub, t, placement, cpus))
    return out


def gemm_side(ws_bytes: float) -> int:
    """gemm's N for a total working set (C, A and B: 8 N (N + 2K) bytes), the nearest multiple of
    catalog.GEMM_ALIGN."""
    k, align = catalog.GEMM_K, catalog.GEMM_ALIGN
    return max(align, round((math.sqrt(k * k + ws_bytes / 8) - k) / align) * align)


def gemm_configs(ub: Microbenchmark, t: int, placement: str, cpus: tuple[int, ...], points: dict[str, int],
                 inv: Inventory, topology: Sequence[Cpu]) -> list[Config]:
    """gemm at each level point but the innermost (L1: N would be about 15, too small a product to
    block, and every thread reads all of B) whose N, once rounded, still fits that level. Its memory
    point is GEMM_MEMORY_LLCS x the last-level cache in use, not the bandwidth kernels' (at least
    MEMORY_POINT_MIN, 512 MiB): compute-bound, gemm only needs C beyond the caches, and a pass at
    512 MiB (N = 8128) does 4x the flops of one at 128 MiB, about 0.2 s on one core of this VM
    against 0.05 s, so that its repetitions and signature window alone would take seconds."""
    sizes = {**points, "memory": GEMM_MEMORY_LLCS * llc_capacity(inv, topology, cpus)}
    out = []
    for lvl, ws in list(sizes.items())[1:]:
        c = Config(ub, t, placement, cpus, n=gemm_side(ws), level=lvl)
        if level_of(inv, topology, cpus, c.ws_bytes) == lvl:
            out.append(replace(c, ws_level=lvl))
    return out
