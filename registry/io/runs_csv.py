"""Reading measured runs from a CSV file with the columns ``app,node,threads,time_s``.

All or nothing: every row is checked before the caller writes anything, and the first bad row is
named with its line. The same checks serve `nodereg runs add` (check_run).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from registry.db.names import check_name
from registry.errors import UserError

CSV_COLUMNS = ("app", "node", "threads", "time_s")
MAX_THREADS = 2**31 - 1                    # runs.threads is an INTEGER column
_WHOLE = re.compile(r"\+?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass
class RunRow:
    app: str
    node: str
    threads: int
    time_s: float


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
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read it as UTF-8 text ({type(exc).__name__})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))   # not splitlines(): quoted line breaks are data
    try:
        return _parse_runs(path, reader)
    except csv.Error as exc:   # e.g. a field longer than the csv module's limit
        raise UserError(f"{path}: line {reader.line_num}: not readable as CSV ({exc})") from None


def _parse_runs(path: Path, reader: csv.DictReader) -> list[RunRow]:
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise UserError(f"{path}: the header lacks the column(s) {', '.join(missing)} "
                        f"(expected {','.join(CSV_COLUMNS)})")
    repeated = [c for c in CSV_COLUMNS if header.count(c) > 1]
    if repeated:
        raise UserError(f"{path}: the header names the column(s) {', '.join(repeated)} more than once")
    reader.fieldnames = header
    rows = []
    for record in reader:
        line = reader.line_num
        if None in record or any(record.get(c) is None for c in CSV_COLUMNS):
            raise UserError(f"{path}: line {line}: expected {len(header)} fields")
        app, node = record["app"].strip(), record["node"].strip()
        try:
            check_name(app, "app")
            check_name(node, "node")
            n, t = check_run(record["threads"], record["time_s"])
        except UserError as exc:
            raise UserError(f"{path}: line {line}: {exc}") from None
        rows.append(RunRow(app, node, n, t))
    if not rows:
        raise UserError(f"{path}: no runs in the file")
    return rows
