"""A registry for the web tests (no tests here): the report fixtures' three profiled nodes with a
trace, predictions and runs, plus nodes and an app whose names are hostile (markup, brackets,
quotes, 200 characters), prices, and node types imported from another suite (vendor, architecture,
their own figures with units)."""

from __future__ import annotations

import datetime as dt

from test_report_fixtures import SynthNode, add_predictions, add_profile, add_runs, add_trace, build_registry

from registry.db import open_registry, utcnow
from registry.db.write import insert_returning, insert_rows, new_uid
from registry.nodes import ensure_node
from registry.prices import Price, store_price

SCRIPT = "<script>alert(1)</script>"
LONG = "n" * 190 + "-long-name"
HOSTILE = [SCRIPT, "cn[01-04]", "quote\"'s & <b>node</b>", LONG]
APP = "<img src=x onerror=alert(2)>"
IMPORTED = [("aws", "c7g.large", "aarch64", "AWS", "Graviton3", 2, 4.0, 0.0725, 31000.0),
            ("aws", "c7i.large", "x86_64", "Intel", "Sapphire Rapids", 2, 4.0, 0.0893, 36000.0),
            ("gcp", "n2d-standard-2", "x86_64", "AMD", "Zen 3", 2, 8.0, 0.0845, 29000.0)]


def build(url: str) -> dict:
    info = build_registry(url)
    reg = open_registry(url)
    with reg.begin() as conn:
        for i, name in enumerate(HOSTILE):
            add_profile(conn, SynthNode(name, cpus=2 + 2 * (i % 2), seed=10 + i, model=f"CPU {name}"))
        trace = add_trace(conn, APP, SCRIPT)
        add_predictions(conn, trace, "similarity", {SCRIPT: 50.0, "cn[01-04]": 40.0, "alpha": 70.0, LONG: 45.0})
        add_runs(conn, APP, "cn[01-04]", [41.0, 42.5])
        for node, times in (("beta", [99.0, 101.5, 100.2]), ("gamma", [35.1, 35.9])):
            add_runs(conn, "solver", node, times, threads=4)   # at the trace's thread count: what accuracy compares
        info["hostile_trace"] = trace
        day = dt.date(2026, 1, 1)
        for name, price in (("alpha", 0.40), ("beta", 0.20), ("gamma", 0.90), (SCRIPT, 0.30), ("cn[01-04]", 0.25)):
            store_price(conn, Price(name, price * 1.1, "USD", "list 2025", day - dt.timedelta(days=200)))
            store_price(conn, Price(name, price, "USD", "list <2026>", day))
        _imported(conn)
        # as `nodereg match` stores them: each prediction names its base node (the traced one)
        conn.exec_driver_sql("UPDATE predictions SET base_node_id = "
                             "(SELECT t.node_id FROM traces t WHERE t.trace_id = predictions.trace_id)")
    reg.close()
    return info


def _imported(conn) -> None:
    """Types imported from another suite: vendor and CPU columns, one figure with its unit."""
    ub = insert_returning(conn, "microbenchmarks", {"name": "openssl-sha256", "family": "compute", "n_streams": 0,
                                                    "suite": "othersuite"}, "ub_id")
    cid = insert_returning(conn, "ub_configs", {"ub_id": ub, "config_key": "othersuite openssl sha256 16KiB",
                                                "threads": 1, "placement": "none", "params_json": "{}",
                                                "unit": "MB/s", "higher_is_better": True}, "config_id")
    for vendor, name, arch, cpu_vendor, family, vcpus, mem_gib, price, value in IMPORTED:
        node_id = ensure_node(conn, f"{vendor}/{name}", SynthNode(name, cpus=vcpus).inventory())
        conn.exec_driver_sql(
            "UPDATE nodes SET vendor = %s, architecture = %s, cpu_vendor = %s, cpu_family = %s, memory_bytes = %s, "
            "source = 'import' WHERE node_id = %s" if conn.dialect.name == "postgresql" else
            "UPDATE nodes SET vendor = ?, architecture = ?, cpu_vendor = ?, cpu_family = ?, memory_bytes = ?, "
            "source = 'import' WHERE node_id = ?", (vendor, arch, cpu_vendor, family, int(mem_gib * 2**30), node_id))
        prof = insert_returning(conn, "profiles", {"uid": new_uid(), "node_id": node_id, "mode": "import",
                                                   "started_at": utcnow(), "status": "complete"}, "profile_id")
        insert_rows(conn, "profile_runs", [{"profile_id": prof, "config_id": cid, "reps": 1, "median_s": 1 / value,
                                            "value": value, "unstable": False}])
        store_price(conn, Price(f"{vendor}/{name}", price, "USD", "vendor list", dt.date(2026, 1, 1)))
