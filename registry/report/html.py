"""One self-contained HTML file per report: inline CSS, charts as inline SVG, no script, no link.

Openable offline and safe to mail: nothing is fetched. Every SVG's ids (matplotlib's clip paths and
markers) get a per-chart prefix, so that several charts in one page never resolve each other's
references. Text in the SVGs stays text (searchable, selectable); the stylesheet gives it the font
family matplotlib measured it with, falling back to similar sans-serif fonts.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from html import escape

from registry import __version__
from registry.report.document import Chart, Report, Table, figure_bytes
from registry.values import fmt_value

_CSS = """
body { font-family: 'DejaVu Sans', Verdana, Arial, sans-serif; color: #222; margin: 0; background: #f6f7f9; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 40px; background: #fff; }
h1 { font-size: 1.55em; margin: 0 0 4px; }
h2 { font-size: 1.15em; margin: 30px 0 6px; padding-bottom: 4px; border-bottom: 1px solid #e3e3e3; }
p.sub { color: #555; margin: 0 0 14px; }
p.caption { color: #555; font-size: 0.88em; margin: 4px 0 10px; max-width: 70em; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; font-size: 0.9em; margin: 0; }
dl.facts dt { color: #666; } dl.facts dd { margin: 0; }
figure { margin: 8px 0; } figure svg { width: 100%; height: auto; }
figure svg text { font-family: 'DejaVu Sans', 'Bitstream Vera Sans', Verdana, Arial, sans-serif !important; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin: 6px 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid #ececec; text-align: left; white-space: nowrap; }
th { background: #f1f3f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
ul.notes { color: #8a5a00; font-size: 0.9em; }
footer { color: #888; font-size: 0.8em; margin-top: 34px; }
"""

_ID = re.compile(r'\bid="([^"]+)"')


def svg_inline(svg: str, prefix: str) -> str:
    """An SVG document made fit for inlining: no XML prolog, unique ids, width from the page."""
    svg = svg[svg.index("<svg"):]
    ids = set(_ID.findall(svg))

    def rename(m: re.Match) -> str:
        return m.group(0).replace(m.group(1), f"{prefix}-{m.group(1)}") if m.group(1) in ids else m.group(0)

    svg = _ID.sub(rename, svg)
    svg = re.sub(r'(xlink:href|href)="#([^"]+)"', lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"'
                 if m.group(2) in ids else m.group(0), svg)
    svg = re.sub(r'url\(#([^)]+)\)', lambda m: f"url(#{prefix}-{m.group(1)})" if m.group(1) in ids else m.group(0),
                 svg)
    return re.sub(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"',
                  lambda m: f'<svg{m.group(1)} style="max-width:{m.group(2)}pt" role="img"', svg, count=1)


def _cell(value) -> str:
    text = fmt_value(value)
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f'<td class="num">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>"


def _table(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = "\n".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in t.rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></div>'


def _chart(c: Chart, n: int) -> str:
    fig = c.make()
    svg = figure_bytes(fig, "svg").decode("utf-8")
    return f'<figure>{svg_inline(svg, f"c{n}")}</figure>'


def render(report: Report) -> str:
    parts = []
    for n, section in enumerate(report.sections, 1):
        parts.append(f"<section><h2>{escape(section.title)}</h2>")
        if section.caption:
            parts.append(f'<p class="caption">{escape(section.caption)}</p>')
        parts.append(_chart(section, n) if isinstance(section, Chart) else _table(section))
        parts.append("</section>")
    facts = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in report.facts)
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.notes)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nodereg {escape(__version__)}">
<title>{escape(report.title)}</title>
<style>{_CSS}</style>
</head>
<body><main>
<header><h1>{escape(report.title)}</h1><p class="sub">{escape(report.subtitle)}</p>
<dl class="facts">{facts}</dl>{f'<ul class="notes">{notes}</ul>' if notes else ''}</header>
{''.join(parts)}
<footer>nodereg {escape(__version__)} report ({escape(report.kind)}), generated {stamp}.</footer>
</main></body>
</html>
"""
