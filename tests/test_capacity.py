"""Capacity: a trace's peak memory and volumes, node specs (`import specs`), `match` and nodes too small."""

import json
import warnings

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends

from registry.db import open_registry
from registry.trace.capacity import capacity
from registry_data import profile_at_speeds, three_node_registry, three_phase_trace

GIB = 2**30


def test_capacity_of_process_tree_samples_by_hand():
    samples = {"t_s": [0.5, 1.0, 2.0], "rss_mb": [100.0, 300.0, None], "read_mb_s": [2.0, 4.0, 0.0],
               "write_mb_s": [0.0, None, 1.0]}
    got = capacity(samples, 0.5)
    assert got["peak_rss_bytes"] == 300 * 2**20
    assert got["read_bytes"] == int((2.0 * 0.5 + 4.0 * 0.5) * 2**20)      # rate x the seconds each row covers
    assert got["write_bytes"] == int(1.0 * 1.0 * 2**20)
    assert got["net_bytes"] is None                                          # not measured: unknown, not 0


def test_capacity_of_sar_samples_leaves_out_the_page_cache():
    samples = {"kbmemused": [1000.0, 5000.0], "kbbuffers": [100.0, 200.0], "kbcached": [300.0, 2000.0],
               "rd_sec/s": [10.0, 0.0], "wr_sec/s": [0.0, 4.0], "rxkB/s": [1.0, 1.0], "txkB/s": [2.0, 0.0]}
    got = capacity(samples, 1.0)
    assert got["peak_rss_bytes"] == (5000 - 200 - 2000) * 1024
    assert (got["read_bytes"], got["write_bytes"], got["net_bytes"]) == (10 * 512, 4 * 512, 4 * 1024)
    assert capacity({}, 1.0) == dict.fromkeys(("peak_rss_bytes", "read_bytes", "write_bytes", "net_bytes"))


def test_a_figure_that_cannot_be_a_byte_count_is_unknown():
    """A damaged sar file (found by tests/test_fuzz_readers.py): 9.6e254 sectors/s written, an
    infinite receive rate, a negative memory use: not measurements, and no 64-bit column holds them."""
    samples = {"kbmemused": [-5.0], "rd_sec/s": [10.0], "wr_sec/s": [9.6e305, 9.6e305], "rxkB/s": [float("inf")]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no numpy overflow warning on the user's terminal either
        got = capacity(samples, 1.0)
    assert got == {"peak_rss_bytes": None, "read_bytes": 10 * 512, "write_bytes": None, "net_bytes": None}


def _big_trace():
    """The app of tests/test_match.py with a 6 GiB peak resident memory."""
    trace = three_phase_trace()
    trace.samples = {"t_s": [1.0, 2.0, 3.0], "rss_mb": [1024.0, 6144.0, 2048.0]}
    return trace


@pytest.fixture
def small_node(db_url):
    """b, fast, one (8 GiB each, from the fake inventory), then one's memory cut to 4 GiB."""
    three_node_registry(db_url, _big_trace())
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE nodes SET memory_bytes = :m WHERE name = 'one'"), {"m": 4 * GIB})
        peak = conn.execute(sa.text("SELECT peak_rss_bytes FROM traces")).scalar_one()
    reg.close()
    return peak


@both_backends
def test_trace_stores_its_peak_memory_and_match_flags_a_node_too_small(cli, small_node):
    assert small_node == 6 * GIB
    res = cli("match", "app", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert [p["node"] for p in out["predictions"]] == ["fast", "b"] and out["footprint_bytes"] == 6 * GIB
    (one,) = out["excluded"]
    assert one["node"] == "one" and one["fits"] is False and one["predicted_s"] is None
    assert "cannot hold the app: it needs 6 GiB" in one["reason"] and "has 4 GiB" in one["reason"]
    table = cli("match", "app")
    assert "left out: one: cannot hold the app" in table.err


@both_backends
def test_import_specs_from_numbers_and_vm_type_names(cli, db_url, tmp_path):
    path = tmp_path / "specs.csv"
    path.write_text("node,vcpus,memory_gib,vm_type\naws/m5.xlarge,,,m5.xlarge\nbig,64,512,\n"
                    "az,,,Standard_D4s_v5\ncustom,2,,Standard_D2_v2\n")
    res = cli("import", "specs", str(path))
    assert res.code == 0, res.err
    reg = open_registry(db_url)
    with reg.connect() as conn:
        rows = {r[0]: (r[1], r[2]) for r in conn.execute(sa.text("SELECT name, n_cpus, memory_bytes FROM nodes"))}
    reg.close()
    assert rows == {"aws/m5.xlarge": (4, 16 * GIB), "big": (64, 512 * GIB), "az": (4, 16 * GIB),
                    "custom": (2, None)}


@both_backends
@pytest.mark.parametrize("rows, fragment", [
    ("a,,,weird.name\n", "line 3: VM type name 'weird.name' is not understood"),
    ("a,-2,,\n", "line 3: vcpus must be a whole number > 0"),
    ("a,2.5,,\n", "line 3: vcpus must be a whole number > 0"),
    ("a,,,\n", "line 3: give vcpus, memory_gib or a vm_type"),
])
def test_a_bad_specs_file_is_one_error_and_sets_nothing(cli, db_url, tmp_path, rows, fragment):
    path = tmp_path / "specs.csv"
    path.write_text("node,vcpus,memory_gib,vm_type\nfirst,4,16,\n" + rows)
    assert_one_line_error(cli("import", "specs", str(path)), str(path), fragment)
    reg = open_registry(db_url)
    with reg.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM nodes")).scalar() == 0
    reg.close()


@both_backends
def test_a_profiled_node_keeps_its_measured_inventory(cli, db_url, tmp_path):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profile_at_speeds(conn, "b", 2, base=True)
    reg.close()
    path = tmp_path / "specs.csv"
    path.write_text("node,vcpus\nb,64\n")
    assert_one_line_error(cli("import", "specs", str(path)), "b is profiled")
