"""A phase's memory streams (Corredor 2011): declared by the program, or found by the stream probe.

Declared streams (``stream`` lines on the marker FIFO, registry.trace.markers) belong to the marker
phase they name. The probe (registry.measure.streams) sees the whole program; our valgrind tool
names each stream's function, so a stream of an OpenMP region's outlined function goes to that
region. Without function names (lackey), or when none is a region's, the significant streams go to
the trace's longest OpenMP region or marker phase (else its longest phase) that has none
declared: the thesis characterises the significant phase and leaves the rest to the remainder.
When some streams found their regions, the others (serial code's) are left out. The probe also
gives each phase its loop iterations (of the slowest thread) when the trace has none, from which
the time per iteration follows.
"""

from registry.errors import UserError
from registry.io.tracefile import Phase
from registry.measure.runner import Marker
from registry.measure.streams import ProbeResult
from registry.models.corredor.index import MAX_STREAMS


def _descriptor(m: Marker) -> dict:
    size, stride, elem, access, pattern = m.args
    try:
        values = int(size), int(stride), int(elem)
    except ValueError:
        raise UserError(f"phase {m.name}: declared stream {' '.join(m.args)} has non-integer sizes") from None
    if min(values) <= 0 or access not in ("C", "P") or pattern not in ("seq", "random"):
        raise UserError(f"phase {m.name}: declared stream {' '.join(m.args)} is not SIZE STRIDE ELEM C|P seq|random "
                        "with positive sizes")
    return {"size_elems": values[0], "stride_bytes": values[1], "dtype": f"{values[2]}B", "elem_bytes": values[2],
            "access": access, "pattern": pattern}


def _iterations(m: Marker) -> float:
    try:
        n = float(m.args[0])
    except ValueError:
        n = 0.0
    if not n > 0 or n != n or n == float("inf"):
        raise UserError(f"phase {m.name}: declared iterations {m.args[0]} is not a positive number")
    return n


def _check_count(name: str, n: int) -> None:
    if n > MAX_STREAMS:
        raise UserError(f"phase {name} has {n} streams; the similarity index combines at most {MAX_STREAMS} "
                        f"({2 ** MAX_STREAMS - 1} queries per config): its streams are not stored")


def attach_declared(phases: list[Phase], markers: list[Marker]) -> list[str]:
    """Declared streams and iterations onto their marker phases; notes for phases never marked."""
    declared: dict[str, list[dict]] = {}
    for m in markers:
        if m.verb == "stream":
            declared.setdefault(m.name, []).append(_descriptor(m))
    counts = {m.name: _iterations(m) for m in markers if m.verb == "iterations"}
    marked = {p.name: p for p in phases if p.method == "marker"}
    for name, streams in declared.items():
        _check_count(name, len(streams))
        if name in marked:
            marked[name].streams = streams
    for name, n in counts.items():
        if name in marked:
            marked[name].iterations = n
    return [f"streams or iterations declared for {name}, which has no begin/end markers: left out"
            for name in sorted((set(declared) | set(counts)) - set(marked))]


def attach_probed(phases: list[Phase], probe: ProbeResult) -> list[Phase]:
    """The probe's significant streams onto the phases they belong to (module docstring); the phases
    that got streams."""
    free = {p.name: p for p in phases if not p.streams}
    regions = {name for name, p in free.items() if p.method == "omp"}
    groups: dict[str, list] = {}
    rest = []
    for s in probe.significant():
        if s.function in regions:
            groups.setdefault(s.function, []).append(s)
        else:
            rest.append(s)
    if rest and not groups and free:
        candidates = [p for p in free.values() if p.method in ("omp", "marker")] or list(free.values())
        groups[max(candidates, key=lambda p: (p.time_s or 0.0, p.weight)).name] = rest
    for name, streams in groups.items():
        _check_count(name, len(streams))
    for name, streams in groups.items():
        phase = free[name]
        phase.streams = [s.descriptor() for s in streams]
        if not phase.iterations:
            phase.iterations = float(max(s.iterations for s in streams))
    return [free[name] for name in groups]
