"""Reading a suite's profiles as a matrix: the form the cross-suite readers (evaluation,
cross-architecture prediction) need, one row per node and one column per config.

A suite is 'nodereg' (our kernels: microbenchmarks.suite NULL or 'nodereg') or an imported one
('sparecores'). Values are profile_runs.median_s, time-like (lower is faster) in every suite, so a
reader never needs to know which figures were rates. Each node contributes its latest profile in
the suite, by the one rule every reader uses (v_latest_profile, newest_in_suite).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from registry.db.read import read_arrays, read_frame

if TYPE_CHECKING:
    from registry.db import Registry

_SUITE = "COALESCE(m.suite, 'nodereg')"

_COSTS = f"""
SELECT lp.node_id, pr.config_id, pr.median_s
FROM v_latest_profile lp
JOIN profile_runs pr ON pr.profile_id = lp.profile_id
JOIN ub_configs c ON c.config_id = pr.config_id
JOIN microbenchmarks m ON m.ub_id = c.ub_id
WHERE lp.suite = :suite AND lp.newest_in_suite AND {_SUITE} = :suite
"""
NODE_NAMES = "SELECT node_id AS id, name FROM nodes"
_CONFIG_KEYS = "SELECT config_id AS id, config_key AS name FROM ub_configs"

NODE_COLUMNS = ["vendor", "architecture", "cpu_vendor", "cpu_family", "cpu_model", "n_cpus", "cores",
                "memory_bytes", "source"]


def suite_costs(reg: Registry, suite: str = "sparecores", nodes: Iterable[str] | None = None):
    """DataFrame: index node name, columns config_key, values median_s (time-like, lower is faster)
    from each node's latest profile in `suite`; NaN where a node's profile lacks a config. Only the
    named `nodes` when given (those without a profile in the suite are absent)."""
    with reg.connect() as conn:
        long = read_arrays(conn, _COSTS, {"suite": suite})
        frame = wide(long["node_id"], long["config_id"], long["median_s"],
                     read_arrays(conn, NODE_NAMES), read_arrays(conn, _CONFIG_KEYS), "node", "config_key")
    return frame if nodes is None else frame.loc[frame.index.isin(set(nodes))]


def wide(row_ids, col_ids, values, row_names: dict, col_names: dict, row_label: str, col_label: str):
    """A long table of (row id, column id, value) as a DataFrame indexed by the ids' names (both
    sorted), NaN where no value; where an id pair repeats, its first value. In numpy, not a pandas
    pivot: a registry of 2,700 imported node types has a million values, with names as strings
    (`match --from-runs` answers in under a second). `row_names`/`col_names`: columns id, name."""
    import numpy as np
    import pandas as pd

    def codes(ids, names):
        ids = np.asarray(ids, dtype=np.int64)
        seen = np.bincount(ids) if len(ids) else np.zeros(0, dtype=np.int64)   # database ids: small integers
        present = np.flatnonzero(seen)
        lut = np.zeros(len(seen), dtype=np.int64)
        lut[present] = np.arange(len(present))
        code = lut[ids]
        name_of = dict(zip(names["id"].astype(np.int64).tolist(), names["name"].tolist()))
        labels = np.array([str(name_of.get(i, i)) for i in present.tolist()], dtype=object)
        order = np.argsort(labels, kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank[code], labels[order]

    r, row_labels = codes(row_ids, row_names)
    c, col_labels = codes(col_ids, col_names)
    matrix = np.full((len(row_labels), len(col_labels)), np.nan)
    matrix[r[::-1], c[::-1]] = np.asarray(values, dtype=float)[::-1]   # the first of a repeated pair wins
    return pd.DataFrame(matrix, index=pd.Index(row_labels, name=row_label), columns=pd.Index(col_labels, name=col_label))


def node_table(reg: Registry):
    """DataFrame: index node name, columns NODE_COLUMNS (vendor, architecture, CPU vendor and family, ...)."""
    with reg.connect() as conn:
        frame = read_frame(conn, f"SELECT name, {', '.join(NODE_COLUMNS)} FROM nodes ORDER BY name")
    return frame.set_index("name")
