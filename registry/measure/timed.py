"""Timing a command: repetitions of one argv on a node's CPUs, for `nodereg run`.

Each repetition goes through the tracer's runner (registry.measure.runner): argv only, never a
shell; the node's CPUs and thread variables (registry.measure.onnode); the whole process tree
killed on timeout or interrupt, and by the watchdog if nodereg itself is killed. The runner samples
the tree as it goes; here it samples once a second without working sets, so the sampling costs the
timed program next to nothing (the trace's 0.1 s sampling with working sets costs it a few per cent).
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from registry.measure import onnode, runner

SAMPLE_EVERY_S = 1.0


@dataclass
class Timing:
    times_s: list[float] = field(default_factory=list)  # the successful repetitions, in order
    failed: runner.RunResult | None = None               # the repetition that failed or timed out (the last one run)


def time_command(argv: list[str], *, repeat: int, timeout_s: float | None = None, cpus: list[int] | None = None,
                 env: dict | None = None, progress: Callable[[int, float], None] | None = None,
                 stdout: int | None = None) -> Timing:
    """Run `argv` `repeat` times on `cpus`, stopping at the first repetition that fails or times out
    (the caller has checked that argv[0] exists: runner.check_command).

    `progress(repetition, seconds)` is called after each successful repetition; `stdout`: a file
    descriptor for the command's output (default: ours). Raises
    runner.Interrupted on Ctrl-C (the tree has been terminated).
    """
    run_env = onnode.thread_env(cpus, env)
    timing = Timing()
    for i in range(1, repeat + 1):
        result = runner.run(argv, interval_s=SAMPLE_EVERY_S, timeout_s=timeout_s, cpus=cpus, env=run_env, wss=False,
                            stdout=stdout)
        if result.status != "ok":
            timing.failed = result
            break
        timing.times_s.append(result.wall_s)
        if progress:
            progress(i, result.wall_s)
    return timing
