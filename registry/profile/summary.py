"""The headline figures of a profile: bandwidth per memory level, latency per level, FP peak,
thread scaling and the MPI kernels' latency and bandwidth (printed by `nodereg profile` as tables, or as JSON with `--json`).

Figures come from the configurations measured at each level's point (see sweep.level_points; the
compute figures of gemm, which runs at several, from its memory point);
where two placements measured the same thread count, the better one is reported. Mappings keyed
by thread count use the count as a string (JSON object keys).
"""

from collections import defaultdict
from collections.abc import Sequence

from registry.profile.runner import Measurement

LEVEL_ORDER = ("L1", "L2", "L3", "L4", "memory")
COMPUTE = {"peak_fma": "fp64_peak_gflops", "scalar_fp64": "fp64_scalar_gflops", "int_ops": "int_giops",
           "int_branch": "int_branch_gbps",   # int_branch: giga bytes hashed per second
           "fp_chain": "fp64_chain_gflops",
           "gemm": "fp64_gemm_gflops"}       # gemm: at its memory point (C beyond the caches)


def _best(values: dict, key, value: float | None) -> None:
    if value is not None and (key not in values or value > values[key]):
        values[key] = value


def _by_threads(d: dict[int, float]) -> dict[str, float]:
    return {str(t): round(d[t], 3) for t in sorted(d)}


def _levels(d: dict) -> dict:
    return {lvl: d[lvl] for lvl in sorted(d, key=lambda x: LEVEL_ORDER.index(x) if x in LEVEL_ORDER else 99)}


def mpi_rows(measurements: Sequence[Measurement]) -> list[dict]:
    """Per MPI kernel, rank count and placement: the time per operation at the smallest and the
    largest message, and the best bandwidth over the message sizes (ping-pong, exchange)."""
    groups: dict[tuple, list[Measurement]] = defaultdict(list)
    for m in measurements:
        if m.config.ub.family == "mpi" and m.config.ub.name != "jacobi":
            groups[(m.config.ub.name, m.config.threads, m.config.placement)].append(m)
    rows = []
    for (kernel, ranks, placement), ms in groups.items():
        ms.sort(key=lambda m: m.config.msg_bytes)
        bandwidths = [m.bandwidth_gbs for m in ms if m.bandwidth_gbs is not None]
        rows.append({"kernel": kernel, "ranks": ranks, "placement": placement,
                     "smallest_bytes": ms[0].config.msg_bytes, "smallest_us": round(ms[0].value, 3),
                     "largest_bytes": ms[-1].config.msg_bytes, "largest_us": round(ms[-1].value, 3),
                     "peak_gbs": round(max(bandwidths), 3) if bandwidths else None})
    return rows


def jacobi_rows(measurements: Sequence[Measurement]) -> list[dict]:
    """The Jacobi data generator, per rank count and operations per point: its configurations, the
    range of the halo exchange's and of the sweep's microseconds per step, and the median share of
    the step in the exchange (Branikas kept 0.1 .. 0.8 of it)."""
    groups: dict[tuple, list[Measurement]] = defaultdict(list)
    for m in measurements:
        if m.comm_times and m.comp_times:
            groups[(m.config.threads, m.config.ops)].append(m)
    rows = []
    for (ranks, ops), ms in sorted(groups.items()):
        comm = [m.value for m in ms]
        comp = [m.per_step_us(m.comp_times) for m in ms]
        shares = sorted(c / (c + p) for c, p in zip(comm, comp))
        rows.append({"ranks": ranks, "ops": ops, "configs": len(ms), "exchange_us_min": round(min(comm), 3),
                     "exchange_us_max": round(max(comm), 3), "sweep_us_min": round(min(comp), 3),
                     "sweep_us_max": round(max(comp), 3), "exchange_share": round(shares[len(shares) // 2], 3)})
    return rows


def summarize(measurements: Sequence[Measurement]) -> dict:
    """Summary figures of a list of measurements (from one profile)."""
    bandwidth: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    compute: dict[str, dict[int, float]] = defaultdict(dict)
    latency: dict[str, dict[int, float]] = defaultdict(dict)
    for m in measurements:
        c = m.config
        if c.ub.family == "bandwidth" and c.level:
            _best(bandwidth[c.ub.name][c.level], c.threads, m.bandwidth_gbs)
        elif c.ub.family == "compute" and c.level in (None, "memory"):
            _best(compute[c.ub.name], c.threads, m.gflops)
        elif (c.ub.family == "latency" and c.level and m.latency_ns is not None
              and m.latency_ns < latency[c.level].get(c.threads, float("inf"))):
            latency[c.level][c.threads] = m.latency_ns     # lower is better

    def single_thread(kernel: str, level: str) -> float | None:
        per = bandwidth.get(kernel, {}).get(level, {})
        return round(per[min(per)], 3) if per else None

    lat = {lvl: round(per[min(per)], 3) for lvl, per in latency.items()}
    return {
        "memory_triad_gbs": _by_threads(bandwidth.get("triad", {}).get("memory", {})),
        "fp64_peak_gflops": _by_threads(compute.get("peak_fma", {})),
        "l1_load_gbs": single_thread("load", "L1"),
        "l2_load_gbs": single_thread("load", "L2"),
        "l3_load_gbs": single_thread("load", "L3"),
        "memory_load_gbs": single_thread("load", "memory"),
        "latency_ns": _levels(lat),
        "bandwidth_gbs": {k: _levels({lvl: _by_threads(v) for lvl, v in per.items()})
                          for k, per in sorted(bandwidth.items())},
        "compute": {COMPUTE[k]: _by_threads(v) for k, v in sorted(compute.items())},
        "mpi": mpi_rows(measurements),
        "jacobi": jacobi_rows(measurements),
    }
