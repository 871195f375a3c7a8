"""What `match` reads from the registry to size a model's intervals: the calibration from its checked
predictions, and the stored dispersion of the profiles its ratios come from.

A stored prediction is checked by the runs of its app on its node measured after it, at the
thread count the app runs with there and on the traced input (the rules of `nodereg accuracy`);
the base node's row is the base time, not a prediction, and is left out. Their scores give the
conformal scale of registry.models.intervals for the model and version (pure Python: `match`
does not import pandas), per group of nodes (`node_groups`): the suite the references come from,
and whether the node measured (nearly) every config the base did. A group with fewer than
intervals.MIN_CHECKS checked predictions in this registry takes the calibration shipped with
nodereg for the same model and version where there is one (interval_calibration.json, written by
scripts/validate_sparecores.py --calibration-out: programs traced here, predicted on the imported
types, checked against Spare Cores' measurements of the same programs), else stays uncalibrated.
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from registry.db.read import read_arrays
from registry.db.statement import execute
from registry.models import intervals

if TYPE_CHECKING:
    import sqlalchemy as sa

    from registry.match.references import Profiles

FULL_SHARE = 0.9        # a node that measured this share of the base's configs is predicted from all of them
SHIPPED = Path(__file__).with_name("interval_calibration.json")

_CHECKED = """
SELECT p.prediction_id, p.predicted_s, p.low_s, p.high_s, p.explanation_json, r.time_s
FROM predictions p
JOIN nodes n ON n.node_id = p.node_id
LEFT JOIN traces t ON t.trace_id = p.trace_id
JOIN runs r ON r.app_id = p.app_id AND r.node_id = p.node_id AND r.threads = COALESCE(t.threads, n.n_cpus)
           AND r.created_at >= p.created_at AND (r.input IS NULL OR t.input IS NULL OR r.input = t.input)
WHERE p.model_name = :model AND p.model_version = :version AND p.node_id <> p.base_node_id
  AND p.predicted_s > 0 AND p.low_s > 0 AND p.high_s > 0"""


def group_name(suite: str, full: bool) -> str:
    return f"{suite}:{'full' if full else 'partial'}"


def node_groups(profiles: Profiles, suite: str, targets: list[str]) -> dict[str, str]:
    """Each target's interval group: `SUITE:full` where it measured at least FULL_SHARE of the configs
    the base measured, else `SUITE:partial`. A partial node's phases fall back to the few configs it
    has (on Spare Cores, types without the 85-stressor task or membench), so its errors, and how
    its model's half-widths relate to them, are not the full nodes'."""
    has = np.zeros(len(profiles.node_names) * len(profiles.key_names), dtype=bool)
    has[profiles.cell] = True        # (the runs' cells, made once per match for the reference sets too)
    has = has.reshape(len(profiles.node_names), len(profiles.key_names))
    mine = has[profiles.base_code]
    full = has[:, mine].sum(axis=1) >= FULL_SHARE * max(int(mine.sum()), 1)
    names = (group_name(suite, False), group_name(suite, True))
    code = profiles.code
    return {n: names[f] for n, f in zip(targets, full[[code[n] for n in targets]].tolist())}


def load_calibrations(conn: sa.Connection, model: str, version: str, suite: str,
                      node_group: dict[str, str]) -> intervals.Calibrations:
    """The calibration of `model` `version` in each group of `node_group` (and the suite's full
    group): from this registry's checked predictions of that group, else the shipped one, else none
    (uncalibrated below intervals.MIN_CHECKS). A prediction stored before groups existed counts in
    `nodereg:full`: every one of them was made between profiles of nodereg's own suite."""
    scores: dict[str, list[float]] = {}
    for group, score in _checked_scores(conn, model, version):
        scores.setdefault(group, []).append(score)
    default = group_name(suite, True)
    by_group = {}
    for group in sorted({default, *node_group.values()}):
        mine = scores.get(group, [])
        calibration = intervals.Calibration(model, version, len(mine), group=group)
        if calibration.calibrated:
            calibration.scale = intervals.conformal_scale(mine)
        else:
            calibration = shipped(model, version, group) or calibration
        by_group[group] = calibration
    return intervals.Calibrations(by_group, node_group, default)


def _checked_scores(conn: sa.Connection, model: str, version: str):
    """(group, score) of every checked prediction of `model` `version`."""
    checked: dict[int, list] = {}
    for pid, predicted, low, high, explanation, time_s in execute(conn, _CHECKED,
                                                                  {"model": model, "version": version}):
        checked.setdefault(pid, [predicted, low, high, explanation, []])[4].append(time_s)
    for predicted, low, high, explanation, times in checked.values():
        said = explained(explanation)
        yield (str(said.get("interval_group") or "nodereg:full"),
               intervals.score(predicted, low, high, statistics.median(times), _scale(said)))


@functools.cache
def _shipped_entries() -> dict[tuple[str, str, str], dict]:
    entries = json.loads(SHIPPED.read_text())["entries"] if SHIPPED.exists() else []
    return {(e["model"], e["version"], e["group"]): e for e in entries}


def shipped(model: str, version: str, group: str) -> intervals.Calibration | None:
    """The calibration shipped with nodereg for this model, version and group, if any (a model
    version it was not measured on gets none: its half-widths may mean something else)."""
    entry = _shipped_entries().get((model, version, group))
    if entry is None or entry["checks"] < intervals.MIN_CHECKS:
        return None
    return intervals.Calibration(model, version, int(entry["checks"]), float(entry["scale"]), group=group,
                                 shipped=entry["measured_by"])


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


def explained(explanation: str | None) -> dict:
    """A stored prediction's explanation as a dict ({} where it is not one): its `interval_group`,
    `interval_scale`, phases."""
    try:
        said = json.loads(explanation or "{}")
    except (ValueError, TypeError):
        return {}
    return said if isinstance(said, dict) else {}


def _scale(said: dict) -> float:
    try:
        return float(said.get("interval_scale") or 1.0)
    except (ValueError, TypeError):
        return 1.0


def applied_scale(explanation: str | None) -> float:
    """The half-width scale a stored prediction's interval was given (1 before calibration existed)."""
    return _scale(explained(explanation))
