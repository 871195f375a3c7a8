"""The learned models of an app measured on a few nodes (registry/models/learned_runs.py: paris and
similar-runs-gbt), on synthetic worlds with a planted law: all-CPU services whose time stops falling
beyond 16 vCPUs, something that no micro-benchmark and no vCPU ratio shows, but that the other
services (the training workloads) do."""

import json

import numpy as np
import pandas as pd
import pytest

from registry.crossarch import evaluate as cal
from registry.crossarch.data import CrossData
from registry.crossarch.references import ReferenceBank, query
from registry.io.sparecores.apps import app_family
from registry.models.plugins import create
from crossarch_synth import synthetic_nodes

SATURATION = 16      # vCPUs beyond which the services get no faster


def saturating_world(seed=0, nodes_per_family=16, services=14, noise=0.02):
    """Nodes with a core speed, a memory speed and 2-192 vCPUs; micro-benchmarks on 1 CPU and on all
    (linear in vCPUs); all-CPU services `svcN:all`, each its own family, whose time is a mix of core
    and memory speed divided by min(vCPUs, SATURATION); and a few one-CPU apps."""
    rng = np.random.default_rng(seed)
    nodes = synthetic_nodes(rng, nodes_per_family, [2, 4, 8, 16, 32, 64, 96, 192])
    nodes["memory_bytes"] = 2.0 ** rng.integers(32, 40, len(nodes))
    log_core, log_mem = np.log(1 / nodes["core"]), np.log(1 / nodes["mem"])
    log_vcpus = np.log(nodes["n_cpus"].astype(float))

    def cost(a, b, scale):
        return np.exp(a * log_core + b * log_mem - scale + rng.normal(0, noise, len(nodes)))

    configs = {}
    for i, (a, b) in enumerate([(1, 0), (0, 1), (0.5, 0.5), (0.8, 0.2), (0.2, 0.8)]):
        configs[f"sc:micro{i}:1t"] = cost(a, b, 0)
        configs[f"sc:micro{i}:all"] = cost(a, b, log_vcpus)
    saturated = np.minimum(log_vcpus, np.log(SATURATION))
    times = {f"svc{i}:all": cost(a, 1 - a, saturated) for i, a in enumerate(rng.uniform(0.2, 0.8, services))}
    times |= {f"tool{i}:1t": cost(a, 1 - a, 0) for i, a in enumerate(rng.uniform(0.2, 0.8, 6))}
    table = nodes[["architecture", "cpu_family", "n_cpus", "memory_bytes"]]
    return CrossData(pd.DataFrame(configs, index=nodes.index), pd.DataFrame(times, index=nodes.index), table)


def _table(data, models, apps, k=3, seeds=(0, 1)):
    result = cal.run(data, models, k, list(seeds), apps=apps)
    assert not result.errors
    return {r["model"]: r for r in cal.summary(data, result) if r["slice"] == "all"}, result


def test_paris_learns_a_planted_saturation_that_the_vcpu_ratio_misses():
    data = saturating_world()
    apps = [a for a in data.apps if a.startswith("svc")][:4]
    table, result = _table(data, ["paris", "vcpu-ratio"], apps)
    mine, vcpu = table["paris"], table["vcpu-ratio"]
    assert mine["median_ae"] < 0.15 and mine["median_ae"] < vcpu["median_ae"] / 3
    # where it matters: the nodes with far more vCPUs than the saturation
    p = result.predictions.assign(vcpus=lambda f: f["node"].map(data.nodes["n_cpus"]))
    big = p[p["vcpus"] >= 4 * SATURATION]
    err = (big["predicted_s"] / big["actual_s"] - 1).abs().groupby(big["model"]).median()
    assert err["paris"] < 0.25 < err["vcpu-ratio"]
    assert 0.5 <= mine["coverage"] <= 1.0


def test_similar_runs_gbt_is_no_worse_than_similar_runs_and_keeps_its_interval():
    data = saturating_world(seed=1)
    apps = [a for a in data.apps if a.startswith("svc")][:4]
    table, _ = _table(data, ["similar-runs-gbt", "similar-runs"], apps)
    mine, base = table["similar-runs-gbt"], table["similar-runs"]
    assert mine["median_ae"] <= base["median_ae"] * 1.1 + 0.005
    assert 0.5 <= mine["coverage"] <= 1.0


@pytest.mark.parametrize("name", ["paris", "similar-runs-gbt"])
def test_learned_models_serve_one_calibration_node_and_equal_vcpu_counts(name):
    """K = 1 (no pattern, no vCPU slope) and calibration nodes of one vCPU count: a feature that is NaN
    for every training row must not stop the trees (scikit-learn refuses such a column)."""
    data = saturating_world()
    data.nodes.loc[["Zen4-0", "Graviton3-1", "IceLake-2"], "n_cpus"] = 8
    for k, cal_nodes in ((1, ["Zen4-0"]), (3, ["Zen4-0", "Graviton3-1", "IceLake-2"])):
        model, q = _fitted(name, "svc3:all", cal_nodes, data)
        preds = model.predict(q, ["Zen3-3", "Graviton4-2"])
        assert not model.warnings and all(np.isfinite(p.predicted_s) for p in preds)
        assert not model.fitted["learned"][False]["features"].all()     # the NaN slope was left out


def _fitted(name, app, cal_nodes, data):
    bank = ReferenceBank(data)
    model = create(name).fit(bank.reference_set(app_family(app), cal_nodes))
    return model, query(app, data.times[app], cal_nodes, app.endswith(":1t"))


@pytest.mark.parametrize("name", ["paris", "similar-runs-gbt"])
def test_the_apps_family_never_enters_its_own_training_set(name):
    """Services with a sibling of their family (two levels of one compression algorithm, nearly the
    same app): when one is predicted, neither is a training workload; and no training workload has a
    reference of its own family among its nearest ones (its sibling would be a perfect match)."""
    from registry.models.similar_runs import family_codes

    data = saturating_world()
    for i in (0, 1):
        data.times[f"compression:svc{i}-1:compress:all"] = data.times.pop(f"svc{i}:all")
        data.times[f"compression:svc{i}-3:compress:all"] = data.times[f"compression:svc{i}-1:compress:all"] * 1.01
    app = "compression:svc0-1:compress:all"
    model, q = _fitted(name, app, ["Zen4-0", "Graviton3-1", "IceLake-2"], data)
    model.predict(q, ["Zen3-3"])
    workloads = model.fitted["learned"][False]["workloads"]
    assert len(workloads) >= 10 and "compression:svc1-3:compress:all" in workloads
    assert not {w for w in workloads if app_family(w) == app_family(app)}
    f = model.fitted
    rows = [f["refs"].index(w) for w in workloads]
    fam = family_codes(f["refs"])
    near, _ = model._nearest(f["F"][rows], False, fam[rows])
    assert not (fam[near] == fam[rows][:, None]).any()


@pytest.mark.parametrize("name", ["paris", "similar-runs-gbt"])
def test_learned_models_saved_and_loaded_predict_the_same(name):
    data = saturating_world()
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    model, q = _fitted(name, "svc3:all", cal_nodes, data)
    targets = ["Zen3-3", "Graviton4-2", "CascadeLake-5"]
    back = type(model).from_params(json.loads(json.dumps(model.params())))
    a, b = model.predict(q, targets), back.predict(q, targets)
    flat = lambda preds: [v for p in preds for v in (p.predicted_s, p.low_s, p.high_s)]  # noqa: E731
    assert flat(a) == pytest.approx(flat(b))
    assert not model.warnings      # the trees served, not the fallback


def test_too_few_training_workloads_fall_back_to_similar_runs_with_a_warning():
    data = saturating_world(services=3)
    cal_nodes = ["Zen4-0", "Graviton3-1", "IceLake-2"]
    model, q = _fitted("paris", "svc0:all", cal_nodes, data)
    preds = model.predict(q, ["Zen3-3"])
    assert any("too few reference apps" in w for w in model.warnings)
    base, _ = _fitted("similar-runs", "svc0:all", cal_nodes, data)
    assert preds[0].predicted_s == pytest.approx(base.predict(q, ["Zen3-3"])[0].predicted_s)


def test_learned_models_are_listed_as_plugins(cli):
    out = cli("models")
    assert out.code == 0, out.err
    assert "paris" in out.out and "similar-runs-gbt" in out.out
