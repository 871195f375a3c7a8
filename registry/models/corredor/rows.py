"""Building the corredor model's inputs from registry rows (ub_streams, phase_streams, phases).

The rows are mappings with the schema's column names (e.g. ``conn.execute(...).mappings()``), so
the caller chooses the query (latest profile, thread count per node) and this module only turns
rows into ``Stream``/``Profile``/``Phase`` objects, keeping the thesis's positional order of
streams (``stream_index``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from registry.models.corredor.index import Phase, Profile, Stream


def streams_by_owner(rows: Iterable[Mapping], owner: str) -> dict[object, tuple[Stream, ...]]:
    """Group stream rows by the `owner` column (config_key, phase_id, ...), ordered by stream_index."""
    grouped: dict[object, list[tuple[int, Stream]]] = {}
    for r in rows:
        stream = Stream(int(r["size_elems"]), int(r["stride_bytes"]), int(r["elem_bytes"]), r["access"],
                        r["dtype"], r["pattern"])
        grouped.setdefault(r[owner], []).append((int(r["stream_index"]), stream))
    return {k: tuple(s for _, s in sorted(v, key=lambda t: t[0])) for k, v in grouped.items()}


def profiles_from_rows(stream_rows: Iterable[Mapping], base_tpi_us: Mapping[str, float],
                       ub_names: Mapping[str, str] | None = None) -> list[Profile]:
    """One Profile per config_key that has streams and a time per iteration on the base node."""
    streams = streams_by_owner(stream_rows, "config_key")
    names = ub_names or {}
    return [Profile(key, s, float(base_tpi_us[key]), names.get(key, "")) for key, s in sorted(streams.items())
            if base_tpi_us.get(key) is not None]


def phases_from_rows(phase_rows: Iterable[Mapping], stream_rows: Iterable[Mapping]) -> list[Phase]:
    """Phases that carry stream descriptors and a time per iteration.

    The thesis's tpi is the phase time over the slowest thread's iterations; a row may instead give
    ``tpi_us`` directly. Phases without streams or without either are left out (their time stays in
    the remainder the model projects by its fallback).
    """
    streams = streams_by_owner(stream_rows, "phase_id")
    out = []
    for r in sorted(phase_rows, key=lambda r: r["idx"]):
        iterations = r.get("iterations")
        tpi = r.get("tpi_us")
        if tpi is None and iterations:
            tpi = r["time_s"] / iterations * 1e6
        if r["phase_id"] not in streams or tpi is None or r.get("time_s") is None:
            continue
        out.append(Phase(r.get("name") or f"phase {r['idx']}", streams[r["phase_id"]], float(tpi), float(r["time_s"]),
                         float(iterations) if iterations else None, r.get("weight")))
    return out
