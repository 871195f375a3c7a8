"""What an application needs of a node besides speed: its peak memory, and its disk and network volume.

Read from a trace's samples, in either convention the registry stores:

* `nodereg trace` (registry/measure/sampler.py, the traced process tree): ``rss_mb`` (resident
  memory of the tree), ``read_mb_s`` / ``write_mb_s``; no network (per process it is not in /proc);
* `sar` (Lumos imports; the whole VM, which ran only the job): ``kbmemused`` less ``kbbuffers`` and
  ``kbcached`` (page cache is reclaimable, not a need), ``rd_sec/s`` / ``wr_sec/s`` (512-byte
  sectors), ``rxkB/s`` + ``txkB/s``.

Volumes are rates integrated over each sample's interval. A quantity with no samples, or whose
figure cannot be a byte count (damaged input), is None (not known), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

MB, KB, SECTOR = 2**20, 2**10, 512


def _column(samples: Mapping[str, Sequence], name: str) -> np.ndarray | None:
    values = samples.get(name)
    if values is None:
        return None
    arr = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    return arr if np.isfinite(arr).any() else None


def _intervals(samples: Mapping[str, Sequence], n: int, interval_s: float | None) -> np.ndarray:
    """Seconds each sample covers: from the sample times (row times are the interval's end), else the interval."""
    times = _column(samples, "t_s")
    if times is not None and len(times) == n and np.isfinite(times).all():
        return np.diff(times, prepend=max(0.0, times[0] - (interval_s or times[0])))
    return np.full(n, float(interval_s or 1.0))


def _volume(samples: Mapping[str, Sequence], names: Sequence[str], scale: float, interval_s: float | None):
    cols = [c for c in (_column(samples, n) for n in names) if c is not None]
    if not cols:
        return None
    dt = _intervals(samples, len(cols[0]), interval_s)
    with np.errstate(over="ignore", invalid="ignore"):   # a damaged column overflows: _bytes says unknown
        return _bytes(sum(np.nansum(c * dt[:len(c)]) for c in cols) * scale)


def _bytes(value: float) -> int | None:
    """A byte count, or None where it cannot be one (a damaged sar column: 4.9e257 B written, inf,
    negative): the registry stores 64-bit integers, and such a figure is not a measurement."""
    return int(value) if math.isfinite(value) and 0 <= value < 2**63 else None


def capacity(samples: Mapping[str, Sequence], interval_s: float | None = None) -> dict[str, int | None]:
    """peak_rss_bytes, read_bytes, write_bytes, net_bytes of a trace's samples (None: not measured)."""
    rss = _column(samples, "rss_mb")
    if rss is not None:
        peak = _bytes(np.nanmax(rss) * MB)
    else:
        used = _column(samples, "kbmemused")
        if used is not None:
            reclaimable = sum(c for c in (_column(samples, "kbbuffers"), _column(samples, "kbcached")) if c is not None)
            peak = _bytes(np.nanmax(used - np.nan_to_num(reclaimable)) * KB)
        else:
            peak = None
    read = _volume(samples, ["read_mb_s"], MB, interval_s)
    write = _volume(samples, ["write_mb_s"], MB, interval_s)
    if read is None and write is None:
        read = _volume(samples, ["rd_sec/s"], SECTOR, interval_s)
        write = _volume(samples, ["wr_sec/s"], SECTOR, interval_s)
    return {"peak_rss_bytes": peak, "read_bytes": read, "write_bytes": write,
            "net_bytes": _volume(samples, ["rxkB/s", "txkB/s"], KB, interval_s)}
