"""Microbenchmark configs as the references of a projection, seen from a base node.

A config is a reference when the base node's latest profile measured it: its signature there (every
source but the thesis descriptors' bookkeeping) places it among the phases; its *throughput* (work
done per second by the whole node) on every registered node says how times move between nodes.

Thread counts: a phase that kept all the base node's CPUs busy is assumed to use all of a target's
CPUs (an OpenMP program does, by default), so on each node the config's counterpart is the one
measured at that node's thread count; a serial phase compares 1-thread configs everywhere. The
time of a fixed amount of work scales with 1 / throughput, so moving from 2 cores to 1 changes
both the per-core speed and the parallelism at once.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlalchemy as sa

from registry.db.read import read_arrays, read_frame
from registry.errors import UserError
from registry.models.base import ReferenceSet

# numbers only, one row per run of every node's latest profile: strings (names, keys) are mapped
# on from the small tables below. `combo` is the config and the cache level its working set fits on
# that node (ws_level, < 63) in one integer; the throughput (work per second of the whole node:
# bytes, else flops, else chains, else iterations x threads) is computed by the database.
_RUNS = """
SELECT * FROM (
SELECT p.node_id, c.threads,
       CAST(r.config_id * 64 + COALESCE(lv.value, -1) + 1 AS BIGINT) AS combo,
       CASE WHEN r.bytes_per_rep > 0 THEN r.bytes_per_rep / NULLIF(r.median_s, 0)
            WHEN r.flops_per_rep > 0 THEN r.flops_per_rep / NULLIF(r.median_s, 0)
            WHEN r.latency_ns > 0    THEN c.threads / r.latency_ns
            ELSE r.iterations * c.threads / NULLIF(r.median_s, 0) END AS throughput
FROM profile_runs r
JOIN (SELECT node_id, max(profile_id) AS profile_id FROM profiles GROUP BY node_id) p
     ON p.profile_id = r.profile_id
JOIN ub_configs c ON c.config_id = r.config_id
LEFT JOIN signatures lv ON lv.owner_kind = 'profile_run' AND lv.owner_id = r.run_id
     AND lv.source = 'streams' AND lv.metric = 'ws_level') runs
WHERE throughput > 0"""
_CONFIGS = """
SELECT c.config_id, u.name AS ub, u.family, c.placement, c.params_json
FROM ub_configs c JOIN microbenchmarks u ON u.ub_id = c.ub_id"""
_NODES = "SELECT node_id, name AS node, n_cpus FROM nodes"
_FEATURES = """
SELECT r.config_id, s.source, s.metric, s.value FROM signatures s
JOIN profile_runs r ON s.owner_kind = 'profile_run' AND s.owner_id = r.run_id
WHERE r.profile_id = (SELECT max(profile_id) FROM profiles WHERE node_id = :node) AND s.source <> 'streams'"""


@dataclass
class Profiles:
    """Every node's latest profile, reduced to what projection needs: one entry per run, as arrays
    of integer codes (a 10,000-node registry has millions of runs; strings would dominate)."""

    base: str
    node_names: np.ndarray      # node code -> name
    key_names: np.ndarray       # key code -> what the config is (see `_family_key`)
    node: np.ndarray            # per run: node code
    key: np.ndarray             # per run: key code
    threads: np.ndarray         # per run
    placement_names: np.ndarray # placement code -> name
    placement: np.ndarray       # per run: placement code
    config_id: np.ndarray       # per run
    throughput: np.ndarray      # per run: work per second of the whole node
    features: pd.DataFrame      # the base node's runs: index config_id; columns 'source.metric'
    n_cpus: dict[str, int]

    @property
    def base_code(self) -> int:
        return int(np.flatnonzero(self.node_names == self.base)[0])

    @functools.cached_property
    def thread_counts(self) -> pd.DataFrame:
        """The distinct (node code, thread count) pairs measured."""
        code = pd.unique(self.node * (1 << 20) + self.threads)
        return pd.DataFrame({"node": code >> 20, "threads": code & ((1 << 20) - 1)})

    def nodes(self) -> list[str]:
        return sorted(self.node_names[np.bincount(self.node, minlength=len(self.node_names)) > 0].tolist())


def _family_key(combos: pd.DataFrame) -> pd.Series:
    """What a config *is*, whatever its thread count: memory kernels by cache level (their sizes
    follow each node's caches), the rest by their parameters."""
    by_level = combos["family"].isin(["bandwidth", "latency"]) & combos["ws_level"].notna()
    level = combos["ws_level"].map(lambda v: "memory" if v == 0 else f"L{int(v)}" if pd.notna(v) else "")
    return combos["ub"] + "|" + level.where(by_level, combos["params_json"].fillna("{}"))


def load_profiles(conn: sa.Connection, base: str, nodes: list[str] | None = None) -> Profiles:
    node_table = read_frame(conn, _NODES)
    if base not in set(node_table["node"]):
        raise UserError(f"the base node {base!r} is not registered: profile it first (`nodereg profile {base}`)")
    if nodes:
        node_table = node_table[node_table["node"].isin(set(nodes) | {base})]
    node_table = node_table.reset_index(drop=True)
    runs = read_arrays(conn, _RUNS)
    node = pd.Index(node_table["node_id"]).get_indexer(runs["node_id"])
    throughput = runs["throughput"].astype(float, copy=False)
    threads, combo = runs["threads"].astype(np.int64, copy=False), runs["combo"].astype(np.int64, copy=False)
    keep = (node >= 0) & np.isfinite(throughput)  # (positive throughput: selected by the query)
    if not keep.all():  # copies of millions of runs only when some are left out
        node, throughput, threads, combo = node[keep], throughput[keep], threads[keep], combo[keep]
    base_code = int(np.flatnonzero(node_table["node"].to_numpy() == base)[0])
    if not (node == base_code).any():
        raise UserError(f"the base node {base!r} has no profile: run `nodereg profile {base}` on it first")
    # keys are computed once per distinct (config, level), then mapped back by integers
    combo_code, combos = pd.factorize(combo)
    table = pd.DataFrame({"config_id": combos // 64, "ws_level": (combos % 64 - 1).astype(float)})
    table["ws_level"] = table["ws_level"].where(table["ws_level"] >= 0)
    table = table.merge(read_frame(conn, _CONFIGS), on="config_id", how="left")
    key_names, key_of_combo = np.unique(_family_key(table).to_numpy(dtype=str), return_inverse=True)
    placement_of_combo, placement_names = pd.factorize(table["placement"].fillna(""))
    feats = read_frame(conn, _FEATURES, {"node": int(node_table.loc[base_code, "node_id"])})
    features = pd.DataFrame()
    if not feats.empty:
        feats["feature"] = feats["source"] + "." + feats["metric"]
        features = feats.pivot_table(index="config_id", columns="feature", values="value", aggfunc="first")
    n_cpus = node_table.set_index("node")["n_cpus"].fillna(1).astype(int).to_dict()
    return Profiles(base, node_table["node"].to_numpy(dtype=object), key_names, node.astype(np.int64),
                    key_of_combo[combo_code], threads, np.asarray(placement_names), placement_of_combo[combo_code],
                    table["config_id"].to_numpy(dtype=np.int64)[combo_code], throughput, features, n_cpus)


def threads_on(profiles: Profiles, mode: str, k: int) -> np.ndarray:
    """The thread count each node's configs are taken at (by node code): all its CPUs ('all') or
    min(k, CPUs) ('fixed'), snapped to the largest count measured there that does not exceed it
    (or the smallest measured, if none does)."""
    pairs = profiles.thread_counts
    cpus = pd.Series(profiles.n_cpus).reindex(profiles.node_names).fillna(1).to_numpy(dtype=float)
    want = cpus[pairs["node"].to_numpy()]
    if mode != "all":
        want = np.minimum(want, k)
    fitting = pairs[pairs["threads"].to_numpy() <= want].groupby("node")["threads"].max()
    fallback = pairs.groupby("node")["threads"].min()
    out = np.zeros(len(profiles.node_names), dtype=np.int64)
    out[fallback.index] = fallback.to_numpy()
    out[fitting.index] = fitting.to_numpy()
    return out


def reference_set(profiles: Profiles, threads: np.ndarray,
                  weights: dict[str, float] | None = None) -> tuple[ReferenceSet, pd.DataFrame]:
    """References at these thread counts (by node code): features of the base node's configs,
    ln(time on node / on base).

    Returns the set and a table describing each reference (for explanations).
    """
    p = profiles
    at = np.flatnonzero(p.threads == threads[p.node])
    base = p.base_code
    on_base = at[p.node[at] == base]
    # one base run per key (the first), and its placement is the one preferred on every node
    _, first = np.unique(p.key[on_base], return_index=True)
    base_runs = on_base[np.sort(first)]
    base_placement = np.full(len(p.key_names), -1)
    base_placement[p.key[base_runs]] = p.placement[base_runs]
    preferred = p.placement[at] == base_placement[p.key[at]]
    # node x key throughput, the preferred placement's run written last so that it wins
    order = np.concatenate([at[~preferred], at[preferred]])
    matrix = np.full((len(p.key_names), len(p.node_names)), np.nan)
    matrix[p.key[order], p.node[order]] = p.throughput[order]
    rows = p.key[base_runs]
    used = np.unique(p.node[at])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(matrix[rows, base][:, None] / matrix[np.ix_(rows, used)])
    names = p.key_names[rows]
    log_ratio = pd.DataFrame(log_ratio, index=names, columns=p.node_names[used].astype(str))
    features = p.features.reindex(p.config_id[base_runs])
    features.index = names
    features = features.dropna(axis=1, how="all")
    if features.empty or features.shape[1] == 0:
        raise UserError(f"the profile of {p.base!r} has no signatures to compare phases with: "
                        "re-profile it with this version of nodereg")
    info = pd.DataFrame({"threads": p.threads[base_runs], "placement": p.placement_names[p.placement[base_runs]]},
                        index=names)
    refs = ReferenceSet(base_node=p.base, features=features, log_ratio=log_ratio,
                        feature_weights=dict(weights or {}))
    return refs, info


def thread_mode(cpu_util: float | None, trace_threads: int | None, base_cpus: int) -> tuple[str, int]:
    """How a phase uses threads: ('all', n) when it kept every base CPU busy, else ('fixed', k)."""
    if trace_threads:
        return "fixed", int(trace_threads)
    if cpu_util is None or not math.isfinite(cpu_util):
        return "all", base_cpus
    if base_cpus > 1 and cpu_util >= 0.75 * base_cpus:
        return "all", base_cpus
    return "fixed", max(1, int(round(cpu_util)))
