#!/usr/bin/env python3
"""Scale benchmark: bulk-load a synthetic registry, then time `nodereg match` against it, beside the
same command of a baseline revision (default `main`) on the same registry in the same run.

    python scripts/bench_scale.py --nodes 10000 --configs 300 --reps 0            # issue 30: match < 1 s
    python scripts/bench_scale.py --nodes 1000 --configs 300 --reps 30 --db URL   # issue 8: rows/s per backend
    python scripts/bench_scale.py --db URL --trace FILE --runs 15    # again on a registry built before: no build

The baseline is `git archive REV` unpacked into a temporary folder and run with PYTHONPATH pointing
there. The registry is built at the baseline's schema version; where that is this checkout's too,
the two commands' runs alternate (a shared host's load then moves both alike); else the baseline is
timed first, then the registry is migrated to this checkout's schema and this checkout is timed. Each time is of the
whole command (a process start included), wall clock and CPU (user + system of the process and its
threads): on a shared machine, the CPU seconds move less than the wall clock.

The registry's shape follows real profiles: every node has one profile whose runs cover the same
configs (thesis-style kernels at 1 and all threads) with their repetitions and 'streams' signatures;
the base node's runs also carry 'proc' signatures, as `nodereg profile` records them. Node speeds
differ by a per-node factor per kernel so that rankings are non-trivial. Rows are written with the
same bulk path the importers use (registry.db.write.insert_rows), in one transaction per 100 nodes.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress

from registry.db import open_registry, utcnow
from registry.db.migrate import latest_version, migrate
from registry.db.write import allocate_ids, insert_returning, insert_rows, new_uid
from registry.profile.vectors import store_vectors

PACKED_FROM = 22   # the schema version from which profiles are stored packed (registry.profile.vectors)
KERNELS = ["mbw1c", "mbw1p", "mbw2hc", "triad_like", "fma_like", "chase_like"]
console = Console()


def build(url: str, n_nodes: int, n_configs: int, reps: int, seed: int = 1, schema: int | None = None) -> dict:
    rng = np.random.default_rng(seed)
    reg = open_registry(url, migrate=False)
    migrate(reg.engine, target=schema)
    packs = schema is None or schema >= PACKED_FROM
    rows = 0
    t0 = time.perf_counter()
    with reg.begin() as conn:
        ub_ids = {k: insert_returning(conn, "microbenchmarks", {"name": k, "family": "thesis", "n_streams": 1,
                                                                "description": "synthetic"}, "ub_id")
                  for k in KERNELS}
        per_kernel = n_configs // (len(KERNELS) * 2)
        configs = [(k, t, s) for k in KERNELS for t in (1, 2) for s in range(per_kernel)]
        config_ids = allocate_ids(conn, "ub_configs_id_seq", len(configs))
        insert_rows(conn, "ub_configs", pd.DataFrame({
            "config_id": config_ids, "ub_id": [ub_ids[k] for k, _, _ in configs],
            "config_key": [json.dumps({"ub": k, "threads": t, "size": 2 ** (10 + s)}) for k, t, s in configs],
            "threads": [t for _, t, _ in configs], "placement": "compact",
            "ws_bytes": [8 * 2 ** (10 + s) for _, _, s in configs],
            "params_json": [json.dumps({"size": 2 ** (10 + s)}) for _, _, s in configs]}))
        rows += len(configs)
    base_time = np.array([1e-3 * (1 + s / 4) * (1 + KERNELS.index(k)) / t for k, t, s in configs])
    kernel_idx = np.array([KERNELS.index(k) for k, _, _ in configs])
    size_idx = np.array([s for _, _, s in configs])
    threads = np.array([t for _, t, _ in configs])
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("loading nodes", total=n_nodes)
        for start in range(0, n_nodes, 100):
            batch = range(start, min(n_nodes, start + 100))
            with reg.begin() as conn:
                node_ids = allocate_ids(conn, "nodes_id_seq", len(batch))
                now = utcnow()
                insert_rows(conn, "nodes", pd.DataFrame({
                    "node_id": node_ids, "name": [f"node{i:05d}" for i in batch], "n_cpus": 2, "cores": 2,
                    "cpu_model": "synthetic", "source": "bench", "created_at": now}))
                prof_ids = allocate_ids(conn, "profiles_id_seq", len(batch))
                insert_rows(conn, "profiles", pd.DataFrame({
                    "profile_id": prof_ids, "uid": [new_uid() for _ in batch], "node_id": node_ids,
                    "mode": "bench", "started_at": now, "status": "complete"}))
                run_ids = np.array(allocate_ids(conn, "profile_runs_id_seq", len(batch) * len(configs)))
                speed = rng.lognormal(0, 0.3, size=(len(batch), len(KERNELS)))[:, kernel_idx]
                median = (base_time[None, :] * speed).ravel()
                frame = pd.DataFrame({
                    "run_id": run_ids, "profile_id": np.repeat(prof_ids, len(configs)),
                    "config_id": np.tile(config_ids, len(batch)), "iterations": 1000, "reps": max(reps, 1),
                    "median_s": median, "min_s": median * 0.98, "cv": 0.01, "tpi_us": median * 1e3,
                    "unstable": False})
                insert_rows(conn, "profile_runs", frame)
                if reps:
                    insert_rows(conn, "profile_reps", pd.DataFrame({
                        "run_id": np.repeat(run_ids, reps), "rep": np.tile(np.arange(reps), len(run_ids)),
                        "time_s": np.repeat(median, reps) * rng.lognormal(0, 0.01, len(run_ids) * reps)}))
                sig = pd.DataFrame({"owner_kind": "profile_run", "owner_id": run_ids, "source": "streams",
                                    "metric": "tpi_us", "value": median * 1e3})
                if start == 0:  # the base node: proc signatures like nodereg profile records
                    base_runs = run_ids[: len(configs)]
                    sig = pd.concat([sig] + [pd.DataFrame({
                        "owner_kind": "profile_run", "owner_id": base_runs, "source": "proc", "metric": m,
                        "value": v}) for m, v in (("cpu_util", threads * 0.98),
                                                  ("wss_llc", 2.0 ** size_idx / 64),
                                                  ("kernel", kernel_idx.astype(float)))])
                insert_rows(conn, "signatures", sig)
                if packs:   # as a profile's writer packs it (registry.profile.vectors), from schema 22
                    store_vectors(conn, prof_ids)
                rows += len(batch) * (3 + len(configs) * (2 + reps)) + (len(sig) - len(run_ids))
            progress.advance(task, len(batch))
    if reg.engine.dialect.name == "postgresql":   # statistics, as autovacuum gathers them within a minute of a load
        with reg.engine.connect() as conn:
            conn.execute(sa.text("ANALYZE"))
            conn.commit()
    load_s = time.perf_counter() - t0
    reg.close()
    return {"nodes": n_nodes, "configs": len(configs), "reps": reps, "rows": rows, "load_s": load_s,
            "rows_per_s": rows / load_s}


def add_trace(url: str, workdir: Path) -> Path:
    """A three-phase trace of an app on the base node (node00000), stored and written as a file."""
    from registry.trace import store
    from registry.io.tracefile import Phase, Trace, write_trace

    phases = [Phase(f"p{i}", "auto", 10.0 * i, 10.0 * (i + 1), 1 / 3, 10.0,
                    signature={"proc": {"cpu_util": u, "wss_llc": w, "kernel": k}})
              for i, (u, w, k) in enumerate([(1.96, 4.0, 0.0), (0.98, 0.5, 4.0), (1.96, 64.0, 3.0)])]
    trace = Trace(name="bench-app", node="node00000", host="bench", command=["bench"], exit_status=0,
                  status="ok", wall_s=30.0, interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc"],
                  phases=phases)
    reg = open_registry(url, migrate=False)
    with reg.begin() as conn:
        _, uid = store.save(conn, trace)
    reg.close()
    trace.meta["uid"] = uid
    return write_trace(trace, workdir / "bench-app.trace.json")


def time_match(url: str, trace_file: Path, runs: int = 3, code: Path | None = None) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of each run of the whole `nodereg match` command; `code`: the
    checkout to run (default: this one)."""
    env = {**os.environ, "PYTHONPATH": str(code)} if code else None
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        # from the checkout's own root: `python -m` puts the working directory first on sys.path, so
        # from this one the baseline would run this checkout's code
        # a DuckDB file as users name it, by its path (the URL form is read through SQLAlchemy)
        db = url.removeprefix("duckdb:///") if url.startswith("duckdb:///") else url
        res = subprocess.run([sys.executable, "-m", "registry", "--db", db, "match", str(trace_file), "--json"],
                             capture_output=True, text=True, env=env, cwd=str(code or Path(__file__).resolve().parents[1]))
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if res.returncode:
            raise SystemExit(f"match failed{' (baseline)' if code else ''}: {res.stderr.strip()}")
    return walls, cpus


def baseline_checkout(rev: str, into: Path) -> tuple[Path, int]:
    """The tree of revision `rev`, unpacked into `into`, and its latest schema version."""
    repo = Path(__file__).resolve().parents[1]
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    versions = [int(f.name[:4]) for f in (into / "schema" / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")]
    return into, max(versions)


def _shape(url: str) -> dict:
    """What a registry built before holds (nodes, configs), as `build` reports it."""
    reg = open_registry(url, migrate=False)
    with reg.connect() as conn:
        nodes, configs = (conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar() for t in ("nodes", "ub_configs"))
    reg.close()
    return {"nodes": nodes, "configs": configs, "reps": 0}


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--configs", type=int, default=300)
    ap.add_argument("--reps", type=int, default=0, help="repetitions stored per run (issue 8 uses 30)")
    ap.add_argument("--db", help="registry URL (default: a new DuckDB file in a temporary directory)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each `nodereg match`")
    ap.add_argument("--baseline", default="main", help="git revision timed beside this checkout ('none': skip)")
    ap.add_argument("--trace", type=Path, help="time against the registry --db names as it is (one this script built "
                                               "before, at both checkouts' schema), matching this trace file: no build")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.trace and not args.db:
        raise SystemExit("--trace needs --db: the registry this script built before")
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"duckdb:///{Path(tmp) / 'scale.duckdb'}"
        code, schema = (None, None) if args.baseline == "none" else baseline_checkout(args.baseline, Path(tmp) / "base")
        if args.trace:
            stats = {**_shape(url), "reused": True}
            trace_file = args.trace
        else:
            stats = build(url, args.nodes, args.configs, args.reps, schema=schema)
            trace_file = add_trace(url, Path(tmp))
        timed = {}
        if code is not None and (schema == latest_version() or args.trace):
            # one schema for both: their runs alternate, so that the host's load moves both alike
            for _ in range(args.runs):
                for name, checkout in ((f"baseline {args.baseline}", code), ("this checkout", None)):
                    wall, cpu = time_match(url, trace_file, 1, checkout)
                    got = timed.setdefault(name, ([], []))
                    got[0].extend(wall), got[1].extend(cpu)
        else:
            if code is not None:
                timed[f"baseline {args.baseline}"] = time_match(url, trace_file, args.runs, code)
                t0 = time.perf_counter()
                reg = open_registry(url, migrate=False)
                migrate(reg.engine)   # from schema PACKED_FROM on, this packs every profile (registry.profile.vectors)
                reg.close()
                stats["migration_s"] = time.perf_counter() - t0
            timed["this checkout"] = time_match(url, trace_file, args.runs)
        stats.update({"backend": sa.make_url(url.replace("postgresql://", "postgresql+psycopg://")).get_backend_name(),
                      "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
                      "match": {name: {"wall_s": w, "cpu_s": c, "median_wall_s": _median(w), "median_cpu_s": _median(c)}
                                for name, (w, c) in timed.items()}})
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        built = "built before (--trace)" if stats.get("reused") else \
            f"{stats['reps']} reps = {stats['rows']:,} rows in {stats['load_s']:.1f} s ({stats['rows_per_s']:,.0f} rows/s)"
        console.print(f"backend {stats['backend']}: {stats['nodes']} nodes x {stats['configs']} configs, {built}; "
                      f"load average {stats['load_average']:.1f}")
        if "migration_s" in stats:
            console.print(f"migrating the registry to this checkout's schema: {stats['migration_s']:.1f} s")
        for name, m in stats["match"].items():
            console.print(f"nodereg match, {name} (whole command, {args.runs} runs): median {m['median_wall_s']:.2f} s "
                          f"wall (min {min(m['wall_s']):.2f}, max {max(m['wall_s']):.2f}), "
                          f"median {m['median_cpu_s']:.2f} s CPU")


if __name__ == "__main__":
    main()
