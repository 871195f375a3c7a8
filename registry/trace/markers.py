"""Phase markers an application writes while `nodereg trace` runs it.

    from registry.trace.markers import phase
    with phase("solve"):
        ...

Protocol (any language): the tracer puts the path of a FIFO in the environment variable
NODEREG_PHASE_FIFO; a marker is one line "begin NAME [T [PID]]" or "end NAME [T [PID]]" written to it
in a single write, NAME without whitespace, T (optional) the CLOCK_MONOTONIC time in seconds at which
the phase began or ended, PID (optional) the marking process (the ranks of an MPI program each time
their own phases: registry.trace.mpi). Without T the tracer timestamps the line on arrival (a few ms
late at most). Outside a trace the markers cost one environment look-up and do nothing.

Manual stream probes (Corredor 2011's fallback when the author knows the access pattern): one
line "stream NAME SIZE_ELEMS STRIDE_BYTES ELEM_BYTES C|P seq|random" per stream, in the
thesis's positional order, declares a stream of marker phase NAME (``stream(...)`` below,
NODEREG_PHASE_STREAM in C); the tracer stores them as that phase's phase_streams. "iterations NAME
N" gives the phase's loop iterations of the slowest thread (``iterations(...)``,
NODEREG_PHASE_ITERATIONS), from which the thesis's time per iteration follows.

This module imports only the standard library (no numpy/pandas): applications import it.
"""

import os
import time
from contextlib import contextmanager

FIFO_ENV = "NODEREG_PHASE_FIFO"

_fd: int | None = None
_fd_pid: int | None = None


def _writer() -> int:
    """The FIFO's write end for this process (-1 outside a trace); reopened after a fork."""
    global _fd, _fd_pid
    if _fd is None or _fd_pid != os.getpid():
        path = os.environ.get(FIFO_ENV)
        _fd = -1
        if path:
            try:
                _fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                _fd = -1  # no tracer reading: markers become no-ops
        _fd_pid = os.getpid()
    return _fd


def _clean(name: str) -> str:
    name = "_".join(str(name).split())
    if not name:
        raise ValueError("a phase name must not be empty")
    return name


def mark(verb: str, name: str) -> None:
    """Write one marker line ('begin' or 'end'); never raises because the tracer is gone."""
    if verb not in ("begin", "end"):
        raise ValueError(f"marker verb must be 'begin' or 'end', not {verb!r}")
    _send(f"{verb} {_clean(name)} {time.monotonic():.9f} {os.getpid()}\n")


def _send(line: str) -> None:
    fd = _writer()
    if fd >= 0:
        try:
            os.write(fd, line.encode())
        except OSError:
            pass  # a full or closed FIFO must never break the application


def stream(phase_name: str, size_elems: int, stride_bytes: int, elem_bytes: int = 8, access: str = "C",
           pattern: str = "seq") -> None:
    """Declare one memory stream of marker phase `phase_name` (call once per stream, in order):
    region size in elements, stride in bytes, element size, C (shared by the threads) or P
    (private), seq or random."""
    if min(int(size_elems), int(stride_bytes), int(elem_bytes)) <= 0:
        raise ValueError("stream size, stride and element size must be positive")
    if access not in ("C", "P") or pattern not in ("seq", "random"):
        raise ValueError("stream access must be 'C' or 'P' and pattern 'seq' or 'random'")
    _send(f"stream {_clean(phase_name)} {int(size_elems)} {int(stride_bytes)} {int(elem_bytes)} {access} {pattern}\n")


def iterations(phase_name: str, n: float) -> None:
    """Declare the loop iterations of the slowest thread in marker phase `phase_name` (all its calls)."""
    if not float(n) > 0:
        raise ValueError("iterations must be positive")
    _send(f"iterations {_clean(phase_name)} {float(n):.17g}\n")


def begin(name: str) -> None:
    mark("begin", name)


def end(name: str) -> None:
    mark("end", name)


@contextmanager
def phase(name: str):
    """Mark the enclosed block as phase `name` (nesting and repeated names are fine)."""
    begin(name)
    try:
        yield
    finally:
        end(name)
