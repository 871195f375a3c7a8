"""Freed arrays kept for reuse while `nodereg match` runs.

A match over a 10,000-node registry builds and drops dozens of arrays of millions of runs (codes,
masks, gathers). glibc serves each block above its mmap threshold (128 KiB at first, raised only
as blocks are freed) with fresh pages from the kernel and returns them on free, so every array pays
its page faults again: about 2.7 us per 4 KiB page on this KVM guest, 5-30 ms per array of 3 M
entries, and sometimes a compaction stall of 70 ms. With the threshold at glibc's maximum (32 MiB)
and trimming only above 1 GiB, a freed block stays in the heap and the next array of its size reuses
its pages (with the packed profiles read a chunk at a time, a 10,000-node match faulted 52,000-56,000
pages instead of 74,000: docs/match.md, "Speed").

Only for a short-lived command: the process keeps what it freed until it exits (`nodereg serve`
does not call this). A C library other than glibc (musl, macOS) is left as it is.
"""

import ctypes

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3     # glibc's mallopt parameters (malloc.h)
_MMAP_MAX = 32 << 20      # glibc's ceiling for the mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
_TRIM = 1 << 30


def keep_freed_memory() -> bool:
    """Have glibc keep freed large blocks for reuse (see the module's docstring); False where the C
    library has no mallopt or refuses the settings."""
    try:
        mallopt = ctypes.CDLL(None).mallopt     # the process's own symbols: the C library's
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM))
