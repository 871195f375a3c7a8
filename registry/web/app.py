"""The FastAPI application: HTML pages, their CSV/JSON exports, the JSON API (OpenAPI at /openapi.json).

Every route only reads (registry/web/source.py). Parameters are validated by FastAPI (a bad one is a
400 page, or a JSON error under /api), names and values reach the page through Jinja2's autoescaping
and charts through JSON (registry/web/charts.py), and anything unexpected is a 500 page with one
line, never a traceback. plotly.js is served from the plotly package installed beside nodereg.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import urlencode

import jinja2
from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates

from registry.web import views
from registry.web.source import Busy, Source
from registry.web.tables import PER_PAGE, Table

HERE = Path(__file__).parent
NAME = Query(..., min_length=1, max_length=200, description="node type name")


def _plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _qs(request: Request, **changes) -> str:
    """The page's query string with some parameters changed (None removes one): links keep state."""
    items = [(k, v) for k, v in request.query_params.multi_items() if k not in changes]
    for k, v in changes.items():
        if v is None:
            continue
        items += [(k, x) for x in v] if isinstance(v, (list, tuple)) else [(k, v)]
    return urlencode(items)


def _number(name: str, text: str | None) -> float | None:
    """A number field of a form: empty means no bound (a browser sends empty fields as `name=`)."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise views.BadRequest(f"{name}: {text[:30]!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise views.BadRequest(f"{name}: must be a finite number >= 0")
    return value


def _fmt(value, numeric: bool = False) -> str:
    from registry.web.queries import clean

    if hasattr(value, "hour") and hasattr(value, "isoformat") and value == value:   # a timestamp, to the second
        return value.isoformat(sep=" ", timespec="seconds")
    value = clean(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if numeric and isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


@jinja2.pass_context
def _path(ctx, route: str, **params) -> str:
    """A route's path, under the prefix a reverse proxy serves the site at (links stay relative to the host)."""
    request = ctx["request"]
    return request.scope.get("root_path", "") + request.app.url_path_for(route, **params)


def _templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(HERE / "templates"))
    t.env.autoescape = True
    t.env.globals.update(fmt=_fmt, qs=_qs, path=_path, PER_PAGE=PER_PAGE)
    return t


def create_app(url: str | None = None, lock_wait_s: float = 1.0) -> FastAPI:
    """The site. A reverse proxy's path prefix is the server's setting (uvicorn's `root_path`, which
    `nodereg serve --root-path` sets): every link is written under the request's root_path (`_path`)."""
    source = Source(url, lock_wait_s=lock_wait_s)
    templates = _templates()
    api = FastAPI(title="nodereg", description="The node registry, read-only: node types, profiles, predictions.",
                  docs_url=None, redoc_url=None)  # Swagger/ReDoc pages load JS from CDNs
    api.state.source = source

    def render(request: Request, template: str, view: views.View, status: int = 200, **extra) -> HTMLResponse:
        stale = view.extra.get("stale")
        return templates.TemplateResponse(request, template, {
            "view": view, "stale": stale, "stale_at": time.strftime("%H:%M:%S", time.localtime(stale.taken_at))
            if stale else None, "db": source.display_url, **view.extra, **extra}, status_code=status)

    def export(view: views.View, table: str | None, fmt: str) -> Response:
        chosen: Table | None = view.tables.get(table) if table else next(iter(view.tables.values()), None)
        if chosen is None:
            raise views.BadRequest(f"no table {table!r} on this page (tables: {', '.join(view.tables) or 'none'})")
        if fmt == "csv":
            return Response(chosen.csv(), media_type="text/csv; charset=utf-8",
                            headers={"Content-Disposition": f'attachment; filename="{chosen.name}.csv"'})
        return JSONResponse({"columns": [c.header for c in chosen.columns], "rows": chosen.records()})

    # ---- errors: a page (or JSON under /api) with one line, never a traceback
    def _error(request: Request, status: int, message: str, headers: dict | None = None):
        if request.url.path.startswith("/api/") or request.url.path.endswith(".json"):
            return JSONResponse({"error": message}, status_code=status, headers=headers)
        return templates.TemplateResponse(request, "error.html", {"status": status, "message": message,
                                                                  "db": source.display_url},
                                          status_code=status, headers=headers)

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        parts = ["{}: {}".format(".".join(str(x) for x in e.get("loc", [])[1:]) or "request", e.get("msg", ""))
                 for e in exc.errors()]
        return _error(request, 400, "bad parameter: " + "; ".join(parts))

    @api.exception_handler(views.BadRequest)
    async def _bad(request: Request, exc: views.BadRequest):
        return _error(request, 400, str(exc))

    @api.exception_handler(views.NotFound)
    async def _missing(request: Request, exc: views.NotFound):
        return _error(request, 404, str(exc))

    @api.exception_handler(Busy)
    async def _busy(request: Request, exc: Busy):
        return _error(request, 503, f"{exc} — this page has no earlier snapshot; retry in a moment",
                      {"Retry-After": "2"})

    @api.exception_handler(404)
    async def _no_page(request: Request, exc):
        return _error(request, 404, f"no page at {request.url.path}")

    @api.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):
        from registry.db import db_error, is_driver_error
        from registry.errors import UserError

        if isinstance(exc, UserError) or is_driver_error(exc):
            return _error(request, 500, str(exc if isinstance(exc, UserError) else db_error(exc)))
        if os.environ.get("NODEREG_DEBUG"):
            raise exc
        return _error(request, 500, f"internal error ({type(exc).__name__}); set NODEREG_DEBUG=1 to see it")

    # ---- static: our stylesheet and script, and plotly.js from its package
    @api.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js():
        return FileResponse(_plotly_js(), media_type="application/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    @api.get("/static/{name}", include_in_schema=False)
    def static(name: str):
        files = {"style.css": "text/css", "app.js": "application/javascript"}
        if name not in files:
            raise views.NotFound(f"no static file {name!r}")
        return FileResponse(HERE / "static" / name, media_type=files[name])

    # ---- overview
    @api.get("/", response_class=HTMLResponse, include_in_schema=False)
    def overview_page(request: Request):
        from registry.web import queries

        data, stale = source.read("overview", queries.overview)
        return render(request, "overview.html", views.View("Overview", extra={"stale": stale, "data": data}))

    @api.get("/api/overview", tags=["registry"], summary="What the registry holds and how fresh it is")
    def overview_api():
        from registry.web import queries

        data, _ = source.read("overview", queries.overview)
        return json.loads(json.dumps(data, default=str))

    # ---- node types
    def node_query(q: str | None = Query(None, max_length=200, description="name or CPU model contains"),
                   vendor: list[str] = Query([]), architecture: list[str] = Query([]),
                   cpu_vendor: list[str] = Query([]), cpu_family: list[str] = Query([]),
                   vcpus_min: str | None = Query(None, max_length=30, description="a number (empty: none)"),
                   vcpus_max: str | None = Query(None, max_length=30, description="a number (empty: none)"),
                   mem_min: str | None = Query(None, max_length=30, description="GiB (empty: none)"),
                   mem_max: str | None = Query(None, max_length=30, description="GiB (empty: none)"),
                   priced: bool = Query(False, description="only types with a price"),
                   cols: list[str] = Query([], description="columns shown (keys)"),
                   fig: list[str] = Query([], description=f"measured figures as extra columns (config keys, "
                                                          f"at most {views.MAX_FIGURES})"),
                   sort: str | None = Query(None, max_length=80, description="column key, -key for descending"),
                   page: int = Query(1, ge=1, le=1_000_000), per: int = Query(50, ge=1, le=500)) -> views.NodeQuery:
        return views.NodeQuery(q=q, facets={"vendor": vendor, "architecture": architecture, "cpu_vendor": cpu_vendor,
                                            "cpu_family": cpu_family},
                               vcpus_min=_number("vcpus_min", vcpus_min), vcpus_max=_number("vcpus_max", vcpus_max),
                               mem_min=_number("mem_min", mem_min), mem_max=_number("mem_max", mem_max), priced=priced, cols=[c for c in cols if c],
                               figs=[f for f in fig if f], sort=sort or None,
                               page=page, per=per)

    def routes(name: str, params, build, template: str, tag: str, summary: str, export_summary: str) -> None:
        """A page's three faces: `/NAME` (HTML), `/api/NAME` (JSON) and `/NAME.csv|json` (a table of it,
        whole: not paged), all from `build(params, paged)` with the same validated parameters."""
        @api.get(f"/{name}", name=f"{name}_page", response_class=HTMLResponse, include_in_schema=False)
        def html(request: Request, q=Depends(params)):
            return render(request, template, build(q, True), p=q)

        @api.get(f"/api/{name}", name=f"{name}_api", tags=[tag], summary=summary)
        def as_json(q=Depends(params)):
            return build(q, True).to_json()

        @api.get(f"/{name}.{{fmt}}", name=f"{name}_export", tags=["exports"], summary=export_summary)
        def exported(fmt: str = _FMT, q=Depends(params),
                     table: str | None = Query(None, max_length=40, description="which table of the page")):
            return export(build(q, False), table, fmt)

    def name_query(name: str = NAME):
        return name

    def app_query(name: str = Query(..., min_length=1, max_length=200, description="application name")):
        return name

    def compare_query(node: list[str] = Query(..., description="2 to 10 node type names"),
                      base: str | None = Query(None, max_length=200, description="the baseline (default: the first)")):
        return node, base

    def uid_query(uid: str = Query(..., min_length=1, max_length=64, pattern=r"^[0-9A-Za-z-]+$",
                                   description="trace uid")):
        return uid

    def prediction_query(app: str = Query(..., min_length=1, max_length=200),
                         model: str | None = Query(None, max_length=100),
                         version: str | None = Query(None, max_length=100),
                         sort: str = Query("time", max_length=40, description="time, cost, or a column (-: descending)"),
                         page: int = Query(1, ge=1, le=1_000_000), per: int = Query(100, ge=1, le=500)):
        return dict(app_name=app, model=model, version=version, sort=sort, number=page, per=per)

    def nothing():
        return None

    routes("nodes", node_query, lambda q, paged: views.nodes(source, q, paged), "nodes.html", "node types",
           "Node types: filtered, sorted, one page", "Node types: every row the filters keep")
    routes("node", name_query, lambda q, _: views.node(source, q), "node.html", "node types",
           "One node type: inventory, hosts, prices, figures", "A table of a node type's page (table=prices, ...)")
    routes("compare", compare_query, lambda q, _: views.compare(source, *q), "compare.html", "node types",
           "2-10 node types relative to a baseline", "The comparison, one row per figure and node")
    routes("apps", nothing, lambda q, _: views.apps(source), "apps.html", "applications",
           "Applications with their traces, runs, predictions", "The applications")
    routes("app", app_query, lambda q, _: views.app(source, q), "app.html", "applications",
           "An application's traces and prediction sets", "An application's traces")
    routes("trace", uid_query, lambda q, _: views.trace(source, q), "trace.html", "applications",
           "A trace's phases and what each resembles", "A trace's phases")
    routes("predictions", prediction_query, lambda q, paged: views.predictions(source, **q, paged=paged),
           "predictions.html", "predictions", "An app's predictions on every node, ranked",
           "An app's predictions, every node")
    routes("accuracy", nothing, lambda q, _: views.accuracy(source), "accuracy.html", "predictions",
           "Stored predictions against measured runs", "A table of the accuracy page (summary, groups, sets, cells)")

    # ---- SQL
    def sql_query(q: str | None = Query(None, max_length=20_000, description="one read-only SQL statement"),
                  x: str | None = Query(None, max_length=200), y: str | None = Query(None, max_length=200),
                  kind: str = Query("line", pattern="^(line|scatter|bar)$")):
        return dict(text=q, x=x or None, y=y or None, kind=kind)

    @api.get("/sql", response_class=HTMLResponse, include_in_schema=False)
    def sql_page(request: Request, q=Depends(sql_query)):
        view = views.sql(source, **q)
        return render(request, "sql.html", view, status=400 if view.extra["error"] else 200,
                      row_cap=views.SQL_ROW_CAP, time_limit=views.SQL_TIME_LIMIT_S)

    @api.get("/api/sql", tags=["sql"], summary="One read-only statement (time limit, row cap)")
    def sql_api(q=Depends(sql_query)):
        view = views.sql(source, **q)
        if view.extra["error"]:
            return JSONResponse({"error": view.extra["error"]}, status_code=400)
        return {**view.to_json(), "capped": view.extra["capped"]}

    @api.get("/sql.{fmt}", tags=["exports"], summary="A query's whole result (no row cap)")
    def sql_export(fmt: str = _FMT, q=Depends(sql_query)):
        view = views.sql(source, **q, row_cap=10**9)
        if view.extra["error"]:
            raise views.BadRequest(view.extra["error"])
        return export(view, "sql", fmt)

    @api.get("/api", response_class=HTMLResponse, include_in_schema=False)
    def api_page(request: Request):
        routes = [(r.path, r.summary or "") for r in api.routes
                  if getattr(r, "include_in_schema", False) and getattr(r, "summary", None)]
        return render(request, "api.html", views.View("JSON API"), routes=routes)

    return api


_FMT = PathParam(..., pattern="^(csv|json)$", description="csv or json")
