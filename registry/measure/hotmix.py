"""Source `mix`: the instruction mix of the code a program spends its time in, without counters.

On a node without a PMU (this VM, most cloud guests) /proc tells kinds of work apart by the working
set only: a cache-blocked matrix product touches all of its arrays within a sampling window and
looks like a stream (numpy's matmul matched the memory load, the triad and `mbw1c` at similarity
1.00), and integer or branchy code looks like any cache-resident kernel. perf's `cpu-clock` event is
a software timer, so `perf record` samples where a program runs on any node where perf runs, PMU
or not, for about a per cent of its time (FREQ_HZ per running thread). Each user-space sample is
described by the instruction mix of the loop it landed in (registry.measure.disasm: shares of
floating-point arithmetic, loads, stores and conditional branches among the loop's
instructions); a phase's or a config's mix is the mean over its samples.

The same sampler (`watching`: `perf record -p`, attached to a running process and following what
it starts) watches a traced command from its start (the runner holds the command at a gate until
perf has enabled its event) and the microbenchmark driver during a config's signature window, so a
phase and its references are described the same way on the same node.
perf is never the traced command's parent: the tracer samples the command's process tree from
/proc, and perf's own CPU time and start-up were counted as the program's. Only user-space
code is sampled; samples in code without symbols (JIT, stripped) or in files objdump cannot read
are left out; a mix rests on at least MIN_SAMPLES described ones.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from registry.measure import disasm

FREQ_HZ = 199           # samples per second of each running thread
MAX_SIZE = "256M"       # perf.data beyond this stops recording (about 5 M samples)
MIN_SAMPLES = 8         # a mix from fewer described samples is not given
COVERED = 0.95          # the busiest functions holding this share of the samples describe them ...
MAX_FUNCTIONS = 64      # ... at most this many
# user-space samples only (kernel code is not described), and none of perf's build-id bookkeeping:
# with it, stopping a 0.3 s recording of the microbenchmark driver took 0.8 s; without, 0.02 s
_EVENT = ["-e", "cpu-clock:u", "-F", str(FREQ_HZ), "-k", "CLOCK_MONOTONIC", "-q", "--max-size", MAX_SIZE,
          "-B", "-N", "--no-bpf-event"]


@dataclass(frozen=True, slots=True)
class Sample:
    t_s: float          # CLOCK_MONOTONIC seconds, as time.monotonic()
    dso: str            # the file the code is in ('[kernel.kallsyms]', '[unknown]' for none)
    symbol: str         # its function ('' without a symbol, '[unknown]' where not even its file is known)
    offset: int         # bytes into the function; without a symbol, the code's offset in its file


@functools.cache
def available() -> bool:
    """True when perf records cpu-clock samples on this node (no PMU needed; perf_event_paranoid
    and containers may still forbid it)."""
    if not shutil.which("perf") or not shutil.which("objdump"):
        return False
    with tempfile.TemporaryDirectory(prefix="nodereg-mix-") as tmp:
        try:
            res = subprocess.run(["perf", "record", *_EVENT, "-o", f"{tmp}/p.data", "--", "true"],
                                 capture_output=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return False
        return res.returncode == 0 and Path(f"{tmp}/p.data").exists()


ATTACH_TIMEOUT_S = 5.0  # perf attaches in about 0.2 s; one that has not answered by then is not waited for


@contextlib.contextmanager
def watching(pid: int, into: list[Sample] | None = None,
             directory: Path | None = None) -> Iterator[list[Sample]]:
    """Sample the running process `pid` (and the threads and processes it starts from now on) while
    the block runs; the yielded list (`into`, if given) receives the samples when it ends. The block
    starts once perf has attached and enabled its event (perf's control pipe acknowledges it), so a
    caller that holds the process back until then (registry.measure.runner's gate) loses nothing of
    it. A process perf cannot watch gives no samples. `directory`: where perf writes its file (the
    tracer's, which its watchdog removes if nodereg is killed), else a temporary one of its own.
    The block always waits for perf's answer: a 0.3 s signature window that started at once and
    left perf to catch up (about 0.15 s here) kept fewer than MIN_SAMPLES samples, so no mix, on a
    loaded CI machine where perf took longer to start."""
    samples: list[Sample] = [] if into is None else into
    with contextlib.nullcontext(directory) if directory else tempfile.TemporaryDirectory(prefix="nodereg-mix-") as tmp:
        out = Path(tmp) / "perf.data"
        ctl_r, ctl_w = os.pipe()
        ack_r, ack_w = os.pipe()
        try:
            proc = subprocess.Popen(["perf", "record", *_EVENT, "-D", "-1", "--control", f"fd:{ctl_r},{ack_w}",
                                     "-o", str(out), "-p", str(pid)], pass_fds=(ctl_r, ack_w),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:
            proc = None
        finally:
            os.close(ctl_r)
            os.close(ack_w)
        try:
            if proc is not None:
                _enable(proc, ctl_w, ack_r)
            yield samples
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGINT)   # perf writes its file and exits (by itself when pid has)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            os.close(ctl_w)    # only after perf has gone: closed before, perf kept no sample of a process
            #                    that outlived the block (the driver)
            os.close(ack_r)
            if proc is not None:
                samples.extend(read(out))


def _enable(proc: subprocess.Popen, ctl_w: int, ack_r: int) -> None:
    """Tell perf (started with its events disabled) to enable them, and wait for its answer."""
    try:
        os.write(ctl_w, b"enable\n")
    except BrokenPipeError:    # perf has exited (it could not attach)
        return
    deadline = time.monotonic() + ATTACH_TIMEOUT_S
    while proc.poll() is None and (left := deadline - time.monotonic()) > 0:
        if select.select([ack_r], [], [], min(left, 0.05))[0]:
            os.read(ack_r, 64)
            return


def read(path: Path) -> list[Sample]:
    """The samples of a perf.data file (none when it is missing or unreadable: a run killed
    before perf wrote its header)."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    try:
        # --kallsyms /dev/null: only user code is described, and the kernel's symbols, which perf
        # otherwise reads for the side-band event of a recording started disabled, cost 0.1 s a file
        res = subprocess.run(["perf", "script", "-i", str(path), "--kallsyms", "/dev/null", "--no-demangle",
                              "--show-mmap-events", "-F", "pid,time,ip,sym,symoff,dso"],
                             capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse(res.stdout) if res.returncode == 0 else []


_MMAP = re.compile(r"PERF_RECORD_MMAP2? (\d+)/\d+: \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0)\b.*\]: \S+ (.+)$")
_SAMPLE = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+([0-9a-f]+)\s+(.*)\s+\((.*)\)\s*$")


def parse(text: str) -> list[Sample]:
    """`perf script --show-mmap-events -F pid,time,ip,sym,symoff,dso` output -> samples; lines of
    another shape are skipped. A sample in a function without a symbol (a stripped library's
    internal code: xz's work is all in liblzma's) keeps the address of its code in the file,
    from the mapping its process made of the file, instead of an offset into a function."""
    maps: dict[str, list[tuple[int, int, int, int]]] = {}     # path -> (pid, start, length, file offset)
    out = []
    for line in text.splitlines():
        if "PERF_RECORD_MMAP" in line:
            m = _MMAP.search(line)
            if m:
                maps.setdefault(m.group(5).strip(), []).append(
                    (int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)))
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        pid, t_s, ip, where, dso = int(m.group(1)), float(m.group(2)), int(m.group(3), 16), m.group(4), m.group(5)
        symbol, _, off = where.strip().rpartition("+0x")
        if symbol and all(c in "0123456789abcdef" for c in off):
            out.append(Sample(t_s, dso, symbol, int(off, 16)))
        elif where.strip() == "[unknown]" and (at := _file_offset(maps.get(dso, ()), pid, ip)) is not None:
            out.append(Sample(t_s, dso, "", at))
        else:
            out.append(Sample(t_s, dso, where.strip(), 0))
    return out


def _file_offset(maps: Sequence[tuple[int, int, int, int]], pid: int, ip: int) -> int | None:
    """Where in its file the code at `ip` of process `pid` lies: from that process's mapping of the
    file, else from any process's (a forked child keeps its parent's)."""
    holding = [m for m in maps if m[1] <= ip < m[1] + m[2]]
    own = [m for m in holding if m[0] == pid] or holding
    if not own:
        return None
    _, start, _, pgoff = own[-1]
    return ip - start + pgoff


def _described(dso: str, symbol: str) -> bool:
    return dso.startswith("/") and symbol != "[unknown]"


def _region(dso: str, symbol: str, offset: int) -> dict[str, float] | None:
    return disasm.region_mix(dso, symbol, offset) if symbol else disasm.region_mix_at(dso, offset)


def mix(samples: Sequence[Sample], intervals: Sequence[Sequence[float]] | None = None,
        t0: float = 0.0) -> dict[str, float]:
    """The mean instruction mix (disasm.KINDS as `<kind>_share`) of the samples in `intervals`
    (seconds after `t0` on the monotonic clock; None: all); {} when fewer than MIN_SAMPLES are
    described."""
    chosen = [s for s in samples
              if intervals is None or any(a <= s.t_s - t0 <= b for a, b in intervals)]
    where = Counter((s.dso, s.symbol, s.offset) for s in chosen if _described(s.dso, s.symbol))
    totals, n = dict.fromkeys(disasm.KINDS, 0.0), 0
    kept = _busiest(where)
    for (dso, symbol, offset), count in where.items():
        if (dso, _code_key(symbol, offset)) not in kept:
            continue
        shares = _region(dso, symbol, offset)
        if shares is None:
            continue
        n += count
        for k, v in shares.items():
            totals[k] += v * count
    if n < MIN_SAMPLES:
        return {}
    out = {f"{k}_share": v / n for k, v in totals.items()}
    out["fp_per_load"] = reuse(totals["fp"], totals["load"])
    return out


def _code_key(symbol: str, offset: int) -> str | int:
    """What one objdump call reads for a sample: its function, or without a symbol its page."""
    return symbol or offset // disasm.CHUNK


def _busiest(where: Counter) -> set[tuple[str, str | int]]:
    """The functions (pages, without symbols) that hold COVERED of the samples, busiest first, at
    most MAX_FUNCTIONS: each is one objdump call (about 15 ms), and a Python program's samples
    spread over a hundred functions of the interpreter whose tail changes no share."""
    per = Counter()
    for (dso, symbol, offset), count in where.items():
        per[(dso, _code_key(symbol, offset))] += count
    total, kept, seen = sum(per.values()), set(), 0
    for key, count in per.most_common(MAX_FUNCTIONS):
        if seen >= COVERED * total:
            break
        kept.add(key)
        seen += count
    return kept


REUSE_CLIP = 4.0


def reuse(fp: float, loads: float) -> float:
    """log2 of floating-point operations per load, within +-REUSE_CLIP: how often an operand is used
    once loaded. The shares alone put a register-blocked matrix product (numpy's: about two FP
    operations per load, almost no stores) nearer the pointer chase than the FP peak kernel,
    since most references have no FP at all; this says what kind of FP work it is: a stream
    loads an operand per operation or more (the triad -1, the load kernel's sum 0), blocked
    compute reuses each a few times (+1), in-register compute has no loads (+4); no FP: -4."""
    if fp <= 0:
        return -REUSE_CLIP
    if loads <= 0:
        return REUSE_CLIP
    return float(min(REUSE_CLIP, max(-REUSE_CLIP, math.log2(fp / loads))))
