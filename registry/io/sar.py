"""`sar` traces: reading the CSV that `sadf -d`-style exports produce, and summarising it as a signature.

Real sar exports are messy: one header holds the columns of several sar reports, so names repeat
(`tps` of `-d` and of `-b`); text columns sit among the numbers (`IFACE`); a cell may be empty or
garbage. `read_sar_csv` keeps every column that holds at least one number, names a repeated column
`name#2`, `name#3`, ..., and turns every non-numeric cell into NaN.

`sar_signature` condenses a trace into the metrics that say what the run was limited by: how busy
the CPUs were and how often all of them were (CPU-bound, parallel), how often they idled (waiting,
fixed overheads), memory use, disk and network rates, scheduler pressure. Rates are per second, so
runs of different lengths compare. Two metrics simulate the CPU trace on a node with half and
with twice the cores (work-conserving: a second that used more cores than the smaller node has
stretches, a second whose run queue exceeded the cores it had shrinks), because the node-to-base
time ratio of an app depends first of all on how its work spreads over cores.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

# sar sectors per KB (the kernel's sector is 512 bytes)
_SECTORS_PER_KB = 2.0
_IDLE_BUSY = 0.10       # a second with less than 10% of the CPUs busy is an idle second
_LOW_BUSY = 0.30
_SAT_BUSY = 0.85        # ... more than 85%: all CPUs busy (saturated)
_CLOCK = re.compile(r"(?P<h>[0-9]{1,2}):(?P<m>[0-9]{1,2}):(?P<s>[0-9]{1,2})(\.[0-9]*)?")


def dedupe_names(names: list[str]) -> list[str]:
    """Column names made unique: the second `tps` becomes `tps#2` (first one keeps its name)."""
    seen: dict[str, int] = {}
    out = []
    for raw in names:
        name = raw.strip() or "unnamed"
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


@dataclass
class SarTrace:
    """A parsed sar CSV: numeric columns as one float matrix (rows = samples), timestamps as text."""

    names: list[str]
    values: np.ndarray                       # shape (samples, len(names)); NaN where a cell was not a number
    stamps: list[str] | None = None
    _index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._index = {name: i for i, name in enumerate(self.names)}

    def __len__(self) -> int:
        return self.values.shape[0]

    def column(self, name: str) -> np.ndarray | None:
        """The column called `name`, or None when it is absent or holds no number at all."""
        i = self._index.get(name)
        if i is None:
            return None
        values = self.values[:, i]
        return values if np.isfinite(values).any() else None


def read_sar_csv(path: Path | str) -> SarTrace:
    """Read a sar CSV: every column holding at least one number (others dropped), and the timestamps.

    Raises ValueError when the file has no header or no numeric column at all. Parsing goes through
    Arrow's CSV reader (a few times faster than pandas on thousands of small files); rows with the
    wrong number of cells are dropped.
    """
    path = Path(path)
    with path.open(errors="replace", newline="") as fh:
        first = fh.readline().strip("\r\n")
    if not first.strip():
        raise ValueError("empty file")
    names = dedupe_names(next(csv.reader([first])))
    try:
        table = pa_csv.read_csv(
            path,
            read_options=pa_csv.ReadOptions(column_names=names, skip_rows=1),
            parse_options=pa_csv.ParseOptions(invalid_row_handler=lambda _row: "skip"),
            convert_options=pa_csv.ConvertOptions(column_types={n: pa.string() for n in names
                                                                if n == "timestamp"}))
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None
    columns, arrays = [], []
    for name, column in zip(table.column_names, table.columns, strict=True):
        if name == "timestamp" or pa.types.is_null(column.type):
            continue
        if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
            values = column.to_numpy(zero_copy_only=False).astype(float)
        else:   # text among the numbers: every cell that is not a number becomes NaN
            values = pd.to_numeric(pd.Series(column.to_pylist(), dtype=object), errors="coerce").to_numpy(float)
        if np.isfinite(values).any():
            columns.append(name)
            arrays.append(values)
    if not columns:
        raise ValueError("no numeric column")
    stamps = table.column("timestamp").to_pylist() if "timestamp" in table.column_names else None
    return SarTrace(columns, np.column_stack(arrays), stamps)


def _clock_seconds(stamp: str | None) -> int | None:
    """Seconds since midnight of 'HH:MM:SS' (a date before it is ignored), None when it is not a time
    of day (such as '10:00:inf' or '99:99:99')."""
    m = _CLOCK.fullmatch(stamp.strip().rsplit(" ", 1)[-1]) if stamp else None
    if not m:
        return None
    h, mi, s = int(m["h"]), int(m["m"]), int(m["s"])
    return h * 3600 + mi * 60 + s if h < 24 and mi < 60 and s < 61 else None


def sample_times(trace: SarTrace, interval_s: float | None) -> tuple[np.ndarray, float]:
    """Seconds since the first sample for every row, and the sampling interval.

    Uses the `HH:MM:SS` timestamps (wrapping at midnight) when they all parse and strictly increase;
    otherwise the row index times `interval_s` (1 s when unknown).
    """
    n = len(trace)
    if trace.stamps is not None and n:
        clock = [_clock_seconds(s) for s in trace.stamps]
        if None not in clock:
            secs = np.asarray(clock, dtype=float)
            wraps = np.concatenate([[0], np.cumsum(np.diff(secs) < 0)])
            t = secs + 86400 * wraps - secs[0]
            if n == 1 or np.all(np.diff(t) > 0):
                step = float(np.median(np.diff(t))) if n > 1 else (interval_s or 1.0)
                return t, interval_s or step
    step = interval_s or 1.0
    return np.arange(n, dtype=float) * step, step


def _or_zero(values: np.ndarray | None, n: int) -> np.ndarray:
    return np.zeros(n) if values is None else np.nan_to_num(values)


def _mean(values: np.ndarray | None) -> float:
    return float(np.nanmean(values)) if values is not None else float("nan")


def _simulated_log_ratio(busy: np.ndarray, runq: np.ndarray | None, ncpu: int, cores: float) -> float:
    """ln(time on `cores` CPUs / time on `ncpu`), replaying the per-second CPU use (work-conserving).

    A second that kept b of the base's CPUs busy holds b*ncpu core-seconds of work; the demand is
    that, or the run queue when every CPU was busy (more threads were ready than CPUs). On `cores`
    CPUs the work runs at min(demand, cores) cores; seconds without CPU work keep their length.
    """
    work = busy * ncpu
    demand = work.copy()
    if runq is not None:
        rq = np.nan_to_num(runq, nan=0.0)
        demand = np.where(busy > _SAT_BUSY, np.maximum(work, rq), work)
    speed = np.minimum(np.maximum(demand, 1e-9), cores)
    stretched = np.where(work > 1e-6, work / speed, 1.0)
    return float(np.log(np.mean(stretched)))


@np.errstate(over="ignore", invalid="ignore")   # a corrupt sample overflows to inf, left out at the end
def sar_signature(trace: SarTrace, *, ncpu: int | None, wall_s: float | None = None) -> dict[str, float]:
    """Summary metrics of one sar trace (source 'sar'); NaN-free: metrics that cannot be computed are left out.

    `ncpu` is the traced machine's CPU count (for the half/double-cores simulation); `wall_s` its
    elapsed time (defaults to the trace length).
    """
    sig: dict[str, float] = {}
    n = len(trace)
    if n == 0:
        return sig
    user, system, nice = trace.column("%user"), trace.column("%system"), trace.column("%nice")
    iowait, steal, idle = trace.column("%iowait"), trace.column("%steal"), trace.column("%idle")
    if user is not None or idle is not None:
        if user is not None:
            busy_pct = _or_zero(user, n) + _or_zero(system, n) + _or_zero(nice, n)
        else:
            busy_pct = 100.0 - _or_zero(idle, n) - _or_zero(iowait, n) - _or_zero(steal, n)
        busy = np.clip(np.nan_to_num(busy_pct) / 100.0, 0.0, 1.0)
        sig.update({
            "cpu_busy_mean": float(busy.mean()),
            "cpu_busy_p10": float(np.quantile(busy, 0.1)),
            "cpu_busy_p50": float(np.quantile(busy, 0.5)),
            "cpu_busy_p90": float(np.quantile(busy, 0.9)),
            "cpu_busy_std": float(busy.std()),
            "cpu_idle_frac": float((busy < _IDLE_BUSY).mean()),
            "cpu_low_frac": float((busy < _LOW_BUSY).mean()),
            "cpu_sat_frac": float((busy > _SAT_BUSY).mean()),
        })
        if user is not None and system is not None:
            tot = np.nansum(user) + np.nansum(system)
            sig["cpu_system_share"] = float(np.nansum(system) / tot) if tot > 0 else 0.0
        runq = trace.column("runq-sz")
        if ncpu:
            sig["sim_half_cores"] = _simulated_log_ratio(busy, runq, ncpu, ncpu / 2)
            sig["sim_double_cores"] = _simulated_log_ratio(busy, runq, ncpu, ncpu * 2)
    for metric, col in (("cpu_user_mean", user), ("cpu_system_mean", system), ("cpu_iowait_mean", iowait),
                        ("cpu_steal_mean", steal)):
        if col is not None:
            sig[metric] = _mean(col)
    for metric, name, scale in (
            ("runq_mean", "runq-sz", 1.0), ("load1_mean", "ldavg-1", 1.0), ("blocked_mean", "blocked", 1.0),
            ("mem_used_pct_mean", "%memused", 1.0), ("commit_pct_mean", "%commit", 1.0),
            ("disk_read_kBps", "rd_sec/s", 1 / _SECTORS_PER_KB), ("disk_write_kBps", "wr_sec/s", 1 / _SECTORS_PER_KB),
            ("disk_util_pct", "%util", 1.0), ("disk_await_ms", "await", 1.0), ("disk_tps", "tps", 1.0),
            ("net_rx_kBps", "rxkB/s", 1.0), ("net_tx_kBps", "txkB/s", 1.0), ("net_rx_pps", "rxpck/s", 1.0),
            ("cswch_per_s", "cswch/s", 1.0), ("fault_per_s", "fault/s", 1.0), ("majflt_per_s", "majflt/s", 1.0),
            ("proc_per_s", "proc/s", 1.0), ("pgpgin_kBps", "pgpgin/s", 1.0), ("pgpgout_kBps", "pgpgout/s", 1.0)):
        col = trace.column(name)
        if col is not None:
            sig[metric] = _mean(col) * scale
    runq = trace.column("runq-sz")
    if runq is not None:
        sig["runq_p90"] = float(np.nanquantile(runq, 0.9))
        if ncpu:
            sig["runq_per_cpu_mean"] = float(np.nanmean(runq) / ncpu)
    mem = trace.column("%memused")
    if mem is not None:
        sig["mem_used_pct_max"] = float(np.nanmax(mem))
        sig["mem_used_pct_range"] = float(np.nanmax(mem) - np.nanmin(mem))
    sig["duration_s"] = float(wall_s) if wall_s and wall_s > 0 else float(n)
    return {k: v for k, v in sig.items() if np.isfinite(v)}
