"""How `nodereg match` speaks to people: warnings summarised per node in words, and ties.

The models and caveats word each warning for one node and one phase at a time, some with a config's
internal key (`mbw1c|{"streams": ...}`); a fleet of eleven nodes then gave sixteen lines. Here the same
message for several nodes is said once with their names, the phases it concerns are listed together,
and config keys are put in words (registry.match.references.config_in_words). Ranks are not given
between nodes whose predictions lie inside each other's intervals: the difference is within the
uncertainty, so they share a rank (`2=`) and the tie is said.
"""

import math
import re
from collections import Counter
from collections.abc import Iterable

from registry.values import plural

_PHASE = re.compile(r"^phase (?P<phase>.+?): (?P<rest>.+)$")
_KEY_START = re.compile(r"[A-Za-z]\w*\|\{|\{\"")   # 'mbw1c|{...}' or corredor's '{"placement": ...}'
_LEVEL_KEY = re.compile(r"\b[A-Za-z]\w*\|(?:memory|L\d+)(?:\|nt)?\b")
MAX_NAMES = 4


def keys_in_words(text: str) -> str:
    """`text` with every config key in it replaced by its words."""
    from registry.match.references import config_in_words

    out, i = [], 0
    while (m := _KEY_START.search(text, i)) is not None:
        end = _closing_brace(text, text.index("{", m.start()))
        if end is None:
            break
        out += [text[i:m.start()], config_in_words(text[m.start():end + 1])]
        i = end + 1
    out.append(text[i:])
    return _LEVEL_KEY.sub(lambda m: config_in_words(m.group(0)), "".join(out))


def _closing_brace(text: str, start: int) -> int | None:
    depth, quoted = 0, False
    for j in range(start, len(text)):
        ch = text[j]
        if ch == '"' and text[j - 1] != "\\":
            quoted = not quoted
        elif not quoted and ch in "{}":
            depth += 1 if ch == "{" else -1
            if depth == 0:
                return j
    return None


def _subject(warning: str, nodes: list[str]) -> tuple[str | None, str]:
    """The node a warning is about and the warning without it (`NODE: ...`, or `... on NODE`)."""
    for node in sorted(nodes, key=len, reverse=True):
        if warning.startswith(f"{node}: "):
            return node, warning[len(node) + 2:]
        m = re.search(rf" on {re.escape(node)}(?=$|[;,.) ])", warning)
        if m:
            return node, warning[:m.start()] + " there" + warning[m.end():]
    return None, warning


def names(items: list[str], noun: str = "nodes") -> str:
    if len(items) <= MAX_NAMES:
        return ", ".join(items)
    return f"{len(items)} {noun} ({', '.join(items[:MAX_NAMES - 1])}, ...)"


def _by_phase(texts: Iterable[str]) -> list[str]:
    """`phase a: X` and `phase b: X` as `phases a, b: X`."""
    phases: dict[str, list[str]] = {}
    for text in texts:
        m = _PHASE.match(text)
        key, phase = (m["rest"], m["phase"]) if m else (text, None)
        phases.setdefault(key, [])
        if phase is not None:
            phases[key].append(phase)
    def subject(p: list[str]) -> str:
        if len(p) > MAX_NAMES:
            return names(p, "phases")            # `5 phases (a, b, c, ...)`
        return f"phase{'s' if len(p) > 1 else ''} {names(p, 'phases')}"

    out = []
    for rest, p in phases.items():
        if len(p) > 1:
            rest = re.sub(r"^its ", "each one's ", rest)     # the text speaks of one phase
        out.append(f"{subject(p)}: {rest}" if p else rest)
    return out


def summarise_warnings(warnings: Iterable[str], nodes: list[str]) -> list[str]:
    """One line per group of nodes that share the same warnings (in words), after those about no node."""
    general, per_text = [], {}
    for w in dict.fromkeys(warnings):
        node, text = _subject(keys_in_words(w), nodes)
        if node is None:
            general.append(text)
        else:
            per_text.setdefault(text, []).append(node)
    per_nodes: dict[tuple, list[str]] = {}
    for text, ns in per_text.items():
        per_nodes.setdefault(tuple(dict.fromkeys(ns)), []).append(text)
    return _by_phase(general) + [f"{names(list(ns))}: {_once('; '.join(_by_phase(texts)))}"
                                 for ns, texts in per_nodes.items()]


def _once(line: str) -> str:
    """A clause said again later in the line (a node both unstable and busy got the same
    `re-profile on an idle host: ...` after each) only at its last place."""
    clauses = line.split("; ")
    return "; ".join(c for i, c in enumerate(clauses) if c not in clauses[i + 1:])


def tied_ranks(ranked: list, objective: str) -> tuple[list[str], list[list[str]]]:
    """The rank each node is shown with (`2=` when tied) and the groups of tied nodes. A node ties with
    the fastest (cheapest) node of the group before it when each one's prediction lies inside the
    other's interval."""
    def span(n):
        if objective == "cost" and n.cost is not None:
            return n.cost, n.cost_low, n.cost_high
        return n.predicted_s, n.low_s, n.high_s

    groups: list[list] = []
    for n in ranked:
        if groups:
            (v0, lo0, hi0), (v, lo, hi) = span(groups[-1][0]), span(n)
            if lo0 <= v <= hi0 and lo <= v0 <= hi:
                groups[-1].append(n)
                continue
        groups.append([n])
    shown, ties = [], []
    for g in groups:
        shown += [f"{g[0].rank}=" if len(g) > 1 else str(g[0].rank)] * len(g)
        if len(g) > 1:
            ties.append([n.node for n in g])
    return shown, ties


_SET_NAMES = {"marker": "the app's own markers", "omp": "OpenMP regions", "auto": "change points of the samples",
              "import": "imported phases", "whole": "the whole run"}
_SET_PHASE = {"marker": "marked phase", "omp": "OpenMP region"}


def phase_set_said(all_phases: list, chosen: list) -> str | None:
    """Which of a trace's phase sets match used and why (registry.match.project.choose_phases: what the
    app declares, markers then OpenMP regions, when it covers at least DECLARED_MIN_COVER of the run,
    its gaps filled by change-point segments; else the set covering the most, near-ties to markers,
    then OpenMP regions, then change points); None when the trace has one set only."""
    from registry.match.project import DECLARED, DECLARED_MIN_COVER

    cover: dict[str, float] = {}
    for p in all_phases:
        if p.weight and p.weight > 0:
            cover[p.method] = min(1.0, cover.get(p.method, 0.0) + p.weight)
    if len(cover) < 2 or not chosen:
        return None
    counts = Counter(p.method for p in chosen)
    used = next((m for m in DECLARED if m in counts), chosen[0].method)
    others = ", ".join(f"{_SET_NAMES.get(m, m)} {c:.0%}" for m, c in cover.items() if m != used)
    rule = (f"what the app declares (its markers, then OpenMP regions) is used when it covers at least "
            f"{DECLARED_MIN_COVER:.0%} of the run")
    if used in DECLARED and used in cover and cover[used] >= DECLARED_MIN_COVER:
        filled = sum(n for m, n in counts.items() if m != used)
        gaps = f", their gaps filled by {plural(filled, 'change-point segment')}" if filled else ""
        return (f"phases: {plural(counts[used], _SET_PHASE[used])} covering {cover[used]:.0%} of the run{gaps} "
                f"(other sets: {others}); {rule}")
    return (f"phases: {plural(len(chosen), 'phase')} from {_SET_NAMES.get(used, used)}, covering {cover[used]:.0%} "
            f"of the run (other sets: {others}); the set covering the most is used, and within 2% of it the "
            f"app's markers, then OpenMP regions, then change points ({rule})")


def match_said(match: dict) -> str:
    """A phase's nearest config in words, its similarity, and the prior on its vote where its track
    record on the apps measured on many nodes lowered it (registry.match.track)."""
    from registry.match.references import config_in_words

    prior = match.get("vote_prior", 1.0)
    weighed = f", vote x{prior:.2f} by its track record" if prior < 0.995 else ""
    return f"{config_in_words(match['config'])} ({match['similarity']:.2f}{weighed})"


def no_nearest_said(phase, base: str) -> str:
    """What a phase resembling no microbenchmark config is projected by, read from its predictions: a
    model may keep its base time on every node, or (similarity) scale it by each node's median ratio
    over all references, as its warning says; the line said "base time kept" for both (#32)."""
    others = [p.predicted_s for node, p in phase.predictions.items() if node != base]
    kept = bool(others) and all(math.isclose(t, phase.time_s, rel_tol=1e-6) for t in others)
    return "none (no microbenchmark config resembles it): " + (
        "its base time is kept on every node" if kept else
        "each node's median ratio over all references, their full spread as the interval")


def interval_said(node) -> str | None:
    """How a node's headline interval follows from its phases' bounds: each step and the interval after
    it (registry.match.project.NodeResult.widen). The phases' bounds alone looked inconsistent with a
    headline widened for the base time's noise and the profiles' caveats (#32)."""
    if not node.steps:
        return None
    said = "; ".join(f"{s['step']}: {s['low_s']:.3g} - {s['high_s']:.3g} s" for s in node.steps)
    return f"interval of {node.node}: {said} (--json: each node's interval_steps)"
