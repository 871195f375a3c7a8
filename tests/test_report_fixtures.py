"""Synthetic registries for the report tests (this module holds builders, no tests).

The shapes are those of real nodes: bandwidth per thread drops as the working set outgrows each
cache level (smooth steps around the capacities the node's inventory states, memory bandwidth
saturating with threads), pointer-chase latency climbs at the same boundaries, compute throughput
scales with threads, a few points are unstable. Traces have phases with distinct behaviour
(read input, compute, memory sweep, write output), per-phase signatures, and predictions from two
models with corredor-style explanations; measured runs exist for some nodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa

from registry.db import open_registry, utcnow
from registry.db.write import allocate_ids, insert_returning, insert_rows, new_uid
from registry.inventory import Cache, Inventory
from registry.nodes import ensure_node

KERNELS = {"triad": 1.0, "copy": 0.95, "scale": 0.93, "add": 1.02, "load": 1.3, "store": 0.7}
FAMILY = {**{k: "bandwidth" for k in KERNELS}, "chase": "latency", "peak_fma": "compute",
          "scalar_fp64": "compute", "int_ops": "compute", "mbw1c": "thesis", "mbw2hc": "thesis"}


@dataclass
class SynthNode:
    name: str
    cpus: int = 4
    l1: int = 32 * 1024            # per core
    l2: int = 1024 * 1024          # per core
    l3: int = 16 * 1024 * 1024     # shared by all
    bw: tuple = (110.0, 55.0, 28.0, 11.0)     # GB/s per thread in L1, L2, L3, memory
    mem_max: float = 19.0                      # memory bandwidth of the whole node
    lat: tuple = (1.3, 4.4, 16.0, 92.0)        # ns
    fma: float = 48.0                          # GFLOP/s per thread
    model: str = "Synthetic Xeon 4C"
    seed: int = 1

    def inventory(self) -> Inventory:
        cpus = list(range(self.cpus))
        return Inventory(hostname="synthhost", cpu_model=self.model, architecture="x86_64", cpus=cpus,
                         cpu_count=self.cpus, cpu_list=f"0-{self.cpus - 1}", restricted=False, sockets=1,
                         cores=self.cpus, threads_per_core=1, numa_nodes=1, memory_bytes=32 * 2**30, max_mhz=3400.0,
                         kernel="6.1", os="TestOS", compiler="gcc 12.2", isa_flags=["avx2", "fma"],
                         caches=[Cache(1, "Data", self.l1, 64, 1, self.cpus),
                                 Cache(1, "Instruction", self.l1, 64, 1, self.cpus),
                                 Cache(2, "Unified", self.l2, 64, 1, self.cpus),
                                 Cache(3, "Unified", self.l3, 64, self.cpus, 1)])

    def capacities(self, threads: int) -> list[float]:
        return [self.l1 * threads, self.l2 * threads, float(self.l3)]

    def _beyond(self, ws: float, threads: int) -> list[float]:
        """Share of accesses that miss each level: smooth steps around the capacities."""
        return [1 / (1 + (cap / ws) ** 6) for cap in self.capacities(threads)]

    def bandwidth(self, ws: float, threads: int, factor: float) -> float:
        per_level = [min(b * threads, self.mem_max) if i == 3 else b * threads for i, b in enumerate(self.bw)]
        inv = 1 / per_level[0]
        for k, p in enumerate(self._beyond(ws, threads)):
            inv += p * (1 / per_level[k + 1] - 1 / per_level[k])
        return factor / inv

    def latency(self, ws: float) -> float:
        lat = self.lat[0]
        for k, p in enumerate(self._beyond(ws, 1)):
            lat += p * (self.lat[k + 1] - self.lat[k])
        return lat


def ensure_ub(conn, name: str) -> int:
    # .all(), not .scalar(): DuckDB refuses the bulk insert that follows while a result is half-read
    found = conn.execute(sa.text("SELECT ub_id FROM microbenchmarks WHERE name = :n"), {"n": name}).all()
    if found:
        return found[0][0]
    return insert_returning(conn, "microbenchmarks", {"name": name, "family": FAMILY[name],
                                                      "n_streams": 2 if name.startswith("mbw2") else 1,
                                                      "description": f"synthetic {name}"}, "ub_id")


def _configs(conn, specs: list[dict]) -> dict[str, int]:
    """config_key -> config_id, inserting missing configs (and their first stream) in bulk."""
    keys = [s["config_key"] for s in specs]
    found = {r[0]: r[1] for r in conn.execute(sa.text("SELECT config_key, config_id FROM ub_configs"))}
    missing = [s for s in specs if s["config_key"] not in found]
    ids = allocate_ids(conn, "ub_configs_id_seq", len(missing))
    ub_ids = {name: ensure_ub(conn, name) for name in {s["ub"] for s in missing}}
    rows, streams = [], []
    for cid, s in zip(ids, missing):
        rows.append({"config_id": cid, "ub_id": ub_ids[s["ub"]], "config_key": s["config_key"],
                     "threads": s["threads"], "placement": s["placement"], "ws_bytes": s["ws_bytes"],
                     "params_json": json.dumps({"stride": s["stride"]})})
        streams.append({"config_id": cid, "stream_index": 0, "size_elems": int((s["ws_bytes"] or 8) // 8),
                        "stride_bytes": s["stride"], "dtype": "f64", "elem_bytes": 8, "access": "C",
                        "pattern": "random" if s["ub"] == "chase" else "seq"})
        found[s["config_key"]] = cid
    insert_rows(conn, "ub_configs", rows)
    insert_rows(conn, "ub_streams", streams)
    return {k: found[k] for k in keys}


def profile_points(node: SynthNode) -> list[dict]:
    """Every measured point of the node's profile: ub, threads, placement, ws_bytes, stride and results."""
    rng = np.random.default_rng(node.seed)
    sizes = [2.0 ** (k / 2) for k in range(28, 55)]          # 16 KiB .. 128 MiB, two points per octave
    pts = []

    def noise():
        return float(rng.lognormal(0, 0.02))

    for threads in range(1, node.cpus + 1):
        for kernel, factor in KERNELS.items():
            for placement in ("compact", "scatter") if kernel == "triad" and threads > 1 else ("compact",):
                for ws in sizes:
                    bw = node.bandwidth(ws, threads, factor) * noise() * (1.04 if placement == "scatter" else 1)
                    pts.append({"ub": kernel, "threads": threads, "placement": placement, "ws_bytes": int(ws),
                                "stride": 8, "bandwidth_gbs": bw, "median_s": ws * 10 / (bw * 1e9)})
        for kernel, per_thread in (("peak_fma", node.fma), ("scalar_fp64", node.fma / 8), ("int_ops", node.fma / 5)):
            g = per_thread * threads * (0.99 ** (threads - 1)) * noise()
            pts.append({"ub": kernel, "threads": threads, "placement": "compact", "ws_bytes": 0,  # as the profiler
                        "stride": 8, "gflops": g, "median_s": 1e9 / (g * 1e9)})
        for kernel, iter_bytes in (("mbw1c", 64), ("mbw2hc", 96)):
            for stride in (8, 256):
                for ws in sizes[::2]:
                    bw = node.bandwidth(ws, threads, 1.0) / (1 if stride == 8 else 3)
                    tpi = iter_bytes * threads / (bw * 1e3) * noise()
                    pts.append({"ub": kernel, "threads": threads, "placement": "compact", "ws_bytes": int(ws),
                                "stride": stride, "tpi_us": tpi, "median_s": tpi * 1e-6 * 1000})
    for ws in [2.0 ** (k / 2) for k in range(24, 59)]:          # 4 KiB .. 512 MiB
        lat = node.latency(ws) * noise()
        pts.append({"ub": "chase", "threads": 1, "placement": "none", "ws_bytes": int(ws), "stride": 64,
                    "latency_ns": lat, "median_s": lat * 1e-9 * 1e6})
    for i, p in enumerate(pts):
        p["unstable"] = i % 97 == 13
        p["config_key"] = (f"{p['ub']} ws={p['ws_bytes']} stride={p['stride']} threads={p['threads']} "
                           f"placement={p['placement']}")
    return pts


def add_profile(conn, node: SynthNode) -> int:
    node_id = ensure_node(conn, node.name, node.inventory())
    now = utcnow()
    pts = profile_points(node)
    ids = _configs(conn, pts)
    profile_id = insert_returning(conn, "profiles", {
        "uid": new_uid(), "node_id": node_id, "mode": "default", "started_at": now, "finished_at": now,
        "duration_s": 212.0, "tool_version": "0.1.0", "compiler": "gcc 12.2", "cflags": "-O3 -march=native",
        "host": "synthhost", "cpu_list": None, "status": "complete"}, "profile_id")
    insert_rows(conn, "profile_runs", [{
        "profile_id": profile_id, "config_id": ids[p["config_key"]], "iterations": 1000, "reps": 7,
        "median_s": p["median_s"], "min_s": p["median_s"] * 0.98, "cv": 0.12 if p["unstable"] else 0.01,
        "tpi_us": p.get("tpi_us"), "bytes_per_rep": None, "flops_per_rep": None,
        "bandwidth_gbs": p.get("bandwidth_gbs"), "gflops": p.get("gflops"), "latency_ns": p.get("latency_ns"),
        "checksum": 1.0, "unstable": p["unstable"]} for p in pts])
    return node_id


# a traced application: (name, start, end, cpu_util, rss_mb, wss_mb, read_mb_s, write_mb_s)
PHASES = [("read input", 0.0, 6.0, 0.9, 300.0, 40.0, 180.0, 0.0),
          ("compute", 6.0, 34.0, 3.9, 800.0, 2.0, 0.0, 0.0),
          ("memory sweep", 34.0, 52.0, 3.6, 1900.0, 1500.0, 0.0, 0.0),
          ("write output", 52.0, 60.0, 1.0, 1900.0, 20.0, 0.0, 150.0)]
PROC = ("cpu_util", "rss_mb", "wss_mb", "read_mb_s", "write_mb_s")


def add_trace(conn, app: str, node: str, interval: float = 0.5, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    now = utcnow()
    node_id = conn.execute(sa.text("SELECT node_id FROM nodes WHERE name = :n"), {"n": node}).scalars().one()
    app_id = next(iter(conn.execute(sa.text("SELECT app_id FROM apps WHERE name = :n"), {"n": app}).scalars().all()),
                  None)
    if app_id is None:
        app_id = insert_returning(conn, "apps", {"name": app, "description": None, "created_at": now}, "app_id")
    uid = new_uid()
    wall = PHASES[-1][2]
    trace_id = insert_returning(conn, "traces", {
        "uid": uid, "app_id": app_id, "node_id": node_id, "command_json": json.dumps([f"./{app}", "--size", "big"]),
        "exit_status": 0, "status": "ok", "wall_s": wall, "threads": 4, "interval_s": interval, "source": "trace",
        "started_at": now, "meta_json": None}, "trace_id")
    samples = []
    for t in np.arange(interval, wall + 1e-9, interval):
        ph = next(p for p in PHASES if p[1] < t <= p[2] + 1e-9)
        values = dict(zip(PROC, ph[3:]))
        values["rss_mb"] = ph[4] * min(1.0, (t - ph[1]) / 3 + 0.6)
        values["threads"] = 5.0
        values["minflt_per_s"] = 50.0 + (3e4 if ph[0] == "memory sweep" else 0)
        values["ctxsw_per_s"] = 200.0 + 40 * rng.random()
        for m, v in values.items():
            samples.append({"trace_id": trace_id, "t_s": float(t), "metric": m,
                            "value": float(v * rng.lognormal(0, 0.04)) if v else 0.0})
    insert_rows(conn, "trace_samples", samples)
    for idx, (name, start, end, *vals) in enumerate(PHASES):
        phase_id = insert_returning(conn, "phases", {
            "trace_id": trace_id, "idx": idx, "name": name, "method": "marker", "start_s": start, "end_s": end,
            "weight": (end - start) / wall, "time_s": end - start, "iterations": 1000.0 * (idx + 1), "calls": 1},
            "phase_id")
        sig = [{"owner_kind": "phase", "owner_id": phase_id, "source": "proc", "metric": m, "value": v}
               for m, v in zip(PROC, vals)]
        sig.append({"owner_kind": "phase", "owner_id": phase_id, "source": "counters", "metric": "ipc",
                    "value": 2.1 if name == "compute" else 0.6})
        insert_rows(conn, "signatures", sig)
    return {"trace_id": trace_id, "app_id": app_id, "uid": uid}


def explanation(model: str) -> str:
    """A corredor-style explanation (winner + candidates with their index) or the one `nodereg match`
    stores (per phase: matches with their similarity): the shapes the trace report reads."""
    def config(ub, i, scale):
        return f"{ub} ws={2**20 * scale * (i + 1)} stride=8 threads=4 placement=compact"
    if model == "corredor":
        phases = [{"phase": name, "winner": config("mbw1c", i, 1), "index": 118.0 - 5 * i,
                   "candidates": [{"config": config("mbw1c", i, 1), "index": 118.0 - 5 * i},
                                  {"config": config("mbw2hc", i, 2), "index": 101.0 - 5 * i}]}
                  for i, (name, *_) in enumerate(PHASES)]
    else:
        phases = [{"name": name, "mode": "project", "predicted_s": 10.0,
                   "matches": [{"config": config("triad", i, 4), "similarity": 0.91 - 0.1 * i, "threads": 4},
                               {"config": config("mbw2hc", i, 2), "similarity": 0.62, "threads": 4}]}
                  for i, (name, *_) in enumerate(PHASES)]
        return json.dumps({"base": "alpha", "phases": phases})      # as registry.match.project stores it
    return json.dumps({"model": model, "base_node": "alpha", "coverage": 0.93, "phases": phases})


def add_predictions(conn, trace: dict, model: str, per_node: dict[str, float], spread: float = 0.12) -> None:
    now = utcnow()
    ranked = sorted(per_node, key=per_node.get)
    rows = []
    for node, pred in per_node.items():
        node_id = conn.execute(sa.text("SELECT node_id FROM nodes WHERE name = :n"), {"n": node}).scalar_one()
        rows.append({"uid": new_uid(), "trace_id": trace["trace_id"], "app_id": trace["app_id"], "node_id": node_id,
                     "model_name": model, "model_version": "1", "threads": None, "predicted_s": pred,
                     "low_s": pred * (1 - spread), "high_s": pred * (1 + spread * 1.5),
                     "node_rank": ranked.index(node) + 1, "coverage": 0.93, "explanation_json": explanation(model),
                     "created_at": now})
    insert_rows(conn, "predictions", rows)


def add_runs(conn, app: str, node: str, times: list[float], threads: int | None = None) -> None:
    ids = conn.execute(sa.text("SELECT a.app_id, n.node_id FROM apps a, nodes n WHERE a.name = :a AND n.name = :n"),
                       {"a": app, "n": node}).one()
    insert_rows(conn, "runs", [{"uid": new_uid(), "app_id": ids[0], "node_id": ids[1], "threads": threads,
                                "time_s": t, "source": "cli", "created_at": utcnow()} for t in times])


NODES = [SynthNode("alpha"),
         SynthNode("beta", cpus=2, l2=512 * 1024, l3=8 * 2**20, bw=(90.0, 45.0, 22.0, 9.0), mem_max=12.0,
                   lat=(1.5, 5.0, 19.0, 105.0), fma=32.0, model="Synthetic Core 2C", seed=2),
         SynthNode("gamma", cpus=8, l1=48 * 1024, l2=2 * 2**20, l3=32 * 2**20, bw=(150.0, 70.0, 35.0, 14.0),
                   mem_max=45.0, lat=(1.1, 3.9, 14.0, 80.0), fma=64.0, model="Synthetic EPYC 8C", seed=3)]


def build_registry(url: str, nodes=NODES, with_trace: bool = True) -> dict:
    """Nodes with profiles, a trace of app 'solver' on alpha (which `nodes` must include), predictions
    of two models for the nodes given, measured runs on beta and gamma."""
    reg = open_registry(url)
    out: dict = {}
    try:
        with reg.begin() as conn:
            for node in nodes:
                add_profile(conn, node)
            if with_trace:
                names = {n.name for n in nodes}

                def present(per_node):
                    return {k: v for k, v in per_node.items() if k in names}
                trace = add_trace(conn, "solver", "alpha")
                add_predictions(conn, trace, "corredor", present({"alpha": 60.0, "beta": 97.0, "gamma": 38.0}))
                add_predictions(conn, trace, "similarity", present({"alpha": 61.5, "beta": 104.0, "gamma": 33.0}))
                for node, times in (("beta", [99.0, 101.5, 100.2]), ("gamma", [35.1, 35.9])):
                    if node in names:
                        add_runs(conn, "solver", node, times)
                out["trace"] = trace
    finally:
        reg.close()
    return out
