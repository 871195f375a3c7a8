"""Signatures of microbenchmark configs, measured the way `nodereg trace` measures phases.

`nodereg match` places a phase among the configs by comparing signatures taken on the same node
with the same instruments: the /proc sampler of registry.trace (CPU use, active threads, working set
over the last-level cache, faults, ...) and, where the node has a PMU, perf's counters. So while the
driver runs a config for a short window, the same TreeSampler (and `perf stat`, attached to the
driver) watches the driver process, and the same `proc_signature` / `counter_signature` reduce the
samples. The third source, cachegrind, is measured by registry.profile.cachegrind_pass on request.

Only a representative subset is measured, since a window costs ~0.4 s: one config per kernel,
cache level and thread count (placement does not change what /proc sees), for kernels that
differ in kind: triad, load and store for bandwidth (copy, scale and add look like triad to
/proc and to cachegrind; store-only writes every line it touches, which cachegrind's share of
writes tells apart), the pointer chase, the vector and scalar FP64 kernels, the integer
multiply-add chains and the branchy integer hash (so that integer phases have references of
their own kind, not only FP and memory kernels), and the thesis's mbw1c. The other configs are not
references for `nodereg match` (they stay in the profile for everything else).
"""

import contextlib
import threading
import time
from collections.abc import Callable, Sequence

from registry.microbench.driver import Driver
from registry.profile.sweep import Config
from registry.measure.sampler import TreeSampler
from registry.measure import counters as perf
from registry.measure.signature import counter_signature, proc_signature, spans_in, wss_reads

WINDOW_S = 0.3          # several samples at the trace interval, and a working-set reading
INTERVAL_S = 0.1        # the default interval of `nodereg trace`
WSS_BUDGET = 0.25       # the driver's speed is not being measured here: read the working set often


SIGNED_KERNELS = frozenset({"triad", "load", "store", "chase", "peak_fma", "scalar_fp64", "int_ops", "int_branch",
                            "mbw1c"})


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


def measure(driver: Driver, config: Config, llc_bytes: int | None) -> dict[str, dict[str, float]]:
    """Run `config` for about WINDOW_S under the trace sampler (and perf, where the node counts);
    its {source: {metric: value}}."""
    sampler = TreeSampler(driver.proc.pid, wss_budget=WSS_BUDGET)
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
            driver.run({**config.driver_args(), "reps": 3, "target": WINDOW_S / 3})
    finally:
        stop.set()
        thread.join()
    end = time.monotonic() - t0
    # the driver lives on (it is not a zombie whose memory is gone), so this last row keeps its
    # working set, read now whatever the budget says: on a 16-CPU host with a 300 MiB L3 a read of
    # the driver's RSS cost more than a quarter of the window, the budget put the next read past the
    # window's end: 64 of the 16-CPU node's 72 representative configs had no working set (none at
    # 16 threads), so a phase shared no feature with any 16-thread reference (docs/validation.md)
    sampler.sample(end, read_wss=True)
    whole = [[0.0, end]]
    sig = {"proc": proc_signature(spans_in(sampler.rows, whole), llc_bytes, wss_reads(sampler.rows, whole, INTERVAL_S)),
           "counters": counter_signature(counter_rows)}
    return {source: metrics for source, metrics in sig.items() if metrics}


def measure_all(driver: Driver, configs: Sequence[Config], llc_bytes: int | None,
                advance: Callable[[Config, float], None] = lambda c, w: None) -> dict[str, dict]:
    """Signatures of the representatives of `configs`, by config key."""
    out = {}
    for config in representatives(configs):
        out[config.key] = measure(driver, config, llc_bytes)
        advance(config, WINDOW_S + 0.1)
    return out
