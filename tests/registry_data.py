"""A small but complete registry content, written through the same write helpers the code uses.

It is input for tests of generic machinery (bundles, node removal, views): every table gets rows
with distinct values, so a lost or mangled column shows up in comparisons. Below it, profiles whose
node speeds are known by construction and a three-phase trace, for matching (tests/test_match.py,
tests/test_fuzz_readers.py).
"""

import json

import sqlalchemy as sa

from registry.db import utcnow
from registry.db.write import insert_returning, insert_rows, new_uid
from registry.inventory import Cache, Inventory
from registry.nodes import ensure_node
from registry.io.tracefile import Phase, Trace


def fake_inventory(cpus=(0, 1), model="Test CPU 9000") -> Inventory:
    return Inventory(hostname="testhost", cpu_model=model, architecture="x86_64", cpus=list(cpus),
                     cpu_count=len(cpus), cpu_list=",".join(map(str, cpus)), restricted=False, sockets=1,
                     cores=len(cpus), threads_per_core=1, numa_nodes=1, memory_bytes=8 * 2**30, max_mhz=3000.0,
                     kernel="6.1", os="TestOS", compiler="cc 12", isa_flags=["avx2"],
                     caches=[Cache(1, "Data", 32768, 64, 1, len(cpus)), Cache(2, "Unified", 2**20, 64, 1, len(cpus)),
                             Cache(3, "Unified", 2**25, 64, len(cpus), 1)])


def populate(conn, node="n1", app="app1", model="Test CPU 9000", tpi=0.01) -> dict:
    """One node with a profile (2 configs x 3 reps), a traced app with 2 phases, runs, a model, a prediction."""
    now = utcnow()
    node_id = ensure_node(conn, node, fake_inventory(model=model))
    ub_id = conn.execute(sa.text("SELECT ub_id FROM microbenchmarks WHERE name='mbw1c'")).scalar()
    if ub_id is None:
        ub_id = insert_returning(conn, "microbenchmarks", {"name": "mbw1c", "family": "thesis", "n_streams": 1,
                                                           "description": "strided read, shared"}, "ub_id")
    config_ids = []
    for size in (4096, 16384):
        key = f"mbw1c size={size} stride=8 threads=2 placement=compact"
        cid = conn.execute(sa.text("SELECT config_id FROM ub_configs WHERE config_key=:k"),
                           {"k": key}).scalar()
        if cid is None:
            cid = insert_returning(conn, "ub_configs", {"ub_id": ub_id, "config_key": key, "threads": 2,
                                                        "placement": "compact", "ws_bytes": size * 8,
                                                        "params_json": json.dumps({"size": size})}, "config_id")
            insert_rows(conn, "ub_streams", [{"config_id": cid, "stream_index": 0, "size_elems": size,
                                              "stride_bytes": 8, "dtype": "f64", "elem_bytes": 8, "access": "C",
                                              "pattern": "seq"}])
        config_ids.append(cid)
    profile_id = insert_returning(conn, "profiles", {"uid": new_uid(), "node_id": node_id, "mode": "quick",
                                                     "started_at": now, "finished_at": now, "duration_s": 1.5,
                                                     "tool_version": "0.1.0", "compiler": "cc 12", "cflags": "-O3",
                                                     "host": "testhost", "cpu_list": None, "status": "complete"},
                                  "profile_id")
    for i, cid in enumerate(config_ids):
        run_id = insert_returning(conn, "profile_runs", {
            "profile_id": profile_id, "config_id": cid, "iterations": 1000 * (i + 1), "reps": 3,
            "median_s": tpi * (i + 1), "min_s": tpi * (i + 1) * 0.9, "cv": 0.01 * (i + 1), "tpi_us": tpi * (i + 2),
            "bytes_per_rep": 8e3, "flops_per_rep": None, "bandwidth_gbs": 12.5 + i, "gflops": None,
            "latency_ns": None, "checksum": 42.0 + i, "unstable": i == 1}, "run_id")
        insert_rows(conn, "profile_reps", [{"run_id": run_id, "rep": r, "time_s": tpi * (i + 1) + r * 1e-4}
                                           for r in range(3)])
        insert_rows(conn, "signatures", [{"owner_kind": "profile_run", "owner_id": run_id, "source": "streams",
                                          "metric": "tpi_us", "value": tpi * (i + 2)}])
    app_id = conn.execute(sa.text("SELECT app_id FROM apps WHERE name=:n"), {"n": app}).scalar()
    if app_id is None:
        app_id = insert_returning(conn, "apps", {"name": app, "description": None, "created_at": now}, "app_id")
    trace_id = insert_returning(conn, "traces", {
        "uid": new_uid(), "app_id": app_id, "node_id": node_id, "command_json": json.dumps(["./app", "--n", "3"]),
        "exit_status": 0, "status": "ok", "wall_s": 10.0, "threads": None, "interval_s": 0.1, "source": "trace",
        "started_at": now, "meta_json": None}, "trace_id")
    insert_rows(conn, "trace_samples", [{"trace_id": trace_id, "t_s": t / 10, "metric": m, "value": t * 1.5}
                                        for t in range(5) for m in ("cpu_util", "rss_mb")])
    for idx, (start, end) in enumerate([(0.0, 4.0), (4.0, 10.0)]):
        phase_id = insert_returning(conn, "phases", {
            "trace_id": trace_id, "idx": idx, "name": f"p{idx}", "method": "auto", "start_s": start, "end_s": end,
            "weight": (end - start) / 10, "time_s": end - start, "iterations": None, "calls": 1}, "phase_id")
        insert_rows(conn, "phase_streams", [{"phase_id": phase_id, "stream_index": 0, "size_elems": 4000,
                                             "stride_bytes": 8, "dtype": "f64", "elem_bytes": 8, "access": "P",
                                             "pattern": "seq"}])
        insert_rows(conn, "signatures", [{"owner_kind": "phase", "owner_id": phase_id, "source": "proc",
                                          "metric": "cpu_util", "value": 1.5 + idx}])
    insert_rows(conn, "runs", [{"uid": new_uid(), "app_id": app_id, "node_id": node_id, "threads": 2,
                                "time_s": 10.0 + r, "source": "cli", "created_at": now} for r in range(3)])
    insert_rows(conn, "models", [{"uid": new_uid(), "name": "downey", "version": "1", "scope": f"app={app}",
                                  "params_json": json.dumps({"A": 12.0}), "fitted_at": now}])
    insert_rows(conn, "predictions", [{"uid": new_uid(), "trace_id": trace_id, "app_id": app_id, "node_id": node_id,
                                       "model_name": "similarity", "model_version": "1", "threads": 2,
                                       "predicted_s": 9.5, "low_s": 9.0, "high_s": 10.0, "node_rank": 1,
                                       "coverage": 1.0, "explanation_json": "{}", "created_at": now}])
    return {"node_id": node_id, "trace_id": trace_id, "app_id": app_id, "profile_id": profile_id}


# node -> (compute GFLOP/s per core, memory GB/s at 1 thread, memory GB/s at 2 threads)
SPEEDS = {"b": (10.0, 8.0, 12.0), "fast": (20.0, 12.0, 18.0), "one": (10.0, 8.4, None), "quad": (10.0, 8.0, 12.0),
          "wide": (10.0, 8.0, 12.0)}
# (kernel, family, ws_level, non-temporal stores): the memory triad also with streaming stores, which
# scale differently (x1.5 on two threads) and carry no phase-like signature, as in real profiles
KERNELS = [("peak_fma", "compute", None, 0), ("triad", "bandwidth", 0, 0), ("triad", "bandwidth", 0, 1),
           ("load", "bandwidth", 2, 0)]


def profile_at_speeds(conn, node, cpus, base):
    """A profile of `node` whose speeds are SPEEDS[node]; the base node's runs carry proc signatures."""
    node_id = ensure_node(conn, node, fake_inventory(cpus=tuple(range(cpus))))
    prof = insert_returning(conn, "profiles", {"uid": new_uid(), "node_id": node_id, "mode": "test",
                                               "started_at": utcnow(), "status": "complete"}, "profile_id")
    fma, bw1, bw2 = SPEEDS[node]
    for ub, family, level, nt in KERNELS:
        ub_id = conn.exec_driver_sql(f"SELECT ub_id FROM microbenchmarks WHERE name = '{ub}'").scalar() or \
            insert_returning(conn, "microbenchmarks", {"name": ub, "family": family, "n_streams": 1}, "ub_id")
        for threads in range(1, cpus + 1):
            key = json.dumps({"ub": ub, "threads": threads, "node_cpus": cpus, "nt": nt})  # sizes differ per node
            cid = insert_returning(conn, "ub_configs", {"ub_id": ub_id, "config_key": f"{node}:{key}",
                                                        "threads": threads, "placement": "compact",
                                                        "params_json": "{}" if family == "compute" else
                                                        json.dumps({"n": 1000 * cpus, "nt": nt})}, "config_id")
            if family == "compute":
                work = {"flops_per_rep": 1e9 * threads, "median_s": 1e9 / (fma * 1e9)}
            else:
                bw = (bw1, bw2)[min(threads, 2) - 1] * (3.0 if level == 2 else 1.0)  # saturated beyond 2
                bw *= 1.5 if nt and threads > 1 else 1.0
                work = {"bytes_per_rep": 1e9, "median_s": 1.0 / bw}
            run = insert_returning(conn, "profile_runs", {"profile_id": prof, "config_id": cid, "reps": 3,
                                                          "unstable": False, **work}, "run_id")
            sigs = [("streams", "ws_level", level)] if level is not None else []
            if base and not nt:
                sigs += [("proc", "cpu_util", threads * 0.99), ("proc", "wss_llc", {None: 0.01, 0: 8.0, 2: 0.2}[level])]
            insert_rows(conn, "signatures", [{"owner_kind": "profile_run", "owner_id": run, "source": s,
                                              "metric": m, "value": float(v)} for s, m, v in sigs])


def three_phase_trace(node="b"):
    """An app traced on `node`: compute 10 s, memory 10 s, sleep 1 s."""
    def phase(name, start, util, wss):
        return Phase(name, "auto", start, start + 10, 10 / 21, 10.0,
                     signature={"proc": {"cpu_util": util, "wss_llc": wss}})
    phases = [phase("compute", 0, 1.98, 0.01), phase("memory", 10, 1.98, 8.0),
              Phase("sleep", "auto", 20, 21, 1 / 21, 1.0, signature={"proc": {"cpu_util": 0.01}})]
    return Trace(name="app", node=node, host="h", command=["app"], exit_status=0, status="ok", wall_s=21.0,
                 interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc"], phases=phases)


def three_node_registry(db_url, trace=None) -> None:
    """Nodes b (the base, 2 CPUs), fast (2) and one (1) profiled at SPEEDS, and `trace` (default:
    three_phase_trace) stored on b: the registry of tests/test_match.py."""
    from registry.db import open_registry
    from registry.trace import store

    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2), ("one", 1)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        store.save(conn, trace or three_phase_trace())
    reg.close()
