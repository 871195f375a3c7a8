"""Hypothesis strategies that damage a valid bundle, for tests/test_fuzz_bundles.py.

Contract checked: importing any damaged bundle into an empty registry either raises UserError (one
clear line) or imports correctly: the registry then holds exactly the bundle's rows (read here from
its files, independently of the importer) and passes `doctor`; nothing else may escape, and a
failed import writes nothing.
"""

import io
import json
import math
import shutil
from collections import Counter
from datetime import date, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa
from hypothesis import strategies as st

from registry.io.bundle import import_bundle
from registry.db import open_registry
from registry.db.relations import OWNER_TABLES, SPECS
from registry.doctor import check
from registry.errors import UserError

TABLES = ["nodes", "node_caches", "ub_configs", "profiles", "profile_runs", "profile_reps", "traces", "phases",
          "signatures", "runs", "predictions"]
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                           max_leaves=8)
cell = st.none() | st.integers(-2**40, 2**40) | st.floats(allow_nan=True) | st.text(max_size=6) | st.booleans()


@st.composite
def damage(draw):
    """A list of (kind, table, payload) edits to apply to a good bundle."""
    kind = draw(st.sampled_from(["manifest", "bytes", "truncate", "delete", "frame", "column"]))
    table = draw(st.sampled_from(TABLES))
    if kind == "manifest":
        payload = draw(json_values | st.fixed_dictionaries({"format": st.just("nodereg-bundle"),
                                                             "schema_version": st.integers(-3, 50),
                                                             "format_version": st.integers(-1, 3)}))
    elif kind == "bytes":
        payload = draw(st.binary(max_size=64))
    elif kind == "truncate":
        payload = draw(st.floats(0.0, 0.99))
    elif kind == "frame":
        cols = draw(st.lists(st.sampled_from(["name", "node_id", "uid", "time_s", "junk", "run_id", "trace_id"]),
                             min_size=1, max_size=4, unique=True))
        payload = {c: draw(st.lists(cell, min_size=1, max_size=3)) for c in cols}
    elif kind == "column":
        payload = draw(st.sampled_from(["drop", "to_text", "nullify"]))
    else:
        payload = None
    return kind, table, payload


def apply(bundle: Path, edit) -> None:
    kind, table, payload = edit
    file = bundle / f"{table}.parquet"
    if kind in ("truncate", "delete", "column") and not file.exists():
        return  # an earlier edit removed it
    if kind == "manifest":
        (bundle / "manifest.json").write_text(json.dumps(payload, default=str))
    elif kind == "bytes":
        file.write_bytes(payload)
    elif kind == "truncate":
        data = file.read_bytes()
        file.write_bytes(data[: int(len(data) * payload)])
    elif kind == "delete":
        file.unlink()
    elif kind == "frame":
        n = max(len(v) for v in payload.values())
        frame = pd.DataFrame({c: (v * n)[:n] for c, v in payload.items()})
        buf = io.BytesIO()
        try:
            pq.write_table(pa.Table.from_pandas(frame.astype(object).astype(str)), buf)
        except pa.ArrowException:
            return
        file.write_bytes(buf.getvalue())
    elif kind == "column":
        try:
            frame = pq.read_table(file).to_pandas()
        except pa.ArrowException:
            return  # an earlier edit already broke this file
        if frame.columns.size == 0:
            return
        col = frame.columns[-1]
        if payload == "drop":
            frame = frame.drop(columns=[col])
        elif payload == "to_text":
            frame[col] = frame[col].astype(str) + "x"
        else:
            frame[col] = None
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), file)


def run_case(good: Path, work: Path, db_url: str, edits) -> str:
    """Import a damaged copy of `good` into the empty registry `db_url`; returns 'rejected' or
    'imported'; raises on a contract breach."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(good, work)
    for edit in edits:
        apply(work, edit)
    reg = open_registry(db_url)
    try:
        with reg.connect() as conn:
            before = conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar()
        try:
            with reg.begin() as conn:
                import_bundle(conn, work)
        except UserError as exc:
            assert "\n" not in str(exc)
            with reg.connect() as conn:
                assert conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar() == before
            return "rejected"
        with reg.connect() as conn:
            problems = [p for p in check(conn) if p.kind != "incomplete"]
            assert problems == [], problems
            for table, want in expected_rows(work).items():
                got = pd.read_sql(sa.text(f"SELECT * FROM {table}"), conn)
                columns = [c for c in got.columns if c not in _KEYS[table]]
                assert _rows(got, columns) == _rows(want, columns), table
        return "imported"
    finally:
        reg.close()


# surrogate keys and the columns pointing at them: local to a registry, re-keyed on import
_KEYS = {spec.table: {spec.pk, *spec.refs, *(spec.parent or ())[:1], *(("owner_id",) if spec.table == "signatures"
                                                                   else ())} - {None} for spec in SPECS}


def expected_rows(bundle: Path) -> dict[str, pd.DataFrame]:
    """What an import of `bundle` into an empty registry holds, per table, by the documented rules:
    every row, a child only with its parent (a table's rows go when its parent table is gone), one
    row per natural identity (the first)."""
    kept, out = {}, {}
    for spec in SPECS:
        if spec.derived:   # computed by the importer (tests/test_profile_vectors.py), never read from a bundle
            continue
        file = bundle / f"{spec.table}.parquet"
        frame = pq.read_table(file).to_pandas() if file.exists() else pd.DataFrame()
        if spec.parent and not frame.empty:
            column, parent = spec.parent
            frame = frame[frame[column].isin(kept.get(parent, set()))]
        elif spec.table == "signatures" and not frame.empty:
            owned = [(frame["owner_kind"] == kind) & frame["owner_id"].isin(kept.get(table, set()))
                     for kind, table in OWNER_TABLES.items()]
            frame = frame[np.logical_or.reduce(owned)]
        if spec.pk:
            kept[spec.table] = set(frame[spec.pk]) if spec.pk in frame else set()
        if spec.identity and spec.identity != ("uid",) and not frame.empty:
            frame = frame.drop_duplicates(list(spec.identity))
        out[spec.table] = frame
    return out


def _rows(frame: pd.DataFrame, columns: list[str]) -> Counter:
    """The rows as comparable tuples (a column the frame lacks is NULL)."""
    cells = [frame[c].tolist() if c in frame else [None] * len(frame) for c in columns]
    return Counter(tuple(_value(v) for v in row) for row in zip(*cells))


def _value(v):
    """One cell, comparable across Parquet and the database: NULL and NaN as None, times as ISO text,
    numbers (and text a number column took as one) as floats."""
    if v is None or v is pd.NaT or v is pd.NA:
        return None
    if isinstance(v, (datetime, date)):
        return pd.Timestamp(v).isoformat()
    if hasattr(v, "item"):
        v = v.item()
    try:
        number = float(v)
    except (TypeError, ValueError, OverflowError):
        return str(v)
    return None if math.isnan(number) else number
