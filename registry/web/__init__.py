"""`nodereg serve`: the registry as a read-only web site (docs/web.md).

Modules: `source` (how the server reads: read-only connections, opened per request on DuckDB so
that writers are not locked out, the last snapshot while one holds the file), `queries` (what each
page reads), `tables` (filtering, sorting, paging and exporting a result), `charts` (Plotly figure
descriptions; plotly.js itself is served from the plotly package, never from the internet), `app`
(the FastAPI routes: pages, exports, the JSON API).

FastAPI, Jinja2 and the data libraries are imported only by `nodereg serve`, so `nodereg --help`
stays fast.
"""
