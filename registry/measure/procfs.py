"""Raw reads of /proc for one process tree: what the sampler turns into per-interval rates.

Why these files: per-thread `schedstat` gives CPU time in nanoseconds (`stat`'s utime/stime tick at
100 Hz, too coarse for 0.1 s intervals), the time the thread waited on a run queue (ready, but another
process had the CPU: what a shared host takes away) and the number of times it was switched in;
`stat` gives faults, RSS and thread count; `io` gives bytes read/written (it also accumulates reaped
children). `smaps_rollup`'s Referenced field after a write of "1" to `clear_refs` is the memory the
process touched since the previous clear: its working set per interval, which tells a phase
streaming memory from one computing in registers on machines without hardware counters.
Processes and threads vanish at any moment; every read tolerates that.
"""

import os
from dataclasses import dataclass, field

PAGE = os.sysconf("SC_PAGE_SIZE")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError):
        return None


# a thread's children (a module constant: tests point it at a file that does not exist)
CHILDREN = "/proc/{pid}/task/{tid}/children"


def tree(root: int) -> list[int]:
    """`root` and all its live descendants.

    The kernel's per-thread children lists are cheap to read, but a kernel built without
    CONFIG_PROC_CHILDREN has none, and a thread that exits while the tree is read takes its list
    along (its children move to another thread, perhaps one already read). Whenever a list of a
    live process cannot be read, psutil finds the descendants from every process's parent instead
    (it reads the stat of every process on the host, ~15 us each: too dear for every sample).
    """
    out, todo, seen, complete = [], [root], set(), True
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        out.append(pid)
        for tid in tids:
            text = _read(CHILDREN.format(pid=pid, tid=tid))
            if text is None:
                complete = False
            elif text:
                todo.extend(int(c) for c in text.split())
    if not complete:
        out += sorted(set(_descendants(root)) - set(out))
    return out


def _descendants(root: int) -> list[int]:
    import psutil  # here: only when a children list is missing

    try:
        return [p.pid for p in psutil.Process(root).children(recursive=True)]
    except psutil.Error:  # root gone (or not ours to read)
        return []


@dataclass
class ProcessCounters:
    """Cumulative counters of one process (all its threads), as read at one instant."""

    cpu_ns: dict[int, int] = field(default_factory=dict)     # tid -> CPU time (ns)
    switches: dict[int, int] = field(default_factory=dict)   # tid -> times switched in
    wait_ns: dict[int, int] = field(default_factory=dict)    # tid -> time runnable but not running (ns)
    minflt: int = 0
    majflt: int = 0
    rss_bytes: int = 0
    threads: int = 0
    read_bytes: int = 0
    write_bytes: int = 0


def read_process(pid: int) -> ProcessCounters | None:
    """The counters of process `pid`, or None if it is gone."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its closing ')'
    fields = stat[stat.rfind(")") + 2:].split()
    pc = ProcessCounters(
        minflt=int(fields[7]) + int(fields[8]),   # minflt + cminflt (reaped children)
        majflt=int(fields[9]) + int(fields[10]),
        threads=int(fields[17]),
        rss_bytes=int(fields[21]) * PAGE,
    )
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        sched = _read(f"/proc/{pid}/task/{tid}/schedstat")
        if sched:
            parts = sched.split()
            pc.cpu_ns[int(tid)] = int(parts[0])
            pc.wait_ns[int(tid)] = int(parts[1])
            pc.switches[int(tid)] = int(parts[2])
    io = _read(f"/proc/{pid}/io")
    if io:
        values = dict(line.split(": ", 1) for line in io.splitlines() if ": " in line)
        pc.read_bytes = int(values.get("rchar", 0))
        pc.write_bytes = int(values.get("wchar", 0))
    return pc


def referenced_bytes(pid: int, clear: bool = True) -> int | None:
    """Bytes of `pid`'s memory referenced since the last clear; clears the bits again if asked.

    None where the kernel lacks smaps_rollup/clear_refs or denies them (another user's process).
    """
    text = _read(f"/proc/{pid}/smaps_rollup")
    if text is None:
        return None
    total = None
    for line in text.splitlines():
        if line.startswith("Referenced:"):
            total = int(line.split()[1]) * 1024
            break
    if clear and not clear_referenced(pid):
        return None
    return total


def clear_referenced(pid: int) -> bool:
    """Clear the referenced bits of `pid`'s pages (a working-set window starts); False where denied."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("1")
    except OSError:
        return False
    return True
