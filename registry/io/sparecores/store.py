"""`nodereg import sparecores`: Spare Cores server folders into a registry, per server atomically.

What is written for one server ``<vendor>/<server>`` (a ServerRecord, registry.io.sparecores.server):

* the node ``vendor:server`` (source 'import'): vCPUs, cores, threads per core, sockets, CPU model,
  memory, caches (node_caches), vendor, architecture, cpu_vendor, cpu_family, isa_flags, and the
  whole inventory as inventory_json. A later import with a changed inventory updates an imported
  node; a node of that name from another source (profiled here, say) keeps its own inventory.
* one profile (mode 'import', provenance_json: dataset, commit, each task's dates and version)
  with one profile_run per micro-benchmark figure: value = the tool's figure, median_s a time-like
  cost (1 / value when higher is better, else the value), reps 1 (and its one profile_reps row);
  configs and micro-benchmarks of suite 'sparecores' are created on first sight.
* one measured run per application figure (runs.source 'sparecores', time_s = work / rate).

Identity: the profile's uid is UUID5 of the server and the start of every micro-benchmark task it
holds, a run's of (vendor, server, task, app, task start); so importing the same data again adds
nothing, and a newer commit whose task ran again adds that task's figures (a new profile, which
becomes the node's latest, when a micro-benchmark task changed).

Speed: servers are parsed in worker processes and written in batches, each batch one transaction
with one bulk insert per table. A batch that fails is written again server by server, so that a
server whose rows the database refuses is reported (``failed``) without losing the others.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa

from registry.db import Registry, utcnow
from registry.db.names import check_name
from registry.db.write import allocate_ids, insert_rows
from registry.errors import UserError
from registry.io.sparecores.dataset import ServerDir, commit_of, discover, load_specs
from registry.io.sparecores.records import ServerRecord
from registry.io.sparecores.server import parse_server
from registry.profile.vectors import store_vectors

SUITE = "sparecores"
DATASET = "sparecores/sc-inspector-data"
_NAMESPACE = uuid.UUID("0f5c3f2e-6b1d-4e57-9a43-2f1c8d7e5a91")
BATCH = 100
ADDED = ("nodes", "configs", "profiles", "measurements", "apps", "runs")

_UB_DESCRIPTION = {
    "sc-membench": ("bandwidth", "Spare Cores membench: read/write/copy bandwidth on all vCPUs, pointer-chase "
                                 "latency on one, working sets 16 KiB to 2 GiB"),
    "sc-bw_mem": ("bandwidth", "lmbench bw_mem -P nproc: rd/wr/rdwr bandwidth, 16 KB to 512 MB"),
    "sc-stressng": ("compute", "stress-ng stressors (stressng_benchmarks) at 1 and all vCPUs; cpu_all: the older "
                               "stressng / stressngsinglecore tasks"),
    "sc-stressngfull": ("compute", "stress-ng --cpu-method div16 at 1 and all vCPUs"),
    "sc-passmark": ("compute", "PassMark PerformanceTest Linux: CPU and memory tests"),
    "sc-openssl": ("crypto", "openssl speed -multi nproc: hashes and ciphers by block size"),
}


@dataclass
class ImportSummary:
    dataset: str = DATASET
    commit: str | None = None
    servers: int = 0
    servers_imported: int = 0          # something of theirs was added or updated
    servers_unchanged: int = 0         # already in the registry as they are
    servers_skipped: dict[str, int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ADDED, 0))   # rows, by what they are
    nodes_updated: int = 0             # imported nodes whose inventory changed
    tasks_skipped: dict[str, int] = field(default_factory=dict)    # "task: reason" -> servers
    failed: list[str] = field(default_factory=list)                # "vendor:server: error"
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _uid(*parts) -> str:
    return str(uuid.uuid5(_NAMESPACE, "/".join("" if p is None else str(p) for p in parts)))


def profile_uid(rec: ServerRecord) -> str:
    tasks = sorted({m.task for m in rec.measurements})
    return _uid("profile", rec.vendor, rec.server, *(f"{t}@{rec.tasks[t].start}" for t in tasks))


def run_uid(rec: ServerRecord, task: str, app: str) -> str:
    return _uid("run", rec.vendor, rec.server, task, app, rec.tasks[task].start)


def _when(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text)).replace(tzinfo=None)
    except (TypeError, ValueError):
        return None


def node_row(rec: ServerRecord) -> dict:
    """The nodes row of a server (without its id)."""
    inv = rec.inventory
    kept = {k: v for k, v in inv.items() if k != "flags"}
    doc = {"vendor": rec.vendor, "server": rec.server, **kept, "source": "sparecores"}
    return {"name": rec.name, "host": None, "cpu_list": None, "n_cpus": inv.get("vcpus"),
            "cpu_model": inv.get("cpu_model"), "sockets": inv.get("sockets"), "cores": inv.get("cores"),
            "threads_per_core": inv.get("threads_per_core"), "numa_nodes": inv.get("numa_nodes"),
            "memory_bytes": inv.get("memory_bytes"), "max_mhz": inv.get("max_mhz"), "kernel": None,
            "compiler": None, "inventory_json": json.dumps(doc, sort_keys=True), "source": "import",
            "vendor": rec.vendor, "architecture": inv.get("architecture"), "cpu_vendor": inv.get("cpu_vendor"),
            "cpu_family": inv.get("cpu_family"), "isa_flags": " ".join(inv.get("flags") or []) or None}


class _Known:
    """What the registry holds already (names, keys, uids -> ids), read once, kept up to date."""

    def __init__(self, conn: sa.Connection):
        q = lambda sql: conn.execute(sa.text(sql)).all()   # noqa: E731
        self.nodes = {n: (i, s, inv) for n, i, s, inv in q("SELECT name, node_id, source, inventory_json FROM nodes")}
        self.ubs = dict(q("SELECT name, ub_id FROM microbenchmarks"))
        self.configs = dict(q("SELECT config_key, config_id FROM ub_configs"))
        self.apps = dict(q("SELECT name, app_id FROM apps"))
        self.profiles = {r[0] for r in q("SELECT uid FROM profiles WHERE mode = 'import'")}
        self.runs = {r[0] for r in q("SELECT uid FROM runs WHERE source = 'sparecores'")}

    def merge(self, other: "_Known") -> None:
        for name in ("nodes", "ubs", "configs", "apps"):
            getattr(self, name).update(getattr(other, name))
        self.profiles |= other.profiles
        self.runs |= other.runs

    @classmethod
    def empty(cls) -> "_Known":
        k = cls.__new__(cls)
        k.nodes, k.ubs, k.configs, k.apps, k.profiles, k.runs = {}, {}, {}, {}, set(), set()
        return k


class _Batch:
    """The rows of a batch of servers, to be written in one transaction."""

    def __init__(self, conn: sa.Connection, known: _Known):
        self.conn, self.known, self.new = conn, known, _Known.empty()
        self.counts: Counter = Counter()
        self.changed: set[str] = set()

    def _lookup(self, table: str, key):
        return getattr(self.new, table).get(key, getattr(self.known, table).get(key))

    def write(self, recs: list[ServerRecord], commit: str | None) -> None:
        now = utcnow()
        self._nodes(recs)
        self._configs(recs)
        self._profiles(recs, commit, now)
        self._runs(recs, now)

    def _nodes(self, recs) -> None:
        new, caches = [], []
        for rec in recs:
            row = node_row(rec)
            have = self._lookup("nodes", rec.name)
            if have is None:
                new.append((rec, row))
            elif have[1] == "import" and have[2] != row["inventory_json"]:
                sets = {k: v for k, v in row.items() if k not in ("name", "source")}
                self.conn.execute(sa.text(f"UPDATE nodes SET {', '.join(f'{k} = :{k}' for k in sets)} "
                                          "WHERE node_id = :node_id"), {**sets, "node_id": have[0]})
                self.conn.execute(sa.text("DELETE FROM node_caches WHERE node_id = :n"), {"n": have[0]})
                caches += [{"node_id": have[0], "line_bytes": None, **c} for c in rec.inventory.get("caches", [])]
                self.new.nodes[rec.name] = (have[0], "import", row["inventory_json"])
                self.counts["nodes_updated"] += 1
                self.changed.add(rec.name)
        ids = allocate_ids(self.conn, "nodes_id_seq", len(new))
        for (rec, row), node_id in zip(new, ids, strict=True):
            row.update(node_id=node_id, created_at=utcnow())
            caches += [{"node_id": node_id, "line_bytes": None, **c} for c in rec.inventory.get("caches", [])]
            self.new.nodes[rec.name] = (node_id, "import", row["inventory_json"])
            self.changed.add(rec.name)
        self.counts["nodes"] += insert_rows(self.conn, "nodes", [row for _, row in new])
        insert_rows(self.conn, "node_caches", caches)

    def _configs(self, recs) -> None:
        ubs, configs = {}, {}
        for rec in recs:
            for m in rec.measurements:
                if self._lookup("ubs", m.microbenchmark) is None:
                    ubs.setdefault(m.microbenchmark, m)
                if self._lookup("configs", m.config_key) is None:
                    configs.setdefault(m.config_key, m)
        ub_rows = []
        for name, ub_id in zip(ubs, allocate_ids(self.conn, "microbenchmarks_id_seq", len(ubs)), strict=True):
            family, text = _UB_DESCRIPTION.get(name, (ubs[name].family, f"Spare Cores {ubs[name].task}"))
            ub_rows.append({"ub_id": ub_id, "name": name, "family": family, "n_streams": 0, "description": text,
                            "suite": SUITE})
            self.new.ubs[name] = ub_id
        insert_rows(self.conn, "microbenchmarks", ub_rows)
        rows = []
        for key, cid in zip(configs, allocate_ids(self.conn, "ub_configs_id_seq", len(configs)), strict=True):
            m = configs[key]
            rows.append({"config_id": cid, "ub_id": self._lookup("ubs", m.microbenchmark), "config_key": key,
                         "threads": m.threads, "placement": "none", "ws_bytes": m.ws_bytes,
                         "params_json": json.dumps({"suite": SUITE, "task": m.task, "family": m.family}),
                         "unit": m.unit, "higher_is_better": m.higher_is_better})
            self.new.configs[key] = cid
        self.counts["configs"] += insert_rows(self.conn, "ub_configs", rows)

    def _profiles(self, recs, commit, now) -> None:
        todo = []
        for rec in recs:
            if rec.measurements:
                uid = profile_uid(rec)
                if uid not in self.known.profiles and uid not in self.new.profiles:
                    todo.append((rec, uid))
        ids = allocate_ids(self.conn, "profiles_id_seq", len(todo))
        profiles, parts = [], []
        for (rec, uid), pid in zip(todo, ids, strict=True):
            tasks = [rec.tasks[t] for t in sorted({m.task for m in rec.measurements})]
            starts = [d for d in (_when(t.start) for t in tasks) if d]
            ends = [d for d in (_when(t.end) for t in tasks) if d]
            profiles.append({"profile_id": pid, "uid": uid, "node_id": self._lookup("nodes", rec.name)[0],
                             "mode": "import", "suite": SUITE, "started_at": min(starts) if starts else now,
                             "finished_at": max(ends) if ends else None, "duration_s": None,
                             "tool_version": SUITE, "compiler": None, "cflags": None, "host": None,
                             "cpu_list": None, "status": "complete",
                             "provenance_json": json.dumps(rec.provenance(commit), sort_keys=True)})
            values = np.array([m.value for m in rec.measurements], dtype=float)
            hib = np.array([m.higher_is_better for m in rec.measurements], dtype=bool)
            parts.append(pd.DataFrame({
                "profile_id": np.full(len(values), pid, dtype=np.int64),
                "config_id": np.array([self._lookup("configs", m.config_key) for m in rec.measurements],
                                      dtype=np.int64),
                "reps": np.ones(len(values), dtype=np.int32), "median_s": np.where(hib, 1.0 / values, values),
                "value": values, "unstable": np.zeros(len(values), dtype=bool)}))
            self.new.profiles.add(uid)
            self.changed.add(rec.name)
        self.counts["profiles"] += insert_rows(self.conn, "profiles", profiles)
        if parts:
            runs = pd.concat(parts, ignore_index=True)
            runs.insert(0, "run_id", np.array(allocate_ids(self.conn, "profile_runs_id_seq", len(runs)), dtype=np.int64))
            self.counts["measurements"] += insert_rows(self.conn, "profile_runs", runs)
            # the one repetition, as for every profile: readers and `doctor` expect each run to have its reps
            insert_rows(self.conn, "profile_reps", pd.DataFrame({"run_id": runs["run_id"], "rep": 0,
                                                                 "time_s": runs["median_s"]}))
            store_vectors(self.conn, [p["profile_id"] for p in profiles])

    def _runs(self, recs, now) -> None:
        new_apps = {}
        rows = []
        for rec in recs:
            node_id = self._lookup("nodes", rec.name)[0]
            for a in rec.apps:
                uid = run_uid(rec, a.task, a.app)
                if uid in self.known.runs or uid in self.new.runs:
                    continue
                if self._lookup("apps", a.app) is None:
                    new_apps.setdefault(a.app, a)
                rows.append((uid, a.app, node_id, a.threads, a.time_s))
                self.new.runs.add(uid)
                self.changed.add(rec.name)
        app_rows = []
        for name, app_id in zip(new_apps, allocate_ids(self.conn, "apps_id_seq", len(new_apps)), strict=True):
            a = new_apps[name]
            app_rows.append({"app_id": app_id, "name": name, "created_at": now,
                             "description": f"Spare Cores {a.task}: time of a fixed job of {a.work:g} "
                                            f"{a.unit.removesuffix('/s')} = work / rate ({a.unit})"})
            self.new.apps[name] = app_id
        self.counts["apps"] += insert_rows(self.conn, "apps", app_rows)
        if rows:
            frame = pd.DataFrame(rows, columns=["uid", "app", "node_id", "threads", "time_s"])
            frame["app_id"] = frame.pop("app").map(lambda n: self._lookup("apps", n)).astype(np.int64)
            frame["threads"] = frame["threads"].astype("Int64")
            frame["source"], frame["created_at"] = "sparecores", now
            self.counts["runs"] += insert_rows(self.conn, "runs", frame)


def _usable(rec: ServerRecord) -> str | None:
    """Why a parsed server is not imported at all, or None."""
    try:
        check_name(rec.name, "node")
    except UserError:
        return "unusable server name"
    if not rec.measurements and not rec.apps:
        return "no usable task (all failed or missing)"
    return None


def _parse_one(args) -> ServerRecord:
    sd, spec = args
    return parse_server(sd.path, spec)


def parsed_servers(servers: list[ServerDir], specs: dict, workers: int) -> Iterator[ServerRecord]:
    """ServerRecords in the order of `servers`, parsed by `workers` processes (1: in this one)."""
    jobs = [(sd, specs.get((sd.vendor, sd.server))) for sd in servers]
    if workers <= 1 or len(jobs) < 50:
        yield from map(_parse_one, jobs)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(_parse_one, jobs, chunksize=16)


def _batches(items: Iterable, n: int) -> Iterator[list]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) >= n:
            yield batch
            batch = []
    if batch:
        yield batch


def import_sparecores(registry: Registry, root: Path | str, specs_root: Path | str | None = None, *,
                      workers: int = 1, batch: int = BATCH,
                      progress: Callable[[int, int], None] | None = None) -> ImportSummary:
    """Import a clone of sc-inspector-data (and the specs of sc-data-dumps); see the module doc."""
    started = time.perf_counter()
    data, servers = discover(Path(root))
    specs = load_specs(Path(specs_root), {s.vendor for s in servers}) if specs_root is not None else {}
    summary = ImportSummary(commit=commit_of(data.parent if data.name == "data" else data), servers=len(servers))
    with registry.connect() as conn:
        if conn.dialect.name == "duckdb":
            conn.exec_driver_sql("SET enable_progress_bar = false")
        known = _Known(conn)
        conn.rollback()
    skips, server_skips = Counter(), Counter()
    done = 0
    for group in _batches(parsed_servers(servers, specs, workers), batch):
        recs = []
        for rec in group:
            skips.update(f"{task}: {why}" for task, why in rec.skipped.items())
            why = _usable(rec)
            if why:
                server_skips[why] += 1
            else:
                recs.append(rec)
        _write(registry, recs, known, summary.commit, summary)
        done += len(group)
        if progress:
            progress(done, len(servers))
    summary.tasks_skipped = dict(sorted(skips.items()))
    summary.servers_skipped = dict(server_skips)
    summary.seconds = round(time.perf_counter() - started, 2)
    return summary


def _write(registry: Registry, recs: list[ServerRecord], known: _Known, commit, summary: ImportSummary) -> None:
    """One transaction for the batch; if it fails, one per server (see the module doc)."""
    try:
        batch = _commit(registry, recs, known, commit)
    except (sa.exc.SQLAlchemyError, ValueError, KeyError, TypeError) as exc:
        if len(recs) == 1:
            summary.failed.append(f"{recs[0].name}: {str(exc).splitlines()[0][:200]}")
            return
        for rec in recs:
            _write(registry, [rec], known, commit, summary)
        return
    summary.nodes_updated += batch.counts.pop("nodes_updated", 0)
    for key, n in batch.counts.items():
        summary.added[key] += n
    summary.servers_imported += len(batch.changed)
    summary.servers_unchanged += len(recs) - len(batch.changed)


def _commit(registry: Registry, recs, known: _Known, commit) -> _Batch:
    with registry.begin() as conn:
        if conn.dialect.name == "duckdb":
            conn.exec_driver_sql("SET enable_progress_bar = false")
        batch = _Batch(conn, known)
        batch.write(recs, commit)
    known.merge(batch.new)
    return batch
