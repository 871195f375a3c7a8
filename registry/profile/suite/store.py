"""Storing a measured local suite profile: the same microbenchmark and config rows as the import.

Configs are identified by their key (`sparecores:...`), so a config measured here and the same
config imported from Spare Cores are one ub_configs row with a profile_runs row per node: that is
what lets a phase matched here be projected onto an imported node. Everything goes in one
transaction, after every config was measured: the profile is complete in the registry or absent.
"""

import json
import platform
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from registry.db.write import allocate_ids, get_or_create, insert_returning, insert_rows, new_uid
from registry.inventory import Inventory
from registry.io.sparecores.family import classify
from registry.nodes import ensure_node
from registry.profile.suite.plan import SUITE, SuiteConfig
from registry.profile.vectors import store_vectors

MODE = "suite"   # profiles.mode of a locally measured suite profile (imported ones: 'import')


@dataclass
class SuiteResult:
    config: SuiteConfig
    value: float                 # the tool's figure, in config.unit
    signature: dict              # {source: {metric: value}}
    ws_bytes: int | None = None


@dataclass
class SuiteProfile:
    node: str
    inventory: Inventory
    results: list[SuiteResult]
    started_at: datetime
    finished_at: datetime
    duration_s: float
    tool_version: str
    tools: dict = field(default_factory=dict)     # tool -> version string
    host_load: dict | None = None                 # what else the host was doing (registry.measure.load)
    notes: list[str] = field(default_factory=list)   # what the measuring said aloud (a config without cachegrind)
    uid: str = ""

    def __post_init__(self):
        self.uid = self.uid or new_uid()


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (vendor_id, cpu family, model, stepping)."""
    out: dict[str, str] = {}
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return out
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


def cpu_identity(inv: Inventory) -> dict:
    """This machine's architecture, CPU maker and microarchitecture by the import's own rule
    (registry.io.sparecores.family), so that `nodes like` compares like with like."""
    info = _cpuinfo()
    vendor, family = classify(info.get("vendor_id"), inv.cpu_model or info.get("model name"),
                              info.get("cpu family"), info.get("model"), info.get("stepping"))
    return {"architecture": platform.machine(), "cpu_vendor": vendor, "cpu_family": family,
            "isa_flags": " ".join(sorted(set(info.get("flags", "").split()))) or None}


def _configs(conn: sa.Connection, results: list[SuiteResult]) -> dict[str, int]:
    """config_id by key, adding the microbenchmarks (suite 'sparecores') and configs not there yet."""
    ub_ids = {}
    for r in sorted(results, key=lambda r: r.config.key):
        c = r.config
        if c.ub_name not in ub_ids:
            ub_ids[c.ub_name] = get_or_create(conn, "microbenchmarks", {"name": c.ub_name}, {
                "family": c.family, "n_streams": 0, "suite": SUITE,
                "description": f"Spare Cores {c.task}"}, "ub_id")
    ids = {}
    for r in sorted(results, key=lambda r: r.config.key):
        c = r.config
        ids[c.key] = get_or_create(conn, "ub_configs", {"config_key": c.key}, {
            "ub_id": ub_ids[c.ub_name],
            "threads": c.threads, "placement": "none", "ws_bytes": r.ws_bytes, "unit": c.unit,
            "higher_is_better": c.higher_is_better,
            "params_json": json.dumps({"task": c.task, "what": c.what, "params": list(c.params)})}, "config_id")
    return ids


def store_suite_profile(conn: sa.Connection, p: SuiteProfile) -> int:
    """Insert the profile through `conn` (the caller's transaction); returns profile_id."""
    inv = p.inventory
    node_id = ensure_node(conn, p.node, inv, source="profile")
    ident = cpu_identity(inv)
    conn.execute(sa.text("UPDATE nodes SET architecture = :architecture, cpu_vendor = :cpu_vendor, "
                         "cpu_family = :cpu_family, isa_flags = :isa_flags WHERE node_id = :id"),
                 {**ident, "id": node_id})
    config_ids = _configs(conn, p.results)
    profile_id = insert_returning(conn, "profiles", {
        "uid": p.uid, "node_id": node_id, "mode": MODE, "suite": SUITE, "started_at": p.started_at,
        "finished_at": p.finished_at, "duration_s": p.duration_s, "tool_version": p.tool_version,
        "host": inv.hostname, "cpu_list": inv.cpu_list, "status": "complete",
        "host_load_json": json.dumps(p.host_load, sort_keys=True) if p.host_load else None,
        "provenance_json": json.dumps({"suite": SUITE, "measured": "here", "tools": p.tools,
                                       **({"notes": p.notes} if p.notes else {})}, sort_keys=True)},
        "profile_id")
    run_ids = allocate_ids(conn, "profile_runs_id_seq", len(p.results))
    runs, sigs = [], []
    for run_id, r in zip(run_ids, p.results):
        cost = r.config.cost(r.value)
        runs.append({"run_id": run_id, "profile_id": profile_id, "config_id": config_ids[r.config.key],
                     "reps": 1, "median_s": cost, "min_s": cost, "value": r.value, "unstable": False})
        sigs += [{"owner_kind": "profile_run", "owner_id": run_id, "source": src, "metric": k, "value": float(v)}
                 for src, metrics in r.signature.items() for k, v in metrics.items()]
    insert_rows(conn, "profile_runs", runs)
    insert_rows(conn, "signatures", sigs)
    store_vectors(conn, [profile_id])
    return profile_id
