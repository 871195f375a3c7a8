"""How the registry's tables hang together: keys, identities and (logical) references.

One description serves every generic operation: bundles re-key rows by it, `doctor` finds orphans
with it, removals (`nodereg nodes rm`) delete what hangs on a row by it. Tables are listed parents
first. A table that refers to another must be declared here (tests/test_relations.py checks the
schema's `*_id` columns against it): a forgotten one would be left behind as orphans by removals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from registry.db.statement import execute

if TYPE_CHECKING:
    import sqlalchemy as sa


@dataclass(frozen=True)
class Spec:
    table: str
    pk: str | None = None                      # surrogate key, re-keyed on import
    identity: tuple[str, ...] = ()             # natural key or ('uid',): joins an existing row
    parent: tuple[str, str] | None = None      # (column, table): imported only with a new parent
    refs: dict = field(default_factory=dict)   # other key columns -> referenced table
    derived: bool = False                      # computed from other tables: bundles leave it out

    @property
    def sequence(self) -> str:
        return f"{self.table}_id_seq"


OWNER_TABLES = {"profile_run": "profile_runs", "phase": "phases"}  # signatures.owner_kind -> table
SPECS = (
    Spec("nodes", "node_id", ("name",)),
    Spec("node_caches", parent=("node_id", "nodes")),
    Spec("node_prices", "price_id", ("uid",), refs={"node_id": "nodes"}),
    Spec("microbenchmarks", "ub_id", ("name",)),
    Spec("ub_configs", "config_id", ("config_key",), refs={"ub_id": "microbenchmarks"}),
    Spec("ub_streams", parent=("config_id", "ub_configs")),
    Spec("apps", "app_id", ("name",)),
    Spec("profiles", "profile_id", ("uid",), refs={"node_id": "nodes"}),
    Spec("profile_runs", "run_id", parent=("profile_id", "profiles"), refs={"config_id": "ub_configs"}),
    Spec("profile_reps", parent=("run_id", "profile_runs")),
    Spec("profile_vectors", parent=("profile_id", "profiles"), derived=True),   # registry/profile/vectors.py
    Spec("traces", "trace_id", ("uid",), refs={"app_id": "apps", "node_id": "nodes"}),
    Spec("trace_samples", parent=("trace_id", "traces")),
    Spec("phases", "phase_id", parent=("trace_id", "traces")),
    Spec("phase_streams", parent=("phase_id", "phases")),
    Spec("signatures"),  # polymorphic owner: handled through OWNER_TABLES
    Spec("runs", "run_id", ("uid",), refs={"app_id": "apps", "node_id": "nodes"}),
    Spec("models", "model_id", ("uid",)),
    Spec("predictions", "prediction_id", ("uid",),
         refs={"trace_id": "traces", "app_id": "apps", "node_id": "nodes", "base_node_id": "nodes"}),
)
PK_OF = {s.table: s.pk for s in SPECS if s.pk}


def references():
    """Every logical reference as (table, column, condition on the row, parent table, parent key)."""
    for spec in SPECS:
        links = dict(spec.refs)
        if spec.parent:
            links[spec.parent[0]] = spec.parent[1]
        for column, parent in links.items():
            yield spec.table, column, None, parent, PK_OF[parent]
    for kind, parent in OWNER_TABLES.items():
        yield "signatures", "owner_id", f"owner_kind = '{kind}'", parent, PK_OF[parent]


def removal(table: str, where: str) -> list[tuple[str, str]]:
    """The DELETEs, as (table, condition), that remove the rows of `table` matching `where` and every
    row referring to them directly or transitively, children before parents.

    References are logical (docs/architecture.md), so nothing cascades: a row is selected when any of
    its references points at a selected row, e.g. a prediction by its node, its base node or its
    trace. Each condition selects through its parents' conditions, so the caller runs the DELETEs
    in the order given, in one transaction, and every parent is still there when its children go.
    """
    selected = {table: where}
    for spec in SPECS:  # parents first: a table's parents have their conditions already
        links = [f"({cond + ' AND ' if cond else ''}{column} IN (SELECT {key} FROM {parent} WHERE {selected[parent]}))"
                 for child, column, cond, parent, key in references() if child == spec.table and parent in selected]
        if links and spec.table != table:
            selected[spec.table] = " OR ".join(links)
    return list(reversed(selected.items()))


def remove(conn: sa.Connection, table: str, where: str, params: dict) -> dict[str, int]:
    """Run `removal(table, where)` in the caller's transaction; returns the rows deleted per table."""
    counts: dict[str, int] = {}
    for child, condition in removal(table, where):
        res = execute(conn, f"DELETE FROM {child} WHERE {condition}", params)
        counts[child] = counts.get(child, 0) + max(res.rowcount or 0, 0)
    return counts
