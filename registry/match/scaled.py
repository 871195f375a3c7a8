"""`nodereg match --model SCALING`: the projection combined with the app's own scalability curve.

The projection alone (registry.match.project) predicts a node with more CPUs than the base from its
configs at the node's thread count: it knows how the *node* scales (bandwidth, FLOPs with more
cores), not how the *application* does (its serial part, its communication). A scaling model
(downey, loglog, amdahl, usl, ...) fitted on the app's measured runs on the base node at several
thread counts knows the application's curve. Combined (registry.models.combine.project_scaling):

    T_X(n_X) = T_X(n_ref) * T_base(n_X) / T_base(n_ref)

where n_ref is the thread count the app was traced with on the base node, T_X(n_ref) the
projection of every phase onto X at n_ref threads (per-core speed, memory bandwidth at that count),
and n_X all of X's CPUs. A node with at most n_ref CPUs is projected at its own CPU count directly
(the projection covers fewer cores; the curve is not needed). Intervals combine in log space and
the scaling model's warnings (superlinear speed-up, extrapolation far beyond the runs) are kept.

The curve's limits are said as `nodereg scaling` says them: its backtest (registry.models.backtest:
fitted on the smaller thread counts, predicting the largest) warns when the curve misses its own
runs, and that miss widens the intervals of the nodes it is extrapolated to; a node more than
SCALING_SEEN x beyond the largest run is named whatever the backtest found (a small miss is no
guarantee far away).
"""

import functools

import numpy as np

from registry.errors import UserError
from registry.match.project import (PROJECTION, SCALING_SEEN, Inputs, MatchResult, NodeResult, interval_arrays,
                                    model_identity, nodes_beyond, project, traced_threads, widen_all)
from registry.models import intervals
from registry.models.backtest import Backtest, backtest
from registry.models.base import NodePrediction, ScalingContext
from registry.models.combine import project_scaling
from registry.models.plugins import create
from registry.values import command_line


def _sep_runs(inputs: Inputs) -> tuple[np.ndarray, ScalingContext] | None:
    """An MPI app traced at two or more ranks x threads counts on its node: those traces as the
    runs, with their communication (the slowest rank's MPI time) for Barnes's SEP."""
    found = inputs.comm.traced_runs if inputs.comm is not None else []
    if len({c for c, _, _ in found}) < 2:
        return None
    runs = np.array([(c, t) for c, t, _ in found], dtype=float)
    return runs, ScalingContext(comm_s={"MAX": np.array([m for _, _, m in found], dtype=float)})


def project_scaled(inputs: Inputs, scaling_model: str, options: dict | None = None) -> MatchResult:
    """The projection (with its default options) scaled by `scaling_model` (with `options`). An MPI
    app traced at several ranks x threads counts is scaled with those traces and their
    communication split (Barnes's SEP, which loglog uses)."""
    trace, base = inputs.found.trace, inputs.base
    runs = np.array([(n, t) for _, n, t in inputs.runs if n is not None], dtype=float).reshape(-1, 2)
    sep = _sep_runs(inputs)
    context = None
    if sep is not None:
        runs, context = sep
    if not len(runs):
        raise UserError(f"no runs of {trace.name!r} on {base!r} with a thread count: add some with "
                        f"{command_line('nodereg', 'runs', 'add', trace.name, base, '--threads', 'N', '--time', 'S')}")
    threads, times = runs[:, 0].astype(int), runs[:, 1]
    make = functools.partial(create, scaling_model, kind="scaling", options=options)
    model = make()
    if len(np.unique(threads)) < model.min_thread_counts:
        raise UserError(f"--model {scaling_model} scales {trace.name!r} with its runs on {base!r}: it needs runs at "
                        f">= {model.min_thread_counts} thread counts, there are runs at "
                        f"{', '.join(str(n) for n in np.unique(threads))} "
                        "(add some: "
                        f"{command_line('nodereg', 'runs', 'add', trace.name, base, '--threads', 'N', '--time', 'S')})")
    model.fit(threads, times, context)
    cpus = inputs.profiles.n_cpus
    n_ref = inputs.comm.cpus if inputs.comm is not None else traced_threads(trace, cpus[base])
    result = project(inputs, model=PROJECTION, fixed_threads=n_ref)
    result.warnings += [f"{scaling_model}: {w}" for w in model.warnings]
    if sep is not None:
        result.warnings.append(f"{scaling_model}: fitted on the app's {len(times)} MPI traces on {base} (ranks x "
                               f"threads {', '.join(str(int(n)) for n in sorted(set(threads)))}) with their "
                               f"communication split; technique {getattr(model, 'technique', 'TOT')}")
    scaled_nodes = []
    for n in result.nodes:
        n_x = cpus[n.node]
        if n_x <= n_ref:
            continue
        scaled_nodes.append(n)
        (scaled,) = project_scaling(model, n_ref, NodePrediction(n.node, n.predicted_s, n.low_s, n.high_s),
                                    [n_x], node_cpus=n_x)
        n.predicted_s, n.threads = scaled.predicted_s, n_x
        n.widen(f"scaled by the app's {scaling_model} curve to {n_x} threads", scaled.low_s, scaled.high_s)
        n.speedup = result.base_time_s / n.predicted_s
        result.warnings += [f"{n.node}: {w}" for w in scaled.warnings]
    result.warnings += _limits(scaled_nodes, scaling_model, base, int(threads.max()), backtest(make, threads, times))
    result.nodes.sort(key=lambda n: n.predicted_s)
    for i, n in enumerate(result.nodes, 1):
        n.rank = i
    result.model, result.model_version = model_identity(scaling_model)
    return result


def _limits(nodes: list[NodeResult], name: str, base: str, measured: int, check: Backtest | None) -> list[str]:
    """The warnings on how far the curve is trusted, with the backtest's miss applied to the intervals
    of `nodes` (those scaled by the curve) beyond the `measured` thread count, on the side it erred
    (too short a time: the high end), through the one interval rule. No backtest (too few thread
    counts to split the runs), no backtest warning, as in `nodereg scaling`."""
    out = []
    far = [n for n in nodes if n.threads > measured]
    missed = check.warning() if check is not None else None
    if missed:
        out.append(f"{name} on the runs on {base}: {missed}" +
                   (f" (the intervals beyond {measured} threads are widened by it)" if far else ""))
    if missed and far:
        side = "above" if check.log_miss > 0 else "below"
        widen_all(far, f"the {name} backtest's miss at {', '.join(map(str, check.targets))} threads "
                       f"({check.median_error:.0%}), on the {'high' if side == 'above' else 'low'} end",
                  *intervals.combine(*interval_arrays(far), **{side: abs(check.log_miss)}))
    shown = nodes_beyond(far, measured)
    if shown:
        out.append(f"{name}: the app's runs on {base} reach {measured} threads; on {shown} its curve is "
                   f"extrapolated more than {SCALING_SEEN}x beyond them (add runs at more threads to check it)")
    return out
