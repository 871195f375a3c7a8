"""The log-space average of the scaling models: the geometric mean of their predicted runtimes.

Each single model extrapolates with its own bias: Amdahl and USL flatten (or turn up) as their
serial and contention terms dictate, Barnes's log-log regression continues the last trend in log
space, Downey saturates at its fitted parallelism A. Which bias fits an unseen thread count cannot
be told from the training runs (Barnes's within-training check picks the wrong model as often as
the right one on the real series, docs/models.md), so the ensemble does not choose: it averages
log T over the members, which is the least-squares compromise for relative errors and keeps a
single model's large miss from dominating. The interval spans the members' predictions and the
geometric mean of their intervals; a wide disagreement between the members is itself a warning.

Members that need more distinct thread counts than the runs have are left out (with a warning).
"""

from __future__ import annotations

import numpy as np

from registry.errors import UserError
from registry.models.amdahl import AmdahlModel
from registry.models.base import NotFittedError, ScalingContext, ScalingModel, ScalingPrediction, check_targets
from registry.models.downey import DowneyModel
from registry.models.loglog import LogLogModel
from registry.models.options import Option
from registry.models.usl import UslModel

MEMBERS: dict[str, type[ScalingModel]] = {"amdahl": AmdahlModel, "usl": UslModel, "loglog": LogLogModel,
                                          "downey": DowneyModel}
DISAGREEMENT = 1.25     # largest / smallest member prediction above which a target is flagged


class EnsembleModel(ScalingModel):
    name = "ensemble"
    description = "geometric mean of the amdahl, usl, loglog and downey predictions (log-space model average)"
    min_thread_counts = 2
    options = (Option("members", tuple, tuple(MEMBERS), "the models averaged", choices=tuple(MEMBERS)),)

    def __init__(self, members: tuple[str, ...] | list[str] = tuple(MEMBERS)) -> None:
        unknown = [m for m in members if m not in MEMBERS]
        if unknown or not members:
            raise UserError(f"ensemble members must be among {', '.join(MEMBERS)}, got {', '.join(unknown) or 'none'}")
        self.members = tuple(dict.fromkeys(members))
        self.member_names = list(self.members)
        self.fitted: dict[str, ScalingModel] = {}
        self.warnings = []

    def fit(self, threads, times, context: ScalingContext | None = None) -> EnsembleModel:
        n, t = self._check_runs(threads, times)
        distinct = np.unique(n).size
        self.fitted, self.warnings = {}, []
        for name in self.member_names:
            cls = MEMBERS[name]
            if distinct < cls.min_thread_counts:
                self._warn(f"{name} left out: it needs runs at >= {cls.min_thread_counts} thread counts, "
                           f"got {distinct}")
                continue
            self.fitted[name] = cls().fit(n, t, context)
            for w in self.fitted[name].warnings:
                self._warn(f"{name}: {w}")
        if not self.fitted:
            raise UserError("no ensemble member can be fitted on these runs")
        return self

    def predict(self, threads) -> list[ScalingPrediction]:
        if not self.fitted:
            raise NotFittedError(self.name)
        targets = check_targets(threads)
        per = {name: model.predict(targets) for name, model in self.fitted.items()}
        out = []
        for i, n in enumerate(targets):
            preds = {name: p[i] for name, p in per.items()}
            values = np.array([p.predicted_s for p in preds.values()])
            mean = float(np.exp(np.log(values).mean()))
            low = min(float(np.exp(np.mean([np.log(p.low_s) for p in preds.values()]))), float(values.min()))
            high = max(float(np.exp(np.mean([np.log(p.high_s) for p in preds.values()]))), float(values.max()))
            warnings = [f"{name}: {w}" for name, p in preds.items() for w in p.warnings]
            if values.max() > DISAGREEMENT * values.min():
                spread = ", ".join(f"{name} {p.predicted_s:.4g} s" for name, p in preds.items())
                warnings.append(f"the models disagree by {values.max() / values.min() - 1:.0%} ({spread}): "
                                "the runs do not tell how the curve continues")
            out.append(ScalingPrediction(n, mean, low, high, warnings))
        return out

    def params(self) -> dict:
        return {"members": self.member_names, "fitted": {name: m.params() for name, m in self.fitted.items()},
                "warnings": self.warnings}

    @classmethod
    def from_params(cls, params: dict) -> EnsembleModel:
        model = cls(params["members"])
        model.fitted = {name: MEMBERS[name].from_params(p) for name, p in params["fitted"].items()}
        model.warnings = list(params.get("warnings", []))
        return model

    def describe(self) -> str:
        if not self.fitted:
            return self.description
        return (f"Ensemble: geometric mean of {', '.join(self.fitted)}. "
                + " | ".join(m.describe() for m in self.fitted.values()))
