"""Writing a measured profile: node, microbenchmarks, configs, runs, repetitions, signatures.

Everything goes in through the caller's one transaction (bulk inserts for the many rows), after
every configuration has been measured: a profile is either complete in the registry or absent.
Microbenchmarks and configs are shared between nodes (a config's key is the canonical text of
its parameters), so the same config measured on two nodes is one ub_configs row with two
profile_runs rows: that is what lets a phase matched on the base node be projected elsewhere.

Many nodes profile into one PostgreSQL registry at once, and the first profiles all add the same
new microbenchmark and config rows. Those are added with INSERT ... ON CONFLICT DO NOTHING, in
one fixed order (microbenchmarks by name, then configs by key): a writer that meets another's
uncommitted row waits for it, then uses it, instead of failing and retrying its whole transaction
(with a dozen writers, retries alone ran out); the fixed order keeps two writers from deadlocking.
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from registry.db.write import allocate_ids, get_or_create, insert_returning, insert_rows, new_uid
from registry.inventory import Inventory
from registry.nodes import ensure_node, record_offer
from registry.profile.catalog import Microbenchmark
from registry.profile.runner import Measurement
from registry.profile.sweep import Config
from registry.profile.vectors import store_vectors

_CHUNK = 500  # keys per IN (...) lookup


@dataclass
class ProfileRecord:
    """A measured profile, ready to store."""

    node: str
    inventory: Inventory
    mode: str
    measurements: list[Measurement]
    started_at: datetime
    finished_at: datetime
    duration_s: float
    tool_version: str
    compiler: str | None
    cflags: str | None
    uid: str = ""
    signatures: dict[str, dict] = field(default_factory=dict)  # config key -> {source: {metric: value}}
    host_load: dict | None = None   # what else the host was doing (registry.measure.load.HostLoad.to_dict)

    def __post_init__(self):
        self.uid = self.uid or new_uid()


def _lookup(conn: sa.Connection, sql: str, keys: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    stmt = sa.text(sql).bindparams(sa.bindparam("keys", expanding=True))
    for i in range(0, len(keys), _CHUNK):
        found.update({k: v for k, v in conn.execute(stmt, {"keys": list(keys[i:i + _CHUNK])})})
    return found


def _ensure_microbenchmarks(conn: sa.Connection, ubs: Iterable[Microbenchmark]) -> dict[str, int]:
    ubs = {ub.name: ub for ub in ubs}
    ids = _lookup(conn, "SELECT name, ub_id FROM microbenchmarks WHERE name IN :keys", sorted(ubs))
    for name in sorted(set(ubs) - set(ids)):
        ub = ubs[name]
        ids[name] = get_or_create(conn, "microbenchmarks", {"name": name}, {
            "family": ub.family, "n_streams": ub.n_streams, "description": ub.description}, "ub_id")
    return ids


_CONFIG_COLUMNS = "config_id, ub_id, config_key, threads, placement, ws_bytes, params_json, unit, higher_is_better"


def _insert_new_configs(conn: sa.Connection, rows: list[dict]) -> set[int]:
    """Insert config rows unless their key exists (or is being added by a concurrent writer, which
    is waited for); returns the config_ids actually inserted.

    Bulk, through a temporary table (a full profile has thousands of configs); the temporary table
    goes with the transaction if it fails.
    """
    if not rows:
        return set()
    conn.execute(sa.text(f"CREATE TEMPORARY TABLE nodereg_new_configs AS "
                         f"SELECT {_CONFIG_COLUMNS} FROM ub_configs WHERE 1 = 0"))
    insert_rows(conn, "nodereg_new_configs", rows)
    inserted = set(conn.execute(sa.text(
        f"INSERT INTO ub_configs ({_CONFIG_COLUMNS}) SELECT {_CONFIG_COLUMNS} FROM nodereg_new_configs "
        "ORDER BY config_key ON CONFLICT DO NOTHING RETURNING config_id")).scalars())
    conn.execute(sa.text("DROP TABLE nodereg_new_configs"))
    return inserted


def _ensure_configs(conn: sa.Connection, configs: Sequence[Config], ub_ids: dict[str, int]) -> dict[str, int]:
    by_key = {c.key: c for c in configs}
    ids = _lookup(conn, "SELECT config_key, config_id FROM ub_configs WHERE config_key IN :keys", list(by_key))
    new = [by_key[k] for k in sorted(by_key) if k not in ids]
    new_ids = allocate_ids(conn, "ub_configs_id_seq", len(new))
    inserted = _insert_new_configs(conn, [
        {"config_id": cid, "ub_id": ub_ids[c.ub.name], "config_key": c.key, "threads": c.threads,
         "placement": c.placement, "ws_bytes": c.ws_bytes, "params_json": json.dumps(c.params(), sort_keys=True),
         # a kernel's own figure (profile_runs.value) is a time per operation: lower is better
         "unit": c.ub.unit, "higher_is_better": False if c.ub.unit else None}
        for cid, c in zip(new_ids, new)])
    insert_rows(conn, "ub_streams", [
        {"config_id": cid, "stream_index": i, "size_elems": s.size_elems, "stride_bytes": s.stride_bytes,
         "dtype": s.dtype, "elem_bytes": s.elem_bytes, "access": s.access, "pattern": s.pattern}
        for cid, c in zip(new_ids, new) if cid in inserted for i, s in enumerate(c.descriptors())])
    ids.update({c.key: cid for cid, c in zip(new_ids, new) if cid in inserted})
    if len(ids) < len(by_key):  # added meanwhile by a concurrent writer (committed now: we waited for it)
        ids.update(_lookup(conn, "SELECT config_key, config_id FROM ub_configs WHERE config_key IN :keys",
                           [k for k in by_key if k not in ids]))
    return ids


def stream_signature(m: Measurement) -> dict[str, float]:
    """The 'streams' signature of a measured config: the thesis's descriptors and its tpi."""
    c = m.config
    metrics = {"n_streams": len(c.descriptors()), "threads": c.threads, "tpi_us": m.tpi_us}
    for i, s in enumerate(c.descriptors()):
        metrics.update({f"s{i}.size_elems": s.size_elems, f"s{i}.stride_bytes": s.stride_bytes,
                        f"s{i}.elem_bytes": s.elem_bytes, f"s{i}.float": float(s.dtype.startswith("f")),
                        f"s{i}.shared": float(s.access == "C"), f"s{i}.random": float(s.pattern == "random")})
    if c.ws_level:
        metrics["ws_level"] = 0 if c.ws_level == "memory" else int(c.ws_level[1:])
    return metrics


def store_profile(conn: sa.Connection, record: ProfileRecord) -> int:
    """Insert the whole profile through `conn` (the caller's transaction); returns profile_id."""
    inv, ms = record.inventory, record.measurements
    node_id = ensure_node(conn, record.node, inv, source="profile")
    record_offer(conn, node_id, inv)
    ub_ids = _ensure_microbenchmarks(conn, (m.config.ub for m in ms))
    config_ids = _ensure_configs(conn, [m.config for m in ms], ub_ids)
    profile_id = insert_returning(conn, "profiles", {
        "uid": record.uid, "node_id": node_id, "mode": record.mode, "started_at": record.started_at,
        "finished_at": record.finished_at, "duration_s": record.duration_s, "tool_version": record.tool_version,
        "compiler": record.compiler, "cflags": record.cflags, "host": inv.hostname,
        "cpu_list": inv.cpu_list, "status": "complete",
        "host_load_json": json.dumps(record.host_load, sort_keys=True) if record.host_load else None}, "profile_id")
    run_ids = allocate_ids(conn, "profile_runs_id_seq", len(ms))
    runs, reps, sigs = [], [], []
    for run_id, m in zip(run_ids, ms):
        st = m.stats
        runs.append({
            "run_id": run_id, "profile_id": profile_id, "config_id": config_ids[m.config.key],
            "iterations": m.iterations, "reps": len(m.times), "median_s": st.median, "min_s": st.min, "cv": st.cv,
            "tpi_us": m.tpi_us, "bytes_per_rep": m.bytes_per_rep, "flops_per_rep": m.flops_per_rep,
            "bandwidth_gbs": m.bandwidth_gbs, "gflops": m.gflops, "latency_ns": m.latency_ns,
            "checksum": m.checksum, "unstable": m.unstable, "value": m.value})
        reps += [{"run_id": run_id, "rep": i, "time_s": t} for i, t in enumerate(m.times)]
        sigs += [{"owner_kind": "profile_run", "owner_id": run_id, "source": "streams", "metric": k,
                  "value": float(v)} for k, v in stream_signature(m).items()]
        sigs += [{"owner_kind": "profile_run", "owner_id": run_id, "source": src, "metric": k, "value": float(v)}
                 for src, metrics in record.signatures.get(m.config.key, {}).items() for k, v in metrics.items()]
    insert_rows(conn, "profile_runs", runs)
    insert_rows(conn, "profile_reps", reps)
    insert_rows(conn, "signatures", sigs)
    store_vectors(conn, [profile_id])
    return profile_id
