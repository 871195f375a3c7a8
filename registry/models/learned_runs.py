"""Learned models of an app measured on a few nodes (registry/crossarch; docs/crossarch.md): boosted
trees trained, in every fit, over many *training workloads* - the reference applications of the app's
thread class, its own family already left out of the references - on the same calibration nodes.

* ``paris`` (after Yadwadkar et al., "Selecting the best VM across multiple public clouds", SoCC
  2017): one row per (training workload w, node n). The workload's features are its fingerprint on
  the calibration nodes: its centred log pattern, its slope against log vCPUs, how far its pattern
  is from each key reference's, and the log ratios on n of its NEAREST references (a training
  workload's own family left out). The node's: log vCPUs, log vCPUs over the calibration nodes'
  mean and largest, the share of calibration nodes of another architecture, memory, the share of
  the reference apps measured on it, and the key references' log ratios relative to the calibration
  nodes (Geekbench's scores, single-core speed, all-core compute, memory bandwidth and latency). The
  target: w's log time on n relative to its mean over the calibration nodes.
* ``similar-runs-gbt`` (stacked): the same rows plus similar-runs' own prediction, from the nested
  cross-validation that similar-runs already runs (each reference app predicted from the others, its
  family left out); the trees learn the residual of similar-runs, and the share of their correction
  that is applied (SHRINKS) is chosen on held-out families, so that a correction that does not
  transfer to other families is switched off.

Both cross-fit: the training workloads are split by family into two halves, one ensemble per half;
each half's predictions of the other half's workloads are the out-of-fold errors that give the 80%
interval (per node where at least 10 workloads were measured, pooled elsewhere: as similar-runs),
and the prediction is the mean of the two ensembles. Training rows: every training workload on
TRAIN_NODES nodes spread over the suite (of those the inner cross-validation scores), each workload
weighted 1 / (workloads of its family), so that 68 compression variants do not outvote the other
families. Fitted models store their inputs, not trees: the ensembles are refitted, with a fixed
seed, when a loaded model first predicts.
"""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from registry.crossarch.references import VCPUS
from registry.models.base import NodePrediction, NotFittedError, Query
from registry.models.options import Option
from registry.models.similar_runs import (CAL, SINGLE, SimilarRunsModel, column_quantile, family_codes,
                                          node_predictions, weighted_projection)

# references whose log ratios describe a node (those present serve; the rest of the suite's 368 configs
# add little to these and cost fit time): vCPUs, Geekbench's scores, single-core speed, all-core
# compute, memory bandwidth (all cores, in and out of cache), memory latency
KEY_REFERENCES = (VCPUS, "geekbench:score:single", "geekbench:score:multi",
                  "sparecores:passmark:CPU_SINGLETHREAD:1t", "sparecores:passmark:SUMM_CPU:all",
                  "sparecores:passmark:SUMM_ME:all", "sparecores:passmark:ME_THREADED:all",
                  "sparecores:passmark:ME_LATENCY:all", "sparecores:bw_mem:rd:512MB:all",
                  "sparecores:bw_mem:rd:16KB:all", "sparecores:openssl:sha256:16384:all",
                  "sparecores:stressngfull:cpu-div16:1t", "sparecores:stressngfull:cpu-div16:all")
NEAREST = 3                # the closest references of a workload's thread class whose ratios are features
TRAIN_NODES = 60          # nodes per training workload (of the inner cross-validation's, evenly spread)
SHRINKS = (0.0, 0.25, 0.5, 0.75, 1.0)   # similar-runs-gbt: the share of the trees' correction applied
# fewer training workloads, fewer than 2 families, or fewer measured rows in either half: similar-runs'
# prediction, with a warning
MIN_WORKLOADS, MIN_ROWS = 6, 300
# small, strongly regularised ensembles: a leaf holds at least 1/LEAF_SHARE of the rows, several workloads'
# (what transfers to an app of another family; 150 rows on the Spare Cores data), and a fit takes about
# 0.1 s on an idle core
LEAF_SHARE = 20
TREES = {"max_iter": 25, "learning_rate": 0.2, "max_leaf_nodes": 8, "max_bins": 32,
         "l2_regularization": 1.0, "early_stopping": False, "random_state": 0}


class _LearnedRuns(SimilarRunsModel):
    """Boosted trees over (training workload, node) rows (module docstring); `residual` says whether the
    trees learn similar-runs' residual (with its prediction as a feature) or the log time itself."""

    residual = False

    def __init__(self, coverage: float = 0.8, tolerance: float | None = None, trees: int = TREES["max_iter"]):
        super().__init__(coverage, tolerance)
        self.trees = int(trees)

    # -- features ------------------------------------------------------------------------------

    def _context(self) -> dict:
        """What every row's features are built from, computed once per fit: the calibration nodes'
        indices, each node's features, the key references' centred log ratios."""
        f = self.fitted
        if "context" in f:
            return f["context"]
        nodes = f["nodes"]
        where = {n: i for i, n in enumerate(nodes)}
        cal = np.array([where[c[len(CAL):]] for c in f["columns"] if c[len(CAL):] in where], dtype=int)
        refs = {str(r): i for i, r in enumerate(f["refs"])}
        keys = [refs[k] for k in KEY_REFERENCES if k in refs]
        centred = f["L"][keys] - np.nanmean(f["L"][keys][:, cal], axis=1, keepdims=True) if len(cal) else \
            np.full((len(keys), len(nodes)), np.nan)
        nf = f.get("node_features")
        cols = []
        if nf is not None:
            vcpus = np.log(np.asarray(nf["n_cpus"], dtype=float))
            cols += [vcpus]
            if len(cal):
                cols += [vcpus - vcpus[cal].mean(), vcpus - vcpus[cal].max()]
                arm = np.asarray(nf["aarch64"], dtype=float)
                cols.append(np.abs(arm[:, None] - arm[cal][None, :]).mean(axis=1))
                with np.errstate(divide="ignore", invalid="ignore"):
                    mem = np.log(np.asarray(nf["memory_bytes"], dtype=float))
                cols.append(mem - np.nanmean(mem[cal]) if np.isfinite(mem[cal]).any() else mem)
        # the share of the reference apps measured on the node: which of the suite's tool versions ran there
        # (e.g. the 2024 compression runs used zstd's own threads, the 2025 ones one process per core)
        cols.append(np.isfinite(f["L"][f["app"]]).mean(axis=0) if f["app"].any() else np.ones(len(nodes)))
        node_x = np.column_stack(cols + list(centred)) if cols or len(keys) else np.zeros((len(nodes), 0))
        vcpu_row = refs.get(VCPUS)
        vc = -f["F"][vcpu_row] if vcpu_row is not None else None      # log vCPUs over the base, per cal node
        f["context"] = {"cal": cal, "keys": keys, "node_x": node_x,
                        "vcpu_cal": None if vc is None or np.ptp(vc) < 1e-9 else vc - vc.mean()}
        return f["context"]

    def _workload_x(self, patterns: np.ndarray) -> np.ndarray:
        """The fingerprint of workloads with log patterns `patterns` (W x C) over the calibration nodes:
        the centred pattern, its slope against log vCPUs (NaN when the calibration nodes have one
        vCPU count), and the RMS mismatch of its centred pattern with each key reference's."""
        f, ctx = self.fitted, self._context()
        centred = patterns - patterns.mean(axis=1, keepdims=True)
        cols = [centred]
        v = ctx["vcpu_cal"]
        cols.append(((centred @ v) / (v @ v))[:, None] if v is not None else np.full((len(patterns), 1), np.nan))
        keyF = f["F"][ctx["keys"]]
        keyF = keyF - keyF.mean(axis=1, keepdims=True)
        gap = np.sqrt(((centred[:, None, :] - keyF[None, :, :]) ** 2).mean(axis=2))
        cols.append(gap)
        return np.hstack(cols)

    def _nearest(self, patterns: np.ndarray, single: bool, family: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The NEAREST references of the workloads' thread class whose centred patterns over the
        calibration nodes are closest to each workload's (W x NEAREST indices, RMS mismatches), a
        training workload's own family left out (as the app's is from the references); ties (K = 1)
        go to applications before micro-benchmarks."""
        f = self.fitted
        centred = patterns - patterns.mean(axis=1, keepdims=True)
        cF = f["F"] - f["F"].mean(axis=1, keepdims=True)
        gap = np.sqrt(((centred[:, None, :] - cF[None, :, :]) ** 2).mean(axis=2))
        gap[:, f["single"] != single] = np.inf
        if family is not None:
            gap[family[:, None] == family_codes(f["refs"])[None, :]] = np.inf
        order = np.lexsort((~f["app"][None, :].repeat(len(gap), 0), gap), axis=1)[:, :NEAREST]
        return order, np.take_along_axis(gap, order, axis=1)

    def _rows(self, patterns: np.ndarray, nodes: np.ndarray, stacked: np.ndarray | None, single: bool,
              family: np.ndarray | None = None) -> np.ndarray:
        """Feature rows of every (workload, node) pair: W*N rows, workload-major. `family`: each
        training workload's family code (left out of its nearest references)."""
        f = self.fitted
        w = self._workload_x(patterns)
        n = self._context()["node_x"][nodes]
        near, gap = self._nearest(patterns, single, family)
        offsets = f["F"].mean(axis=1)
        projected = f["L"][near][:, :, nodes] - offsets[near][:, :, None]            # W x NEAREST x N
        parts = [np.repeat(np.hstack([w, np.where(np.isfinite(gap), gap, np.nan)]), len(nodes), axis=0),
                 np.tile(n, (len(w), 1)), projected.transpose(0, 2, 1).reshape(-1, near.shape[1])]
        if stacked is not None:
            parts.append(stacked.reshape(-1, 1))
        return np.hstack(parts)

    # -- training ------------------------------------------------------------------------------

    def _learn(self, single: bool) -> dict | None:
        """The cross-fitted ensembles and per-node interval half widths for this thread class, or None
        (too few training workloads: similar-runs' prediction serves)."""
        f = self.fitted
        key = bool(single)
        if key in f.setdefault("learned", {}):
            return f["learned"][key]
        if self.residual:
            self._choose(single)
            workloads, nodes, inner = f["inner"][key]
        else:   # paris needs none of similar-runs' inner cross-validation
            workloads, nodes, inner = self.inner_targets(single), self.scored_nodes(), None
        if len(nodes) > TRAIN_NODES:
            pick = np.linspace(0, len(nodes) - 1, TRAIN_NODES).astype(int)
            nodes, inner = nodes[pick], None if inner is None else inner[:, pick]
        fam = family_codes(f["refs"])[workloads]
        if len(workloads) < MIN_WORKLOADS or len(set(fam)) < 2:
            f["learned"][key] = None
            return None
        patterns = f["F"][workloads]
        offset = patterns.mean(axis=1)[:, None]
        y = f["L"][workloads][:, nodes] - offset
        stacked = inner - offset if self.residual else None
        if self.residual:
            y = y - stacked
        X = self._rows(patterns, nodes, stacked, single, fam)
        counts = {c: int((fam == c).sum()) for c in set(fam)}
        w = np.repeat([1.0 / counts[c] for c in fam], len(nodes))
        part = np.repeat(np.isin(fam, sorted(counts)[::2]), len(nodes))   # families split in two halves
        y = y.ravel()
        ok = np.isfinite(y)
        if min((ok & part).sum(), (ok & ~part).sum()) < MIN_ROWS:
            f["learned"][key] = None
            return None
        used = ~np.all(np.isnan(X[ok]), axis=0)   # a feature NaN everywhere (the vCPU slope at K = 1) is left out
        X = X[:, used]
        models, oof = [], np.full(len(y), np.nan)
        for held in (part, ~part):
            train = ok & ~held
            leaf = max(20, int(train.sum()) // LEAF_SHARE)
            model = HistGradientBoostingRegressor(**(TREES | {"max_iter": self.trees, "min_samples_leaf": leaf}))
            model.fit(X[train], y[train], sample_weight=w[train])
            models.append(model)
            test = ok & held
            if test.any():
                oof[test] = model.predict(X[test])
        shrink = 1.0
        if self.residual:   # how much of the correction to apply: chosen on the held-out halves
            shrink = min(SHRINKS, key=lambda a: np.nanmean(np.abs(a * oof - y)[ok]))
        err = np.abs(shrink * oof - y).reshape(len(workloads), len(nodes))
        glob = np.nanquantile(err, self.coverage) if np.isfinite(err).any() else 0.5
        half = np.full(len(f["nodes"]), glob)
        per = column_quantile(err, self.coverage, at_least=10)
        half[nodes] = np.where(np.isfinite(per), per, glob)
        f["learned"][key] = {"models": models, "half": half, "shrink": shrink, "features": used,
                             "workloads": [str(f["refs"][i]) for i in workloads]}
        return f["learned"][key]

    # -- predict -------------------------------------------------------------------------------

    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        if self.fitted is None:
            raise NotFittedError(self.name)
        f = self.fitted
        sig = dict(query.signature.items())
        single = float(sig.get(SINGLE, 0.0)) > 0.5
        learned = self._learn(single)
        if learned is None:
            self._warn(f"{self.name}: too few reference apps measured on these nodes to learn from (at least "
                       f"{MIN_WORKLOADS} of two families, {MIN_ROWS} runs in each half): similar-runs' prediction is used")
            return super().predict(query, nodes)
        q = np.array([float(sig[c]) for c in f["columns"]])
        offset = q.mean()
        everywhere = np.arange(len(f["nodes"]))
        stacked, explanation = None, {"trees": self.trees}
        if self.residual:
            tol, weight, _ = self._choose(single)
            sr = weighted_projection(f["F"], f["L"], q[None, :], self._prior(single, weight)[None, :], tol,
                                     self._local(single))[0]
            stacked = sr - offset
            explanation |= {"tolerance": tol, **weight._asdict(), "shrink": learned["shrink"]}
        X = self._rows(q[None, :], everywhere, stacked, single)[:, learned["features"]]
        log = offset + learned["shrink"] * np.mean([m.predict(X) for m in learned["models"]], axis=0)
        if stacked is not None:
            log = log + stacked
        return node_predictions(nodes, f["nodes"], query.base_time_s, log, learned["half"], explanation)

    # -- storage -------------------------------------------------------------------------------

    def params(self) -> dict:
        return super().params() | {"trees": self.trees}

    @classmethod
    def from_params(cls, params: dict) -> _LearnedRuns:
        base = SimilarRunsModel.from_params(params)
        model = cls(base.coverage, base.tolerance, params.get("trees", TREES["max_iter"]))
        model.fitted = base.fitted
        return model


_OPTIONS = (*SimilarRunsModel.options,
            Option("trees", int, TREES["max_iter"], "boosting iterations of each of the two ensembles", low=1,
                   high=2000))


class ParisModel(_LearnedRuns):
    name = "paris"
    description = ("an app measured on 1-3 nodes: boosted trees trained on the other reference apps' runs, from "
                   "their fingerprint on those nodes and each node's features (after PARIS, Yadwadkar 2017)")
    options = _OPTIONS


class SimilarRunsGbtModel(_LearnedRuns):
    name = "similar-runs-gbt"
    description = ("similar-runs corrected by boosted trees trained on its inner cross-validation residuals "
                   "(the reference apps' fingerprints and each node's features)")
    options = _OPTIONS
    residual = True
