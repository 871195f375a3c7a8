"""Running a command as a registered node: its CPUs and its thread count.

`trace` and `run` must run a program the same way, or the time traced on a node and the time
measured on it differ by how the program was started. Both pin the command to the node's CPUs and
give the common threading libraries the node's CPU count (libgomp already follows the affinity
mask; OpenBLAS, MKL, BLIS, numexpr and Rayon do not all do so), unless the user set a count
explicitly: then the user's count wins, and it is the run's fixed thread count.
"""

import os
import socket

from registry import cpulist
from registry.errors import UserError

# the variables threading runtimes read for their default thread count
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "RAYON_NUM_THREADS")


def node_cpus(node: dict, elsewhere: str) -> list[int] | None:
    """The CPUs of `node` (a row with name, host, cpu_list), checked against this host and the CPUs
    this process may use; None when the node is the whole host. `elsewhere`: what the user should
    do when the node was measured on another host (the error names that host)."""
    host = socket.gethostname()
    if node["host"] and node["host"] != host:
        raise UserError(f"node {node['name']!r} was measured on host {node['host']!r}, not on this host "
                        f"({host}): {elsewhere}")
    if not node["cpu_list"]:
        return None
    cpus = cpulist.parse(node["cpu_list"])
    missing = sorted(set(cpus) - os.sched_getaffinity(0))
    if missing:
        raise UserError(f"node {node['name']!r} runs on {cpulist.named(node['cpu_list'])}, but "
                        f"{cpulist.named(missing)} {'is' if len(missing) == 1 else 'are'} not available to this process")
    return cpus


def fixed_threads(env: dict | None = None) -> int | None:
    """The thread count the user told the program to use (OMP_NUM_THREADS, first level), else None."""
    first = (os.environ if env is None else env).get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def thread_count(cpus: list[int] | None, env: dict | None = None) -> int:
    """Threads a run on `cpus` (None: every CPU this process may use) uses: the user's fixed count, else one per CPU."""
    return fixed_threads(env) or len(cpus or os.sched_getaffinity(0))


def thread_env(cpus: list[int] | None, env: dict | None = None) -> dict:
    """`env` (default: this process's) with every unset thread variable set to the run's thread count."""
    out = dict(os.environ if env is None else env)
    threads = str(thread_count(cpus, out))
    for var in THREAD_VARS:
        out.setdefault(var, threads)
    return out
