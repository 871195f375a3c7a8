"""The sampler's CPU time at the end of a run: threads that exit with the process take their time
since the previous sample with them, and wait4's total gives it back to the last row."""

import os
import subprocess
from pathlib import Path

import pytest

from registry.measure import runner
from registry.measure.sampler import TreeSampler

PROGRAMS = Path(__file__).parent / "programs"


def _sampler_with(rows: list[tuple[float, float]]) -> TreeSampler:
    s = TreeSampler(root=0, wss=False)
    s.rows = [{"t_s": t, "cpu_util": u} for t, u in rows]
    return s


def test_the_time_missed_at_exit_goes_to_the_last_row():
    s = _sampler_with([(0.1, 1.9), (0.2, 1.9), (0.25, 0.0)])   # last 50 ms read from the zombie
    s.account_exit(0.19 + 0.19 + 0.095)
    assert s.rows[-1]["cpu_util"] == pytest.approx(1.9)
    assert [r["cpu_util"] for r in s.rows[:-1]] == [1.9, 1.9]


def test_an_exit_just_after_a_sample_gives_the_row_before_the_time_it_missed():
    """The fresh-clone CI run's case: the team's worker ended inside the second interval (its time
    there unseen) and the command exited 10 ms after that sample; the last row alone could take
    only 10 ms of the missing 0.12 s at the team's rate, and the rows fell 7% short of wait4's."""
    s = _sampler_with([(0.1, 2.0), (0.2, 1.0), (0.21, 0.0)])
    s.account_exit(0.2 + 0.2 + 0.02)
    assert [r["cpu_util"] for r in s.rows] == pytest.approx([2.0, 2.0, 2.0])


def test_earlier_lost_time_is_not_piled_onto_the_end():
    """At most the busiest earlier row's rate: a thread that exited mid-run lost time the end did not use."""
    s = _sampler_with([(0.1, 2.0), (0.2, 1.0), (0.25, 0.1)])
    s.account_exit(5.0)
    assert s.rows[-1]["cpu_util"] == pytest.approx(2.0)


def test_nothing_missing_changes_nothing():
    s = _sampler_with([(0.1, 1.0), (0.2, 1.0)])
    s.account_exit(0.15)   # less than the samples saw (a child not waited for): left alone
    assert [r["cpu_util"] for r in s.rows] == [1.0, 1.0]


@pytest.mark.alone   # the samples' CPU time against the run's, within 3%
def test_a_traced_team_keeps_its_cpu_time_to_the_end(tmp_path, monkeypatch):
    """Two OpenMP threads busy to the exit: the rows add up to the run's CPU time (wait4), which the
    zombie's last read alone falls short of by up to an interval of the team's time."""
    exe = tmp_path / "triad"
    subprocess.run(["cc", "-O2", "-fopenmp", str(PROGRAMS / "triad.c"), "-o", str(exe)], check=True)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    res = runner.run([str(exe), "2000000", "600"], wss=False, stdout=subprocess.DEVNULL)
    assert res.exit_status == 0 and res.wall_s > 0.3
    starts = [0.0, *(r["t_s"] for r in res.samples[:-1])]
    seen = sum(r["cpu_util"] * (r["t_s"] - t0) for r, t0 in zip(res.samples, starts))
    assert seen == pytest.approx(res.cpu_s, rel=0.03)


def test_a_config_window_keeps_its_working_set_when_reads_are_expensive(binary, monkeypatch):
    """On a 16-CPU host with a 300 MiB L3, one working-set read of the driver cost more than the
    budget allows in a config's window, so the next read fell past the window's end, and the
    window's last row, read with the driver still alive, was thrown away as if it were a zombie's:
    64 of 72 representative configs had no working set. Here the budget is made tiny (any read is
    'expensive'), so only the read at the window's end can give the working set. The window holds
    only the kernel's repetitions: the load kernel reads one 64 MiB array, while preparing it fills
    three (a window that held the preparation read 192 MiB)."""
    from registry.measure import procfs
    from registry.microbench.driver import Driver
    from registry.profile import catalog, signatures
    from registry.profile.sweep import Config

    reads = []
    real = procfs.referenced_bytes
    monkeypatch.setattr(procfs, "referenced_bytes", lambda pid, clear=True: reads.append(pid) or real(pid, clear))
    monkeypatch.setattr(signatures, "WSS_BUDGET", 1e-9)
    cpu = min(os.sched_getaffinity(0))
    config = Config(ub=catalog.get("load"), threads=1, placement="compact", cpus=(cpu,), n=(64 << 20) // 8)
    with Driver(binary) as driver:
        sig = signatures.measure(driver, config, 32 << 20)
    assert len(reads) == 2                       # the window's start and end
    assert 60 < sig["proc"]["wss_mb"] < 70       # the 64 MiB array, touched in the window
    assert sig["proc"]["wss_llc"] == pytest.approx(sig["proc"]["wss_mb"] / 32)


def test_cache_resident_windows_do_not_read_the_sweeps_buffers(binary, monkeypatch):
    """The sweep's driver keeps every kernel's buffers; a working-set read walks all of them. The
    windows of configs that fit in the caches run on a driver of their own, whose memory is theirs
    (here: the sweep's driver holds 256 MiB, the L1 window's driver a few MB); the memory-resident
    window runs on the sweep's driver, whose buffers it reuses, read at the window's start and end
    only (a read in between left the last one a tail after the kernel had stopped)."""
    from registry.measure import procfs
    from registry.microbench.driver import Driver
    from registry.profile import catalog, signatures
    from registry.profile.sweep import Config

    cpu = min(os.sched_getaffinity(0))
    triad = catalog.get("triad")
    in_l1 = Config(ub=triad, threads=1, placement="compact", cpus=(cpu,), n=512, level="L1")
    in_memory = Config(ub=triad, threads=1, placement="compact", cpus=(cpu,), n=(256 << 20) // 24, level="memory")
    rss_at_read, reads = {}, []
    real = procfs.referenced_bytes

    def spy(pid, clear=True):
        rss_at_read.setdefault(pid, procfs.read_process(pid).rss_bytes)
        reads.append(pid)
        return real(pid, clear)

    with Driver(binary) as sweep:
        sweep.run({**in_memory.driver_args(), "reps": 1, "target": 0.01})   # the sweep's buffers
        monkeypatch.setattr(procfs, "referenced_bytes", spy)
        sigs = signatures.measure_all(sweep, [in_l1, in_memory], 32 << 20)
        assert list(sigs) == [in_l1.key, in_memory.key]
        assert rss_at_read[sweep.proc.pid] > 200 << 20 and reads.count(sweep.proc.pid) == 2
    others = [rss for pid, rss in rss_at_read.items() if pid != sweep.proc.pid]
    assert len(others) == 1 and others[0] < 32 << 20
    assert sigs[in_l1.key]["proc"]["wss_mb"] < 4 < 200 < sigs[in_memory.key]["proc"]["wss_mb"]


class _StreamingProcess:
    """A fake process that touches `mb_per_s` of fresh memory every second, for the sampler's
    working-set reads, each read costing `read_cost_s` of CPU (a large RSS's page-table walk)."""

    def __init__(self, monkeypatch, mb_per_s: float, read_cost_s: float):
        from registry.measure import procfs, sampler

        self.now, self.cleared_at, self.cpu = 0.0, 0.0, 0.0
        self.mb_per_s, self.read_cost_s = mb_per_s, read_cost_s
        monkeypatch.setattr(procfs, "tree", lambda root: [root])
        monkeypatch.setattr(procfs, "read_process", lambda pid: procfs.ProcessCounters())
        monkeypatch.setattr(procfs, "referenced_bytes", self.read)
        monkeypatch.setattr(procfs, "clear_referenced", self.clear)
        monkeypatch.setattr(sampler.time, "thread_time", lambda: self.cpu)

    def clear(self, pid: int) -> bool:
        self.cpu += self.read_cost_s
        self.cleared_at = self.now
        return True

    def read(self, pid: int, clear: bool = True) -> int:
        touched = (self.now - self.cleared_at) * self.mb_per_s * 2**20
        self.clear(pid)
        return int(touched)

    def sample_every(self, sampler: TreeSampler, interval: float, seconds: float) -> list[dict]:
        sampler.prime(0.0)
        for k in range(1, round(seconds / interval) + 1):
            self.now = k * interval
            sampler.sample(self.now)
        return [r for r in sampler.rows if r["wss_window_s"] == r["wss_window_s"]]


def test_an_expensive_working_set_read_covers_a_configs_window_not_the_gap_since_the_last(monkeypatch):
    """Issue 28: a phase's working set was read over the gap between two budgeted reads (0.83 s
    here: a read costs 25 ms, the budget 3%; 83 MB of this stream), a memory-resident config's over
    its 0.3 s window, so a phase streaming through fresh memory looked several times larger than
    over a config's window. Now the referenced bits are cleared a window before the due read: every
    read covers 0.3 s (30 MB), and the reads and clears together keep to the budget."""
    from registry.measure import sampler as sampler_module
    from registry.profile import signatures

    assert sampler_module.WSS_WINDOW_S == pytest.approx(signatures.WINDOW_S)
    fake = _StreamingProcess(monkeypatch, mb_per_s=100.0, read_cost_s=0.025)
    s = TreeSampler(root=1)
    reads = fake.sample_every(s, 0.1, 20.0)
    assert len(reads) >= 4
    assert all(0.25 < r["wss_window_s"] < 0.35 for r in reads[1:])
    assert all(25 < r["wss_mb"] < 35 for r in reads[1:])          # 100 MB/s over 0.3 s
    assert s.wss_cost_s <= 0.03 * 20.0 + 2 * 0.025                # the budget, reads and clears
    assert fake.cpu == pytest.approx(s.wss_cost_s)


def test_cheap_working_set_reads_still_follow_each_other(monkeypatch):
    """A small RSS (a read costs 1 ms) is read at every interval, as before: each read covers the
    0.1 s since the previous one, as a cache-resident config's reads do, and phase detection keeps
    the working set as a series (a metric read on fewer than half the samples is left out)."""
    fake = _StreamingProcess(monkeypatch, mb_per_s=100.0, read_cost_s=0.001)
    reads = fake.sample_every(TreeSampler(root=1), 0.1, 3.0)
    assert len(reads) == 30
    assert all(r["wss_window_s"] == pytest.approx(0.1) for r in reads)
