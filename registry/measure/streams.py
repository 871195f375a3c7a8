"""The stream probe: Corredor (2011)'s memory streams of a program, without hardware counters.

The program runs under valgrind with our own tool (microbench/streamtool.c, built on first use by
registry.measure.streamtool), which keeps per instruction and thread the local strides and ranges
(microbench/streamprobe.h) and writes one line per stream at exit. Where the tool cannot be built
(no valgrind tool headers or archives, another platform) the probe falls back to
``valgrind --tool=lackey --trace-mem=yes --trace-sched=yes``, which prints every instruction, its
loads and stores and every thread switch into a pipe (``--log-fd``) read by
``microbench/streamprobe.c`` (the same analysis, from text): the same streams, hundreds of times
slower than the program instead of tens (scripts/bench_streamprobe.py measures both).

Granularity: the whole program, with each stream's function (our tool reads it from the debug
info: the function of the stream's busiest instruction). The probe does not see the marker FIFO's
or the OpenMP shim's boundaries; the tracer attaches a stream to the OpenMP region of its function
(the shim names regions by their outlined functions), the others to the trace's longest phase (the
thesis models the significant phase; the others go to the remainder), and a program's author can
declare a phase's streams by hand (registry.trace.markers.streams, NODEREG_PHASE_STREAM in C). A
stream is *significant* when it takes at least MIN_SHARE of the probed accesses; the rest (start-up,
libc, a result written once per row) is left out.
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
from registry.measure import cachegrind, streamtool

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
    function: str | None = None   # the function of its busiest instruction (our tool; lackey: None)

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
    probe: str = streamtool.TOOL      # the valgrind tool that ran: nrstreams, or lackey
    fallback: str | None = None       # why it is lackey: the tool could not be built

    def significant(self, min_share: float = MIN_SHARE) -> list[ProbedStream]:
        """Streams with at least `min_share` of the accesses, in address order (the positional order)."""
        return [s for s in self.streams if s.accesses >= min_share * self.accesses]

    def summary(self) -> dict:
        return {"granularity": "whole program", "accesses": self.accesses, "threads_seen": self.threads,
                "every": self.every, "probe_s": self.probe_s, "probe": self.probe, "fallback": self.fallback,
                "min_share": MIN_SHARE,
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
            function = f[11] if len(f) >= 12 and f[11] != "-" else None
            streams.append(ProbedStream(int(f[1]), int(f[2]), int(f[3]), f[4], f[5], int(f[6]), int(f[7]),
                                        float(f[8]), function))
    return accesses, threads, every, streams


def reader_binary() -> Path:
    from registry.microbench.build import compile_c, source
    return compile_c([source("streamprobe.c")], READER, openmp=False, depends=[source("streamprobe.h")])


def check_available() -> None:
    if not cachegrind.available():
        raise UserError("--streams needs valgrind (e.g. apt-get install valgrind): the stream probe runs the "
                        "program under valgrind")


def _environment(env: dict | None, lib_dir: Path | None) -> dict:
    """The probe's environment: OpenMP threads that sleep rather than spin while they wait
    (valgrind runs one thread at a time, so a spinning thread burns the time slice the others need;
    the user's own OMP_WAIT_POLICY wins), and VALGRIND_LIB for our tool."""
    out = dict(os.environ if env is None else env)
    out.setdefault("OMP_WAIT_POLICY", "passive")
    if lib_dir is not None:
        out["VALGRIND_LIB"] = str(lib_dir)
    return out


def _run_tool(argv: list[str], lib_dir: Path, tmp: Path, sampling: list[str], **watch) -> tuple[int, str]:
    """Our tool: the report is the log file's (valgrind's own messages there are not report lines)."""
    log = tmp / "streams.log"
    # raw symbol names, as the OpenMP shim's phases have them (nm), for C++ too
    cmd = ["valgrind", "-q", "--demangle=no", f"--tool={streamtool.TOOL}", f"--log-file={log}", *sampling, *argv]
    returncode = cachegrind.run_watched(cmd, tmp, what="the stream probe", **watch)
    return returncode, log.read_text(errors="replace") if log.exists() else ""


def _run_lackey(argv: list[str], tmp: Path, sampling: list[str], **watch) -> tuple[int, str]:
    """Lackey's log through a pipe into the stream reader; (valgrind's status, the reader's report)."""
    reader = reader_binary()
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen([str(reader), *sampling], stdin=read_end, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    finally:
        os.close(read_end)
    try:
        returncode = cachegrind.run_watched([*LACKEY, f"--log-fd={write_end}", *argv], tmp, pass_fds=(write_end,),
                                            what="the stream probe", **watch)
    except BaseException:
        os.close(write_end)
        proc.kill()
        proc.wait()
        raise
    os.close(write_end)
    out, err = proc.communicate()
    if returncode == 0 and proc.returncode != 0:
        raise UserError(f"the stream reader failed: {(err.strip().splitlines() or ['no message'])[-1]}")
    return returncode, out


def run(argv: list[str], *, cpus: list[int] | None = None, env: dict | None = None,
        timeout_s: float | None = None, every: int = 1, window: int = 1 << 20, tool: str = "auto") -> ProbeResult:
    """Run `argv` under the probe. `tool`: "auto" (ours, else lackey with the reason in `fallback`),
    "nrstreams" (ours, or UserError) or "lackey". `every` > 1 records one window of `window` accesses
    in every `every` (strides restart at each window; counts are scaled)."""
    check_available()
    lib_dir = fallback = None
    if tool != "lackey":
        try:
            lib_dir = streamtool.build()
        except UserError as exc:
            if tool != "auto":
                raise
            fallback = str(exc)
    started = time.monotonic()
    watch = {"env": _environment(env, lib_dir), "cpus": cpus, "timeout_s": timeout_s}
    with tempfile.TemporaryDirectory(prefix="nodereg-streams-") as tmp:
        if lib_dir is not None:
            returncode, out = _run_tool(argv, lib_dir, Path(tmp), [f"--every={every}", f"--window={window}"],
                                        **watch)
        else:
            returncode, out = _run_lackey(argv, Path(tmp), ["--window", str(window), "--every", str(every)], **watch)
    elapsed = time.monotonic() - started
    probe = "lackey" if lib_dir is None else streamtool.TOOL
    if returncode == -signal.SIGILL:
        raise UserError(f"valgrind cannot run {argv[0]}'s instructions (SIGILL; valgrind lacks AVX-512): probe a "
                        "build without AVX-512 (e.g. -mno-avx512f)")
    if returncode < 0:
        raise UserError(f"{argv[0]} was killed by {signal.Signals(-returncode).name} under the stream probe")
    if returncode != 0:
        raise UserError(f"{argv[0]} failed under the stream probe (exit status {returncode})")
    accesses, threads, every, streams = parse(out)
    if not accesses:
        raise UserError(f"the stream probe ({probe}) wrote no report")
    return ProbeResult(accesses, threads, every, tuple(streams), elapsed, probe, fallback)
