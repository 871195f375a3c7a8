"""What `match` reads from the registry to size a model's intervals: the calibration from its checked
predictions, and the stored dispersion of the profiles its ratios come from.

A stored prediction is checked by the runs of its app on its node measured after it, at the
thread count the app runs with there and on the traced input (the rules of `nodereg accuracy`);
the base node's row is the base time, not a prediction, and is left out. Their scores give the
conformal scale of registry.models.intervals for the model and version (pure Python: `match`
does not import pandas).
"""

from __future__ import annotations

import json
import statistics
from typing import TYPE_CHECKING

from registry.db.read import read_arrays
from registry.db.statement import execute
from registry.models import intervals

if TYPE_CHECKING:
    import sqlalchemy as sa

_CHECKED = """
SELECT p.prediction_id, p.predicted_s, p.low_s, p.high_s, p.explanation_json, r.time_s
FROM predictions p
JOIN nodes n ON n.node_id = p.node_id
LEFT JOIN traces t ON t.trace_id = p.trace_id
JOIN runs r ON r.app_id = p.app_id AND r.node_id = p.node_id AND r.threads = COALESCE(t.threads, n.n_cpus)
           AND r.created_at >= p.created_at AND (r.input IS NULL OR t.input IS NULL OR r.input = t.input)
WHERE p.model_name = :model AND p.model_version = :version AND p.node_id <> p.base_node_id
  AND p.predicted_s > 0 AND p.low_s > 0 AND p.high_s > 0"""


def load_calibration(conn: sa.Connection, model: str, version: str) -> intervals.Calibration:
    """The calibration of `model` `version` from its checked predictions (uncalibrated below
    intervals.MIN_CHECKS of them)."""
    checked: dict[int, list] = {}
    for pid, predicted, low, high, explanation, time_s in execute(conn, _CHECKED,
                                                                  {"model": model, "version": version}):
        checked.setdefault(pid, [predicted, low, high, explanation, []])[4].append(time_s)
    scores = [intervals.score(predicted, low, high, statistics.median(times), applied_scale(explanation))
              for predicted, low, high, explanation, times in checked.values()]
    calibration = intervals.Calibration(model, version, len(scores))
    if calibration.calibrated:
        calibration.scale = intervals.conformal_scale(scores)
    return calibration


_DISPERSION = """
SELECT n.name, sum(s.cv2_sum) / sum(s.cv_runs) AS cv2
FROM v_latest_profile l
JOIN nodes n ON n.node_id = l.node_id
JOIN v_profile_summary s ON s.profile_id = l.profile_id
WHERE l.suite = :suite AND s.cv_runs > 0
GROUP BY n.name"""


def load_dispersion(conn: sa.Connection, suite: str) -> dict[str, float]:
    """Per node, the root-mean-square coefficient of variation over the repetitions of every config
    of its latest profiles in `suite` (one per host): how much its medians are to be trusted, which
    widens every ratio read from them (intervals.profile_noise). Nodes without one are left out."""
    rows = read_arrays(conn, _DISPERSION, {"suite": suite})   # (columns: a 10,000-node registry's rows at once)
    return {name: cv2 ** 0.5 for name, cv2 in zip(rows["name"].tolist(), rows["cv2"].astype(float).tolist())
            if cv2 == cv2}


def applied_scale(explanation: str | None) -> float:
    """The half-width scale a stored prediction's interval was given (1 before calibration existed)."""
    try:
        return float(json.loads(explanation or "{}").get("interval_scale") or 1.0)
    except (ValueError, TypeError, AttributeError):
        return 1.0
