"""`nodereg import lumos`: both layouts, the dataset's quirks, VM shapes, idempotence, sar summaries."""

import json

import numpy as np
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends
from lumos_synth import BASE, VMS, apps, make_dataset

from registry.db import open_registry
from registry.errors import UserError
from registry.io.lumos import discover, import_lumos
from registry.io.sar import SarTrace, read_sar_csv, sample_times, sar_signature


def _count(reg, sql, **params):
    with reg.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def test_read_sar_csv_copes_with_repeats_text_and_garbage(tmp_path):
    path = tmp_path / "sar.csv"
    path.write_text("timestamp,%user,tps,IFACE,tps,%idle\n"
                    "10:00:00,10.5,3,lo,4,80\n"
                    "10:00:01,n/a,5,eth0,6,70\n"
                    "10:00:02,30,7\n"                       # short row: dropped
                    "10:00:03,40,9,lo,10,,\n")               # long row: dropped
    trace = read_sar_csv(path)
    assert trace.names == ["%user", "tps", "tps#2", "%idle"]
    assert len(trace) == 2
    np.testing.assert_array_equal(trace.values[:, 1], [3, 5])
    np.testing.assert_array_equal(trace.values[:, 2], [4, 6])
    assert np.isnan(trace.values[1, 0])
    t, step = sample_times(trace, None)
    np.testing.assert_array_equal(t, [0, 1])
    assert step == 1


def test_read_sar_csv_rejects_files_without_numbers(tmp_path):
    (tmp_path / "a.csv").write_text("")
    (tmp_path / "b.csv").write_text("timestamp,IFACE\n10:00:00,lo\n")
    for name in ("a.csv", "b.csv"):
        with pytest.raises(ValueError):
            read_sar_csv(tmp_path / name)


def test_sample_times_wrap_midnight_and_fall_back_to_the_interval():
    wrapped = SarTrace(["x"], np.zeros((3, 1)), ["23:59:58", "23:59:59", "00:00:00"])
    np.testing.assert_array_equal(sample_times(wrapped, None)[0], [0, 1, 2])
    repeated = SarTrace(["x"], np.zeros((3, 1)), ["10:00:00", "10:00:00", "10:00:01"])
    np.testing.assert_array_equal(sample_times(repeated, 5.0)[0], [0, 5, 10])


def test_sar_signature_simulates_fewer_and_more_cores():
    n = 10
    saturated = SarTrace(["%user", "%system", "runq-sz"], np.column_stack([np.full(n, 99.0), np.full(n, 1.0),
                                                                           np.full(n, 8.0)]))
    sig = sar_signature(saturated, ncpu=4)
    assert sig["cpu_sat_frac"] == 1.0
    assert sig["sim_half_cores"] == pytest.approx(np.log(2.0))           # 4 cores of work on 2
    assert sig["sim_double_cores"] == pytest.approx(np.log(0.5))         # 8 ready threads on 8 cores
    serial = SarTrace(["%user", "%system", "runq-sz"], np.column_stack([np.full(n, 25.0), np.zeros(n), np.ones(n)]))
    sig = sar_signature(serial, ncpu=4)
    assert sig["sim_half_cores"] == pytest.approx(0.0)
    assert sig["sim_double_cores"] == pytest.approx(0.0)
    assert sig["cpu_busy_mean"] == pytest.approx(0.25)
    assert sig["duration_s"] == n


def test_import_interval_layout_with_quirks(tmp_path):
    root = make_dataset(tmp_path / "synth")
    reg = open_registry(f"duckdb:///{tmp_path / 'r.duckdb'}")
    summary = import_lumos(reg, root)
    n_apps = len(apps())
    runs_per_vm = (n_apps - 1) * 3 + 1
    assert summary.cloud == "synth"
    assert summary.nodes_added == len(VMS)
    assert summary.apps_added == n_apps
    assert summary.runs_added == len(VMS) * runs_per_vm + 1               # + the run without a trace
    assert summary.traces_added == len(VMS) * runs_per_vm
    assert summary.runs_without_trace == 1
    assert summary.skipped == {"incomplete run": 1, "unreadable report.json": 1}
    with reg.connect() as conn:
        node = conn.execute(sa.text("SELECT n_cpus, memory_bytes, source FROM nodes "
                                    "WHERE name = 'synth/g6.2xlarge'")).one()
        assert tuple(node) == (8, 32 * 2**30, "lumos")
        hive = conn.execute(sa.text("SELECT count(*) FROM runs r JOIN apps a ON a.app_id = r.app_id "
                                    "WHERE a.name = 'hive_query_small'")).scalar()
        assert hive == len(VMS)
        # every finite numeric cell of every trace is a sample (IFACE and the garbage cell are not)
        cells = conn.execute(sa.text("SELECT count(*) FROM trace_samples")).scalar()
        phases = conn.execute(sa.text("SELECT count(*) FROM phases WHERE method = 'whole' AND weight = 1")).scalar()
        metrics = {r[0] for r in conn.execute(sa.text("SELECT DISTINCT metric FROM trace_samples"))}
        sources = {r[0] for r in conn.execute(sa.text("SELECT DISTINCT source FROM signatures"))}
        meta = json.loads(conn.execute(sa.text("SELECT meta_json FROM traces LIMIT 1")).scalar())
    traces = [read_sar_csv(p) for p in (root / "1 second").rglob("sar.csv")
              if (p.parent / "report.json").read_text().startswith('{"completed": true')]
    finite = sum(int(np.isfinite(t.values).sum()) for t in traces)
    assert finite == sum(t.values.size for t in traces) - 1                 # the 'n/a' cell is not a number
    assert cells == finite
    assert phases == summary.traces_added
    assert {"tps", "tps#2", "%user", "runq-sz"} <= metrics and "IFACE" not in metrics
    assert sources == {"sar", "meta"}
    assert meta["cloud"] == "synth" and "report" in meta


def test_import_is_idempotent_across_layouts(tmp_path):
    root = make_dataset(tmp_path / "synth")
    reg = open_registry(f"duckdb:///{tmp_path / 'r.duckdb'}")
    first = import_lumos(reg, root)
    counts = [_count(reg, f"SELECT count(*) FROM {t}") for t in ("nodes", "apps", "runs", "traces", "trace_samples",
                                                                 "signatures")]
    again = import_lumos(reg, root)
    flat = import_lumos(reg, root / "1 second", cloud="synth")   # the same runs, through the other layout
    assert again.runs_added == again.traces_added == flat.runs_added == flat.traces_added == 0
    assert again.already_present == first.runs_added
    assert counts == [_count(reg, f"SELECT count(*) FROM {t}") for t in ("nodes", "apps", "runs", "traces",
                                                                         "trace_samples", "signatures")]


def test_flat_layout_takes_the_cloud_from_the_parent_of_an_interval_folder(tmp_path):
    root = make_dataset(tmp_path / "mycloud", n_apps=4, quirks=False)
    name, runs = discover(root / "1 second")
    assert name == "mycloud"
    assert {r.vm for r in runs} == set(VMS)
    flat = make_dataset(tmp_path / "plain", n_apps=4, interval_folder=False, quirks=False)
    name, runs = discover(flat, cloud="other")
    assert name == "other"
    reg = open_registry(f"duckdb:///{tmp_path / 'r.duckdb'}")
    summary = import_lumos(reg, flat)
    assert summary.cloud == "plain"
    assert _count(reg, "SELECT count(*) FROM nodes WHERE name LIKE 'plain/%'") == len(VMS)
    assert _count(reg, "SELECT min(interval_s) FROM traces") == 1.0      # from the timestamps


def test_discover_refuses_folders_without_runs(tmp_path):
    (tmp_path / "empty" / "vm" / "nothing").mkdir(parents=True)
    with pytest.raises(UserError, match="no Lumos runs"):
        discover(tmp_path / "empty")
    with pytest.raises(UserError, match="not a directory"):
        discover(tmp_path / "missing")


@both_backends
def test_cli_import_lumos(cli, tmp_path):
    root = make_dataset(tmp_path / "synth", n_apps=4)
    result = cli("import", "lumos", str(root), "--json")
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert out["cloud"] == "synth" and out["runs_added"] > 0 and out["skipped"]["incomplete run"] == 1
    table = cli("import", "lumos", str(root), "--cloud", "synth")
    assert table.code == 0 and "already_present" in table.out
    # and evaluated, on this backend (tests/test_evaluate.py checks the figures themselves)
    report = cli("evaluate", "--base", BASE, "--models", "similarity", "--json")
    assert report.code == 0, report.err
    assert json.loads(report.out)["apps"] == 5
    assert_one_line_error(cli("import", "lumos", str(tmp_path / "nope")), "not a directory")
    assert_one_line_error(cli("import", "lumos", str(root), "--cloud", "bad/name"), "cloud name")


def test_base_signature_reflects_the_parallel_fraction(tmp_path):
    """The synthetic apps differ by parallel fraction: the base trace must show it (what the models use)."""
    root = make_dataset(tmp_path / "synth", n_apps=6, quirks=False)
    reg = open_registry(f"duckdb:///{tmp_path / 'r.duckdb'}")
    import_lumos(reg, root)
    with reg.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT a.name, avg(s.value) FROM signatures s
            JOIN phases p ON p.phase_id = s.owner_id JOIN traces t ON t.trace_id = p.trace_id
            JOIN apps a ON a.app_id = t.app_id JOIN nodes n ON n.node_id = t.node_id
            WHERE n.name = :base AND s.source = 'sar' AND s.metric = 'cpu_sat_frac'
            GROUP BY a.name"""), {"base": f"synth/{BASE}"}).fetchall()
    sat = dict(rows)
    p = {a: v[0] for a, v in apps(6).items()}
    names = sorted(sat)
    assert np.corrcoef([sat[a] for a in names], [p[a] for a in names])[0, 1] > 0.9
