"""Hardware counters through `perf stat -I`, where the node exposes them.

The traced command is wrapped as `perf stat -I MS -x, -o FILE -e EVENTS -- CMD...` (perf follows
the whole tree it starts). Many VMs and containers have no PMU: perf then prints
"<not supported>" and still exits 0, so availability is decided by parsing a probe run
(`perf stat -e instructions true`), once per process, and the source is skipped where it fails.
"""

import contextlib
import functools
import math
import shutil
import signal
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

EVENTS = ("cycles", "instructions", "cache-references", "cache-misses")


@functools.cache
def available() -> bool:
    """True when perf exists and counts instructions on this node."""
    if not shutil.which("perf"):
        return False
    try:
        res = subprocess.run(["perf", "stat", "-x", ",", "-e", "instructions", "true"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    if res.returncode != 0:
        return False
    lines = [ln for ln in res.stderr.splitlines() if "instructions" in ln]
    return bool(lines) and not any("<not" in ln for ln in lines)


def wrap(argv: list[str], out: Path, interval_s: float) -> list[str]:
    """`argv` run under perf stat, interval counts written to `out`."""
    ms = max(10, int(round(interval_s * 1000)))
    return ["perf", "stat", "-I", str(ms), "-x", ",", "-o", str(out), "-e", ",".join(EVENTS), "--", *argv]


@contextlib.contextmanager
def watching(pid: int, interval_s: float) -> Iterator[list[dict]]:
    """Count EVENTS of the running process `pid` while the block runs (`perf stat -p`, for a
    process started before, such as the microbenchmark driver); the yielded list receives the
    interval rows when the block ends."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="nodereg-perf-") as tmp:
        out = Path(tmp) / "perf.csv"
        ms = max(10, int(round(interval_s * 1000)))
        proc = subprocess.Popen(["perf", "stat", "-I", str(ms), "-x", ",", "-o", str(out), "-e", ",".join(EVENTS),
                                 "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            yield rows
        finally:
            proc.send_signal(signal.SIGINT)   # perf prints its last interval and exits
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if out.exists():
                rows.extend(parse(out.read_text(errors="replace")))


def parse(text: str) -> list[dict]:
    """perf stat -I -x, output -> rows {t_s, <event>: count} (uncounted events left out)."""
    rows: dict[float, dict] = defaultdict(dict)
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(",")
        if len(parts) < 4:
            continue
        try:
            t_s, count = float(parts[0]), float(parts[1])
        except ValueError:
            continue  # "<not counted>" / "<not supported>"
        event = parts[3].split(":")[0]
        if event in EVENTS:
            rows[t_s][event] = count
    return [{"t_s": t, **values} for t, values in sorted(rows.items())]


def derived(totals: dict) -> dict:
    """Signature metrics from event totals over a phase."""
    def ratio(a, b, scale=1.0):
        return scale * totals[a] / totals[b] if totals.get(a) is not None and totals.get(b) else math.nan
    return {
        "ipc": ratio("instructions", "cycles"),
        "cache_miss_rate": ratio("cache-misses", "cache-references"),
        "misses_per_kinst": ratio("cache-misses", "instructions", 1000.0),
    }
