"""A node that cannot hold the application is not slower, it is wrong: `match` says so instead of a time.

The app's footprint is its trace's peak resident memory (registry/trace/capacity.py); a node's
memory is its inventory's (`nodereg profile`), or what `nodereg import specs` or a VM type name set.
A node with less memory than the footprint leaves the ranking with the reason, and gets no stored
time prediction: projecting its time by a ratio would pretend it runs. Nodes of unknown memory, and
apps of unknown footprint, are not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from registry.db.statement import execute
from registry.match.project import MatchResult

if TYPE_CHECKING:
    import sqlalchemy as sa

GIB = 2**30


def node_memory(conn: sa.Connection) -> dict[str, int]:
    """node -> memory bytes, for the nodes whose memory is known."""
    return {r[0]: int(r[1]) for r in execute(conn, "SELECT name, memory_bytes FROM nodes "
                                                   "WHERE memory_bytes > 0")}


def apply_capacity(result: MatchResult, footprint_bytes: int | None, memory: dict[str, int]) -> None:
    """Move the nodes of `result` that cannot hold `footprint_bytes` into `result.excluded`; re-rank."""
    if not footprint_bytes:
        return

    def too_small(n) -> dict | None:
        have = memory.get(n.node)
        if have is None or have >= footprint_bytes:
            return None
        return {"fits": False, "reason": f"cannot hold the app: it needs {footprint_bytes / GIB:.3g} GiB "
                                         f"(peak resident memory), the node has {have / GIB:.3g} GiB"}

    result.leave_out(too_small)
    result.footprint_bytes = footprint_bytes
