"""The microbenchmarks nodereg measures, by name, and what each one is made of.

Thesis family (Corredor 2011, Table 3.9 and the names in its profile tables). The thesis defines
mbw1c, mbw2hc, mbw2pc and mbw2r; the other names appear only in its database extracts, so their
meaning here is inferred from those extracts and stated once, in this table:

- trailing c / p: the last stream is shared (C: one region every thread walks) or private (P: a
  region per thread); a first stream of a two-stream kernel is shared, as in every thesis example;
- h: the product variant (mbw2hc is "sum of a x b"; mbw1h* multiplies its elements);
- X: random strides (mbw1cX's stride is a mean jump; mbw2r is the thesis's own random kernel,
  its second stream random; mbwXA2h* has a random first stream);
- U: four independent accumulators instead of one chained one (the thesis's extracts show U
  kernels with 8-byte data like the others, so U is not the element type);
- mbw2pc is single precision (Table 3.9); every other thesis kernel is double precision.

Each kernel is a read-reduce loop unrolled by four (Table 3.6); one iteration reads one element
of every stream; time per iteration is that of the slowest thread.
"""

from dataclasses import dataclass

from registry.errors import UserError

FAMILIES = ("thesis", "bandwidth", "latency", "compute", "mpi")


@dataclass(frozen=True)
class Microbenchmark:
    name: str
    family: str             # thesis | bandwidth | latency | compute | mpi
    kernel: str             # the driver's kernel (ub_driver.c; mpi: ub_mpi.c's)
    description: str
    op: str | None = None   # thesis kernels: sum | prod | sum4 | add | mul
    dtype: str = "f64"
    access: tuple[str, ...] = ()    # per stream: C | P
    pattern: tuple[str, ...] = ()   # per stream: seq | random
    unit: str | None = None         # of profile_runs.value where the kernel stores its own figure

    @property
    def n_streams(self) -> int:
        """Memory streams by construction: a thesis kernel's streams, a bandwidth kernel's arrays,
        the chase's one chain, none for compute kernels."""
        if self.family == "thesis":
            return len(self.access)
        return {"bandwidth": ARRAYS.get(self.name, 0), "latency": 1}.get(self.family, 0)

    @property
    def elem_bytes(self) -> int:
        return 4 if self.dtype == "f32" else 8


def _thesis(name: str, op: str, access: str, pattern: str, description: str, dtype: str = "f64") -> Microbenchmark:
    return Microbenchmark(name, "thesis", "stream", description, op, dtype, tuple(access),
                          tuple(pattern.split(",")))


THESIS = (
    _thesis("mbw1c", "sum", "C", "seq", "sum of a shared stream, stride s"),
    _thesis("mbw1p", "sum", "P", "seq", "sum of a private stream, stride s"),
    _thesis("mbw1hc", "prod", "C", "seq", "product of a shared stream, stride s"),
    _thesis("mbw1hp", "prod", "P", "seq", "product of a private stream, stride s"),
    _thesis("mbw1cX", "sum", "C", "random", "sum of a shared stream, random strides of mean s"),
    _thesis("mbw1pX", "sum", "P", "random", "sum of a private stream, random strides of mean s"),
    _thesis("mbw1Uc", "sum4", "C", "seq", "sum of a shared stream into four independent accumulators"),
    _thesis("mbw1Up", "sum4", "P", "seq", "sum of a private stream into four independent accumulators"),
    _thesis("mbw2c", "add", "CC", "seq,seq", "sum of a_i + b_i, both shared"),
    _thesis("mbw2p", "add", "CP", "seq,seq", "sum of a_i + b_i, b private"),
    _thesis("mbw2hc", "mul", "CC", "seq,seq", "sum of a_i * b_i, both shared"),
    _thesis("mbw2hp", "mul", "CP", "seq,seq", "sum of a_i * b_i, b private"),
    _thesis("mbw2pc", "add", "CP", "seq,seq", "sum of a_i + b_i in single precision, b private", dtype="f32"),
    _thesis("mbw2r", "add", "CP", "seq,random", "sum of a_i + b_i, b private with random strides"),
    _thesis("mbwXA2hc", "mul", "CC", "random,seq", "sum of a_i * b_i, a with random strides, both shared"),
    _thesis("mbwXA2hp", "mul", "CP", "random,seq", "sum of a_i * b_i, a with random strides, b private"),
)

BANDWIDTH = (
    Microbenchmark("copy", "bandwidth", "copy", "STREAM copy c = a (16 B per element)"),
    Microbenchmark("scale", "bandwidth", "scale", "STREAM scale c = q*a (16 B per element)"),
    Microbenchmark("add", "bandwidth", "add", "STREAM add c = a + b (24 B per element)"),
    Microbenchmark("triad", "bandwidth", "triad", "STREAM triad c = a + q*b (24 B per element)"),
    Microbenchmark("load", "bandwidth", "load", "load-only: sum of a (8 B per element)"),
    Microbenchmark("store", "bandwidth", "store", "store-only: c = q (8 B per element)"),
)

LATENCY = (
    Microbenchmark("chase", "latency", "chase",
                   "dependent pointer chase over a random cyclic permutation, one cache line per element"),
)

COMPUTE = (
    Microbenchmark("peak_fma", "compute", "peak_fma", "FP64 peak: independent vector FMA chains"),
    Microbenchmark("scalar_fp64", "compute", "scalar_fp64", "scalar FP64 FMA chains"),
    Microbenchmark("int_ops", "compute", "int_ops",
                   "64-bit integer multiply-add chains (the gflops column holds giga integer ops/s)"),
    Microbenchmark("int_branch", "compute", "int_branch",
                   "byte-wise integer hash over an L1-resident table with a data-dependent branch per byte, as "
                   "parsers and compressors do (the gflops column holds giga bytes hashed per second)"),
    Microbenchmark("fp_chain", "compute", "fp_chain",
                   "one dependent FP64 chain per thread (an FMA, then a divide): latency-bound, as random-number "
                   "and transcendental code is, so a core's second hardware thread doubles it"),
    Microbenchmark("gemm", "compute", "gemm",
                   "register- and cache-blocked FP64 matrix product: the rank-64 update C += A*B of N x N, at one "
                   "working set per cache level and memory (n: N); compute-bound wherever C lies, as blocked BLAS is"),
)

# The node-local communication profile (docs/mpi.md), after the Intel MPI Benchmarks. Each stores
# its time per operation in microseconds (profile_runs.value; pingpong: one-way, half a round
# trip) and, for the two that move point-to-point messages, bandwidth_gbs.
MPI = (
    Microbenchmark("pingpong", "mpi", "pingpong", "MPI ping-pong between two ranks: one-way latency (us) and "
                   "bandwidth (message / one-way time) per message size", unit="us"),
    Microbenchmark("exchange", "mpi", "exchange", "IMB Exchange: every rank sends to and receives from both "
                   "ring neighbours; us per step, bandwidth 4 x message / step time per rank", unit="us"),
    Microbenchmark("allreduce", "mpi", "allreduce", "MPI_Allreduce (sum) of message / 8 doubles over all ranks; "
                   "us per call", unit="us"),
    # Branikas 2024's data generator (microbench/ub_jacobi.c): value = the halo exchange's us per
    # time step (mean rank), tpi_us = the whole step's (slowest rank), bandwidth over the exchange
    Microbenchmark("jacobi", "mpi", "jacobi", "Jacobi 5-point stencil, 1-D decomposed: per time step MSGS halo "
                   "messages to the ring neighbours, then a sweep of OPS operations per point; us of halo "
                   "exchange per step", unit="us"),
)

ALL = THESIS + BANDWIDTH + LATENCY + COMPUTE + MPI
BY_NAME = {ub.name: ub for ub in ALL}
WRITERS = frozenset({"copy", "scale", "add", "triad", "store"})   # kernels that store (non-temporal at memory)
ARRAYS = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "load": 1, "store": 1}  # arrays each bandwidth kernel touches
GEMM_K = 64         # the rank of gemm's update (UB_GEMM_K, microbench/ub_gemm.c)
GEMM_ALIGN = 64     # N is a multiple of this (UB_GEMM_ALIGN)


def sized_per_level(name: str, family: str) -> bool:
    """Whether a kernel's working sets follow each node's caches (one per cache level and one for
    memory), so that its configs compare across nodes by level rather than by size: the bandwidth and
    latency kernels, and gemm, the one compute kernel with a working set."""
    return family in ("bandwidth", "latency") or name == "gemm"


def get(name: str) -> Microbenchmark:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UserError(f"unknown microbenchmark {name!r} (known: {', '.join(BY_NAME)}; "
                        f"or a family: {', '.join(FAMILIES)})") from None


def select(text: str | None) -> list[Microbenchmark] | None:
    """`--kernels` text ('triad,peak_fma', 'thesis', 'mbw1c,latency') -> microbenchmarks; None: all."""
    if text is None:
        return None
    chosen: list[Microbenchmark] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        found = [ub for ub in ALL if ub.family == item] if item in FAMILIES else [get(item)]
        chosen += [ub for ub in found if ub not in chosen]
    if not chosen:
        raise UserError(f"--kernels {text!r} names no microbenchmark")
    return chosen
