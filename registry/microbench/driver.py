"""The microbenchmark driver: one C program (microbench/ub_driver.c) that runs kernel configs.

Python starts it once per profile and talks to it over pipes: a `run` line per configuration,
`more` lines for extra repetitions of the same one, one JSON reply line each (the protocol is
documented at the top of ub_driver.c). Keeping one process for a whole sweep amortises process
start, and lets buffers be reused between configurations. Every timing happens inside C.
"""

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from registry.errors import UserError
from registry.microbench.build import compile_c, compiler, source, valgrind_flags

SOURCES = ("ub_driver.c", "ub_stream.c", "ub_bandwidth.c", "ub_latency.c", "ub_compute.c", "ub_gemm.c",
           "ub_memory.c")
HEADERS = ("ub.h", "ub_stream_loop.h")
BINARY = "nodereg-ub"


def driver_binary(for_valgrind: bool = False) -> Path:
    """The driver built for this node (cached; rebuilt when a source, the compiler or flags change).
    `for_valgrind`: a build valgrind can run (see `valgrind_flags`), for cachegrind signatures."""
    extra = valgrind_flags(compiler()) if for_valgrind else ()
    return compile_c([source(s) for s in SOURCES], BINARY + ("-vg" if for_valgrind else ""), openmp=True,
                     extra_flags=extra, depends=[source(h) for h in HEADERS])


def run_line(args: Mapping[str, object]) -> str:
    """The protocol's `run` line for the key=value pairs `args` (lists as comma-separated values)."""
    parts = []
    for key, value in args.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        text = str(value)
        if not text or any(ch.isspace() for ch in text):
            raise ValueError(f"driver argument {key}={text!r} must be non-empty without spaces")
        parts.append(f"{key}={text}")
    return "run " + " ".join(parts)


class DriverError(UserError):
    """The driver refused a configuration or died."""


class Driver:
    """A running driver process. Use as a context manager; `close()` ends it."""

    def __init__(self, binary: Path | None = None):
        self.binary = binary or driver_binary()
        env = dict(os.environ, OMP_DYNAMIC="false", OMP_PROC_BIND="false")
        for var in ("OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY"):
            env.pop(var, None)  # the driver pins every thread itself
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([str(self.binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, bufsize=1, env=env)

    def __enter__(self) -> "Driver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, line: str) -> dict:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            reply = ""
        if not reply:
            raise DriverError(self._death_message())
        data = json.loads(reply)
        if not data.get("ok"):
            raise DriverError(f"microbenchmark driver rejected `{line[:160]}`: {data.get('error')}")
        return data

    def _death_message(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._stderr.seek(0)
        detail = " ".join(self._stderr.read().split())[:200]
        if code is not None and code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        else:
            how = f"exited (status {code})"
        return f"microbenchmark driver {how}" + (f": {detail}" if detail else "")

    def info(self) -> dict:
        """What the build is: vector width, FMA flavour, lanes and chains of the peak kernel."""
        return self._request("info")

    def run(self, args: Mapping[str, object]) -> dict:
        """Run one configuration; `args` are the protocol's key=value pairs."""
        return self._request(run_line(args))

    def more(self, reps: int) -> list[float]:
        """`reps` more timed repetitions of the last configuration."""
        return self._request(f"more reps={int(reps)}")["times"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream and not stream.closed:
                stream.close()
        self._stderr.close()
