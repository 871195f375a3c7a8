"""What a reader of `nodereg match` must know about the profiles it used, and what it does to the
confidence: a node whose latest profile is partial (`profile --kernels/--threads`, stored as mode
'custom'), mostly unstable, or measured on a busy host (registry/measure/load.py) is named in the
warnings, and its interval is widened. A caveat of the base node widens every node's interval,
since every projection starts from the base node's measurements.

How much: a busy host measured the same hardware 2.4x slower (issue 22), so a loaded profile's
interval is widened by that factor; an unstable share u of configs by 1 + u (their medians moved by
tens of percent between repetitions); a partial profile by 1.25 (the phases match among fewer
references). Factors multiply. The prediction itself is left alone: which way it is off is unknown.
"""

import json
from dataclasses import dataclass

import sqlalchemy as sa
from registry.values import command_line

LOAD_FACTOR = 2.4
PARTIAL_FACTOR = 1.25
UNSTABLE_SHARE = 0.25     # below this share of unstable configs, no caveat (a few always are)

_LATEST = """
SELECT n.name, p.mode, p.host_load_json, count(r.run_id) AS configs,
       sum(CASE WHEN r.unstable THEN 1 ELSE 0 END) AS unstable
FROM profiles p
JOIN nodes n ON n.node_id = p.node_id
JOIN profile_runs r ON r.profile_id = p.profile_id
JOIN v_latest_profile l ON l.profile_id = p.profile_id AND l.newest
GROUP BY n.name, p.mode, p.host_load_json"""


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
    return [c for row in conn.execute(sa.text(_LATEST)) if row.name in wanted for c in _of(*row)]


def apply(result, caveats: list[Caveat], base: str) -> None:
    """Widen the intervals of `result` (a MatchResult) and add one warning per caveat."""
    factor: dict[str, float] = {}
    for c in caveats:
        factor[c.node] = factor.get(c.node, 1.0) * c.factor
    everywhere = factor.get(base, 1.0)
    for n in result.nodes:
        f = everywhere * (factor.get(n.node, 1.0) if n.node != base else 1.0)
        n.widen(f"the profiles' caveats x{f:.2g} (see the warnings)", n.low_s / f, n.high_s * f)
    for c in caveats:
        scope = "every node's interval widened" if c.node == base else "its interval widened"
        result.warnings.append(f"{c.node}: {c.detail}; {scope} x{c.factor:.2g}"
                               + (" (base node)" if c.node == base else "") + _advice(c))


def _advice(c: Caveat) -> str:
    if c.kind == "partial":
        return f"; {command_line('nodereg', 'profile', c.node)} measures all of it"
    return f"; re-profile on an idle host: {command_line('nodereg', 'profile', c.node, '--wait-idle', '600')}"
