"""Tables as the pages show them and the exports write them: columns with units, rows of plain
values; filtering, sorting and paging of the node-type table, done in memory on the summary."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import pandas as pd

from registry.web.queries import clean

PER_PAGE = (25, 50, 100, 250, 500)


@dataclass
class Column:
    key: str
    label: str
    unit: str = ""
    numeric: bool = False
    link: str | None = None      # "node", "app", "trace": the cell links to that page

    @property
    def header(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label


@dataclass
class Table:
    """A named result: `name` is its export path (/export/NAME.csv with the page's query string)."""

    name: str
    title: str
    columns: list[Column]
    rows: list[dict] = field(default_factory=list)
    total: int | None = None     # rows before paging

    def records(self) -> list[dict]:
        return [{c.key: clean(r.get(c.key)) for c in self.columns} for r in self.rows]

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([c.header for c in self.columns])
        for r in self.records():
            writer.writerow(["" if r[c.key] is None else _csv_cell(r[c.key]) for c in self.columns])
        return out.getvalue()


def _csv_cell(value):
    """Spreadsheets run a cell that starts with = + - @ as a formula: such text gets a leading quote."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def from_frame(name: str, title: str, frame: pd.DataFrame, columns: list[Column]) -> Table:
    present = [c for c in columns if c.key in frame.columns]
    return Table(name, title, present, frame[[c.key for c in present]].to_dict("records"), len(frame))


def sort_frame(frame: pd.DataFrame, sort: str | None, allowed: set[str]) -> pd.DataFrame:
    """`sort` is a column key, `-key` for descending; unknown keys are a 400 (ValueError)."""
    if not sort:
        return frame
    key, desc = (sort[1:], True) if sort.startswith("-") else (sort, False)
    if key not in allowed or key not in frame.columns:
        raise ValueError(f"cannot sort by {key!r}")
    col = frame[key]
    if col.dtype == object:
        order = col.map(lambda v: (v is None or v != v, str(v).lower() if v is not None else ""))
        idx = sorted(range(len(frame)), key=lambda i: order.iat[i], reverse=desc)
        if desc:  # missing values last either way
            idx = [i for i in idx if not order.iat[i][0]] + [i for i in idx if order.iat[i][0]]
        return frame.iloc[idx]
    return frame.sort_values(key, ascending=not desc, na_position="last", kind="stable")


def page(frame: pd.DataFrame, number: int, per: int) -> tuple[pd.DataFrame, int]:
    """The rows of page `number` (1-based) and the page count."""
    pages = max(1, -(-len(frame) // per))
    if number > pages:
        raise ValueError(f"page {number} is past the last page ({pages})")
    return frame.iloc[(number - 1) * per: number * per], pages
