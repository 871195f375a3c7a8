"""The portable trace file: one JSON document per traced run (format 'nodereg-trace', version 1).

Written with `--out`, read back by `read_trace` (and by importers of other registries). The format is
documented in docs/trace.md; a reader refuses newer versions and malformed documents with one clear
line, never a traceback. Files are written to a temporary name and renamed, so an interrupted
write leaves no half file.
"""

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from registry.errors import UserError

FORMAT = "nodereg-trace"
VERSION = 1


@dataclass
class Phase:
    name: str
    method: str                       # auto | marker | omp
    start_s: float
    end_s: float
    weight: float                     # share of the trace's wall time (OpenMP: fork-to-join time of its regions)
    time_s: float                     # phase time (OpenMP: sum of the slowest thread's time per call)
    calls: int = 1
    intervals: list[list[float]] = field(default_factory=list)   # [start_s, end_s] of each occurrence
    signature: dict[str, dict[str, float]] = field(default_factory=dict)   # source -> metric -> value
    iterations: float | None = None


@dataclass
class Trace:
    name: str
    node: str
    host: str
    command: list[str]
    exit_status: int
    status: str                       # ok | failed | timeout
    wall_s: float
    interval_s: float
    started_at: str                   # ISO 8601, UTC
    sources: list[str]
    phases: list[Phase]
    samples: dict[str, list] = field(default_factory=dict)       # column -> values; 't_s' first
    threads: int | None = None
    cachegrind: dict | None = None    # whole-program and per-function cachegrind statistics
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        doc = {"format": FORMAT, "version": VERSION, **asdict(self)}
        return finite_json(doc)


def finite_json(obj):
    """NaN/inf are not JSON: they become null (recursively)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite_json(v) for v in obj]
    return obj


def write_trace(trace: Trace, path: Path | str) -> Path:
    """Write atomically (temporary file in the same directory, then rename)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise UserError(f"cannot write trace file {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(trace.to_dict(), f, indent=1, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


_REQUIRED = {"name": str, "node": str, "command": list, "exit_status": int, "status": str,
             "wall_s": (int, float), "phases": list}
_PHASE_REQUIRED = {"start_s": (int, float), "end_s": (int, float), "weight": (int, float)}


def read_trace(path: Path | str) -> Trace:
    """Load a trace file, with a one-line error for anything that is not a valid version-1 trace."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"trace file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read trace file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"trace file {path} is corrupt (not JSON: {exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError(f"{path} is not a nodereg trace file (no \"format\": \"{FORMAT}\")")
    version = doc.get("version")
    if not isinstance(version, int):
        raise UserError(f"trace file {path} has no valid version number")
    if version > VERSION:
        raise UserError(f"trace file {path} has format version {version}, newer than this nodereg "
                        f"reads ({VERSION}): upgrade nodereg")
    if version < 1:
        raise UserError(f"trace file {path} has unsupported format version {version}")
    _check_fields(doc, _REQUIRED, f"trace file {path}")
    phases = []
    for i, ph in enumerate(doc["phases"]):
        if not isinstance(ph, dict):
            raise UserError(f"trace file {path}: phase {i} is not an object")
        _check_fields(ph, _PHASE_REQUIRED, f"trace file {path}: phase {i}")
        if ph["end_s"] < ph["start_s"]:
            raise UserError(f"trace file {path}: phase {i} ends before it starts")
        phases.append(Phase(
            name=str(ph.get("name") or f"phase {i}"), method=str(ph.get("method") or "import"),
            start_s=float(ph["start_s"]), end_s=float(ph["end_s"]), weight=float(ph["weight"]),
            time_s=float(ph.get("time_s") or ph["end_s"] - ph["start_s"]), calls=int(ph.get("calls") or 1),
            intervals=[list(map(float, iv)) for iv in ph.get("intervals") or [[ph["start_s"], ph["end_s"]]]],
            signature={str(src): {str(k): _num(v) for k, v in (metrics or {}).items()}
                       for src, metrics in (ph.get("signature") or {}).items()},
            iterations=ph.get("iterations")))
    return Trace(
        name=doc["name"], node=doc["node"], host=str(doc.get("host") or ""),
        command=[str(a) for a in doc["command"]], exit_status=doc["exit_status"], status=doc["status"],
        wall_s=float(doc["wall_s"]), interval_s=float(doc.get("interval_s") or 0.0),
        started_at=str(doc.get("started_at") or ""), sources=list(doc.get("sources") or []), phases=phases,
        samples=dict(doc.get("samples") or {}), threads=doc.get("threads"), cachegrind=doc.get("cachegrind"),
        meta=dict(doc.get("meta") or {}))


def _num(value) -> float:
    return math.nan if value is None else float(value)


def _check_fields(doc: dict, required: dict, where: str) -> None:
    for key, types in required.items():
        if key not in doc:
            raise UserError(f"{where} is missing field {key!r}")
        value = doc[key]
        if not isinstance(value, types) or isinstance(value, bool):
            raise UserError(f"{where}: field {key!r} has the wrong type ({type(value).__name__})")
