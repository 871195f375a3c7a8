"""Measuring the locally runnable part of the suite: every planned config, then one profile.

Nothing is stored here (registry.profile.suite.store writes the whole profile in one transaction).
"""

import subprocess
import time
from collections.abc import Callable

from registry import __version__
from registry.db import utcnow
from registry.errors import UserError
from registry.inventory import Inventory
from registry.measure import cachegrind as cg
from registry.microbench.driver import Driver, driver_binary
from registry.profile.stats import RepPolicy
from registry.profile.suite import cachegrind as suite_cachegrind
from registry.profile.suite import membench, tools
from registry.profile.suite.plan import KERNEL_TASKS, SuiteConfig
from registry.profile.suite.store import SuiteProfile, SuiteResult


def estimate_s(config: SuiteConfig, seconds: float) -> float:
    """Rough seconds per config (weights the progress bar)."""
    return 0.8 if config.task in KERNEL_TASKS else max(1, round(seconds)) + 0.3


def _version(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except OSError:
        return None
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else None


def _run_tool(config: SuiteConfig, n_cpus: int, seconds: float, llc_bytes: int | None,
              notes: list[str]) -> tuple[float, dict] | None:
    """One tool config's (figure, signature), tried twice; None, with a note, where both tries
    failed. The whole suite's profile here (about 8 minutes) stopped 2 minutes in at the first
    stressor that writes no metric on this VM (stress-ng 0.15's ipsec-mb; tsc and x86syscall do
    not either), and lost every config measured before it: now a config that fails twice is left
    out and said, and the rest is stored (259 of 265 configs, 484 s)."""
    for _ in range(2):
        try:
            return tools.run(config, n_cpus, seconds, llc_bytes)
        except UserError as exc:
            failure = exc
    notes.append(f"{config.key} left out: {failure} (twice)")
    return None


def measure(node: str, configs: list[SuiteConfig], inv: Inventory, seconds: float, quick: bool,
            advance: Callable[[SuiteConfig, float], None] = lambda c, w: None,
            cachegrind: bool = False) -> SuiteProfile:
    """Run every config (tools for `seconds` each; kernels until their median settles) with its signature;
    `cachegrind`: then each config's cachegrind pass too (registry.profile.suite.cachegrind)."""
    missing = tools.missing_tools(configs)
    if missing:
        raise UserError(f"the Spare Cores suite needs {', '.join(missing)} on this machine")
    if cachegrind:
        cg.require()
    started, t0 = utcnow(), time.monotonic()
    llc = inv.last_level_cache()
    llc_bytes = llc.size_bytes if llc else None
    results: list[SuiteResult] = []
    notes: list[str] = []
    for c in (c for c in configs if c.task not in KERNEL_TASKS):
        measured = _run_tool(c, inv.cpu_count, seconds, llc_bytes, notes)
        if measured is not None:
            results.append(SuiteResult(c, *measured))
        advance(c, estimate_s(c, seconds))
    kernels = [c for c in configs if c.task in KERNEL_TASKS]
    if kernels:
        policy = RepPolicy.for_mode("quick" if quick else "default")
        with Driver(driver_binary()) as driver:
            for c in kernels:
                value, sig = membench.measure(driver, c, inv, policy)
                kc = membench.kernel_config(c, inv)
                results.append(SuiteResult(c, value, sig, kc.ws_bytes))
                advance(c, estimate_s(c, seconds))
    if not results:
        raise UserError(f"no config of the suite could be measured here: {notes[0]}")
    if cachegrind:
        metrics, cg_notes = suite_cachegrind.measure_all(configs, inv, advance)
        notes += cg_notes
        for r in results:
            if r.config.key in metrics:
                r.signature["cachegrind"] = metrics[r.config.key]
    used = {c.task for c in configs}
    versions = {"stress-ng": _version(["stress-ng", "--version"]) if used & {"stressng", "stressngfull"} else None,
                "openssl": _version(["openssl", "version"]) if "openssl" in used else None}
    return SuiteProfile(node, inv, results, started, utcnow(), time.monotonic() - t0, __version__,
                        {k: v for k, v in versions.items() if v}, notes=notes)
