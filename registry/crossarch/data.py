"""The data of cross-node prediction: a suite's micro-benchmark costs, the apps' measured times and
what each node is (architecture, CPU family, vCPUs), as three aligned tables.

Read from a registry (`load`: the latest profile of each node in the suite, the median measured time
of each app on each node at the node's default thread count), or built directly (the tests make a
synthetic world). The names of apps follow the Spare Cores import (SPARECORES_CONTRACT):
``geekbench:<workload>:single|multi``, ``compression:<algo>-<level>:compress|decompress:1t|all``,
``redis:...``, ``static_web:...``, ``llm:<model>:pp<N>|tg<N>``; other names are apps of one family each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from registry.errors import UserError

@dataclass
class CrossData:
    """costs: index node, columns config_key, time-like cost (lower faster), NaN = not measured.
    times: index node, columns app, seconds, NaN = not measured.
    nodes: index node; columns architecture, cpu_family, n_cpus (others allowed: memory_bytes, vendor:
    the cloud, which the evaluation splits its figures by; shared_vcpus: the vendor sells the node's
    vCPUs shared with other tenants).
    prices: node -> price per hour in one currency (None: unknown)."""

    costs: pd.DataFrame
    times: pd.DataFrame
    nodes: pd.DataFrame
    prices: pd.Series | None = None
    currency: str | None = None

    def __post_init__(self) -> None:
        index = self.nodes.index
        self.costs = self.costs.reindex(index).astype(float)
        self.times = self.times.reindex(index).astype(float)
        for frame in (self.costs, self.times):
            frame[~(frame > 0)] = np.nan

    @property
    def apps(self) -> list[str]:
        return list(self.times.columns)

    def family(self, node: str) -> str:
        return str(self.nodes.at[node, "cpu_family"])

    def architecture(self, node: str) -> str:
        return str(self.nodes.at[node, "architecture"])


def app_group(app: str) -> str:
    """The evaluation's group of an app (registry.io.sparecores.apps.app_group); 'other' for an app
    that is not a Spare Cores one."""
    from registry.io.sparecores.apps import app_group as sparecores_group

    return sparecores_group(app) or "other"


def single_threaded(name: str) -> bool:
    """Whether an app or a micro-benchmark config runs on one CPU (its name ends in ':1t' or
    ':single'); the rest use all of the node's CPUs."""
    return name.endswith(":1t") or name.endswith(":single")


def load(registry, suite: str = "sparecores") -> CrossData:
    """The suite's costs (registry.suites.suite_costs: each node's latest profile in it), every app's
    median time per node (runs at the node's default thread count: threads NULL, 1, or all CPUs),
    the node table and the current prices (when they share one currency)."""
    from registry.db.read import read_arrays
    from registry.prices import current_prices
    from registry.suites import NODE_NAMES, node_table, suite_costs, wide

    costs = suite_costs(registry, suite)
    if costs.empty:
        raise UserError(f"no node has a profile in the suite {suite!r} (import one first: "
                        "`nodereg import sparecores DIR`)")
    with registry.connect() as conn:
        runs = read_arrays(conn, """
            SELECT r.node_id, r.app_id, percentile_cont(0.5) WITHIN GROUP (ORDER BY r.time_s) AS time_s
            FROM runs r JOIN nodes n ON n.node_id = r.node_id
            WHERE r.time_s > 0 AND (r.threads IS NULL OR r.threads = 1 OR n.n_cpus IS NULL
                                    OR r.threads = n.n_cpus)
            GROUP BY r.node_id, r.app_id""")
        times = wide(runs["node_id"], runs["app_id"], runs["time_s"], read_arrays(conn, NODE_NAMES),
                     read_arrays(conn, "SELECT app_id AS id, name FROM apps"), "node", "app")
        prices = current_prices(conn)
        shared = shared_vcpu_nodes(conn)
    nodes = node_table(registry).loc[lambda f: f.index.isin(costs.index)]
    nodes["cpu_family"] = nodes["cpu_family"].fillna(nodes["cpu_model"]).fillna("unknown")
    nodes["architecture"] = nodes["architecture"].fillna("unknown")
    priced = {n: p for n, p in prices.items() if n in nodes.index}
    currencies = {c for _, c in priced.values()}
    price = pd.Series({n: p for n, (p, _) in priced.items()}, dtype=float) if len(currencies) == 1 else None
    nodes["shared_vcpus"] = nodes.index.isin(shared)
    columns = ["architecture", "cpu_family", "n_cpus", "memory_bytes", "vendor", "shared_vcpus"]
    return CrossData(costs, times, nodes[columns], price, currencies.pop() if len(currencies) == 1 else None)


# the inventory as the importer writes it (json.dumps, sort_keys): a cheap filter, each match then parsed
_SHARED = """SELECT name, inventory_json FROM nodes
              WHERE position('"cpu_allocation": "SHARED"' IN inventory_json) > 0"""


def shared_vcpu_nodes(conn) -> set[str]:
    """The nodes whose imported specs say their vCPUs are shared with other tenants (cpu_allocation
    SHARED: Hetzner's cx/cpx/cax types, GCP's shared-core e2 types). Their figures move with their
    neighbours' load: predictions for them erred 16.9% at the median against 10.5% on dedicated types
    (docs/crossarch.md), and `match --from-runs` says so."""
    import json

    from registry.db.read import read_arrays

    rows = read_arrays(conn, _SHARED)
    out = set()
    for name, text in zip(rows["name"].tolist(), rows["inventory_json"].tolist()):
        try:
            if json.loads(text).get("cpu_allocation") == "SHARED":
                out.add(name)
        except (ValueError, AttributeError):
            continue
    return out


def app_runs(registry, app: str, on: list[str] | None = None) -> tuple[dict[str, float], bool]:
    """The app's median measured time per node (only the nodes `on`, when given), and whether every
    run was single-threaded (threads = 1)."""
    from registry.db.read import read_frame

    with registry.connect() as conn:
        runs = read_frame(conn, """
            SELECT n.name AS node, r.time_s, r.threads
            FROM runs r JOIN apps a ON a.app_id = r.app_id JOIN nodes n ON n.node_id = r.node_id
            WHERE a.name = :app AND r.time_s > 0""", {"app": app})
    if runs.empty:
        raise UserError(f"no measured runs of {app!r} (`nodereg runs add {app} NODE --time S`)")
    if on:
        missing = sorted(set(on) - set(runs["node"]))
        if missing:
            raise UserError(f"{app} has no measured run on {', '.join(missing)}")
        runs = runs[runs["node"].isin(on)]
    times = runs.groupby("node")["time_s"].median()
    # a run of unknown thread count (NULL: every imported all-CPU result) is not a one-thread run; pandas'
    # nullable `== 1` is NA there, and `.all()` would skip it
    return {str(n): float(t) for n, t in times.items()}, bool(runs["threads"].eq(1).fillna(False).all())
