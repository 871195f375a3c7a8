"""A stored profile's runs packed into one row of `profile_vectors`: what `nodereg match` reads of it.

A projection needs, per run of every node's latest profile, three numbers: the config (its thread
count is the config's), the cache level its working set fell in, and the throughput (work per
second of the whole node); and per profile its counts of runs and of unstable ones and its
repetitions' dispersion (the caveats and the intervals: v_profile_summary). Computed from
`profile_runs` at match time, a 10,000-node x 300-config registry is three million rows to compute and fetch on every match (about half of its time on DuckDB, and far worse
through PostgreSQL's row protocol); packed once per profile when the profile is stored (a profile's
runs never change afterwards), it is 10,000 rows of a few kilobytes. The same SQL (`PER_RUN`)
computes both, so the packed and the computed figures are the same numbers
(tests/test_profile_vectors.py).

Migration 22 packs the profiles a registry already holds (`pack_all`). A profile without a packed
row (one written by a tool that does not pack) is read through the SQL path, as are nodes
profiled on several hosts (their median over hosts is taken by the database): nothing is wrong,
only slower.
Bundles do not carry the packed rows (they hold config ids of the registry that wrote them): an
imported profile is packed again by the importer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from registry.db.read import fetch_chunks, read_arrays
from registry.db.statement import execute
from registry.db.write import insert_rows
from registry.errors import UserError

if TYPE_CHECKING:
    import sqlalchemy as sa

# one run: its config (ub_configs.config_id: the thread count is the config's), the cache level its
# working set fell in (-1: none recorded) and its throughput; 13 bytes, little-endian, unaligned
DTYPE = np.dtype([("config", "<i4"), ("level", "<i1"), ("throughput", "<f8")])
RECORD_BYTES = DTYPE.itemsize

# The cache level of each run, by backend: on DuckDB a scalar subquery on the signatures' key (a LEFT
# JOIN had DuckDB build its hash table from the millions of runs, 1.8 s of a 10,000-node match; the
# subquery, which DuckDB decorrelates, takes half the CPU); on PostgreSQL the LEFT JOIN, as its
# planner runs a correlated subquery once per run.
_LEVEL = {"duckdb": ("(SELECT lv.value FROM signatures lv WHERE lv.owner_kind = 'profile_run' AND lv.owner_id = "
                     "r.run_id AND lv.source = 'streams' AND lv.metric = 'ws_level' LIMIT 1)", ""),
          "postgresql": ("lv.value", "\n    LEFT JOIN signatures lv ON lv.owner_kind = 'profile_run' AND "
                         "lv.owner_id = r.run_id AND lv.source = 'streams' AND lv.metric = 'ws_level'")}
# throughput: bytes, else flops, else chains, else iterations x threads per second; an imported
# suite's 1 / median_s (registry.match.references). A compute kernel's is its flops even where it
# counts bytes too (gemm, no bandwidth figure): its N follows each node's caches, and bytes per
# flop, 8 (N + K) / (N K), differ between two nodes' Ns of one level (1.3x between N = 128 and 512)
THROUGHPUT = """CASE WHEN r.value IS NOT NULL     THEN 1.0 / NULLIF(r.median_s, 0)
                WHEN r.flops_per_rep > 0 AND r.bandwidth_gbs IS NULL THEN r.flops_per_rep / NULLIF(r.median_s, 0)
                WHEN r.bytes_per_rep > 0 THEN r.bytes_per_rep / NULLIF(r.median_s, 0)
                WHEN r.flops_per_rep > 0 THEN r.flops_per_rep / NULLIF(r.median_s, 0)
                WHEN r.latency_ns > 0    THEN c.threads / r.latency_ns
                ELSE r.iterations * c.threads / NULLIF(r.median_s, 0) END"""


def level_sql(dialect: str) -> tuple[str, str]:
    """(the expression of a run's cache level, the join it needs) for `dialect`."""
    return _LEVEL.get(dialect, _LEVEL["postgresql"])


def _per_run(dialect: str) -> str:
    level, join = level_sql(dialect)
    return f"""
SELECT r.profile_id, r.config_id, CAST(COALESCE({level}, -1) AS INTEGER) AS level,
       {THROUGHPUT} AS throughput, CASE WHEN r.unstable THEN 1 ELSE 0 END AS unstable, r.cv
FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id{join}
WHERE r.profile_id IN ({{ids}})
ORDER BY r.profile_id, r.run_id"""


def store_vectors(conn: sa.Connection, profile_ids: list[int]) -> int:
    """Pack the runs of these profiles (already stored through `conn`, in the caller's transaction)
    into `profile_vectors`, in the order they were measured; returns the rows written."""
    ids = sorted({int(p) for p in profile_ids})
    if not ids:
        return 0
    rows = []
    for start in range(0, len(ids), 1000):   # an IN list of bounded length
        chunk = ids[start:start + 1000]
        runs = read_arrays(conn, _per_run(conn.dialect.name).format(ids=", ".join(map(str, chunk))))
        profile = runs["profile_id"].astype(np.int64)
        cuts = np.flatnonzero(np.diff(profile)) + 1
        for part in np.split(np.arange(len(profile)), cuts):
            if not len(part):
                continue
            packed = np.empty(len(part), dtype=DTYPE)
            packed["config"] = runs["config_id"][part]
            packed["level"] = runs["level"][part]
            packed["throughput"] = runs["throughput"][part].astype(float)
            cv = runs["cv"][part].astype(float)
            measured = cv[~np.isnan(cv)]
            rows.append({"profile_id": int(profile[part[0]]), "runs": len(part),
                         "unstable": int(runs["unstable"][part].sum()), "cv_runs": len(measured),
                         "cv2_sum": float(np.sum(measured * measured)) if len(measured) else None,
                         "data": packed.tobytes()})
    return insert_rows(conn, "profile_vectors", rows)


def pack_all(conn: sa.Connection) -> int:
    """Pack every profile that has no packed row (migration 22 completes with this: the profiles a
    registry held before it); returns the rows written."""
    ids = execute(conn, "SELECT profile_id FROM profiles WHERE profile_id NOT IN "
                        "(SELECT profile_id FROM profile_vectors)").scalars().all()
    written = store_vectors(conn, ids)
    if conn.dialect.name == "postgresql":   # its planner plans v_profile_summary with them (a table just filled)
        execute(conn, "ANALYZE profile_vectors")
    return written


def store_uncompressed(conn: sa.Connection) -> None:
    """Migration 23: on PostgreSQL, keep `data` uncompressed (out of line, no pglz: every match reads
    all of it) and rewrite the rows stored before (a value is stored as the column's setting was
    when it was written); nothing on DuckDB. Out of line, not in the table's rows: v_profile_summary
    reads the table's small columns for every node (caveats, dispersion), and with 4 kB rows inline
    (toast_tuple_target) its scans read 40 MB instead of 2.5 MB per 10,000 profiles."""
    if conn.dialect.name != "postgresql":
        return
    execute(conn, "ALTER TABLE profile_vectors ALTER COLUMN data SET STORAGE EXTERNAL")
    execute(conn, "UPDATE profile_vectors SET data = data || ''::bytea")
    execute(conn, "ANALYZE profile_vectors")   # (every row was rewritten: the planner's statistics with them)


def read_packed(conn: sa.Connection, sql: str, params: dict):
    """The packed rows `sql` selects (columns node_id, runs, data) a thousand at a time, in the order
    selected: (node_id of each row, its count of runs, the runs as DTYPE records) per chunk. The
    caller fills its arrays chunk by chunk: at 10,000 profiles the 39 MB are never all in memory as
    Python objects, nor joined into one copy."""
    for chunk in fetch_chunks(conn, sql, params):
        node = np.array([r[0] for r in chunk], dtype=np.int64)
        counts = np.array([r[1] for r in chunk], dtype=np.int64)
        data = b"".join([r[2] for r in chunk])
        if len(data) != int(counts.sum()) * DTYPE.itemsize:
            raise UserError("the registry's packed profiles (profile_vectors) do not hold their counts of runs: "
                            "`nodereg doctor --fix` removes the damaged ones (their profiles are then read from "
                            "their runs)")
        yield node, counts, np.frombuffer(data, dtype=DTYPE)
