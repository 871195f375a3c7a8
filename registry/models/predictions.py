"""One query's predictions on many nodes, kept as arrays.

`nodereg match` projects every phase of a trace onto every node of a site registry (10,000 node
types): one `NodePrediction` object, explanation dict and warnings list per node, phase and part
made most of the projection's time, and its sums, interpolations and totals then read them back one
attribute at a time. `NodePredictions` keeps the times and bounds as arrays in node order, so those
steps are array operations; it is still a mapping of node -> `NodePrediction` (built on demand),
which is what a model's `predict` returns and what every other reader (JSON, stored explanations,
tests) sees. A model that computes in bulk (registry.models.similarity) provides `predict_many`;
for any other, `predict_many` below wraps its `predict`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import numpy as np

from registry.models.base import NodePrediction, Query


class NodePredictions(Mapping):
    """node -> NodePrediction, stored as arrays. `explain(i)`: the explanation of the i-th node
    (built only when asked for); `warnings`: i -> that node's warnings, for the few nodes that have
    any; `flags`: named boolean arrays over the nodes (e.g. 'disagree': the explanation says the
    nearest references disagree) that callers test in bulk without building explanations."""

    def __init__(self, nodes: list[str], predicted, low, high, explain: Callable[[int], dict] | None = None,
                 warnings: Mapping[int, list[str]] | None = None, flags: Mapping[str, np.ndarray] | None = None):
        self.nodes = list(nodes)
        self.predicted, self.low, self.high = (np.asarray(a, dtype=float) for a in (predicted, low, high))
        self._explain = explain
        self.warnings = dict(warnings or {})
        self.flags = dict(flags or {})
        self._index: dict[str, int] | None = None

    @classmethod
    def of(cls, predictions: Mapping[str, NodePrediction] | list[NodePrediction]) -> NodePredictions:
        """Predictions given as objects (a list in node order, or a mapping), as arrays."""
        if isinstance(predictions, NodePredictions):
            return predictions
        preds = list(predictions.values()) if isinstance(predictions, Mapping) else list(predictions)
        explanations = [p.explanation for p in preds]
        return cls([p.node for p in preds], [p.predicted_s for p in preds], [p.low_s for p in preds],
                   [p.high_s for p in preds], explain=explanations.__getitem__,
                   warnings={i: list(p.warnings) for i, p in enumerate(preds) if p.warnings})

    @classmethod
    def constant(cls, nodes: list[str], time_s: float) -> NodePredictions:
        """The same time on every node (a phase the processor does not set the time of)."""
        same = np.full(len(nodes), float(time_s))
        return cls(nodes, same, same, same)

    def index(self, node: str) -> int:
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.nodes)}
        return self._index[node]

    def explanation(self, i: int) -> dict:
        return dict(self._explain(i)) if self._explain is not None else {}

    def __getitem__(self, node: str) -> NodePrediction:
        i = self.index(node)
        return NodePrediction(node, float(self.predicted[i]), float(self.low[i]), float(self.high[i]),
                              explanation=self.explanation(i), warnings=list(self.warnings.get(i, [])))

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def take(self, nodes: list[str]) -> NodePredictions:
        """These nodes' predictions, in this order (a node not here: KeyError, as for a dict)."""
        if nodes == self.nodes:
            return self
        at = np.array([self.index(n) for n in nodes], dtype=np.int64)
        where = {int(j): i for i, j in enumerate(at.tolist())}
        return NodePredictions(nodes, self.predicted[at], self.low[at], self.high[at],
                               explain=None if self._explain is None else (lambda i: self._explain(int(at[i]))),
                               warnings={where[j]: w for j, w in self.warnings.items() if j in where},
                               flags={k: v[at] for k, v in self.flags.items()})

    def all_warnings(self) -> list[str]:
        """Every node's warnings, in node order (repeats included)."""
        return [w for i in sorted(self.warnings) for w in self.warnings[i]]


def predict_many(model, query: Query, nodes: list[str]) -> NodePredictions:
    """`model`'s predictions of `query` on `nodes`, as arrays: in bulk where the model computes
    them so, else from its `predict`."""
    bulk = getattr(model, "predict_many", None)
    return bulk(query, nodes) if bulk is not None else NodePredictions.of(model.predict(query, nodes))
