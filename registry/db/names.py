"""Rows identified by name (nodes, apps): the rule a name must follow, look-up, and the one-line
error that lists what exists.

Names are checked by one function, `check_name`, where they enter the registry: at the command-line
and file boundaries (before anything is measured, run or written) and, as the last guard inside
the writing transaction, in ensure_node / ensure_app.
The rule is what a name must survive: a table cell, a shell argument, a CSV field, a chart title,
a byte-for-byte comparison. So any printable text (brackets as in the Slurm host list `cn[01-04]`,
the `/` of `cloud/vm`, dots, colons, inner spaces, non-Latin letters), but no line breaks, tabs or
other control and invisible characters (Python's `str.isprintable`), no leading or trailing space,
and not longer than MAX_NAME characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from registry.db.statement import execute
from registry.errors import UserError

if TYPE_CHECKING:
    import sqlalchemy as sa

MAX_NAME = 200
RULE = (f"names are 1-{MAX_NAME} printable characters such as cn[01-04] or aws/c5.large, with no line breaks, "
        "tabs or other control characters and no leading or trailing space")


def check_name(name: str, noun: str, where: str = "") -> str:
    """`name` unchanged when a `noun` (node, app) may be called so; otherwise a UserError naming the
    rule, prefixed with `where` (the file it came from, say)."""
    problem = _problem(name, noun)
    if problem:
        raise UserError(f"{where}: {problem} ({RULE})" if where else f"{problem} ({RULE})")
    return name


def _problem(name, noun: str) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return f"the {noun} name must not be empty"
    if len(name) > MAX_NAME:
        return f"{noun} name {name[:20]!r}... is {len(name)} characters long"
    if not name.isprintable():
        bad = next(c for c in name if not c.isprintable())
        return f"{noun} name {name!r} contains the character U+{ord(bad):04X}"
    if name != name.strip():
        return f"{noun} name {name!r} begins or ends with a space"
    return None


def find_id(conn: sa.Connection, table: str, key: str, name: str) -> int | None:
    return execute(conn, f"SELECT {key} FROM {table} WHERE name = :n", {"n": name}).scalar_one_or_none()


def require_id(conn: sa.Connection, table: str, key: str, name: str, noun: str) -> int:
    """The id of `name`, or a UserError naming a few that do exist."""
    found = find_id(conn, table, key, name)
    if found is None:
        known = [r[0] for r in execute(conn, f"SELECT name FROM {table} ORDER BY name LIMIT 8")]
        hint = f" (known: {', '.join(known)})" if known else f" (the registry has no {noun}s yet)"
        raise UserError(f"unknown {noun} {name!r}{hint}")
    return found
