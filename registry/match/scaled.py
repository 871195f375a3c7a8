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
"""

import sqlalchemy as sa

from registry.errors import UserError
from registry.match.project import MatchResult, project, traced_threads
from registry.match.references import base_node
from registry.models.base import NodePrediction
from registry.models.combine import project_scaling
from registry.models.plugins import create
from registry.runs import load_runs
from registry.trace.lookup import FoundTrace

PROJECTION = "similarity"


def project_scaled(conn: sa.Connection, found: FoundTrace, scaling_model: str, *, base: str | None = None,
                   nodes: list[str] | None = None) -> MatchResult:
    trace = found.trace
    base = base_node(conn, trace.name, trace.node, base)
    runs = load_runs(conn, trace.name, base)
    model = create(scaling_model, kind="scaling")
    if runs.threads.nunique() < model.min_thread_counts:
        raise UserError(f"--model {scaling_model} scales {trace.name!r} with its runs on {base!r}: it needs runs at "
                        f">= {model.min_thread_counts} thread counts, there are runs at "
                        f"{', '.join(str(n) for n in sorted(runs.threads.unique()))} "
                        f"(add some: `nodereg runs add {trace.name} {base} --threads N --time S`)")
    model.fit(runs.threads.to_numpy(), runs.time_s.to_numpy())
    cpus = dict(conn.execute(sa.text("SELECT name, n_cpus FROM nodes")).fetchall())
    n_ref = traced_threads(trace, int(cpus.get(base) or 1))
    result = project(conn, found, model=PROJECTION, base=base, nodes=nodes, fixed_threads=n_ref)
    result.warnings += [f"{scaling_model}: {w}" for w in model.warnings]
    for n in result.nodes:
        n_x = int(cpus.get(n.node) or 1)
        if n_x <= n_ref:
            continue
        (scaled,) = project_scaling(model, n_ref, NodePrediction(n.node, n.predicted_s, n.low_s, n.high_s),
                                    [n_x], node_cpus=n_x)
        n.predicted_s, n.low_s, n.high_s, n.threads = scaled.predicted_s, scaled.low_s, scaled.high_s, n_x
        n.speedup = result.base_time_s / n.predicted_s
        result.warnings += [f"{n.node}: {w}" for w in scaled.warnings]
    result.nodes.sort(key=lambda n: n.predicted_s)
    for i, n in enumerate(result.nodes, 1):
        n.rank = i
    result.model = f"{scaling_model}+{PROJECTION}"
    return result
