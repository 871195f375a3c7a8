"""What a reader of `nodereg match` must know about the profiles it used, and what it does to the
confidence: a node whose latest profile is partial (`profile --kernels/--threads`, stored as mode
'custom'), mostly unstable, or measured on a busy host (registry/measure/load.py) is named in the
warnings, and its interval is widened. A caveat of the base node widens every node's interval,
since every projection starts from the base node's measurements.

How much: a busy host measured the same hardware 2.4x slower (issue 22), so a loaded profile's
interval is widened by that factor; an unstable share u of configs by 1 + u (their medians moved by
tens of percent between repetitions); a partial profile by 1.25 (the phases match among fewer
references). Factors multiply. The prediction itself is left alone: which way it is off is unknown.

Working sets the profiles did not see are extrapolation too (`working_set_caveats`): a phase whose
working set is larger than any config the base's profile measured, and a phase that is memory-
resident on the base but would fit a node's last-level caches (or the reverse): its references
were read at one cache level and the phase would run at another there. Each widens by
1 + EXTRAPOLATED x the phase's share of the run (a judgement, not a fit: a level's ratio can be off
by half against another level's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from registry.db.statement import execute
from registry.values import command_line

if TYPE_CHECKING:
    import sqlalchemy as sa

LOAD_FACTOR = 2.4
PARTIAL_FACTOR = 1.25
UNSTABLE_SHARE = 0.25     # below this share of unstable configs, no caveat (a few always are)

_LATEST = """
SELECT n.name, p.mode, p.host_load_json, sum(s.runs) AS configs, sum(s.unstable) AS unstable
FROM profiles p
JOIN nodes n ON n.node_id = p.node_id
JOIN v_profile_summary s ON s.profile_id = p.profile_id
JOIN v_latest_profile l ON l.profile_id = p.profile_id AND l.newest
GROUP BY n.name, p.mode, p.host_load_json
HAVING sum(s.runs) > 0 AND (p.mode = 'custom' OR p.host_load_json IS NOT NULL
                            OR sum(s.unstable) >= :share * sum(s.runs))"""
# (only the profiles that can carry a caveat come back: a 10,000-node registry has few)


EXTRAPOLATED = 0.5

_PROFILED_WS = """
SELECT n.name, max(c.ws_bytes) AS ws
FROM v_latest_profile l
JOIN nodes n ON n.node_id = l.node_id
JOIN profile_runs r ON r.profile_id = l.profile_id
JOIN ub_configs c ON c.config_id = r.config_id
WHERE l.newest_in_suite AND l.suite = :suite
GROUP BY n.name"""

# a node's last-level data caches: the largest level's size times the instances the node has
_LLC = """
SELECT n.name, c.size_bytes * COALESCE(c.instances, 1) AS llc
FROM node_caches c
JOIN nodes n ON n.node_id = c.node_id
WHERE c.cache_type <> 'Instruction'
  AND c.level = (SELECT max(d.level) FROM node_caches d WHERE d.node_id = c.node_id AND d.cache_type <> 'Instruction')"""


@dataclass
class Caveat:
    node: str
    kind: str        # partial | unstable | loaded
    detail: str
    factor: float

    def to_dict(self) -> dict:
        return {"node": self.node, "kind": self.kind, "detail": self.detail, "interval_factor": self.factor}


def _of(name: str, mode: str, load_json: str | None, configs: int, unstable: int) -> list[Caveat]:
    out = []
    if mode == "custom":
        out.append(Caveat(name, "partial", "its profile measured only some kernels or thread counts "
                          "(profile --kernels/--threads)", PARTIAL_FACTOR))
    share = (unstable or 0) / configs if configs else 0.0
    if share >= UNSTABLE_SHARE:
        out.append(Caveat(name, "unstable", f"{unstable} of {configs} configs of its profile were unstable",
                          1 + share))
    busy = json.loads(load_json).get("busy") if load_json else None
    if busy:
        out.append(Caveat(name, "loaded", f"its profile was measured on a busy host ({busy})", LOAD_FACTOR))
    return out


def profile_caveats(conn: sa.Connection, nodes: list[str]) -> list[Caveat]:
    """Caveats of the latest profiles of `nodes`."""
    wanted = set(nodes)
    return [c for row in execute(conn, _LATEST, {"share": UNSTABLE_SHARE}) if row.name in wanted
            for c in _of(*row)]


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.0f} MiB" if nbytes >= 2**20 else f"{nbytes / 1024:,.0f} KiB"


def working_set_caveats(conn: sa.Connection, phases: list, base: str, nodes: list[str], suite: str) -> list[Caveat]:
    """Caveats for phases (`phases`: the projected ones, with weight and signature) whose working set
    (`proc.wss_mb`) lies beyond the base profile's largest config, or on the other side of a node's
    last-level cache size than of the base's."""
    sized = [(p, p.signature.get("proc", {}).get("wss_mb")) for p in phases]
    sized = [(p, mb * 2**20) for p, mb in sized if mb and p.weight > 0]
    if not sized:
        return []
    profiled = {name: ws for name, ws in execute(conn, _PROFILED_WS, {"suite": suite}) if ws}
    llc = {name: size for name, size in execute(conn, _LLC) if size}
    out = []
    for p, ws in sized:
        factor = 1 + EXTRAPOLATED * min(p.weight, 1.0)
        if base in profiled and ws > profiled[base]:
            out.append(Caveat(base, "extrapolated", f"phase {p.name}'s working set ({_mib(ws)}) is larger than any "
                              f"config its profile measured ({_mib(profiled[base])})", factor))
        if base not in llc:
            continue
        beyond = ws > llc[base]
        where = "memory-resident on the base but would fit the last-level caches" if beyond else             "cache-resident on the base but would not fit the last-level caches"
        out += [Caveat(n, "extrapolated", f"phase {p.name}'s working set ({_mib(ws)}) is {where} there: its "
                       "references were measured at another level", factor)
                for n in nodes if n != base and n in llc and (ws > llc[n]) != beyond]
    return out


def apply(result, caveats: list[Caveat], base: str) -> None:
    """Widen the intervals of `result` (a MatchResult) and add one warning per caveat, or per group
    of nodes with the same caveat (thousands of imported types can share one)."""
    factor: dict[str, float] = {}
    for c in caveats:
        factor[c.node] = factor.get(c.node, 1.0) * c.factor
    everywhere = factor.get(base, 1.0)
    # (a factor of 1 changes nothing: with none on the base node, only the nodes with caveats are widened)
    for n in result.nodes if everywhere != 1.0 else [n for n in result.nodes if n.node in factor]:
        f = everywhere * (factor.get(n.node, 1.0) if n.node != base else 1.0)
        n.widen(f"the profiles' caveats x{f:.2g} (see the warnings)", n.low_s / f, n.high_s * f)
    groups: dict[tuple, list[Caveat]] = {}
    for c in caveats:
        groups.setdefault((c.kind, c.detail, c.factor, c.node == base), []).append(c)
    for (_, detail, f, on_base), same in groups.items():
        scope = "every node's interval widened" if on_base else ("its interval widened" if len(same) == 1 else
                                                                  "their intervals widened")
        names = ", ".join(c.node for c in same[:3]) + (f" and {len(same) - 3} more" if len(same) > 3 else "")
        if len(same) > 1:     # the details speak of one node's profile
            detail = detail.replace("its profile", "each one's profile")
        result.warnings.append(f"{names}: {detail}; {scope} x{f:.2g}" + (" (base node)" if on_base else "")
                               + _advice(same))


def _advice(same: list[Caveat]) -> str:
    """The command that lifts the caveat, for each node of the group (up to 3; beyond, its form)."""
    kind = same[0].kind
    if kind == "extrapolated":
        return ""
    extra = () if kind == "partial" else ("--wait-idle", "600")
    nodes = [c.node for c in same] if len(same) <= 3 else ["NODE"]
    commands = " and ".join(command_line("nodereg", "profile", n, *extra) for n in nodes)
    each = " on each" if len(same) > 3 else ""
    if kind == "partial":
        return f"; {commands}{each} {'measures' if len(nodes) == 1 else 'measure'} all of it"
    return f"; re-profile on an idle host: {commands}{each}"
