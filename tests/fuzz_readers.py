"""Hypothesis strategies that damage valid inputs of the readers other than bundles (see fuzz_bundles.py):
the runs CSV (`nodereg import runs`), Lumos folders (`nodereg import lumos`) and trace files (the
reader behind `nodereg match FILE.json`).

Contract checked by tests/test_fuzz_readers.py, through the real CLI on a fresh registry per case:
either exit 0 and the registry holds what a reference reading of the input says (and passes
`doctor`), or one line `error: ...` that is not an internal or a database error, and nothing written.
Each strategy starts from a valid input and applies 0-3 edits, so imports that must succeed are
tried along with those that must fail. Expected contents come from the generated input (for the
runs CSV, from an independent reference parse of it), never from the code under test.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from conftest import assert_one_line_error
from hypothesis import strategies as st
from lumos_synth import HEADER as SAR_HEADER
from lumos_synth import sar_rows, write_run

from registry.db import open_registry
from registry.doctor import check
from registry.errors import UserError
from registry.io.tracefile import Trace, read_trace

COUNTED = ["nodes", "apps", "runs", "traces", "trace_samples", "phases", "signatures", "predictions"]

# cells that trip number and text parsing: non-finite, out of range, other notations, unicode digits,
# separators, NUL, quotes
NASTY = st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "Infinity", "-1", "0", "0.0", "-0", "1e400",
                         "1e-400", "9" * 30, "2147483648", "2.5", "1_000", "\u0663", " 7 ", "+3", "0x10", "1e3",
                         "true", "null", '"', "\x00", "a\x0cb", "a\u2028b", "x,y", "\n", "\ufeff"])
odd_text = st.sampled_from(["", " ", "a\x00b", "\x00", "a/b", "x" * 300, "\u00fc\u2028"]) | st.text(max_size=5)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8) | NASTY,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=8)
bad_bytes = st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b"\x80"]) | \
    st.binary(min_size=1, max_size=16)


@st.composite
def byte_damage(draw):
    """An edit of a file's bytes: truncate, insert bad bytes, replace by garbage, or empty."""
    kind = draw(st.sampled_from(["truncate", "insert", "garbage", "empty"]))
    if kind == "truncate":
        return kind, draw(st.floats(0.0, 0.99))
    if kind == "insert":
        return kind, (draw(st.floats(0.0, 1.0)), draw(bad_bytes))
    if kind == "garbage":
        return kind, draw(st.binary(max_size=64))
    return kind, None


def apply_bytes(data: bytes, edit) -> bytes:
    kind, payload = edit
    if kind == "truncate":
        return data[: int(len(data) * payload)]
    if kind == "insert":
        at = int(len(data) * payload[0])
        return data[:at] + payload[1] + data[at:]
    if kind == "garbage":
        return payload
    if kind == "empty":
        return b""
    return data


@dataclass(frozen=True)
class FileCase:
    """A damaged file and how it is put in place ('file', 'directory' or 'missing'); short to print."""

    data: bytes
    form: str

    def __repr__(self) -> str:
        shown = self.data if len(self.data) <= 400 else self.data[:400] + b"..."
        return f"FileCase({shown!r} ({len(self.data)} bytes), {self.form!r})"

    def _repr_pretty_(self, printer, cycle) -> None:      # hypothesis prints dataclasses field by field
        printer.text(repr(self))


def place(path: Path, data: bytes, form: str) -> None:
    """Put the input where the reader looks: as a file, as a directory (in place of the file), or nowhere."""
    if form == "file":
        path.write_bytes(data)
    elif form == "directory":
        path.mkdir()


def fresh_registry(template: Path, work: Path) -> str:
    """A migrated, empty (or pre-filled) registry copied from `template`: fast, and no case sees another's rows."""
    db = work / "registry.duckdb"
    shutil.copyfile(template, db)
    return f"duckdb:///{db}"


@contextmanager
def reading(url: str):
    """One connection for all the checks of a case (opening a registry costs more than the queries)."""
    reg = open_registry(url)
    try:
        with reg.connect() as conn:
            yield conn
    finally:
        reg.close()


def rows(conn: sa.Connection, sql: str) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sa.text(sql))]


def counts(conn: sa.Connection) -> dict[str, int]:
    return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in COUNTED}


def assert_portable_text(conn: sa.Connection) -> None:
    """No stored name or description holds NUL: PostgreSQL refuses it in text, so an import that
    passes on DuckDB would fail there."""
    for table, column in (("apps", "name"), ("apps", "description"), ("nodes", "name")):
        assert not rows(conn, f"SELECT {column} FROM {table} WHERE strpos({column}, chr(0)) > 0"), (table, column)


def outcome(result) -> str:
    """'imported' or 'rejected'; an internal or database error, or anything but one `error:` line, fails."""
    if result.code == 0:
        assert "Traceback" not in result.err, result.err
        return "imported"
    assert_one_line_error(result)
    message = result.err.strip()
    assert not message.startswith(("error: internal error", "error: database error")), message
    return "rejected"


# ---------------------------------------------------------------------------------------------- runs CSV

RUN_COLUMNS = ["app", "node", "threads", "time_s"]
_ASCII_INT = re.compile(r"\+?[0-9]+")
_ASCII_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
MAX_THREADS = 2**31 - 1                     # runs.threads is an INTEGER column


def reference_runs(data: bytes) -> list[tuple] | None:
    """What a runs CSV holds, per its specification (registry/runs.py and docs), or None where it must be refused.

    Independent of the importer: the file is UTF-8 (a BOM allowed) read by the csv module; the header
    names app, node, threads and time_s exactly once each (extra columns allowed, names stripped);
    every non-blank record has no more cells than the header and all four; names after stripping
    are 1-200 characters, all printable (no NUL, line breaks or other control characters); threads is a plain whole number 1..2**31-1, time_s a plain
    decimal number, finite and > 0; at least one run.
    """
    try:
        text = data.decode("utf-8-sig")
        records = list(csv.reader(io.StringIO(text, newline="")))
    except (UnicodeDecodeError, csv.Error):
        return None
    if not records:
        return None
    header = [h.strip() for h in records[0]]
    if any(header.count(c) != 1 for c in RUN_COLUMNS):
        return None
    where = [header.index(c) for c in RUN_COLUMNS]
    rows = []
    for record in records[1:]:
        if not record:
            continue
        if len(record) > len(header) or max(where) >= len(record):
            return None
        app, node, threads, time_s = (record[i].strip() for i in where)
        if not all(0 < len(name) <= 200 and name.isprintable() for name in (app, node)):
            return None
        if not _ASCII_INT.fullmatch(threads) or not 1 <= int(threads) <= MAX_THREADS:
            return None
        if not _ASCII_FLOAT.fullmatch(time_s) or not (math.isfinite(float(time_s)) and float(time_s) > 0):
            return None
        rows.append((app, node, int(threads), float(time_s)))
    return rows or None


names = st.sampled_from(["lu", "cg", "n1", "n2", " ft ", "bt.C"]) | st.text(max_size=6) | NASTY
values = {"app": names, "node": names,
          "threads": st.integers(1, 256).map(str) | NASTY | st.integers(-2**40, 2**40).map(str),
          "time_s": st.floats(1e-3, 1e5).map(repr) | NASTY | st.floats().map(repr) | st.text(max_size=4)}


RUNS_EDITS = ["drop column", "duplicate column", "rename column", "pad column", "cell", "cell", "short row",
              "long row", "blank line", "spaces line", "huge field", "bytes"]


@st.composite
def runs_csv(draw):
    """A valid runs CSV (columns in any order, extra ones, 1-5 rows, some CSV dialect)
    after 0-3 edits of its header, cells, rows or bytes, put in place as a file (mostly), a directory
    or nothing."""
    header = draw(st.permutations(RUN_COLUMNS + draw(st.lists(st.sampled_from(["comment", "", "host"]),
                                                              max_size=2, unique=True))))
    good = {"app": st.sampled_from(["lu", "cg", " bt.C "]), "node": st.sampled_from(["n1", "n2"]),
            "threads": st.integers(1, 256).map(str), "time_s": st.floats(1e-3, 1e5).map(repr)}
    rows = [[draw(good.get(h, st.text(max_size=3))) for h in header] for _ in range(draw(st.integers(1, 5)))]
    damage = ("none", None)
    for edit in draw(st.lists(st.sampled_from(RUNS_EDITS), max_size=3)):
        col = draw(st.sampled_from(RUN_COLUMNS))
        i = header.index(col) if col in header else 0
        r = draw(st.integers(0, len(rows) - 1))
        if edit == "drop column" and col in header:
            header.pop(i)
            rows = [row[:i] + row[i + 1:] for row in rows]
        elif edit == "duplicate column":
            header.append(header[i])
            rows = [row + row[i:i + 1] for row in rows]
        elif edit == "rename column":
            header[i] = draw(st.sampled_from([header[i].upper(), header[i] + "_", "", "a pp"]))
        elif edit == "pad column":
            header[i] = f" {header[i]}\t"
        elif edit == "cell" and rows[r]:
            j = draw(st.integers(0, len(rows[r]) - 1))
            rows[r][j] = draw(values.get(header[j], NASTY) if j < len(header) else NASTY)
        elif edit == "short row":
            rows[r] = rows[r][:-1]
        elif edit == "long row":
            rows[r] = rows[r] + ["extra"]
        elif edit == "blank line":
            rows.insert(r, [])
        elif edit == "spaces line":
            rows.insert(r, ["   "])
        elif edit == "huge field" and rows[r]:
            rows[r][0] = "x" * 140_000          # longer than the csv module's field limit
        elif edit == "bytes":
            damage = draw(byte_damage())
    out = io.StringIO()
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]))
    writer = csv.writer(out, quoting=quoting, lineterminator=draw(st.sampled_from(["\n", "\r\n", "\r"])))
    writer.writerow(header)
    writer.writerows(rows)
    data = apply_bytes(out.getvalue().encode(), damage)
    return FileCase(data, draw(st.sampled_from(["file"] * 18 + ["directory", "missing"])))


def check_runs_case(cli, template: Path, work: Path, case) -> str:
    """Import one damaged runs CSV; the registry must hold exactly the reference rows, or nothing."""
    data, form = case.data, case.form
    url = fresh_registry(template, work)
    path = work / "runs.csv"
    place(path, data, form)
    result = outcome(cli("--db", url, "import", "runs", str(path)))
    expected = reference_runs(data) if form == "file" else None
    with reading(url) as conn:
        if result == "rejected":
            assert expected is None, (expected, data[:300])
            assert set(counts(conn).values()) == {0}
            return result
        assert expected is not None, ("imported a file the specification refuses", data[:300])
        stored = rows(conn, "SELECT a.name, n.name, r.threads, r.time_s, r.source FROM runs r "
                            "JOIN apps a ON a.app_id = r.app_id JOIN nodes n ON n.node_id = r.node_id")
        assert sorted(stored) == sorted((*r, "csv") for r in expected)
        assert sorted(rows(conn, "SELECT name FROM apps")) == sorted({(r[0],) for r in expected})
        assert sorted(rows(conn, "SELECT name, source FROM nodes")) == sorted({(r[1], "runs") for r in expected})
        assert_portable_text(conn)
        assert check(conn) == []
    return result


# ---------------------------------------------------------------------------------------------- Lumos folders

LUMOS_VMS = {"c6.large": 2, "g6.xlarge": 4}
LUMOS_APPS = ["spark_wc_tiny", "hadoop_sort_small", "hive_q_small"]     # hive: no `_<run>` suffix upstream
REPORT_KEYS = ["elapsed_time", "completed", "timestamp", "framework", "datasize", "workload"]
file_names = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="/\x00"), min_size=1,
                     max_size=12).filter(lambda s: s not in (".", ".."))
vm_names = st.sampled_from(["g6.99999999999xlarge", "s6.xlarge.99999999999999999999", "ecs.t5-c1m99999999.small",
                            "s6.xlarge.0", "r6.0xlarge", "x"]) | file_names
interval_names = st.sampled_from(["0 seconds", "0.001 s", "9" * 250 + " min", "5 minutes", "one second"])
clouds = st.sampled_from(["aws", "a b", "x\n", "-x", "", "cl/oud"]) | st.text(max_size=6)


@dataclass(frozen=True)
class LumosRun:
    vm: str
    folder: str
    app: str
    elapsed: str
    rows: int


@dataclass(frozen=True)
class LumosCase:
    interval_folder: bool
    runs: tuple[LumosRun, ...]
    edits: tuple
    cloud: str | None


@st.composite
def lumos_edit(draw, n_runs: int):
    r = draw(st.integers(0, n_runs - 1))
    kind = draw(st.sampled_from(["report", "report key", "report text", "report bytes", "report gone", "sar bytes",
                                 "sar gone", "sar cell", "sar stamp", "sar header", "sar row", "rename run",
                                 "rename vm", "rename interval", "stray", "root"]))
    if kind == "report":
        return kind, r, draw(json_values)
    if kind == "report key":
        return kind, r, draw(st.sampled_from(REPORT_KEYS)), draw(json_values)
    if kind == "report text":        # the words that end up in the app's description
        return "report key", r, draw(st.sampled_from(["workload", "framework", "datasize"])), draw(odd_text)
    if kind in ("report bytes", "sar bytes"):
        return kind, r, draw(byte_damage())
    if kind in ("report gone", "sar gone"):
        return kind, r, draw(st.sampled_from(["delete", "directory"]))
    if kind == "sar cell":
        return kind, r, draw(st.integers(0, 9)), draw(st.integers(1, len(SAR_HEADER) - 1)), \
            draw(NASTY | st.sampled_from(["1e308", "-1e308", "1.7976931348623157e308"]))
    if kind == "sar stamp":          # the timestamp column: sample times come from it
        return "sar cell", r, draw(st.integers(0, 9)), 0, draw(st.sampled_from(
            ["10:00:inf", "10:00:1e400", "10:00:nan", "25:61:99", "-1:00:00", "12:00", "", "2020-01-01 9:9:9"]))
    if kind == "sar header":
        return kind, r, draw(st.integers(0, len(SAR_HEADER) - 1)), draw(st.sampled_from(SAR_HEADER) | NASTY)
    if kind == "sar row":
        return kind, r, draw(st.integers(0, 9)), draw(st.sampled_from(["short", "long"]))
    if kind == "rename run":
        return kind, r, draw(file_names)
    if kind == "rename vm":
        return kind, r, draw(vm_names)
    if kind == "rename interval":
        return kind, r, draw(interval_names)
    if kind == "stray":
        return kind, r, draw(st.sampled_from(["file at root", "file at vm", "empty dir at root", "empty dir at vm"]))
    return kind, r, draw(st.sampled_from(["empty", "file", "missing"]))


@st.composite
def lumos_case(draw):
    """A small valid Lumos cloud folder (1-2 VM types, 1-2 workloads, 1-2 runs each, 2-5 sar rows) and
    0-3 edits of its reports, sar files, folder names and layout, and sometimes a --cloud name."""
    runs = []
    for vm in draw(st.lists(st.sampled_from(sorted(LUMOS_VMS)), min_size=1, max_size=2, unique=True)):
        for app in draw(st.lists(st.sampled_from(LUMOS_APPS), min_size=1, max_size=2, unique=True)):
            n = 1 if app.startswith("hive") else draw(st.integers(1, 2))
            for run in range(1, n + 1):
                folder = app if app.startswith("hive") else f"{app}_{run}"
                runs.append(LumosRun(vm, folder, app, f"{draw(st.floats(1.0, 500.0)):.3f}", draw(st.integers(2, 5))))
    edits = draw(st.lists(lumos_edit(len(runs)), max_size=3))
    cloud = draw(st.none() | st.none() | st.none() | clouds)
    return LumosCase(draw(st.booleans()), tuple(runs), tuple(edits), cloud)


def _sar_table(run: LumosRun) -> list[list]:
    return [list(SAR_HEADER)] + sar_rows(0.5, run.rows, LUMOS_VMS[run.vm], np.random.default_rng(run.rows))


def _write_sar(path: Path, table: list[list]) -> None:
    path.write_text("".join(",".join(str(v) for v in row) + "\n" for row in table))


def _edit_report(report: Path, kind: str, args) -> None:
    if kind == "report":
        report.write_text(json.dumps(args[0]))
    elif kind == "report key":
        try:
            doc = json.loads(report.read_text())
            doc[args[0]] = args[1]
            report.write_text(json.dumps(doc))
        except (ValueError, TypeError):
            pass              # an earlier edit made it something else than an object
    elif kind == "report bytes":
        report.write_bytes(apply_bytes(report.read_bytes(), args[0]))
    else:
        report.unlink()
        place(report, b"", args[0] if args[0] == "directory" else "missing")


def _edit_sar(sar: Path, table: list[list], kind: str, args) -> None:
    if kind == "sar bytes":
        sar.write_bytes(apply_bytes(sar.read_bytes(), args[0]))
        return
    if kind == "sar gone":
        sar.unlink()
        place(sar, b"", args[0] if args[0] == "directory" else "missing")
        return
    row = table[1 + args[0] % (len(table) - 1)] if kind != "sar header" else table[0]
    if kind == "sar cell":
        row[args[1] % len(row)] = args[2]
    elif kind == "sar header":
        row[args[0] % len(row)] = args[1]
    elif args[1] == "short":
        row.pop()
    else:
        row.append("1.0")
    _write_sar(sar, table)


def build_lumos(root: Path, case: LumosCase) -> tuple[set[int], set[int], bool]:
    """Write the case under `root`; returns the runs whose report, and whose sar.csv, are intact
    (their folder path included), and whether the cloud folder itself is still usable."""
    top = root / "1 second" if case.interval_folder else root
    report_ok, sar_ok, usable = set(range(len(case.runs))), set(range(len(case.runs))), True
    tables = {i: _sar_table(run) for i, run in enumerate(case.runs)}
    paths = {i: top / run.vm / run.folder for i, run in enumerate(case.runs)}
    for i, run in enumerate(case.runs):
        write_run(paths[i], {"completed": True, "elapsed_time": run.elapsed, "datasize": run.app.rsplit("_", 1)[1],
                             "workload": run.app.split("_")[1], "framework": run.app.split("_")[0],
                             "timestamp": "2020-11-19 12:00:00"}, tables[i][1:])
    for kind, r, *args in case.edits:
        folder = paths[r]
        if kind.startswith("report"):
            report_ok.discard(r)
            if (folder / "report.json").is_file():
                _edit_report(folder / "report.json", kind, args)
        elif kind.startswith("sar"):
            sar_ok.discard(r)
            if (folder / "sar.csv").is_file():
                _edit_sar(folder / "sar.csv", tables[r], kind, args)
        elif kind == "stray":
            where = root if args[0].endswith("root") else folder.parent
            if where.is_dir():
                (where / "stray").mkdir(exist_ok=True) if args[0].startswith("empty") else \
                    (where / "stray.txt").write_text("x")
        elif kind == "root":
            usable = False
            shutil.rmtree(root) if root.is_dir() else root.unlink(missing_ok=True)
            place(root, b"x", args[0]) if args[0] != "empty" else root.mkdir()
        else:        # a run, VM type or interval folder renamed: the runs below it are no longer intact
            old = {"rename run": folder, "rename vm": folder.parent, "rename interval": top}[kind]
            new = old.parent / args[0]
            if old.is_dir() and not new.exists() and (kind != "rename interval" or case.interval_folder):
                old.rename(new)
                top = new if kind == "rename interval" else top
                for i, p in paths.items():
                    if p.is_relative_to(old):
                        paths[i] = new / p.relative_to(old)
                        report_ok.discard(i)
                        sar_ok.discard(i)
    return report_ok, sar_ok, usable


def _finite_number_cells(table: list[list]) -> int:
    return sum(isinstance(v, (int, float)) and math.isfinite(v) for row in table[1:] for v in row)


def check_lumos_case(cli, template: Path, work: Path, case: LumosCase) -> str:
    """Import one damaged Lumos folder. Intact runs must be imported exactly (time, trace, every sample);
    the rest may be skipped but what is stored must be sound; a refusal writes nothing."""
    url = fresh_registry(template, work)
    root = work / "cloudy"
    root.mkdir()
    report_ok, sar_ok, usable = build_lumos(root, case)
    args = ["--db", url, "import", "lumos", str(root), "--json"] + (["--cloud", case.cloud] if case.cloud is not None
                                                                    else [])
    result = cli(*args)
    cloud = case.cloud if case.cloud is not None else root.name
    valid_cloud = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", cloud) is not None
    with reading(url) as conn:
        if outcome(result) == "rejected":
            assert not (usable and report_ok and valid_cloud), (result.err, report_ok)
            assert set(counts(conn).values()) == {0}
            return "rejected"
        assert valid_cloud, f"imported under the cloud name {cloud!r}"
        summary, n = json.loads(result.out), counts(conn)
        assert (n["nodes"], n["apps"], n["runs"], n["traces"], n["trace_samples"]) == (
            summary["nodes_added"], summary["apps_added"], summary["runs_added"], summary["traces_added"],
            summary["samples_added"])
        assert summary["already_present"] == 0
        assert summary["runs_added"] + sum(summary["skipped"].values()) == summary["run_folders"]
        runs = rows(conn, "SELECT n.name, a.name, r.time_s FROM runs r JOIN apps a ON a.app_id = r.app_id "
                          "JOIN nodes n ON n.node_id = r.node_id")
        for i in report_ok:
            run = case.runs[i]
            assert (f"{cloud}/{run.vm}", run.app, float(run.elapsed)) in runs, (run, runs)
        traces = {(meta["vm_type"], meta["folder"]): (wall, samples) for meta, wall, samples in (
            (json.loads(m), w, k) for m, w, k in rows(conn, "SELECT t.meta_json, t.wall_s, (SELECT count(*) FROM "
                                                            "trace_samples s WHERE s.trace_id = t.trace_id) "
                                                            "FROM traces t"))}
        for i in report_ok & sar_ok:
            run = case.runs[i]
            assert traces.get((run.vm, run.folder)) == (float(run.elapsed), _finite_number_cells(_sar_table(run))), run
        assert all(math.isfinite(t) and t > 0 for *_, t in runs)
        for table, cols in (("trace_samples", "t_s, value"), ("signatures", "value"),
                            ("phases", "start_s, end_s, weight, time_s")):
            assert all(math.isfinite(v) for row in rows(conn, f"SELECT {cols} FROM {table}") for v in row), table
        assert all(0 < c < 2**31 for (c,) in rows(conn, "SELECT n_cpus FROM nodes WHERE n_cpus IS NOT NULL"))
        assert_portable_text(conn)
        assert check(conn) == []
    return "imported"


# ---------------------------------------------------------------------------------------------- trace files

TRACE_KEYS = ["format", "version", "name", "node", "host", "command", "exit_status", "status", "wall_s", "interval_s",
              "started_at", "sources", "phases", "samples", "threads", "cachegrind", "meta"]
PHASE_KEYS = ["name", "method", "start_s", "end_s", "weight", "time_s", "calls", "intervals", "signature",
              "iterations"]
numbers = st.sampled_from([float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e308, -1e308, 2**63, 10**400,
                           True])


@st.composite
def trace_edit(draw):
    """One edit of a trace document: a top-level, phase, signature or samples value replaced or removed."""
    kind = draw(st.sampled_from(["key", "key", "drop key", "phase key", "phase key", "drop phase key", "metric",
                                 "phases", "version", "sample column", "huge integer", "identifier", "bytes"]))
    value = draw(json_values | numbers)
    if kind in ("key", "drop key", "huge integer"):
        return kind, draw(st.sampled_from(TRACE_KEYS)), value
    if kind == "identifier":
        return "key", draw(st.sampled_from(["name", "node", "status", "host"])), draw(odd_text)
    if kind in ("phase key", "drop phase key"):
        return kind, (draw(st.integers(0, 2)), draw(st.sampled_from(PHASE_KEYS))), value
    if kind == "metric":
        return kind, (draw(st.integers(0, 2)), draw(st.sampled_from(["cpu_util", "wss_llc", "new"]))), value
    if kind == "phases":
        return kind, draw(st.sampled_from(["empty", "duplicate", "reverse"])), value
    if kind == "version":
        return kind, None, draw(st.sampled_from([0, 2, -1, "1", 1.0, None]))
    if kind == "sample column":
        return kind, draw(st.sampled_from(["t_s", "cpu_util"])), value
    return kind, None, draw(byte_damage())


_HUGE = "<huge integer>"


def apply_trace_edits(doc: dict, edits) -> bytes:
    """The trace file's bytes after the edits (json.dumps writes NaN and Infinity as JSON does not allow)."""
    damage = []
    for kind, where, value in edits:
        phases = doc.get("phases") if isinstance(doc.get("phases"), list) else []
        phase = phases[where[0] % len(phases)] if phases and isinstance(where, tuple) else None
        if kind == "key":
            doc[where] = value
        elif kind == "drop key":
            doc.pop(where, None)
        elif kind == "phase key" and isinstance(phase, dict):
            phase[where[1]] = value
        elif kind == "drop phase key" and isinstance(phase, dict):
            phase.pop(where[1], None)
        elif kind == "metric" and isinstance(phase, dict) and isinstance(phase.get("signature"), dict):
            phase["signature"].setdefault("proc", {})
            if isinstance(phase["signature"]["proc"], dict):
                phase["signature"]["proc"][where[1]] = value
        elif kind == "phases" and isinstance(doc.get("phases"), list):
            doc["phases"] = {"empty": [], "duplicate": phases + phases, "reverse": phases[::-1]}[where]
        elif kind == "version":
            doc["version"] = value
        elif kind == "sample column" and isinstance(doc.get("samples"), dict):
            doc["samples"][where] = value
        elif kind == "huge integer":       # more digits than Python's int() takes by default (4300)
            doc[where] = _HUGE
        elif kind == "bytes":
            damage.append(value)
    data = json.dumps(doc).replace(json.dumps(_HUGE), "9" * 5000).encode()
    for edit in damage:
        data = apply_bytes(data, edit)
    return data


@st.composite
def trace_file(draw):
    """Edits (0-3) of a valid trace file, and how the file is put in place (mostly as a file)."""
    return tuple(draw(st.lists(trace_edit(), max_size=3))), draw(st.sampled_from(["file"] * 18 + ["directory",
                                                                                                  "missing"]))


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def assert_well_formed(trace: Trace) -> None:
    """What read_trace promises its callers: the documented fields with their types, numbers finite."""
    assert isinstance(trace.name, str) and isinstance(trace.node, str) and isinstance(trace.status, str)
    assert all(isinstance(a, str) for a in trace.command)
    assert isinstance(trace.exit_status, int) and not isinstance(trace.exit_status, bool)
    assert _finite(trace.wall_s) and trace.wall_s >= 0 and _finite(trace.interval_s) and trace.interval_s >= 0
    assert trace.threads is None or (isinstance(trace.threads, int) and not isinstance(trace.threads, bool)
                                     and trace.threads >= 1)
    assert isinstance(trace.started_at, str) and all(isinstance(s, str) for s in trace.sources)
    assert isinstance(trace.samples, dict) and isinstance(trace.meta, dict)
    for p in trace.phases:
        assert isinstance(p.name, str) and isinstance(p.method, str)
        assert all(_finite(v) for v in (p.start_s, p.end_s, p.weight, p.time_s)) and p.start_s <= p.end_s
        assert p.weight >= 0 and p.time_s >= 0
        assert isinstance(p.calls, int) and not isinstance(p.calls, bool) and p.calls >= 1
        assert p.iterations is None or _finite(p.iterations)
        assert all(len(iv) == 2 and all(_finite(v) for v in iv) for iv in p.intervals)
        assert all(isinstance(src, str) and isinstance(m, dict) and all(
            isinstance(k, str) and isinstance(v, float) and not math.isinf(v) for k, v in m.items())
            for src, m in p.signature.items())


@dataclass(frozen=True)
class TraceTemplate:
    """A profiled registry to copy, what `doctor` says of it, and a valid trace document on its base
    node (short to print)."""

    registry: Path
    problems: list
    doc: dict

    def __repr__(self) -> str:
        return f"TraceTemplate({self.registry.name}, trace of {self.doc['name']!r} on {self.doc['node']!r})"

    _repr_pretty_ = FileCase._repr_pretty_


def check_trace_case(cli, template: TraceTemplate, work: Path, case) -> str:
    """`nodereg match FILE` on a damaged trace file. The reader refuses it with one line (and match fails
    with that line, writing nothing), or returns a well-formed trace (the original when no edit
    changed it); match then stores one prediction per ranked node, or fails clearly writing nothing."""
    edits, form = case
    good = template.doc
    url = fresh_registry(template.registry, work)
    path = work / "trace.json"
    data = apply_trace_edits(json.loads(json.dumps(good)), edits)
    place(path, data, form)
    try:
        trace, refusal = read_trace(path), None
    except UserError as exc:
        trace, refusal = None, str(exc)
    if trace is not None:
        assert_well_formed(trace)
        if not edits:
            assert (trace.name, trace.node, trace.wall_s) == (good["name"], good["node"], good["wall_s"])
            assert [(p.start_s, p.end_s, p.weight, p.signature) for p in trace.phases] == \
                [(p["start_s"], p["end_s"], p["weight"], p["signature"]) for p in good["phases"]]
    result = cli("--db", url, "match", str(path), "--json")
    with reading(url) as conn:
        if outcome(result) == "rejected":
            assert refusal is None or result.err.strip() == f"error: {refusal}", (refusal, result.err)
            n = counts(conn)
            assert (n["apps"], n["predictions"]) == (0, 0)
            return "rejected"
        assert refusal is None, ("match accepted what the reader refuses", refusal)
        ranked = json.loads(result.out)["predictions"]
        stored = rows(conn, "SELECT n.name, p.predicted_s, p.node_rank FROM predictions p "
                            "JOIN nodes n ON n.node_id = p.node_id")
        assert sorted(stored) == sorted((p["node"], p["predicted_s"], p["rank"]) for p in ranked)
        assert all(_finite(p) and p > 0 for _, p, _ in stored)
        assert_portable_text(conn)
        assert check(conn) == template.problems          # nothing new
    return "imported"
