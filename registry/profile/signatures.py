"""Signatures of microbenchmark configs, measured the way `nodereg trace` measures phases.

`nodereg match` places a phase among the configs by comparing signatures taken on the same node
with the same instruments: the /proc sampler of registry.trace (CPU use, active threads, working set
over the last-level cache, faults, ...) and, where the node has a PMU, perf's counters. So while the
driver runs a config for a short window, the same TreeSampler (and `perf stat`, attached to the
driver) watches the driver process, and the same `proc_signature` / `counter_signature` reduce the
samples. The third, `mix` (registry.measure.hotmix), samples where the
driver runs with perf's cpu-clock timer, PMU or not, and describes the kernel's loop by its
instruction mix. The fourth source, cachegrind, is measured by registry.profile.cachegrind_pass on
request.

Only a representative subset is measured, since a window costs ~0.4 s: one config per kernel,
cache level and thread count (placement does not change what /proc sees), for kernels that
differ in kind: triad, load and store for bandwidth (copy, scale and add look like triad to
/proc and to cachegrind; store-only writes every line it touches, which cachegrind's share of
writes tells apart), the pointer chase, the vector and scalar FP64 kernels, the integer
multiply-add chains and the branchy integer hash (so that integer phases have references of
their own kind, not only FP and memory kernels), the one dependent FP64 chain (fp_chain: the
reference whose rate a core's second hardware thread doubles, as it doubles latency-bound phases
such as NPB EP's), the blocked matrix product (gemm, at each of its levels: compute-bound work
on a working set from the caches to memory, as blocked BLAS does, which otherwise matched the
memory streams), and the thesis's mbw1c. The other configs are not references for `nodereg
match` (they stay in the profile for everything else).

A window holds only repetitions of the config's kernel: the driver prepares the config (first touch
of its buffers, the chase's cycle, calibration: `run` with reps=0) before the window opens, so the
working set read in the window is what the kernel touches, not what preparing it did. Each working-
set read walks the page tables of the driver's whole memory, and the sweep's driver keeps every
kernel's buffers (2-3.6 GB after the memory point): there, reads cost 0.1-0.3 s of CPU each, several
per window, and were two thirds of `profile --quick` (issue 30). So the configs that fit in the
caches run on a driver of their own, whose memory is only theirs (tens of MB: a read costs a few ms,
so the sampler reads at every interval, and the median of the reads drops a stray one: shared
library pages that other processes mark referenced add up to 1.3 MB to one read), and only the
configs beyond the last-level cache run on the sweep's driver, whose buffers they reuse. Their
working set is read at the window's start and end only: one read of the whole window, of hundreds of
MB. (Reads in between, as the budget allowed, left the last one a tail after the kernel had stopped:
main's windows read 3.4 to 22 LLC sizes for a 512 MiB buffer, these 16.0.)
"""

import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Sequence

from registry.microbench.driver import Driver
from registry.profile.sweep import Config
from registry.measure.sampler import TreeSampler
from registry.measure import counters as perf
from registry.measure import hotmix
from registry.measure.signature import counter_signature, proc_signature, spans_in, wss_reads

INTERVAL_S = 0.1        # the default interval of `nodereg trace`
WSS_BUDGET = 0.25       # the driver's speed is not being measured here: read the working set often
REP_S = 0.1             # one repetition (the driver calibrates its passes to it)
# The sampled window: several samples at the trace interval and working-set reads (their median drops
# a stray read: with two repetitions, three reads, the small configs of one profile read 1.2-1.6 MB)
WINDOW_REPS = 3
WINDOW_S = REP_S * WINDOW_REPS   # a trace's working-set reads cover at most this (sampler.WSS_WINDOW_S)
COST_S = WINDOW_S + REP_S   # with the preparation: calibration
WARMUP_SHARE = 10   # the warm-up before a window at the sweep's passes: a tenth of a repetition (46 windows
                    # of `profile --quick`: 4 s less than a whole one each)


SIGNED_KERNELS = frozenset({"triad", "load", "store", "chase", "peak_fma", "scalar_fp64", "int_ops", "int_branch",
                            "fp_chain", "gemm", "mbw1c"})


def representatives(configs: Sequence[Config]) -> list[Config]:
    """One config per (kernel, cache level, threads) of SIGNED_KERNELS: the first of each in plan
    order, never one with non-temporal stores. Compilers emit ordinary stores unless told
    otherwise, and neither /proc nor cachegrind can tell the two kinds apart, so an application's
    memory-bound phase is matched to (and projected with) the ordinary-store twin."""
    seen, out = set(), []
    for c in configs:
        key = (c.ub.name, c.ws_level or c.level, c.threads)
        if c.ub.name in SIGNED_KERNELS and not c.nt and key not in seen:
            seen.add(key)
            out.append(c)
    return out


def measure(driver: Driver, config: Config, llc_bytes: int | None,
            passes: int | None = None, mix_windows: list | None = None) -> dict[str, dict[str, float]]:
    """Prepare `config` on the driver (its buffers first-touched, its passes set), then run
    WINDOW_REPS repetitions under the trace sampler (and perf, where the node counts, and perf's
    timer samples for the instruction mix, where perf runs): its {source: {metric: value}}. The
    window holds only repetitions, so its working-set reads are the memory the kernel touches
    (preparing fills every array of a bandwidth kernel, the load kernel's two unused ones too, and
    builds the chase's cycle). `passes`: those
    of a REP_S repetition, from the sweep's measurement of the config (`passes_for`); without
    them the driver calibrates, which costs a few short repetitions and overshoots REP_S by up to
    a fifth (its passes grow by 1.2 x the ratio still missing). `mix_windows`: a perf already
    samples the driver for several windows (`measure_all`), so none is started here; the window's
    (config key, start, end) is appended for the caller to take its mix from those samples."""
    # reps=0: prepare (and calibrate, or warm up at a tenth of the given passes: the window times
    # nothing, its repetitions need only the threads started and the data in place) only;
    # verify=0: the sweep verified this config (the chase's walk of its cycle: 1.4 s at 512 MiB)
    fixed = {"passes": passes, "warmup": max(1, passes // WARMUP_SHARE)} if passes else {"target": REP_S}
    driver.run({**config.driver_args(), "reps": 0, "verify": 0, **fixed})
    own_mix = mix_windows is None and hotmix.available()
    # perf's timer is enabled before the window opens (it took 0.15 s to answer here, longer on a
    # loaded machine): the window's 0.3 s then hold only the kernel, for every source
    with hotmix.watching(driver.proc.pid) if own_mix else contextlib.nullcontext([]) as mix_samples:
        sampler = TreeSampler(driver.proc.pid, wss_budget=None if beyond_caches(config) else WSS_BUDGET)
        t0 = time.monotonic()
        sampler.prime(0.0)
        stop = threading.Event()

        def sample_until_stopped() -> None:
            while not stop.wait(INTERVAL_S):
                sampler.sample(time.monotonic() - t0)

        thread = threading.Thread(target=sample_until_stopped, daemon=True)
        thread.start()
        counting = perf.watching(driver.proc.pid, INTERVAL_S) if perf.available() else contextlib.nullcontext([])
        try:
            with counting as counter_rows:
                opened = time.monotonic()
                driver.more(WINDOW_REPS)
        finally:
            stop.set()
            thread.join()
        end = time.monotonic() - t0
    if mix_windows is not None:
        mix_windows.append((config.key, opened, t0 + end))
    # the driver lives on (it is not a zombie whose memory is gone), so this last row keeps its
    # working set, read now whatever the budget says: on a 16-CPU host with a 300 MiB L3 a read of
    # the driver's RSS cost more than a quarter of the window, the budget put the next read past the
    # window's end: 64 of the 16-CPU node's 72 representative configs had no working set (none at
    # 16 threads), so a phase shared no feature with any 16-thread reference (docs/validation.md)
    sampler.sample(end, read_wss=True)
    whole = [[0.0, end]]
    sig = {"proc": proc_signature(spans_in(sampler.rows, whole), llc_bytes, wss_reads(sampler.rows, whole, INTERVAL_S)),
           "counters": counter_signature(counter_rows), "mix": hotmix.mix(mix_samples)}
    return {source: metrics for source, metrics in sig.items() if metrics}


def beyond_caches(config: Config) -> bool:
    """A config whose working set is memory-resident: its window runs on the sweep's driver."""
    return (config.ws_level or config.level) == "memory"


def passes_for(measurements: Sequence) -> dict[str, int]:
    """Config key -> the passes of one REP_S repetition, from the sweep's measurements
    (registry.profile.runner.Measurement: its passes and its repetitions' median time): the
    signature window then needs no calibration of its own. The quick profile's 46 windows took
    0.51 s each calibrating and 0.41 s at the sweep's passes (three repetitions of 0.12 s against
    0.10 s, and the calibration's first short ones)."""
    out = {}
    for m in measurements:
        median = statistics.median(m.times) if m.times else 0.0
        if median > 0 and m.passes > 0:
            out[m.config.key] = max(1, round(m.passes * REP_S / median))
    return out


def measure_all(driver: Driver, configs: Sequence[Config], llc_bytes: int | None,
                advance: Callable[[Config, float], None] = lambda c, w: None,
                passes: dict[str, int] | None = None) -> dict[str, dict]:
    """Signatures of the representatives of `configs`, by config key: those that fit in the caches
    on a new driver of the same build (small memory: cheap working-set reads), then those beyond
    the caches on `driver`, the sweep's, whose buffers they reuse. `passes`: `passes_for` the
    sweep's measurements (a config without: calibrated)."""
    chosen = representatives(configs)
    passes = passes or {}
    with Driver(driver.binary) as small:
        out = _measured(small, [c for c in chosen if not beyond_caches(c)], llc_bytes, advance, passes)
    out |= _measured(driver, [c for c in chosen if beyond_caches(c)], llc_bytes, advance, passes)
    return {c.key: out[c.key] for c in chosen}


def _measured(driver: Driver, configs: Sequence[Config], llc_bytes: int | None,
              advance: Callable[[Config, float], None], passes: dict[str, int]) -> dict[str, dict]:
    """`measure` each of `configs` on `driver` under one perf for all their windows, each window's
    mix taken from its stretch of the samples. A perf per window took 0.08 s to start and stop,
    of each of `profile --quick`'s 46 windows, and sampled only the half of the window after it
    was ready; this one is enabled before the first window opens."""
    if not configs:
        return {}
    windows: list[tuple[str, float, float]] = []
    sampling = hotmix.watching(driver.proc.pid) if hotmix.available() else contextlib.nullcontext(None)
    out = {}
    with sampling as samples:
        for config in configs:
            out[config.key] = measure(driver, config, llc_bytes, passes.get(config.key),
                                      None if samples is None else windows)
            advance(config, COST_S)
    for key, start, end in windows:   # the samples arrive once perf has exited
        if metrics := hotmix.mix(samples, [[start, end]]):
            out[key]["mix"] = metrics
    return out
