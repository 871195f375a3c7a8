"""Automatic segmentation on series whose change points are known by construction."""

import numpy as np
import pytest

from registry.trace import phases


def _series(n, rng, interval=0.1):
    """cpu steps up at n/3 and down at 2n/3; the working set jumps at n/2 (noise on both)."""
    idx = np.arange(n)
    cpu = np.where((idx >= n // 3) & (idx < 2 * n // 3), 1.0, 0.1) + rng.normal(0, 0.05, n)
    wss = np.where(idx >= n // 2, 200.0, 0.1) * (1 + rng.normal(0, 0.1, n))
    samples = [{"t_s": (i + 1) * interval, "cpu_util": cpu[i], "wss_mb": wss[i], "rss_mb": 300.0} for i in idx]
    return samples, [n // 3 * interval, n // 2 * interval, 2 * n // 3 * interval]


@pytest.mark.parametrize("n", [300, 12000])  # full resolution, and the block path for long runs
def test_known_change_points_are_found_within_one_interval(n):
    samples, truth = _series(n, np.random.default_rng(7))
    found = [p.start_s for p in phases.auto_phases(samples, n * 0.1, 0.1)[1:]]
    assert len(found) == 3
    assert np.abs(np.array(found) - truth).max() <= 0.1


def test_a_straddling_sample_places_the_boundary_inside_its_interval():
    # cpu 0 then 1; the sample ending at 1.0 s is 30% busy: the change happened at 0.97 s
    cpu = [0.0] * 9 + [0.3] + [1.0] * 10
    samples = [{"t_s": (i + 1) * 0.1, "cpu_util": c} for i, c in enumerate(cpu)]
    (first, second) = phases.auto_phases(samples, 2.0, 0.1)
    assert second.start_s == pytest.approx(0.97, abs=0.005)
    assert first.weight + second.weight == pytest.approx(1.0)


def test_short_blips_are_merged():
    cpu = [1.0] * 20 + [0.0] * 2 + [1.0] * 20  # a 0.2 s stall is no phase (min 3 intervals)
    samples = [{"t_s": (i + 1) * 0.1, "cpu_util": c} for i, c in enumerate(cpu)]
    assert len(phases.auto_phases(samples, 4.2, 0.1)) == 1


def test_near_identical_segments_are_one_phase():
    """A long uniform run whose CPU use drifts by a fraction of its sample-to-sample noise (xz -T2 gave
    7 segments): one phase. A step of many noise levels stays a boundary."""
    # 3 x 150 samples: without the merge PELT splits them into 3 segments, as it did 3 x 300 (4x slower)
    rng = np.random.default_rng(3)
    cpu = np.concatenate([np.full(150, 2.0), np.full(150, 1.93), np.full(150, 2.0)]) + rng.normal(0, 0.01, 450)
    samples = [{"t_s": (i + 1) * 0.1, "cpu_util": c} for i, c in enumerate(cpu)]
    assert len(phases.auto_phases(samples, 45.0, 0.1)) == 1
    cpu[150:300] -= 1.0
    samples = [{"t_s": (i + 1) * 0.1, "cpu_util": c} for i, c in enumerate(cpu)]
    assert len(phases.auto_phases(samples, 45.0, 0.1)) == 3


def test_rates_of_a_few_events_a_sample_are_no_phases():
    """Trial 4 of #32: on a busy host `xz -T2`'s one-thread tail split at 14 against 31 context
    switches/s (1-3 a 0.1 s sample: counting noise and the others' preemptions), its two-thread part
    at 409 against 181 minor faults/s. Rates count in units of a rate that matters (CHANGE_UNITS):
    the start-up's 8,000 faults/s and the thread count's step stay boundaries."""
    rng = np.random.default_rng(5)
    start, two, one, calm = 80, 300, 110, 90          # samples: start-up, 2 threads, 1 thread (two rates)
    n = start + two + one + calm
    demand = np.concatenate([np.full(start + two, 2.0), np.full(one + calm, 1.0)]) + rng.normal(0, 0.05, n)
    faults = np.concatenate([rng.poisson(800, start), rng.poisson(41, two // 3), rng.poisson(18, two - two // 3),
                             rng.poisson(25, one + calm)]) / 0.1
    switches = np.concatenate([rng.poisson(20, start + two), rng.poisson(1.4, one), rng.poisson(3.1, calm)]) / 0.1
    samples = [{"t_s": (i + 1) * 0.1, "cpu_util": demand[i], "minflt_per_s": faults[i], "ctxsw_per_s": switches[i],
                "rss_mb": 160.0 + i * 0.25} for i in range(n)]
    found = phases.auto_phases(samples, n * 0.1, 0.1)
    assert [round(p.start_s) for p in found] == [0, 8, 38], [round(p.start_s, 1) for p in found]
