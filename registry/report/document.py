"""The report model (facts, charts, tables) and writing it: HTML for the whole report, PNG/SVG for its
summary chart.

Charts are callables that build a figure when the writer needs it, so a PNG of the summary never
draws the other charts, and every figure is closed as soon as it is saved. Files are written to a
temporary name in the target directory and renamed: an interrupted write leaves no half file.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from registry.errors import UserError
from registry.report import charts

FORMATS = {".html": "html", ".htm": "html", ".png": "png", ".svg": "svg"}


@dataclass
class Chart:
    title: str
    make: Callable[[], object]        # -> matplotlib Figure
    caption: str = ""


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list]
    caption: str = ""


@dataclass
class Report:
    kind: str                         # node | compare | trace | match
    title: str
    subtitle: str
    facts: list[tuple[str, str]]
    sections: list[Chart | Table]
    summary: Callable[[], object]     # the chart a PNG/SVG output holds
    notes: list[str] = field(default_factory=list)

    def charts(self) -> list[Chart]:
        return [s for s in self.sections if isinstance(s, Chart)]

    def tables(self) -> list[Table]:
        return [s for s in self.sections if isinstance(s, Table)]


@dataclass
class Written:
    path: Path
    format: str
    bytes: int
    charts: int
    tables: int


def output_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UserError(f"cannot write {path.name}: the output must end in .html, .png or .svg")
    return fmt


def figure_bytes(fig, fmt: str) -> bytes:
    """Render a figure as PNG or SVG bytes (SVG without the metadata block that links to the web)."""
    buf = io.BytesIO()
    meta = {"Creator": None, "Date": None, "Format": None, "Type": None} if fmt == "svg" else {"Software": None}
    fig.savefig(buf, format=fmt, metadata=meta)
    return buf.getvalue()


def write_report(report: Report, path: Path | str) -> Written:
    path = Path(path)
    fmt = output_format(path)
    with charts.style():
        if fmt == "html":
            from registry.report.html import render
            data = render(report).encode("utf-8")
        else:
            data = figure_bytes(report.summary(), fmt)
    _write_atomic(path, data)
    n_charts = len(report.charts()) if fmt == "html" else 1
    n_tables = len(report.tables()) if fmt == "html" else 0
    return Written(path, fmt, len(data), n_charts, n_tables)


def _write_atomic(path: Path, data: bytes) -> None:
    if not path.parent.is_dir():  # a typo in --out should not create directories
        raise UserError(f"cannot write {path}: directory {path.parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    umask = os.umask(0)
    os.umask(umask)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise UserError(f"cannot write {path}: {exc.strerror}") from None
        raise
