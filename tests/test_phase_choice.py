"""Which phases a prediction adds up: nested markers reduced to disjoint leaves, the author's
declared phases preferred when they cover most of the run (gaps filled by change points), and
traces whose phases of one kind overlap refused (issue 28, item 1)."""

import json

import pytest
from conftest import assert_one_line_error

from registry.db import utcnow
from registry.errors import UserError
from registry.io.tracefile import Phase, Trace, read_trace, write_trace
from registry.match.project import choose_phases
from registry.measure.runner import Marker
from registry.trace import phases
from registry_data import three_node_registry


def _marker(name, a, b, cpu=0.01):
    return Phase(name, "marker", a, b, (b - a) / 10, b - a, intervals=[[a, b]],
                 signature={"proc": {"cpu_util": cpu}})


def _auto(i, a, b, cpu=0.01):
    return Phase(f"segment {i}", "auto", a, b, (b - a) / 10, b - a, intervals=[[a, b]],
                 signature={"proc": {"cpu_util": cpu}})


def _trace(phase_list, wall=10.0):
    return Trace(name="app", node="b", host="h", command=["app"], exit_status=0, status="ok", wall_s=wall,
                 interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc"], phases=phase_list)


def test_nested_markers_become_disjoint_leaves():
    found = {p.name: p for p in phases.marker_phases(
        [Marker("begin", "solve", 0.0), Marker("begin", "kernel", 1.0), Marker("end", "kernel", 6.0),
         Marker("end", "solve", 9.0)], 10.0)}
    assert found["solve"].intervals == [[0.0, 1.0], [6.0, 9.0]] and found["solve"].time_s == pytest.approx(4.0)
    assert found["kernel"].intervals == [[1.0, 6.0]] and found["kernel"].weight == pytest.approx(0.5)
    assert sum(p.weight for p in found.values()) == pytest.approx(0.9)


def test_overlapping_markers_give_the_overlap_to_the_later_one():
    out = phases.leaves({"a": [[0.0, 5.0]], "b": [[3.0, 8.0]], "c": [[9.0, 9.5], [9.5, 10.0]]})
    assert out == {"a": [[0.0, 3.0]], "b": [[3.0, 8.0]], "c": [[9.0, 10.0]]}


def test_stored_nested_markers_are_reduced_and_gaps_filled_by_change_points():
    chosen = choose_phases([_marker("solve", 0, 9), _marker("kernel", 1, 6), _auto(1, 0, 4), _auto(2, 4, 10)], 10.0)
    by_name = {p.name: p for p in chosen}
    assert set(by_name) == {"solve", "kernel", "segment 2"}
    assert by_name["solve"].weight == pytest.approx(0.4)
    assert by_name["segment 2"].intervals == [[9, 10]] and by_name["segment 2"].weight == pytest.approx(0.1)
    assert sum(p.weight for p in chosen) == pytest.approx(1.0)


def test_declared_phases_covering_most_of_the_run_are_used():
    declared = [_marker("load", 0, 1), _marker("solve", 1, 9)]     # 90% of the run
    chosen = choose_phases(declared + [_auto(1, 0, 10)], 10.0)
    assert [p.name for p in chosen] == ["load", "solve", "segment 1"]
    assert chosen[-1].intervals == [[9, 10]]
    omp = [Phase("main._omp_fn.0", "omp", 0.2, 9.9, 0.97, 9.0, intervals=[[0.2, 9.9]])]
    assert [p.method for p in choose_phases(omp + [_auto(1, 0, 5), _auto(2, 5, 10)], 10.0)] == ["auto", "omp", "auto"]
    # a short marker is not the run's phases: change points win
    assert {p.method for p in choose_phases([_marker("io", 0, 1), _auto(1, 0, 10)], 10.0)} == {"auto"}


def _region(name, a, b, busy):
    return Phase(name, "omp", a, b, (b - a) / 10, b - a, intervals=[[a, b]],
                 signature={"omp": {"busy_threads": busy}, "proc": {"cpu_util": 1.9}})


def test_a_gap_between_openmp_regions_takes_its_own_cpu_use_not_its_segments():
    """A 10 s segment kept 1.5 CPUs busy and held a 2-thread region of 5 s: the other 5 s kept one
    CPU busy ((1.5 x 10 - 2 x 5) / 5), a serial gap, not a 1.5-CPU one (NPB MG.A, docs/match.md)."""
    seg = Phase("segment 1", "auto", 0, 10, 1.0, 10.0, intervals=[[0, 10]],
                signature={"proc": {"cpu_util": 1.5, "wss_llc": 3.0}, "sched": {"demand": 1.6}})
    chosen = choose_phases([_region("main._omp_fn.0", 2, 7, 2.0), seg], 10.0)
    gap = next(p for p in chosen if p.method == "auto")
    assert gap.intervals == [[0, 2], [7, 10]]
    assert gap.signature["proc"]["cpu_util"] == pytest.approx(1.0)
    assert gap.signature["sched"]["demand"] == pytest.approx(1.2)
    assert gap.signature["proc"]["wss_llc"] == 3.0 and seg.signature["proc"]["cpu_util"] == 1.5   # the rest as it was
    # never below the one CPU a busy segment's master thread keeps, never above the segment's figure
    low = choose_phases([_region("r", 2, 7, 2.0), _auto(1, 0, 10, cpu=1.2)], 10.0)
    assert next(p for p in low if p.method == "auto").signature["proc"]["cpu_util"] == pytest.approx(1.0)
    high = choose_phases([_region("r", 2, 7, 0.5), _auto(1, 0, 10, cpu=1.2)], 10.0)
    assert next(p for p in high if p.method == "auto").signature["proc"]["cpu_util"] == pytest.approx(1.2)


def test_a_trace_file_whose_weights_sum_past_the_run_is_refused(tmp_path):
    bad = _trace([Phase("solve", "marker", 0, 9, 0.9, 9.0), Phase("kernel", "marker", 1, 6, 0.5, 5.0)])
    path = write_trace(bad, tmp_path / "nested.json")
    with pytest.raises(UserError, match="'marker' phases sum to 1.4, past the whole run"):
        read_trace(path)
    doc = json.loads(path.read_text())
    doc["phases"][1]["weight"] = 0.1
    path.write_text(json.dumps(doc))
    assert sum(p.weight for p in read_trace(path).phases) == pytest.approx(1.0)


def test_nested_markers_predict_the_run_not_more(cli, db_url, tmp_path):
    """The review's case: a 10 s run, `solve` 0-9 s holding `kernel` 1-6 s, every phase keeping its
    time (idle) on every node: 10.0 s everywhere, not 14.0."""
    three_node_registry(db_url, trace=_trace([_marker("solve", 0, 9), _marker("kernel", 1, 6), _auto(1, 0, 10)]))
    res = cli("match", "app", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert {p["node"]: round(p["predicted_s"], 6) for p in doc["predictions"]} == {"b": 10.0, "fast": 10.0,
                                                                                   "one": 10.0}
    assert doc["coverage"] == pytest.approx(1.0)
    path = write_trace(_trace([_marker("solve", 0, 9), _marker("kernel", 1, 6)]), tmp_path / "nested.json")
    assert_one_line_error(cli("match", str(path)), "past the whole run")
