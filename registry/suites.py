"""Reading a suite's profiles as a matrix: the form the cross-suite readers (evaluation,
cross-architecture prediction) need, one row per node and one column per config.

A suite is 'nodereg' (our kernels: microbenchmarks.suite NULL or 'nodereg') or an imported one
('sparecores'). Values are profile_runs.median_s, time-like (lower is faster) in every suite, so a
reader never needs to know which figures were rates. Each node contributes its latest profile in
the suite, by the one rule every reader uses (v_latest_profile, newest_in_suite).
"""

from __future__ import annotations

from collections.abc import Iterable

from registry.db import Registry
from registry.db.read import read_frame

_SUITE = "COALESCE(m.suite, 'nodereg')"

_COSTS = f"""
SELECT n.name AS node, c.config_key, pr.median_s
FROM v_latest_profile lp
JOIN nodes n ON n.node_id = lp.node_id
JOIN profile_runs pr ON pr.profile_id = lp.profile_id
JOIN ub_configs c ON c.config_id = pr.config_id
JOIN microbenchmarks m ON m.ub_id = c.ub_id
WHERE lp.suite = :suite AND lp.newest_in_suite AND {_SUITE} = :suite
"""

NODE_COLUMNS = ["vendor", "architecture", "cpu_vendor", "cpu_family", "cpu_model", "n_cpus", "cores",
                "memory_bytes", "source"]


def suite_costs(reg: Registry, suite: str = "sparecores", nodes: Iterable[str] | None = None):
    """DataFrame: index node name, columns config_key, values median_s (time-like, lower is faster)
    from each node's latest profile in `suite`; NaN where a node's profile lacks a config. Only the
    named `nodes` when given (those without a profile in the suite are absent)."""
    import pandas as pd

    with reg.connect() as conn:
        long = read_frame(conn, _COSTS, {"suite": suite})
    if nodes is not None:
        long = long[long["node"].isin(set(nodes))]
    if long.empty:
        return pd.DataFrame(index=pd.Index([], name="node"), columns=pd.Index([], name="config_key"), dtype=float)
    wide = long.pivot_table(index="node", columns="config_key", values="median_s", aggfunc="first")
    return wide.sort_index().sort_index(axis=1).astype(float)


def node_table(reg: Registry):
    """DataFrame: index node name, columns NODE_COLUMNS (vendor, architecture, CPU vendor and family, ...)."""
    with reg.connect() as conn:
        frame = read_frame(conn, f"SELECT name, {', '.join(NODE_COLUMNS)} FROM nodes ORDER BY name")
    return frame.set_index("name")
