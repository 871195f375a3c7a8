"""The stream probe: Corredor (2011)'s memory streams of a program, without hardware counters.

The program runs under ``valgrind --tool=lackey --trace-mem=yes --trace-sched=yes``, which prints
every instruction, its loads and stores and every thread switch; that log goes through a pipe
(``--log-fd``) into ``microbench/streamprobe.c``, built per node like the kernels, which keeps per
instruction and thread the local strides and ranges and prints one line per stream (see its
header). Nothing is written to a file: lackey prints tens of bytes per access.

Granularity: the whole program. Lackey's log does not carry the marker FIFO's or the OpenMP
shim's boundaries, so the probe cannot split streams by phase; the tracer attaches them to the
trace's longest phase (the thesis models the significant phase; the others go to the remainder)
and a program's author can declare a phase's streams by hand (registry.trace.markers.streams,
NODEREG_PHASE_STREAM in C). A stream is *significant* when it takes at least MIN_SHARE of the
probed accesses; the rest (start-up, libc, a result written once per row) is left out.

valgrind serialises threads and lackey calls out on every access: the probe runs hundreds of
times slower than the program (scripts/bench_streamprobe.py measures it), so trace small inputs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from registry.errors import UserError
from registry.measure import cachegrind

READER = "nodereg-streamprobe"
MIN_SHARE = 0.01        # of the probed accesses: a significant stream
LACKEY = ["valgrind", "--tool=lackey", "--trace-mem=yes", "--trace-sched=yes"]


@dataclass(frozen=True)
class ProbedStream:
    """One stream as the probe saw it (sizes in bytes; `iterations`: accesses of the stream's
    busiest instruction in its busiest thread, the thesis's loop iterations of the slowest thread)."""

    size_bytes: int
    stride_bytes: int
    elem_bytes: int
    access: str           # C | P
    pattern: str          # seq | random
    accesses: int
    iterations: int
    seq_share: float

    def descriptor(self) -> dict:
        """The stream as a phase_streams row (without its owner and position). The probe sees access
        sizes, not types: dtype names the element size the way the thesis prints it ("8B")."""
        return {"size_elems": max(1, self.size_bytes // self.elem_bytes), "stride_bytes": self.stride_bytes,
                "dtype": f"{self.elem_bytes}B", "elem_bytes": self.elem_bytes, "access": self.access,
                "pattern": self.pattern}


@dataclass(frozen=True)
class ProbeResult:
    accesses: int
    threads: int
    every: int
    streams: tuple[ProbedStream, ...]
    probe_s: float

    def significant(self, min_share: float = MIN_SHARE) -> list[ProbedStream]:
        """Streams with at least `min_share` of the accesses, in address order (the positional order)."""
        return [s for s in self.streams if s.accesses >= min_share * self.accesses]

    def summary(self) -> dict:
        return {"granularity": "whole program", "accesses": self.accesses, "threads_seen": self.threads,
                "every": self.every, "probe_s": self.probe_s, "min_share": MIN_SHARE,
                "streams": [asdict(s) for s in self.streams]}


def parse(text: str) -> tuple[int, int, int, list[ProbedStream]]:
    """The reader's output -> (accesses, threads, every, streams)."""
    accesses = threads = every = 0
    streams = []
    for line in text.splitlines():
        f = line.split("\t")
        if f[0] == "total" and len(f) >= 5:
            accesses, threads, every = int(f[1]), int(f[2]), int(f[4])
        elif f[0] == "stream" and len(f) >= 9:
            streams.append(ProbedStream(int(f[1]), int(f[2]), int(f[3]), f[4], f[5], int(f[6]), int(f[7]),
                                        float(f[8])))
    return accesses, threads, every, streams


def reader_binary() -> Path:
    from registry.microbench.build import compile_c, source
    return compile_c([source("streamprobe.c")], READER, openmp=False)


def check_available() -> None:
    if not cachegrind.available():
        raise UserError("--streams needs valgrind (e.g. apt-get install valgrind): the stream probe runs the "
                        "program under valgrind's lackey")


def run(argv: list[str], *, cpus: list[int] | None = None, env: dict | None = None,
        timeout_s: float | None = None, every: int = 1, window: int = 1 << 20) -> ProbeResult:
    """Run `argv` under lackey into the stream reader. `every` > 1 records one window of `window`
    accesses in every `every` (the reader's share of the cost only: lackey still sees every access)."""
    check_available()
    reader = reader_binary()
    read_end, write_end = os.pipe()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nodereg-streams-") as tmp:
        try:
            proc = subprocess.Popen([str(reader), "--window", str(window), "--every", str(every)], stdin=read_end,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        finally:
            os.close(read_end)
        try:
            cmd = [*LACKEY, f"--log-fd={write_end}", *argv]
            returncode = cachegrind.run_watched(cmd, Path(tmp), env=env, cpus=cpus, timeout_s=timeout_s,
                                                pass_fds=(write_end,), what="the stream probe")
        except BaseException:
            os.close(write_end)
            proc.kill()
            proc.wait()
            raise
        os.close(write_end)
        out, err = proc.communicate()
    elapsed = time.monotonic() - started
    if returncode == -signal.SIGILL:
        raise UserError(f"valgrind cannot run {argv[0]}'s instructions (SIGILL; valgrind lacks AVX-512): probe a "
                        "build without AVX-512 (e.g. -mno-avx512f)")
    if returncode != 0:
        raise UserError(f"{argv[0]} failed under the stream probe (exit status {returncode})")
    if proc.returncode != 0:
        raise UserError(f"the stream reader failed: {(err.strip().splitlines() or ['no message'])[-1]}")
    accesses, threads, every, streams = parse(out)
    return ProbeResult(accesses, threads, every, tuple(streams), elapsed)
