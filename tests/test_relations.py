"""registry/db/relations.py is complete against the schema, and removals derived from it leave no orphan."""

import sqlalchemy as sa
from conftest import both_backends
from registry_data import populate

from registry import doctor
from registry.db import open_registry, utcnow
from registry.db.relations import OWNER_TABLES, SPECS, references, removal
from registry.db.write import insert_rows, new_uid
from registry.nodes import remove_node


def _prediction(trace_id, app_id, node_id, base_node_id) -> dict:
    return {"uid": new_uid(), "trace_id": trace_id, "app_id": app_id, "node_id": node_id,
            "base_node_id": base_node_id, "model_name": "similarity", "predicted_s": 1.0, "created_at": utcnow()}


def _count(conn, table: str) -> int:
    return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


@both_backends
def test_removing_a_node_leaves_no_orphan(db_url):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        one, two = populate(conn, node="n1", app="a1"), populate(conn, node="n2", app="a2")
        insert_rows(conn, "predictions", [
            _prediction(one["trace_id"], one["app_id"], two["node_id"], one["node_id"]),  # n1's trace onto n2: kept
            _prediction(None, one["app_id"], two["node_id"], one["node_id"]),   # a trace file based on n1, onto n2: kept
            _prediction(two["trace_id"], two["app_id"], one["node_id"], two["node_id"]),  # n2's trace onto n1
            _prediction(two["trace_id"], two["app_id"], two["node_id"], two["node_id"])])  # stays
        kept = {s.table: _count(conn, s.table) for s in SPECS}
    with reg.begin() as conn:
        counts = remove_node(conn, one["node_id"])
        assert doctor.check(conn) == []
        left = {s.table: _count(conn, s.table) for s in SPECS}
        from_n1 = conn.execute(sa.text("SELECT trace_id, base_node_id, node_id FROM predictions "
                                       "WHERE app_id = :a"), {"a": one["app_id"]}).fetchall()
    reg.close()
    assert counts["nodes"] == 1 and counts["predictions"] == 2   # populate's own and n2's trace onto n1
    # n2's accuracy history stays: the two made from n1 for n2, no longer linked to what went
    assert left["predictions"] == 4 and sorted(from_n1) == [(None, None, two["node_id"])] * 2
    # n2's measurements and the shared tables stay whole: everything else went with n1
    for table in ("profiles", "profile_runs", "profile_reps", "traces", "phases", "runs", "node_caches"):
        assert left[table] == kept[table] // 2, table
    for table in ("apps", "microbenchmarks", "ub_configs", "ub_streams", "models"):
        assert left[table] == kept[table], table


def _declared() -> set[tuple[str, str]]:
    """(table, column) of every key column relations.py knows: surrogate keys and references."""
    keys = {(s.table, s.pk) for s in SPECS if s.pk}
    return keys | {(table, column) for table, column, *_ in references()}


def test_every_reference_column_is_declared(db_url):
    """A migration that adds a column referring to a row (named *_id, the schema's convention) must
    declare it in relations.py, or removals and `doctor` silently miss it."""
    reg = open_registry(db_url)
    with reg.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_name = c.table_name AND t.table_schema = c.table_schema "
            "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
            "AND c.column_name LIKE '%\\_id' ESCAPE '\\'")).fetchall()
    reg.close()
    found = {(t, c) for t, c in rows}
    assert ("predictions", "base_node_id") in found and ("signatures", "owner_id") in found
    assert found - _declared() == set(), "declare these in registry/db/relations.py"


def test_parents_are_listed_before_children():
    """removal() and bundles rely on the order of SPECS."""
    position = {s.table: i for i, s in enumerate(SPECS)}
    for table, _column, _cond, parent, _key in references():
        assert position[parent] < position[table], (table, parent)
    assert set(OWNER_TABLES.values()) <= set(position)


def test_removal_goes_children_first():
    order = [table for table, _ in removal("traces", "trace_id = :id")]
    assert order[-1] == "traces" and set(order) == {"predictions", "signatures", "phase_streams", "phases",
                                                    "trace_samples", "traces"}
    assert order.index("signatures") < order.index("phases") < order.index("traces")
