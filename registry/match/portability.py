"""Can the traced binary run on a node at all? `match` leaves out the nodes that cannot, with the reason.

What the binary needs is in its trace (registry.trace.binary: ELF architecture, ISA extensions its
code uses); what a node offers is its `architecture` and `isa_flags` (set from its inventory by
`nodereg profile`, or by an import of cloud specs), else its stored inventory. A node whose
offer is unknown is not judged. An extension the base node itself lacks is not needed (the
binary ran there: it picks its code path at run time). `--portable` (interpreted or JIT code, or
a program rebuilt for each node) skips the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from registry.db.read import read_arrays
from registry.match.project import MatchResult
from registry.trace.binary import runs_on

if TYPE_CHECKING:
    import sqlalchemy as sa


@dataclass
class Offer:
    arch: str | None
    flags: set[str] | None


def node_offers(conn: sa.Connection) -> dict[str, Offer]:
    """node -> its architecture and ISA flags (None where unknown); a node of which neither is known
    is left out (unknown: not judged)."""
    out = {}
    rows = read_arrays(conn, "SELECT name, architecture, isa_flags, inventory_json FROM nodes WHERE architecture IS NOT "
                             "NULL OR isa_flags IS NOT NULL OR inventory_json IS NOT NULL")   # as columns: 10,000 nodes
    for name, arch, flags, inventory in zip(*(rows[c].tolist() for c in rows)):
        arch, flags, inventory = (None if v != v else v for v in (arch, flags, inventory))      # NaN: NULL
        inv = json.loads(inventory) if inventory and (arch is None or flags is None) else {}
        arch = arch or inv.get("architecture") or None
        listed = flags.split() if flags is not None else inv.get("isa_flags")
        if arch is not None or listed is not None:
            out[name] = Offer(arch, set(listed) if listed is not None else None)
    return out


def cannot_run(needs: dict, offer: Offer, base: Offer | None) -> str | None:
    """Why a node with `offer` cannot run a binary with `needs` (None: it can, or nobody knows)."""
    arch = needs.get("arch")
    if arch and offer.arch and not runs_on(offer.arch, arch):
        return f"cannot run the traced binary: it is built for {arch}, the node is {offer.arch}"
    wanted = set(needs.get("isa") or ())
    if base is not None and base.flags is not None:
        wanted &= base.flags
    missing = sorted(wanted - offer.flags) if offer.flags is not None else []
    if missing:
        return (f"cannot run the traced binary: its code uses {', '.join(missing)}, which the node's CPU lacks "
                "(--portable if the app is rebuilt for each node, interpreted or JIT-compiled)")
    return None


def apply_portability(result: MatchResult, needs: dict | None, offers: dict[str, Offer]) -> None:
    """Move the nodes of `result` that cannot run the binary into `result.excluded`; re-rank."""
    if not needs:
        return
    base = offers.get(result.base)

    def unrunnable(n) -> dict | None:
        reason = cannot_run(needs, offers.get(n.node, Offer(None, None)), base)
        return {"runs": False, "reason": reason} if reason else None

    result.leave_out(unrunnable)
