#!/usr/bin/env python3
"""Server time per page of `nodereg serve` (issue 29 targets: node page <= 100 ms, node-type table at
10,000 types <= 300 ms, predictions of an app over 3,000 nodes <= 300 ms; medians).

    python scripts/bench_serve.py                               # DuckDB, 10,000 types
    pg_virtualenv sh -c '.venv/bin/python scripts/bench_serve.py --db "postgresql://$PGUSER:$PGPASSWORD@$PGHOST:$PGPORT/postgres"'

The registry: scripts/bench_scale.py's 10,000 profiled types (one profile each, --configs configs),
plus --real types with profiles shaped like real nodes (cache steps, latency, thread scaling: the
report tests' synthetic nodes) whose pages have every chart, prices for 3,000 types, and an app with
one prediction set over 3,000 types and measured runs on 100. Times are taken in-process (the
application called as the server calls it, through Starlette's TestClient): request to response,
HTML rendered, no network. Each page is measured

- cold: its first request after the registry changed (its queries run), over distinct pages
  (node pages of distinct types; the table's summary once, which every table request shares);
- served: requests whose queries' result is kept because the registry has not changed since, with
  the per-request work still done (filtering, sorting and paging 10,000 rows; rendering) over
  distinct parameters (sorts, filters, pages).
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa
from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from bench_scale import build  # noqa: E402
from test_report_fixtures import SynthNode, add_profile  # noqa: E402

from registry.db import open_registry, utcnow  # noqa: E402
from registry.db.write import allocate_ids, insert_returning, insert_rows, new_uid  # noqa: E402

console = Console()


def add_site_data(url: str, real: int, predicted: int, seed: int = 2) -> list[str]:
    """Real-shaped types, prices, and an app predicted on `predicted` types; returns the real types' names."""
    rng = np.random.default_rng(seed)
    reg = open_registry(url)
    names = [f"real{i:03d}" for i in range(real)]
    with reg.begin() as conn:
        for i, name in enumerate(names):
            add_profile(conn, SynthNode(name, cpus=int(rng.choice([2, 4, 8])), seed=i, fma=float(rng.uniform(20, 60))))
        nodes = pd.read_sql(sa.text("SELECT node_id, name FROM nodes ORDER BY node_id"), conn)
        chosen = nodes.sample(predicted, random_state=seed)
        now = utcnow()
        insert_rows(conn, "node_prices", pd.DataFrame({
            "price_id": allocate_ids(conn, "node_prices_id_seq", len(chosen)),
            "uid": [new_uid() for _ in range(len(chosen))], "node_id": chosen["node_id"].to_numpy(),
            "price_per_hour": rng.uniform(0.02, 4.0, len(chosen)), "currency": "USD", "source": "bench",
            "valid_from": now.date(), "created_at": now}))
        app_id = insert_returning(conn, "apps", {"name": "bench-app", "created_at": now}, "app_id")
        base = int(chosen["node_id"].iloc[0])
        trace_id = insert_returning(conn, "traces", {"uid": new_uid(), "app_id": app_id, "node_id": base,
                                                     "status": "ok", "wall_s": 60.0, "threads": 2,
                                                     "source": "bench", "started_at": now}, "trace_id")
        pred = rng.lognormal(4, 0.4, len(chosen))
        insert_rows(conn, "predictions", pd.DataFrame({
            "prediction_id": allocate_ids(conn, "predictions_id_seq", len(chosen)),
            "uid": [new_uid() for _ in range(len(chosen))], "trace_id": trace_id, "app_id": app_id,
            "node_id": chosen["node_id"].to_numpy(), "base_node_id": base, "model_name": "similarity",
            "model_version": "bench", "threads": 2, "predicted_s": pred, "low_s": pred * 0.85, "high_s": pred * 1.2,
            "node_rank": pd.Series(pred).rank(method="first").astype(int).to_numpy(), "coverage": 0.95,
            "explanation_json": "{}", "inputs_digest": "bench", "created_at": now}))
        measured = chosen.head(100)
        insert_rows(conn, "runs", pd.DataFrame({
            "run_id": allocate_ids(conn, "runs_id_seq", len(measured)), "uid": [new_uid() for _ in range(len(measured))],
            "app_id": app_id, "node_id": measured["node_id"].to_numpy(), "threads": 2,
            "time_s": pred[:100] * rng.lognormal(0, 0.15, 100), "source": "bench", "created_at": now}))
    reg.close()
    return names


def timed(client, url: str) -> float:
    t0 = time.perf_counter()
    res = client.get(url)
    elapsed = time.perf_counter() - t0
    if res.status_code != 200:
        raise SystemExit(f"error: {url} answered {res.status_code}: {res.text[:300]}")
    return elapsed * 1000


def measure(url: str, real: list[str], repeats: int) -> list[dict]:
    from fastapi.testclient import TestClient

    from registry.web.app import create_app

    rows = []
    client = TestClient(create_app(url))
    with client:
        timed(client, "/static/style.css")   # the app's first request: imports, templates compiled
        cold_nodes = [timed(client, f"/node?name={n}") for n in real[:repeats]]
        served_nodes = [timed(client, f"/node?name={real[i % len(real)]}") for i in range(repeats)]
        rows.append({"page": "node page (every chart)", "target_ms": 100, "cold": cold_nodes, "served": served_nodes})
        table_cold = [timed(client, "/nodes")]
        sorts = ["-memory_gbs", "vcpus", "-price_per_hour", "name", "-fp64_gflops", "-memory_gbs_per_usd"]
        table = [timed(client, f"/nodes?sort={sorts[i % len(sorts)]}&page={1 + i % 7}&priced={'true' if i % 2 else 'false'}")
                 for i in range(repeats)]
        rows.append({"page": "node-type table (50 rows shown, sorted, filtered)", "target_ms": 300,
                     "cold": table_cold, "served": table})
        pred_cold = [timed(client, "/predictions?app=bench-app")]
        preds = [timed(client, f"/predictions?app=bench-app&sort={('time', 'cost', '-coverage')[i % 3]}&page={1 + i % 5}")
                 for i in range(repeats)]
        rows.append({"page": "predictions page (3,000 nodes, 100 shown, chart of 40)", "target_ms": 300,
                     "cold": pred_cold, "served": preds})
    client.app.state.source.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--configs", type=int, default=60, help="configs per bulk node (bench_scale)")
    ap.add_argument("--real", type=int, default=20, help="real-shaped node types, whose pages are timed")
    ap.add_argument("--predicted", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--db", help="registry URL (default: a new DuckDB file in a temporary directory); it must be empty")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"duckdb:///{Path(tmp) / 'serve.duckdb'}"
        t0 = time.perf_counter()
        build(url, args.nodes, args.configs, 0)
        real = add_site_data(url, args.real, args.predicted)
        backend = sa.make_url(url).get_backend_name()
        console.print(f"backend {backend}: {args.nodes + args.real:,} node types, an app predicted on "
                      f"{args.predicted:,}; built in {time.perf_counter() - t0:.0f} s")
        for r in measure(url, real, args.repeats):
            served = statistics.median(r["served"])
            console.print(f"{r['page']}: median {served:.1f} ms (target <= {r['target_ms']} ms: "
                          f"{'met' if served <= r['target_ms'] else 'NOT met'}) over {len(r['served'])} requests; "
                          f"cold (queries run) median {statistics.median(r['cold']):.0f} ms over {len(r['cold'])}")


if __name__ == "__main__":
    main()
