"""Small built-in data for the conformance check (registry.models.contract.check_model).

Synthetic and seeded, a few dozen numbers: a scaling model gets runs that follow Amdahl's law with
2% noise; a projection model gets references whose node-to-base time ratios follow their signature
(so a model has something to learn), node profile features for models that need them, and a
query. A model that needs something no fixture here provides (``streams``: the thesis's stream
descriptors) is checked without a fit, and the report says so.
"""

from __future__ import annotations

import math

import numpy as np

from registry.models.base import (NEEDS_NODE_FEATURES, NEEDS_SCALING_RUNS, NEEDS_SIGNATURES, Model, Query,
                                  ReferenceSet, ScalingModel)

NODES = ["fast", "slow", "wide"]
_FEATURES = ["sar.cpu_util", "sar.mem_util", "proc.rss_mb", "counters.ipc"]
_PROVIDED = {"projection": {NEEDS_SIGNATURES, NEEDS_NODE_FEATURES}, "scaling": {NEEDS_SCALING_RUNS}}


class ScalingFixture:
    threads = np.array([1, 1, 2, 4, 8, 16])
    targets = [32, 4]          # not sorted: predictions come in the order asked

    def __init__(self) -> None:
        noise = np.random.default_rng(7).normal(0.0, 0.02, len(self.threads))
        self.times = (4.0 + 96.0 / self.threads) * np.exp(noise)

    def fit(self, model: ScalingModel) -> ScalingModel:
        return model.fit(self.threads, self.times)

    def predictions(self, model: ScalingModel) -> list[float]:
        return [v for p in model.predict(self.targets) for v in (p.predicted_s, p.low_s, p.high_s)]

    def check(self, model: ScalingModel) -> None:
        preds = model.predict(self.targets)
        if [p.threads for p in preds] != self.targets:
            raise AssertionError(f"predicted thread counts {[p.threads for p in preds]}, asked for {self.targets}")
        for p in preds:
            _check_one(f"{p.threads} threads", p.predicted_s, p.low_s, p.high_s, p.warnings)
        _check_warnings("the model", model.warnings)


class ProjectionFixture:
    def __init__(self) -> None:
        import pandas as pd

        rng = np.random.default_rng(11)
        refs = [f"ref{i:02d}" for i in range(30)]
        x = pd.DataFrame(rng.uniform(0.1, 1.0, (len(refs), len(_FEATURES))), index=refs, columns=_FEATURES)
        memory = x["sar.mem_util"].to_numpy()
        ratio = {"fast": -0.5 + 0.3 * memory, "slow": 0.4 + 0.5 * memory, "wide": -0.2 - 0.4 * (1 - memory)}
        y = pd.DataFrame({n: r + rng.normal(0.0, 0.03, len(refs)) for n, r in ratio.items()}, index=refs)
        y.iloc[3, 1] = np.nan                                 # one reference unmeasured on one node
        nodes = pd.DataFrame({"mem_bw_gbs": [40.0, 90.0, 25.0, 60.0], "peak_gflops": [300.0, 500.0, 200.0, 900.0]},
                             index=["base", *NODES])
        self.refs = ReferenceSet("base", x, y, nodes, {"*": 1.0})
        self.query = Query("app", {"sar.cpu_util": 0.5, "sar.mem_util": 0.7, "proc.rss_mb": 0.4,
                                   "counters.ipc": 0.6}, 10.0)

    def fit(self, model):
        return model.fit(self.refs)

    def predictions(self, model) -> list[float]:
        return [v for p in model.predict(self.query, NODES) for v in (p.predicted_s, p.low_s, p.high_s)]

    def check(self, model) -> None:
        preds = model.predict(self.query, NODES)
        if [p.node for p in preds] != NODES:
            raise AssertionError(f"predicted nodes {[p.node for p in preds]}, asked for {NODES}")
        for p in preds:
            _check_one(p.node, p.predicted_s, p.low_s, p.high_s, p.warnings)
        _check_warnings("the model", model.warnings)


def _check_one(where: str, predicted: float, low: float, high: float, warnings) -> None:
    if not (math.isfinite(predicted) and predicted > 0):
        raise AssertionError(f"{where}: predicted {predicted!r} s, not a positive number")
    if not (low <= predicted * (1 + 1e-9) and predicted <= high * (1 + 1e-9)):
        raise AssertionError(f"{where}: the interval [{low}, {high}] does not hold the prediction {predicted}")
    _check_warnings(where, warnings)


def _check_warnings(where: str, warnings) -> None:
    if not (isinstance(warnings, list) and all(isinstance(w, str) for w in warnings)):
        raise AssertionError(f"{where}: warnings must be a list of str, got {warnings!r}")


def fixture_for(cls: type[Model]) -> ScalingFixture | ProjectionFixture | str:
    """The fixture for `cls`'s kind, or why there is none (a need no fixture provides)."""
    missing = sorted(set(cls.needs) - _PROVIDED[cls.kind])
    if missing:
        return f"no built-in fixture provides {', '.join(missing)}"
    return ScalingFixture() if cls.kind == "scaling" else ProjectionFixture()


def unfitted_call(model: Model) -> None:
    """The model's predict on a fresh instance (expected to raise NotFittedError)."""
    if model.kind == "scaling":
        model.predict([2])
    else:
        model.predict(Query("app", {"sar.cpu_util": 0.5}, 1.0), NODES)
