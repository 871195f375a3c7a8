"""Reports people would rather look at: node profiles, application traces, predictions.

Each report is built from the registry (SQL on the documented tables and views) into a `Report`:
a title, headline facts and a list of sections (charts and tables). `write_report` turns it into
one self-contained HTML file (charts inlined as SVG, no external reference, openable offline) or,
for a `.png`/`.svg` path, into the report's summary chart alone.

Modules, in data-flow order: `load` (registry rows -> node profiles and traces), `curves` (what a
node profile says: bandwidth and latency curves, per-level figures, thread scaling, ceilings),
`charts` (the shared plotting style and helpers), one module per report kind (`node`, `compare`,
`trace`, `match`), `document` (the Report model and `write_report`) and `html` (the HTML writer).

matplotlib is imported only inside the functions that draw, so importing this package (and
starting `nodereg`) stays fast.
"""
