"""`nodereg match --model corredor`: the thesis's similarity index and estimate inside the match pipeline.

References are the registry's own microbenchmark configs that carry stream descriptors
(``ub_streams``: the thesis family mbw1c, mbw2hc, ..., and the bandwidth and latency kernels' own
streams) with their time per iteration (``profile_runs.tpi_us``) in every node's latest profile.
A config's identity across thread counts is its key without the thread count, so a phase that uses
all CPUs compares with the configs at the base node's thread count and is estimated on each node
with the same config at that node's count (registry.match.references.threads_on).

Thread counts: the microbenchmarks' threads each do the same loop (the tpi is per iteration of one
thread), while a program's phase splits a fixed amount of work between its threads; moving from
t_base to t_X threads changes the slowest thread's iterations by t_base / t_X. The time per
iteration on X handed to the model is therefore ``tpi_X x t_base / t_X``, and the thesis's
``T = tpi_X x iterations`` then counts the base node's iterations (equal thread counts: unchanged).

Phases without streams are not projected here; their time is the remainder that
registry.match.project scales like the projected phases (the thesis's significant phases only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from registry.db.statement import execute
from registry.errors import UserError
from registry.match import references as refs_mod
from registry.match.project import PhaseResult, cpu_util
from registry.models.corredor.index import Phase, Profile, Stream
from registry.models.corredor.model import CorredorModel
from registry.models.corredor.zones import Zones, load_zones
from registry.models.plugins import create
from registry.values import plural

if TYPE_CHECKING:
    import sqlalchemy as sa

_STREAMS = """
SELECT c.config_key, u.name AS ub, s.stream_index, s.size_elems, s.stride_bytes, s.dtype, s.elem_bytes, s.access,
       s.pattern
FROM ub_streams s JOIN ub_configs c ON c.config_id = s.config_id JOIN microbenchmarks u ON u.ub_id = c.ub_id"""
_TPI = """
SELECT n.name AS node, c.config_key, c.threads, r.tpi_us FROM profile_runs r
JOIN v_latest_profile l ON l.profile_id = r.profile_id AND l.newest
JOIN nodes n ON n.node_id = l.node_id JOIN ub_configs c ON c.config_id = r.config_id
WHERE r.tpi_us > 0"""


def identity(config_key: str) -> str:
    """A config's identity whatever its thread count: its key without 'threads' (keys are JSON;
    a key that is not is its own identity)."""
    try:
        params = json.loads(config_key)
    except ValueError:
        return config_key
    if not isinstance(params, dict):
        return config_key
    params.pop("threads", None)
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


@dataclass
class StreamRefs:
    """The stream-described configs, by identity, and their time per iteration per (node, threads)."""

    streams: dict[str, tuple[Stream, ...]]
    ub: dict[str, str]
    tpi_us: dict[str, dict[tuple[str, int], float]]
    zones: Zones

    def fitted(self, base: str, threads: dict[str, int], model: str = "corredor",
               options: dict | None = None) -> CorredorModel:
        """The model (with its options) fitted on the configs at the base node's thread count,
        estimated at each node's."""
        t_base = threads[base]
        profiles, node_tpi = [], {}
        for ident, streams in self.streams.items():
            times = self.tpi_us.get(ident, {})
            if (base, t_base) not in times:
                continue
            profiles.append(Profile(ident, streams, times[(base, t_base)], self.ub[ident]))
            node_tpi[ident] = {n: times[(n, t)] * t_base / t for n, t in threads.items() if (n, t) in times}
        if not profiles:
            raise UserError(f"no microbenchmark config with stream descriptors is measured on {base} at "
                            f"{plural(t_base, 'thread')}: profile it with this version of nodereg")
        return create(model, kind="projection", options=options).fit(profiles=profiles, node_tpi=node_tpi,
                                                                     base_node=base, zones=self.zones)


def load_refs(conn: sa.Connection) -> StreamRefs:
    rows: dict[str, list] = {}
    ubs: dict[str, str] = {}
    for r in execute(conn, _STREAMS).mappings():
        ident = identity(r["config_key"])
        ubs[ident] = r["ub"]
        rows.setdefault(ident, {})[int(r["stream_index"])] = Stream(
            int(r["size_elems"]), int(r["stride_bytes"]), int(r["elem_bytes"]), r["access"], r["dtype"], r["pattern"])
    streams = {k: tuple(v[i] for i in sorted(v)) for k, v in rows.items()}
    tpi: dict[str, dict[tuple[str, int], float]] = {}
    for node, key, threads, value in execute(conn, _TPI):
        tpi.setdefault(identity(key), {}).setdefault((node, int(threads)), float(value))
    return StreamRefs(streams, ubs, tpi, load_zones(conn))


@dataclass(frozen=True)
class Unmatched:
    """A phase without a winner, and the comparison that came closest (None: no config to compare)."""

    phase: str
    nearest: dict | None

    def reason(self) -> str:
        """Why no config represents the phase, in words (for the warning that names its fallback)."""
        if not self.nearest:
            return "no microbenchmark config has as many streams"
        worst = " and ".join(f"{_FEATURES.get(f, f)} by {d:g}%" for f, d in self.nearest["d_pct"].items())
        return (f"no microbenchmark config survives the thesis's discards (the nearest, "
                f"{refs_mod.config_in_words(self.nearest['config'])}, differs in {worst})")


_FEATURES = {"tpi": "time per iteration", "size": "size", "stride": "stride"}


def is_streamed(phase) -> bool:
    """Whether a phase carries streams and a time per iteration (the thesis's inputs)."""
    return bool(phase.streams and phase.iterations and phase.time_s)


def no_streams_error(app: str) -> UserError:
    return UserError(f"the trace of {app!r} has no phase with memory streams and loop iterations, which the "
                     "corredor model needs: trace it with `nodereg trace --streams -- CMD`, or declare a marker "
                     "phase's streams and iterations (NODEREG_PHASE_STREAM and NODEREG_PHASE_ITERATIONS in C, "
                     "registry.trace.markers.stream and .iterations in Python)")


def _thread_mode(phase, trace, base_cpus: int) -> tuple[str, int]:
    """As the default model (registry.match.references.thread_mode), except for an OpenMP region of a
    run told no thread count: the shim counted its team, which is exact where the CPU samples of a
    short run (the inputs a stream probe affords) are not."""
    team = trace.meta.get("omp_max_threads") if phase.method == "omp" and not trace.threads else None
    if team:
        return refs_mod.thread_mode(float(team), None, base_cpus)
    return refs_mod.thread_mode(cpu_util(phase.signature), trace.threads, base_cpus)


def project_phase(phase, time_s: float, inputs, cache: dict, model: str = "corredor",
                  options: dict | None = None) -> PhaseResult | Unmatched:
    """One phase by the thesis's method: its winner on the base node, its estimate on every target
    (`model`, `options`: the stream model and its options, e.g. corredor's estimate=ratio). A phase
    no config survives the discards for is `Unmatched` when the model's `unmatched` option asks for
    the default model (the caller projects it); with unmatched=remainder it keeps the thesis's rule."""
    profiles = inputs.profiles
    mode, k = _thread_mode(phase, inputs.found.trace, profiles.n_cpus[inputs.base])
    counts = refs_mod.threads_on(profiles, mode, k)
    threads = {n: t for n, t in zip(profiles.node_names.tolist(), counts.tolist()) if t > 0}
    if (mode, threads[inputs.base]) not in cache:
        cache[(mode, threads[inputs.base])] = inputs.stream_refs.fitted(inputs.base, threads, model, options)
    model = cache[(mode, threads[inputs.base])]
    streams = tuple(Stream(s["size_elems"], s["stride_bytes"], s["elem_bytes"], s["access"], s["dtype"], s["pattern"])
                    for s in phase.streams)
    # the time per iteration from the phase's share of the base time (the median of the traced and
    # the measured runs there), not from the traced run alone: one slow traced run would pick the
    # config as slow as it, and the thesis's estimate carries the winner's time to every node
    query = Phase(phase.name, streams, time_s / phase.iterations * 1e6, time_s, phase.iterations, phase.weight)
    preds = {p.node: p for p in model.predict_phases([query], inputs.targets, time_s)}
    (details,) = next(iter(preds.values())).explanation["matches"] if preds else [{}]
    if preds and details.get("winner") is None and getattr(model, "unmatched", "remainder") != "remainder":
        return Unmatched(phase.name, details.get("nearest_discarded"))
    best = 1.0 / inputs.stream_refs.zones.max_index
    matches = [{"config": c["config"], "similarity": round(c["index"] * best, 4), "index": c["index"],
                "query": c["query"], "threads": threads[inputs.base]}
               for c in sorted(details.get("candidates", []), key=lambda c: -c["index"])]
    if details.get("winner") and not any(m["config"] == details["winner"] for m in matches):
        matches.insert(0, {"config": details["winner"], "similarity": round(details["index"] * best, 4),
                           "index": details["index"], "query": details["query"], "threads": threads[inputs.base]})
    return PhaseResult(phase.name, time_s, mode, threads, preds, matches)
