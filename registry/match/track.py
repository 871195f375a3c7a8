"""How well each reference moves like the applications measured on many nodes: a prior on its vote.

A phase's nearest references by signature (registry.models.similarity) are the configs that look like
the phase on the base node; nothing in a signature says whether they move from node to node like any
program does. Where the registry holds applications measured on one thread on many node types (an
import: Spare Cores' Geekbench single-core and one-thread compression results on 2,723 types), each
one-thread reference has a *track record*: its mean absolute log error as a single ratio predicting
each of those apps (centred: offset by the mean gap over the nodes both measured), averaged per app
family and then over families (registry.io.sparecores.apps.app_family: the 68 one-thread compression
variants are 8 families, one per algorithm), and the vote it casts for a phase's serial part is multiplied by
exp(-(E - min E) / SHARPNESS), the prior `match --from-runs` weighs references by
(registry.models.similar_runs.reliability_factor).

Why: on the imported types `stressng:cache` and membench's 16 MiB latency (at the last-level cache's
edge, which differs per type) err 0.42 and 0.52 log units as single ratios, `stressng:qsort` 0.15; the
first two were the nearest references of the worst-predicted traced programs (zstd-22, lzma-9 compress
46-88% off on every imported type). Only one thread: how an all-CPU app moves between types mixes the
per-core speed with how it scales over their vCPUs, which differs per app (Geekbench multi-core
saturates, Redis does not: docs/crossarch.md), so the mean all-CPU app says little of a given phase;
weighing the all-CPU parts too was measured and made the traced all-CPU programs worse
(docs/sparecores-trace.md, stop 23).

Nothing is stored: the apps' runs are read with the profiles, and `--exclude PREFIX` leaves out the
apps whose name starts with it as it leaves out configs (a program checked against the imported
results of its own kind). A registry without apps measured on MIN_NODES nodes gets no prior.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from registry.db.read import read_arrays
from registry.io.sparecores.apps import app_family

MIN_NODES = 50       # nodes an app must have been measured on to judge the references
SHARPNESS = 0.1      # log units of mean error (the least sharp of similar-runs' grid)

# every one-thread run (the median per node is taken in numpy, `_medians`: SQL's grouped median costs
# 4x the read on a registry of imported types)
_APP_RUNS = "SELECT node_id, app_id, time_s FROM runs WHERE threads = 1 AND time_s > 0"
_NAMES = "SELECT node_id AS id, name FROM nodes"
_APPS = "SELECT app_id AS id, name FROM apps"


@dataclass
class AppTimes:
    """The apps that judge the references: their log median one-thread times, nodes x apps (NaN: not
    measured), and an integer per app family."""

    nodes: list[str]
    apps: list[str]
    log_time: np.ndarray
    family: np.ndarray

    @property
    def digest(self) -> str:
        """What a prediction weighed by these apps depends on (registry.match.stored.inputs_digest)."""
        h = hashlib.sha256("\n".join(self.apps).encode())
        h.update(np.ascontiguousarray(np.nan_to_num(self.log_time, nan=-1e9)).tobytes())
        return h.hexdigest()

    def records(self, names: list[str], nodes: list[str], log_ratio: np.ndarray) -> np.ndarray:
        """Each reference's track record (rows of `log_ratio`, references x `nodes`, log time ratios
        at one thread): mean absolute centred log error per app, per family, then over families; NaN for
        a reference that shares fewer than MIN_NODES measured nodes with every app."""
        at = {n: i for i, n in enumerate(self.nodes)}
        rows = np.array([at.get(n, -1) for n in nodes], dtype=np.int64)
        on = rows >= 0
        out = np.full(len(names), np.nan)
        if not on.any():
            return out
        y = self.log_time[rows[on]]                                     # nodes x apps
        have_y = np.isfinite(y)
        y0 = np.where(have_y, y, 0.0)
        for r in range(len(names)):
            x = log_ratio[r, on]
            m = have_y & np.isfinite(x)[:, None]
            count = m.sum(axis=0)
            ok = count >= MIN_NODES
            if not ok.any():
                continue
            n = np.maximum(count, 1)
            gap = (np.where(np.isfinite(x), x, 0.0)[:, None] - y0) * m   # x - y where both measured
            err = (np.abs(gap - (gap.sum(axis=0) / n)) * m).sum(axis=0) / n
            out[r] = float(np.mean([err[ok & (self.family == f)].mean() for f in np.unique(self.family[ok])]))
        return out

    def weights(self, names: list[str], nodes: list[str], log_ratio: np.ndarray) -> dict[str, float] | None:
        """Each reference's vote prior (module doc); None where no reference has a track record."""
        from registry.models.similar_runs import reliability_factor

        records = self.records(names, nodes, log_ratio)
        if not np.isfinite(records).any():
            return None
        return dict(zip(names, reliability_factor(records, SHARPNESS).tolist()))


def load(conn, nodes: list[str], itself: str, leave_out: tuple[str, ...] = ()) -> AppTimes | None:
    """The apps measured on one thread on at least MIN_NODES of `nodes`, but the traced app `itself`
    and those whose name starts with one of `leave_out` (`--exclude`); None where there are none."""
    runs = read_arrays(conn, _APP_RUNS)
    if not len(runs["node_id"]):
        return None
    # ids to rows and columns by array lookups: a registry of imported types has 220,000 such runs
    known, apps = read_arrays(conn, _NAMES), read_arrays(conn, _APPS)
    wanted = {n: i for i, n in enumerate(nodes)}
    node_ids = known["id"].astype(np.int64)
    row_of = np.full(int(max(node_ids.max(initial=0), runs["node_id"].max())) + 1, -1, dtype=np.int64)
    row_of[node_ids] = [wanted.get(n, -1) for n in known["name"].tolist()]
    row = row_of[runs["node_id"].astype(np.int64)]
    app_ids, col = np.unique(runs["app_id"].astype(np.int64), return_inverse=True)
    app_name = dict(zip(apps["id"].tolist(), apps["name"].tolist()))
    names = [str(app_name.get(a, "")) for a in app_ids.tolist()]
    keep = row >= 0
    counts = np.bincount(col[keep], minlength=len(app_ids))
    usable = (counts >= MIN_NODES) & np.array([bool(n) and n != itself and not n.startswith(leave_out)
                                               for n in names])
    if not usable.any():
        return None
    log_time = np.full((len(nodes), len(app_ids)), np.nan)
    cell, median = _medians(row[keep] * len(app_ids) + col[keep], runs["time_s"].astype(float)[keep], log_time.size)
    log_time.reshape(-1)[cell] = np.log(median)
    kept = np.flatnonzero(usable)
    kept_names = [names[i] for i in kept]
    families: dict[str, int] = {}
    family = np.array([families.setdefault(app_family(n), len(families)) for n in kept_names], dtype=np.int64)
    return AppTimes(list(nodes), kept_names, log_time[:, kept], family)


def _medians(cell: np.ndarray, value: np.ndarray, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct cells (of `cells`) and the median of each one's values; only the cells with several
    values are sorted (most have one run)."""
    count = np.bincount(cell, minlength=cells)
    alone = count[cell] == 1
    if alone.all():
        return cell, value
    many, v = cell[~alone], value[~alone]
    order = np.lexsort((v, many))
    many, v = many[order], v[order]
    first = np.flatnonzero(np.r_[True, many[1:] != many[:-1]])
    n = np.diff(np.r_[first, len(many)])
    return (np.concatenate([cell[alone], many[first]]),
            np.concatenate([value[alone], (v[first + (n - 1) // 2] + v[first + n // 2]) / 2]))
