"""Stored predictions: one set per trace, model (name and version) and state of what it was made from.

`nodereg match` is a look, and people look often (`--json`, `--explain`, `--top`): storing every
look stored the same 10,000 rows again each time. A prediction set is therefore stored with the
digest of its inputs (`inputs_digest`): the trace (its uid; the content of a trace file that is
not in the registry), the base node and the target nodes with their CPU count and latest profile,
the app's measured runs on the base node, and the model's and nodereg's versions (the similarity
model's version names the version of its weights, which ship with it). Uids and names, not local
ids, so a digest means the same after a bundle moved it.

When the latest set stored for the trace and model has the same digest, nothing is written; a set
with that digest stored earlier (the registry went back to that state, say a newer profile was
removed) is replaced by the new one, which becomes the latest; any other state adds a set.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import orjson

from registry import __version__
from registry.apps import ensure_app
from registry.db import utcnow
from registry.db.read import read_arrays
from registry.db.statement import execute
from registry.db.write import insert_rows, new_uid
from registry.errors import UserError
from registry.match.project import Inputs, MatchResult, NodeResult
from registry.models.predictions import NodePredictions
from registry.values import listed

if TYPE_CHECKING:
    import sqlalchemy as sa

# every node's latest profile (the one registry.match.references projects with), by name
_LATEST_PROFILES = """
SELECT n.name, n.n_cpus, p.uid FROM profiles p
JOIN v_latest_profile l ON l.profile_id = p.profile_id AND l.newest
JOIN nodes n ON n.node_id = p.node_id"""


def inputs_digest(conn: sa.Connection, inputs: Inputs, identity: tuple[str, str], options: dict | None = None) -> str:
    """The digest of what a prediction set of `inputs` by the model `identity` (name, version) with
    `options` (as given on the command line) depends on."""
    trace = inputs.found.trace
    if inputs.found.uid is not None:
        trace_part = inputs.found.uid
    else:  # a file: what the projection reads of it (stdlib json: a file may hold integers beyond 64 bits)
        trace_part = json.dumps([trace.name, trace.node, trace.threads, trace.status, trace.wall_s,
                                 [[p.name, p.method, p.weight, p.signature, *([p.streams] if p.streams else [])]
                                  for p in trace.phases]], sort_keys=True)
    latest = read_arrays(conn, _LATEST_PROFILES)
    used = set(inputs.targets) | {inputs.base}
    profiles = sorted((name, cpus, uid) for name, cpus, uid in
                      zip(latest["name"].tolist(), latest["n_cpus"].tolist(), latest["uid"].tolist()) if name in used)
    material = [__version__, *identity, trace_part, inputs.base, sorted(inputs.targets), profiles,
                sorted(uid for uid, _, _ in inputs.runs)]
    if options:  # with none, the digest of the sets stored before options existed
        material.append(sorted(options.items()))
    if inputs.suite != "nodereg" or inputs.exclude:   # likewise: our kernels, every config
        material.append([inputs.suite, sorted(inputs.exclude)])
    if inputs.profiles.apps is not None:   # the apps that weigh the references' votes (registry.match.track)
        material.append(inputs.profiles.apps.digest)
    return hashlib.sha256(orjson.dumps(material)).hexdigest()


def _same_trace(inputs: Inputs) -> tuple[str, dict]:
    """The predictions of this trace: by its id, or for a file not in the registry by its app."""
    if inputs.found.trace_id is not None:
        return "trace_id = :trace", {"trace": inputs.found.trace_id}
    return ("trace_id IS NULL AND app_id IN (SELECT app_id FROM apps WHERE name = :app)",
            {"app": inputs.found.trace.name})


def latest_digest(conn: sa.Connection, inputs: Inputs, model_name: str) -> str | None:
    """The digest of the latest set stored for this trace and model (None: none, or from before digests)."""
    where, params = _same_trace(inputs)
    return execute(conn, f"SELECT inputs_digest FROM predictions WHERE {where} AND model_name = :model "
                         "ORDER BY prediction_id DESC LIMIT 1", {**params, "model": model_name}).scalar()


_SETS_LOCK = 0x6E6F6465   # advisory lock class of prediction sets ('node'); the key is the trace and model


def _lock_sets(conn: sa.Connection, inputs: Inputs, model: str) -> None:
    """PostgreSQL: hold, until the transaction ends, the lock of this trace's sets by `model`. Two
    identical looks: the second waits, then finds the first's set; looks at other traces (or by other
    models) go on at once (a table lock made every `match` of the site wait for the one storing).
    DuckDB admits one writer at a time."""
    if conn.dialect.name != "postgresql":
        return
    trace = inputs.found.trace_id if inputs.found.trace_id is not None else f"file:{inputs.found.trace.name}"
    execute(conn, "SELECT pg_advisory_xact_lock(CAST(:cls AS INTEGER), hashtext(:key))",
            {"cls": _SETS_LOCK, "key": f"{trace}|{model}"})


def store_predictions(conn: sa.Connection, inputs: Inputs, result: MatchResult, digest: str) -> int:
    """Store the set unless the latest one for this trace and model has the same digest (see the
    module's docstring); one row per node, with the per-phase explanation. Returns the rows written.

    A phase's matched configs are the same for every node (matching happens on the base node), so
    they are stored once, in the base node's row (or the first-ranked one when the base is not among
    the targets); every other row names that node in `matches_in`. At 10,000 nodes, repeating them
    made 14 MB per `nodereg match`.
    """
    _lock_sets(conn, inputs, result.model)
    if latest_digest(conn, inputs, result.model) == digest:
        return 0
    where, params = _same_trace(inputs)
    execute(conn, f"DELETE FROM predictions WHERE {where} AND model_name = :model AND inputs_digest = :digest",
            {**params, "model": result.model, "digest": digest})
    app_id = ensure_app(conn, result.app)
    node_ids = dict(execute(conn, "SELECT name, node_id FROM nodes").fetchall())
    ranked = [n.node for n in result.nodes]
    gone = sorted({result.base, *ranked} - set(node_ids))
    if gone:  # removed by another process while the projection computed
        raise UserError(f"{listed(gone, 'node')} left the registry while `match` computed: nothing stored, "
                        "run it again")
    now = utcnow()
    anchor = result.base if result.base in ranked else (ranked[0] if ranked else None)

    # each phase's time per node, read from its arrays (not one prediction object per node and phase)
    phase_times = [dict(zip(t.nodes, t.predicted.tolist()))
                   for t in (NodePredictions.of(p.predictions) for p in result.phases)]

    def explanation(n: NodeResult) -> str:
        # the scale applied, so that later calibration sees the model's own widths, and the group it is one of
        return orjson.dumps({"base": result.base, "interval_scale": n.interval_scale,
                             **({"interval_group": n.interval_group} if n.interval_group else {}),
                             **({"filled_in": n.filled_in} if n.filled_in else {}),
                             **({} if n.node == anchor else {"matches_in": anchor}), "phases": [
            {"name": p.name, "mode": p.mode, **({"matches": p.matches} if n.node == anchor else {}),
             "predicted_s": times[n.node]} for p, times in zip(result.phases, phase_times)]}).decode()

    rows = [{"uid": new_uid(), "trace_id": inputs.found.trace_id, "app_id": app_id, "node_id": node_ids[n.node],
             "base_node_id": node_ids[result.base], "model_name": result.model, "model_version": result.model_version,
             "inputs_digest": digest, "threads": n.threads, "predicted_s": n.predicted_s, "low_s": n.low_s,
             "high_s": n.high_s, "node_rank": n.rank, "coverage": result.coverage,
             "explanation_json": explanation(n), "created_at": now} for n in result.nodes]
    return insert_rows(conn, "predictions", rows)
