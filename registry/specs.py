"""`nodereg import specs FILE.csv`: vCPUs and memory of nodes nobody here profiled (cloud VM types).

Columns ``node`` and any of ``vcpus``, ``memory_gib``, ``vm_type``: a VM type name is read by
registry/io/vmtypes.py (AWS, Azure, GCP, Alibaba, Huawei, Tencent conventions); explicit vcpus or
memory_gib win over it. A row whose VM type name no convention explains, and which gives no numbers
either, is an error naming the line, as is a count that is not a positive number; the file is
imported whole or not at all. Nodes that do not exist yet are created (source ``specs``); those that
do get their vCPUs and memory set (a profiled node's inventory is the measurement: it is refused).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from registry.db.names import check_name
from registry.errors import UserError
from registry.io.csvrows import read_records
from registry.io.vmtypes import vm_shape
from registry.nodes import ensure_node

CSV_COLUMNS = ("node",)
CSV_OPTIONAL = ("vcpus", "memory_gib", "vm_type")
_NUMBER = re.compile(r"\+?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Spec:
    node: str
    vcpus: int | None
    memory_bytes: int | None
    vm_type: str | None


def _positive(text: str, what: str, whole: bool = False) -> float | None:
    if not text:
        return None
    value = float(text) if _NUMBER.fullmatch(text) else math.nan
    if not (math.isfinite(value) and value > 0 and (not whole or value == int(value))):
        raise UserError(f"{what} must be a {'whole ' if whole else ''}number > 0, got {text!r}")
    return value


def _spec(record: dict[str, str]) -> Spec:
    node = check_name(record["node"], "node")
    vcpus = _positive(record["vcpus"], "vcpus", whole=True)
    gib = _positive(record["memory_gib"], "memory_gib")
    vm_type = record["vm_type"] or None
    if vm_type:
        shape = vm_shape(vm_type)
        if not shape.understood and vcpus is None and gib is None:
            raise UserError(f"VM type name {vm_type!r} is not understood (known: AWS m5.xlarge, Azure Standard_D4s_v5, "
                            "GCP n2-standard-8, Alibaba ecs.g6.xlarge, Huawei s6.xlarge.2, Tencent S5.LARGE8): "
                            "give vcpus and memory_gib")
        vcpus = vcpus or shape.vcpus
        gib = gib or (shape.memory_bytes / 2**30 if shape.memory_bytes else None)
    if vcpus is None and gib is None:
        raise UserError("give vcpus, memory_gib or a vm_type")
    return Spec(node, None if vcpus is None else int(vcpus), None if gib is None else int(gib * 2**30), vm_type)


def import_specs_csv(conn: sa.Connection, path: Path) -> tuple[int, list[str]]:
    """(nodes set, nodes created), inside the caller's transaction."""
    specs = read_records(Path(path), CSV_COLUMNS, _spec, what="specs", optional=CSV_OPTIONAL)
    existing = {r[0]: r[1] for r in conn.execute(sa.text("SELECT name, source FROM nodes"))}
    profiled = [s.node for s in specs if existing.get(s.node) == "profile"]
    if profiled:
        raise UserError(f"{path}: {', '.join(profiled)} {'is' if len(profiled) == 1 else 'are'} profiled: "
                        "the measured inventory stands (leave them out of the file)")
    created = []
    for s in specs:
        if s.node not in existing:
            ensure_node(conn, s.node, source="specs")
            created.append(s.node)
        sets = {"n_cpus": s.vcpus, "memory_bytes": s.memory_bytes}
        sets = {k: v for k, v in sets.items() if v is not None}
        conn.execute(sa.text(f"UPDATE nodes SET {', '.join(f'{k} = :{k}' for k in sets)}, inventory_json = "
                             "COALESCE(inventory_json, :inv) WHERE name = :n"),
                     {**sets, "n": s.node, "inv": json.dumps({"vm_type": s.vm_type, "source": "specs"})})
    return len(specs), created
