"""Microbenchmark configs as the references of a projection, seen from a base node.

A config is a reference when the base node's latest profile measured its signature (every source
but the thesis descriptors' bookkeeping: the profile's representatives), which places it among the
phases; its *throughput* (work done per second by the whole node) on every registered node says how
times move between nodes.

Thread counts: a phase that kept all the base node's CPUs busy is assumed to use all of a target's
CPUs (an OpenMP program does, by default), so on each node the config's counterpart is the one
measured at that node's thread count; a serial phase compares 1-thread configs everywhere. The
time of a fixed amount of work scales with 1 / throughput, so moving from 2 cores to 1 changes
both the per-core speed and the parallelism at once.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from registry.db.read import read_arrays
from registry.db.statement import execute
from registry.errors import UserError
from registry.fleet import FABRIC_PREFIX
from registry.match import impute
from registry.models.base import Matrix, ReferenceSet
from registry.profile import vectors
from registry.profile.catalog import sized_per_level
from registry.values import command_line

if TYPE_CHECKING:
    import sqlalchemy as sa

    from registry.match.track import AppTimes

# numbers only, one row per config measured on each node type: strings (names, keys) are mapped on
# from the small tables below. `combo` is the config and the cache level its working set fits on
# that node (ws_level, < 63) in one integer; the throughput (work per second of the whole node:
# registry.profile.vectors.THROUGHPUT) is computed by the database, per run of each host's latest
# profile of the type. A type profiled on several hosts takes the median over them
# (schema/migrations/0008_hosts.sql). The others, most of a registry, are read from each profile's
# packed runs (`_PACKED`, registry.profile.vectors), and only a profile without them from its runs
# here. `first_run` orders the rows as the configs were measured, which decides the base node's
# first run of a key. The level is read per backend (vectors.level_sql).
_LATEST = """
WITH latest AS (
    SELECT node_id, profile_id, count(*) OVER (PARTITION BY node_id) AS hosts FROM v_latest_profile
    WHERE suite = :suite)"""
_RUNS = _LATEST + """,
unpacked AS (
    SELECT * FROM latest l
    WHERE l.hosts > 1 OR NOT EXISTS (SELECT 1 FROM profile_vectors v WHERE v.profile_id = l.profile_id)),
runs AS (
    SELECT r.run_id, l.node_id, l.hosts, c.threads,
           CAST(r.config_id * 64 + COALESCE({level}, -1) + 1 AS BIGINT) AS combo,
           {throughput} AS throughput
    FROM profile_runs r
    JOIN unpacked l ON l.profile_id = r.profile_id
    JOIN ub_configs c ON c.config_id = r.config_id {suite_configs}{level_join})
SELECT run_id AS first_run, node_id, threads, combo, throughput FROM runs WHERE hosts = 1 AND throughput > 0
UNION ALL
SELECT min(run_id), node_id, threads, combo, percentile_cont(0.5) WITHIN GROUP (ORDER BY throughput)
FROM runs WHERE hosts > 1 AND throughput > 0
GROUP BY node_id, threads, combo"""
_PACKED = _LATEST + """
SELECT l.node_id, v.runs, v.data FROM latest l JOIN profile_vectors v ON v.profile_id = l.profile_id
WHERE l.hosts = 1"""
# bound: at least as many runs as _PACKED reads (every stored profile's, not only each node's
# latest): the size of its arrays, whose pages beyond what is filled are never touched (nor paid
# for); cheaper than _PACKED's own sum (a window over its rows would have the database hold them
# all). unpacked, shared: profiles without a packed row, nodes profiled on several hosts (host
# groups as v_latest_profile makes them, NULL one of them): where there are none, _RUNS has nothing
# to read and is not run (30 ms of a 10,000-node match on PostgreSQL)
_PACKED_BOUND = """
SELECT (SELECT sum(runs) FROM profile_vectors) AS bound,
       (SELECT count(*) FROM profiles) - (SELECT count(*) FROM profile_vectors) AS unpacked,
       (SELECT count(*) FROM (SELECT node_id FROM profiles GROUP BY node_id
                              HAVING count(DISTINCT host) + max(CASE WHEN host IS NULL THEN 1 ELSE 0 END) > 1) m)
           AS shared"""
# Suites (schema/migrations/0014_imported_suites.sql): configs are compared within one suite only:
# each node's latest profile *in the suite* (v_latest_profile, profiles.suite) and, where the
# registry holds several suites, that suite's configs. An imported config's throughput is 1 / median_s (a time-like cost of the whole
# node: contract), its threads 0 for "all of the node's CPUs".
_SUITE_OF = "COALESCE(u.suite, 'nodereg')"
_SUITE_CONFIGS = f"JOIN microbenchmarks u ON u.ub_id = c.ub_id AND {_SUITE_OF} = :suite"
_SUITES = "SELECT DISTINCT COALESCE(suite, 'nodereg') AS suite FROM microbenchmarks"
_CONFIGS = """
SELECT c.config_id, u.name AS ub, u.family, c.placement, c.params_json, c.config_key, u.suite, c.threads
FROM ub_configs c JOIN microbenchmarks u ON u.ub_id = c.ub_id"""
# with the one host a node's profiles were measured on (none where there are several, or none known)
_NODES = """
SELECT n.node_id, n.name AS node, n.n_cpus, n.cpu_model, n.max_mhz,
       CASE WHEN h.hosts = 1 THEN h.host END AS host
FROM nodes n
LEFT JOIN (SELECT node_id, min(host) AS host, count(DISTINCT host) AS hosts FROM profiles GROUP BY node_id) h
       ON h.node_id = n.node_id"""
_FEATURES = """
SELECT r.config_id, s.source, s.metric, s.value FROM signatures s
JOIN profile_runs r ON s.owner_kind = 'profile_run' AND s.owner_id = r.run_id
WHERE r.profile_id = (SELECT profile_id FROM v_latest_profile WHERE node_id = :node AND suite = :suite
                      AND newest_in_suite)
  AND s.source <> 'streams'"""


@dataclass
class Profiles:
    """Every node type's profile (median over its hosts), reduced to what projection needs: one
    entry per config measured, as arrays of integer codes (a 10,000-node registry has millions of
    runs; strings would dominate)."""

    base: str
    node_names: np.ndarray      # node code -> name
    key_names: np.ndarray       # key code -> what the config is (see `_family_key`)
    node: np.ndarray            # per run: node code
    key: np.ndarray             # per run: key code
    threads: np.ndarray         # per run
    placement_names: np.ndarray # placement code -> name
    placement: np.ndarray       # per run: placement code
    combo: np.ndarray           # per run: config_id x 64 + its cache level + 1 (`_RUNS`; the config: `configs`)
    throughput: np.ndarray      # per run: work per second of the whole node
    features: Matrix            # the base node's runs: rows config_id; columns 'source.metric'
    n_cpus: dict[str, int]
    hardware: np.ndarray | None = None   # node code -> its machine (`_hardware`: -1 alone on it); None: not known
    apps: AppTimes | None = None   # the apps that weigh the references' votes (registry.match.track)

    @property
    def base_code(self) -> int:
        return int(np.flatnonzero(self.node_names == self.base)[0])

    @functools.cached_property
    def measured_threads(self) -> np.ndarray:
        """node code x thread count: whether the node's profile has runs at that many threads."""
        seen = np.zeros((len(self.node_names), int(self.threads.max(initial=0)) + 1), dtype=bool)
        seen[self.node, self.threads] = True
        return seen

    @functools.cached_property
    def cell(self) -> np.ndarray:
        """Per run: its place in a node x key matrix, flat (one index array over millions of runs,
        made once for the reference sets of every thread mode)."""
        cell = self.node * len(self.key_names)
        cell += self.key
        return cell

    def runs_at(self, threads: np.ndarray) -> np.ndarray:
        """The runs measured at each node's thread count in `threads` (by node code), gathered per
        run in the runs' own integers (32 bits: half the memory of a copy of millions of runs)."""
        return np.flatnonzero(self.threads == threads.astype(self.threads.dtype, copy=False)[self.node])

    @functools.cached_property
    def cpus(self) -> np.ndarray:
        """node code -> its CPUs (`n_cpus` as an array: read for every node by each thread mode)."""
        return np.array([self.n_cpus.get(n, 1) for n in self.node_names.tolist()], dtype=float)

    @functools.cached_property
    def code(self) -> dict[str, int]:
        """node name -> node code."""
        return {n: i for i, n in enumerate(self.node_names.tolist())}

    def configs(self, runs: np.ndarray) -> np.ndarray:
        """The config_id of each of `runs` (kept per run only as `combo`: a match reads the configs
        of the base node's runs, a few hundred of millions)."""
        return self.combo[runs] // 64

    def nodes(self) -> list[str]:
        return sorted(self.node_names[np.bincount(self.node, minlength=len(self.node_names)) > 0].tolist())


def _family_key(ub: str, family: str, ws_level: int, params_json: str | None, config_key: str = "",
                suite: str | None = None) -> str:
    """What a config *is*, whatever its thread count: memory kernels and gemm by cache level (their
    sizes follow each node's caches: catalog.sized_per_level) and, for writers, the store kind
    ('triad|memory|nt': non-temporal stores, which scale differently from ordinary ones); the rest by
    their parameters. An imported suite's config is its key without the thread part
    ('sparecores:openssl:sha256:16384')."""
    if suite not in (None, "nodereg"):
        return re.sub(r":(1t|all)$", "", config_key)
    if sized_per_level(ub, family) and ws_level >= 0:
        nt = family == "bandwidth" and bool(json.loads(params_json or "{}").get("nt"))
        return f"{ub}|{'memory' if ws_level == 0 else f'L{ws_level}'}{'|nt' if nt else ''}"
    return f"{ub}|{params_json or '{}'}"


_ACCESS = {"C": "shared", "P": "private"}


def config_in_words(key: str) -> str:
    """A reference key of `_family_key` for people: 'triad from memory, non-temporal stores',
    'mbw1c: 1 stream of 67108864 f64, stride 8 B, shared, seq' (the key itself is JSON); also a
    stream config's identity (registry.match.streams.identity: JSON that names its ub)."""
    ub, _, rest = key.partition("|")
    level, _, nt = rest.partition("|")
    if level == "memory" or re.fullmatch(r"L\d+", level):
        where = "from memory" if level == "memory" else f"in {level}"
        return f"{ub} {where}" + (", non-temporal stores" if nt else "")
    try:
        params = json.loads(rest or "{}") if rest or not key.startswith("{") else json.loads(key)
    except ValueError:
        return key
    if not isinstance(params, dict):
        return key
    if not rest:
        ub = params.pop("ub", None) or key
        if params.get("placement") == "compact":   # the default: said only when it is another
            del params["placement"]
    streams = params.pop("streams", None) or []
    parts = [f"{len(streams)} stream{'s' if len(streams) != 1 else ''}: " + "; ".join(
        f"{s[0]} {s[2]}, stride {s[1]} B, {_ACCESS.get(s[3], s[3])}, {s[4]}" for s in streams)] if streams else []
    parts += [f"{k} {v}" for k, v in params.items()]
    return f"{ub}: {', '.join(parts)}" if parts else ub


def _lookup(keys: np.ndarray, mapped: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`mapped` at where each value is in `keys` (-1: absent), for non-negative integer ids: a lookup
    table when the ids are small, as database ids are (millions of runs in one gather, not a hash per
    run)."""
    keys, values = keys.astype(np.int64, copy=False), values.astype(np.int64, copy=False)
    if not len(keys):
        return np.full(len(values), -1, dtype=np.int64)
    top = max(int(keys.max()), int(values.max(initial=0)))
    if top > 16 * (len(keys) + len(values)) + (1 << 20):   # sparse ids: binary search instead
        order = np.argsort(keys)
        at = order[np.searchsorted(keys, values, sorter=order).clip(0, len(keys) - 1)]
        return np.where(keys[at] == values, mapped[at], -1)
    lut = np.full(top + 1, -1, dtype=np.int64)
    lut[keys] = mapped
    return lut[values]


def _positions(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Where each value is in `keys` (-1: absent), as `_lookup`."""
    return _lookup(keys, np.arange(len(keys)), values)


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of non-negative integers, sorted: a count per value where they are dense."""
    return np.flatnonzero(np.bincount(values)) if len(values) and values.max() < 16 * len(values) + (1 << 20) \
        else np.unique(values)


def _base_features(rows: dict) -> Matrix:
    """The base node's signatures as configs x 'source.metric' (the first value of each)."""
    cells: dict[tuple[int, str], float] = {}
    for config, source, metric, value in zip(rows["config_id"], rows["source"], rows["metric"], rows["value"]):
        if value is not None and value == value:
            cells.setdefault((int(config), f"{source}.{metric}"), float(value))
    configs = sorted({c for c, _ in cells})
    features = sorted({f for _, f in cells})
    values = np.full((len(configs), len(features)), np.nan)
    row, col = {c: i for i, c in enumerate(configs)}, {f: i for i, f in enumerate(features)}
    for (c, f), v in cells.items():
        values[row[c], col[f]] = v
    return Matrix(configs, features, values)


def base_node(conn: sa.Connection, app: str, traced_on: str, base: str | None) -> str:
    """The node whose profile a trace of `app` is compared on: the node it was traced on; `base`
    (`--base`) only when that node has no profile here: a trace taken on a host that was never
    profiled (`nodereg trace` records it against the host's inventory), or a file from a registry
    whose nodes are not in this one. The user then vouches that `base` is the same hardware."""
    profiled = execute(conn, "SELECT 1 FROM profiles p JOIN nodes n ON n.node_id = p.node_id "
                             "WHERE n.name = :n LIMIT 1", {"n": traced_on}).first() is not None
    if profiled and base not in (None, traced_on):
        raise UserError(f"the trace was recorded on {traced_on!r}, not on {base!r}: signatures compare only "
                        "on the node they were measured on")
    if not profiled and base is None:
        raise UserError(f"the trace of {app!r} was recorded on {traced_on!r}, which has no profile in this "
                        f"registry: pass --base NODE (a profiled node of the same hardware), or profile that "
                        f"host ({command_line('nodereg', 'profile', traced_on)} on it)")
    return base or traced_on


def suites(conn: sa.Connection) -> list[str]:
    """The suites this registry holds configs of ('nodereg': our kernels)."""
    return sorted(execute(conn, _SUITES).scalars())


_NODE_SUITES = f"""
SELECT DISTINCT n.name AS node, {_SUITE_OF} AS suite FROM profiles p
JOIN nodes n ON n.node_id = p.node_id JOIN profile_runs r ON r.profile_id = p.profile_id
JOIN ub_configs c ON c.config_id = r.config_id JOIN microbenchmarks u ON u.ub_id = c.ub_id"""


def choose_suite(conn: sa.Connection, base: str, nodes: list[str] | None = None) -> str:
    """The suite a projection from `base` compares in, when none is named: one the base node and
    every named target have a profile in, the one profiled on most nodes (ties: our own kernels).
    A machine profiled with both its own kernels and the Spare Cores suite projects onto the
    imported types (only that suite there) in the latter, onto its fellow profiled nodes in ours."""
    held = suites(conn)
    if len(held) <= 1:
        return held[0] if held else "nodereg"
    rows = execute(conn, _NODE_SUITES).all()
    by_suite: dict[str, set[str]] = {}
    for node, suite in rows:
        by_suite.setdefault(suite, set()).add(node)
    fits = [s for s, members in by_suite.items() if base in members and set(nodes or ()) <= members]
    if not fits:
        raise UserError(f"no suite of configs is profiled on {base!r} and on every target node: "
                        "profile them in one (`nodereg profile NODE --suite sparecores`) or name other nodes")
    return max(fits, key=lambda s: (len(by_suite[s]), s == "nodereg"))


def _runs_sql(filtered: bool, dialect: str = "duckdb") -> str:
    """The runs query, its configs restricted to the suite where the registry holds several (each
    node's profile is always its latest in the suite: v_latest_profile)."""
    level, join = vectors.level_sql(dialect)
    return _RUNS.format(suite_configs=_SUITE_CONFIGS if filtered else "", level=level, level_join=join,
                        throughput=vectors.THROUGHPUT)


def _read_runs(conn: sa.Connection, filtered: bool, suite: str, configs: dict, node_ids: np.ndarray) -> dict:
    """Every run of each node's latest profile in `suite` as arrays (node: the position of its node_id
    in `node_ids`, -1 where absent; threads, combo, throughput), in the order each node's configs
    were measured: the packed profiles (registry.profile.vectors) and, through SQL, the rest."""
    bound, unpacked, shared = execute(conn, _PACKED_BOUND).one()
    if unpacked or shared:
        runs = read_arrays(conn, _runs_sql(filtered, conn.dialect.name), {"suite": suite})
        first = runs.pop("first_run").astype(np.int64, copy=False)
        if len(first) > 1 and (first[1:] < first[:-1]).any():  # in measurement order (free when it already is)
            order = np.argsort(first, kind="stable")
            runs = {c: a[order] for c, a in runs.items()}
        runs["node"] = _positions(node_ids, runs.pop("node_id"))
    else:
        runs = {"node": np.empty(0, dtype=np.int64), "threads": np.empty(0, dtype=_THREADS),
                "combo": np.empty(0, dtype=np.int64), "throughput": np.empty(0)}
    bound = int(bound or 0)
    # each array of millions of runs made once and filled a chunk of profiles at a time (every array
    # that size costs its page faults: 0.1 s of a 10,000-node match on this KVM guest)
    threads_of = _threads_of(configs, filtered, suite)
    packed = {"node": np.empty(bound, dtype=np.int64), "threads": np.empty(bound, dtype=_THREADS),
              "combo": np.empty(bound, dtype=np.int64), "throughput": np.empty(bound)}
    at = 0
    for row_node, counts, records in vectors.read_packed(conn, _PACKED, {"suite": suite}):
        part = slice(at, at + len(records))
        if part.stop > len(packed["node"]):     # profiles stored since the bound was read (READ COMMITTED)
            packed = {c: np.resize(a, max(part.stop, 2 * len(a))) for c, a in packed.items()}
        config = records["config"].astype(np.int64)
        np.take(threads_of, config, out=packed["threads"][part], mode="clip")   # (beyond the table: its -1)
        combo = packed["combo"][part]
        np.multiply(config, 64, out=combo)
        combo += records["level"]
        combo += 1
        packed["throughput"][part] = records["throughput"]
        packed["node"][part] = np.repeat(_positions(node_ids, row_node), counts)
        at = part.stop
    if not at:
        return runs
    packed = {c: a[:at] for c, a in packed.items()}
    keep = (packed["throughput"] > 0) & (packed["threads"] >= 0)
    if not keep.all():
        packed = {c: a[keep] for c, a in packed.items()}
    if not len(runs["node"]):
        return packed
    return {c: np.concatenate([runs[c].astype(packed[c].dtype), packed[c]]) for c in packed}


_THREADS = np.int32   # a run's thread count: millions of them per match, each fits 32 bits


def _threads_of(configs: dict, filtered: bool, suite: str) -> np.ndarray:
    """config_id -> its thread count, -1 for a config of another suite (left out, as the SQL path's
    join leaves it) and, in the last place, for any id beyond the table (np.take's mode='clip')."""
    known = [c for c, config in configs.items() if not filtered or _suite_of(config) == suite]
    threads_of = np.full(max(configs, default=0) + 2, -1, dtype=_THREADS)
    threads_of[known] = [configs[c][6] for c in known]
    return threads_of


def _suite_of(config: tuple | None) -> str:
    """The suite of a config of `_CONFIGS` (as `_SUITE_OF`: NULL is our own kernels')."""
    suite = config[5] if config else None
    return suite if isinstance(suite, str) else "nodereg"


def load_profiles(conn: sa.Connection, base: str, nodes: list[str] | None = None, suite: str = "nodereg",
                  exclude: tuple[str, ...] = ()) -> Profiles:
    """Every node's latest profile in `suite`, seen from `base`; `exclude`: key prefixes of configs
    that are not references (a program checked against its own micro-benchmark: openssl's configs
    when checking openssl)."""
    node_table = read_arrays(conn, _NODES)
    names = node_table["node"]
    if base not in set(names.tolist()):
        raise UserError(f"the base node {base!r} is not registered: profile it first "
                        f"({command_line('nodereg', 'profile', base)})")
    # a fabric's profile (`nodereg fleet mpi`) is no node to run on: the communication models read it
    kept = np.array([not str(n).startswith(FABRIC_PREFIX) for n in names], dtype=bool)
    if nodes:
        kept &= np.isin(names, list(set(nodes) | {base}))
    if not kept.all():
        node_table = {c: a[kept] for c, a in node_table.items()}
        names = node_table["node"]
    held = suites(conn)
    if suite not in held and held:
        raise UserError(f"no configs of suite {suite!r} in this registry (it holds: {', '.join(held)})")
    filtered = held != ["nodereg"]
    by_suite = {"suite": suite}
    configs = read_arrays(conn, _CONFIGS)
    config = {int(c): (u, f, p, j, k, s, int(t)) for c, u, f, p, j, k, s, t in zip(
        configs["config_id"], configs["ub"], configs["family"], configs["placement"], configs["params_json"],
        configs["config_key"], configs["suite"], configs["threads"])}
    runs = _read_runs(conn, filtered, suite, config, node_table["node_id"])
    node = runs["node"]
    throughput = runs["throughput"].astype(float, copy=False)
    threads, combo = runs["threads"].astype(_THREADS, copy=False), runs["combo"].astype(np.int64, copy=False)
    keep = (node >= 0) & np.isfinite(throughput)  # (positive throughput: selected by the query)
    if not keep.all():  # copies of millions of runs only when some are left out
        node, throughput, threads, combo = node[keep], throughput[keep], threads[keep], combo[keep]
    base_code = int(np.flatnonzero(names == base)[0])
    if not (node == base_code).any():
        how = command_line("nodereg", "profile", base, *(("--suite", suite) if suite != "nodereg" else ()))
        raise UserError(f"the base node {base!r} has no profile{'' if suite == 'nodereg' else f' in suite {suite}'}: "
                        f"run {how} on it first")
    # keys are computed once per distinct (config, level), then looked up by it: one gather of
    # millions of runs
    combos = _distinct(combo)
    keys, placements = [], []
    for c in combos.tolist():
        ub, family, placement, params, key, of_suite, _ = config.get(c // 64, ("", "", None, None, "", None, 0))
        keys.append(_family_key(ub, family, c % 64 - 1, params, key, of_suite if isinstance(of_suite, str) else None))
        placements.append(placement or "")
    key_names, key_of_combo = np.unique(np.array(keys, dtype=str), return_inverse=True)
    placement_names, placement_of_combo = np.unique(np.array(placements, dtype=str), return_inverse=True)
    key = _lookup(combos, key_of_combo, combo)
    # (one placement, as in most registries: its column of zeros is one zero seen millions of times,
    # neither gathered nor written)
    placement = _lookup(combos, placement_of_combo, combo) if len(placement_names) > 1 else \
        np.broadcast_to(np.intp(0), key.shape)
    if exclude:
        kept = ~np.isin(key, np.flatnonzero([k.startswith(tuple(exclude)) for k in key_names.tolist()]))
        node, throughput, threads, key, placement, combo = (
            a[kept] for a in (node, throughput, threads, key, placement, combo))
    cpus_of = np.array([int(c) if c == c else 1 for c in node_table["n_cpus"].astype(float)], dtype=np.int64)
    if (threads == 0).any():   # an imported 'all' config: the node's CPUs
        threads = np.where(threads == 0, cpus_of[node], threads)
    hardware = _hardware(node_table)
    if (hardware >= 0).any():   # (most registries: no two nodes on one machine, nothing to pool, no pass over the runs)
        throughput = _pool_one_thread(hardware[node], key, placement, threads, throughput)
    base_id = int(node_table["node_id"][base_code])
    features = _base_features(read_arrays(conn, _FEATURES, {"node": base_id, **by_suite}))
    n_cpus = {str(n): int(c) if c == c else 1 for n, c in zip(names.tolist(), node_table["n_cpus"].astype(float))}
    return Profiles(base, names.astype(object), key_names, node.astype(np.int64, copy=False),
                    key, threads, placement_names.astype(object), placement,
                    combo, throughput, features, n_cpus, hardware)


def _hardware(node_table: dict) -> np.ndarray:
    """Per node: a code of what its one thread runs on (host, CPU model, max MHz), shared by nodes
    made of CPUs of one machine; -1 for a node alone on its machine, profiled on several hosts or
    on none known (most of a fleet: then nothing is pooled, at no cost)."""
    names = np.array([f"{h}|{m}|{f}" if isinstance(h, str) else "" for h, m, f in   # NULL: None or NaN
                      zip(node_table["host"], node_table["cpu_model"], node_table["max_mhz"])], dtype=str)
    _, code = np.unique(names, return_inverse=True)
    shared = np.bincount(code)[code] > 1
    return np.where((names != "") & shared, code, -1).astype(np.int64)


def _pool_one_thread(hardware: np.ndarray, key: np.ndarray, placement: np.ndarray, threads: np.ndarray,
                     throughput: np.ndarray) -> np.ndarray:
    """One-thread throughputs of nodes on the same hardware, pooled: each becomes the geometric mean
    of that config's one-thread runs over those nodes. One thread of CPU subsets of one machine
    (`profile --cpus`) runs on the same kind of core, so their profiles measured one quantity, minutes
    apart; on the 2-vCPU guest the one-thread memory load measured 42% faster in the quick profile
    of CPU 0 alone than in that of CPUs 0-1: a one-thread phase matched to it was predicted 30%
    faster on the one-CPU node, and the load scaled 1.26x from one CPU to two instead of 1.50x with
    the two pooled (docs/validation.md). Several threads are left alone: which CPUs they share
    depends on the subset."""
    one = np.flatnonzero((threads == 1) & (hardware >= 0))
    if not len(one):
        return throughput
    places = int(placement.max(initial=0)) + 1
    _, bucket = np.unique((hardware[one] * (int(key.max(initial=0)) + 1) + key[one]) * places + placement[one],
                          return_inverse=True)
    count = np.bincount(bucket)
    mean = np.bincount(bucket, weights=np.log(throughput[one])) / count
    pooled = throughput.copy()
    pooled[one] = np.where(count[bucket] > 1, np.exp(mean[bucket]), throughput[one])   # alone: as measured
    return pooled


def wanted_threads(profiles: Profiles, mode: str, k: int) -> np.ndarray:
    """The thread count a part of a phase would run at on each node (by node code): all its CPUs
    ('all') or min(k, CPUs) ('fixed')."""
    return profiles.cpus.copy() if mode == "all" else np.minimum(profiles.cpus, k)


def threads_on(profiles: Profiles, mode: str, k: int, side: str = "below") -> np.ndarray:
    """The measured thread count each node's configs are taken at (by node code) for the wanted
    count (`wanted_threads`): the largest measured there that does not exceed it ('below'), or the
    smallest that is not below it ('above'); where there is none on that side, the nearest measured
    on the other (0 for a node without runs). A count between two measured ones is interpolated
    from both (registry.match.project)."""
    seen = profiles.measured_threads
    counts = np.arange(seen.shape[1])
    want = wanted_threads(profiles, mode, k)
    below = np.where(seen & (counts <= want[:, None]), counts, -1).max(axis=1)
    above = np.where(seen & (counts >= want[:, None]), counts, seen.shape[1]).min(axis=1)
    smallest = np.where(seen, counts, seen.shape[1]).min(axis=1)
    largest = np.where(seen, counts, -1).max(axis=1)
    if side == "above":
        return np.where(above < seen.shape[1], above, np.maximum(largest, 0)).astype(np.int64)
    return np.where(below >= 0, below, np.where(smallest < seen.shape[1], smallest, 0)).astype(np.int64)


def reference_set(profiles: Profiles, threads: np.ndarray) -> tuple[ReferenceSet, dict[str, int], Imputed]:
    """References at these thread counts (by node code): features of the base node's configs,
    ln(time on node / on base), a node's missing figures filled in from its other measurements
    where the rule of registry.match.impute allows.

    Returns the set, each reference's thread count on the base node (for explanations), and what
    was filled in.
    """
    p = profiles
    at = p.runs_at(threads)
    node_at = p.node[at]
    base = p.base_code
    on_base = at[node_at == base]
    # one base run per key (the first), and its placement is the one preferred on every node
    _, first = np.unique(p.key[on_base], return_index=True)
    base_runs = on_base[np.sort(first)]
    base_placement = np.full(len(p.key_names), -1)
    base_placement[p.key[base_runs]] = p.placement[base_runs]
    # node x key throughput, the preferred placement's run written last so that it wins (one placement
    # in the registry, as in most: every run is preferred, and 1.5 million gathers are saved); node
    # by node, as the runs come, so that the writes go through memory in order
    cell = p.cell[at]
    if len(p.placement_names) > 1:
        preferred = p.placement[at] == base_placement[p.key[at]]
        order = np.concatenate([np.flatnonzero(~preferred), np.flatnonzero(preferred)])
        cell, at = cell[order], at[order]
    matrix = np.full((len(p.node_names), len(p.key_names)), np.nan)
    matrix.reshape(-1)[cell] = p.throughput[at]
    # only configs with a signature on the base node are references: the rest (most of a sweep) can
    # never be a phase's neighbour, and would otherwise weigh in the model's per-node median ratio
    # and feature relevances by how many of them the sweep happens to have
    features = p.features.take_rows(p.configs(base_runs).tolist())
    signed = ~np.isnan(features.values).all(axis=1)
    base_runs, values = base_runs[signed], features.values[signed]
    rows = p.key[base_runs]
    used = np.flatnonzero(np.bincount(node_at, minlength=len(p.node_names)))
    with np.errstate(divide="ignore", invalid="ignore"):   # (in place: each array of millions made once)
        ratio = matrix[np.ix_(used, rows)]
        filled = _filled(p, used, rows, ratio)
        np.divide(matrix[base, rows], ratio, out=ratio)
        log_ratio = np.ascontiguousarray(np.log(ratio, out=ratio).T)
    names = p.key_names[rows].tolist()
    measured = ~np.isnan(values).all(axis=0)
    if not len(names) or not measured.any():
        raise UserError(f"the profile of {p.base!r} has no signatures to compare phases with: "
                        "re-profile it with this version of nodereg")
    features = Matrix(names, [c for c, m in zip(features.columns, measured) if m], values[:, measured])
    nodes = p.node_names[used].astype(str).tolist()
    refs = ReferenceSet(p.base, features, Matrix(names, nodes, log_ratio))
    return refs, dict(zip(names, p.threads[base_runs].tolist())), Imputed(nodes, names, filled.imputed, filled.error)


@dataclass
class Imputed:
    """Which references' figures on which nodes were filled in (registry.match.impute), and how far
    off each reference's rule was on the nodes left out of its fit (median |log error|)."""

    nodes: list[str]
    references: list[str]
    cells: np.ndarray       # nodes x references
    error: np.ndarray       # per reference

    def on(self, asked: list[str], references: list[str]) -> dict[str, list[str]]:
        """Per node of `asked` where any was filled in: which of `references` (a phase's nearest)."""
        cols = [self.references.index(r) for r in references if r in self.references]
        if not cols or not self.cells.any():
            return {}
        out = {}
        for n in asked:
            i = self._index.get(n)
            if i is not None and self.cells[i, cols].any():
                out[n] = [self.references[j] for j in cols if self.cells[i, j]]
        return out

    def warning(self, phase: str, asked: list[str]) -> list[str]:
        """One line for a phase projected onto `asked`, when some of their figures were filled in."""
        rows = [self._index[n] for n in asked if n in self._index]
        filled = self.cells[rows]
        on = int(filled.any(axis=1).sum())
        if not on:
            return []
        used = filled.any(axis=0)
        errors = self.error[used]
        return [f"phase {phase}: on {on} of {len(rows)} nodes, {int(used.sum())} of the {len(self.references)} "
                "references were not measured and were filled in from each node's other measurements (a ridge "
                "regression over the nodes that measured both; median error left out "
                f"{100 * np.expm1(np.nanmin(errors)):.0f}-{100 * np.expm1(np.nanmax(errors)):.0f}%)"]

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        """node -> its row (read for every phase of a trace)."""
        return {n: i for i, n in enumerate(self.nodes)}


def _filled(p: Profiles, used: np.ndarray, rows: np.ndarray, throughput: np.ndarray) -> impute.Filled:
    """`throughput` (the nodes `used` x the references, key codes `rows`; in place) with the figures
    a node lacks filled in from its other measurements at one thread and at all of its CPUs
    (registry.match.impute)."""
    if not impute.candidates(np.isnan(throughput)).any():     # nothing to fill: no predictors gathered
        return impute.Filled.nothing(throughput)
    figures = []
    for threads in (np.ones(len(p.node_names)), p.cpus):      # exactly one thread, and all of the node's CPUs
        at = p.runs_at(threads)
        m = np.full((len(p.node_names), len(p.key_names)), np.nan)
        m.reshape(-1)[p.cell[at]] = p.throughput[at]
        figures.append(m[used])
    # the base is no row to learn from: every ratio is taken against it, and an imported suite's
    # base was measured here, by our own run of the suite's tools
    figures[0][used == p.base_code] = figures[1][used == p.base_code] = np.nan
    own = np.zeros((len(rows), 2 * len(p.key_names)), dtype=bool)
    own[np.arange(len(rows)), rows] = own[np.arange(len(rows)), len(p.key_names) + rows] = True
    with np.errstate(divide="ignore", invalid="ignore"):
        done = impute.fill(np.log(throughput), np.log(np.hstack(figures)), own)
    throughput[done.imputed] = np.exp(done.values[done.imputed])
    return done


def thread_parts(cpu_util: float | None, trace_threads: int | None, base_cpus: int) -> list[tuple[str, int, float]]:
    """How a phase uses threads, as (mode, k, share of its time) parts (see `threads_on` for modes).

    A phase of n threads (the count it was told, else one per base CPU) that kept u CPUs busy on
    average spent, by Amdahl's law, (n - u) / (n - 1) of its time on one CPU and the rest on all n
    (serial s and parallel p: s + p/n = t and s + p = u t). The parallel part is projected with
    configs at the thread count it would use on each node, the serial part with 1-thread configs,
    so that a phase goes faster on more CPUs only as far as its own CPU use says: NPB MG.A kept 1.3
    of 2 CPUs busy and ran 1.34x slower on one CPU, where rounding it to one thread predicted 0.94x
    and calling it parallel would say 2x. Where n is 1 or u unknown, one part (`thread_mode`)."""
    n = min(int(trace_threads or base_cpus), base_cpus)
    if cpu_util is None or not math.isfinite(cpu_util) or n <= 1:
        return [(*thread_mode(cpu_util, trace_threads, base_cpus), 1.0)]
    serial = min(1.0, max(0.0, (n - cpu_util) / (n - 1)))
    parallel = ("fixed", int(trace_threads)) if trace_threads else ("all", base_cpus)
    return [part for part in ((*parallel, 1.0 - serial), ("fixed", 1, serial)) if part[2] > 0]


def thread_mode(cpu_util: float | None, trace_threads: int | None, base_cpus: int) -> tuple[str, int]:
    """How a phase uses threads: ('all', n) when it kept every base CPU busy, else ('fixed', k)."""
    if trace_threads:
        return "fixed", int(trace_threads)
    if cpu_util is None or not math.isfinite(cpu_util):
        return "all", base_cpus
    if base_cpus > 1 and cpu_util >= 0.75 * base_cpus:
        return "all", base_cpus
    return "fixed", max(1, int(round(cpu_util)))
