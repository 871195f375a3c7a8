"""registry.match.track: a reference's track record on the apps measured on many nodes."""

import numpy as np
import pytest

from registry.match.track import MIN_NODES, AppTimes


def _apps(n: int, columns: dict[str, np.ndarray]) -> AppTimes:
    from registry.io.sparecores.apps import app_family

    names = list(columns)
    families: dict[str, int] = {}
    return AppTimes([f"n{i}" for i in range(n)], names, np.column_stack([columns[a] for a in names]),
                    np.array([families.setdefault(app_family(a), len(families)) for a in names]))


def test_a_record_is_the_centred_error_averaged_per_family_then_over_families():
    n = 200
    rng = np.random.default_rng(1)
    speed = rng.normal(0, 0.5, n)
    # three gzip variants the reference tracks up to a constant, one Geekbench workload it misses by +-0.2
    apps = _apps(n, {"compression:gzip-1:compress:1t": speed + 1, "compression:gzip-5:compress:1t": speed + 2,
                     "compression:gzip-9:compress:1t": speed - 1,
                     "geekbench:clang:single": speed + 0.2 * np.where(np.arange(n) % 2, 1, -1)})
    nodes = [f"n{i}" for i in range(n)]
    record = apps.records(["r"], nodes, speed[None, :] + 5)[0]
    # per family: gzip 0, clang 0.2; over families 0.1 (not 0.05, the mean over four apps)
    assert record == pytest.approx(0.1, abs=1e-9)


def test_a_reference_measured_on_too_few_of_the_apps_nodes_has_no_record_and_no_prior():
    n = MIN_NODES + 10
    speed = np.linspace(-1, 1, n)
    apps = _apps(n, {"geekbench:clang:single": speed})
    nodes = [f"n{i}" for i in range(n)]
    few = np.where(np.arange(n) < MIN_NODES - 1, speed, np.nan)
    assert np.isnan(apps.records(["r"], nodes, few[None, :])[0])
    assert apps.weights(["r"], nodes, few[None, :]) is None
    # two references: the one that tracks gets 1, the erratic one less, by exp(-(E - min E) / SHARPNESS)
    erratic = speed + np.where(np.arange(n) % 2, 0.3, -0.3)
    weights = apps.weights(["good", "bad"], nodes, np.vstack([speed, erratic]))
    assert weights["good"] == 1.0 and weights["bad"] == pytest.approx(np.exp(-0.3 / 0.1), rel=0.05)


def test_an_apps_time_on_a_node_is_the_median_of_its_runs_there():
    from registry.match.track import _medians

    cells, medians = _medians(np.array([3, 1, 3, 3, 2, 1]), np.array([5.0, 1.0, 1.0, 3.0, 7.0, 2.0]), 4)
    assert dict(zip(cells.tolist(), medians.tolist())) == {1: 1.5, 2: 7.0, 3: 3.0}
