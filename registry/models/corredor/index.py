"""The similarity index of Corredor (2011), section 3.1.3, exactly as the thesis computes it.

A phase (measured on the base node) is described by its memory streams plus one time per iteration;
a microbenchmark config ("performance profile") likewise, measured on the same base node. Every
non-empty combination of the phase's n streams (2^n - 1 queries) is compared with every profile that
has that many streams, stream i of the query with stream i of the profile (positional pairing).
Per feature, ``d% = |phase - profile| / phase * 100`` is scored by the zones (Table 3.21); the
size, stride, dtype and access sub-indexes are means over the paired streams, the tpi sub-index is
computed once, a discard in any stream discards the profile, and
``index = iT + iS + iD + iA + iZ`` (at most 125 with the thesis's zones).

The thesis's "TipoDato" is the element size (Tables 3.16, 3.20 print it as "8B"), so dtype
similarity compares ``elem_bytes``; the access pattern (seq/random) is carried on streams but is not
a feature of the thesis's index.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from registry.errors import UserError
from registry.models.corredor.zones import Zones

KB_ELEMS = 1024  # the thesis's "size (KB)" column is the element count / 1024 (4000^2 doubles -> 15624)
MAX_STREAMS = 8  # streams of one phase the index combines: 2^n - 1 queries (255) against every config


@dataclass(frozen=True)
class Stream:
    """One memory stream: region size in elements, stride in bytes, element size, sharing, pattern."""

    size_elems: int
    stride_bytes: int
    elem_bytes: int = 8
    access: str = "C"          # C: all threads touch the same region; P: private per thread
    dtype: str = "f64"
    pattern: str = "seq"       # seq | random

    def __post_init__(self):
        if self.access not in ("C", "P"):
            raise UserError(f"stream access must be C (shared) or P (private), not {self.access!r}")
        if self.size_elems <= 0 or self.stride_bytes <= 0 or self.elem_bytes <= 0:
            raise UserError("stream size, stride and element size must be positive")

    @classmethod
    def from_kb(cls, size_kb: float, stride_bytes: int, elem_bytes: int = 8, access: str = "C",
                **kw) -> Stream:
        """A stream from the thesis's units: size in "KB" (= elements / 1024), stride in bytes."""
        return cls(round(size_kb * KB_ELEMS), int(stride_bytes), int(elem_bytes), access, **kw)

    @property
    def size_kb(self) -> float:
        return self.size_elems / KB_ELEMS

    def label(self) -> str:
        return f"{self.size_kb:g}/{self.stride_bytes}/{self.elem_bytes}B/{self.access}"


@dataclass(frozen=True)
class Profile:
    """A microbenchmark config with its streams and its time per iteration on the base node."""

    config: str                       # the config's identity (config_key, or the thesis's name)
    streams: tuple[Stream, ...]
    tpi_us: float
    ub: str = ""

    def __post_init__(self):
        if not self.streams:
            raise UserError(f"profile {self.config} has no streams")


@dataclass(frozen=True)
class Phase:
    """A significant phase measured on the base node: its streams, time per iteration of the slowest
    thread (us), time (s), and when known the loop iterations of the slowest thread and its weight
    (share of the application's time, reported in explanations)."""

    name: str
    streams: tuple[Stream, ...]
    tpi_us: float
    time_s: float
    iterations: float | None = None
    weight: float | None = None

    def __post_init__(self):
        if not self.streams:
            raise UserError(f"phase {self.name} has no stream descriptors")
        if not (self.time_s >= 0) or not (self.tpi_us >= 0):
            raise UserError(f"phase {self.name} needs a non-negative time and time per iteration")


def pct_diff(phase_value: float, profile_value: float) -> float:
    """The thesis's relative difference, in percent of the phase's value."""
    if phase_value == 0:
        return 0.0 if profile_value == 0 else math.inf
    return abs(phase_value - profile_value) / abs(phase_value) * 100.0


def queries(n_streams: int) -> list[tuple[int, ...]]:
    """All 2^n - 1 stream combinations, shortest first: [v1], [v2], ..., [v1,v2], ... (section 3.1.3)."""
    return [c for p in range(1, n_streams + 1) for c in itertools.combinations(range(n_streams), p)]


@dataclass(frozen=True)
class Comparison:
    """One query of a phase against one profile: the per-stream differences and the sub-indexes."""

    query: tuple[int, ...]                    # positions of the phase's streams in this query
    profile: Profile
    d_pct: dict[str, tuple[float, ...]]       # feature -> d% per paired stream ('tpi': one value)
    scores: dict[str, tuple[float, ...]]      # feature -> zone score per paired stream
    sub: dict[str, float]                     # iT, iS, iD, iA (means over streams), iZ
    discarded_by: tuple[str, ...]             # features whose d% passed their discard threshold

    @property
    def index(self) -> float | None:
        """iT + iS + iD + iA + iZ, or None when the profile is discarded."""
        return None if self.discarded_by else sum(self.sub.values())

    def query_label(self) -> str:
        return "[" + ",".join(f"v{i + 1}" for i in self.query) + "]"

    def as_dict(self) -> dict:
        return {"query": self.query_label(), "config": self.profile.config, "index": self.index,
                "discarded_by": list(self.discarded_by), "sub_indexes": dict(self.sub),
                "d_pct": {k: list(v) for k, v in self.d_pct.items()}}


SUB_NAMES = {"size": "iT", "stride": "iS", "dtype": "iD", "access": "iA", "tpi": "iZ"}


def compare(phase: Phase, query: tuple[int, ...], profile: Profile, zones: Zones) -> Comparison:
    """Score one query of `phase` against `profile` (which must have len(query) streams)."""
    if len(profile.streams) != len(query):
        raise ValueError("positional pairing needs a profile with as many streams as the query")
    pairs = [(phase.streams[i], s) for i, s in zip(query, profile.streams)]
    d = {
        "size": tuple(pct_diff(a.size_elems, b.size_elems) for a, b in pairs),
        "stride": tuple(pct_diff(a.stride_bytes, b.stride_bytes) for a, b in pairs),
        "dtype": tuple(0.0 if a.elem_bytes == b.elem_bytes else 100.0 for a, b in pairs),
        "access": tuple(0.0 if a.access == b.access else 100.0 for a, b in pairs),
        "tpi": (pct_diff(phase.tpi_us, profile.tpi_us),),
    }
    scores, sub, discarded = {}, {}, []
    for feature, values in d.items():
        fz = zones[feature]
        scores[feature] = tuple(fz.score(v) for v in values)
        sub[SUB_NAMES[feature]] = sum(scores[feature]) / len(values)
        if any(fz.discards(v) for v in values):
            discarded.append(feature)
    return Comparison(query, profile, d, scores, sub, tuple(discarded))
