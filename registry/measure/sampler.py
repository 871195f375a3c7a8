"""Per-interval samples of a whole process tree from /proc.

One `sample()` per interval turns the cumulative counters of `procfs` into one row of rates:

| metric          | meaning                                                              |
|-----------------|----------------------------------------------------------------------|
| cpu_util        | CPU seconds per wall second, all threads (2.0 = two busy CPUs)        |
| threads         | threads alive                                                         |
| threads_active  | threads that ran at least 20% of the interval                         |
| rss_mb          | resident memory, MB                                                   |
| minflt_per_s    | minor page faults per second (first touches of memory)               |
| majflt_per_s    | major page faults per second (reads from disk)                        |
| ctxsw_per_s     | times a thread was switched onto a CPU, per second                   |
| read_mb_s       | bytes read through read(2) and friends, MB/s                          |
| write_mb_s      | bytes written, MB/s                                                   |
| wss_mb          | memory touched in the window that ends at this row, MB                |
| wss_window_s    | that window's length, s (0.1 to WSS_WINDOW_S at the trace's interval)  |
| runq_util       | seconds per second its threads were ready to run but waited for a CPU  |

`runq_util` is not one of the stored sample columns (METRICS): a phase's CPU use plus it is the
CPUs the phase would have kept busy on a host of its own (registry.measure.signature, `sched`).

Row times are the interval's end, in seconds since the command started. The working set costs a
page-table walk proportional to RSS (about 3.5 ms + 4-12 ms for 256 MB on the development VM), so
it is read only as often as keeps its cost under `wss_budget` of the wall time, but at least once a
second while a window's reads cost under 20 ms (RSS up to about 500 MB); rows in between carry NaN
for it. With `wss_budget=None` it is read only at `prime` and when a `sample` asks for it
(`read_wss`): a microbenchmark config's window, whose one read covers the whole window.

A read covers the memory touched since the referenced bits were last cleared, and a read clears
them. Where reads are due more often than every WSS_WINDOW_S, each covers the intervals since the
previous one (0.1 s at the trace's interval, as a cache-resident config's reads do). Where the
budget spaces them further apart (a large RSS), the bits are cleared again WSS_WINDOW_S before the
due read, so that the read covers WSS_WINDOW_S, the window of a memory-resident config, and not the
seconds since the previous read. Phases and the microbenchmark configs they are matched to are
then measured over windows of the same lengths (issue 28): a phase that streams through fresh
memory touches more the longer the window, and at 1-3 s windows it looked several times larger
against the configs' 0.3 s than it would over the configs' windows.
"""

import math
import time

from registry.measure import procfs

METRICS = ("cpu_util", "threads", "threads_active", "rss_mb", "minflt_per_s", "majflt_per_s", "ctxsw_per_s",
           "read_mb_s", "write_mb_s", "wss_mb", "wss_window_s")
MB = 1024 * 1024
ACTIVE_SHARE = 0.2
WSS_MAX_GAP_S = 1.0
WSS_CHEAP_S = 0.02
WSS_WINDOW_S = 0.3     # the longest window a read covers: a memory-resident config's (registry.profile.signatures)
WSS_ON_TIME = 0.9      # a read is due this share of the window after the clear (sampling ticks jitter)


class TreeSampler:
    """Samples the tree rooted at `root` (the traced command's process)."""

    def __init__(self, root: int, *, wss: bool = True, wss_budget: float | None = 0.03):
        self.root = root
        self.wss = wss
        self.wss_budget = wss_budget
        self.rows: list[dict] = []
        self._cpu: dict[tuple[int, int], int] = {}
        self._switches: dict[tuple[int, int], int] = {}
        self._wait: dict[tuple[int, int], int] = {}
        self._totals = (0, 0, 0, 0)
        self._t_prev: float | None = None
        self._wss_due = 0.0
        self._wss_last = 0.0           # when the referenced bits were last cleared: the window's start
        self._wss_open_at = math.inf   # when to clear them before the due read (a far-off one)
        self._wss_clear_cost = 0.0     # CPU seconds of the clear of the window now open
        self.wss_cost_s = 0.0
        self.pids_seen: set[int] = set()   # every process of the tree so far (to kill or reap later)

    def prime(self, t_s: float = 0.0) -> None:
        """Take the baseline at the command's start (no row)."""
        self._collect(t_s, emit=False)

    def sample(self, t_s: float, final: bool = False, read_wss: bool = False) -> dict | None:
        """Append (and return) the row for the interval ending at `t_s`.

        `final`: the command has exited (a zombie): its CPU time still counts, but its memory is
        already released, so memory and thread counts carry over from the previous row.
        `read_wss`: read the working set now even if the budget says it is not due: the caller's
        window ends here and the process still lives (a microbenchmark config's window, where one
        read of a large RSS can cost more than the budget allows within the whole window).
        """
        if read_wss:
            self._wss_due = t_s
        row = self._collect(t_s, emit=True)
        if final and row is not None and len(self.rows) > 1:
            for key in ("threads", "rss_mb"):
                row[key] = self.rows[-2][key]
            row["wss_mb"] = row["wss_window_s"] = math.nan
        return row

    def account_exit(self, cpu_s: float) -> None:
        """Give the last row the CPU time the samples missed, from the exited tree's total (`cpu_s`:
        wait4's rusage, every thread's and every reaped child's time).

        The last row is read from the zombie, whose threads are gone and took with them their time
        since the previous sample: a team busy to the end read as an idle last interval (xz -T2:
        0.02 CPUs over its last 46 ms instead of ~1.9), and a phase that ends the run looked partly
        serial. The missing time is put there, at most at the busiest earlier row's rate, so that the
        time of a thread that exited earlier in the run (equally unseen) is not piled onto the end;
        what the last row cannot take at that rate goes to the row before it (a command that exits
        just after a sample: that sample missed the threads that had ended by then).
        """
        if not self.rows:
            return
        starts = [0.0, *(r["t_s"] for r in self.rows[:-1])]
        seen = sum(r["cpu_util"] * (r["t_s"] - t0) for r, t0 in zip(self.rows, starts))
        missing = cpu_s - seen
        ceiling = max((r["cpu_util"] for r in self.rows[:-1]), default=math.inf)
        # the last row, then the one before it: a command that exits just after a sample leaves a
        # short last interval, and that sample already missed the threads that ended before it
        for row, t0 in list(zip(self.rows, starts))[-2:][::-1]:
            dt = row["t_s"] - t0
            if missing <= 0 or dt <= 0:
                return
            room = max(0.0, ceiling - row["cpu_util"]) * dt
            added = min(missing, room)
            row["cpu_util"] += added / dt
            missing -= added

    def _collect(self, t_s: float, emit: bool) -> dict | None:
        pids = procfs.tree(self.root)
        self.pids_seen.update(pids)
        counters = {pid: c for pid in pids if (c := procfs.read_process(pid)) is not None}
        wss = self._working_set(list(counters), t_s)
        dt = None if self._t_prev is None else t_s - self._t_prev
        row = None
        if emit and dt and dt > 0:
            row = self._row(counters, t_s, dt, wss)
            self.rows.append(row)
        self._remember(counters)
        self._t_prev = t_s
        return row

    def _working_set(self, pids: list[int], t_s: float) -> tuple[float, float] | None:
        """(MB touched, window in s) when a read is due, else None (a window may open instead)."""
        if not self.wss or not pids:
            return None
        if t_s >= self._wss_open_at and t_s < self._wss_due:
            self._open_window(pids, t_s)
            return None
        if t_s < self._wss_due:
            return None
        start = time.thread_time()  # CPU, not wall: waiting for a busy CPU is no cost of ours
        values = [procfs.referenced_bytes(pid) for pid in pids]
        read_cost = time.thread_time() - start
        self.wss_cost_s += read_cost
        known = [v for v in values if v is not None]
        if not known:
            self.wss = False  # kernel without clear_refs/smaps_rollup: stop trying
            return None
        cost, self._wss_clear_cost = read_cost + self._wss_clear_cost, 0.0
        self._wss_open_at = math.inf
        if self.wss_budget is None:
            self._wss_due = math.inf   # until a sample asks (read_wss)
        else:
            gap = cost / self.wss_budget
            if cost <= WSS_CHEAP_S:  # up to ~500 MB of RSS: at least one read a second (<= 2% of a CPU)
                gap = min(gap, WSS_MAX_GAP_S)
            self._wss_due = t_s + gap
            if gap > WSS_WINDOW_S:
                self._wss_open_at = t_s + gap - WSS_WINDOW_S
        window, self._wss_last = t_s - self._wss_last, t_s
        return sum(known) / MB, window

    def _open_window(self, pids: list[int], t_s: float) -> None:
        """Clear the referenced bits now: the due read, moved to WSS_WINDOW_S from now, covers that."""
        start = time.thread_time()
        for pid in pids:
            procfs.clear_referenced(pid)
        self._wss_clear_cost = time.thread_time() - start
        self.wss_cost_s += self._wss_clear_cost
        self._wss_last, self._wss_open_at = t_s, math.inf
        self._wss_due = t_s + WSS_ON_TIME * WSS_WINDOW_S

    def _row(self, counters: dict, t_s: float, dt: float, wss: tuple[float, float] | None) -> dict:
        cpu_total, active, switches, waited = 0, 0, 0, 0
        for pid, c in counters.items():
            for tid, ns in c.cpu_ns.items():
                delta = max(0, ns - self._cpu.get((pid, tid), 0))
                cpu_total += delta
                active += delta >= ACTIVE_SHARE * dt * 1e9
                switches += max(0, c.switches[tid] - self._switches.get((pid, tid), 0))
                waited += max(0, c.wait_ns.get(tid, 0) - self._wait.get((pid, tid), 0))
        faults_min, faults_maj, read, write = (max(0, now - before) for now, before in
                                               zip(_totals(counters), self._totals))
        return {
            "t_s": t_s,
            "cpu_util": cpu_total / 1e9 / dt,
            "threads": sum(c.threads for c in counters.values()),
            "threads_active": active,
            "rss_mb": sum(c.rss_bytes for c in counters.values()) / MB,
            "minflt_per_s": faults_min / dt,
            "majflt_per_s": faults_maj / dt,
            "ctxsw_per_s": switches / dt,
            "read_mb_s": read / MB / dt,
            "write_mb_s": write / MB / dt,
            "wss_mb": math.nan if wss is None else wss[0],
            "wss_window_s": math.nan if wss is None else wss[1],
            "runq_util": waited / 1e9 / dt,
        }

    def _remember(self, counters: dict) -> None:
        self._cpu = {(pid, tid): ns for pid, c in counters.items() for tid, ns in c.cpu_ns.items()}
        self._switches = {(pid, tid): n for pid, c in counters.items() for tid, n in c.switches.items()}
        self._wait = {(pid, tid): n for pid, c in counters.items() for tid, n in c.wait_ns.items()}
        self._totals = _totals(counters)


def _totals(counters: dict) -> tuple[int, int, int, int]:
    """Tree totals of faults and I/O. Each process's values include its reaped children, so a child
    that exits moves its share into its parent's and the total stays continuous (per-process
    deltas would count it twice)."""
    values = counters.values()
    return (sum(c.minflt for c in values), sum(c.majflt for c in values),
            sum(c.read_bytes for c in values), sum(c.write_bytes for c in values))
