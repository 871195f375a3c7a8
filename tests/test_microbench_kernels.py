"""The C kernels compute what they claim: every checksum is recomputed here, independently, from
the kernels' definitions (element values, index sequences, operation order), with fixed passes
so the expected value is known. A kernel that skipped, repeated or misplaced one access, or
combined values wrongly, would fail these."""

import os

import numpy as np
import pytest

from registry.inventory import collect
from registry.microbench.driver import Driver, DriverError
from registry.profile import catalog, sweep
from registry.profile.placement import read_topology

MASK = 2**64 - 1
CPUS = sorted(os.sched_getaffinity(0))



@pytest.fixture
def driver(binary):
    with Driver(binary) as d:
        yield d


def value(i: int) -> float:
    return 1.0 + (((i * 2654435761) % 2**32) >> 28) / 2**20


def xorshift(x: int) -> int:
    x ^= (x << 13) & MASK
    x ^= x >> 7
    x ^= (x << 17) & MASK
    return x


def seed(tid: int, stream: int) -> int:
    return ((0x9E3779B97F4A7C15 * (tid + 1) + 0xD1B54A32D192ED03 * (stream + 1)) & MASK) | 1


class Cursor:
    """Index sequence of one stream of one thread over one repetition (ub_stream_loop.h)."""

    def __init__(self, n, stride, elem, pattern, tid, slot):
        self.n, self.se, self.pattern = n, stride // elem, pattern
        self.m = n // self.se
        self.i, self.rng = 0, seed(tid, slot)

    def start_pass(self, p):
        if self.pattern == "seq":
            self.i = p % self.se
            self.lim, self.span = self.i + self.m * self.se, self.m * self.se

    def next(self):
        i = self.i
        if self.pattern == "seq":
            self.i += self.se
            if self.i >= self.lim:
                self.i -= self.span
        else:
            self.rng = xorshift(self.rng)
            self.i += 1 + (((self.rng >> 32) * (2 * self.se - 1)) >> 32)
            if self.i >= self.n:
                self.i -= self.n
        return i


def expected_stream(op, dtype, streams, threads, passes):
    """Reference of the thesis kernel: returns (checksum, iterations per repetition)."""
    t = np.float32 if dtype == "f32" else float
    elem = 4 if dtype == "f32" else 8
    total_all = 0.0
    iters = max(n // (s // elem) for n, s, _ in streams)
    for tid in range(threads):
        cur = [Cursor(n, s, elem, pat, tid, k) for k, (n, s, pat) in enumerate(streams)]
        total = 0.0
        for p in range(passes):
            for c in cur:
                c.start_pass(p)
            acc = [t(1.0) if op == "prod" else t(0.0)] + [t(0.0)] * 3
            for j in range(iters):
                slot = j % 4 if op == "sum4" and j < iters - iters % 4 else 0
                x = t(value(cur[0].next()))
                if len(cur) == 1:
                    acc[slot] = t(acc[slot] * x) if op == "prod" else t(acc[slot] + x)
                else:
                    y = t(value(cur[1].next()))
                    acc[slot] = t(acc[slot] + t(x * y)) if op == "mul" else t(acc[slot] + t(x + y))
            total += float(acc[0]) + float(acc[1]) + float(acc[2]) + float(acc[3])
        total_all += total
    return total_all, passes * iters


STREAM_CASES = [
    # op, dtype, streams [(n, stride bytes, pattern)], exact?
    ("sum", "f64", [(1000, 8, "seq")], True),
    ("prod", "f64", [(999, 24, "seq")], True),         # 333 accesses: the unrolled loop's remainder
    ("sum4", "f64", [(1030, 16, "seq")], True),
    ("sum", "f64", [(1000, 40, "random")], True),
    ("add", "f64", [(1000, 8, "seq"), (300, 16, "seq")], True),      # b wraps around its own region
    ("add", "f32", [(1024, 4, "seq"), (600, 12, "random")], True),
    ("mul", "f64", [(900, 24, "random"), (700, 8, "seq")], False),   # a*b may be fused: last-bit freedom
]


@pytest.mark.parametrize("op,dtype,streams,exact", STREAM_CASES)
@pytest.mark.parametrize("access", ["C", "P"])
def test_stream_kernel_checksums(driver, op, dtype, streams, exact, access):
    threads = min(2, len(CPUS))
    reply = driver.run(_stream_args(op, dtype, streams, threads, access))
    want, iters = expected_stream(op, dtype, streams, threads, 3)
    assert reply["iters"] == iters
    assert reply["passes"] == 3 and len(reply["times"]) == 2
    if exact:
        assert reply["checksum"] == want
    else:
        assert reply["checksum"] == pytest.approx(want, rel=1e-12)
    elem = 4 if dtype == "f32" else 8
    assert reply["bytes"] == iters * elem * len(streams) * threads


def _stream_args(op: str, dtype: str, streams, threads: int, access: str = "C") -> dict:
    args = {"kernel": "stream", "op": op, "dtype": dtype, "threads": threads, "cpus": CPUS[:threads],
            "reps": 2, "passes": 3}
    for slot, (n, stride, pattern) in zip("ab", streams):
        args.update({f"{slot}.n": n, f"{slot}.stride": stride, f"{slot}.access": access, f"{slot}.pattern": pattern})
    return args


def test_a_region_one_element_longer_is_told_apart(driver):
    """The comparison is sensitive: the kernel's checksums over 1000 and 1001 elements differ, and
    each is its own reference's, not its neighbour's (a kernel off by one element fails this)."""
    sizes = (1000, 1001)
    got = [driver.run(_stream_args("sum", "f64", [(n, 8, "seq")], 1))["checksum"] for n in sizes]
    want = [expected_stream("sum", "f64", [(n, 8, "seq")], 1, 3)[0] for n in sizes]
    assert got == want and want[0] != want[1]


@pytest.mark.parametrize("kernel,per_elem", [("copy", 1.0), ("scale", 3.0), ("add", 3.0), ("triad", 7.0),
                                             ("store", 3.0)])
@pytest.mark.parametrize("nt", [0, 1])
def test_bandwidth_kernels_write_every_element(driver, kernel, per_elem, nt):
    n = 64 * 1000 + 8   # the last thread's part ends in a scalar tail
    threads = min(2, len(CPUS))
    reply = driver.run({"kernel": kernel, "threads": threads, "cpus": CPUS[:threads], "n": n, "nt": nt,
                        "reps": 1, "passes": 2})
    assert reply["checksum"] == per_elem * n
    chunk = n // threads // 64 * 64
    assert reply["iters"] in (2 * chunk, 2 * (n - chunk * (threads - 1)))


def test_load_kernel_reads_every_element(driver):
    n = 64 * 777 + 5
    reply = driver.run({"kernel": "load", "threads": 1, "cpus": CPUS[:1], "n": n, "reps": 1, "passes": 4})
    assert reply["checksum"] == 4.0 * n
    assert reply["bytes"] == 4 * 8 * n


def test_chase_is_one_cycle_through_every_line(driver):
    n = 5000
    reply = driver.run({"kernel": "chase", "threads": 1, "cpus": CPUS[:1], "n": n, "line": 64, "reps": 2,
                        "passes": 3})
    assert reply["checksum"] == n * (n - 1) / 2
    assert reply["iters"] == 3 * 1024


def test_one_cpu_named_twice_runs_two_threads_on_it(driver):
    """scripts/bench_oversubscription.py's premise: `cpus=c,c` puts two threads, each with its own
    chain, on one CPU (docs/validation.md, "Two threads on one CPU")."""
    n = 5000
    reply = driver.run({"kernel": "chase", "threads": 2, "cpus": [CPUS[0], CPUS[0]], "n": n, "line": 64,
                        "reps": 1, "passes": 3})
    assert reply["ok"] and reply["threads"] == 2 and reply["cpus"] == [CPUS[0], CPUS[0]]
    assert reply["checksum"] == n * (n - 1) / 2              # thread 0's cycle, walked once
    assert reply["bytes"] == 2 * 3 * 1024 * 64               # both threads' lines, every pass


def test_reps_0_prepares_for_more(driver):
    """A signature window's preparing run: calibration only, no timed repetition; `more` then times."""
    reply = driver.run({"kernel": "triad", "threads": 1, "cpus": CPUS[:1], "n": 4096, "reps": 0, "target": 0.01})
    assert reply["times"] == [] and reply["passes"] > 1
    assert len(driver.more(2)) == 2


def test_warmup_sets_the_passes_of_the_untimed_repetition(driver):
    """A signature window warms up at a tenth of its passes (registry/profile/signatures.py): with
    fixed passes, the preparing run's untimed repetition is `warmup` passes, not a whole repetition."""
    import time

    config = {"kernel": "triad", "threads": 1, "cpus": CPUS[:1], "n": 4096, "reps": 1, "target": 0.05}
    calibrated = driver.run(config)
    per_pass = calibrated["times"][0] / calibrated["passes"]
    passes = int(0.3 / per_pass)    # a repetition of about 0.3 s

    def preparing(**extra) -> float:
        t0 = time.perf_counter()
        assert driver.run({**config, "reps": 0, "passes": passes, **extra})["times"] == []
        return time.perf_counter() - t0

    whole = preparing()
    assert whole >= 0.15 and preparing(warmup=1) < whole / 3
    assert len(driver.more(1)) == 1     # the window's repetitions still run at `passes`


def test_verify_0_skips_the_chase_walk(driver):
    """A signature window's preparing run skips the walk of the whole cycle (1.4 s at 512 MiB): the
    checksum is then where the chase stopped, not the sum of every line index."""
    n = 5000
    reply = driver.run({"kernel": "chase", "threads": 1, "cpus": CPUS[:1], "n": n, "line": 64, "reps": 1,
                        "passes": 3, "verify": 0})
    assert 0 <= reply["checksum"] < n and reply["iters"] == 3 * 1024


def test_fp_kernels_follow_the_closed_form(driver):
    info = driver.info()
    x, y, passes = 0.9999999, 1e-7, 5
    steps = passes * 64
    fixed = y / (1 - x)

    def chains(count):
        return sum(fixed + x**steps * ((0.5 + k / 1024) - fixed) for k in range(count))

    peak = driver.run({"kernel": "peak_fma", "threads": 1, "cpus": CPUS[:1], "reps": 1, "passes": passes})
    assert peak["checksum"] == pytest.approx(chains(info["fma_lanes"] * info["fma_chains"]), rel=1e-9)
    assert peak["flops"] == 2 * steps * info["fma_lanes"] * info["fma_chains"]
    scalar = driver.run({"kernel": "scalar_fp64", "threads": 1, "cpus": CPUS[:1], "reps": 1, "passes": passes})
    assert scalar["checksum"] == pytest.approx(chains(8), rel=1e-9)


def test_dependent_chain_follows_its_closed_form(driver):
    """fp_chain's one chain a = (a*x + y)/d is affine: a_n = f + r^n (a_0 - f), r = x/d, f = y/(d-x) = 1,
    so one step more or less (or a second chain) would move the checksum by ~1e-7 of itself."""
    x, y, d, passes = 0.9999999, 2e-7, 1.0000001, 5
    steps = passes * 64
    r, fixed = x / d, y / (d - x)
    reply = driver.run({"kernel": "fp_chain", "threads": 1, "cpus": CPUS[:1], "reps": 1, "passes": passes})
    assert reply["checksum"] == pytest.approx(fixed + r**steps * (0.5 - fixed), rel=1e-9)
    assert reply["flops"] == 3 * steps     # the FMA's two and the divide
    assert reply["iters"] == steps
    if len(CPUS) >= 2:                     # one chain per thread, the same on each
        both = driver.run({"kernel": "fp_chain", "threads": 2, "cpus": CPUS[:2], "reps": 1, "passes": passes})
        assert both["checksum"] == pytest.approx(2 * reply["checksum"], rel=1e-12)
        assert both["flops"] == 2 * reply["flops"]


def test_dependent_chain_is_latency_bound(driver):
    """What fp_chain is for: one thread of it leaves the core's FP pipes idle for most of every step
    (each FMA and divide waits for the one before), so it runs many times fewer flops per second
    than scalar_fp64's eight independent FMA chains on the same core (~23x on this VM's EPYC core).
    That idle capacity is what a second hardware thread of the core uses (docs/microbench.md). The
    bound, 12x, is above what eight independent chains of the same FMA + divide reach (bound by the
    divider's throughput: 6-8x below scalar_fp64 here) and below the latency-bound ratio. Best of
    several short repetitions, both measured here: a busy host slows either, not the ratio's order."""
    def rate(kernel):
        reply = driver.run({"kernel": kernel, "threads": 1, "cpus": CPUS[:1], "reps": 9, "target": 0.005})
        return reply["flops"] / min(reply["times"])

    chain, scalar = rate("fp_chain"), rate("scalar_fp64")
    assert chain * 12 < scalar, f"fp_chain {chain / 1e9:.2f} GFLOP/s against scalar_fp64 {scalar / 1e9:.2f}"


GEMM_K = 64


def gemm_checksum(n: int, passes: int) -> float:
    """gemm's verify() from its closed form (microbench/ub_gemm.c): after `passes` passes from C = 0,
    C = passes x A B exactly (every value a multiple of 1/4), weighted by 1 + (i + 2j mod 8)."""
    i, j, k = np.arange(n)[:, None], np.arange(n)[None, :], np.arange(GEMM_K)
    a = 0.25 * ((i + 2 * k[None, :]) % 5)
    b = (3 * k[:, None] + j) % 7 - 2.0
    return float((passes * (a @ b) * (1 + (i + 2 * j) % 8)).sum())


@pytest.mark.parametrize("n,threads", [(64, 1), (320, 1), (320, 2), (448, 3)])
def test_gemm_is_the_rank_k_update_of_its_closed_form(driver, n, threads):
    """Every element of C, on every thread's rows (3 threads split 448 rows 148/148/152, unpinned where
    there are fewer CPUs), in full and partial panels of B (320 = 256 + 64 columns): the warm-up
    repetition and the timed ones each add `passes` updates to C, which the next configuration resets."""
    passes, reps = 2, 2
    config = {"kernel": "gemm", "threads": threads, "n": n, "reps": reps, "passes": passes,
              **({"cpus": CPUS[:threads]} if threads <= len(CPUS) else {})}
    reply = driver.run(config)
    assert reply["checksum"] == gemm_checksum(n, passes * (1 + reps))
    assert reply["flops"] == 2 * n * n * GEMM_K * passes                  # one update of C per pass
    assert reply["bytes"] == 8 * (2 * n * n + 2 * n * GEMM_K) * passes    # C read and written, A and B once
    assert driver.run(config)["checksum"] == reply["checksum"]


def test_gemm_is_compute_bound_with_its_matrices_in_memory(driver):
    """What gemm is for: at its memory point (this node's plan) it runs at a sizeable share of
    peak_fma's rate (about 65% on this VM's EPYC core) and many times the flops of the memory-bound triad
    at its own memory point (2 flops per 24 bytes: 20x fewer here). Best of several repetitions of each, measured
    here: a busy host slows any of them, not the ratios' order."""
    inv = collect()
    plan = sweep.plan(inv, read_topology(inv.cpus), "quick", [catalog.get("gemm"), catalog.get("triad")],
                      threads=[1])
    memory = {c.ub.name: c for c in plan.configs if c.level == "memory" and not c.nt}

    def rate(args: dict) -> float:
        reply = driver.run({**args, "reps": 5, "target": 0.02})
        return reply["flops"] / min(reply["times"])

    peak = rate({"kernel": "peak_fma", "threads": 1, "cpus": CPUS[:1]})
    gemm, triad = (rate({**memory[k].driver_args(), "cpus": CPUS[:1]}) for k in ("gemm", "triad"))
    assert gemm > 0.25 * peak and gemm > 4 * triad, \
        f"gemm {gemm / 1e9:.2f} GFLOP/s, peak_fma {peak / 1e9:.2f}, triad {triad / 1e9:.2f}"


def test_integer_kernel_is_the_lcg(driver):
    passes = 3
    xs = list(range(1, 9))
    for _ in range(passes * 64):
        xs = [(v * 6364136223846793005 + 1442695040888963407) & MASK for v in xs]
    reply = driver.run({"kernel": "int_ops", "threads": 1, "cpus": CPUS[:1], "reps": 1, "passes": passes})
    assert reply["checksum"] == float(sum(xs) & MASK) / 2**64


def test_branchy_integer_kernel_is_the_byte_hash(driver):
    passes = 3
    x, table = 88172645463325252, []
    for _ in range(2048):      # xorshift64 bytes
        x ^= (x << 13) & MASK
        x ^= x >> 7
        x ^= (x << 17) & MASK
        table.append((x >> 32) & 0xFF)
    h = 14695981039346656037
    for _ in range(passes):
        for b in table:
            h = ((h ^ b) * 1099511628211) & MASK if b & 1 else ((h + (b << 3)) & MASK) ^ (h >> 29)
    reply = driver.run({"kernel": "int_branch", "threads": 1, "cpus": CPUS[:1], "reps": 1, "passes": passes})
    assert reply["checksum"] == h / 2**64
    assert reply["flops"] == passes * 2048


def test_threads_run_on_the_cpus_given(driver):
    for cpu in CPUS[:2]:
        reply = driver.run({"kernel": "peak_fma", "threads": 1, "cpus": [cpu], "reps": 1, "passes": 10})
        assert reply["cpus"] == [cpu]
    if len(CPUS) >= 2:
        reply = driver.run({"kernel": "load", "threads": 2, "cpus": [CPUS[1], CPUS[0]], "n": 4096, "reps": 1})
        assert reply["cpus"] == [CPUS[1], CPUS[0]]


def test_more_repeats_the_same_configuration(driver):
    driver.run({"kernel": "peak_fma", "threads": 1, "cpus": CPUS[:1], "reps": 2, "target": 0.001})
    assert len(driver.more(3)) == 3


def test_calibration_reaches_the_target(driver):
    reply = driver.run({"kernel": "scalar_fp64", "threads": 1, "cpus": CPUS[:1], "reps": 3, "target": 0.004})
    assert reply["passes"] > 1
    assert max(reply["times"]) >= 0.002   # half the target: calibration grows passes until reached


@pytest.mark.parametrize("args,fragment", [
    ({"kernel": "nope"}, "unknown kernel"),
    ({"kernel": "stream", "op": "sum", "a.n": 100, "a.stride": 12, "a.access": "C", "a.pattern": "seq"},
     "multiple of 8"),
    ({"kernel": "stream", "op": "add", "a.n": 100, "a.stride": 8, "a.access": "C", "a.pattern": "seq"},
     "number of streams"),
    ({"kernel": "load", "threads": 2, "cpus": [0], "n": 4096}, "one CPU per thread"),
    ({"kernel": "peak_fma", "cpus": [100000]}, "out of range"),
    ({"kernel": "peak_fma", "cpus": [1000]}, "cannot pin"),
    ({"kernel": "gemm", "n": 100}, "multiple of 64"),
])
def test_driver_rejects_bad_configs(driver, args, fragment):
    with pytest.raises(DriverError, match=fragment):
        driver.run({"reps": 1, **args})
    # the driver is still usable afterwards
    assert driver.run({"kernel": "peak_fma", "threads": 1, "reps": 1, "passes": 1})["ok"]
