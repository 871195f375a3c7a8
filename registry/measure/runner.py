"""Run one command under observation: argv (never a shell), inherited stdio, samples every interval.

The child stays in the tracer's process group, so a terminal's Ctrl-C and a terminal read reach it
as if run directly. The tracer is a child subreaper (prctl), so descendants whose parent died stay
findable: a timeout or an interrupt freezes (SIGSTOP) the whole tree, then kills it. A pidfd wakes
the loop the moment the command exits (exact wall time); the marker FIFO is read in the same
select loop, so markers get arrival times within milliseconds even when they carry none. A
watchdog process (registry.measure.watchdog) kills the tree if the tracer itself is killed (kill -9).
"""

import ctypes
import errno
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from registry.errors import UserError
from registry.measure import procfs
from registry.trace.markers import FIFO_ENV
from registry.measure.sampler import TreeSampler
from registry.measure.watchdog import Watchdog

PR_SET_CHILD_SUBREAPER = 36
TERM_GRACE_S = 2.0


class Interrupted(Exception):
    """The user interrupted the trace (SIGINT/SIGTERM); the command's tree has been terminated."""


@dataclass
class Marker:
    verb: str      # begin | end | stream | iterations (declared by phase `name`, see registry.trace.markers)
    name: str
    t_s: float     # seconds since the command started
    args: tuple[str, ...] = ()    # stream: size_elems stride_bytes elem_bytes access pattern; iterations: n
    pid: int | None = None        # the marking process, where the line names it


@dataclass
class RunResult:
    argv: list[str]
    exit_status: int
    status: str                 # ok | failed | timeout
    wall_s: float
    t0_monotonic: float
    samples: list[dict]
    markers: list[Marker] = field(default_factory=list)
    wss_cost_s: float = 0.0     # time the tracer spent reading working sets
    cpu_s: float = 0.0          # user + system time of the command and the children it waited for


def check_command(argv: list[str], env: dict | None = None) -> None:
    """Fail early, with the usual shell wording, when argv[0] cannot be executed."""
    if not argv:
        raise UserError("no command given: nodereg trace [OPTIONS] -- CMD [ARG...]", exit_code=2)
    cmd = argv[0]
    if cmd.startswith("-"):   # a mistyped option of ours (`run NODE --threads 2 -- CMD`), not a program
        raise UserError(f"no such option: {cmd} (the command to run goes after `--`; --help lists the options)",
                        exit_code=2)
    path = (env or os.environ).get("PATH")
    found = cmd if "/" in cmd else shutil.which(cmd, path=path)
    if not found or not os.path.exists(found):
        raise UserError(f"command not found: {cmd}", exit_code=127)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise UserError(f"command is not executable: {cmd}", exit_code=126)


def exit_status(returncode: int) -> int:
    """Shell convention: a child killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def _set_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: orphans of a killed tree may survive, nothing else changes


def _adopted(known: set[int]) -> list[int]:
    """Processes of the traced tree that the subreaper adopted after their parent died: our children
    that were seen in the tree before, with their descendants (never our other children)."""
    me = os.getpid()
    out = []
    for pid in procfs.tree(me):
        if pid != me and pid in known:
            out.extend(procfs.tree(pid))
    return out


def kill_tree(root: int, *, known: set[int] = frozenset(), grace_s: float = 0.0) -> None:
    """Stop every process of the tree (so none can fork a new one), then kill them all.

    `known`: pids seen in the tree earlier (orphans the subreaper adopted are found through it).
    With `grace_s` > 0 the tree first gets SIGTERM (and SIGCONT) and that long to exit by itself.
    """
    if grace_s > 0:
        for pid in set(procfs.tree(root)) | set(_adopted(known)):
            _signal(pid, signal.SIGTERM)
            _signal(pid, signal.SIGCONT)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _alive(root):
            time.sleep(0.02)
    freeze_and_kill(lambda seen: set(procfs.tree(root)) | set(_adopted(known | seen)))


def freeze_and_kill(find: Callable[[set[int]], set[int]]) -> None:
    """SIGSTOP what `find(stopped so far)` returns until it returns no new process (a frozen
    process cannot fork), then SIGKILL the frozen set."""
    seen: set[int] = set()
    while True:
        pids = find(seen)
        if pids <= seen:
            break
        for pid in pids - seen:
            _signal(pid, signal.SIGSTOP)
        seen |= pids
    for pid in seen:
        _signal(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap_orphans(pids: set[int]) -> None:
    """Collect zombies of orphans the subreaper adopted (only pids that belonged to the tree)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


class _MarkerReader:
    """Reads marker lines from the FIFO (non-blocking; keeps a partial trailing line)."""

    def __init__(self, path: Path, t0: float):
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._keep_open = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # no EOF when writers close
        self.t0 = t0
        self.buffer = b""
        self.markers: list[Marker] = []

    def drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        now = time.monotonic() - self.t0
        for line in lines:
            parts = line.decode(errors="replace").split()
            if (len(parts), parts[0]) in ((7, "stream"), (3, "iterations")):
                self.markers.append(Marker(parts[0], parts[1], now, tuple(parts[2:])))
                continue
            if len(parts) < 2 or parts[0] not in ("begin", "end"):
                continue
            t_s, pid = now, None
            if len(parts) >= 3:
                try:
                    t_s = float(parts[2]) - self.t0
                    pid = int(parts[3]) if len(parts) >= 4 else None
                except ValueError:
                    pass
            self.markers.append(Marker(parts[0], parts[1], t_s, pid=pid))

    def close(self) -> None:
        os.close(self.fd)
        os.close(self._keep_open)


def run(argv: list[str], *, interval_s: float = 0.1, timeout_s: float | None = None,
        cpus: list[int] | None = None, env: dict | None = None, wss: bool = True,
        scratch: tuple[Path, ...] = (), stdout: int | None = None,
        attach: Callable[[int], AbstractContextManager] | None = None) -> RunResult:
    """Run `argv` to completion (or timeout), sampling its process tree every `interval_s`.

    Raises `Interrupted` on SIGINT/SIGTERM after terminating the tree; nothing is returned then.
    `scratch`: the caller's temporary directories, which the watchdog removes with this run's if the
    tracer is killed. `stdout`: a file descriptor for the command's standard output (default: ours).
    `attach(pid)`: a context held from the command's start to its end, for an observer of the
    started process that must not be part of its tree (perf record -p: as the command's parent,
    perf's own CPU time and start-up were sampled as the program's). The command is then held at a
    gate, a shell waiting on a FIFO, until the context has been entered, and execs in place: an
    observer that follows the processes it sees started misses none (a script that started its
    servers within a millisecond had given perf, attached 0.2 s late, nothing to sample), and the
    clock starts when the gate opens.
    """
    if interval_s <= 0:
        raise UserError("--interval must be positive")
    env = dict(os.environ if env is None else env)
    _set_subreaper()
    with tempfile.TemporaryDirectory(prefix="nodereg-trace-") as tmp:
        fifo = Path(tmp) / "phases.fifo"
        os.mkfifo(fifo, 0o600)
        env[FIFO_ENV] = str(fifo)
        watchdog = Watchdog(Path(tmp), *scratch)
        try:
            gate = Path(tmp) / "start.fifo" if attach else None
            if gate:
                os.mkfifo(gate, 0o600)
            return _run(argv, fifo, interval_s, timeout_s, cpus, env, wss, watchdog, stdout, attach, gate)
        finally:
            watchdog.release()


@contextmanager
def pinned(cpus):
    """Start children on `cpus` (None: as this process runs): the calling thread's own CPU mask is set
    for the block and restored after. On Linux a mask belongs to a thread and a child inherits the
    mask of the thread that starts it, so other threads are untouched, and Popen keeps its fast,
    thread-safe spawn (a `preexec_fn` runs Python between fork and exec, which deadlocks when another
    thread held a lock at the fork)."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


GATE = 'read _ < "$0"; exec "$@"'    # sh -c GATE FIFO ARGV...: wait for a line on FIFO, then become ARGV


def _open_gate(gate: Path, pidfd: int) -> float:
    """Let the gated command exec: a line on its FIFO once it has opened it (at its start), unless
    it has exited before (the pidfd is readable). Returns the monotonic time just before the line
    was written: the run's start, which nothing of the command can precede. Taken after the write,
    it came after the command had begun whenever this process lost its CPU in between (a loaded
    2-CPU host: an OpenMP region of a 1-ms program started 3.6 ms before it, and its phase weighed
    4.8 runs, which the trace file's reader refuses)."""
    while not select.select([pidfd], [], [], 0)[0]:
        try:
            fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:   # ENXIO: no reader yet
                raise
            time.sleep(0.001)
            continue
        try:
            start = time.monotonic()
            os.write(fd, b"\n")
        finally:
            os.close(fd)
        return start
    return time.monotonic()


def _run(argv, fifo, interval_s, timeout_s, cpus, env, wss, watchdog, stdout, attach, gate) -> RunResult:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def interrupted(signum, frame):
        raise Interrupted()

    t0 = time.monotonic()
    reader = _MarkerReader(fifo, t0)
    try:
        with pinned(cpus):
            proc = subprocess.Popen(["/bin/sh", "-c", GATE, str(gate), *argv] if gate else argv, env=env,
                                    close_fds=True, stdout=stdout)
    except OSError as exc:
        reader.close()
        raise UserError(f"cannot run {argv[0]}: {exc.strerror}", exit_code=127) from None
    watchdog.tell([proc.pid])
    for sig in previous:
        signal.signal(sig, interrupted)
    pidfd = os.pidfd_open(proc.pid)
    sampler = TreeSampler(proc.pid, wss=wss)
    status = None
    observers = ExitStack()
    try:
        if attach:
            observers.enter_context(attach(proc.pid))
            t0 = reader.t0 = _open_gate(gate, pidfd)
        sampler.prime(0.0)
        watchdog.tell(sampler.pids_seen)
        next_tick = t0 + interval_s
        deadline = t0 + timeout_s if timeout_s else None
        while True:
            now = time.monotonic()
            wake = min(next_tick, deadline) if deadline else next_tick
            ready, _, _ = select.select([reader.fd, pidfd], [], [], max(0.0, wake - now))
            if reader.fd in ready:
                reader.drain()
            now = time.monotonic()
            if pidfd in ready:  # exited: sample the zombie once more, then reap
                wall = now - t0
                sampler.sample(wall, final=True)
                break
            if deadline and now >= deadline:
                wall = now - t0
                sampler.sample(wall)
                kill_tree(proc.pid, known=sampler.pids_seen)
                status = "timeout"
                break
            if now >= next_tick:
                sampler.sample(now - t0)
                watchdog.tell(sampler.pids_seen)
                next_tick += interval_s * max(1, int((now - next_tick) / interval_s) + 1)
        _, wait_status, usage = os.wait4(proc.pid, 0)
        returncode = proc.returncode = os.waitstatus_to_exitcode(wait_status)
        if status is None:  # exited by itself: its last row was read from the zombie
            sampler.account_exit(usage.ru_utime + usage.ru_stime)
        reader.drain()
    except Interrupted:
        kill_tree(proc.pid, known=sampler.pids_seen, grace_s=TERM_GRACE_S)
        proc.wait()
        raise
    finally:
        observers.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(pidfd)
        reader.close()
        _reap_orphans(sampler.pids_seen - {proc.pid})
    code = exit_status(returncode)
    return RunResult(argv=list(argv), exit_status=code, status=status or ("ok" if code == 0 else "failed"),
                     wall_s=wall, t0_monotonic=t0, samples=sampler.rows, markers=reader.markers,
                     wss_cost_s=sampler.wss_cost_s, cpu_s=usage.ru_utime + usage.ru_stime)
