"""Importing the Lumos cloud-performance dataset: every VM type a node, every workload an app.

Layouts accepted (DIR is what the user names):

* ``DIR/<interval folder>/<vm>/<workload>_<run>/{report.json,sar.csv}`` (the upstream layout,
  e.g. ``alibaba/1 second/g6.xlarge/hadoop_sort_small_1/``), and
* ``DIR/<vm>/<workload>_<run>/...`` (one interval folder, or a copy of one).

A run folder without a ``_<digits>`` suffix (the Hive workloads upstream) is run 1. The cloud is
``--cloud`` or the name of DIR (its parent's when DIR is itself an interval folder such as
``1 second``); nodes are called ``<cloud>/<vm>`` so that clouds never collide. Apps are shared
across clouds (same program, same data size).

What is stored: a node per VM type (vCPUs and memory read from the type name, see ``vm_shape``),
an app per workload, a run per completed ``report.json`` (its elapsed time), and a trace per
``sar.csv`` with all its numeric samples, one ``whole`` phase and that phase's signature (source
``sar``: ``registry.io.sar.sar_signature``; source ``meta``: the framework and data size, which
are known whenever the app is traced). Incomplete runs (``completed: false``, no elapsed time)
are skipped and counted, as are runs whose VM type or workload folder name is not a usable node or
app name (registry.db.names: a line break, say); a run whose trace is missing or unreadable is
stored without a trace.

Run and trace uids are UUID5 of cloud / sampling interval / VM / run folder, so importing the
same data again (in either layout) adds nothing. Everything is written in one transaction.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa

from registry.apps import ensure_app
from registry.db import Registry, utcnow
from registry.db.names import check_name
from registry.db.write import allocate_ids, insert_returning, insert_rows
from registry.errors import UserError
from registry.io.folders import subdirs as _subdirs
from registry.io.sar import SarTrace, read_sar_csv, sample_times, sar_signature
from registry.io.vmtypes import vm_shape
from registry.trace.capacity import capacity

_NAMESPACE = uuid.UUID("5b0e6a8e-4f37-4c1e-9d7e-6c1a4b2f9e10")
_REPORT, _SAR = "report.json", "sar.csv"
_RUN_SUFFIX = re.compile(r"^(?P<stem>.+)_(?P<run>\d+)$")
_INTERVAL = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>s|sec|secs|second|seconds|m|min|mins|minute|minutes)\s*$",
                       re.IGNORECASE)
_CLOUD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
FRAMEWORKS = ("hadoop", "spark", "hive", "flink", "storm")
DATASIZES = ("tiny", "small", "large", "huge", "gigantic", "bigdata")   # HiBench's scale profiles, in order
_SAMPLE_CHUNK = 2_000_000
_CAPACITY_COLUMNS = ("kbmemused", "kbbuffers", "kbcached", "rd_sec/s", "wr_sec/s", "rxkB/s", "txkB/s")

def interval_of(label: str) -> float | None:
    """Seconds of an interval folder name ('1 second', '5 seconds', '1 min'), None if it is not one."""
    m = _INTERVAL.match(label)
    if not m:
        return None
    return float(m["n"]) * (60.0 if m["unit"].lower().startswith("m") else 1.0)


@dataclass(frozen=True)
class RunDir:
    """One `<workload>_<run>` folder."""

    cloud: str
    vm: str
    folder: str
    app: str
    run: int
    path: Path
    interval_s: float | None       # from the interval folder's name, when there is one


def _is_run_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, _REPORT)) or os.path.isfile(os.path.join(path, _SAR))


def _is_vm_dir(path: str) -> bool:
    return any(_is_run_dir(e.path) for e in _subdirs(Path(path)))


def discover(root: Path, cloud: str | None = None) -> tuple[str, list[RunDir]]:
    """The cloud name and every run folder under `root` (either layout); UserError when there are none."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"{root} is not a directory (expected a Lumos cloud folder, e.g. .../alibaba)")
    children = _subdirs(root)
    vm_level = [e for e in children if _is_vm_dir(e.path)]
    if vm_level:                                  # DIR/<vm>/<run>/
        groups = [(interval_of(root.name), vm_level)]
        default_cloud = root.parent.name if interval_of(root.name) is not None else root.name
    else:                                         # DIR/<interval>/<vm>/<run>/
        groups = []
        for child in children:
            vms = [e for e in _subdirs(Path(child.path)) if _is_vm_dir(e.path)]
            if vms:
                groups.append((interval_of(child.name), vms))
        default_cloud = root.name
    if not groups:
        raise UserError(f"no Lumos runs under {root}: expected DIR/<interval>/<vm>/<workload>_<run>/report.json "
                        "or DIR/<vm>/<workload>_<run>/report.json")
    name = default_cloud if cloud is None else cloud    # an empty --cloud is refused, not ignored
    if not _CLOUD_NAME.fullmatch(name or ""):      # not match(): "$" lets a trailing newline through
        raise UserError(f"cloud name {name!r} is not usable: pass --cloud NAME (letters, digits, '_', '.', '-')")
    runs = []
    for interval_s, vms in groups:
        for vm in vms:
            for entry in _subdirs(Path(vm.path)):
                if not _is_run_dir(entry.path):
                    continue
                m = _RUN_SUFFIX.match(entry.name)
                app, run = (m["stem"], int(m["run"])) if m else (entry.name, 1)
                runs.append(RunDir(name, vm.name, entry.name, app, run, Path(entry.path), interval_s))
    return name, runs


@dataclass
class ParsedRun:
    rd: RunDir
    elapsed_s: float | None = None
    report: dict = field(default_factory=dict)
    samples: SarTrace | None = None
    problem: str | None = None              # why the run (or its trace) is skipped


def _elapsed(report: dict) -> float | None:
    try:
        value = float(str(report.get("elapsed_time", "")).strip())
    except ValueError:
        return None
    return value if np.isfinite(value) and value > 0 else None


def _completed(report: dict) -> bool:
    flag = report.get("completed", True)
    if isinstance(flag, str):
        return flag.strip().lower() in ("true", "1", "yes")
    return bool(flag)


def parse_run(rd: RunDir) -> ParsedRun:
    """Read one run folder; never raises for bad content (the problem is recorded instead)."""
    out = ParsedRun(rd)
    try:
        check_name(f"{rd.cloud}/{rd.vm}", "node")
        check_name(rd.app, "app")
    except UserError:
        out.problem = "unusable VM type or workload name"
        return out
    report_path = rd.path / _REPORT
    if not report_path.is_file():
        out.problem = "no report.json"
        return out
    try:
        report = json.loads(report_path.read_text(errors="replace"))
        if not isinstance(report, dict):
            raise ValueError("not an object")
    except (ValueError, OSError):
        out.problem = "unreadable report.json"
        return out
    out.report = report
    if not _completed(report):
        out.problem = "incomplete run"
        return out
    out.elapsed_s = _elapsed(report)
    if out.elapsed_s is None:
        out.problem = "no elapsed time"
        return out
    sar_path = rd.path / _SAR
    if sar_path.is_file():
        try:
            out.samples = read_sar_csv(sar_path)
        except (ValueError, OSError):
            out.samples = None
    return out


def framework_of(run: ParsedRun) -> str:
    fw = str(run.report.get("framework") or "").strip().lower()
    return fw or run.rd.app.split("_", 1)[0].lower()


def datasize_of(run: ParsedRun) -> str:
    size = str(run.report.get("datasize") or "").strip().lower()
    return size or run.rd.app.rsplit("_", 1)[-1].lower()


def meta_signature(framework: str, datasize: str) -> dict[str, float]:
    """Source 'meta': what is known about the app when it is traced (framework one-hot, data size rank)."""
    sig = {f"framework_{fw}": float(fw == framework) for fw in FRAMEWORKS}
    if datasize in DATASIZES:
        sig["datasize_rank"] = float(DATASIZES.index(datasize))
    return sig


@dataclass
class ImportSummary:
    cloud: str
    run_folders: int = 0
    nodes_added: int = 0
    apps_added: int = 0
    runs_added: int = 0
    traces_added: int = 0
    samples_added: int = 0
    already_present: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    runs_without_trace: int = 0
    vm_types_not_understood: list[str] = field(default_factory=list)   # no vCPUs or memory from the name

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _uid(kind: str, cloud: str, interval_s: float | None, rd: RunDir) -> str:
    interval = f"{interval_s:g}s" if interval_s else "?"
    return str(uuid.uuid5(_NAMESPACE, f"lumos/{kind}/{cloud}/{interval}/{rd.vm}/{rd.folder}"))


def _ids_by_name(conn: sa.Connection, table: str, key: str) -> dict[str, int]:
    return {name: i for name, i in conn.execute(sa.text(f"SELECT name, {key} FROM {table}"))}


def _ensure_nodes(conn, cloud: str, vms: list[str], summary: ImportSummary) -> dict[str, int]:
    existing = _ids_by_name(conn, "nodes", "node_id")
    ids = {}
    for vm in vms:
        name = f"{cloud}/{vm}"
        if name in existing:
            ids[vm] = existing[name]
            continue
        shape = vm_shape(vm)
        if not shape.understood:
            summary.vm_types_not_understood.append(vm)
        inventory = {"cloud": cloud, "vm_type": vm, "vcpus": shape.vcpus,
                     "memory_gib": None if shape.memory_bytes is None else shape.memory_bytes / 2**30,
                     "shape_from": "VM type name" if shape.vcpus else None, "source": "lumos"}
        ids[vm] = insert_returning(conn, "nodes", {
            "name": name, "n_cpus": shape.vcpus, "memory_bytes": shape.memory_bytes,
            "inventory_json": json.dumps(inventory), "source": "lumos", "created_at": utcnow()}, "node_id")
        summary.nodes_added += 1
    return ids


def _ensure_apps(conn, apps: dict[str, str], summary: ImportSummary) -> dict[str, int]:
    existing = _ids_by_name(conn, "apps", "app_id")
    ids = {}
    for app, description in sorted(apps.items()):
        if app in existing:
            ids[app] = existing[app]
            continue
        # the description quotes report.json, which may hold NUL: PostgreSQL text cannot
        ids[app] = ensure_app(conn, app, description.replace("\x00", ""))
        summary.apps_added += 1
    return ids


def _existing_uids(conn, table: str) -> set[str]:
    return {r[0] for r in conn.execute(sa.text(f"SELECT uid FROM {table} WHERE source = 'lumos'"))}


def _started_at(report: dict) -> datetime:
    """When the run started, from the report ('timestamp' or 'begin_time'); import time otherwise."""
    for key in ("timestamp", "begin_time"):
        try:
            return datetime.fromisoformat(str(report.get(key) or "").strip()).replace(tzinfo=None)
        except ValueError:
            continue
    return utcnow()


class _SampleBuffer:
    """Long-form trace samples gathered as arrays and written in large chunks (insert_rows).

    Metric names travel as codes into one vocabulary (a pandas Categorical), not as millions of
    Python strings.
    """

    def __init__(self, conn):
        self.conn = conn
        self.vocabulary: dict[str, int] = {}
        self.parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.pending = 0
        self.written = 0

    def add(self, trace_id: int, t: np.ndarray, trace: SarTrace) -> None:
        codes = np.array([self.vocabulary.setdefault(n, len(self.vocabulary)) for n in trace.names])
        rows, cols = np.nonzero(np.isfinite(trace.values))
        self.parts.append((trace_id, t[rows], codes[cols], trace.values[rows, cols]))
        self.pending += len(rows)
        if self.pending >= _SAMPLE_CHUNK:
            self.flush()

    def flush(self) -> None:
        if not self.parts:
            return
        names = sorted(self.vocabulary, key=self.vocabulary.get)
        frame = pd.DataFrame({
            "trace_id": np.concatenate([np.full(len(p[1]), p[0], dtype=np.int64) for p in self.parts]),
            "t_s": np.concatenate([p[1] for p in self.parts]),
            "metric": pd.Categorical.from_codes(np.concatenate([p[2] for p in self.parts]), categories=names),
            "value": np.concatenate([p[3] for p in self.parts])})
        self.written += insert_rows(self.conn, "trace_samples", frame)
        self.parts, self.pending = [], 0


def import_lumos(registry: Registry, root: Path | str, cloud: str | None = None,
                 progress: Callable[[int, int], None] | None = None) -> ImportSummary:
    """Import one cloud folder of the Lumos dataset into `registry` (one transaction); see the module doc."""
    name, run_dirs = discover(Path(root), cloud)
    summary = ImportSummary(cloud=name, run_folders=len(run_dirs))
    with registry.begin() as conn:
        if conn.dialect.name == "duckdb":
            conn.exec_driver_sql("SET enable_progress_bar = false")
        have = _existing_uids(conn, "runs") | _existing_uids(conn, "traces")
        parsed: list[ParsedRun] = []
        for i, rd in enumerate(run_dirs):
            if rd.interval_s and {_uid("run", name, rd.interval_s, rd), _uid("trace", name, rd.interval_s, rd)} <= have:
                summary.already_present += 1          # known already: not even parsed
            else:
                run = parse_run(rd)
                if run.problem:
                    summary.skip(run.problem)
                else:
                    parsed.append(run)
            if progress:
                progress(i + 1, len(run_dirs))
        node_ids = _ensure_nodes(conn, name, sorted({r.rd.vm for r in parsed}), summary)
        apps = {r.rd.app: f"{framework_of(r)} {r.report.get('workload') or r.rd.app} ({datasize_of(r)}), "
                          "Lumos dataset" for r in parsed}
        app_ids = _ensure_apps(conn, apps, summary)
        _write_runs_and_traces(conn, name, parsed, node_ids, app_ids, summary)
    return summary


def _write_runs_and_traces(conn, cloud: str, parsed: list[ParsedRun], node_ids: dict[str, int],
                           app_ids: dict[str, int], summary: ImportSummary) -> None:
    have_runs, have_traces = _existing_uids(conn, "runs"), _existing_uids(conn, "traces")
    now = utcnow()
    runs, traces, phases, signatures = [], [], [], []
    todo = []
    for run in parsed:
        times = interval = None
        if run.samples is not None:
            times, interval = sample_times(run.samples, run.rd.interval_s)
        interval_s = run.rd.interval_s or interval
        run_uid = _uid("run", cloud, interval_s, run.rd)
        if run_uid in have_runs:
            summary.already_present += 1
            continue
        runs.append({"uid": run_uid, "app_id": app_ids[run.rd.app], "node_id": node_ids[run.rd.vm],
                     "threads": None, "time_s": run.elapsed_s, "source": "lumos", "created_at": now})
        trace_uid = _uid("trace", cloud, interval_s, run.rd)
        if run.samples is None or not len(run.samples) or trace_uid in have_traces:
            summary.runs_without_trace += run.samples is None or not len(run.samples)
            continue
        todo.append((run, times, interval_s, trace_uid, run_uid))
    trace_ids = allocate_ids(conn, "traces_id_seq", len(todo))
    phase_ids = allocate_ids(conn, "phases_id_seq", len(todo))
    for (run, times, interval_s, trace_uid, run_uid), trace_id, phase_id in zip(todo, trace_ids, phase_ids,
                                                                               strict=True):
        meta = {"cloud": cloud, "vm_type": run.rd.vm, "folder": run.rd.folder, "run": run.rd.run,
                "run_uid": run_uid, "report": run.report}
        traces.append({"trace_id": trace_id, "uid": trace_uid, "app_id": app_ids[run.rd.app],
                       "node_id": node_ids[run.rd.vm], "command_json": None, "exit_status": None,
                       "status": "ok", "wall_s": run.elapsed_s, "threads": None, "interval_s": interval_s,
                       "source": "lumos", "started_at": _started_at(run.report), "meta_json": json.dumps(meta),
                       **capacity({n: run.samples.column(n) for n in _CAPACITY_COLUMNS
                                   if run.samples.column(n) is not None}, interval_s)})
        end = max(float(times[-1]) + (interval_s or 0.0), run.elapsed_s)
        phases.append({"phase_id": phase_id, "trace_id": trace_id, "idx": 0, "name": "whole", "method": "whole",
                       "start_s": 0.0, "end_s": end, "weight": 1.0, "time_s": run.elapsed_s,
                       "iterations": None, "calls": None})
        sig = {("sar", k): v for k, v in sar_signature(run.samples, ncpu=vm_shape(run.rd.vm).vcpus,
                                                       wall_s=run.elapsed_s).items()}
        sig.update({("meta", k): v for k, v in meta_signature(framework_of(run), datasize_of(run)).items()})
        signatures.extend({"owner_kind": "phase", "owner_id": phase_id, "source": s, "metric": m, "value": v}
                          for (s, m), v in sig.items())
    insert_rows(conn, "runs", runs)
    insert_rows(conn, "traces", traces)
    insert_rows(conn, "phases", phases)
    insert_rows(conn, "signatures", signatures)
    samples = _SampleBuffer(conn)        # after their traces: trace_samples references traces
    for (run, times, *_), trace_id in zip(todo, trace_ids, strict=True):
        samples.add(trace_id, times, run.samples)
    samples.flush()
    summary.runs_added = len(runs)
    summary.traces_added = len(traces)
    summary.samples_added = samples.written
