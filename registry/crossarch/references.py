"""What an app measured on a few calibration nodes is predicted from, as a model plugin's ReferenceSet.

References (rows) are measured on every node: the suite's micro-benchmark configs, the other
applications outside the app's family (`registry.io.sparecores.apps.app_family`: every level and
thread count of one compression algorithm, both Geekbench variants of one workload, ...), and three
derived ones that the baselines name: ``node:vcpus`` (time ~ 1 / vCPUs) and
``geekbench:score:single|multi`` (the geometric mean of the Geekbench workloads' times outside the
app's family: Geekbench's overall score with the app's own sub-test left out).

Seen from the calibration nodes (the first is the base): each reference's features are its log cost
on each calibration node relative to the base (``cal.<node>``), ``meta.single`` (runs on one CPU),
``meta.app`` and ``meta.micro``; its log ratio on every node is relative to the base. The query is the
app's own pattern over the calibration nodes and its time on the base. Built from numpy arrays
(`ReferenceBank`, read once per evaluation) so that thousands of folds stay fast.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping

import numpy as np

from registry.crossarch.data import CrossData, single_threaded
from registry.io.sparecores.apps import app_family
from registry.models.base import Matrix, Query, ReferenceSet

VCPUS = "node:vcpus"
GEEKBENCH_SCORE = "geekbench:score:"


class ReferenceBank:
    """Every possible reference's log cost on every node, read once from a CrossData."""

    def __init__(self, data: CrossData):
        self.data = data
        self.nodes = list(data.nodes.index)
        self.node_index = {n: i for i, n in enumerate(self.nodes)}
        self.configs = list(data.costs.columns)
        self.apps = list(data.times.columns)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.config_log = np.log(data.costs.to_numpy(dtype=float)).T
            self.app_log = np.log(data.times.to_numpy(dtype=float)).T
            vcpus = -np.log(data.nodes["n_cpus"].to_numpy(dtype=float))
        self.vcpu_log = np.where(np.isfinite(vcpus), vcpus, np.nan)
        self.app_family = [app_family(a) for a in self.apps]
        self.node_features = node_features(data)

    @functools.lru_cache(maxsize=256)
    def rows_for(self, family: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(names, log costs R x N, single, app, micro) of the references allowed for an app of `family`."""
        keep = [i for i, f in enumerate(self.app_family) if f != family]
        names = list(self.configs) + [self.apps[i] for i in keep] + [VCPUS]
        blocks = [self.config_log, self.app_log[keep], self.vcpu_log[None, :]]
        single = [single_threaded(c) for c in self.configs] + [single_threaded(self.apps[i]) for i in keep] + [False]
        app = [False] * len(self.configs) + [True] * len(keep) + [False]
        micro = [True] * len(self.configs) + [False] * (len(keep) + 1)
        for kind in ("single", "multi"):
            rows = [i for i in keep if self.apps[i].startswith("geekbench:") and self.apps[i].endswith(f":{kind}")]
            if rows:
                with warnings.catch_warnings():   # a node none of them ran on: NaN
                    warnings.simplefilter("ignore", RuntimeWarning)
                    score = np.nanmean(self.app_log[rows], axis=0)
                names.append(GEEKBENCH_SCORE + kind)
                blocks.append(score[None, :])
                single.append(kind == "single")
                app.append(False)
                micro.append(False)
        return names, np.vstack(blocks), np.array(single), np.array(app), np.array(micro)

    def reference_set(self, family: str, calibration: list[str]) -> ReferenceSet:
        """The references allowed for an app of `family`, seen from the calibration nodes (first = base);
        a reference not measured on every calibration node is left out."""
        names, log, single, app, micro = self.rows_for(family)
        cal = [self.node_index[n] for n in calibration]
        base = log[:, cal[0]][:, None]
        keep = np.all(np.isfinite(log[:, cal]), axis=1)
        ratio = (log - base)[keep]
        features = np.column_stack([ratio[:, cal], single[keep], app[keep], micro[keep]]).astype(float)
        columns = [f"cal.{n}" for n in calibration] + ["meta.single", "meta.app", "meta.micro"]
        rows = [n for n, k in zip(names, keep) if k]
        return ReferenceSet(calibration[0], Matrix(rows, columns, features), Matrix(rows, self.nodes, ratio),
                            node_features=self.node_features)


def node_features(data: CrossData):
    """What the learned models know of each node besides the references (registry/models/learned_runs):
    vCPUs, memory (NaN where unknown) and whether it is an ARM node (aarch64)."""
    nodes = data.nodes
    memory = nodes["memory_bytes"] if "memory_bytes" in nodes else np.nan
    return nodes.assign(memory_bytes=memory, aarch64=(nodes["architecture"].astype(str) == "aarch64").astype(float)
                        )[["n_cpus", "memory_bytes", "aarch64"]].astype(float)


def query(app: str, times: Mapping[str, float], calibration: list[str], single: bool) -> Query:
    """The app as a query: its log time on each calibration node relative to the base (the first)."""
    base = float(times[calibration[0]])
    signature = {f"cal.{n}": float(np.log(float(times[n]) / base)) for n in calibration}
    signature["meta.single"] = 1.0 if single else 0.0
    return Query(app, signature, base)
