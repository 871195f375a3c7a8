#!/usr/bin/env python3
"""Fleet scale on paper: the rows and bytes one host's profile adds to a registry, and how fast a
shared registry takes them (docs/fleet.md quotes its output).

    pg_virtualenv -t python scripts/bench_fleet.py --hosts 16 --writers 8   # PostgreSQL (PGHOST, ...) and DuckDB
    python scripts/bench_fleet.py --hosts 8                                 # DuckDB only

The profiles are synthetic but shaped as `nodereg profile` (default mode) stores them on this
machine: every configuration of the default plan, with the default policy's fewest repetitions,
the 'streams' signature of each run and the 10 'proc' metrics of each signed representative. Each
is a host of one node type, stored as a fleet's tasks store them (registry.profile.profiler.save:
one transaction per profile), by W concurrent writers on PostgreSQL and one on DuckDB (a file
admits one writer). Bytes per profile: the growth of the database (pg_database_size; the DuckDB
file after a checkpoint) over those hosts, after a first profile has added the shared config rows.
"""

import argparse
import dataclasses
import os
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sqlalchemy as sa

from registry.db import open_registry, utcnow
from registry.db.write import new_uid
from registry.profile import profiler, signatures
from registry.profile.runner import Measurement
from registry.profile.stats import RepPolicy
from registry.profile.store import ProfileRecord

TABLES = ("profiles", "profile_runs", "profile_reps", "signatures", "ub_configs", "ub_streams", "nodes")
PROC = ("cpu_util", "threads_active", "rss_mb", "wss_mb", "wss_llc", "minflt_rate", "majflt_rate", "ctxsw_rate",
        "read_mbs", "write_mbs")


def plan(mode: str) -> tuple[profiler.Prepared, int]:
    prep = profiler.prepare(profiler.ProfileOptions("bench", mode))
    return prep, RepPolicy.for_mode(mode).min_reps


def record(prep: profiler.Prepared, reps: int, host: str, mode: str) -> ProfileRecord:
    cpu = prep.inventory.cpus[0]
    ms = [Measurement(c, times=[1e-3 * (1 + i / 100) for i in range(reps)], iterations=1000, passes=1, checksum=1.0,
                      bytes_per_rep=1e6 if c.ub.family in ("bandwidth", "thesis") else 0.0,
                      flops_per_rep=1e6 if c.ub.family == "compute" else 0.0, cpus_used=(cpu,), unstable=False)
          for c in prep.plan.configs]
    sigs = {c.key: {"proc": {m: 1.0 + i for i, m in enumerate(PROC)}}
            for c in signatures.representatives(prep.plan.configs)}
    now = utcnow()
    return ProfileRecord("fleet-bench", dataclasses.replace(prep.inventory, hostname=host), mode, ms, now, now, 60.0,
                         "bench", None, None, uid=new_uid(), signatures=sigs)


def counts(reg) -> dict[str, int]:
    with reg.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}


def size(reg, path: Path | None) -> int:
    with reg.engine.begin() as conn:
        if path is None:
            return conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
        conn.execute(sa.text("CHECKPOINT"))
    return path.stat().st_size


def run(url: str, path: Path | None, prep, reps: int, hosts: int, writers: int, mode: str) -> dict:
    reg = open_registry(url)
    profiler.save(reg, record(prep, reps, "warm-up", mode))   # the shared node, uB and config rows
    before_rows, before_bytes = counts(reg), size(reg, path)
    records = [record(prep, reps, f"cn{i:04d}", mode) for i in range(hosts)]
    lock = threading.Lock() if path is not None else None       # DuckDB: one writer at a time

    def save(r):
        if lock is None:
            return profiler.save(reg, r)
        with lock:
            return profiler.save(reg, r)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(writers if lock is None else 1) as pool:
        list(pool.map(save, records))
    wall = time.perf_counter() - t0
    after_rows, after_bytes = counts(reg), size(reg, path)
    reg.close()
    rows = {t: (after_rows[t] - before_rows[t]) / hosts for t in TABLES}
    return {"rows": rows, "bytes": (after_bytes - before_bytes) / hosts, "wall_s": wall,
            "profiles_per_s": hosts / wall, "rows_per_s": sum(rows.values()) * hosts / wall}


def pg_database():
    """A fresh PostgreSQL database on the server libpq's environment names (pg_virtualenv), or None."""
    if not os.environ.get("PGHOST"):
        return None, None
    auth = os.environ.get("PGUSER", "postgres")
    server = f"postgresql+psycopg://{auth}@{os.environ['PGHOST']}:{os.environ.get('PGPORT', '5432')}"
    name = f"nodereg_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    return f"{server}/{name}", lambda: admin.connect().execute(sa.text(f"DROP DATABASE {name} WITH (FORCE)"))


def report(name: str, res: dict, hosts: int, writers: int, profile_s: float) -> None:
    rows = res["rows"]
    print(f"{name}: {hosts} host profiles by {writers} writer(s) in {res['wall_s']:.1f} s: "
          f"{res['profiles_per_s']:.2f} profiles/s, {res['rows_per_s']:,.0f} rows/s")
    print("  rows per profile: " + ", ".join(f"{t} {n:,.0f}" for t, n in rows.items() if n) +
          f" (total {sum(rows.values()):,.0f})")
    print(f"  bytes per profile: {res['bytes'] / 2**20:.2f} MiB")
    load_s = 1000 / res["profiles_per_s"]
    print(f"  1,000 hosts: {1000 * res['bytes'] / 2**30:.1f} GiB, {1000 * sum(rows.values()):,.0f} rows; "
          f"storing them takes {load_s:,.0f} s of registry time, against {profile_s:.0f} s of profiling "
          f"per host (in parallel over the hosts Slurm runs at once)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--writers", type=int, default=8, help="concurrent writers on PostgreSQL")
    ap.add_argument("--mode", default="default", choices=["quick", "default", "full"])
    ap.add_argument("--profile-s", type=float, default=60.0,
                    help="wall time of one profile in --mode (default: 60 s, docs/microbench.md)")
    args = ap.parse_args()
    prep, reps = plan(args.mode)
    print(f"{args.mode} plan on this machine: {len(prep.plan.configs)} configurations, {reps} repetitions each, "
          f"{len(signatures.representatives(prep.plan.configs))} signed representatives")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        report("DuckDB", run(f"duckdb:///{path}", path, prep, reps, args.hosts, 1, args.mode), args.hosts, 1,
               args.profile_s)
    url, drop = pg_database()
    if url:
        try:
            report("PostgreSQL", run(url, None, prep, reps, args.hosts, args.writers, args.mode), args.hosts,
                   args.writers, args.profile_s)
        finally:
            drop()
    else:
        print("PostgreSQL: skipped (no PGHOST; run under pg_virtualenv)")


if __name__ == "__main__":
    main()
