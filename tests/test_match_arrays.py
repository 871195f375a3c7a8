"""The projection of `nodereg match` computed as arrays over all nodes (registry.models.predictions,
registry.match.project) gives the same figures as computing each node on its own.

A small random registry, built as `Profiles` arrays: nodes of 1 to 16 CPUs, measured at some of 1,
2, 4 and 8 threads (so that some nodes lie between two measured counts and some beyond the largest),
a few runs missing, and random phase signatures of serial, partly and fully parallel phases. The
per-node reference below follows the rules of registry.match.project one node at a time: the model
asked about that node alone, the interpolation between thread counts and the widening beyond them
done with plain floats, and the parts of a phase added up.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from registry.io.tracefile import Phase
from registry.match import project as project_module
from registry.match import references as refs_mod
from registry.models.base import Matrix, Query
from registry.models.predictions import NodePredictions
from registry.models.similarity import SimilarityModel

FEATURES = ["proc.cpu_util", "proc.wss_llc", "counters.ipc"]


def _random_profiles(seed: int) -> refs_mod.Profiles:
    rng = np.random.default_rng(seed)
    n_nodes, n_keys = 40, 9
    cpus = rng.choice([1, 2, 3, 4, 6, 8, 16], size=n_nodes)
    cpus[0] = 4                                                  # the base node
    names = np.array([f"n{i:02d}" for i in range(n_nodes)], dtype=object)
    node, key, threads, config, throughput = [], [], [], [], []
    for i in range(n_nodes):
        counts = [t for t in (1, 2, 4, 8) if t <= 2 * cpus[i] and (t != 8 or rng.random() < 0.5)]
        speed = rng.lognormal(0, 0.4, size=n_keys)
        for k in range(n_keys):
            for t in counts:
                if i and rng.random() < 0.05:                    # an unmeasured config on some nodes
                    continue
                node.append(i), key.append(k), threads.append(t), config.append(100 * k + t)
                throughput.append(speed[k] * t ** rng.uniform(0.3, 1.0))
    base_configs = sorted({c for n, c in zip(node, config) if n == 0})
    values = rng.lognormal(0, 1, size=(len(base_configs), len(FEATURES)))
    values[rng.random(values.shape) < 0.1] = np.nan
    return refs_mod.Profiles(
        base="n00", node_names=names, key_names=np.array([f"k{k}" for k in range(n_keys)]),
        node=np.array(node), key=np.array(key), threads=np.array(threads),
        placement_names=np.array(["compact"], dtype=object), placement=np.zeros(len(node), dtype=np.int64),
        combo=np.array(config) * 64, throughput=np.array(throughput),
        features=Matrix(base_configs, FEATURES, values),
        n_cpus={str(n): int(c) for n, c in zip(names, cpus)})


def _per_node(phase, time_s: float, trace, profiles, nodes: list[str]) -> dict[str, tuple]:
    """(predicted, low, high, threads) of each node, one node at a time."""
    parts = refs_mod.thread_parts(project_module.parallel_use(phase.signature), trace.threads,
                                  profiles.n_cpus[profiles.base])
    features = {f"{s}.{m}": v for s, ms in phase.signature.items() for m, v in ms.items()}
    names = profiles.node_names.tolist()
    out = {}
    for n in nodes:
        total, threads = None, None
        for mode, k, share in parts:
            query = Query(phase.name, features, time_s * share)
            on = {side: dict(zip(names, refs_mod.threads_on(profiles, mode, k, side).tolist()))
                  for side in ("below", "above")}
            models = {side: SimilarityModel().fit(refs_mod.reference_set(profiles, refs_mod.threads_on(
                profiles, mode, k, side))[0]) for side in ("below", "above")}
            want = dict(zip(names, refs_mod.wanted_threads(profiles, mode, k).tolist()))[n]
            lo, hi = on["below"][n], on["above"][n]
            (p,) = models["below"].predict(query, [n])
            got, at = [p.predicted_s, p.low_s, p.high_s], lo
            if 0 < lo < want < hi:
                (q,) = models["above"].predict(query, [n])
                w = math.log(want / lo) / math.log(hi / lo)
                got = [x ** (1 - w) * y ** w if x > 0 and y > 0 else x
                       for x, y in zip(got, [q.predicted_s, q.low_s, q.high_s])]
                at = int(want)
            elif 0 < hi < want:
                got[1] = got[1] * hi / want
                at = int(want)
            total = got if total is None else [a + b for a, b in zip(total, got)]
            threads = threads if threads is not None else at
        out[n] = (*total, threads)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_array_projection_matches_a_node_by_node_one(seed):
    profiles = _random_profiles(seed)
    rng = np.random.default_rng(100 + seed)
    nodes = profiles.nodes()
    trace = SimpleNamespace(threads=None)
    checked_between = checked_beyond = 0
    for j, util in enumerate([0.99, 2.5, 3.96, None]):          # serial, partly parallel, parallel, unknown
        signature = {"proc": {"wss_llc": float(rng.lognormal(0, 1))}, "counters": {"ipc": float(rng.uniform(0.5, 3))}}
        if util is not None:
            signature["proc"]["cpu_util"] = util
        phase = Phase(f"p{j}", "auto", 0.0, 10.0, 0.25, 10.0, signature=signature)
        result = project_module._project_phase(phase, 10.0, trace, profiles, "similarity", {}, nodes, {}, None)
        assert isinstance(result.predictions, NodePredictions)
        expected = _per_node(phase, 10.0, trace, profiles, nodes)
        for n in nodes:
            got = result.predictions[n]
            want_s, low, high, threads = expected[n]
            assert [got.predicted_s, got.low_s, got.high_s] == pytest.approx([want_s, low, high], rel=1e-12,
                                                                              nan_ok=True), n
            assert result.threads[n] == threads, n
        mode, k, _ = refs_mod.thread_parts(util, None, 4)[0]
        want = refs_mod.wanted_threads(profiles, mode, k)
        lo, hi = (refs_mod.threads_on(profiles, mode, k, side) for side in ("below", "above"))
        checked_between += int(((0 < lo) & (lo < want) & (want < hi)).sum())
        checked_beyond += int(((0 < hi) & (hi < want)).sum())
    assert checked_between and checked_beyond      # the random registry has nodes of both kinds


def test_arrays_read_as_the_objects_they_stand_for():
    preds = NodePredictions(["a", "b"], [1.0, 2.0], [0.5, 1.5], [2.0, 3.0],
                            explain=lambda i: {"used": i + 1}, warnings={1: ["careful"]})
    assert preds["b"].predicted_s == 2.0 and preds["b"].explanation == {"used": 2}
    assert preds["b"].warnings == ["careful"] and preds["a"].warnings == []
    assert list(preds) == ["a", "b"] and preds.all_warnings() == ["careful"]
    back = NodePredictions.of(dict(preds.items()))
    assert back.take(["b", "a"]).predicted.tolist() == [2.0, 1.0]
    assert back.take(["b", "a"])["b"].warnings == ["careful"]
    with pytest.raises(KeyError):
        preds["c"]
