"""Is this host busy? A profile measured beside other work is slow and noisy (two `profile --quick`
at once: memory triad 7.8 GB/s instead of 24, every config unstable), so `profile` looks before and
while it measures, and stores what it saw with the profile.

Two signs, both cheap: CPU time spent on the host by processes outside this one's tree (from
/proc/stat through psutil, minus this tree's own CPU time, over a short window: unlike the load
average it does not lag a minute, nor count the benchmark's own threads), and other nodereg
measurements running (a `nodereg profile` or `trace`, or the microbenchmark driver).
"""

import os
import textwrap
import time
from dataclasses import asdict, dataclass, field

import psutil

BUSY_CPUS = 0.5          # other work worth half a CPU or more spoils bandwidth and latency figures
DRIVER = "nodereg-ub"    # registry.microbench.driver.BINARY (not imported: it pulls in the build)


def host_cpu_seconds() -> float:
    """CPU seconds the whole host has spent busy (all CPUs, since boot)."""
    t = psutil.cpu_times()
    guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)   # already counted in user/nice
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - guest


def own_cpu_seconds() -> float:
    """CPU seconds of this process and its children, living or reaped."""
    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            c = child.cpu_times()
        except psutil.Error:   # ended meanwhile: counted as reaped next time, or lost (a blip)
            continue
        total += c.user + c.system
    return total


def _relatives() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.parents()), *(p.pid for p in me.children(recursive=True))}


def other_measurers() -> list[str]:
    """Other nodereg measurements on this host, as 'PID command' (this process's family excluded), the
    command's words without their directories: a path such as /tmp/pytest-of-root/.../nodereg-ub
    says nothing more to the reader and overran the 80 columns of match's warnings."""
    mine, found = _relatives(), []
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        info = proc.info
        words = [os.path.basename(w) for w in (info["cmdline"] or [])]
        nodereg = any(w == "nodereg" for w in words) or "registry" in words[1:3]
        if info["pid"] not in mine and (info["name"] == DRIVER or
                                         (nodereg and ("profile" in words or "trace" in words))):
            found.append(f"{info['pid']} {textwrap.shorten(' '.join(words or [info['name']]), 60)}")
    return found


class CpuMeter:
    """CPUs' worth of work done by others between readings (host busy time minus this tree's)."""

    def __init__(self):
        self._last = (time.monotonic(), host_cpu_seconds(), own_cpu_seconds())

    def age(self) -> float:
        """Seconds since the last reading (or the start)."""
        return time.monotonic() - self._last[0]

    def read(self) -> float:
        now = (time.monotonic(), host_cpu_seconds(), own_cpu_seconds())
        (t0, host0, own0), self._last = self._last, now
        wall = now[0] - t0
        return max(0.0, (now[1] - host0) - (now[2] - own0)) / wall if wall > 0 else 0.0


@dataclass
class HostLoad:
    """What was seen: the most other work (CPUs) and the other measurements, before and during; and,
    after a profile, its core-local kernels that did not scale over distinct cores
    (registry.profile.parallel_check: the host shared what the guest sees as separate cores)."""

    other_cpus: float = 0.0
    loadavg_1m: float = 0.0
    measurers: list[str] = field(default_factory=list)
    unscaled: list[str] = field(default_factory=list)

    def busy(self) -> str | None:
        """Why the host counts as busy, or None."""
        if self.measurers:
            return f"another nodereg measurement is running ({self.measurers[0]})"
        if self.other_cpus >= BUSY_CPUS:
            cpus = f"{self.other_cpus:.1f}"
            return f"other processes keep {cpus} {'CPU' if cpus == '1.0' else 'CPUs'} busy"
        if self.unscaled:
            return (f"threads on distinct cores did not run side by side ({self.unscaled[0]}): something "
                    "shared this machine's cores (a hypervisor that put its CPUs on one physical core, a "
                    "CPU quota)")
        return None

    def merge(self, other: "HostLoad") -> "HostLoad":
        return HostLoad(max(self.other_cpus, other.other_cpus), max(self.loadavg_1m, other.loadavg_1m),
                        list(dict.fromkeys(self.measurers + other.measurers)),
                        list(dict.fromkeys(self.unscaled + other.unscaled)))

    def to_dict(self) -> dict:
        return {**asdict(self), "other_cpus": round(self.other_cpus, 2), "busy": self.busy()}


def sample(window_s: float = 0.5, since: CpuMeter | None = None) -> HostLoad:
    """The host's load now, over `window_s` seconds; or since `since` was started, waiting only for
    what is left of the window: a command that started a meter when it began counts its own start-up
    (imports, opening the registry, building the kernels) towards the window, since this process
    tree's own CPU time is not counted (`profile --quick` saves 0.4 of its 0.5 s, issue 30)."""
    meter = since or CpuMeter()
    time.sleep(max(0.0, window_s - meter.age()))
    return HostLoad(meter.read(), os.getloadavg()[0], other_measurers())


class Watch:
    """Looks at the host at most every `every_s` seconds while a profile runs (called between configs)."""

    def __init__(self, every_s: float = 2.0):
        self.every_s, self.seen, self.warned = every_s, HostLoad(), False
        self._meter, self._next = CpuMeter(), time.monotonic() + every_s

    def check(self) -> HostLoad | None:
        """The load since the last look, when it is time for a look; else None."""
        if time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + self.every_s
        now = HostLoad(self._meter.read(), os.getloadavg()[0], other_measurers())
        self.seen = self.seen.merge(now)
        return now


def wait_until_idle(wait_s: float, window_s: float = 0.5, on_sample=None) -> HostLoad:
    """Sample until the host is not busy or `wait_s` seconds have passed; the last sample.
    `on_sample(sample, seconds_left)` after each one, for a progress display."""
    deadline = time.monotonic() + wait_s
    seen = sample(window_s)
    while seen.busy() and time.monotonic() < deadline:
        if on_sample:
            on_sample(seen, max(0.0, deadline - time.monotonic()))
        time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
        seen = sample(window_s)
    return seen
