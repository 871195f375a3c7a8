"""Kill the traced command's tree when the tracer dies without cleaning up (kill -9, the OOM killer).

SIGKILL cannot be caught, so a killed tracer cannot stop its command, which would run on as an
orphan. PR_SET_PDEATHSIG would reach only the direct child, not what it started (the ranks behind
mpirun, the program behind a shell script). So before the command starts, the tracer starts this
watchdog in its own session (out of reach of the terminal's signals and of a kill of the tracer's
process group), holding the read end of a pipe whose write end only the tracer has. The tracer
tells it each process of the tree it sees, as "PID START" (START: the start time from
/proc/PID/stat, so that a pid recycled by an unrelated process is never signalled), and "done"
when it has finished with the command. End of file without "done" means the tracer died: the
watchdog freezes and kills every process it was told of that still runs, with its descendants,
and removes the tracer's temporary directories.

    python -m registry.measure.watchdog FD TMPDIR [TMPDIR...]
"""

import os
import select
import subprocess
import sys
from pathlib import Path


def start_time(pid: int) -> int | None:
    """Start time of `pid` (clock ticks since boot, field 22 of /proc/PID/stat), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class Watchdog:
    """The tracer's side: start the watchdog, tell it the tree's processes, release it at the end."""

    def __init__(self, *tmpdirs: Path):
        read_end, self._fd = os.pipe()  # both close-on-exec: the traced command inherits neither
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "registry.measure.watchdog", str(read_end), *map(str, tmpdirs)],
                pass_fds=(read_end,),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        except BaseException:
            os.close(self._fd)
            raise
        finally:
            os.close(read_end)
        os.set_blocking(self._fd, False)  # never let a stuck watchdog stall the tracer
        self._told: set[int] = set()

    def tell(self, pids) -> None:
        """Add processes of the traced tree (those not told before)."""
        lines = []
        for pid in set(pids) - self._told:
            self._told.add(pid)
            start = start_time(pid)
            if start is not None:
                lines.append(f"{pid} {start}\n")
        self._send(lines)

    def release(self) -> None:
        """The tracer is done with the command (it ended, or the tracer killed it): stand down."""
        self._send(["done\n"])
        os.close(self._fd)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _send(self, lines: list[str]) -> None:
        """Whole lines only: each write is at most PIPE_BUF bytes, which a pipe takes whole or not at all."""
        chunk = ""
        for line in [*lines, ""]:
            if chunk and (not line or len(chunk) + len(line) > select.PIPE_BUF):
                try:
                    os.write(self._fd, chunk.encode())
                except (BlockingIOError, BrokenPipeError):
                    return  # a full pipe (thousands of untold processes) or a dead watchdog: the run goes on
                chunk = ""
            chunk += line


def _watch(fd: int) -> dict[int, int] | None:
    """Read until "done" (None) or end of file (the processes told: {pid: start time})."""
    told: dict[int, int] = {}
    buffer = b""
    while chunk := os.read(fd, 65536):
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            if line == b"done":
                return None
            pid, start = map(int, line.split())
            told[pid] = start
    return told


def main(argv: list[str]) -> int:
    fd, tmpdirs = int(argv[0]), argv[1:]
    told = _watch(fd)
    if told is None:  # the usual end: the watchdog's start-up is all it costs, so import nothing before
        return 0
    import shutil

    from registry.measure import procfs
    from registry.measure.runner import freeze_and_kill

    def survivors(seen: set[int]) -> set[int]:
        return {pid for root, start in told.items() if start_time(root) == start for pid in procfs.tree(root)}

    freeze_and_kill(survivors)
    for tmpdir in tmpdirs:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
