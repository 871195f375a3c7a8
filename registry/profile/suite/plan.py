"""Which configs of the Spare Cores suite this machine measures, and their keys.

Keys follow the import contract: ``sparecores:<task>:<what>[:<param>...]:<threads>``, threads ``1t``
(one) or ``all`` (every vCPU of the node; stored as ub_configs.threads = 0). The tasks and what each
ran upstream (SpareCores/sc-inspector, inspector/tasks.py, and SpareCores/sc-images):

- ``stressng``: stress-ng's stressors one at a time, on 1 and on all CPUs (bogo ops/s, real time);
- ``stressng:cpu_all``: the older stressng / stressngsinglecore tasks, ``stress-ng --cpu N`` (every
  cpu method in turn), N = all and 1: measured on more servers than the 85-stressor task;
- ``stressngfull``: ``stress-ng --cpu N --cpu-method div16`` (the "SCore"), N = 1 and all;
- ``openssl``: ``openssl speed -mr -elapsed -multi $(nproc) -evp ALG`` per block size (bytes/s);
- ``membench``: SpareCores/sc-membench, read/write/copy bandwidth on all CPUs (MB/s, a buffer of
  the size per thread) and pointer-chase latency on one (ns), at cache-aware sizes; here by our
  kernels (load, store, copy, chase: registry.profile.suite.membench);
- ``bw_mem``: lmbench's ``bw_mem -P $(nproc)`` rd / wr / rdwr (MB/s), on nearly every server; here
  by our kernels too (load, store, scale).

Size labels are the importer's (registry.io.sparecores.micro), so that a key measured here is the
key imported there.

``--quick`` keeps a subset that still spans the kinds of work (integer, floating point, vector,
memory, system calls, hashing, ciphers, the memory curve): about 90 s on a 2-vCPU machine.
"""

from dataclasses import dataclass

from registry.errors import UserError
from registry.io.sparecores.micro import _bw_mem_size, size_label
from registry.values import listed

SUITE = "sparecores"
ALL_THREADS = 0   # ub_configs.threads of an 'all' config: every CPU of the node it runs on

# stress-ng stressors of Spare Cores' stressng_benchmarks task (85), by the group its output names
STRESSORS = {
    "compute": ("cpu", "branch", "atomic", "funccall", "funcret", "hash", "rotate", "str", "wcs", "nop", "bitops",
                "intmath", "prime", "fma", "fp", "trig", "matrix", "matrix-3d", "eigen", "vecmath", "vecfp",
                "vecshuf", "vecwide", "monte-carlo", "mpfr", "expmath", "logmath", "powmath", "hyperbolic",
                "fractal", "veccmp", "bsearch", "hsearch", "qsort", "heapsort", "mergesort", "bitonicsort",
                "skiplist", "tree", "malloc", "mcontend", "insertionsort", "bubblesort", "fibsearch", "zlib",
                "jpeg"),
    "crypto": ("crypt", "ipsec-mb"),
    "bandwidth": ("cache", "cacheline", "l1cache", "memcpy", "memrate", "memthrash", "stream", "vm", "cachehammer",
                  "ptr-chase", "spinmem"),
    "system": ("context", "switch", "clone", "fork", "vfork", "fault", "tlb-shootdown", "mprotect", "munmap", "null",
               "zero", "getrandom", "pipe", "eventfd", "hrtimers", "clock", "yield", "resched", "vdso", "usersyscall",
               "priv-instr", "tsc", "x86syscall", "cpu-sched", "timermix", "mtx"),
}
QUICK_STRESSORS = ("cpu", "branch", "intmath", "fp", "matrix", "vecmath", "qsort", "hash", "zlib", "memcpy",
                   "cache", "stream", "switch", "crypt")
OPENSSL_ALGOS = ("blake2b512", "sha256", "sha512", "sha3-256", "sha3-512", "shake128", "shake256", "aes-256-cbc",
                 "aria-256-cbc", "camellia-256-cbc", "sm4-cbc")
OPENSSL_BLOCKS = (16, 64, 256, 1024, 8192, 16384)
QUICK_OPENSSL = (("sha256", (64, 16384)), ("aes-256-cbc", (64, 16384)), ("sha3-256", (16384,)),
                 ("blake2b512", (16384,)))
MEMBENCH_OPS = ("read", "write", "copy", "latency")
MEMBENCH_KB = (16, 64, 512, 1024, 2048, 8192, 16384, 32768, 65536, 131072)   # Zen 4 machines' sizes upstream
QUICK_MEMBENCH_KB = (16, 512, 16384, 131072)
BW_MEM_OPS = ("rd", "wr", "rdwr")
BW_MEM_MB = (0.016384, 0.262144, 1, 2, 4, 8, 16, 32, 64, 256, 512)   # lmbench's sizes upstream, MB (1e6 B)
QUICK_BW_MEM_MB = (0.016384, 1, 16, 512)
TASKS = ("stressng", "stressngfull", "openssl", "membench", "bw_mem")
KERNEL_TASKS = ("membench", "bw_mem")      # measured by our driver; the rest by the tools themselves


@dataclass(frozen=True)
class SuiteConfig:
    """One config of the suite as this machine runs it."""

    task: str                 # stressng | stressngfull | openssl | membench
    what: str                 # stressor, 'cpu-div16', algorithm, membench operation
    params: tuple = ()        # openssl: block bytes; membench: KiB per thread; bw_mem: MB (1e6 B) per process
    threads: int = ALL_THREADS
    family: str = "compute"   # bandwidth | latency | compute | crypto | system

    @property
    def key(self) -> str:
        parts = [SUITE, self.task, self.what]
        if self.task == "membench":
            parts.append(size_label(self.params[0] * 1024))
        elif self.task == "bw_mem":
            parts.append(_bw_mem_size(self.params[0])[0])
        else:
            parts += [str(p) for p in self.params]
        return ":".join(parts + ["1t" if self.threads == 1 else "all"])

    @property
    def ub_name(self) -> str:
        return f"sc-{self.task}"

    @property
    def per_thread_bytes(self) -> int:
        """membench and bw_mem: the buffer of each thread (process)."""
        return self.params[0] * 1024 if self.task == "membench" else _bw_mem_size(self.params[0])[1]

    @property
    def unit(self) -> str:
        return {"stressng": "bogo ops/s", "stressngfull": "bogo ops/s", "openssl": "bytes/s"}.get(
            self.task, "ns" if self.what == "latency" else "MB/s")

    @property
    def higher_is_better(self) -> bool:
        return self.unit != "ns"

    def cost(self, value: float) -> float:
        """profile_runs.median_s of a figure: time-like, lower is faster (the contract)."""
        return 1.0 / value if self.higher_is_better else value


def _family(stressor: str) -> str:
    return next((f for f, names in STRESSORS.items() if stressor in names), "compute")


def plan(quick: bool = False, tasks: list[str] | None = None, available: set[str] | None = None) -> list[SuiteConfig]:
    """The configs to measure, in order (cheap ones first). `tasks`: a subset of TASKS; `available`:
    the stress-ng stressors this stress-ng knows (others are left out: older releases lack some)."""
    tasks = list(tasks or TASKS)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise UserError(f"unknown Spare Cores {listed(unknown, 'task')} (runnable here: {', '.join(TASKS)})")
    out: list[SuiteConfig] = []
    if "stressngfull" in tasks:
        out += [SuiteConfig("stressngfull", "cpu-div16", (), t) for t in (1, ALL_THREADS)]
    if "stressng" in tasks:
        names = QUICK_STRESSORS if quick else [s for group in STRESSORS.values() for s in group]
        names = ["cpu_all"] + [s for s in names if available is None or s in available]
        out += [SuiteConfig("stressng", s, (), t, _family(s)) for s in names for t in (1, ALL_THREADS)]
    if "openssl" in tasks:
        chosen = QUICK_OPENSSL if quick else [(a, OPENSSL_BLOCKS) for a in OPENSSL_ALGOS]
        out += [SuiteConfig("openssl", a, (b,), ALL_THREADS, "crypto") for a, blocks in chosen for b in blocks]
    if "membench" in tasks:
        sizes = QUICK_MEMBENCH_KB if quick else MEMBENCH_KB
        out += [SuiteConfig("membench", op, (kb,), 1 if op == "latency" else ALL_THREADS,
                            "latency" if op == "latency" else "bandwidth") for op in MEMBENCH_OPS for kb in sizes]
    if "bw_mem" in tasks:
        sizes = QUICK_BW_MEM_MB if quick else BW_MEM_MB
        out += [SuiteConfig("bw_mem", op, (mb,), ALL_THREADS, "bandwidth") for op in BW_MEM_OPS for mb in sizes]
    return out
