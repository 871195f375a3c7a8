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

from registry.db.names import check_name
from registry.errors import UserError
from registry.values import command_line, finite_json

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
    # memory streams (Corredor 2011), positional: phase_streams rows without owner and index
    streams: list[dict] = field(default_factory=list)


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
    """Load a trace file, with a one-line error for anything that is not a valid version-1 trace.

    Beyond the required fields, every value a consumer computes with is checked: numbers are finite
    (Python's JSON reader takes NaN and Infinity), counts are whole numbers, the containers have
    their documented shapes. A file that passes gives a Trace whose fields have their declared types.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"trace file {path} does not exist") from None
    except UnicodeDecodeError:     # a program, say: the codec's byte offset helps nobody
        program = str(path) if "/" in str(path) else f"./{path}"
        raise UserError(f"{path} is not a nodereg trace file (binary data, not JSON text); a program is traced "
                        f"with {command_line('nodereg', 'trace', '--name', 'APP', '--', program)}") from None
    except OSError as exc:
        raise UserError(f"cannot read trace file {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"trace file {path} is corrupt (not JSON: {exc.msg} at line {exc.lineno})") from None
    except ValueError as exc:      # e.g. an integer longer than Python converts
        raise UserError(f"trace file {path} is corrupt ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError(f"{path} is not a nodereg trace file (no \"format\": \"{FORMAT}\")")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UserError(f"trace file {path} has no valid version number")
    if version > VERSION:
        raise UserError(f"trace file {path} has format version {version}, newer than this nodereg "
                        f"reads ({VERSION}): upgrade nodereg")
    if version < 1:
        raise UserError(f"trace file {path} has unsupported format version {version}")
    where = f"trace file {path}"
    _check_fields(doc, _REQUIRED, where)
    check_name(doc["name"], "app", where)      # the name enters the registry when the trace is stored
    if "\x00" in doc["node"]:            # only looked up, but PostgreSQL cannot compare text with NUL
        raise UserError(f"{where}: field 'node' contains a NUL character")
    samples = _optional(doc, "samples", dict, where, {})
    for column, values in samples.items():
        if not isinstance(values, list) or not all(v is None or _is_finite(v) for v in values):
            raise UserError(f"{where}: samples column {column!r} is not a list of numbers (or nulls)")
    phases = [_phase(ph, i, where) for i, ph in enumerate(doc["phases"])]
    _check_weights(phases, where)
    meta = _optional(doc, "meta", dict, where, {})
    if not isinstance(meta.get("input"), (str, type(None))):
        raise UserError(f"{where}: field 'meta.input' must be a text (the workload's input)")
    return Trace(
        name=doc["name"], node=doc["node"], host=str(doc.get("host") or ""),
        command=[str(a) for a in doc["command"]], exit_status=doc["exit_status"], status=doc["status"],
        wall_s=_number(doc, "wall_s", where), interval_s=_number(doc, "interval_s", where, default=0.0),
        started_at=str(doc.get("started_at") or ""),
        sources=[str(s) for s in _optional(doc, "sources", list, where, [])],
        phases=phases,
        samples=samples, threads=_optional(doc, "threads", int, where, None) or None,
        cachegrind=_optional(doc, "cachegrind", dict, where, None), meta=meta)


WEIGHT_SLACK = 0.005    # rounding in the weights of phases that tile the run


def _check_weights(phases: list[Phase], where: str) -> None:
    """Phases of one method are disjoint parts of the run: their weights sum to 1 at most. A file
    whose weights sum past it (nested markers written by nodereg before 0.3, or a bad importer)
    would count time twice in every prediction."""
    totals: dict[str, float] = {}
    for p in phases:
        totals[p.method] = totals.get(p.method, 0.0) + p.weight
    for method, total in totals.items():
        if total > 1 + WEIGHT_SLACK:
            raise UserError(f"{where}: the weights of its {method!r} phases sum to {total:.3g}, past the whole run "
                            "(1): phases of one method must not overlap (re-trace nested markers with this nodereg, "
                            "which records their disjoint leaves)")


def _phase(ph, i: int, where: str) -> Phase:
    where = f"{where}: phase {i}"
    if not isinstance(ph, dict):
        raise UserError(f"{where} is not an object")
    _check_fields(ph, _PHASE_REQUIRED, where)
    start, end = (_number(ph, key, where, signed=True) for key in ("start_s", "end_s"))
    weight = _number(ph, "weight", where)
    if end < start:
        raise UserError(f"{where} ends before it starts")
    intervals = _optional(ph, "intervals", list, where, None) or [[start, end]]
    if not all(isinstance(iv, list) and len(iv) == 2 and all(_is_finite(v) for v in iv) for iv in intervals):
        raise UserError(f"{where}: field 'intervals' is not a list of [start_s, end_s] pairs")
    signature = _optional(ph, "signature", dict, where, {})
    for src, metrics in signature.items():
        if not isinstance(metrics, dict) or not all(_is_metric(v) for v in metrics.values()):
            raise UserError(f"{where}: signature {src!r} is not an object of numbers (or nulls)")
    iterations = _number(ph, "iterations", where, default=None)
    streams = [_stream(st, f"{where}: stream {j}") for j, st in enumerate(_optional(ph, "streams", list, where, []))]
    return Phase(
        name=str(ph.get("name") or f"phase {i}"), method=str(ph.get("method") or "import"),
        start_s=start, end_s=end, weight=weight, time_s=_number(ph, "time_s", where, default=None) or end - start,
        calls=_optional(ph, "calls", int, where, None) or 1, intervals=[[float(a), float(b)] for a, b in intervals],
        signature={str(src): {str(k): _num(v) for k, v in metrics.items()} for src, metrics in signature.items()},
        iterations=iterations, streams=streams)


_STREAM_FIELDS = {"size_elems": int, "stride_bytes": int, "elem_bytes": int, "dtype": str, "access": str,
                  "pattern": str}


def _stream(st, where: str) -> dict:
    """One stream descriptor: positive whole sizes, access C or P, pattern seq or random."""
    if not isinstance(st, dict):
        raise UserError(f"{where} is not an object")
    _check_fields(st, _STREAM_FIELDS, where)
    if any(st[k] <= 0 for k in ("size_elems", "stride_bytes", "elem_bytes")):
        raise UserError(f"{where}: sizes and stride must be positive")
    if st["access"] not in ("C", "P") or st["pattern"] not in ("seq", "random"):
        raise UserError(f"{where}: access must be C or P and pattern seq or random")
    return {k: st[k] for k in _STREAM_FIELDS}


def _num(value) -> float:
    return math.nan if value is None else float(value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value) -> bool:
    try:
        return _is_number(value) and math.isfinite(value)
    except OverflowError:          # an integer too large for a float
        return False


def _is_metric(value) -> bool:
    """A signature value: a finite number, or unknown (null, or NaN, which Python's JSON reader takes)."""
    return value is None or _is_finite(value) or (isinstance(value, float) and math.isnan(value))


def _number(doc: dict, key: str, where: str, default: float | None = ..., signed: bool = False) -> float | None:
    """A finite number, >= 0 unless `signed` (durations, weights, counts); `default` when absent or
    null, if the field is optional."""
    value = doc.get(key)
    if value is None and default is not ...:
        return default
    if not _is_finite(value) or (value < 0 and not signed):
        raise UserError(f"{where}: field {key!r} must be a finite number{'' if signed else ' >= 0'}, "
                        f"not {_short(value)}")
    return float(value)


def _optional(doc: dict, key: str, types, where: str, default):
    """An optional field of a JSON type (an int must be >= 0); `default` when absent or null."""
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, types) or isinstance(value, bool):
        raise UserError(f"{where}: field {key!r} has the wrong type ({type(value).__name__})")
    if types is int and value < 0:
        raise UserError(f"{where}: field {key!r} must not be negative")
    return value


def _short(value) -> str:
    text = json.dumps(value) if _is_number(value) or value is None else type(value).__name__
    return text if len(text) <= 30 else text[:27] + "..."


def _check_fields(doc: dict, required: dict, where: str) -> None:
    for key, types in required.items():
        if key not in doc:
            raise UserError(f"{where} is missing field {key!r}")
        value = doc[key]
        if not isinstance(value, types) or isinstance(value, bool):
            raise UserError(f"{where}: field {key!r} has the wrong type ({type(value).__name__})")
