"""`nodereg report`: node profiles, comparisons, traces and predictions as one HTML file (or a PNG chart).

The report modules (and matplotlib) are imported inside the commands: `nodereg` start-up stays fast.
"""

import re
from pathlib import Path

import typer

from registry.cli.app import app, state
from registry.cli.output import print_json, say

report_app = typer.Typer(
    help="Reports to look at: one self-contained HTML file (charts inline, opens offline), or with "
         "--out FILE.png (or .svg) the report's summary chart alone.",
    no_args_is_help=True)
app.add_typer(report_app, name="report")

_OUT_HELP = ("Output file: .html (the whole report), .png or .svg (its summary chart). "
             "Default: report-<kind>-<name>.html")


def _default_out(kind: str, name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).stem if kind in ("trace", "match") else name).strip("_")
    return Path(f"report-{kind}-{slug[:60] or kind}.html")


def _emit(ctx: typer.Context, build, kind: str, name: str, out: Path | None, as_json: bool) -> None:
    from registry.report.document import output_format, write_report
    out = out or _default_out(kind, name)
    output_format(out)                     # refuse a bad suffix before any work
    with state(ctx).registry(readonly=True).connect() as conn:
        report = build(conn)
    written = write_report(report, out)
    result = {"path": str(written.path), "format": written.format, "bytes": written.bytes,
              "charts": written.charts, "tables": written.tables, "title": report.title}
    if as_json:
        print_json(result)
    else:
        what = f"{written.charts} chart{'s' if written.charts != 1 else ''}" + \
               (f", {written.tables} table{'s' if written.tables != 1 else ''}" if written.format == "html" else "")
        say(f"wrote {written.path} ({written.bytes / 1024:.0f} KiB, {what}): {report.title}")


_JSON = typer.Option(False, "--json", help="Print what was written as JSON.")


@report_app.command("node")
def node(ctx: typer.Context, name: str = typer.Argument(..., help="Node name."),
         out: Path = typer.Option(None, "--out", "-o", help=_OUT_HELP), as_json: bool = _JSON) -> None:
    """A node's profile: bandwidth and latency against working set, thread scaling, roofline."""
    from registry.report.node import node_report
    _emit(ctx, lambda conn: node_report(conn, name), "node", name, out, as_json)


@report_app.command("compare")
def compare(ctx: typer.Context, names: list[str] = typer.Argument(..., help="Two or more node names."),
            kernel: str = typer.Option(None, "--kernel", help="Bandwidth kernel to compare (default: triad, or "
                                                              "the first kernel every node has)."),
            out: Path = typer.Option(None, "--out", "-o", help=_OUT_HELP), as_json: bool = _JSON) -> None:
    """Several node profiles overlaid, one colour per node."""
    from registry.report.compare import compare_report
    _emit(ctx, lambda conn: compare_report(conn, names, kernel), "compare", "-".join(names), out, as_json)


_TRACE_HELP = ("An app name (its latest trace), a trace uid or unique uid prefix, or a trace file (nodereg trace "
               "--out; read as a file when it contains / or ends in .json).")


@report_app.command("trace")
def trace(ctx: typer.Context, ref: str = typer.Argument(..., metavar="TRACE", help=_TRACE_HELP),
          out: Path = typer.Option(None, "--out", "-o", help=_OUT_HELP), as_json: bool = _JSON) -> None:
    """An application trace: samples over time with its phases, their signatures and matched configs."""
    from registry.report.trace import trace_report
    _emit(ctx, lambda conn: trace_report(conn, _noted(conn, ref)), "trace", ref, out, as_json)


@report_app.command("match")
def match(ctx: typer.Context, ref: str = typer.Argument(..., metavar="TRACE", help=_TRACE_HELP),
          out: Path = typer.Option(None, "--out", "-o", help=_OUT_HELP), as_json: bool = _JSON) -> None:
    """Predicted time per node (interval whiskers), measured runs overlaid where the registry has them."""
    from registry.report.match import match_report
    _emit(ctx, lambda conn: match_report(conn, _noted(conn, ref)), "match", ref, out, as_json)


def _noted(conn, ref: str) -> str:
    """`ref` unchanged, after saying which reading of it is used when it could name two things
    (an app and a file of the same name: registry.trace.lookup)."""
    from registry.trace.lookup import locate
    note = locate(conn, ref).note
    if note:
        say(f"note: {note}", err=True)
    return ref
