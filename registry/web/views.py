"""One builder per page: parameters in, a `View` out (tables and charts), the same for the HTML page,
its CSV/JSON exports and the JSON API. Paging applies to the HTML page only: exports are whole."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import sqlalchemy as sa

from registry.web import charts, queries
from registry.web.tables import Column, Table, from_frame, page, sort_frame


class BadRequest(ValueError):
    """A parameter that names nothing or contradicts another: a 400 page, never a traceback."""


class NotFound(LookupError):
    """A node, app or trace that is not in the registry: a 404 page."""


@dataclass
class View:
    title: str
    tables: dict[str, Table] = field(default_factory=dict)
    charts: dict[str, dict] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def add(self, table: Table) -> Table:
        self.tables[table.name] = table
        return table

    def to_json(self) -> dict:
        return {"title": self.title, "tables": {n: {"title": t.title, "total": t.total,
                                                     "columns": [{"key": c.key, "label": c.label, "unit": c.unit}
                                                                 for c in t.columns],
                                                     "rows": t.records()} for n, t in self.tables.items()},
                **{k: v for k, v in self.extra.items() if k in ("warnings", "model", "facets", "pages")}}


# ---- node types -------------------------------------------------------------------------------
NODE_COLUMNS = [
    Column("name", "node type", link="node"), Column("vendor", "vendor"), Column("architecture", "architecture"),
    Column("cpu_vendor", "CPU vendor"), Column("cpu_family", "CPU family"), Column("cpu_model", "CPU model"),
    Column("vcpus", "vCPUs", numeric=True), Column("memory_gib", "memory", "GiB", True),
    Column("memory_gbs", "memory bandwidth", "GB/s", True), Column("fp64_gflops", "FP64 peak", "GFLOP/s", True),
    Column("price_per_hour", "price", "per hour", True), Column("currency", "currency"),
    Column("memory_gbs_per_usd", "memory bandwidth per $/h", "GB/s per USD/h", True),
    Column("fp64_gflops_per_usd", "FP64 peak per $/h", "GFLOP/s per USD/h", True),
    Column("hosts", "hosts", numeric=True), Column("profiles", "profiles", numeric=True),
    Column("runs", "measured runs", numeric=True), Column("last_profiled", "last profiled"), Column("source", "source"),
]
DEFAULT_NODE_COLUMNS = ["name", "vendor", "architecture", "cpu_family", "vcpus", "memory_gib", "memory_gbs",
                        "fp64_gflops", "price_per_hour", "currency", "memory_gbs_per_usd"]
FACETS = [("vendor", "vendor"), ("architecture", "architecture"), ("cpu_vendor", "CPU vendor"),
          ("cpu_family", "CPU family")]
NONE = "(none)"
MAX_FIGURES = 4


@dataclass
class NodeQuery:
    q: str | None = None
    facets: dict[str, list[str]] = field(default_factory=dict)
    vcpus_min: float | None = None
    vcpus_max: float | None = None
    mem_min: float | None = None
    mem_max: float | None = None
    priced: bool = False
    cols: list[str] = field(default_factory=list)
    figs: list[str] = field(default_factory=list)
    sort: str | None = None
    page: int = 1
    per: int = 50


def _summary(source, conn):
    return source.memo(conn, "node_summary", queries.node_summary), source.memo(conn, "figure_choices",
                                                                              queries.figure_choices)


def _facet_mask(frame: pd.DataFrame, col: str, chosen: list[str]) -> pd.Series:
    values = [v for v in chosen if v != NONE]
    mask = frame[col].isin(values)
    if NONE in chosen:
        mask |= frame[col].isna()
    return mask


def _filters(frame: pd.DataFrame, p: NodeQuery, skip: str | None = None) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    if p.q:
        mask &= frame["name"].str.contains(p.q, case=False, regex=False, na=False) | \
            frame["cpu_model"].fillna("").str.contains(p.q, case=False, regex=False)
    for col, chosen in p.facets.items():
        if chosen and col != skip:
            mask &= _facet_mask(frame, col, chosen)
    for col, lo, hi in (("vcpus", p.vcpus_min, p.vcpus_max), ("memory_gib", p.mem_min, p.mem_max)):
        if lo is not None:
            mask &= frame[col] >= lo
        if hi is not None:
            mask &= frame[col] <= hi
    if p.priced:
        mask &= frame["price_per_hour"].notna()
    return mask


def _facet_counts(frame: pd.DataFrame, p: NodeQuery) -> list[dict]:
    """Per facet: each value's count among the rows the other filters keep (datasette's rule)."""
    out = []
    for col, title in FACETS:
        kept = frame[_filters(frame, p, skip=col)][col].fillna(NONE)
        counts = kept.value_counts()
        chosen = set(p.facets.get(col) or [])
        values = [{"value": v, "count": int(n), "chosen": v in chosen} for v, n in counts.head(40).items()]
        values += [{"value": v, "count": 0, "chosen": True} for v in chosen if v not in counts.index]
        if len(counts) > 1 or chosen:
            out.append({"key": col, "title": title, "options": values})
    return out


def nodes(source, p: NodeQuery, paged: bool = True) -> View:
    if len(p.figs) > MAX_FIGURES:
        raise BadRequest(f"at most {MAX_FIGURES} figure columns (fig) at once")
    unknown = [c for c in p.cols if c not in {c.key for c in NODE_COLUMNS}]
    if unknown:
        raise BadRequest(f"unknown column {unknown[0]!r} (cols)")

    def work(conn):
        summary, choices = _summary(source, conn)
        by_key = {c["config_key"]: c for c in choices}
        frame = summary
        fig_columns = []
        for i, key in enumerate(p.figs):
            choice = by_key.get(key)
            if choice is None:
                raise BadRequest(f"no measured figure named {key!r} (fig): choose one from the list")
            if frame is summary:
                frame = summary.copy()
            values = source.memo(conn, f"figure:{key}", lambda c: queries.figure_column(c, choice))
            frame[f"fig{i}"] = frame["name"].map(values).astype(float)
            fig_columns.append(Column(f"fig{i}", key, choice["unit"] or "", True))
            if choice["higher_is_better"]:
                priced = (frame["currency"] == "USD") & (frame["price_per_hour"] > 0)
                frame[f"fig{i}_per_usd"] = (frame[f"fig{i}"] / frame["price_per_hour"]).where(priced)
                fig_columns.append(Column(f"fig{i}_per_usd", f"{key} per $/h",
                                          f"{choice['unit'] or ''} per USD/h".strip(), True))
        return frame, fig_columns, choices

    (frame, fig_columns, choices), stale = source.read(f"nodes-data:{p.figs}", work)
    chosen = [c for c in NODE_COLUMNS if c.key in (p.cols or DEFAULT_NODE_COLUMNS)] + fig_columns
    if "name" not in {c.key for c in chosen}:
        chosen.insert(0, NODE_COLUMNS[0])
    kept = frame[_filters(frame, p)]
    try:
        kept = sort_frame(kept, p.sort, {c.key for c in NODE_COLUMNS} | {c.key for c in fig_columns})
        shown, pages = page(kept, p.page, p.per) if paged else (kept, 1)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    view = View("Node types", extra={"stale": stale, "facets": _facet_counts(frame, p), "pages": pages,
                                     "all_columns": NODE_COLUMNS, "choices": choices, "total_types": len(frame)})
    table = view.add(from_frame("nodes", "Node types", shown, chosen))
    table.total = len(kept)
    return view


# ---- one node type ----------------------------------------------------------------------------
def _profile_charts(prof) -> dict[str, dict]:
    from registry.report import curves
    from registry.report.node import roofline_lines

    out = {}
    counts = curves.thread_counts(prof, "bandwidth")
    for t in sorted({counts[0], counts[-1]}) if counts else []:
        data = curves.size_curves(prof, "bandwidth", "bandwidth_gbs", t)
        if data:
            out[f"bandwidth{t}"] = charts.lines(
                f"Bandwidth against working set, {t} thread{'s' if t > 1 else ''}",
                [(k, list(c["ws_bytes"]), list(c["value"])) for k, c in data.items()],
                "working set (bytes)", "bandwidth (GB/s)", xlog=True, marks=curves.cache_marks(prof.caches, t))
    threads, lat = curves.latency_curves(prof)
    if lat:
        out["latency"] = charts.lines("Memory latency (pointer chase)",
                                      [(k, list(c["ws_bytes"]), list(c["value"])) for k, c in lat.items()],
                                      "working set (bytes)", "latency per access (ns)", xlog=True, ylog=True,
                                      marks=curves.cache_marks(prof.caches, threads))
    for family, metric, unit in (("bandwidth", "bandwidth_gbs", "GB/s"), ("compute", "gflops", "GFLOP/s")):
        data = curves.scaling(prof, family, metric)
        if any(len(c) > 1 for c in data.values()):
            out[f"scaling_{family}"] = charts.lines(
                f"Thread scaling: {family}", [(f"{k} ({pl})", list(c["threads"]), list(c["value"]))
                                              for (k, pl), c in data.items()], "threads", unit)
    lines, note = roofline_lines(prof)
    if lines:
        out["roofline"] = charts.roofline(f"Roofline ({note})",
                                          [(ln.label, ln.bandwidth_gbs, ln.peak_gflops) for ln in lines])
    return out


def node(source, name: str) -> View:
    def work(conn):
        try:
            data = queries.node_page(conn, name)
        except LookupError as exc:
            raise NotFound(str(exc)) from None
        prof = data.pop("profile")
        data["charts"] = _profile_charts(prof) if prof is not None else {}
        return data

    data, stale = source.read(f"node:{name}", work)
    view = View(name, extra={"stale": stale, "node": data["node"]})
    inv = data["node"]
    rows = [{"item": k, "value": v} for k, v in inv.items() if v is not None and k not in ("name",)]
    view.add(Table("inventory", "Inventory", [Column("item", "item"), Column("value", "value")], rows))
    view.add(Table("caches", "Caches", [Column("level", "level", numeric=True), Column("cache_type", "type"),
                                        Column("size_bytes", "size", "bytes", True),
                                        Column("line_bytes", "line", "bytes", True),
                                        Column("shared_by", "shared by CPUs", numeric=True),
                                        Column("instances", "instances", numeric=True)], data["caches"]))
    if data["hosts"]:
        view.add(Table("hosts", "Hosts and their health (each host's latest profile against the type's median)",
                       [Column(c, c) for c in data["health_columns"]], data["hosts"]))
    view.add(Table("prices", "Price history", [Column("valid_from", "valid from"),
                                               Column("price_per_hour", "price", "per hour", True),
                                               Column("currency", "currency"), Column("source", "source"),
                                               Column("current", "current")], data["prices"]))
    if len(data["prices"]) > 1:
        by_currency: dict[str, tuple[list, list]] = {}
        for r in data["prices"]:
            days, values = by_currency.setdefault(r["currency"], ([], []))
            days.append(r["valid_from"])
            values.append(r["price_per_hour"])
        view.charts["prices"] = charts.steps("Price history", by_currency, "price per hour")
    if data["imported"]:
        view.add(Table("imported", "Imported suite figures", [
            Column("suite", "suite"), Column("benchmark", "benchmark"), Column("config_key", "configuration"),
            Column("value", "value", numeric=True), Column("unit", "unit"),
            Column("higher_is_better", "higher is better"), Column("hosts", "hosts", numeric=True)], data["imported"]))
        by_bench: dict[str, list] = {}
        for r in data["imported"]:
            by_bench.setdefault(f"{r['suite']}: {r['benchmark']} ({r['unit'] or ''})", []).append(r)
        view.charts.update({f"imported{i}": {"data": [{"type": "bar", "orientation": "h",
                                                       "x": charts.num([r["value"] for r in rs]),
                                                       "y": [charts.label(r["config_key"]) for r in rs],
                                                       "marker": {"color": charts.PALETTE[i % 10]}}],
                                             "layout": charts._layout(title, charts._axis(rs[0]["unit"] or ""),
                                                                      {"automargin": True, "type": "category"},
                                                                      height=max(240, 20 * len(rs) + 90))}
                            for i, (title, rs) in enumerate(list(by_bench.items())[:12])})
    if data["runs"]:
        view.add(Table("runs", "Measured runs on this node", [
            Column("app", "application", link="app"), Column("threads", "threads", numeric=True),
            Column("runs", "runs", numeric=True), Column("median_s", "median", "s", True),
            Column("min_s", "min", "s", True), Column("max_s", "max", "s", True)], data["runs"]))
    view.charts = {**data["charts"], **view.charts}    # the profile's curves first
    return view


# ---- compare ----------------------------------------------------------------------------------
COMPARED = [c for c in NODE_COLUMNS if c.numeric and c.key not in ("profiles", "runs")]
LOWER_IS_BETTER = {"price_per_hour"}


def compare(source, names: list[str], base: str | None) -> View:
    names = list(dict.fromkeys(names))
    if not 2 <= len(names) <= 10:
        raise BadRequest(f"compare needs 2 to 10 node types (node=...), got {len(names)}")
    base = base or names[0]
    if base not in names:
        raise BadRequest(f"the baseline {base!r} is not one of the compared node types")

    def work(conn):
        from registry.errors import UserError
        from registry.report.load import node_profile

        summary, _ = _summary(source, conn)
        rows = summary.set_index("name")
        missing = [n for n in names if n not in rows.index]
        if missing:
            raise NotFound(f"no node type named {missing[0]!r}")
        profiles = {}
        for n in names:
            try:
                profiles[n] = node_profile(conn, n) if rows.at[n, "profiles"] else None
            except UserError:
                profiles[n] = None
        return rows.loc[names].reset_index(), _overlaid(profiles)

    (frame, overlaid), stale = source.read(f"compare:{names}", work)
    values = frame.set_index("name")
    long, wide = [], []
    for col in COMPARED:
        ref = values.at[base, col.key]
        row = {"metric": col.label, "unit": col.unit, "higher_is_better": col.key not in LOWER_IS_BETTER}
        for n in names:
            v = values.at[n, col.key]
            rel = v / ref if pd.notna(v) and pd.notna(ref) and ref else None
            long.append({"metric": col.label, "unit": col.unit, "node": n, "value": v, "relative": rel})
            row[n] = v
            row[f"{n}\x00rel"] = rel
        wide.append(row)
    view = View("Compare", extra={"stale": stale, "names": names, "base": base, "wide": wide})
    view.add(Table("compare", f"Relative to {base}", [Column("metric", "metric"), Column("unit", "unit"),
                                                     Column("node", "node type", link="node"),
                                                     Column("value", "value", numeric=True),
                                                     Column("relative", f"relative to {base}", "x", True)], long))
    view.charts.update(overlaid)
    return view


def _overlaid(profiles: dict) -> dict[str, dict]:
    """Each node's memory-bandwidth curve (triad, else its first bandwidth kernel, at its most threads),
    latency curve and triad thread scaling, on shared axes."""
    from registry.report import curves

    bw, lat, scale = [], [], []
    for name, prof in profiles.items():
        if prof is None:
            continue
        counts = curves.thread_counts(prof, "bandwidth")
        if counts:
            data = curves.size_curves(prof, "bandwidth", "bandwidth_gbs", counts[-1])
            kernel = "triad" if "triad" in data else next(iter(data), None)
            if kernel:
                c = data[kernel]
                bw.append((f"{name} ({kernel}, {counts[-1]} thr)", list(c["ws_bytes"]), list(c["value"])))
        _, lc = curves.latency_curves(prof)
        if lc:
            c = next(iter(lc.values()))
            lat.append((name, list(c["ws_bytes"]), list(c["value"])))
        sc = {k: c for (k, _), c in curves.scaling(prof, "bandwidth", "bandwidth_gbs").items()}
        c = sc.get("triad", next(iter(sc.values()), None))
        if c is not None and len(c) > 1:
            scale.append((name, list(c["threads"]), list(c["value"])))
    out = {}
    if bw:
        out["bandwidth"] = charts.lines("Memory bandwidth against working set", bw, "working set (bytes)", "GB/s",
                                        xlog=True)
    if lat:
        out["latency"] = charts.lines("Latency against working set", lat, "working set (bytes)", "ns", xlog=True,
                                      ylog=True)
    if scale:
        out["scaling"] = charts.lines("Thread scaling of memory bandwidth", scale, "threads", "GB/s")
    return out


# ---- applications, traces -----------------------------------------------------------------------
def apps(source) -> View:
    frame, stale = source.read("apps", queries.apps)
    view = View("Applications", extra={"stale": stale})
    view.add(from_frame("apps", "Applications", frame, [
        Column("app", "application", link="app"), Column("traces", "traces", numeric=True),
        Column("runs", "measured runs", numeric=True), Column("predicted_nodes", "nodes predicted", numeric=True),
        Column("created_at", "created")]))
    return view


def app(source, name: str) -> View:
    def work(conn):
        if conn.execute(sa.text("SELECT count(*) FROM apps WHERE name = :a"), {"a": name}).scalar() == 0:
            raise NotFound(f"no application named {name!r}")
        return queries.traces(conn, name), queries.model_sets(conn, name)

    (traces, sets), stale = source.read(f"app:{name}", work)
    view = View(name, extra={"stale": stale, "sets": sets})
    view.add(from_frame("traces", "Traces", traces, [
        Column("uid", "trace", link="trace"), Column("node", "node type", link="node"), Column("status", "status"),
        Column("wall_s", "wall time", "s", True), Column("phases", "phases", numeric=True),
        Column("started_at", "started")]))
    return view


def trace(source, uid: str) -> View:
    def work(conn):
        try:
            return queries.trace(conn, uid)
        except LookupError as exc:
            raise NotFound(str(exc)) from None

    (tr, resembles), stale = source.read(f"trace:{uid}", work)
    view = View(f"{tr.app} on {tr.node}", extra={"stale": stale, "trace": tr})
    rows = []
    for ph in tr.phases:
        row = {"idx": ph.idx, "name": ph.name, "method": ph.method, "start_s": ph.start_s, "end_s": ph.end_s,
               "time_s": ph.time_s, "weight": 100 * ph.weight}
        for model, matches in resembles.items():
            found = dict(matches)
            row[f"resembles:{model}"] = "; ".join(found.get(ph.name, [])[:3])
        rows.append(row)
    view.add(Table("phases", "Phases and what each resembles (the configs each model matched, best first)", [
        Column("idx", "#", numeric=True), Column("name", "phase"), Column("method", "found by"),
        Column("start_s", "start", "s", True), Column("end_s", "end", "s", True), Column("time_s", "time", "s", True),
        Column("weight", "share of run", "%", True)] + [Column(f"resembles:{m}", f"resembles ({m})")
                                                          for m in resembles], rows))
    samples = tr.samples
    metrics = {m: (list(samples.index), list(samples[m])) for m in list(samples.columns)[:8]}
    view.charts["timeline"] = charts.timeline(f"{tr.app} on {tr.node}: phases over time", metrics,
                                              [(ph.name, ph.start_s, ph.end_s) for ph in tr.phases])
    return view


# ---- predictions ------------------------------------------------------------------------------
PREDICTION_COLUMNS = [
    Column("time_rank", "by time", numeric=True), Column("cost_rank", "by cost", numeric=True),
    Column("node", "node type", link="node"), Column("predicted_s", "predicted", "s", True),
    Column("low_s", "low", "s", True), Column("high_s", "high", "s", True),
    Column("measured_s", "measured (median)", "s", True), Column("measured_runs", "runs", numeric=True),
    Column("abs_rel_error", "|error|", "fraction", True), Column("cost_per_run", "cost per run", "currency", True),
    Column("price_per_hour", "price", "per hour", True), Column("currency", "currency"),
    Column("coverage", "coverage", numeric=True), Column("threads", "threads", numeric=True),
    Column("vcpus", "vCPUs", numeric=True)]
CHART_NODES = 40


def predictions(source, app_name: str, model: str | None, version: str | None, sort: str, number: int, per: int,
                paged: bool = True) -> View:
    def work(conn):
        if conn.execute(sa.text("SELECT count(*) FROM apps WHERE name = :a"), {"a": app_name}).scalar() == 0:
            raise NotFound(f"no application named {app_name!r}")
        sets = queries.model_sets(conn, app_name)
        if not sets:
            return sets, None
        chosen = model or sets[0]["model_name"]
        if chosen not in {s["model_name"] for s in sets}:
            raise BadRequest(f"no predictions of {app_name!r} by model {chosen!r}")
        return sets, queries.predictions(conn, app_name, chosen, version)

    (sets, frame), stale = source.read(f"predictions:{app_name}:{model}:{version}", work)
    view = View(f"Predictions for {app_name}", extra={"stale": stale, "sets": sets, "app": app_name})
    if frame is None or frame.empty:
        view.extra["warnings"] = ["no predictions stored for this application (with this model and version): "
                                  "`nodereg match APP` stores them"]
        return view
    view.extra["model"] = {k: queries.clean(frame[k].iloc[0]) for k in
                           ("model_name", "model_version", "base_node", "trace_uid", "created_at")}
    view.extra["warnings"] = queries.warnings_for(frame)
    key = {"time": "predicted_s", "cost": "cost_per_run"}.get(sort.lstrip("-"), sort.lstrip("-"))
    try:
        ordered = sort_frame(frame, ("-" if sort.startswith("-") else "") + key, {c.key for c in PREDICTION_COLUMNS})
        shown, pages = page(ordered, number, per) if paged else (ordered, 1)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    view.extra["pages"] = pages
    table = view.add(from_frame("predictions", "Every node, ranked", shown, PREDICTION_COLUMNS))
    table.total = len(ordered)
    top = ordered.head(CHART_NODES)
    view.charts["intervals"] = charts.intervals(
        f"Predicted time, interval and measured runs (first {len(top)} by {sort.lstrip('-')})", list(top["node"]),
        list(top["predicted_s"]), list(top["low_s"]), list(top["high_s"]), list(top["measured_s"]), "seconds")
    return view


# ---- accuracy ---------------------------------------------------------------------------------
def accuracy(source) -> View:
    result, stale = source.read("accuracy", queries.accuracy)
    view = View("Accuracy", extra={"stale": stale})
    if "empty" in result:
        view.extra["warnings"] = [result["empty"]]
        return view
    view.add(from_frame("summary", "Per model and version", result["summary"], [
        Column("model_name", "model"), Column("model_version", "version"), Column("apps", "apps", numeric=True),
        Column("cells", "app x node cells", numeric=True),
        Column("median_abs_error", "median |error|", "fraction", True),
        Column("worst_abs_error", "worst |error|", "fraction", True),
        Column("median_spearman", "median Spearman", numeric=True), Column("top1_rate", "top-1 rate", numeric=True),
        Column("mean_regret", "mean regret", "fraction", True),
        Column("coverage", "interval coverage", "fraction", True),
        Column("median_spread", "median run spread", "fraction", True)]))
    if len(result["groups"]):     # `match` calibrates each group of nodes apart (registry.match.calibration)
        view.add(from_frame("groups", "Interval coverage per group of nodes", result["groups"], [
            Column("model_name", "model"), Column("model_version", "version"), Column("interval_group", "group"),
            Column("intervals", "intervals", numeric=True), Column("coverage", "coverage", "fraction", True)]))
    view.add(from_frame("sets", "Per prediction set", result["sets"], [
        Column("app", "application", link="app"), Column("model_name", "model"), Column("model_version", "version"),
        Column("base_node", "base node", link="node"), Column("nodes", "nodes", numeric=True),
        Column("spearman", "Spearman", numeric=True), Column("top1", "top-1"),
        Column("regret", "regret", "fraction", True)]))
    cells = result["cells"]
    view.add(from_frame("cells", "Predicted against measured", cells, [
        Column("app", "application", link="app"), Column("model_name", "model"), Column("node", "node", link="node"),
        Column("threads", "threads", numeric=True), Column("predicted_s", "predicted", "s", True),
        Column("low_s", "low", "s", True), Column("high_s", "high", "s", True),
        Column("measured_s", "measured", "s", True), Column("error", "error", "fraction", True)]))
    groups = {}
    for (m, v), g in cells.groupby(["model_name", "model_version"]):
        groups[f"{m} {v}"] = (list(g["measured_s"]), list(g["predicted_s"]),
                              [f"{a} on {n}" for a, n in zip(g["app"], g["node"])])
    view.charts["scatter"] = charts.scatter("Predicted against measured time", groups, "measured (s)",
                                            "predicted (s)")
    return view


# ---- SQL --------------------------------------------------------------------------------------
CANNED = {
    "node types": "SELECT name, cpu_model, n_cpus, memory_bytes, memory_triad_gbs, fp64_gflops, hosts FROM v_nodes ORDER BY name",
    "triad bandwidth curve": "SELECT node, ws_bytes, bandwidth_gbs FROM v_profile WHERE ub = 'triad' AND threads = 1 ORDER BY node, ws_bytes",
    "current prices": "SELECT node, price_per_hour, currency, source, valid_from FROM v_node_prices WHERE current ORDER BY price_per_hour",
    "measured runs": "SELECT app, node, threads, runs, median_s FROM v_runs ORDER BY app, median_s",
    "predictions with measured runs": "SELECT app, node, model_name, predicted_s, measured_s, abs_rel_error FROM v_predictions WHERE measured_s IS NOT NULL ORDER BY app, node",
    "phases": "SELECT app, node, trace_uid, idx, name, start_s, end_s, weight FROM v_phases ORDER BY app, trace_uid, idx",
    "hosts": "SELECT node, host, profiles, last_profiled, memory_triad_gbs FROM v_hosts ORDER BY node, host",
}
SQL_ROW_CAP = 10_000
SQL_TIME_LIMIT_S = 5.0


def sql(source, text: str | None, x: str | None, y: str | None, kind: str, row_cap: int = SQL_ROW_CAP) -> View:
    from registry.db import db_error, is_driver_error
    from registry.db.query import Bounds, run_on
    from registry.errors import UserError

    view = View("SQL", extra={"canned": CANNED, "query": text or "", "error": None, "capped": False})
    if not text:
        return view
    try:
        with source.connect() as conn:
            columns, rows = run_on(conn.connection.driver_connection, source.dialect, text,
                                   Bounds(SQL_TIME_LIMIT_S, row_cap + 1, cut=True))
    except UserError as exc:
        view.extra["error"] = str(exc)
        return view
    except Exception as exc:  # noqa: BLE001 - the database's refusal of the analyst's statement, as one line
        if not is_driver_error(exc):
            raise
        view.extra["error"] = str(db_error(exc))
        return view
    if len(rows) > row_cap:
        rows = rows[:row_cap]
        view.extra["capped"] = row_cap
    columns = [str(c) for c in columns]
    keys = [f"c{i}" for i in range(len(columns))]
    view.add(Table("sql", "Result", [Column(k, c) for k, c in zip(keys, columns)],
                   [dict(zip(keys, r)) for r in rows], len(rows)))
    view.extra["columns"] = columns
    if x or y:
        if x not in columns or y not in columns:
            raise BadRequest("chart: x and y must be columns of the result")
        if kind not in ("line", "scatter", "bar"):
            raise BadRequest("chart: kind is line, scatter or bar")
        view.charts["result"] = charts.from_result(columns, rows, x, y, kind)
    return view
