"""Cachegrind signatures of the suite's configs (`profile NODE --suite sparecores --cachegrind`),
comparable with a phase traced with `nodereg trace --cachegrind` or `--cachegrind-sample S`.

On a node without counters, /proc tells one-thread CPU-bound runs apart by little but their working
set, so a one-thread program's nearest stressors were chosen almost by chance
(docs/sparecores-trace.md). cachegrind's instruction mix (memory accesses and branches per
instruction, write share, miss rates) tells a branchy stressor from a memcpy one.

- stress-ng and `openssl speed` run as one instance (`--<stressor> 1`, `-multi 1`) under valgrind,
  children followed (stress-ng forks its stressor, openssl its worker), twice: for WINDOWS_S[0]
  and WINDOWS_S[1] seconds of the tool's own clock. Each run's per-process outputs are summed, and
  the difference of the two runs is the tool's steady state alone (registry.measure.cachegrind.
  steady_metrics): without start-up and without the parent's counts that a forked child inherits.
  Where the longer run counted fewer instructions, accesses or branches than the shorter one (a
  stressor whose processes share the CPU with others by chance: zlib's compressor and
  decompressor on a loaded host), the difference is no steady state, and the longer run's own
  counts, start-up included, are the signature. Where the difference is under a tenth of the
  longer run (a stressor whose set-up under valgrind outlasts the windows), there is none.
  The price is bounded by the windows, not by valgrind's slow-down: the tools stop on their clock.
  A config on all CPUs gets the one-instance metrics (measured once for both thread counts): each
  of its instances does the same work, and valgrind would serialise them anyway.
- membench and bw_mem run our kernels: the profile's own cachegrind pass (registry.profile.
  cachegrind_pass) on one thread of each config's kernel config (the same buffer per thread).
  On all CPUs the two runs' difference also held the threads' barrier waits, which valgrind's
  serialised threads make as long as the other thread's share: branches per instruction
  from 0.00002 to 0.23 for one load kernel at several sizes, on this VM.

valgrind runs the code path of the CPU it emulates (no AVX-512), for a traced program as for the
tools, so the two are compared like with like. A config valgrind cannot run keeps its other
sources, and the profile says so (`notes`), never silently.
"""

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from registry.errors import UserError
from registry.inventory import Inventory
from registry.measure import cachegrind as cg
from registry.profile import cachegrind_pass
from registry.profile.suite import membench, tools
from registry.profile.suite.plan import KERNEL_TASKS, SuiteConfig
from registry.profile.sweep import Config

WINDOWS_S = (1, 4)        # the two runs' lengths: their difference is 3 s of the tool's steady state
TIMEOUT_S = 120.0         # per valgrind run: a tool stuck under valgrind is said, not waited for
_START_S = 0.7            # valgrind's start-up per run (development VM)
_WORK = ("Ir", "Dr", "Dw", "Bc", "Bi")   # events a longer run of the same work counts more of
MIN_STEADY_SHARE = 0.1    # a steady state less than this share of the longer run's instructions is none:
                          # stress-ng's stream fills arrays of 4x the LLC first (47,779 instructions of
                          # difference on this VM), and its mix would be noise


def _tool_key(config: SuiteConfig) -> tuple:
    """What a tool config's metrics depend on: not its thread count (see the module's docstring)."""
    return config.task, config.what, config.params


def _one_thread_kernel(config: SuiteConfig, inv: Inventory) -> Config:
    """The kernel config of one of `config`'s threads (the same buffer per thread): valgrind
    serialises threads, and the all-CPU run's barrier waits would count as the kernel's work."""
    return membench.kernel_config(replace(config, threads=1), inv)


def estimate_s(config: SuiteConfig, inv: Inventory) -> float:
    """Rough seconds of `measure(config)`, for the progress bar."""
    if config.task in KERNEL_TASKS:
        return cachegrind_pass.estimate_s(_one_thread_kernel(config, inv))
    return sum(WINDOWS_S) + len(WINDOWS_S) * _START_S


def total_s(configs: Sequence[SuiteConfig], inv: Inventory) -> float:
    """Rough seconds of `measure_all(configs)`: a tool config measured once for both thread counts."""
    firsts = {_tool_key(c): c for c in reversed(configs) if c.task not in KERNEL_TASKS}
    return sum(estimate_s(c, inv) for c in configs if c.task in KERNEL_TASKS or firsts[_tool_key(c)] is c)


def measure(config: SuiteConfig, inv: Inventory) -> dict[str, float]:
    """The steady-state cachegrind metrics of one config ({} if it did no work)."""
    if config.task in KERNEL_TASKS:
        return cachegrind_pass.measure(_one_thread_kernel(config, inv), inv)
    totals = []
    for secs in WINDOWS_S:
        with tempfile.TemporaryDirectory(prefix="nodereg-suite-cg-") as tmp:
            argv = tools.tool_argv(config, 1, str(secs), Path(tmp) / "stress-ng.yaml")
            totals.append(cg.run(argv, inv, timeout_s=TIMEOUT_S).total)
    short, long = totals
    if any(long[e] < short[e] for e in _WORK):   # not more of the same work: the longer run's own counts
        return cg.metrics(long)
    if long["Ir"] - short["Ir"] < MIN_STEADY_SHARE * long["Ir"]:
        raise UserError(f"its {WINDOWS_S[-1]} s under valgrind hardly got past its start-up")
    return cg.steady_metrics(short, long)


def measure_all(configs: Sequence[SuiteConfig], inv: Inventory,
                advance: Callable[[SuiteConfig, float], None] = lambda c, w: None
                ) -> tuple[dict[str, dict[str, float]], list[str]]:
    """(cachegrind metrics by config key, notes on the configs that got none and why)."""
    out: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    by_tool: dict[tuple, dict[str, float]] = {}
    for c in configs:
        shared = c.task not in KERNEL_TASKS and _tool_key(c) in by_tool
        if shared:
            metrics = by_tool[_tool_key(c)]
        else:
            try:
                metrics = measure(c, inv)
            except UserError as exc:     # valgrind cannot run this one: the others are still worth having
                metrics = {}
                notes.append(f"{c.key}: no cachegrind signature ({exc})")
            if c.task not in KERNEL_TASKS:
                by_tool[_tool_key(c)] = metrics
        if metrics:
            out[c.key] = metrics
        elif not shared and not any(n.startswith(f"{c.key}:") for n in notes):
            notes.append(f"{c.key}: no cachegrind signature (its steady state counted no instructions)")
        advance(c, 0.0 if shared else estimate_s(c, inv))
    return out, notes
