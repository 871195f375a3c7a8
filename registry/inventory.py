"""What hardware a node is: read from sysfs and procfs (lscpu as a fallback for the model name).

The inventory of a *restricted* node (`--cpus 0`) counts only its CPUs: cores, sockets and the
number of CPUs sharing each cache are intersected with the restriction, so a one-core
configuration of a host is described as the one-core node it stands in for.
"""

import functools
import os
import platform
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from registry import cpulist
from registry.errors import UserError

_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)\s*$", re.I)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
ISA_FLAGS = ("sse2", "avx", "avx2", "fma", "avx512f", "avx512vl", "asimd", "sve")


@dataclass
class Cache:
    level: int
    type: str            # Data | Instruction | Unified
    size_bytes: int
    line_bytes: int | None
    shared_by: int       # CPUs of this node sharing one instance
    instances: int       # instances among this node's CPUs


@dataclass
class Inventory:
    hostname: str
    cpu_model: str
    architecture: str
    cpus: list[int]
    cpu_count: int
    cpu_list: str
    restricted: bool
    sockets: int
    cores: int
    threads_per_core: int
    numa_nodes: int
    memory_bytes: int | None
    max_mhz: float | None
    kernel: str
    os: str
    compiler: str | None
    isa_flags: list[str]
    caches: list[Cache] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Inventory":
        data = dict(data)
        data["caches"] = [Cache(**c) for c in data.get("caches", [])]
        return cls(**data)

    def data_caches(self) -> list[Cache]:
        """Data/unified caches from L1 outwards: the levels a working-set sweep must cross."""
        return sorted((c for c in self.caches if c.type in ("Data", "Unified")), key=lambda c: c.level)

    def last_level_cache(self) -> Cache | None:
        caches = self.data_caches()
        return caches[-1] if caches else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _size(text: str | None) -> int | None:
    m = _SIZE.match(text or "")
    return int(m.group(1)) * _UNITS[m.group(2).upper()] if m else None


def _cpuinfo_field(cpuinfo: str, *names: str) -> str | None:
    """The first non-empty value of the first of `names` present (names in order of preference)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    return next((fields[n] for n in names if fields.get(n)), None)


def _lscpu_model() -> str | None:
    if not shutil.which("lscpu"):
        return None
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return _cpuinfo_field(out, "model name")


@functools.cache
def cpu_identity(root: Path | str = "/") -> str:
    """What a native build is specific to: the architecture, the CPU model (x86 'model name'; Arm
    implementer, part and variant) and every instruction-set flag the kernel reports, sorted."""
    cpuinfo = _read(Path(root) / "proc/cpuinfo") or ""
    model = [_cpuinfo_field(cpuinfo, name) or "" for name in
             ("vendor_id", "cpu family", "model", "model name", "cpu model", "cpu implementer", "cpu part",
              "cpu variant")]
    flags = sorted(set((_cpuinfo_field(cpuinfo, "flags", "features") or "").split()))
    return "|".join([platform.machine(), *model, " ".join(flags)])


def compiler_version(cc: str | None = None) -> str | None:
    return _version_of(cc or os.environ.get("CC", "cc"))


@functools.cache
def _version_of(cc: str) -> str | None:
    """`cc --version`'s first line; once per process (every build's cache key asks for it)."""
    if not shutil.which(cc):
        return None
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out else None


def _os_name(root: Path) -> str:
    text = _read(root / "etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else platform.system()


def collect(cpus: list[int] | None = None, root: Path | str = "/") -> Inventory:
    """The inventory of this machine, or of its configuration restricted to `cpus`."""
    root = Path(root)
    sysdir = root / "sys/devices/system"
    online = cpulist.parse(_read(sysdir / "cpu/online") or "0") if (sysdir / "cpu/online").exists() else \
        list(range(os.cpu_count() or 1))
    if cpus is None:
        chosen = online
    else:
        missing = sorted(set(cpus) - set(online))
        if missing:
            raise UserError(f"{cpulist.named(missing)} {'is' if len(missing) == 1 else 'are'} not online on this machine "
                            f"(online: {cpulist.format(online)})")
        chosen = sorted(cpus)
    chosen_set = set(chosen)

    packages, cores, smt = set(), set(), 1
    for c in chosen:
        topo = sysdir / f"cpu/cpu{c}/topology"
        pkg = _read(topo / "physical_package_id") or "0"
        packages.add(pkg)
        cores.add((pkg, _read(topo / "core_id") or str(c)))
        siblings = _read(topo / "thread_siblings_list")
        if siblings:
            smt = max(smt, len(set(cpulist.parse(siblings)) & chosen_set))

    caches: dict[tuple[int, str], Cache] = {}
    seen_instances: dict[tuple[int, str], set] = {}
    for c in chosen:
        for index in sorted((sysdir / f"cpu/cpu{c}/cache").glob("index*")):
            level, ctype = _read(index / "level"), _read(index / "type")
            size = _size(_read(index / "size"))
            if not level or not ctype or not size:
                continue
            shared = set(cpulist.parse(_read(index / "shared_cpu_list") or str(c))) & chosen_set
            key = (int(level), ctype)
            seen_instances.setdefault(key, set()).add(frozenset(shared))
            line = _read(index / "coherency_line_size")
            caches[key] = Cache(int(level), ctype, size, int(line) if line else None, len(shared), 0)
    for key, cache in caches.items():
        cache.instances = len(seen_instances[key])
        cache.shared_by = max(len(s) for s in seen_instances[key])

    numa = 0
    for node in (sysdir / "node").glob("node[0-9]*"):
        text = _read(node / "cpulist")
        if text and set(cpulist.parse(text)) & chosen_set:
            numa += 1

    cpuinfo = _read(root / "proc/cpuinfo") or ""
    model = _cpuinfo_field(cpuinfo, "model name", "cpu model", "processor") if cpuinfo else None  # ARM: "processor"
    if not model or model.isdigit():
        model = _lscpu_model() or platform.processor() or "unknown"
    flags = set((_cpuinfo_field(cpuinfo, "flags", "features") or "").split())

    mem_kb = re.search(r"^MemTotal:\s+(\d+)\s*kB", _read(root / "proc/meminfo") or "", re.M)
    mhz = None
    freq = _read(sysdir / f"cpu/cpu{chosen[0]}/cpufreq/cpuinfo_max_freq")
    if freq and freq.isdigit():
        mhz = int(freq) / 1000.0
    else:
        value = _cpuinfo_field(cpuinfo, "cpu mhz")
        mhz = float(value) if value else None

    return Inventory(
        hostname=socket.gethostname(),
        cpu_model=" ".join(model.split()),
        architecture=platform.machine(),
        cpus=chosen,
        cpu_count=len(chosen),
        cpu_list=cpulist.format(chosen),
        restricted=chosen != online,
        sockets=len(packages),
        cores=len(cores),
        threads_per_core=smt,
        numa_nodes=max(numa, 1),
        memory_bytes=int(mem_kb.group(1)) * 1024 if mem_kb else None,
        max_mhz=mhz,
        kernel=platform.release(),
        os=_os_name(root),
        compiler=compiler_version(),
        isa_flags=[f for f in ISA_FLAGS if f in flags],
        caches=sorted(caches.values(), key=lambda k: (k.level, k.type)),
    )
