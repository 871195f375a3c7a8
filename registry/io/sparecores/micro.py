"""Parsers of the micro-benchmark tasks: each tool's own output -> Measurements of the suite.

Every parser takes the output text and returns the measurements it holds; it raises ValueError
when the text is not that tool's output at all (the caller records the task as skipped), and drops
single figures that are missing or not finite (an empty field, "null", a zero latency).

Config keys (``sparecores:<task>:<what>[:<param>...]:<1t|all>``) and units:

* membench (CSV): ``membench:read|write|copy:<size>:all`` MB/s (all threads; bandwidth),
  ``membench:latency:<size>:1t`` ns (one thread, pointer chase; latency). Sizes 16KiB .. 2GiB.
* bw_mem (lmbench, ``op size_MB MB/s`` lines, ``-P nproc``): ``bw_mem:rd|wr|rdwr:<size>:all`` MB/s.
* stressng_benchmarks (JSON, 85 stressors at 1 and N threads): ``stressng:<stressor>:1t|all``
  bogo ops/s; the family from the file's own categories.
  Where a tool measured 1 thread and "all" (the most threads it ran), a 1-vCPU server's one figure
  is both its ``1t`` and its ``all`` config, as it is both (same for stressngfull and compression).
* stressngfull (``threads,bogo ops/s`` lines, div16 method, 1..vCPUs): ``stressngfull:cpu-div16:1t``
  and ``:all`` (the most threads measured).
* stressng / stressngsinglecore (older tasks: stress-ng's metrics table, cpu stressor, all methods):
  ``stressng:cpu_all:all`` / ``stressng:cpu_all:1t`` bogo ops/s (Spare Cores' stress_ng:cpu_all).
* passmark (YAML): ``passmark:<TEST>:all`` for each figure of ``Results``, ``CPU_SINGLETHREAD``
  ``:1t``; units from PassMark's documentation; ME_LATENCY ns, lower is better.
* openssl (parsed.json, ``openssl speed -multi nproc``): ``openssl:<algo>:<block>:all`` bytes/s.
"""

from __future__ import annotations

import csv
import io
import json
import re

import yaml

from registry.io.sparecores.figures import MAX_BYTES, first_each, positive
from registry.io.sparecores.records import Measurement

ALL = 0   # ub_configs.threads for "all of the node's vCPUs"


def _m(task: str, ub: str, what: str, family: str, unit: str, hib: bool, threads: int, value,
       ws_bytes: int | None = None) -> Measurement | None:
    x = positive(value)
    if x is None:
        return None
    key = f"sparecores:{what}:{'1t' if threads == 1 else 'all'}"
    return Measurement(key, ub, family, unit, hib, threads, x, task, ws_bytes)


def _keep(items) -> list[Measurement]:
    return first_each(items, lambda m: m.config_key)


def size_label(n_bytes: int) -> str:
    """16384 -> '16KiB', 67108864 -> '64MiB', 1 GiB -> '1GiB' (binary units, as membench sizes)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale}{unit}"
    return f"{n_bytes}B"


def parse_membench(text: str) -> list[Measurement]:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or not {"size_kb", "operation"} <= set(rows[0]):
        raise ValueError("not membench CSV (no size_kb,operation header)")
    out = []
    for r in rows:
        try:
            size = int(float(r.get("size_kb") or "")) * 1024
        except (ValueError, OverflowError):   # not a number, or inf: no size to name the config by
            continue
        op = (r.get("operation") or "").strip().lower()
        if not re.fullmatch(r"[a-z_]+", op) or not 0 < size <= MAX_BYTES:
            continue
        what = f"membench:{op}:{size_label(size)}"
        if op == "latency":
            out.append(_m("membench", "sc-membench", what, "latency", "ns", False, 1, r.get("latency_ns"), size))
        else:
            out.append(_m("membench", "sc-membench", what, "bandwidth", "MB/s", True, ALL,
                          r.get("bandwidth_mb_s"), size))
    return _keep(out)


def _bw_mem_size(mb: float) -> tuple[str, int]:
    """lmbench prints sizes in MB (10^6 bytes): 0.016384 -> ('16KB', 16384), 512.00 -> ('512MB', 512e6)."""
    n = round(mb * 1e6)
    if mb < 1:
        return (f"{round(n / 1024)}KB" if n % 1024 == 0 else f"{n}B"), n
    return f"{mb:g}MB", n


def parse_bw_mem(text: str) -> list[Measurement]:
    out, lines = [], 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[0] not in ("rd", "wr", "rdwr", "cp", "fwr", "frd", "bzero", "bcopy"):
            continue
        lines += 1
        size = positive(parts[1])
        if size is None or size * 1e6 > MAX_BYTES:
            continue
        label, n = _bw_mem_size(size)
        out.append(_m("bw_mem", "sc-bw_mem", f"bw_mem:{parts[0]}:{label}", "bandwidth", "MB/s", True, ALL,
                      parts[2], n))
    if not lines:
        raise ValueError("no 'op size MB/s' lines")
    return _keep(out)


_STRESSNG_FAMILY = {"cpu_integer": "compute", "cpu_float_simd": "compute", "crypto": "crypto",
                    "compression": "compute", "memory": "bandwidth", "algorithms": "compute"}


def parse_stressng_benchmarks(text: str) -> list[Measurement]:
    doc = json.loads(text)
    stressors = doc.get("stressors") if isinstance(doc, dict) else None
    if not isinstance(stressors, dict):
        raise ValueError("no 'stressors' object")
    family = {}
    cats = doc.get("categories")
    if isinstance(cats, dict):
        for cat, names in cats.items():
            if isinstance(names, list):
                for n in names:
                    family[str(n)] = _STRESSNG_FAMILY.get(str(cat), "system")
    valid = {str(k): v for k, v in stressors.items()
             if isinstance(v, dict) and re.fullmatch(r"[A-Za-z0-9_.+-]+", str(k))}
    # "all" is the most threads the run used for any stressor (on a 1-vCPU server: 1, both configs)
    most = max((int(n) for v in valid.values() for n in v if str(n).isdigit()), default=0)
    out = []
    for name, by_threads in valid.items():
        for n, threads in ((1, 1), (most, ALL)):
            entry = by_threads.get(str(n))
            value = entry.get("bogo_ops_per_sec") if isinstance(entry, dict) else None
            out.append(_m("stressng_benchmarks", "sc-stressng", f"stressng:{name}", family.get(name, "system"),
                          "bogo ops/s", True, threads, value))
    return _keep(out)


def parse_stressngfull(text: str) -> list[Measurement]:
    points = {}
    for line in text.splitlines():
        parts = line.strip().split(",")
        if len(parts) != 2:
            continue
        try:
            n = int(parts[0])
        except ValueError:
            continue
        if n > 0 and positive(parts[1]) is not None:
            points[n] = float(parts[1])
    if not points:
        raise ValueError("no 'threads,bogo ops/s' lines")
    out = [_m("stressngfull", "sc-stressngfull", "stressngfull:cpu-div16", "compute", "bogo ops/s", True,
              ALL, points[max(points)])]
    if 1 in points:
        out.insert(0, _m("stressngfull", "sc-stressngfull", "stressngfull:cpu-div16", "compute", "bogo ops/s",
                         True, 1, points[1]))
    return _keep(out)


_METRIC_LINE = re.compile(r"stress-ng:\s+metrc:\s+\[\d+\]\s+cpu\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def parse_stressng_cpu(text: str, task: str) -> list[Measurement]:
    """The older `stressng` (all CPUs) and `stressngsinglecore` tasks: bogo ops/s (real time)."""
    m = _METRIC_LINE.search(text)
    if not m:
        raise ValueError("no stress-ng 'metrc ... cpu' line")
    threads = 1 if task == "stressngsinglecore" else ALL
    return _keep([_m(task, "sc-stressng", "stressng:cpu_all", "compute", "bogo ops/s", True, threads, m[5])])


# PassMark's Results keys: (unit, higher is better, family); CPU_SINGLETHREAD is the one 1-thread test
_PASSMARK = {
    "CPU_INTEGER_MATH": ("Mops/s", True, "compute"), "CPU_FLOATINGPOINT_MATH": ("Mops/s", True, "compute"),
    "CPU_PRIME": ("Mprimes/s", True, "compute"), "CPU_SORTING": ("Kstrings/s", True, "compute"),
    "CPU_ENCRYPTION": ("MB/s", True, "crypto"), "CPU_COMPRESSION": ("kB/s", True, "compute"),
    "CPU_SINGLETHREAD": ("Mops/s", True, "compute"), "CPU_PHYSICS": ("frames/s", True, "compute"),
    "CPU_MATRIX_MULT_SSE": ("Mmatrices/s", True, "compute"), "CPU_mm": ("Mmatrices/s", True, "compute"),
    "CPU_sse": ("Mmatrices/s", True, "compute"), "CPU_fma": ("Mmatrices/s", True, "compute"),
    "CPU_avx": ("Mmatrices/s", True, "compute"), "CPU_avx512": ("Mmatrices/s", True, "compute"),
    "CPU_neon": ("Mmatrices/s", True, "compute"),
    "m_CPU_enc_SHA": ("bytes/s", True, "crypto"), "m_CPU_enc_AES": ("bytes/s", True, "crypto"),
    "m_CPU_enc_ECDSA": ("bytes/s", True, "crypto"),
    "ME_ALLOC_S": ("Kops/s", True, "system"), "ME_READ_S": ("MB/s", True, "bandwidth"),
    "ME_READ_L": ("MB/s", True, "bandwidth"), "ME_WRITE": ("MB/s", True, "bandwidth"),
    "ME_LATENCY": ("ns", False, "latency"), "ME_THREADED": ("MB/s", True, "bandwidth"),
    "SUMM_CPU": ("score", True, "compute"), "SUMM_ME": ("score", True, "bandwidth"),
}


def parse_passmark(text: str) -> list[Measurement]:
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML ({type(exc).__name__})") from None
    results = doc.get("Results") if isinstance(doc, dict) else None
    if not isinstance(results, dict):
        raise ValueError("no 'Results' section")
    out = []
    for key, (unit, hib, family) in _PASSMARK.items():
        if key in results:
            threads = 1 if key == "CPU_SINGLETHREAD" else ALL
            out.append(_m("passmark", "sc-passmark", f"passmark:{key}", family, unit, hib, threads, results[key]))
    return _keep(out)


def parse_openssl(text: str) -> list[Measurement]:
    rows = json.loads(text)
    if not isinstance(rows, list):
        raise ValueError("not a list of {algo, block_size, speed}")
    out = []
    for r in rows:
        if not isinstance(r, dict):
            continue
        algo, block = str(r.get("algo", "")), r.get("block_size")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", algo) or not isinstance(block, int) or not 0 < block <= MAX_BYTES:
            continue
        out.append(_m("openssl", "sc-openssl", f"openssl:{algo}:{block}", "crypto", "bytes/s", True, ALL,
                      r.get("speed"), block))
    return _keep(out)
