"""Reading a small CSV file of records, all or nothing: the runs, prices and specs imports share it.

The file is read as UTF-8 (a byte-order mark is allowed), the header is checked for the required
columns (extra columns are allowed, repeated ones are not), and every record comes with its line
number so that the caller's checks can name it. The first problem is one UserError naming the file
and the line; nothing is returned half-read.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from registry.errors import UserError
from registry.values import listed

T = TypeVar("T")


def read_records(path: Path, columns: Iterable[str], parse: Callable[[dict[str, str]], T],
                 what: str = "rows", optional: Iterable[str] = ()) -> list[T]:
    """`parse(record)` of every record of `path` (its UserError is prefixed with file and line).

    `columns` must be in the header; `optional` ones may be missing (their value is then '').
    """
    columns, optional = tuple(columns), tuple(optional)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read it as UTF-8 text ({type(exc).__name__})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))   # not splitlines(): quoted line breaks are data
    try:
        return _parse(path, reader, columns, optional, parse, what)
    except csv.Error as exc:   # e.g. a field longer than the csv module's limit
        raise UserError(f"{path}: line {reader.line_num}: not readable as CSV ({exc})") from None


def _parse(path: Path, reader: csv.DictReader, columns: tuple[str, ...], optional: tuple[str, ...],
           parse: Callable[[dict[str, str]], T], what: str) -> list[T]:
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in columns if c not in header]
    if missing:
        raise UserError(f"{path}: the header lacks the {listed(missing, 'column')} "
                        f"(expected {','.join(columns + optional)})")
    repeated = [c for c in columns + optional if header.count(c) > 1]
    if repeated:
        raise UserError(f"{path}: the header names the {listed(repeated, 'column')} more than once")
    reader.fieldnames = header
    out = []
    for record in reader:
        line = reader.line_num
        if None in record or any(record.get(c) is None for c in columns):
            raise UserError(f"{path}: line {line}: expected {len(header)} fields")
        values = {c: (record.get(c) or "").strip() for c in columns + optional}
        try:
            out.append(parse(values))
        except UserError as exc:
            raise UserError(f"{path}: line {line}: {exc}") from None
    if not out:
        raise UserError(f"{path}: no {what} in the file")
    return out
