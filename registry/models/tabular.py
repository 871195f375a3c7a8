"""The table the feature-based projection models (gbt, mob) learn from.

One row per (reference, node) with a measured time ratio: the reference's signature on the base
node (``sig:<source.metric>``) next to the node's profile features (``node:<feature>``), target
ln(time on node / time on base). Positive node features enter as log ratios to the base node's
value (0 on the base node itself), so a model learns "twice the bandwidth" rather than absolute
numbers it has seen on few machines. The training ranges are kept: trees predict a constant
beyond them (Branikas 2024: R^2 0.85 -> 0.47 on unseen node counts), so queries outside are flagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from registry.errors import UserError
from registry.models.base import Query, ReferenceSet
from registry.values import listed

SIG, NODE = "sig:", "node:"


def _transform(values: pd.Series, how: str, base: float | None) -> pd.Series:
    if how == "logrel":
        return np.log(values.astype(float) / base)
    if how == "log":
        return np.log(values.astype(float))
    return values.astype(float)


@dataclass
class FeatureRanges:
    """Everything needed to build query rows like the training rows, and to spot extrapolation."""

    signature_columns: list[str]
    node_columns: list[str]
    ranges: dict[str, tuple[float, float]]          # column -> (min, max) over the training rows
    fill: dict[str, float]                           # column -> training median (for missing values)
    transforms: dict[str, str]                       # raw node feature -> logrel | log | raw
    node_table: dict[str, dict[str, float]]          # node -> node column -> transformed value

    def to_dict(self) -> dict:
        return {"signature_columns": self.signature_columns, "node_columns": self.node_columns,
                "ranges": {k: list(v) for k, v in self.ranges.items()}, "fill": self.fill,
                "transforms": self.transforms, "node_table": self.node_table}

    @classmethod
    def from_dict(cls, d: dict) -> FeatureRanges:
        return cls(list(d["signature_columns"]), list(d["node_columns"]),
                   {k: (float(v[0]), float(v[1])) for k, v in d["ranges"].items()}, dict(d["fill"]),
                   dict(d["transforms"]), {n: dict(v) for n, v in d["node_table"].items()})

    def outside(self, column: str, value: float) -> str | None:
        lo, hi = self.ranges[column]
        if np.isfinite(value) and (value < lo - 1e-12 * abs(lo) or value > hi + 1e-12 * abs(hi)):
            return f"{column} = {value:.4g} outside the training range [{lo:.4g}, {hi:.4g}]"
        return None


@dataclass
class ProjectionRows:
    frame: pd.DataFrame
    y: np.ndarray
    signature_columns: list[str]
    node_columns: list[str]
    ranges: FeatureRanges
    notes: list[str] = field(default_factory=list)


def _node_features(refs: ReferenceSet) -> tuple[pd.DataFrame, dict[str, str], list[str]]:
    notes = []
    nf = refs.node_features
    if nf is None or nf.empty:
        raise UserError("this model needs node profile features (ReferenceSet.node_features)")
    nf = nf.apply(pd.to_numeric, errors="coerce")
    nf = nf.loc[:, nf.notna().any()]
    base = nf.loc[refs.base_node] if refs.base_node in nf.index else None
    transforms, table = {}, {}
    for col in nf.columns:
        values = nf[col].dropna()
        positive = bool((values > 0).all())
        if positive and base is not None and pd.notna(base[col]) and base[col] > 0:
            transforms[col] = "logrel"
        elif positive:
            transforms[col] = "log"
        else:
            transforms[col] = "raw"
        table[NODE + col] = _transform(nf[col], transforms[col], None if base is None else base[col])
    if base is None:
        notes.append(f"the base node {refs.base_node!r} has no profile features: node features are used as logs, "
                     "not as ratios to the base")
    return pd.DataFrame(table, index=nf.index), transforms, notes


def projection_rows(refs: ReferenceSet) -> ProjectionRows:
    """Training rows: every (reference, node) pair with a measured ratio and known node features."""
    node_frame, transforms, notes = _node_features(refs)
    sig = refs.features.apply(pd.to_numeric, errors="coerce")
    sig = sig.loc[:, sig.notna().any()]
    sig.columns = [SIG + c for c in sig.columns]
    ratios = refs.log_ratio.stack(future_stack=True).rename("y").reset_index()
    ratios.columns = ["ref", "node", "y"]
    ratios = ratios[np.isfinite(ratios["y"].astype(float))]
    unknown = sorted(set(ratios["node"]) - set(node_frame.index))
    if unknown:
        notes.append(f"no profile features for {listed(unknown, 'node')}: their ratios are not used")
        ratios = ratios[~ratios["node"].isin(unknown)]
    if ratios.empty:
        raise UserError("no (reference, node) pair has both a measured time ratio and node profile features")
    frame = pd.concat([sig.reindex(ratios["ref"]).reset_index(drop=True),
                       node_frame.reindex(ratios["node"]).reset_index(drop=True)], axis=1)
    fill = {c: float(frame[c].median()) if frame[c].notna().any() else 0.0 for c in frame.columns}
    frame = frame.fillna(fill)
    ranges = {c: (float(frame[c].min()), float(frame[c].max())) for c in frame.columns}
    table = {str(n): {c: float(v) for c, v in row.items() if pd.notna(v)} for n, row in node_frame.iterrows()}
    fr = FeatureRanges(list(sig.columns), list(node_frame.columns), ranges, fill, transforms, table)
    return ProjectionRows(frame, ratios["y"].to_numpy(dtype=float), list(sig.columns), list(node_frame.columns),
                          fr, notes)


@dataclass
class QueryRows:
    frame: pd.DataFrame
    nodes: list[str]
    warnings: dict[str, list[str]]


def query_rows(query: Query, nodes: list[str], ranges: FeatureRanges) -> QueryRows:
    """One row per target node for this query, and each node's extrapolation warnings."""
    unknown = [n for n in nodes if n not in ranges.node_table]
    if unknown:
        raise UserError(f"no profile features for {listed(unknown, 'node')}: profile "
                        f"{'it' if len(unknown) == 1 else 'them'} first")
    feats = pd.to_numeric(query.features, errors="coerce")
    common: list[str] = []
    sig_values = {}
    for col in ranges.signature_columns:
        v = feats.get(col[len(SIG):], np.nan)
        if pd.isna(v):
            common.append(f"the query lacks {col}: the training median is used")
            v = ranges.fill[col]
        sig_values[col] = float(v)
        note = ranges.outside(col, float(v))
        if note:
            common.append(f"extrapolation: {note}")
    rows, warnings = [], {}
    for node in nodes:
        nv = {c: ranges.node_table[node].get(c, ranges.fill[c]) for c in ranges.node_columns}
        warnings[node] = list(common) + [f"extrapolation: {n}" for c, v in nv.items()
                                         if (n := ranges.outside(c, v))]
        rows.append({**sig_values, **nv})
    return QueryRows(pd.DataFrame(rows, columns=ranges.signature_columns + ranges.node_columns), list(nodes), warnings)
