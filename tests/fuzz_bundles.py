"""Hypothesis strategies that damage a valid bundle, for tests/test_fuzz_bundles.py.

Contract checked: importing any damaged bundle either raises UserError (one clear line) or imports
correctly (the registry passes `doctor`); nothing else may escape, and a failed import writes nothing.
"""

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa
from hypothesis import strategies as st

from registry.bundle import import_bundle
from registry.db import open_registry
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
    """Import a damaged copy of `good`; returns 'rejected' or 'imported'; raises on a contract breach."""
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
        return "imported"
    finally:
        reg.close()
