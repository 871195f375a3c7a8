"""Storing the predictions of `nodereg match`: one row per node, in one short transaction."""

import orjson
import sqlalchemy as sa

from registry.apps import ensure_app
from registry.db import utcnow
from registry.db.write import insert_rows, new_uid
from registry.errors import UserError
from registry.match.project import Inputs, MatchResult


def store_predictions(conn: sa.Connection, inputs: Inputs, result: MatchResult) -> int:
    """One predictions row per node, with the model's name and version and the per-phase
    explanation; returns the row count.

    A phase's matched configs are the same for every node (matching happens on the base node), so
    they are stored once, in the base node's row (or the first-ranked one when the base is not among
    the targets); every other row names that node in `matches_in`. At 10,000 nodes, repeating them
    made 14 MB per `nodereg match`.
    """
    app_id = ensure_app(conn, result.app)
    node_ids = dict(conn.execute(sa.text("SELECT name, node_id FROM nodes")).fetchall())
    ranked = [n.node for n in result.nodes]
    gone = sorted({result.base, *ranked} - set(node_ids))
    if gone:  # removed by another process while the projection computed
        raise UserError(f"node(s) {', '.join(gone)} left the registry while `match` computed: nothing stored, "
                        "run it again")
    now = utcnow()
    anchor = result.base if result.base in ranked else (ranked[0] if ranked else None)

    def explanation(node: str) -> str:
        return orjson.dumps({"base": result.base, **({} if node == anchor else {"matches_in": anchor}), "phases": [
            {"name": p.name, "mode": p.mode, **({"matches": p.matches} if node == anchor else {}),
             "predicted_s": p.predictions[node].predicted_s} for p in result.phases]}).decode()

    rows = [{"uid": new_uid(), "trace_id": inputs.found.trace_id, "app_id": app_id, "node_id": node_ids[n.node],
             "model_name": result.model, "model_version": result.model_version, "threads": n.threads,
             "predicted_s": n.predicted_s, "low_s": n.low_s, "high_s": n.high_s, "node_rank": n.rank,
             "coverage": result.coverage, "explanation_json": explanation(n.node), "created_at": now}
            for n in result.nodes]
    return insert_rows(conn, "predictions", rows)
