"""A server's inventory: lscpu -JB as run inside the VM, completed by the vendor's specs dump.

lscpu is what the benchmarks ran on, so it wins; the specs (sc-data-dumps
``data/server/<vendor>/<server>.json``) fill what lscpu lacks or never says: memory, GPUs, the
hypervisor, whether the vCPUs are shared with other tenants, and everything when the lscpu task failed.
"""

from __future__ import annotations

import json
import re

from registry.io.sparecores.family import classify
from registry.io.sparecores.figures import MAX_BYTES

_ARCH = {"X86_64": "x86_64", "ARM64": "aarch64", "I386": "i686", "ARM64_MAC": "aarch64", "X86_64_MAC": "x86_64"}
_CACHE = re.compile(r"^\s*(\d+)\s*(?:\((\d+) instances?\))?")
_CACHE_FIELDS = {"L1d cache:": (1, "Data"), "L1i cache:": (1, "Instruction"), "L2 cache:": (2, "Unified"),
                 "L3 cache:": (3, "Unified")}


def _int(value) -> int | None:
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return n if 0 < n < 2**31 else None


def lscpu_fields(text: str) -> dict[str, str]:
    """lscpu -J's {"lscpu": [{"field", "data"[, "children"]}]} flattened to {field: data}."""
    doc = json.loads(text)
    entries = doc.get("lscpu") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError("no 'lscpu' list")
    out: dict[str, str] = {}

    def walk(items):
        for e in items:
            if isinstance(e, dict) and isinstance(e.get("field"), str):
                if e.get("data") is not None:
                    out.setdefault(e["field"], str(e["data"]))
                if isinstance(e.get("children"), list):
                    walk(e["children"])

    walk(entries)
    if "Architecture:" not in out and "CPU(s):" not in out:
        raise ValueError("no Architecture or CPU(s) field")
    return out


def _caches(fields: dict[str, str], vcpus: int | None) -> list[dict]:
    out = []
    for name, (level, kind) in _CACHE_FIELDS.items():
        m = _CACHE.match(fields.get(name, ""))
        if not m or not 0 < int(m[1]) <= MAX_BYTES:
            continue
        total, instances = int(m[1]), int(m[2]) if m[2] else 1
        if not 0 < instances < 2**31 or total // instances <= 0:
            continue
        out.append({"level": level, "cache_type": kind, "size_bytes": total // instances, "instances": instances,
                    "shared_by": (vcpus // instances) if vcpus and vcpus >= instances else None})
    return out


def from_lscpu(fields: dict[str, str], cloud: str) -> dict:
    vcpus = _int(fields.get("CPU(s):"))
    tpc, cps, sockets = (_int(fields.get(k)) for k in ("Thread(s) per core:", "Core(s) per socket:", "Socket(s):"))
    vendor, family = classify(fields.get("Vendor ID:"), fields.get("Model name:"), fields.get("CPU family:"),
                              fields.get("Model:"), fields.get("Stepping:"), cloud)
    flags = fields.get("Flags:", "").split()
    return {
        "architecture": fields.get("Architecture:") or None, "vcpus": vcpus,
        "cores": cps * sockets if cps and sockets else (vcpus // tpc if vcpus and tpc else None),
        "threads_per_core": tpc, "sockets": sockets, "cpu_model": fields.get("Model name:") or None,
        "cpu_vendor": vendor, "cpu_family": family, "cpu_vendor_id": fields.get("Vendor ID:") or None,
        "cpu_family_number": _int(fields.get("CPU family:")), "cpu_model_number": _int(fields.get("Model:")),
        "stepping": _int(fields.get("Stepping:")), "numa_nodes": _int(fields.get("NUMA node(s):")),
        "max_mhz": _float(fields.get("CPU max MHz:")), "hypervisor": fields.get("Hypervisor vendor:") or None,
        "caches": _caches(fields, vcpus), "flags": flags, "source": "lscpu",
    }


def _float(value) -> float | None:
    try:
        x = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return x if 0 < x < 1e7 else None


def from_specs(spec: dict) -> dict:
    """The fields of a specs dump's server document that the inventory uses."""
    def num(key):
        v = spec.get(key)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 2**31 else None

    memory_mib = num("memory_amount")     # (MiB: under 2^31 of them, 2 PiB)
    model = " ".join(str(spec[k]) for k in ("cpu_manufacturer", "cpu_family", "cpu_model") if spec.get(k)) or None
    return {
        "architecture": _ARCH.get(str(spec.get("cpu_architecture") or "").upper()),
        "vcpus": num("vcpus"), "cores": num("cpu_cores"), "cpu_model": model,
        "cpu_vendor": spec.get("cpu_manufacturer") or None,
        "memory_bytes": int(memory_mib * 2**20) if memory_mib else None,
        "memory_generation": spec.get("memory_generation") or None, "hypervisor": spec.get("hypervisor") or None,
        # DEDICATED, SHARED (a fraction of a core, or cores other tenants share) or BURSTABLE (CPU credits)
        "cpu_allocation": spec.get("cpu_allocation") or None,
        "gpu_count": num("gpu_count") or 0, "gpu_model": spec.get("gpu_model") or None,
        "gpu_manufacturer": spec.get("gpu_manufacturer") or None,
        "flags": [str(f) for f in spec.get("cpu_flags") or [] if isinstance(f, str)],
        "display_name": spec.get("display_name") or None, "description": spec.get("description") or None,
    }


def merge(lscpu: dict | None, specs: dict | None, memory_bytes: int | None = None) -> dict:
    """One inventory: lscpu's values, then the specs' where lscpu has none (see the module doc)."""
    inv = dict(lscpu or {})
    for key, value in (specs or {}).items():
        if inv.get(key) in (None, [], "") and value not in (None, [], ""):
            inv[key] = value
    if inv.get("memory_bytes") is None and memory_bytes:
        inv["memory_bytes"] = memory_bytes
    if lscpu is None and specs:
        inv["source"] = "specs"
    return inv
