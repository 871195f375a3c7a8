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
import re
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import orjson

from registry.values import fmt_value, plain

if TYPE_CHECKING:   # rich: imported where a table, prose or progress is shown (not for --json: issue 30)
    from rich.console import Console
    from rich.progress import TextColumn

_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_LITERAL = {"markup": False, "emoji": False, "highlight": False}
_CONSOLES = {"console": False, "err_console": True}     # the module's two consoles: stderr or not


def __getattr__(name: str):
    """`console` and `err_console`, made on first use: rich takes 20-40 ms to import, which a
    command printing JSON (`nodereg match --json` over 10,000 nodes) need not pay."""
    if name not in _CONSOLES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    made = globals()[name] = Console(stderr=_CONSOLES[name], soft_wrap=True, **_LITERAL)
    return made


def _console(err: bool = False) -> "Console":
    """The module's console (stderr with `err`), as set or replaced on the module."""
    name = "err_console" if err else "console"
    return globals().get(name) or __getattr__(name)


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


SHORT_UID = 8   # characters of a uid a table shows (as `nodereg health` does); commands take unique prefixes
_NAME_FLOOR = 32  # a naming column (nodes like `azure:Standard_D160alds_v7`) is kept whole up to this
_NAMING = ("name", "node", "app", "host", "model", "model_name")
_SMALL_NEED = 8   # a column this close to its unwrapped width gets it before wide text columns share the rest
_TEXT_FLOOR = 20  # a text column is not made narrower than this (or its longest word, if shorter): words
                  # up to it stay whole (trial 5: a compiler `cc (Debian 12.2.0-14+deb12u1)` split mid-version)
_HEADER_BREAK = re.compile(r"(?<=[_ ])")   # header names wrap after an underscore or a space, never mid-word


def print_table(rows: Sequence[Mapping], columns: Sequence[str] | None = None, *, title: str | None = None,
                empty: str = "(no rows)", short_uids: bool = True, one_line: Sequence[str] = ()) -> None:
    """Rows as a table that fits the terminal (80 columns when piped) without splitting a number or a
    header word: numbers never wrap, header names wrap only at `_` or spaces, text cells wrap at spaces
    (`one_line` columns are cut with an ellipsis instead); a column naming the rows (_NAMING) keeps
    names up to _NAME_FLOOR characters on one line. Columns that cannot all fit side by side
    are printed as several tables, each led by the first column. Uids are shortened to SHORT_UID
    characters unless `short_uids` is False (`nodereg sql` shows what was asked for)."""
    columns = list(columns or (rows[0].keys() if rows else []))
    if not rows:
        say(empty, err=True)
        return
    cells = {c: [_cell(c, r.get(c), short_uids) for r in rows] for c in columns}
    numeric = {c: all(isinstance(plain(r.get(c)), (int, float)) or r.get(c) is None for r in rows) for c in columns}
    floors = {c: len(str(c)) if c in one_line else _floor(c, cells[c], numeric[c]) for c in columns}
    for c in columns:   # each row's name on one line where it can be
        if c in _NAMING and not numeric[c] and c not in one_line:
            floors[c] = max(floors[c], min(_NAME_FLOOR, max(len(v) for v in cells[c])))
    from rich.table import Table
    from rich.text import Text

    console = _console()
    for i, part in enumerate(_parts(columns, floors, console.width)):
        widths = _widths(part, cells, floors, console.width)
        if title:
            say(title if i == 0 else f"{title} (continued)")
        table = Table(header_style="bold")
        for c in part:
            table.add_column(Text(_wrap_header(str(c), widths[c])), justify="right" if numeric[c] else "left",
                             width=widths[c], no_wrap=numeric[c] or c in one_line,
                             overflow="ellipsis" if c in one_line else "fold")
        for j in range(len(rows)):
            table.add_row(*(Text(cells[c][j]) for c in part))
        console.print(table)


_KEEP = "\ue000"      # stands for a space inside a `command` while wrapping (a private-use character)


def say(text: str, indent: int = 0, *, err: bool = False, style: str | None = None) -> None:
    """A line of prose on stdout (stderr with `err`), wrapped at spaces to the terminal's width (80
    columns when piped): a number, a name or a path is never split, nor a `command` in backquotes
    (it moves to the next line whole); continuation lines are indented `indent` more than the first
    (and as much as the paragraph's own indent), and each line of `text` is a paragraph."""
    say_on(_console(err), text, indent, style)


def say_on(out: "Console", text: str, indent: int = 0, style: str | None = None) -> None:
    """`say` on the console `out` (a progress bar's, say)."""
    from rich.text import Text

    width = max(20, out.width)
    for paragraph in text.split("\n"):
        kept = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", _KEEP), paragraph)
        lead = " " * (len(paragraph) - len(paragraph.lstrip()) + indent)
        lines = textwrap.wrap(kept, width, subsequent_indent=lead, break_on_hyphens=False,
                              break_long_words=False) or [""]
        for line in lines:
            out.print(Text(line.replace(_KEEP, " "), style=style or ""))


def _cell(column: str, value, short_uids: bool) -> str:
    text = fmt_value(value)
    if short_uids and (column == "uid" or column.endswith("_uid")) and len(text) > SHORT_UID:
        return text[:SHORT_UID]
    return text


def _floor(column: str, cells: list[str], numeric: bool) -> int:
    """The narrowest a column may be: its widest number (numbers never wrap) or, for text, its longest
    word up to _TEXT_FLOOR; never narrower than the longest piece of its header name."""
    header = max(len(piece.strip()) for piece in _HEADER_BREAK.split(str(column)) if piece.strip()) if \
        str(column).strip() else 1
    if numeric:
        return max(header, *(len(c) for c in cells))
    longest = max(len(c) for c in cells)     # short text (`11.4 - 15.1`) is kept on one line
    longest_word = max((len(w) for c in cells for w in c.split()), default=1)
    return max(header, longest if longest <= _TEXT_FLOOR else min(longest_word, _TEXT_FLOOR))


def _overhead(n: int) -> int:
    """Characters a table of n columns spends on borders and padding (rich's default box)."""
    return 3 * n + 1


def _parts(columns: list[str], floors: dict[str, int], width: int) -> list[list[str]]:
    """Columns in groups that fit `width` at their floors; every group after the first repeats the
    first column, so that each row can still be told apart."""
    parts, part = [], list(columns[:1])
    for c in columns[1:]:
        if part and sum(floors[x] for x in part) + floors[c] + _overhead(len(part) + 1) > width and len(part) > 1:
            parts.append(part)
            part = [columns[0]]
        part.append(c)
    return [*parts, part]


def _widths(part: list[str], cells: dict[str, list[str]], floors: dict[str, int], width: int) -> dict[str, int]:
    """Each column's width: its floor, then what is left handed out up to what each column would take
    unwrapped (its header and widest cell on one line): small needs first (a header kept on one line),
    the rest shared in proportion to what the columns lack."""
    widths = {c: floors[c] for c in part}
    natural = {c: max(len(str(c)), *(max(map(len, v.splitlines() or [""])) for v in cells[c])) for c in part}
    left = width - _overhead(len(part)) - sum(widths.values())
    for c in sorted(part, key=lambda c: natural[c] - widths[c]):
        need = natural[c] - widths[c]
        if 0 < need <= min(_SMALL_NEED, left):
            widths[c], left = natural[c], left - need
    lacking = {c: natural[c] - widths[c] for c in part if natural[c] > widths[c]}
    total = sum(lacking.values())
    for c, need in lacking.items():
        widths[c] += min(need, left * need // total)
    return widths


def _wrap_header(name: str, width: int) -> str:
    """A header name on as many lines as `width` needs, broken only after `_` or a space."""
    lines = [""]
    for piece in _HEADER_BREAK.split(name):
        if lines[-1] and len(lines[-1].rstrip()) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.rstrip() for line in lines)


def text_column(text_format: str) -> "TextColumn":
    """A progress column of plain text: rich's default reads `{task.description}` as markup."""
    from rich.progress import TextColumn

    return TextColumn(text_format, markup=False)


def print_csv(rows: Iterable[Sequence], columns: Sequence[str]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else plain(v) for v in row])
