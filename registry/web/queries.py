"""What the web pages read, as plain data (lists of dicts and DataFrames); no HTML here.

Each function takes a read-only connection. The node-type summary (one row per type with its
headline figures and price) is the costly one at 10,000 types; the server keeps it until the
registry's content stamp changes (registry/web/source.py, Source.memo), so filtering, sorting and
paging it per request is in memory.
"""

from __future__ import annotations

import math

import pandas as pd
import sqlalchemy as sa

from registry.db.read import read_frame
from registry.errors import UserError
from registry.values import plural

# PostgreSQL: what changes when a writer adds or removes something a page shows (registry/web/source.py)
STAMP_SQL = """SELECT (SELECT count(*) FROM nodes), (SELECT max(node_id) FROM nodes),
  (SELECT max(profile_id) FROM profiles), (SELECT count(*) FROM profiles),
  (SELECT max(price_id) FROM node_prices), (SELECT count(*) FROM node_prices),
  (SELECT max(run_id) FROM runs), (SELECT count(*) FROM runs),
  (SELECT max(prediction_id) FROM predictions), (SELECT count(*) FROM predictions),
  (SELECT max(trace_id) FROM traces), (SELECT count(*) FROM traces)"""

# Each host's latest profile of a type in each suite (v_latest_profile, as v_host_profile counts them):
# a machine profiled with our kernels and in an imported suite keeps both.
_LATEST = "SELECT profile_id FROM v_latest_profile"

# The current price of each priced type: its latest valid_from, then latest entry (v_node_prices.current,
# whose correlated subquery PostgreSQL runs once per price row: seconds at 3,000 prices).
CURRENT_PRICES_SQL = """
SELECT n.name AS node, p.price_per_hour, p.currency
FROM (SELECT node_id, price_per_hour, currency,
             row_number() OVER (PARTITION BY node_id ORDER BY valid_from DESC, price_id DESC) AS k
      FROM node_prices) p JOIN nodes n ON n.node_id = p.node_id
WHERE p.k = 1"""

# Headline figures per type, as v_nodes defines them (memory bandwidth: triad at the most threads and
# its largest working set; FP64: peak_fma at the most threads (migration 0021); each config the median over the type's hosts, each
# host's latest profile, as v_profile), computed for all types at once from the few configs involved.
_SUMMARY_SQL = f"""
WITH cfg AS (SELECT c.config_id, m.name AS ub, c.threads, c.ws_bytes FROM ub_configs c
             JOIN microbenchmarks m ON m.ub_id = c.ub_id WHERE m.name IN ('triad', 'peak_fma')),
per AS (SELECT p.node_id, cfg.ub, cfg.threads, cfg.ws_bytes,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY r.bandwidth_gbs) AS bandwidth_gbs,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY r.gflops) AS gflops
        FROM profile_runs r JOIN cfg ON cfg.config_id = r.config_id JOIN profiles p ON p.profile_id = r.profile_id
        WHERE r.profile_id IN ({_LATEST})
        GROUP BY p.node_id, cfg.ub, cfg.threads, cfg.ws_bytes, cfg.config_id),
t AS (SELECT node_id, threads, ws_bytes, bandwidth_gbs FROM per WHERE ub = 'triad' AND bandwidth_gbs IS NOT NULL),
tm AS (SELECT node_id, max(threads) AS mt FROM t GROUP BY node_id),
tw AS (SELECT t.node_id, max(t.ws_bytes) AS mw FROM t JOIN tm ON tm.node_id = t.node_id AND t.threads = tm.mt
       GROUP BY t.node_id),
triad AS (SELECT t.node_id, max(t.bandwidth_gbs) AS memory_gbs FROM t
          JOIN tm ON tm.node_id = t.node_id AND t.threads = tm.mt
          JOIN tw ON tw.node_id = t.node_id AND t.ws_bytes = tw.mw GROUP BY t.node_id),
f AS (SELECT node_id, threads, gflops FROM per WHERE ub = 'peak_fma' AND gflops IS NOT NULL),
fm AS (SELECT node_id, max(threads) AS mt FROM f GROUP BY node_id),
fma AS (SELECT f.node_id, max(f.gflops) AS fp64_gflops FROM f JOIN fm ON fm.node_id = f.node_id AND f.threads = fm.mt
        GROUP BY f.node_id),
prof AS (SELECT node_id, count(*) AS profiles, count(DISTINCT coalesce(host, '')) AS hosts,
                max(started_at) AS last_profiled FROM profiles GROUP BY node_id),
price AS ({CURRENT_PRICES_SQL}),
nruns AS (SELECT node_id, count(*) AS runs FROM runs GROUP BY node_id)
SELECT n.name, n.vendor, n.architecture, n.cpu_vendor, n.cpu_family, n.cpu_model, n.n_cpus AS vcpus,
       n.memory_bytes / 1073741824.0 AS memory_gib, n.source,
       coalesce(prof.hosts, 0) AS hosts, coalesce(prof.profiles, 0) AS profiles, prof.last_profiled,
       triad.memory_gbs, fma.fp64_gflops, price.price_per_hour, price.currency, coalesce(nruns.runs, 0) AS runs
FROM nodes n
LEFT JOIN prof ON prof.node_id = n.node_id
LEFT JOIN triad ON triad.node_id = n.node_id
LEFT JOIN fma ON fma.node_id = n.node_id
LEFT JOIN price ON price.node = n.name
LEFT JOIN nruns ON nruns.node_id = n.node_id"""

# per config, how many host profiles (each host's latest) measured it: a hash count, not count(DISTINCT)
# of types, which took seconds on PostgreSQL over 10,000 types' runs
FIGURE_CHOICES_SQL = f"""
SELECT c.config_id, c.config_key, coalesce(m.suite, 'nodereg') AS suite, m.family, c.unit, c.higher_is_better,
       k.profiles
FROM (SELECT r.config_id, count(*) AS profiles FROM profile_runs r WHERE r.profile_id IN ({_LATEST})
      GROUP BY r.config_id) k
JOIN ub_configs c ON c.config_id = k.config_id JOIN microbenchmarks m ON m.ub_id = c.ub_id
ORDER BY k.profiles DESC, c.config_key"""
OWN_CHOICES = 200     # of our own kernels' configs (every imported one is offered)

# our kernels' figure by family (imported suites carry their own value and unit)
OWN_FIGURES = {"bandwidth": ("bandwidth_gbs", "GB/s", True), "compute": ("gflops", "GFLOP/s", True),
               "latency": ("latency_ns", "ns", False)}


def node_summary(conn: sa.Connection) -> pd.DataFrame:
    frame = read_frame(conn, _SUMMARY_SQL + " ORDER BY n.name")
    for col in ("vcpus", "memory_gib", "hosts", "profiles", "memory_gbs", "fp64_gflops", "price_per_hour", "runs"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    usd = frame["currency"] == "USD"
    priced = usd & (frame["price_per_hour"] > 0)
    frame["memory_gbs_per_usd"] = (frame["memory_gbs"] / frame["price_per_hour"]).where(priced)
    frame["fp64_gflops_per_usd"] = (frame["fp64_gflops"] / frame["price_per_hour"]).where(priced)
    return frame


def figure_choices(conn: sa.Connection) -> list[dict]:
    """The configs a table column can show (imported suites' first, then ours measured on the most types),
    with unit and direction."""
    out, own = [], 0
    for r in conn.execute(sa.text(FIGURE_CHOICES_SQL)):
        d = dict(r._mapping)
        if d["suite"] == "nodereg":
            own += 1
            if own > OWN_CHOICES:
                continue
            d["column"], d["unit"], d["higher_is_better"] = OWN_FIGURES.get(d["family"], ("median_s", "s", False))
        else:
            d["column"] = "value"
            d["higher_is_better"] = bool(d["higher_is_better"]) if d["higher_is_better"] is not None else True
        out.append(d)
    return sorted(out, key=lambda d: d["suite"] == "nodereg")


def figure_column(conn: sa.Connection, choice: dict) -> pd.Series:
    """node -> the config's figure (median over the type's hosts, each host's latest profile)."""
    col = choice["column"]
    frame = read_frame(conn, f"""
        SELECT n.name AS node, percentile_cont(0.5) WITHIN GROUP (ORDER BY r.{col}) AS v
        FROM profile_runs r JOIN profiles p ON p.profile_id = r.profile_id JOIN nodes n ON n.node_id = p.node_id
        WHERE r.config_id = :cid AND r.profile_id IN ({_LATEST}) GROUP BY n.name""", {"cid": choice["config_id"]})
    return pd.Series(pd.to_numeric(frame["v"], errors="coerce").to_numpy(dtype=float), index=frame["node"])


def overview(conn: sa.Connection) -> dict:
    one = lambda sql: conn.execute(sa.text(sql)).scalar()  # noqa: E731
    counts = {name: one(f"SELECT count(*) FROM {table}") for name, table in (
        ("node types", "nodes"), ("profiles", "profiles"), ("applications", "apps"), ("traces", "traces"),
        ("measured runs", "runs"), ("predictions", "predictions"), ("prices", "node_prices"))}
    fresh = {"last profile": one("SELECT max(started_at) FROM profiles"),
             "last trace": one("SELECT max(started_at) FROM traces"),
             "last prediction": one("SELECT max(created_at) FROM predictions"),
             "last measured run": one("SELECT max(created_at) FROM runs"),
             "last price": one("SELECT max(created_at) FROM node_prices")}
    by_vendor = [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT coalesce(vendor, '(profiled here)') AS vendor, count(*) AS types, "
        "count(DISTINCT architecture) AS architectures FROM nodes GROUP BY coalesce(vendor, '(profiled here)') "
        "ORDER BY count(*) DESC"))]
    suites = [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT coalesce(m.suite, 'nodereg') AS suite, count(DISTINCT m.ub_id) AS benchmarks, "
        "count(c.config_id) AS configs FROM microbenchmarks m LEFT JOIN ub_configs c ON c.ub_id = m.ub_id "
        "GROUP BY coalesce(m.suite, 'nodereg') ORDER BY 1"))]
    version = one("SELECT max(version) FROM schema_version")
    return {"counts": counts, "fresh": fresh, "vendors": by_vendor, "suites": suites, "schema_version": version}


def node_row(conn: sa.Connection, name: str) -> dict:
    found = conn.execute(sa.text(
        "SELECT node_id, name, vendor, architecture, cpu_vendor, cpu_family, cpu_model, n_cpus, cores, sockets, "
        "threads_per_core, numa_nodes, memory_bytes, max_mhz, cpu_list, host, compiler, source, isa_flags, "
        "created_at FROM nodes WHERE name = :n"), {"n": name}).mappings().first()
    if found is None:
        raise LookupError(f"no node type named {name!r}")
    return dict(found)


def node_page(conn: sa.Connection, name: str) -> dict:
    """Inventory, caches, hosts and their health, price history, imported figures, the profile."""
    from registry.health import host_rows, type_health
    from registry.report.load import node_profile

    node = node_row(conn, name)
    node_id = node.pop("node_id")
    caches = [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT level, cache_type, size_bytes, line_bytes, shared_by, instances FROM node_caches "
        "WHERE node_id = :id ORDER BY level, cache_type"), {"id": node_id})]
    prices = [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT valid_from, price_per_hour, currency, source, current FROM v_node_prices WHERE node = :n "
        "ORDER BY valid_from, created_at"), {"n": name})]
    imported = [dict(r._mapping) for r in conn.execute(sa.text(f"""
        SELECT m.suite, m.name AS benchmark, c.config_key, percentile_cont(0.5) WITHIN GROUP (ORDER BY r.value) AS value,
               c.unit, c.higher_is_better, count(*) AS hosts
        FROM profile_runs r JOIN profiles p ON p.profile_id = r.profile_id
        JOIN ub_configs c ON c.config_id = r.config_id JOIN microbenchmarks m ON m.ub_id = c.ub_id
        WHERE p.node_id = :id AND r.profile_id IN ({_LATEST}) AND coalesce(m.suite, 'nodereg') <> 'nodereg'
        GROUP BY m.suite, m.name, c.config_key, c.unit, c.higher_is_better ORDER BY m.suite, c.config_key"""),
        {"id": node_id})]
    hosts, health_columns = [], []
    n_profiles = conn.execute(sa.text("SELECT count(*) FROM profiles WHERE node_id = :id"), {"id": node_id}).scalar()
    if n_profiles:
        health_columns, hosts = host_rows(type_health(conn, name))
    try:
        prof = node_profile(conn, name) if n_profiles else None
    except UserError:
        prof = None
    runs = [dict(r._mapping) for r in conn.execute(sa.text(
        "SELECT app, threads, runs, median_s, min_s, max_s FROM v_runs WHERE node = :n ORDER BY app, threads"),
        {"n": name})]
    return {"node": node, "caches": caches, "prices": prices, "imported": imported, "hosts": hosts,
            "health_columns": health_columns, "profile": prof, "runs": runs}


def apps(conn: sa.Connection) -> pd.DataFrame:
    return read_frame(conn, """
        SELECT a.name AS app, (SELECT count(*) FROM traces t WHERE t.app_id = a.app_id) AS traces,
               (SELECT count(*) FROM runs r WHERE r.app_id = a.app_id) AS runs,
               (SELECT count(DISTINCT p.node_id) FROM predictions p WHERE p.app_id = a.app_id) AS predicted_nodes,
               a.created_at
        FROM apps a ORDER BY a.name""")


def traces(conn: sa.Connection, app: str) -> pd.DataFrame:
    return read_frame(conn, """
        SELECT t.uid, n.name AS node, t.status, t.wall_s, t.started_at,
               (SELECT count(*) FROM phases p WHERE p.trace_id = t.trace_id) AS phases
        FROM traces t JOIN apps a ON a.app_id = t.app_id JOIN nodes n ON n.node_id = t.node_id
        WHERE a.name = :a ORDER BY t.started_at DESC, t.trace_id DESC""", {"a": app})


def trace(conn: sa.Connection, uid: str):
    """The trace with its phases and, per phase, the configs each model found it resembles."""
    from registry.report.load import trace_from_registry
    from registry.report.trace import latest_explanations, phase_matches

    found = conn.execute(sa.text("SELECT trace_id FROM traces WHERE uid = :u"), {"u": uid}).scalar()
    if found is None:
        raise LookupError(f"no trace with uid {uid!r}")
    tr = trace_from_registry(conn, found)
    resembles = {model: phase_matches(exp) for model, exp in latest_explanations(conn, found, tr.node).items()}
    return tr, resembles


def model_sets(conn: sa.Connection, app: str) -> list[dict]:
    """The prediction sets stored for an app: per model and version, the latest set's time and size."""
    return [dict(r._mapping) for r in conn.execute(sa.text("""
        SELECT model_name, model_version, max(created_at) AS created_at, count(DISTINCT node) AS nodes
        FROM v_predictions WHERE app = :a GROUP BY model_name, model_version
        ORDER BY max(created_at) DESC"""), {"a": app})]


def predictions(conn: sa.Connection, app: str, model: str, version: str | None) -> pd.DataFrame:
    """The latest prediction set of `model` for the app (its latest trace's), with measured runs and prices."""
    ver = "AND v.model_version = :ver" if version else ""
    frame = read_frame(conn, f"""
        WITH chosen AS (SELECT v.* FROM v_predictions v WHERE v.app = :a AND v.model_name = :m {ver}),
        latest AS (SELECT inputs_digest, max(created_at) AS created_at FROM chosen GROUP BY inputs_digest
                   ORDER BY max(created_at) DESC LIMIT 1)
        SELECT c.node, c.node_rank, c.predicted_s, c.low_s, c.high_s, c.coverage, c.threads, c.base_node,
               c.model_name, c.model_version, c.trace_uid, c.created_at, c.measured_runs, c.measured_s,
               c.abs_rel_error, n.n_cpus AS vcpus, n.vendor, n.architecture
        FROM chosen c JOIN latest l ON l.inputs_digest IS NOT DISTINCT FROM c.inputs_digest
        JOIN nodes n ON n.name = c.node""", {"a": app, "m": model, **({"ver": version} if version else {})})
    # prices on their own: joined to v_predictions in one statement, PostgreSQL ran v_node_prices'
    # subquery per pair of rows (minutes at 3,000 nodes)
    prices = read_frame(conn, CURRENT_PRICES_SQL)
    frame = frame.merge(prices, on="node", how="left")
    for col in ("predicted_s", "low_s", "high_s", "coverage", "measured_s", "abs_rel_error", "price_per_hour",
                "node_rank", "measured_runs"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    frame["cost_per_run"] = frame["predicted_s"] / 3600.0 * frame["price_per_hour"]
    frame["time_rank"] = frame["predicted_s"].rank(method="min")
    frame["cost_rank"] = frame["cost_per_run"].rank(method="min")
    return frame


def warnings_for(frame: pd.DataFrame) -> list[str]:
    """What a reader of a prediction set should know before trusting its order."""
    out = []
    low = frame[frame["coverage"] < 0.5]
    if len(low):
        out.append(f"{plural(len(low), 'node')} predicted from less than half of the trace's phases (coverage < 0.5)")
    unpriced = frame["price_per_hour"].isna().sum()
    if unpriced:
        verb = "has" if unpriced == 1 else "have"
        out.append(f"{unpriced} of {plural(len(frame), 'node')} {verb} no price: left out of the cost ranking")
    currencies = frame["currency"].dropna().unique()
    if len(currencies) > 1:
        out.append(f"prices in several currencies ({', '.join(sorted(currencies))}): costs are not comparable across them")
    off = frame[frame["abs_rel_error"] > 0.5]
    if len(off):
        out.append(f"{plural(len(off), 'node')} where the measured runs are more than 50 % off the prediction")
    wide = frame[(frame["high_s"] / frame["low_s"]) > 3]
    if len(wide):
        out.append(f"{plural(len(wide), 'node')} with an interval wider than 3x (unstable or partial profiles)")
    return out


def accuracy(conn: sa.Connection) -> dict | None:
    """Per model and version: errors, Spearman, top-1, regret, interval coverage (`nodereg accuracy`'s,
    and per interval group); None without data."""
    from registry import accuracy as acc

    try:
        result = acc.assess(acc.load(conn))
    except UserError as exc:
        return {"empty": str(exc)}
    groups = pd.DataFrame(result.group_coverage(), columns=["model_name", "model_version", "interval_group",
                                                         "intervals", "coverage", "nominal"])
    return {"summary": result.summary.drop(columns=["coverage_by_group"]), "groups": groups, "sets": result.sets,
            "cells": result.cells}


def clean(value):
    """A value as JSON and the page show it: NaN and NaT as None, timestamps as text."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NaT:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return value
