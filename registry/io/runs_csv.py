"""Reading measured runs from a CSV file with the columns ``app,node,threads,time_s`` (and, optional,
``input``: the workload's input label, registry/workload.py).

All or nothing: every row is checked before the caller writes anything, and the first bad row is
named with its line. The same checks serve `nodereg runs add` (check_run).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from registry.db.names import check_name
from registry.errors import UserError
from registry.io.csvrows import read_records

CSV_COLUMNS = ("app", "node", "threads", "time_s")
CSV_OPTIONAL = ("input",)
MAX_THREADS = 2**31 - 1                    # runs.threads is an INTEGER column
_WHOLE = re.compile(r"\+?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass
class RunRow:
    app: str
    node: str
    threads: int
    time_s: float
    input: str | None = None


def check_run(threads, time_s) -> tuple[int, float]:
    """Validated (threads, seconds); the messages name the value, the caller adds where it came from.

    Plain ASCII notation only: Python's int() and float() would also take '1_000' and other
    scripts' digits, which no CSV writer means as a number.
    """
    text = str(threads).strip()
    n = int(text) if _WHOLE.fullmatch(text) else 0
    if n < 1:
        raise UserError(f"threads must be a whole number >= 1, got {text!r}")
    if n > MAX_THREADS:
        raise UserError(f"threads must be at most {MAX_THREADS}, got {text!r}")
    text = str(time_s).strip()
    t = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not (math.isfinite(t) and t > 0):
        raise UserError(f"time_s must be a number of seconds > 0, got {text!r}")
    return n, t


def read_runs_csv(path: Path) -> list[RunRow]:
    """Every row of a runs CSV, checked; the first problem is one UserError naming the line."""
    return read_records(path, CSV_COLUMNS, _run_row, what="runs", optional=CSV_OPTIONAL)


def _run_row(record: dict[str, str]) -> RunRow:
    app, node = record["app"], record["node"]
    check_name(app, "app")
    check_name(node, "node")
    n, t = check_run(record["threads"], record["time_s"])
    label = record.get("input") or None
    return RunRow(app, node, n, t, check_name(label, "input") if label else None)
