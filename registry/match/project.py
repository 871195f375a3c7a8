"""`nodereg match`: project an app traced on a base node onto every registered node, and rank them.

For each phase: pick the references (configs) at the thread counts the phase would use on each
node (registry.match.references), let the projection model place the phase among them on the base
node and predict its time ratio on every node; then add the phases up. Time the phases do not
cover (start-up, code between OpenMP regions) is projected with the time-weighted geometric mean
of the phases' ratios, and the share covered is reported as coverage.

A phase that hardly uses the CPU (sleeping, waiting for I/O) keeps its time on every node: its
time is not set by the processor.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from registry.db.statement import execute
from registry.errors import UserError
from registry.io.tracefile import WEIGHT_SLACK
from registry.match import comm as comm_mod
from registry.match import references as refs_mod
from registry.match import track
from registry.match.calibration import load_calibrations, load_dispersion, node_groups
from registry.models import intervals
from registry.models.base import NEEDS_SIGNATURES, NEEDS_STREAMS, NodePrediction, Query
from registry.models.plugins import create, model_class
from registry.models.predictions import NodePredictions, predict_many
from registry.trace import phases as trace_phases
from registry.trace.lookup import FoundTrace
from registry.values import command_line, plural
from registry.workload import same_input

if TYPE_CHECKING:
    import sqlalchemy as sa

IDLE_CPU_UTIL = 0.1          # CPU seconds per second below which a phase is waiting, not computing
METHOD_PREFERENCE = ("marker", "omp", "auto", "import", "whole")  # among sets covering as much of the run
DECLARED = ("marker", "omp")  # what the application itself says its phases are
DECLARED_MIN_COVER = 0.5      # ... used, gaps filled by change points, when it covers most of the run
PROJECTION = "similarity"    # the default projection, and the one a scaling model is combined with


def choose_phases(phases: list, wall_s: float, usable=None) -> list:
    """One consistent set of phases: a trace holds several (change points, markers, OpenMP regions)
    that overlap. Nested markers are first reduced to disjoint leaves (registry.trace.phases.leaves),
    so no time counts twice. What the author declared (markers, then OpenMP regions) is used when it
    covers at least DECLARED_MIN_COVER of the run, its gaps filled with the change-point segments'
    parts that lie there; otherwise the set covering the most of the run wins, near-ties (within 2%
    of the run) going to markers, then OpenMP regions, then change points. `usable`: a test a phase
    must pass to be considered (a stream model's inputs). A kind whose weights sum past the whole
    run (OpenMP regions of several processes at once) is not a candidate."""
    by_method: dict[str, list] = {}
    for p in trace_phases.disjoint_markers(phases, wall_s):
        if p.weight and p.weight > 0 and (usable is None or usable(p)):
            by_method.setdefault(p.method, []).append(p)
    if not by_method:
        return []
    cover = {m: sum(p.weight for p in ps) for m, ps in by_method.items()}
    past = {m: total for m, total in cover.items() if total > 1 + WEIGHT_SLACK}
    if past and len(past) == len(cover):
        m, total = next(iter(past.items()))
        raise UserError(f"the {m!r} phases of the trace cover {total:.0%} of the run: phases of one kind must "
                        "not overlap (re-trace the app, or fix the trace file's weights)")
    cover = {m: total for m, total in cover.items() if m not in past}   # overlapping sets count time twice
    declared = next((m for m in DECLARED if cover.get(m, 0.0) >= DECLARED_MIN_COVER), None)
    if declared is not None:
        return sorted(by_method[declared] + trace_phases.fill_gaps(by_method[declared], by_method.get("auto", []),
                                                                   wall_s, parallel_use), key=lambda p: p.start_s)
    best = max(cover.values())
    rank = {m: (METHOD_PREFERENCE.index(m) if m in METHOD_PREFERENCE else len(METHOD_PREFERENCE)) for m in cover}
    method = min((m for m in cover if cover[m] >= best - 0.02), key=lambda m: rank[m])
    return by_method[method]


def traced_threads(trace, base_cpus: int) -> int:
    """The thread count the app ran with on its base node: the one it was told, else all the CPUs;
    an MPI app's ranks x OpenMP threads per rank (registry.trace.mpi)."""
    mpi = trace.meta.get("mpi") if isinstance(trace.meta, dict) else None
    if mpi and mpi.get("ranks"):
        return int(mpi["ranks"]) * comm_mod.threads_per_rank(trace.meta)
    return int(trace.threads or base_cpus)


def base_time(runs: list[tuple], traced_s: float, threads: int) -> float:
    """The app's time on its base node: the median of the traced run and the measured runs there at
    the traced thread count (or of unknown count): one run, traced or not, is one sample of a noisy
    quantity; runs at other thread counts measure something else. `runs`: (uid, threads, time_s)."""
    return float(np.median([traced_s, *(t for _, n, t in runs if n is None or n == threads)]))


@dataclass
class PhaseResult:
    name: str
    time_s: float
    mode: str                     # all | fixed | idle
    threads: dict[str, int]       # node -> threads the phase is projected at
    predictions: Mapping[str, NodePrediction]   # NodePredictions (arrays) from projection, a dict from streams
    matches: list[dict] = field(default_factory=list)   # nearest references with their similarity
    warnings: list[str] = field(default_factory=list)
    serial_share: float = 0.0     # share of its time projected with 1-thread configs (references.thread_parts)
    projected_by: str | None = None   # the model that projected it when not the one asked for (a fallback)
    filled: dict[str, list[str]] = field(default_factory=dict)   # node -> its nearest references filled in there


@dataclass(slots=True)   # (10,000 of them per match: made a third faster)
class NodeResult:
    node: str
    predicted_s: float
    low_s: float
    high_s: float
    rank: int = 0
    speedup: float = math.nan
    threads: int | None = None
    cost: float | None = None        # per run: price per hour x predicted time (registry.match.cost)
    cost_low: float | None = None
    cost_high: float | None = None
    currency: str | None = None
    steps: list[dict] = field(default_factory=list)   # how the interval was made, in order (`widen`)
    interval_group: str | None = None   # its calibration's group (registry.match.calibration.node_groups)
    interval_scale: float = 1.0         # the calibration's half-width multiplier applied to it
    filled_in: list[str] = field(default_factory=list)   # the phases' nearest references it did not measure
    # (registry.match.impute: filled in from its other figures)

    def widen(self, step: str, low: float, high: float) -> None:
        """Set the interval to (low, high) and record the step that made it: the headline interval is
        the phases' summed bounds taken through these steps, and `match` says them (#32)."""
        moved = not math.isclose(low, self.low_s, rel_tol=1e-3) or not math.isclose(high, self.high_s, rel_tol=1e-3)
        if not self.steps or moved:
            self.steps.append({"step": step, "low_s": low, "high_s": high})
        self.low_s, self.high_s = low, high


@dataclass
class MatchResult:
    app: str
    base: str
    model: str
    model_version: str
    base_time_s: float
    coverage: float
    nodes: list[NodeResult]
    phases: list[PhaseResult]
    warnings: list[str]
    objective: str = "time"          # what `rank` orders by: time | cost
    footprint_bytes: int | None = None   # the app's peak memory, where nodes were checked against it
    excluded: list[dict] = field(default_factory=list)   # nodes left out by deadline, budget or price, and why
    calibration: dict | None = None  # how the intervals were calibrated (registry.models.intervals.Calibration)

    def leave_out(self, why) -> None:
        """Move the nodes for which `why(node_result)` gives an entry ({"reason": ..., ...}) into
        `excluded`, and rank the rest again: a node that cannot run or hold the app gets no time."""
        kept = []
        for n in self.nodes:
            entry = why(n)
            if entry:
                self.excluded.append({"node": n.node, "predicted_s": None, "cost": None, **entry})
            else:
                kept.append(n)
        for i, n in enumerate(kept, 1):
            n.rank = i
        self.nodes = kept

    def to_dict(self, explain: bool = True) -> dict:
        out = {"app": self.app, "base": self.base, "model": self.model, "model_version": self.model_version,
               "base_time_s": self.base_time_s, "coverage": self.coverage, "warnings": self.warnings,
               "objective": self.objective, "footprint_bytes": self.footprint_bytes,
               "predictions": [{"node": n.node, "predicted_s": n.predicted_s, "low_s": n.low_s,
                                "high_s": n.high_s, "rank": n.rank, "speedup": n.speedup, "threads": n.threads,
                                "cost": n.cost, "cost_low": n.cost_low, "cost_high": n.cost_high,
                                "currency": n.currency, "interval_steps": n.steps,
                                "interval_group": n.interval_group, "interval_scale": n.interval_scale,
                                "filled_in": n.filled_in}
                               for n in self.nodes],
               "excluded": self.excluded, "calibration": self.calibration}
        out["phases"] = [{"name": p.name, "time_s": p.time_s, "mode": p.mode, "serial_share": p.serial_share,
                          "projected_by": p.projected_by or self.model, "matches": p.matches,
                          **({"per_node": {n: {"predicted_s": pr.predicted_s, "low_s": pr.low_s,
                                               "high_s": pr.high_s, "threads": p.threads.get(n)}
                                           for n, pr in p.predictions.items()}} if explain else {})}
                         for p in self.phases]
        return out


def cpu_util(signature: dict) -> float | None:
    value = signature.get("proc", {}).get("cpu_util")
    return float(value) if value is not None and math.isfinite(value) else None


def parallel_use(signature: dict) -> float | None:
    """The CPUs a phase would keep busy on a host of its own: its CPU use plus the time its threads
    waited on a run queue (the `sched.demand` of registry.measure.signature), where the trace has
    it; else its CPU use. On a shared host the CPU use alone reads low: `openssl speed -multi 2`
    kept 0.27 of this 2-vCPU machine's CPUs busy while six other test suites ran, and Amdahl's split
    (registry.match.references.thread_parts) took it for a serial program, predicting a 192-vCPU
    type no faster than one core (docs/sparecores-trace.md). On an idle host the two agree. An
    OpenMP region timed by the shim says how many threads did its work (`omp.busy_threads`), which
    /proc cannot: threads spinning at the region's end read as busy there; that count is used."""
    busy = signature.get("omp", {}).get("busy_threads")
    if busy is not None and math.isfinite(busy):
        return float(busy)
    util = cpu_util(signature)
    demand = signature.get("sched", {}).get("demand")
    if util is None or demand is None or not math.isfinite(demand):
        return util
    return max(util, float(demand))


def _features(signature: dict) -> dict[str, float]:
    return {f"{src}.{m}": v for src, metrics in signature.items() for m, v in metrics.items()
            if v is not None and math.isfinite(v)}


def _similarity(distance: float) -> float:
    """A distance as a similarity in (0, 1]: 1 for an identical signature."""
    return 1.0 / (1.0 + distance) if math.isfinite(distance) else 0.0


def _fitted(profiles, model_name: str, options: dict, mode: str, k: int, cache: dict, side: str = "below"):
    """Thread counts, reference set, the model fitted on it and the figures filled in for it, for a
    thread mode and the side of the wanted count the measured one is taken from
    (registry.match.references.threads_on): the phases of one trace that share both share all four
    (through `cache`), since fitting depends on nothing else."""
    if (mode, k, side) not in cache:
        threads = refs_mod.threads_on(profiles, mode, k, side)
        by_name = dict(zip(profiles.node_names.tolist(), threads.tolist()))
        refset, base_threads, imputed = refs_mod.reference_set(profiles, threads)
        refset.reference_weights = _vote_prior(profiles, refset, imputed, mode, k)
        model = create(model_name, kind="projection", options=options)
        if NEEDS_SIGNATURES not in model.needs:
            raise UserError(f"model {model_name!r} does not project signatures; `nodereg match` needs one that "
                            "does (e.g. similarity, gbt)")
        cache[(mode, k, side)] = (by_name, base_threads, model.fit(refset), imputed)
    return cache[(mode, k, side)]


def _vote_prior(profiles, refset, imputed, mode: str, k: int) -> dict[str, float] | None:
    """The references' vote prior for a phase's serial part, from their track record on the apps
    measured on one thread on many nodes (registry.match.track: why not the parallel part); None
    without such apps. Filled-in figures (registry.match.impute) are no record: only measured ones count."""
    if profiles.apps is None or (mode, k) != ("fixed", 1):
        return None
    ratio = refset.ratio_matrix
    log_ratio = np.where(imputed.cells.T, np.nan, ratio.values) if imputed.cells.any() else ratio.values
    return profiles.apps.weights(list(ratio.rows), list(ratio.columns), log_ratio)


def _project_part(query: Query, profiles, model_name: str, options: dict, nodes: list[str], cache: dict,
                  mode: str, k: int):
    """One part of a phase on every node, at the thread count it would use there: a count between two
    measured ones is interpolated between their projections (geometrically, in log threads), one
    beyond the largest measured is projected there, with a wider interval and a warning. Arrays
    over `nodes` (registry.models.predictions): a site registry has 10,000 of them.
    Returns (predictions, threads per node, base threads of the references, the model, warnings)."""
    lo_of, base_threads, model, imputed = _fitted(profiles, model_name, options, mode, k, cache, "below")
    part = predict_many(model, query, nodes)
    lo, want, hi, base_want = _counts(profiles, nodes, mode, k, cache)
    between = np.flatnonzero((0 < lo) & (lo < want) & (want < hi))
    if len(between):
        upper_model = _fitted(profiles, model_name, options, mode, k, cache, "above")[2]
        upper = predict_many(upper_model, query, [nodes[i] for i in between.tolist()])
        part = _blend(part, upper, between, want, lo, hi)
    beyond = np.flatnonzero((0 < hi) & (hi < want))
    if len(beyond):   # the lower bound widened by the ratio of the counts
        low = part.low.copy()
        low[beyond] = low[beyond] * hi[beyond] / want[beyond]
        part = NodePredictions(part.nodes, part.predicted, low, part.high, part.explanation, part.warnings,
                               part.flags)
    part, bounded = _within_cpu_ratio(part, profiles, nodes, query.base_time_s, want, base_want, cache)
    warnings = imputed.warning(query.name, nodes)
    if bounded:
        warnings.append(f"phase {query.name}: on {plural(bounded, 'node')} of the base node's own machine (CPU "
                        "subsets of it) the configs' ratio went beyond the ratio of CPUs the phase runs on: "
                        "bounded by it")
    if len(beyond):
        shown = ", ".join(f"{nodes[i]} ({int(want[i])} threads, measured up to {hi[i]})" for i in beyond[:3].tolist())
        more = f" and {len(beyond) - 3} more" if len(beyond) > 3 else ""
        warnings.append(f"phase {query.name}: more threads than the profiles measured on {shown}{more}: projected "
                        "at the largest count measured, an extrapolation (interval widened by the ratio)")
    # the count it would run at where interpolated or extrapolated to, else the measured one
    said = dict(zip([nodes[i] for i in np.concatenate([between, beyond]).tolist()],
                    want[np.concatenate([between, beyond])].astype(int).tolist()))
    threads = {**lo_of, **said}     # (every node asked for is one of the registry's: lo_of has it)
    return part, threads, base_threads, model, warnings


def _time_sliced(part: NodePredictions, threads: dict, warnings: list[str], query: Query, profiles, model_name: str,
                 options: dict, nodes: list[str], cache: dict, k: int, busy: int
                 ) -> tuple[NodePredictions, dict, list[str]]:
    """A fixed team of k threads (the count the user told the app when tracing it, OMP_NUM_THREADS) on a
    node of c < k CPUs does not shrink to c threads: its k threads take turns, so the node does the work
    the `busy` threads did on the base (k, or the base's CPUs if fewer), one thread's time there (the part
    projected at one thread) times busy / c. (A count `project` is asked to project at, `fixed_threads`,
    is a team that adapts: capped by each node's CPUs.) Projected at c
    threads, as a team that adapts would run, xz -T2 and zstd -T2 on one CPU came out 21-27% too fast in
    every round of the validation suite (docs/validation.md, stop 29): at c threads the configs split the
    work, which the team does not. Switching between the threads costs more on top (xz -T2 on one CPU took
    5-27% longer than xz -T1 on this guest), which no profile measures: said in a warning. Returns the part,
    the threads per node and the warnings."""
    cpus = profiles.cpus[_codes(profiles, nodes, cache)]
    fewer = np.flatnonzero(cpus < k)
    if not len(fewer):
        return part, threads, warnings
    one, _, _, _, one_limits = _project_part(query, profiles, model_name, options, nodes, cache, "fixed", 1)
    turns = busy / cpus[fewer]
    cols = [a.copy() for a in (part.predicted, part.low, part.high)]
    for col, single in zip(cols, (one.predicted, one.low, one.high)):
        col[fewer] = single[fewer] * turns
    # those nodes' explanations, warnings and flags are the one-thread projection's
    mine = np.zeros(len(nodes), dtype=bool)
    mine[fewer] = True
    no = np.zeros(len(nodes), dtype=bool)
    flags = {f: np.where(mine, one.flags.get(f, no), part.flags.get(f, no)) for f in {*part.flags, *one.flags}}
    said_of = {i: w for i, w in part.warnings.items() if not mine[i]} | \
        {i: w for i, w in one.warnings.items() if mine[i]}
    shown = ", ".join(f"{nodes[i]} ({plural(int(cpus[i]), 'CPU')})" for i in fewer[:3].tolist())
    more = f" and {len(fewer) - 3} more" if len(fewer) > 3 else ""
    said = (f"phase {query.name}: a fixed team of {k} threads on {shown}{more}: its threads take turns there, "
            f"projected as one thread's time x {busy} / CPUs (the cost of switching between them is not in the profiles)")
    return (NodePredictions(part.nodes, *cols, lambda i: (one if mine[i] else part).explanation(i), said_of, flags),
            {**threads, **{nodes[i]: k for i in fewer.tolist()}},
            warnings + [w for w in one_limits if w not in warnings] + [said])


def _within_cpu_ratio(part: NodePredictions, profiles, nodes: list[str], time_s: float, want: np.ndarray,
                      base_want: float, cache: dict) -> tuple[NodePredictions, int]:
    """A part on a node of the base node's own machine (a CPU subset of it, `profile --cpus`: the
    same cores, caches and memory) takes between 1 and base_want / want times its base time: the
    same work on fewer CPUs is at most that much slower (perfect scaling) and at least not faster,
    and on more CPUs the reverse. The configs' ratios can say more: in this guest's profiles two
    threads of the memory load read 2.3-3.2x one thread's bandwidth where programs gained 1.7-2.0x
    from the second CPU, and every prediction for the one-CPU node was too slow (docs/validation.md).
    Prediction and interval are bounded there; returns the part and how many nodes it bounded."""
    hardware = profiles.hardware
    if hardware is None or hardware[profiles.base_code] < 0 or not len(nodes):
        return part, 0
    same = np.flatnonzero(hardware[_codes(profiles, nodes, cache)] == hardware[profiles.base_code])
    if not len(same):
        return part, 0
    ratio = base_want / np.maximum(want[same], 1)
    floor, ceiling = time_s * np.minimum(1.0, ratio), time_s * np.maximum(1.0, ratio)
    moved = (part.predicted[same] < floor * (1 - 1e-9)) | (part.predicted[same] > ceiling * (1 + 1e-9))
    if not moved.any():
        return part, 0
    cols = [a.copy() for a in (part.predicted, part.low, part.high)]
    for col in cols:
        col[same] = np.clip(col[same], floor, ceiling)
    return NodePredictions(part.nodes, *cols, part.explanation, part.warnings, part.flags), int(moved.sum())


def _codes(profiles, nodes: list[str], cache: dict) -> np.ndarray:
    """The node codes of `nodes`, looked up once for the phases of a trace, which all ask for the
    same nodes (10,000 names)."""
    if "codes" not in cache or cache["codes"][0] is not nodes:
        cache["codes"] = (nodes, np.array([profiles.code[n] for n in nodes], dtype=np.int64))
    return cache["codes"][1]


def _counts(profiles, nodes: list[str], mode: str, k: int, cache: dict) -> tuple:
    """Per node of `nodes`: the measured thread counts below and above the wanted one, and the
    wanted one (registry.match.references.threads_on); and the base node's wanted one. Computed
    once per thread mode for the phases of a trace."""
    key = ("counts", mode, k)
    if key not in cache or cache[key][0] is not nodes:
        at, want = _codes(profiles, nodes, cache), refs_mod.wanted_threads(profiles, mode, k)
        cache[key] = (nodes, refs_mod.threads_on(profiles, mode, k, "below")[at], want[at],
                      refs_mod.threads_on(profiles, mode, k, "above")[at], want[profiles.base_code])
    return cache[key][1:]


def _blend(a: NodePredictions, b: NodePredictions, between: np.ndarray, want: np.ndarray, lo: np.ndarray,
           hi: np.ndarray) -> NodePredictions:
    """Predictions at two measured thread counts (`a` below on every node, `b` above on the nodes
    `between`), interpolated geometrically in log threads at the wanted count; explanations and
    warnings are `a`'s. Node by node with `math`, as few nodes lie between two measured counts and
    the figures stay the same to the last bit as computed one prediction at a time."""
    def mix(x: float, y: float, w: float) -> float:
        return x ** (1 - w) * y ** w if x > 0 and y > 0 else x
    out = [a.predicted.copy(), a.low.copy(), a.high.copy()]
    for j, i in enumerate(between.tolist()):
        w = math.log(want[i] / lo[i]) / math.log(hi[i] / lo[i])
        for col, ours, theirs in zip(out, (a.predicted, a.low, a.high), (b.predicted, b.low, b.high)):
            col[i] = mix(float(ours[i]), float(theirs[j]), w)
    return NodePredictions(a.nodes, *out, a.explanation, a.warnings, a.flags)


def _project_phase(phase, time_s: float, trace, profiles, model_name: str, options: dict, nodes: list[str],
                   cache: dict, fixed_threads: int | None) -> PhaseResult:
    """A phase's time on every node: its parallel and serial parts (registry.match.references.thread_parts)
    each projected among the configs at their thread counts, and added up."""
    util = cpu_util(phase.signature)
    if util is not None and util < IDLE_CPU_UTIL:
        return PhaseResult(phase.name, time_s, "idle", {}, NodePredictions.constant(nodes, time_s))
    parts = refs_mod.thread_parts(parallel_use(phase.signature), fixed_threads or trace.threads,
                                  profiles.n_cpus[profiles.base])
    features = _features(phase.signature)
    preds: NodePredictions | None = None
    matches, warnings, threads, filled = [], [], {}, {}
    for mode, k, share in parts:
        query = Query(phase.name, features, time_s * share)
        part, part_threads, base_threads, model, limits = _project_part(query, profiles, model_name, options, nodes,
                                                                        cache, mode, k)
        if mode == "fixed" and k > 1 and fixed_threads is None and trace.threads:
            part, part_threads, limits = _time_sliced(part, part_threads, limits, query, profiles, model_name, options,
                                                      nodes, cache, k, min(k, profiles.n_cpus[profiles.base]))
        threads = threads or part_threads          # the first part's: the parallel one where there is one
        warnings = warnings or _tie_warnings(phase.name, part)    # one per phase: the first part's
        warnings += [w for w in limits if w not in warnings]
        preds = _plus(preds, part)
        if hasattr(model, "nearest"):
            nearest = model.nearest(query, 5)
            prior = getattr(model, "vote_prior", None)   # registry.match.track
            prior = {} if prior is None else dict(zip(model.references, prior.tolist()))
            matches += [{"config": key, "similarity": round(_similarity(d), 4), "threads": int(base_threads[key]),
                         "share": round(share, 4), **({"vote_prior": round(prior[key], 4)} if key in prior else {})}
                        for key, d in nearest]
            for node, names in _fitted(profiles, model_name, options, mode, k, cache)[3].on(
                    nodes, [key for key, _ in nearest]).items():
                filled[node] = sorted({*filled.get(node, []), *names})
    if util is None and not (fixed_threads or trace.threads):
        warnings.append(f"phase {phase.name}: its CPU use is unknown (no /proc samples in it): taken as running "
                        "on all of each node's CPUs, which overstates the gain of a partly serial phase")
    serial = next((share for mode, k, share in parts if (mode, k) == ("fixed", 1)), 0.0)
    return PhaseResult(phase.name, time_s, parts[0][0], threads, preds, matches, warnings, serial_share=serial,
                       filled=filled)


def _project_streamed(phase, time_s: float, inputs: "Inputs", model: str, options: dict | None, cache: dict,
                      fixed_threads: int | None) -> PhaseResult:
    """A phase by a stream model (corredor); one that no config represents (the thesis would write a
    new microbenchmark for it) by the default projection from its signature, said in a warning. The
    thesis's own rule, the unprojected rest, keeps such a phase's base time when nothing else is
    projected: on a node with half the CPUs that is a 2x error, which the signature avoids."""
    from registry.match import streams as stream_match

    result = stream_match.project_phase(phase, time_s, inputs, cache.setdefault(model, {}), model, options)
    if not isinstance(result, stream_match.Unmatched):
        return result
    try:
        fallback = _project_phase(phase, time_s, inputs.found.trace, inputs.profiles, PROJECTION, {}, inputs.targets,
                                  cache.setdefault(PROJECTION, {}), fixed_threads)
    except UserError as exc:  # e.g. profiles without signatures: the thesis's rule after all
        kept = stream_match.project_phase(phase, time_s, inputs, cache.setdefault("remainder", {}), model,
                                          {**(options or {}), "unmatched": "remainder"})
        kept.warnings.insert(0, f"phase {phase.name}: {result.reason()}, and the {PROJECTION} model cannot project "
                                f"it either ({exc}): it joins the unprojected rest")
        return kept
    fallback.projected_by = PROJECTION
    fallback.warnings.insert(0, f"phase {phase.name}: {result.reason()}; projected by the {PROJECTION} model from "
                                f"its signature (--option unmatched=remainder keeps the thesis's rule)")
    return fallback


def _plus(a: NodePredictions | None, b: NodePredictions) -> NodePredictions:
    """Two parts of a phase on every node, added up (their intervals too: the parts' errors are not
    independent, both coming from one signature); explanations merged, warnings joined."""
    if a is None:
        return b
    b = b.take(a.nodes)
    warnings = {i: a.warnings.get(i, []) + b.warnings.get(i, []) for i in sorted({*a.warnings, *b.warnings})}
    return NodePredictions(a.nodes, a.predicted + b.predicted, a.low + b.low, a.high + b.high,
                           lambda i: {**b.explanation(i), **a.explanation(i)}, warnings)


def _tie_warnings(phase: str, preds: Mapping[str, NodePrediction]) -> list[str]:
    """A warning for a phase whose about equally near references disagree on how it scales (on any node)."""
    preds = NodePredictions.of(preds)
    split = np.flatnonzero(preds.flags["disagree"]) if "disagree" in preds.flags else \
        np.array([i for i in range(len(preds)) if "disagree" in preds.explanation(i)], dtype=np.int64)
    if not len(split):
        return []
    first = preds.explanation(int(split[0]))["disagree"]
    lo, hi = first["ratios"]
    return [f"phase {phase}: its nearest references ({', '.join(first['references'])}) are about equally similar but "
            f"scale differently on {plural(len(split), 'node')} (on {preds.nodes[split[0]]}: x{lo:.2f} to x{hi:.2f} the base "
            "time); the signature cannot tell them apart, so the intervals were widened to cover them all"]


@dataclass
class Inputs:
    """Everything a projection reads from the registry. `nodereg match` reads it on a read-only
    connection and projects with no connection open: on DuckDB, other processes can write to the
    registry while the projection computes."""

    found: FoundTrace
    base: str
    targets: list[str]
    profiles: refs_mod.Profiles
    phases: list
    runs: list[tuple]            # the app's measured runs of the traced input on the base node: (uid, threads, time_s)
    base_time_s: float
    stream_refs: object = None   # registry.match.streams.StreamRefs, for a model that needs streams
    suite: str = "nodereg"       # the suite of configs the references are drawn from
    exclude: tuple[str, ...] = ()  # config key prefixes left out of the references
    calibration: intervals.Calibrations | None = None  # of the model's intervals, per group of nodes
                                                        # (registry.match.calibration)
    # node -> its profiles' RMS cv (calibration.py); or a function that gives it when the projection
    # needs it (`nodereg match` reads it in a thread while it projects)
    dispersion: dict[str, float] | Callable[[], dict[str, float]] = field(default_factory=dict)
    comm: object = None          # registry.match.comm.CommInputs: an MPI trace's communication part


_BASE_RUNS = """
SELECT r.uid, r.threads, r.time_s, r.input FROM runs r JOIN apps a ON a.app_id = r.app_id
JOIN nodes n ON n.node_id = r.node_id
WHERE a.name = :a AND n.name = :n ORDER BY r.run_id"""


def load_inputs(conn: sa.Connection, found: FoundTrace, *, base: str | None = None,
                nodes: list[str] | None = None, model: str = PROJECTION, suite: str | None = None,
                exclude: tuple[str, ...] = (), comm: dict | None = None, dispersion: bool = True) -> Inputs:
    """What projecting the traced app onto every node (or `nodes`) with `model` reads, checked. A
    model that needs streams (corredor) projects the phases that carry them (registry.match.streams).
    `suite`: the configs compared (default: registry.match.references.choose_suite); `exclude`:
    config key prefixes that are not references; `comm`: registry.match.comm.load's options (model,
    ranks) for an MPI trace's communication part; `dispersion`: False where the caller sets
    `Inputs.dispersion` itself."""
    trace = found.trace
    base = refs_mod.base_node(conn, trace.name, trace.node, base)
    if trace.status != "ok":
        raise UserError(f"the trace of {trace.name!r} ended with status {trace.status!r}: trace a successful run")
    suite = suite or refs_mod.choose_suite(conn, base, nodes)
    profiles = refs_mod.load_profiles(conn, base, nodes, suite, tuple(exclude))
    profiles.apps = track.load(conn, profiles.node_names.tolist(), trace.name, tuple(exclude))
    targets = nodes or profiles.nodes()
    missing = sorted(set(targets) - set(profiles.nodes()))
    if missing:
        if len(missing) == 1:
            raise UserError(f"no profile for node {missing[0]!r}: profile it first "
                            f"({command_line('nodereg', 'profile', missing[0])} on that node) or leave it out")
        raise UserError(f"no profile for nodes {', '.join(map(repr, missing))}: profile them first or leave them out")
    streamed = NEEDS_STREAMS in model_class(model).needs
    if streamed:
        from registry.match import streams as stream_match

        phases = choose_phases(trace.phases, float(trace.wall_s), usable=stream_match.is_streamed)
        if not phases:
            raise stream_match.no_streams_error(trace.name)
    else:
        phases = choose_phases(trace.phases, float(trace.wall_s))
    if not phases:
        raise UserError(f"the trace of {trace.name!r} has no phases to project")
    runs = [(uid, n, t) for uid, n, t, workload in execute(conn, _BASE_RUNS, {"a": trace.name, "n": base})
            if same_input(workload, trace.meta.get("input"))]      # runs on another input measure another thing
    wall = base_time(runs, float(trace.wall_s), traced_threads(trace, profiles.n_cpus[base]))
    if not wall > 0:
        raise UserError(f"the trace of {trace.name!r} lasted {trace.wall_s:g} s and the runs on {base!r} do not "
                        "make up for it: a base time of 0 s projects to 0 s everywhere")
    return Inputs(found, base, targets, profiles, phases, runs, wall,
                  stream_match.load_refs(conn) if streamed else None, suite, tuple(exclude),
                  load_calibrations(conn, *model_identity(model), suite, node_groups(profiles, suite, targets)),
                  load_dispersion(conn, suite) if dispersion else {},
                  comm_mod.load(conn, trace, profiles.n_cpus[base], **(comm or {})))


def model_identity(model: str) -> tuple[str, str]:
    """(name, version) of the predictions `model` makes: a scaling model is combined with the
    projection (registry.match.scaled), so both name and version are the pair's, 'amdahl+similarity'."""
    cls = model_class(model)
    if cls.kind != "scaling":
        return model, str(cls.version)
    projection = model_class(PROJECTION)
    return f"{model}+{PROJECTION}", f"{cls.version}+{projection.version}"


def project(inputs: Inputs, *, model: str = PROJECTION, options: dict | None = None,
            fixed_threads: int | None = None) -> MatchResult:
    """Predicted time of the traced app on every target node, ranked; `options`: the model's (texts
    or values, registry.models.options). `fixed_threads`: project
    every phase's parallel part at that thread count (capped by each node's CPUs) instead of the
    count it would use there; registry.match.scaled then scales to each node's CPUs with the app's own curve."""
    trace, wall = inputs.found.trace, inputs.base_time_s
    # a phase's share of the run, applied to the base time
    cache: dict = {}
    if inputs.stream_refs is not None:
        results = [_project_streamed(p, p.weight * wall, inputs, model, options, cache, fixed_threads)
                   for p in inputs.phases]
    else:
        results = [comm_mod.project_phase(p, p.weight * wall, inputs.comm, inputs.base, inputs.targets,
                                          lambda q, t: _project_phase(q, t, trace, inputs.profiles, model, options or {},
                                                                      inputs.targets, cache, fixed_threads))
                   for p in inputs.phases]
    covered = sum(r.time_s for r in results)
    nodes_out, warnings = _add_up(results, inputs.targets, wall, max(0.0, wall - covered))
    if any(r.filled for r in results):
        for n in nodes_out:
            n.filled_in = sorted({name for r in results for name in r.filled.get(n.node, [])})
    threads = traced_threads(trace, inputs.profiles.n_cpus[inputs.base])
    warnings += _scaling_beyond_trace(nodes_out, threads)
    _widen(nodes_out, [float(trace.wall_s), *(t for _, n, t in inputs.runs if n is None or n == threads)],
           inputs.calibration, inputs.dispersion() if callable(inputs.dispersion) else inputs.dispersion, inputs.base)
    warnings = list(dict.fromkeys([w for r in results for w in r.warnings] + warnings +
                                  [w for r in results for w in NodePredictions.of(r.predictions).all_warnings()]))
    return MatchResult(trace.name, inputs.base, *model_identity(model), wall, covered / wall if wall else 1.0,
                       nodes_out, results, warnings,
                       calibration=inputs.calibration.to_dict() if inputs.calibration else None)


def _widen(nodes: list[NodeResult], base_samples: list[float], calibration: intervals.Calibrations | None,
           dispersion: dict[str, float], base: str) -> None:
    """Every node's interval with the base time's noise and the two profiles' dispersion added
    (registry.models.intervals: one rule), never narrower than the floor, then scaled by the
    model's calibration of each node's group. The base node's own row is its base time: no profile
    ratio widens it."""
    if not nodes:
        return
    noise = intervals.base_noise(base_samples)
    cv = np.array([np.nan if n.node == base else dispersion.get(n.node, 0.0) for n in nodes], dtype=float)
    spread = np.where(np.isnan(cv), 0.0, intervals.profile_noise(dispersion.get(base, 0.0), np.nan_to_num(cv)))
    floor = f"the +-{math.expm1(intervals.MIN_HALF_WIDTH):.0%} floor"
    noise_said = [f"the base time's noise (+-{math.expm1(noise):.0%})"] if noise else []

    @functools.cache
    def said(width: float) -> str:
        added = noise_said + ([f"the profiles' dispersion (+-{math.expm1(width):.0%})"] if width else [])
        return f"{' and '.join(added)}, root sum of squares, and {floor}" if added else floor

    predicted, low, high = interval_arrays(nodes)
    low, high = intervals.combine(predicted, low, high, noise, spread)
    widen_all(nodes, [said(w) for w in spread.tolist()], low, high)
    if calibration is not None:
        groups, scales = calibration.scales([n.node for n in nodes])
        for n, group, scale in zip(nodes, groups, scales):
            n.interval_group, n.interval_scale = group, scale
        said_scale = {s: f"calibration: half-widths x{s:.2f}" for s in set(scales)}
        widen_all(nodes, [said_scale[s] for s in scales], *intervals.scaled(predicted, low, high, np.array(scales)))


def interval_arrays(nodes: list[NodeResult], fields=("predicted_s", "low_s", "high_s")) -> tuple[np.ndarray, ...]:
    """Every node's predicted time, low and high end (or `fields`), as arrays (for registry.models.intervals)."""
    return tuple(np.fromiter(map(operator.attrgetter(a), nodes), dtype=float, count=len(nodes)) for a in fields)


def widen_all(nodes: list[NodeResult], step: str | list[str], low: np.ndarray, high: np.ndarray) -> None:
    """`NodeResult.widen` of every node at once, from arrays (`step`: one text, or one per node):
    a 10,000-node match sets its intervals in array operations, the steps recorded as `widen`
    records them (the first, and each that moves an end by more than 0.1%)."""
    was_low, was_high = interval_arrays(nodes, ("low_s", "high_s"))
    moved = _moved(low, high, was_low, was_high).tolist()
    steps = [step] * len(nodes) if isinstance(step, str) else step
    for n, lo, hi, m, text in zip(nodes, low.tolist(), high.tolist(), moved, steps):
        if m or not n.steps:
            n.steps.append({"step": text, "low_s": lo, "high_s": hi})
        n.low_s, n.high_s = lo, hi


def _moved(low: np.ndarray, high: np.ndarray, was_low: np.ndarray, was_high: np.ndarray) -> np.ndarray:
    """Where an interval moved as `NodeResult.widen` tells it (an end not math.isclose at rel_tol
    1e-3), elementwise."""
    def close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return (a == b) | (np.isfinite(a) & np.isfinite(b) &
                               (np.abs(a - b) <= 1e-3 * np.maximum(np.abs(a), np.abs(b))))
    return ~(close(low, was_low) & close(high, was_high))


SCALING_SEEN = 2    # beyond this many times the traced thread count, the app's own scaling is a guess


def nodes_beyond(nodes: list[NodeResult], seen: int) -> str | None:
    """The nodes that would run more than SCALING_SEEN x `seen` threads, in words (the first three with
    their thread counts, and how many more); None where no node would."""
    far = [n for n in nodes if n.threads and n.threads > SCALING_SEEN * seen]
    if not far:
        return None
    return ", ".join(f"{n.node} ({n.threads})" for n in far[:3]) + (f" and {len(far) - 3} more" if len(far) > 3 else "")


def _scaling_beyond_trace(nodes: list[NodeResult], traced: int) -> list[str]:
    """A warning where the app would run many more threads than it was traced with: the projection
    then takes the node's measured kernels to stand for how the app's parallel share scales, which
    nothing measured of the app says (its runs at several thread counts and a scaling model do)."""
    shown = nodes_beyond(nodes, traced)
    if shown is None:
        return []
    return [f"the app was traced with {plural(traced, 'thread')}; on {shown} it would run more than {SCALING_SEEN}x as many: "
            "the prediction assumes its parallel share keeps scaling there (measure runs at several thread counts "
            "and use --model amdahl or usl to check it)"]


def _add_up(results: list[PhaseResult], targets: list[str], wall: float, rest: float):
    """Per node: the phases' predictions summed, the uncovered `rest` projected with the phases'
    time-weighted geometric mean ratio (bounded by their extreme ratios); ranked. Arrays of
    phases x nodes, since a site registry has thousands of nodes."""
    taken = [NodePredictions.of(r.predictions).take(targets) for r in results]
    pred, low, high = (np.array([getattr(t, attr) for t in taken], dtype=float).reshape(len(results), len(targets))
                       for attr in ("predicted", "low", "high"))
    times = np.array([r.time_s for r in results])
    timed = times > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(pred[timed] / times[timed, None])
        rest_ratio = np.exp((times[timed, None] * log_ratio).sum(axis=0) / times[timed].sum()) if timed.any() \
            else np.ones(len(targets))
        ratios = np.exp(log_ratio) if timed.any() else np.ones((1, len(targets)))
    predicted = pred.sum(axis=0) + rest * rest_ratio
    phase_low, phase_high = low.sum(axis=0), high.sum(axis=0)
    lows = phase_low + rest * ratios.min(axis=0)
    highs = phase_high + rest * ratios.max(axis=0)
    threads = np.zeros(len(targets), dtype=np.int64)
    for r in results:   # (the dicts' own lookups, at C speed: 10,000 nodes x phases)
        np.maximum(threads, np.fromiter(map(r.threads.get, targets, itertools.repeat(0)), dtype=np.int64,
                                        count=len(targets)), out=threads)
    projected = np.isfinite(pred).all(axis=0)
    warnings = [f"{targets[i]}: some phases could not be projected (no comparable configs measured there)"
                for i in np.flatnonzero(~projected).tolist()]
    kept = np.flatnonzero(projected)
    # the steps two `widen`s would record (the phases' bounds, then the rest's), made with the nodes
    summed, plus = "the phases' bounds, summed", f"+ the {rest:.3g} s no phase covers, at the phases' lowest and highest ratio"
    moved = _moved(lows[kept], highs[kept], phase_low[kept], phase_high[kept]).tolist()
    out = [NodeResult(targets[i], p, lo2, hi2, threads=t or None, speedup=wall / p,
                      steps=[{"step": summed, "low_s": lo, "high_s": hi}, {"step": plus, "low_s": lo2, "high_s": hi2}]
                      if m else [{"step": summed, "low_s": lo, "high_s": hi}])
           for i, p, lo, hi, lo2, hi2, t, m in zip(kept.tolist(), predicted[kept].tolist(), phase_low[kept].tolist(),
                                                   phase_high[kept].tolist(), lows[kept].tolist(), highs[kept].tolist(),
                                                   threads[kept].tolist(), moved)]
    out.sort(key=lambda n: n.predicted_s)
    for i, n in enumerate(out, 1):
        n.rank = i
    return out, warnings
