"""The model plugin API: two kinds of model share one registry of plugins.

* **Projection models** answer "how long would this phase/app take on node X?" from a
  *reference set*: things measured on the base node (their signatures) *and* on every node
  (their times). For `nodereg match` the references are microbenchmark configs (signature on the
  base node, time per iteration on each node); for `nodereg evaluate` on the Lumos data they are
  the other applications (sar signature on the base VM, measured runtimes on each VM). The query
  is a signature measured on the base node plus its base time. A model predicts the log of the
  node-to-base time ratio; the time is base time x exp(prediction).
* **Scaling models** answer "how long at n threads?" from runs of one app on one node at a few
  thread counts (Barnes log-log, Downey/ADEPT, Amdahl).

Plugins register under the entry-point group ``nodereg.models`` (see ``registry.models.plugins``).
A model says what it needs in ``needs``; fitted parameters round-trip through ``params()`` /
``from_params()`` (JSON-able data, never pickles: a shared registry must not execute what it
loads) so that they can be stored in the registry's ``models`` table (``registry.models.store``).
Every prediction carries an interval and the warnings that apply to it.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from registry import __version__
from registry.errors import UserError
from registry.models.options import Option

if TYPE_CHECKING:
    import pandas as pd

# What a model's fit or predict raises when it cannot serve the data it is given (too few
# references, nothing both measured and signed, a refused extrapolation): UserError from its own
# checks (one line for the user), ValueError from the input checks of numpy, scipy and
# scikit-learn (NaN or empty arrays, a singular matrix: numpy's LinAlgError is a ValueError).
# Whoever runs many models (`nodereg evaluate`) reports these per model and goes on; anything else
# (TypeError, AttributeError, KeyError, ZeroDivisionError, ...) is a bug in the model and surfaces.
MODEL_FAILURES = (UserError, ValueError)

# what a model can need (declared in Model.needs)
NEEDS_SIGNATURES = "signatures"        # query + reference signatures on the base node
NEEDS_NODE_FEATURES = "node_features"  # per-node profile features (bandwidths, peaks, inventory)
NEEDS_STREAMS = "streams"              # thesis stream descriptors (size, stride, dtype, access)
NEEDS_SCALING_RUNS = "scaling_runs"    # runs of one app at several thread counts
NEEDS = frozenset({NEEDS_SIGNATURES, NEEDS_NODE_FEATURES, NEEDS_STREAMS, NEEDS_SCALING_RUNS})
KINDS = ("projection", "scaling")


class NotFittedError(UserError):
    """What every model's predict (and params, where it needs a fit) raises before fit: one class and
    one message for all models, so callers and the conformance check can rely on it."""

    def __init__(self, name: str):
        super().__init__(f"the {name} model is not fitted yet: fit it before predicting")


@dataclass(frozen=True)
class Matrix:
    """A labelled 2-D float array (NaN = missing): what `nodereg match` hands a model instead of a
    DataFrame, since importing pandas alone is a sixth of that command on a 10,000-node registry."""

    rows: list
    columns: list
    values: np.ndarray

    @classmethod
    def of(cls, table: Matrix | pd.DataFrame) -> Matrix:
        """`table` as a Matrix (a DataFrame's cells as floats)."""
        if isinstance(table, Matrix):
            return table
        return cls(list(table.index), list(table.columns), table.to_numpy(dtype=float))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.values, index=pd.Index(self.rows), columns=pd.Index(self.columns))

    def take_rows(self, rows: list) -> Matrix:
        """These rows, in this order; a row not here is all NaN."""
        if list(rows) == self.rows:
            return self
        where = {r: i for i, r in enumerate(self.rows)}
        out = np.full((len(rows), len(self.columns)), np.nan)
        found = [(i, where[r]) for i, r in enumerate(rows) if r in where]
        if found:
            to, at = zip(*found)
            out[list(to)] = self.values[list(at)]
        return Matrix(list(rows), self.columns, out)


class ReferenceSet:
    """What projection models learn from, all seen from one base node.

    * ``features``: index reference id; columns 'source.metric'; measured on the base node.
    * ``log_ratio``: index reference id; columns node; ln(time on node / time on base); NaN = unmeasured.
    * ``node_features``: index node; numeric profile features (optional).
    * ``feature_weights``: 'source.metric' or 'source.*' -> weight.
    * ``reference_weights``: reference id -> a prior on its vote (registry.match.track: how well it
      moves like the apps measured on many nodes); 1 for a reference not named, all 1 when None.

    ``features`` and ``log_ratio`` are given as DataFrames or Matrix objects and can be read as
    either: models written with pandas read the DataFrames, ``similarity`` reads the arrays
    (``feature_matrix``, ``ratio_matrix``), so that `nodereg match` never imports pandas.
    """

    def __init__(self, base_node: str, features: Matrix | pd.DataFrame, log_ratio: Matrix | pd.DataFrame,
                 node_features: pd.DataFrame | None = None, feature_weights: Mapping[str, float] | None = None,
                 reference_weights: Mapping[str, float] | None = None):
        self.base_node = base_node
        self._features, self._log_ratio = features, log_ratio
        self.node_features = node_features
        self.feature_weights = dict(feature_weights or {})
        self.reference_weights = dict(reference_weights) if reference_weights is not None else None

    @functools.cached_property
    def features(self) -> pd.DataFrame:
        return self._features.frame() if isinstance(self._features, Matrix) else self._features

    @functools.cached_property
    def log_ratio(self) -> pd.DataFrame:
        return self._log_ratio.frame() if isinstance(self._log_ratio, Matrix) else self._log_ratio

    @functools.cached_property
    def feature_matrix(self) -> Matrix:
        return Matrix.of(self._features)

    @functools.cached_property
    def ratio_matrix(self) -> Matrix:
        """The log ratios, rows in the order of `feature_matrix`."""
        return Matrix.of(self._log_ratio).take_rows(self.feature_matrix.rows)

    def nodes(self) -> list[str]:
        return list(self._log_ratio.columns)


@dataclass
class Query:
    """One phase (or whole app) measured on the base node."""

    name: str
    signature: Mapping[str, float]  # 'source.metric' -> value, on the base node (a dict or a pandas Series)
    base_time_s: float

    @property
    def features(self) -> pd.Series:
        """The signature as a pandas Series, for models written with pandas."""
        if hasattr(self.signature, "reindex"):
            return self.signature
        import pandas as pd

        return pd.Series(dict(self.signature), dtype=float)


@dataclass
class NodePrediction:
    node: str
    predicted_s: float
    low_s: float
    high_s: float
    explanation: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class ScalingPrediction:
    threads: int
    predicted_s: float
    low_s: float
    high_s: float
    warnings: list[str] = field(default_factory=list)   # the warnings that concern this target only


@dataclass(frozen=True)
class CacheLevel:
    """One data cache level of a node, enough to tell whether a working set fits in it."""

    level: int
    size_bytes: int
    shared_by: int = 1      # CPUs sharing one instance
    instances: int = 1      # instances in the node

    def capacity(self, threads: int) -> int:
        """Bytes of this level that `threads` threads placed compactly can use together."""
        used = -(-max(1, int(threads)) // max(1, self.shared_by))
        return self.size_bytes * max(1, min(self.instances, used))


@dataclass
class ScalingContext:
    """Optional facts about the runs; each scaling model uses the ones it understands.

    * ``comm_s``: per split method ('MAX' = the slowest rank's computation and its communication,
      'CP' = along the critical path), the communication seconds of each run; computation is the
      run's time minus that. Barnes's SEP technique needs it; a plain timing has none.
    * ``working_set_bytes``: the app's total working set (strong scaling: fixed over thread counts).
    * ``caches``: the node's data caches, for the working-set-crosses-a-cache warning.
    * ``inputs``: Barnes's input variables x_i per run (problem sizes), modelled as log2(x_i) terms.
    """

    comm_s: dict[str, np.ndarray] = field(default_factory=dict)
    working_set_bytes: float | None = None
    caches: list[CacheLevel] = field(default_factory=list)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)


class Model(abc.ABC):
    """Base class of every model plugin. The abstract methods are the contract: a plugin that leaves
    one out is reported by `nodereg models` as not usable (registry.models.contract)."""

    name: ClassVar[str]
    # what `nodereg match` stores with each prediction and `models` with each fit: a built-in model
    # is code of this nodereg release; a plugin sets its own (and a new one when its results change)
    version: ClassVar[str] = __version__
    kind: ClassVar[str]             # 'projection' | 'scaling'
    description: ClassVar[str]      # one line, shown by `nodereg models`
    needs: ClassVar[frozenset[str]] = frozenset()   # a subset of NEEDS
    # the options users may set (keyword arguments of __init__; registry.models.options)
    options: ClassVar[tuple[Option, ...]] = ()
    baseline: ClassVar[bool] = False  # a simple reference model, listed apart in `nodereg evaluate`

    @property
    def warnings(self) -> list[str]:
        """Warnings about the fit as a whole (set by fit); empty for a model that never warns."""
        return self.__dict__.setdefault("_warnings", [])

    @warnings.setter
    def warnings(self, value: list[str]) -> None:
        self.__dict__["_warnings"] = list(value)

    def option_values(self) -> dict:
        """The declared options' values in this instance; by default the attributes of the same name
        (a model that keeps them elsewhere overrides this). Stored models restore them through params."""
        return {o.name: o.check(getattr(self, o.name)) for o in self.options}

    @abc.abstractmethod
    def params(self) -> dict:
        """Fitted parameters (and options) as JSON-able data, stored in the registry's models table."""

    @classmethod
    @abc.abstractmethod
    def from_params(cls, params: dict) -> Model:
        """The model `params()` describes, ready to predict."""

    def describe(self) -> str:
        """One paragraph on the fitted model, for people."""
        return self.description

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


class ProjectionModel(Model):
    kind = "projection"

    @abc.abstractmethod
    def fit(self, refs: ReferenceSet) -> ProjectionModel:
        """Learn from the references; returns self."""

    @abc.abstractmethod
    def predict(self, query: Query, nodes: list[str]) -> list[NodePrediction]:
        """One prediction per node, in the order of `nodes` (NaN where the model cannot say)."""


class ScalingModel(Model):
    """Runtime of one app on one node as a function of the thread (process) count."""

    kind = "scaling"
    needs = frozenset({NEEDS_SCALING_RUNS})
    min_thread_counts: ClassVar[int] = 2   # distinct thread counts the fit needs

    @abc.abstractmethod
    def fit(self, threads: np.ndarray, times: np.ndarray, context: ScalingContext | None = None) -> ScalingModel:
        """Learn from runs (repetitions allowed); returns self."""

    @abc.abstractmethod
    def predict(self, threads: list[int]) -> list[ScalingPrediction]:
        """One prediction per thread count, in the order given."""

    def _check_runs(self, threads, times) -> tuple[np.ndarray, np.ndarray]:
        """Validated float arrays; too few distinct thread counts is the user's to fix (more runs)."""
        n = np.asarray(threads, dtype=float).ravel()
        t = np.asarray(times, dtype=float).ravel()
        if n.shape != t.shape:
            raise ValueError("threads and times differ in length")
        if not (np.all(np.isfinite(n)) and np.all(n >= 1)):
            raise UserError("thread counts must be integers >= 1")
        if not (np.all(np.isfinite(t)) and np.all(t > 0)):
            raise UserError("run times must be positive numbers of seconds")
        distinct = np.unique(n).size
        if distinct < self.min_thread_counts:
            raise UserError(f"the {self.name} model needs runs at >= {self.min_thread_counts} different thread "
                            f"counts, got {distinct}")
        return n, t


def check_targets(threads) -> list[int]:
    targets = [int(n) for n in threads]
    if any(n < 1 for n in targets):
        raise UserError("prediction thread counts must be >= 1")
    return targets


def log_interval(predicted: np.ndarray, half_width_log: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An interval that is symmetric in log space (times are positive; errors are relative)."""
    predicted = np.asarray(predicted, dtype=float)
    half = np.asarray(half_width_log, dtype=float)
    return predicted * np.exp(-half), predicted * np.exp(half)


def superlinear_pairs(threads: np.ndarray, times: np.ndarray, tolerance: float = 0.05) -> list[tuple[int, int, float]]:
    """Consecutive thread counts whose measured speed-up beats the ideal by more than `tolerance`.

    Returns (n_low, n_high, measured speed-up); repeated runs are reduced to their median first.
    """
    ns, ts = median_by_threads(threads, times)
    out = []
    for i in range(len(ns) - 1):
        speedup = ts[i] / ts[i + 1]
        if speedup > (ns[i + 1] / ns[i]) * (1 + tolerance):
            out.append((int(ns[i]), int(ns[i + 1]), float(speedup)))
    return out


def median_by_threads(threads: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Repeated runs at one thread count reduced to their median (sorted by thread count)."""
    n, t = np.asarray(threads, dtype=float), np.asarray(times, dtype=float)
    ns, group = np.unique(n, return_inverse=True)
    return ns, np.array([np.median(t[group == i]) for i in range(len(ns))], dtype=float)
