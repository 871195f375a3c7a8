"""A power-law scaling model, T(n) = a * n ** -b, written as a third party would write a plugin.

It uses only ``registry.models`` (the public API), declares one option, never sets ``warnings``
(the base class gives every model an empty list) and raises ``NotFittedError`` before a fit.
"""

import math

from registry.models import NotFittedError, Option, ScalingModel, ScalingPrediction, check_targets


class PowerLawModel(ScalingModel):
    name = "powerlaw"                 # must be the entry-point name
    version = "1.0.0"                 # a plugin's own version: stored with every fit
    description = "example plugin: T(n) = a n^-b by least squares in log-log space, b capped at max_exponent"
    options = (Option("max_exponent", float, 1.0, "largest b (1: linear speed-up)", low=0.0, high=2.0),)

    def __init__(self, max_exponent: float = 1.0):
        self.max_exponent = max_exponent
        self.a: float | None = None
        self.b: float | None = None

    def fit(self, threads, times, context=None):
        n, t = self._check_runs(threads, times)
        x, y = [math.log(v) for v in n], [math.log(v) for v in t]
        mx, my = sum(x) / len(x), sum(y) / len(y)
        slope = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y)) / sum((xi - mx) ** 2 for xi in x)
        self.b = min(max(-slope, 0.0), self.max_exponent)
        self.a = math.exp(my + self.b * mx)
        return self

    def predict(self, threads):
        if self.a is None:
            raise NotFittedError(self.name)
        out = []
        for n in check_targets(threads):
            t = self.a * n ** -self.b
            out.append(ScalingPrediction(n, t, t * 0.9, t * 1.1))
        return out

    def params(self):
        if self.a is None:
            raise NotFittedError(self.name)
        return {"max_exponent": self.max_exponent, "a": self.a, "b": self.b}

    @classmethod
    def from_params(cls, params):
        model = cls(params["max_exponent"])
        model.a, model.b = params["a"], params["b"]
        return model

    def describe(self):
        return self.description if self.a is None else f"power law: T(n) = {self.a:.4g} s n^-{self.b:.3g}"
