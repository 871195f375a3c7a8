"""Nodes in the registry: create from an inventory, look up by name, list, remove.

A node's identity is its name. Re-profiling a node with a different inventory is allowed (the
machine was upgraded, a restriction changed): its inventory columns are updated and its old
profiles stay, each with its own provenance.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from registry.db import utcnow
from registry.db.names import check_name, find_id, require_id
from registry.db.relations import remove
from registry.db.statement import execute
from registry.db.write import get_or_create, insert_rows
from registry.inventory import Inventory

if TYPE_CHECKING:
    import sqlalchemy as sa

NODE_COLUMNS = ("name", "host", "cpu_list", "n_cpus", "cpu_model", "sockets", "cores", "threads_per_core",
                "numa_nodes", "memory_bytes", "max_mhz", "kernel", "compiler", "inventory_json", "source")


def inventory_row(name: str, inv: Inventory, source: str) -> dict:
    return {
        "name": name, "host": inv.hostname, "cpu_list": inv.cpu_list if inv.restricted else None,
        "n_cpus": inv.cpu_count, "cpu_model": inv.cpu_model, "sockets": inv.sockets, "cores": inv.cores,
        "threads_per_core": inv.threads_per_core, "numa_nodes": inv.numa_nodes,
        "memory_bytes": inv.memory_bytes, "max_mhz": inv.max_mhz, "kernel": inv.kernel,
        "compiler": inv.compiler, "inventory_json": json.dumps(inv.to_dict(), sort_keys=True),
        "source": source,
    }


CPU_VENDORS = ("Intel", "AMD", "Ampere")


def record_offer(conn: sa.Connection, node_id: int, inv: Inventory) -> None:
    """What the node offers a binary (schema 14's columns), from its inventory: the architecture, the
    ISA flags the inventory records and the CPU's maker. Read by registry.match.portability."""
    execute(conn, "UPDATE nodes SET architecture = :a, isa_flags = :f, cpu_vendor = :v WHERE node_id = :id",
                 {"a": inv.architecture or None, "f": " ".join(inv.isa_flags), "v": cpu_vendor(inv.cpu_model),
                  "id": node_id})


def cpu_vendor(model: str | None) -> str | None:
    """The CPU's maker as the model name says it ('Intel(R) Xeon(R) ...' -> Intel), else None."""
    words = (model or "").replace("(R)", " ").replace("(TM)", " ").split()
    return next((v for v in CPU_VENDORS if any(w.startswith(v) for w in words)), None)


def find_node_id(conn: sa.Connection, name: str) -> int | None:
    return find_id(conn, "nodes", "node_id", name)


def require_node_id(conn: sa.Connection, name: str) -> int:
    return require_id(conn, "nodes", "node_id", name, "node")


def node_location(conn: sa.Connection, name: str) -> dict:
    """Where a node runs: its name, the host it was measured on and its CPU restriction (None: the whole host)."""
    node_id = require_node_id(conn, name)
    row = execute(conn, "SELECT name, host, cpu_list FROM nodes WHERE node_id = :id",
                       {"id": node_id}).mappings().one()
    return dict(row)


def ensure_node(conn: sa.Connection, name: str, inv: Inventory | None = None, source: str = "profile") -> int:
    """The node's id, creating it (or refreshing its inventory when `inv` is given)."""
    check_name(name, "node")
    row = inventory_row(name, inv, source) if inv is not None else {"name": name, "source": source}
    node_id = get_or_create(conn, "nodes", {"name": name}, {**row, "created_at": utcnow()}, "node_id")
    if inv is not None:  # refresh: the node may have been created bare (by runs) or re-inventoried
        sets = ", ".join(f"{c} = :{c}" for c in row if c not in ("name", "source"))
        execute(conn, f"UPDATE nodes SET {sets} WHERE node_id = :node_id", {**row, "node_id": node_id})
        execute(conn, "DELETE FROM node_caches WHERE node_id = :id", {"id": node_id})
        insert_rows(conn, "node_caches", [
            {"node_id": node_id, "level": c.level, "cache_type": c.type, "size_bytes": c.size_bytes,
             "line_bytes": c.line_bytes, "shared_by": c.shared_by, "instances": c.instances}
            for c in inv.caches])
    return node_id


def node_inventory(conn: sa.Connection, name: str) -> Inventory | None:
    """The stored inventory of a node (None for nodes created without one, e.g. by imports)."""
    text = execute(conn, "SELECT inventory_json FROM nodes WHERE name = :n", {"n": name}).scalar_one_or_none()
    return Inventory.from_dict(json.loads(text)) if text else None


# predictions for other nodes that were made from this node: as their base, or from a trace recorded on it
_FROM_NODE = """node_id <> :id AND (base_node_id = :id OR trace_id IN (SELECT trace_id FROM traces WHERE node_id = :id))"""


def predictions_from(conn: sa.Connection, node_id: int) -> int:
    """How many predictions for other nodes were made from this node (the accuracy history of those nodes)."""
    return execute(conn, f"SELECT count(*) FROM predictions WHERE {_FROM_NODE}", {"id": node_id}).scalar_one()


def remove_node(conn: sa.Connection, node_id: int) -> dict[str, int]:
    """Delete a node and everything that refers to it, directly or not (registry.db.relations: profiles,
    traces, runs, predictions made for it, ...); returns rows deleted per table. Run it in one
    transaction: the DELETEs go children first and each one selects through its parents.

    Predictions made from the node for other nodes stay: they are those nodes' accuracy history
    (`nodereg accuracy`). They lose their links to what went (base node, trace); the base node's
    name stays in their explanation."""
    execute(conn,
        "UPDATE predictions SET base_node_id = CASE WHEN base_node_id = :id THEN NULL ELSE base_node_id END, "
        "trace_id = CASE WHEN trace_id IN (SELECT trace_id FROM traces WHERE node_id = :id) THEN NULL "
        f"ELSE trace_id END WHERE {_FROM_NODE}", {"id": node_id})
    return remove(conn, "nodes", "node_id = :id", {"id": node_id})
