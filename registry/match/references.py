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

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlalchemy as sa

from registry.db.read import read_frame
from registry.errors import UserError
from registry.models.base import ReferenceSet

_LATEST = "p.profile_id = (SELECT max(p2.profile_id) FROM profiles p2 WHERE p2.node_id = p.node_id)"
# numbers only, per run: strings (names, keys) are joined in from the small tables below
_RUNS = f"""
SELECT p.node_id, r.config_id, r.run_id, c.threads, r.median_s, r.bytes_per_rep, r.flops_per_rep,
       r.iterations, r.latency_ns
FROM profile_runs r
JOIN profiles p   ON p.profile_id = r.profile_id
JOIN ub_configs c ON c.config_id = r.config_id
WHERE {_LATEST}"""
_CONFIGS = """
SELECT c.config_id, u.name AS ub, u.family, c.placement, c.params_json
FROM ub_configs c JOIN microbenchmarks u ON u.ub_id = c.ub_id"""
_NODES = "SELECT node_id, name AS node, n_cpus FROM nodes"
_LEVELS = f"""
SELECT s.owner_id AS run_id, s.value AS ws_level FROM signatures s
JOIN profile_runs r    ON s.owner_kind = 'profile_run' AND s.owner_id = r.run_id
JOIN profiles p        ON p.profile_id = r.profile_id
JOIN ub_configs c      ON c.config_id = r.config_id
JOIN microbenchmarks u ON u.ub_id = c.ub_id
WHERE s.source = 'streams' AND s.metric = 'ws_level' AND u.family IN ('bandwidth', 'latency') AND {_LATEST}"""
_FEATURES = f"""
SELECT s.owner_id AS run_id, s.source, s.metric, s.value FROM signatures s
JOIN profile_runs r ON s.owner_kind = 'profile_run' AND s.owner_id = r.run_id
JOIN profiles p ON p.profile_id = r.profile_id
WHERE p.node_id = :node AND {_LATEST} AND s.source <> 'streams'"""


@dataclass
class Profiles:
    """Every node's latest profile, reduced to what projection needs."""

    base: str
    runs: pd.DataFrame          # one row per node x config run: node, key, threads, placement, throughput
    features: pd.DataFrame      # base node's runs: index run_id; columns 'source.metric'
    n_cpus: dict[str, int]

    def nodes(self) -> list[str]:
        return sorted(self.runs["node"].unique())


def _throughput(runs: pd.DataFrame) -> pd.Series:
    """Work per second of the whole node: bytes, else flops, else chains, else iterations x threads."""
    t = runs["median_s"].astype(float)
    by_bytes = runs["bytes_per_rep"].astype(float) / t
    by_flops = runs["flops_per_rep"].astype(float) / t
    by_chase = runs["threads"] / runs["latency_ns"].astype(float)
    by_iters = runs["iterations"].astype(float) * runs["threads"] / t
    out = by_bytes.where(by_bytes > 0, by_flops.where(by_flops > 0, by_chase.where(by_chase > 0, by_iters)))
    return out.where(np.isfinite(out) & (out > 0))


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
    runs = read_frame(conn, _RUNS)
    runs = runs[runs["node_id"].isin(node_table["node_id"])]
    base_id = int(node_table.loc[node_table["node"] == base, "node_id"].iloc[0])
    if not (runs["node_id"] == base_id).any():
        raise UserError(f"the base node {base!r} has no profile: run `nodereg profile {base}` on it first")
    runs = runs.merge(read_frame(conn, _LEVELS), on="run_id", how="left")
    # keys are computed once per distinct (config, level), then joined back by integers
    combos = runs[["config_id", "ws_level"]].drop_duplicates().merge(read_frame(conn, _CONFIGS), on="config_id")
    combos["key"] = _family_key(combos)
    runs = runs.merge(combos[["config_id", "ws_level", "placement", "key"]], on=["config_id", "ws_level"],
                      how="left").merge(node_table, on="node_id")
    runs["throughput"] = _throughput(runs)
    runs = runs.dropna(subset=["throughput"])
    # node and key repeat across millions of rows: categories make the joins and pivots integer work
    runs["node"] = runs["node"].astype("category")
    runs["key"] = runs["key"].astype("category")
    feats = read_frame(conn, _FEATURES, {"node": base_id})
    features = pd.DataFrame()
    if not feats.empty:
        feats["feature"] = feats["source"] + "." + feats["metric"]
        features = feats.pivot_table(index="run_id", columns="feature", values="value", aggfunc="first")
    n_cpus = node_table.set_index("node")["n_cpus"].fillna(1).astype(int).to_dict()
    return Profiles(base, runs[["node", "run_id", "key", "threads", "placement", "throughput"]], features, n_cpus)


def threads_on(profiles: Profiles, mode: str, k: int) -> dict[str, int]:
    """The thread count each node's configs are taken at: all its CPUs ('all') or min(k, CPUs) ('fixed'),
    snapped to the largest count actually measured there that does not exceed it."""
    pairs = profiles.runs[["node", "threads"]].drop_duplicates()
    cpus = pairs["node"].map(profiles.n_cpus).astype(float).fillna(1)
    want = cpus if mode == "all" else cpus.clip(upper=k)
    fitting = pairs[pairs["threads"] <= want].groupby("node", observed=True)["threads"].max()
    fallback = pairs.groupby("node", observed=True)["threads"].min()
    return {str(n): int(t) for n, t in fitting.reindex(fallback.index).fillna(fallback).items()}


def reference_set(profiles: Profiles, threads: dict[str, int],
                  weights: dict[str, float] | None = None) -> tuple[ReferenceSet, pd.DataFrame]:
    """References at these thread counts: features of the base node's configs, ln(time on node / on base).

    Returns the set and a table describing each reference (for explanations).
    """
    runs = profiles.runs
    at = runs[runs["threads"] == runs["node"].map(threads).astype(float)]
    # one run per node x key: prefer the base run's placement, else any
    base = at[at["node"] == profiles.base].drop_duplicates("key")
    base = base.assign(key=base["key"].astype(str))
    placement = base.set_index("key")["placement"]
    at = at.assign(pref=(at["placement"] == at["key"].astype(str).map(placement)).astype(int))
    at = at.sort_values("pref", ascending=False).drop_duplicates(["node", "key"])
    throughput = at.pivot_table(index="key", columns="node", values="throughput", aggfunc="first", observed=True)
    throughput.columns = throughput.columns.astype(str)
    log_ratio = np.log(throughput[[profiles.base]].to_numpy() / throughput.to_numpy())
    log_ratio = pd.DataFrame(log_ratio, index=throughput.index, columns=throughput.columns).loc[base["key"]]
    features = profiles.features.reindex(base["run_id"].to_numpy())
    features.index = base["key"].to_numpy()
    features = features.dropna(axis=1, how="all")
    if features.empty or features.shape[1] == 0:
        raise UserError(f"the profile of {profiles.base!r} has no signatures to compare phases with: "
                        "re-profile it with this version of nodereg")
    info = base.set_index("key")[["run_id", "threads", "placement"]]
    refs = ReferenceSet(base_node=profiles.base, features=features, log_ratio=log_ratio,
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
