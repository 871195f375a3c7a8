"""A cachegrind pass: simulated instruction counts and cache misses, for nodes without counters.

valgrind's cachegrind runs the command on a simulated I1/D1/LL hierarchy configured with the node's
real cache sizes (from its inventory), and counts per function: instructions (Ir), data reads (Dr)
and writes (Dw) and their D1 and LL misses. Per-function counts map onto OpenMP phases, whose
outlined functions (`main._omp_fn.0`) cachegrind names the same way the shim does. valgrind
serialises threads and runs 20-100x slower, hence `--probe-cmd` (a reduced input): the miss
*rates* carry over to the full input as long as the working sets keep their relation to the caches.
"""

import re
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from registry.errors import UserError
from registry.inventory import Cache, Inventory
from registry.measure.runner import kill_tree, pinned
from registry.measure.watchdog import Watchdog

EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw", "Bc", "Bcm", "Bi", "Bim")
METRICS = ("instructions", "data_reads", "data_writes", "accesses_per_inst", "d1_miss_rate", "ll_miss_rate",
           "ll_mpki", "write_share", "branches_per_inst", "branch_miss_rate")
PREFERRED_WAYS = {1: 8, 2: 8, 3: 16}


@dataclass
class CachegrindStats:
    total: dict[str, float]
    functions: dict[str, dict[str, float]] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)
    sampled: bool = False     # the pass was stopped after its sample time: the counts cover the run's start


def available() -> bool:
    return shutil.which("valgrind") is not None


def require() -> None:
    """A clear one-line error before any measuring when valgrind is not installed."""
    if not available():
        raise UserError("--cachegrind needs valgrind (e.g. apt-get install valgrind)")


def _ways(inv: Inventory, cache: Cache) -> int | None:
    """Associativity from sysfs when the node is this host (the inventory does not store it)."""
    if inv.hostname != socket.gethostname() or not inv.cpus:
        return None
    base = Path(f"/sys/devices/system/cpu/cpu{inv.cpus[0]}/cache")
    for index in base.glob("index*"):
        try:
            if (int((index / "level").read_text()) == cache.level
                    and (index / "type").read_text().strip() == cache.type):
                return int((index / "ways_of_associativity").read_text())
        except (OSError, ValueError):
            continue
    return None


def _geometry(cache: Cache, ways: int | None) -> str:
    """'size,assoc,line' for valgrind, whose simulator needs a power-of-two number of sets."""
    line = cache.line_bytes or 64
    wanted = ways or PREFERRED_WAYS.get(cache.level, 8)
    candidates = sorted(range(1, 129), key=lambda a: (abs(a - wanted), a))
    for assoc in candidates:
        sets, rest = divmod(cache.size_bytes, line * assoc)
        if rest == 0 and sets > 0 and sets & (sets - 1) == 0:
            return f"{cache.size_bytes},{assoc},{line}"
    raise UserError(f"cannot describe the L{cache.level} cache ({cache.size_bytes} bytes) to cachegrind")


def cache_options(inv: Inventory) -> list[str]:
    """--I1/--D1/--LL options that make cachegrind simulate the node's caches."""
    by_key = {(c.level, c.type): c for c in inv.caches}
    opts = []
    l1i, l1d, llc = by_key.get((1, "Instruction")), by_key.get((1, "Data")), inv.last_level_cache()
    if l1i:
        opts.append(f"--I1={_geometry(l1i, _ways(inv, l1i))}")
    if l1d:
        opts.append(f"--D1={_geometry(l1d, _ways(inv, l1d))}")
    if llc and llc.level > 1:
        opts.append(f"--LL={_geometry(llc, _ways(inv, llc))}")
    return opts


SAMPLE_GRACE_S = 10.0     # how long a sampled pass gets to write its counts after SIGTERM


def run(argv: list[str], inv: Inventory, *, cpus: list[int] | None = None, env: dict | None = None,
        timeout_s: float | None = None, stdin_text: str | None = None,
        sample_s: float | None = None) -> CachegrindStats:
    """Run `argv` under cachegrind (children followed) and return the summed per-function counts.
    `stdin_text`, when given, is the command's standard input (else it inherits ours).

    `sample_s`: stop the pass after that many seconds and keep what it counted so far (the start
    of the run; `CachegrindStats.sampled` says whether it was cut). valgrind writes its counts
    when the program it runs is terminated, so a sample costs `sample_s`, not 20-100x the run: the
    instruction mix of a program whose kind of work does not change much, on a node without
    counters, at a bounded price."""
    require()
    opts = cache_options(inv)
    with tempfile.TemporaryDirectory(prefix="nodereg-cg-") as tmp:
        log = Path(tmp) / "valgrind.log"
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes", "--trace-children=yes", *opts,
               f"--log-file={log}", f"--cachegrind-out-file={tmp}/cachegrind.out.%p", *argv]
        returncode = run_watched(cmd, Path(tmp), env=env, cpus=cpus, stdin_text=stdin_text,
                                 timeout_s=sample_s if sample_s is not None else timeout_s,
                                 stop_gently=sample_s is not None)
        outputs = sorted(Path(tmp).glob("cachegrind.out.*"))
        sampled = returncode is None
        if sampled:
            returncode = 0 if outputs else -signal.SIGTERM
        if returncode == -signal.SIGILL:
            raise UserError(f"valgrind cannot run {argv[0]}'s instructions (SIGILL; valgrind lacks AVX-512): "
                            "trace a build without AVX-512 (e.g. -mno-avx512f) through --probe-cmd")
        if returncode != 0 or not outputs:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise UserError(f"the cachegrind pass of {argv[0]} failed (exit status {returncode})"
                            + (f": {tail[0]}" if tail else ""))
        stats = [parse(p.read_text(errors="replace")) for p in outputs]
    functions: dict[str, dict[str, float]] = {}
    for st in stats:
        for fn, counts in st.items():
            acc = functions.setdefault(fn, dict.fromkeys(EVENTS, 0.0))
            for e in EVENTS:
                acc[e] += counts.get(e, 0.0)
    total = dict.fromkeys(EVENTS, 0.0)
    for counts in functions.values():
        for e in EVENTS:
            total[e] += counts[e]
    return CachegrindStats(total=total, functions=functions, options=opts, sampled=sampled)


def run_watched(cmd: list[str], tmp: Path, *, env, cpus, timeout_s, stdin_text=None, pass_fds=(),
                what: str = "the cachegrind pass", stop_gently: bool = False) -> int | None:
    """Run valgrind to its end; its exit status. A watchdog (registry.measure.watchdog) kills it, and
    what it runs, if this process is killed meanwhile: the pass may take minutes. `pass_fds`: file
    descriptors valgrind keeps (the stream probe's log pipe). `stop_gently`: at `timeout_s` the
    tree gets SIGTERM (valgrind then writes what it counted) and None is returned, not an error."""
    watchdog = Watchdog(tmp)
    try:
        with pinned(cpus):
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                                    stdin=subprocess.PIPE if stdin_text is not None else None, pass_fds=pass_fds)
        watchdog.tell([proc.pid])
        try:
            proc.communicate(stdin_text, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid, grace_s=SAMPLE_GRACE_S if stop_gently else 0.0)
            proc.wait()
            if stop_gently:
                return None
            raise UserError(f"{what} ran past {timeout_s:g} s") from None
        except BaseException:   # Ctrl-C: valgrind and what it runs go too
            kill_tree(proc.pid)
            proc.wait()
            raise
        return proc.returncode
    finally:
        watchdog.release()


_FN = re.compile(r"^fn=(?:\(\d+\)\s*)?(.*)$")


def parse(text: str) -> dict[str, dict[str, float]]:
    """A cachegrind.out file -> {function: {event: count}} (summed over its files and lines)."""
    events: list[str] = []
    out: dict[str, dict[str, float]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("fn="):
            name = _FN.match(line).group(1).strip() or "???"
            current = out.setdefault(name, {})
        elif current is not None and line[:1].isdigit():
            values = line.split()[1:]
            for e, v in zip(events, values):
                current[e] = current.get(e, 0.0) + float(v)
    return out


def metrics(counts: dict[str, float]) -> dict[str, float]:
    """Signature metrics from one function's (or the program's) counts. The counts themselves
    grow with the run's length; the rates (accesses per instruction, miss rates, LL misses per
    thousand instructions) describe the kind of work, and are what compares across runs.

    The instruction mix is what tells kernels apart on a node without counters, where /proc sees
    only the working set: LL misses per instruction separate a cache-blocked matrix product (few)
    from a stream over the same bytes (one per line); the share of writes separates store-only
    kernels from loads and triads; branches per instruction and their simulated misprediction rate
    separate integer, branchy work (hashing, parsing, compression) from FP chains and streams,
    whose loop branches are few and predicted."""
    ir, dr, dw = counts.get("Ir", 0.0), counts.get("Dr", 0.0), counts.get("Dw", 0.0)
    d1 = counts.get("D1mr", 0.0) + counts.get("D1mw", 0.0)
    ll = counts.get("DLmr", 0.0) + counts.get("DLmw", 0.0)
    branches = counts.get("Bc", 0.0) + counts.get("Bi", 0.0)
    out = {"instructions": ir, "data_reads": dr, "data_writes": dw}
    if dr + dw > 0:
        out["d1_miss_rate"] = d1 / (dr + dw)
        out["ll_miss_rate"] = ll / (dr + dw)
        out["write_share"] = dw / (dr + dw)
    if ir > 0:
        out["accesses_per_inst"] = (dr + dw) / ir
        out["ll_mpki"] = 1000.0 * ll / ir
        if "Bc" in counts:    # counted with --branch-sim (older passes did not)
            out["branches_per_inst"] = branches / ir
    if branches > 0:
        out["branch_miss_rate"] = (counts.get("Bcm", 0.0) + counts.get("Bim", 0.0)) / branches
    return out


def steady_metrics(short: dict[str, float], long: dict[str, float]) -> dict[str, float]:
    """The metrics of what a longer run did beyond a shorter one of the same command ({} if
    nothing): both start, warm up and end alike, so the difference of their total counts is the
    steady state alone, without start-up, first touches or, in a forked child, the counts it
    inherited from its parent (cachegrind's counters are copied at fork)."""
    steady = {e: max(long.get(e, 0.0) - short.get(e, 0.0), 0.0) for e in EVENTS}
    return metrics(steady) if steady["Ir"] > 0 else {}


def function_key(name: str) -> str:
    """Compare names without cachegrind's file/object decorations ('main._omp_fn.0' stays as is)."""
    return name.split("'")[0].strip()
