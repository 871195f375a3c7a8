"""Fitted models in the registry's ``models`` table: parameters as JSON, found again by uid.

The row records the plugin's name and version; loading goes through the plugin registry, so a
model saved by a plugin that is no longer installed (or changed its parameter format) fails with
a clear message instead of a traceback.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from registry.db import utcnow
from registry.db.write import insert_returning, new_uid
from registry.errors import UserError
from registry.models import plugins
from registry.models.base import Model
from registry.values import finite_json


def save_model(conn: sa.Connection, model: Model, scope: str | None) -> str:
    """Store a fitted model's parameters; returns the new row's uid."""
    uid = new_uid()
    insert_returning(conn, "models", {
        "uid": uid, "name": model.name, "version": str(model.version), "scope": scope,
        "params_json": json.dumps(finite_json(model.params()), allow_nan=False, sort_keys=True),
        "fitted_at": utcnow()}, "model_id")
    return uid


def load_model(conn: sa.Connection, uid: str) -> Model:
    """The fitted model stored under `uid`."""
    row = conn.execute(sa.text("SELECT name, version, params_json FROM models WHERE uid = :u"), {"u": uid}).first()
    if row is None:
        raise UserError(f"no stored model with uid {uid!r}")
    cls = plugins.model_class(row.name)
    if str(cls.version) != str(row.version):
        raise UserError(f"stored model {uid} was fitted by {row.name} version {row.version}, the installed plugin is "
                        f"version {cls.version}: refit it")
    try:
        return cls.from_params(json.loads(row.params_json))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"stored model {uid} ({row.name}) has unreadable parameters: "
                        f"{type(exc).__name__}: {exc}") from None


def list_models(conn: sa.Connection, scope: str | None = None) -> list[dict]:
    """Stored models, newest first (optionally only those of one scope)."""
    sql = "SELECT uid, name, version, scope, fitted_at FROM models"
    args = {}
    if scope is not None:
        sql += " WHERE scope = :s"
        args["s"] = scope
    return [dict(r._mapping) for r in conn.execute(sa.text(sql + " ORDER BY model_id DESC"), args)]
