"""The portable trace file and the registry tables: round trips, and clear errors for bad files."""

import json
import math
from dataclasses import replace

import pytest
from conftest import both_backends

from registry.db import open_registry
from registry.errors import UserError
from registry.inventory import collect
from registry.nodes import ensure_node
from registry.measure import counters
from registry.trace import store
from registry.io.tracefile import VERSION, read_trace, write_trace
from registry.trace.tracer import trace_command


@pytest.fixture(scope="module")
def a_trace():
    """A real (short) trace: a Python child with two marked phases."""
    code = ("import time\nfrom registry.trace.markers import phase\n"
            "with phase('a'):\n    time.sleep(0.25)\nwith phase('b'):\n    sum(range(3_000_000))\n")
    import sys
    trace, _ = trace_command([sys.executable, "-c", code], name="py", node="base", inventory=collect())
    return trace


def _same_phases(x, y):
    assert [(p.name, p.method, p.calls) for p in x.phases] == [(p.name, p.method, p.calls) for p in y.phases]
    for p, q in zip(x.phases, y.phases):
        assert p.start_s == pytest.approx(q.start_s) and p.weight == pytest.approx(q.weight)
        assert [v for iv in p.intervals for v in iv] == pytest.approx([v for iv in q.intervals for v in iv])
        assert p.signature.keys() == q.signature.keys()
        for src in p.signature:
            for metric, value in p.signature[src].items():
                other = q.signature[src].get(metric)
                assert (math.isnan(value) and other is None) or other == pytest.approx(value), (src, metric)


def test_file_round_trip(a_trace, tmp_path):
    path = write_trace(a_trace, tmp_path / "sub" / "t.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "nodereg-trace" and doc["version"] == VERSION
    for key in ("name", "node", "command", "exit_status", "wall_s", "phases"):
        assert key in doc
    assert {"start_s", "end_s", "weight", "signature"} <= set(doc["phases"][0])
    back = read_trace(path)
    assert back.command == a_trace.command and back.wall_s == a_trace.wall_s
    assert [p.name for p in back.phases if p.method == "marker"] == ["a", "b"]
    _same_phases(a_trace, back)


@both_backends
def test_registry_round_trip(a_trace, db_url):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "base", collect())
        trace_id, uid = store.save(conn, a_trace)
        again, _ = store.save(conn, a_trace)  # the same trace (uid) again: nothing new
        other = replace(a_trace, meta={})      # another trace of the same app: the app row is reused
        other_id, other_uid = store.save(conn, other)
    with reg.connect() as conn:
        back = store.load(conn, trace_id)
        apps = conn.exec_driver_sql("SELECT count(*) FROM apps").scalar()
    reg.close()
    assert apps == 1 and again == trace_id and other_id != trace_id and other_uid != uid
    assert back.meta["uid"] == uid == a_trace.meta["uid"]
    assert back.name == "py" and back.node == "base" and back.status == "ok"
    assert back.samples["t_s"] == pytest.approx(a_trace.samples["t_s"])
    _same_phases(a_trace, back)


def test_unknown_node_is_refused_by_the_store(a_trace, db_url):
    reg = open_registry(db_url)
    with pytest.raises(UserError, match="unknown node"), reg.begin() as conn:
        store.save(conn, a_trace)
    reg.close()


@pytest.mark.parametrize("content, message", [
    ("{not json", "corrupt"),
    ('{"name": "x"}', "not a nodereg trace"),
    ('{"format": "nodereg-trace", "version": 99}', "newer than this nodereg"),
    ('{"format": "nodereg-trace", "version": "1"}', "no valid version"),
    ('{"format": "nodereg-trace", "version": 1, "name": "x"}', "missing field 'node'"),
])
def test_bad_files_fail_with_one_clear_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message) as info:
        read_trace(path)
    assert "\n" not in str(info.value)


def test_bad_phase_and_missing_file(a_trace, tmp_path):
    doc = a_trace.to_dict()
    doc["phases"][0]["end_s"] = doc["phases"][0]["start_s"] - 1
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match="ends before it starts"):
        read_trace(path)
    doc["phases"][0]["weight"] = "heavy"
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match="'weight' has the wrong type"):
        read_trace(path)
    with pytest.raises(UserError, match="does not exist"):
        read_trace(tmp_path / "missing.json")


def test_perf_interval_output_parses_into_rates():
    text = ("# started on Sun Nov 22 05:00:00 2026\n\n"
            "     0.100200000,200000000,,cycles,100000000,100.00,,\n"
            "     0.100200000,300000000,,instructions,100000000,100.00,1.50,insn per cycle\n"
            "     0.100200000,1000000,,cache-references,100000000,100.00,,\n"
            "     0.100200000,250000,,cache-misses,100000000,100.00,25.00,of all cache refs\n"
            "     0.200400000,<not counted>,,cycles,0,100.00,,\n")
    rows = counters.parse(text)
    assert rows == [{"t_s": 0.1002, "cycles": 2e8, "instructions": 3e8, "cache-references": 1e6,
                     "cache-misses": 2.5e5}]
    derived = counters.derived(rows[0])
    assert derived["ipc"] == pytest.approx(1.5) and derived["cache_miss_rate"] == pytest.approx(0.25)
    assert derived["misses_per_kinst"] == pytest.approx(250000 / 3e8 * 1000)
