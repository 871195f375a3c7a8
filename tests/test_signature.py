"""Per-phase `proc` signatures from samples (registry/measure/signature.py), on crafted samples."""

import pytest

from registry.io.tracefile import Phase
from registry.measure import signature


def _sample(t_s, cpu_util):
    return {"t_s": t_s, "cpu_util": cpu_util, "threads_active": cpu_util, "rss_mb": 10.0}


def test_rates_are_weighted_by_the_length_of_their_sample():
    """Five full 0.1 s samples at 2 CPUs and the last one cut short at the exit (6 ms, 0.04 CPUs):
    the phase kept 1.98 CPUs busy over its 0.506 s, not the plain mean's 1.67."""
    samples = [_sample(0.1 * i, 2.0) for i in range(1, 6)] + [_sample(0.506, 0.04)]
    phase = Phase("whole", "auto", 0.0, 0.506, 1.0, 0.506)
    signature.attach([phase], samples, [], None, 0.1)
    assert phase.signature["proc"]["cpu_util"] == pytest.approx((0.5 * 2.0 + 0.006 * 0.04) / 0.506)
    assert phase.signature["proc"]["rss_mb"] == 10.0
    assert signature.rows_in(samples, [[0.0, 0.506]]) == samples
