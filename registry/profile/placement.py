"""Which CPUs the threads of a configuration run on: compact and scatter placements.

Both place one thread per core before using a core's SMT siblings (the thesis ran one thread per
core). Compact fills one last-level-cache domain (a socket, or a CCX on AMD) before the next;
scatter deals threads round-robin over the domains, so two threads share as little as they can.
A thread count whose two placements use the same CPUs is measured once, as compact. Two MPI
ranks are placed by what they share instead (pair_placements).
"""

from dataclasses import dataclass
from pathlib import Path

from registry import cpulist


@dataclass(frozen=True)
class Cpu:
    cpu: int
    package: int
    core: int
    llc: int      # last-level cache domain (lowest CPU sharing it)


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default


def read_topology(cpus: list[int], root: Path | str = "/") -> list[Cpu]:
    """Package, core and last-level-cache domain of each CPU, from sysfs."""
    base = Path(root) / "sys/devices/system/cpu"
    out = []
    for c in cpus:
        topo = base / f"cpu{c}/topology"
        package = _read_int(topo / "physical_package_id", 0)
        core = _read_int(topo / "core_id", c)
        llc = package
        levels = []
        for index in (base / f"cpu{c}/cache").glob("index*"):
            kind = (index / "type").read_text().strip() if (index / "type").exists() else ""
            if kind in ("Data", "Unified"):
                levels.append((_read_int(index / "level", 0), index))
        if levels:
            shared = (max(levels)[1] / "shared_cpu_list")
            try:
                llc = min(cpulist.parse(shared.read_text().strip()))
            except (OSError, ValueError):
                pass
        out.append(Cpu(c, package, core, llc))
    return out


def _by_core(topology: list[Cpu]) -> list[list[Cpu]]:
    """CPUs grouped by physical core, cores in (domain, core) order, siblings by CPU number."""
    cores: dict[tuple[int, int, int], list[Cpu]] = {}
    for cpu in sorted(topology, key=lambda c: (c.package, c.llc, c.core, c.cpu)):
        cores.setdefault((cpu.package, cpu.llc, cpu.core), []).append(cpu)
    return list(cores.values())


def order(topology: list[Cpu], placement: str) -> list[int]:
    """All CPUs in the order threads 0, 1, ... take them."""
    cores = _by_core(topology)
    depth = max((len(c) for c in cores), default=0)
    if placement == "compact":
        firsts = cores
    elif placement == "scatter":
        domains: dict[tuple[int, int], list[list[Cpu]]] = {}
        for core in cores:
            domains.setdefault((core[0].package, core[0].llc), []).append(core)
        groups = list(domains.values())
        firsts = [g[i] for i in range(max(len(g) for g in groups)) for g in groups if i < len(g)]
    else:
        raise ValueError(placement)
    # one thread per core first, then the second SMT sibling of every core, and so on
    return [core[level].cpu for level in range(depth) for core in firsts if level < len(core)]


def placements(topology: list[Cpu], threads: int) -> dict[str, tuple[int, ...]]:
    """{'compact': cpus, 'scatter': cpus} for `threads` threads; scatter only where it differs."""
    compact = tuple(order(topology, "compact")[:threads])
    scatter = tuple(order(topology, "scatter")[:threads])
    result = {"compact": compact}
    if set(scatter) != set(compact):
        result["scatter"] = scatter
    return result


PAIRS = ("same_ccx", "same_socket", "cross_socket")


def pair_placements(topology: list[Cpu]) -> dict[str, tuple[int, ...]]:
    """Two CPUs on different cores for each way two communicating ranks can sit that the node
    has: 'same_ccx' (one last-level cache: a core complex on AMD, the socket on most Intel
    parts), 'same_socket' (one package, different last-level caches), 'cross_socket'. The first
    such pair in CPU order; a node with a single core has none."""
    cores = [core[0] for core in _by_core(topology)]
    found: dict[str, tuple[int, ...]] = {}
    for i, a in enumerate(cores):
        for b in cores[i + 1:]:
            kind = ("cross_socket" if a.package != b.package else "same_socket" if a.llc != b.llc else "same_ccx")
            found.setdefault(kind, (a.cpu, b.cpu))
    return {kind: found[kind] for kind in PAIRS if kind in found}
