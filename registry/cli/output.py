"""Printing results: rich tables for people, JSON and CSV for programs.

JSON and CSV go through plain `print` (never wrapped or coloured); tables and progress use rich.
Messages for people go to stderr so that stdout stays parseable.

Everything printed here is data (names, paths, SQL results): a node may be called `cn[01-04]` and a
query may return '[red]hi[/red]' or ':x:'. So both consoles take strings literally (no markup, no
emoji codes, no highlighting), tables are built of `Text` cells and titles (literal whatever console
prints them), and progress columns render their descriptions as plain text. Styling is added
explicitly, with `Text(..., style=...)` or a `style=` argument, never written into a string.
"""

import csv
import sys
from collections.abc import Iterable, Mapping, Sequence

import orjson
from rich.console import Console
from rich.progress import TextColumn
from rich.table import Table
from rich.text import Text

from registry.values import fmt_value, plain

_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_LITERAL = {"markup": False, "emoji": False, "highlight": False}
console = Console(soft_wrap=True, **_LITERAL)
err_console = Console(stderr=True, soft_wrap=True, **_LITERAL)


def _unknown(value):
    """orjson's fallback for types it does not know (Decimal, numpy and pandas scalars)."""
    converted = plain(value)
    if converted is value:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")
    return converted


def print_json(obj) -> None:
    """Indented JSON; NaN and infinities become null. orjson, since `nodereg match` prints 10,000
    predictions and the standard library's indenting encoder is pure Python (0.7 s for those)."""
    sys.stdout.write(orjson.dumps(obj, default=_unknown, option=_JSON_OPTIONS).decode())
    sys.stdout.write("\n")


def print_table(rows: Sequence[Mapping], columns: Sequence[str] | None = None, *, title: str | None = None,
                empty: str = "(no rows)") -> None:
    columns = list(columns or (rows[0].keys() if rows else []))
    if not rows:
        err_console.print(empty)
        return
    table = Table(title=None if title is None else Text(title), header_style="bold")
    for col in columns:
        numeric = all(isinstance(plain(r.get(col)), (int, float)) or r.get(col) is None for r in rows)
        table.add_column(Text(str(col)), justify="right" if numeric else "left", overflow="fold")
    for r in rows:
        table.add_row(*(Text(fmt_value(r.get(c))) for c in columns))
    console.print(table)


def text_column(text_format: str) -> TextColumn:
    """A progress column of plain text: rich's default reads `{task.description}` as markup."""
    return TextColumn(text_format, markup=False)


def print_csv(rows: Iterable[Sequence], columns: Sequence[str]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else plain(v) for v in row])
