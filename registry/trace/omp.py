"""OpenMP parallel regions of GCC-built programs, timed by the LD_PRELOAD shim in microbench/shim.

The shim (gomp_shim.c) writes one record per run of consecutive calls of one outlined function
(see its header for the line format). Here the records are read back, their CLOCK_MONOTONIC
nanoseconds turned into seconds since the command started, and their functions named: dladdr
only knows exported symbols, while outlined functions (`main._omp_fn.0`) are local, so names come
from the object's ELF symbol table through `nm`.
"""

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OUT_ENV = "NODEREG_GOMP_OUT"
SHIM_NAME = "libnodereg_gomp.so"


@dataclass
class OmpRecord:
    pid: int
    function: str
    object: str
    calls: int
    start_s: float
    end_s: float
    wall_s: float
    slowest_s: float     # sum over calls of the slowest thread's time in the region
    thread_s: float      # sum over calls and threads of time in the region
    max_threads: int


def build_shim() -> Path:
    from registry.microbench.build import compile_c, source
    return compile_c([source("shim/gomp_shim.c")], SHIM_NAME, shared=True, libs=("-ldl",))


def environment(shim: Path, out: Path, base_env: dict) -> dict:
    """Environment entries that load the shim (kept in front of any LD_PRELOAD already set)."""
    preload = " ".join(p for p in (str(shim), base_env.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, OUT_ENV: str(out)}


def read_records(path: Path, t0_monotonic: float) -> list[OmpRecord]:
    """The shim's records in `path`, times relative to `t0_monotonic` (seconds)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) != 13 or parts[0] != "R":
            continue  # a line cut short by a killed process
        try:
            pid, addr, base, calls = int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])
            start, end, wall, slowest, thread = (int(x) for x in parts[5:10])
            max_threads = int(parts[10])
        except ValueError:
            continue
        sym, obj = parts[11], parts[12]
        name = sym if sym != "-" else symbol_at(obj, addr, base) or f"{Path(obj).name}+{addr - base:#x}"
        records.append(OmpRecord(pid, name, obj, calls, start / 1e9 - t0_monotonic, end / 1e9 - t0_monotonic,
                                 wall / 1e9, slowest / 1e9, thread / 1e9, max_threads))
    return sorted(records, key=lambda r: r.start_s)


def symbol_at(obj: str, addr: int, base: int) -> str | None:
    """Name of the function at run-time address `addr` in object `obj` loaded at `base`."""
    table = _functions(obj)
    if not table:
        return None
    key = addr - base if _is_shared_object(obj) else addr
    return table.get(key)


def _is_shared_object(path: str) -> bool:
    """ET_DYN (PIE executables, libraries) symbols are offsets from the load base; ET_EXEC absolute."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return True
    return len(head) == 18 and int.from_bytes(head[16:18], "little") == 3


@functools.cache
def _functions(path: str) -> dict[int, str]:
    if not shutil.which("nm") or not os.path.exists(path):
        return {}
    try:
        out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            table.setdefault(int(parts[0], 16), parts[2])
    return table
