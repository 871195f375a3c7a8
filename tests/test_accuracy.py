"""`nodereg accuracy`: stored predictions against measured runs (errors, ranking, summary per model)."""

import json
import sys
from datetime import timedelta

import pandas as pd
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends

from registry.accuracy import assess
from registry.apps import ensure_app
from registry.db import open_registry, utcnow
from registry.db.write import insert_rows, new_uid
from registry.errors import UserError
from registry.inventory import collect
from registry.nodes import ensure_node
from registry.io.tracefile import Trace
from registry.runs import add_run
from registry.trace import store

PY = sys.executable


def _frame(rows, traced=None):
    """Rows as `load` reads them; `traced`: the traced run's time by trace uid."""
    columns = ["app", "trace_uid", "base_node", "node", "model_name", "model_version", "threads", "predicted_s",
               "low_s", "high_s", "runs", "measured_s", "min_s", "max_s"]
    return pd.DataFrame([{**dict(zip(columns, r)), "traced_s": (traced or {}).get(r[1])} for r in rows])


def test_errors_ranking_and_summary_of_crafted_sets():
    # app a: base b (predicted = traced), n1 predicted fastest but measured slowest; app c: one target;
    # app d: four targets in the right order
    frame = _frame([
        ("a", "t1", "b", "b", "sim", "1", 2, 10.0, None, None, 3, 10.0, 9.0, 11.0),
        ("a", "t1", "b", "n1", "sim", "1", 1, 5.0, None, None, 3, 20.0, 19.0, 21.0),
        ("a", "t1", "b", "n2", "sim", "1", 4, 8.0, None, None, 1, 16.0, 16.0, 16.0),
        ("a", "t1", "b", "n3", "sim", "1", 4, 9.0, None, None, None, None, None, None),  # not measured
        ("c", "t2", "b", "b", "sim", "1", 2, 4.0, None, None, 2, 4.0, 4.0, 4.0),
        ("c", "t2", "b", "n1", "sim", "1", 1, 9.0, None, None, 2, 6.0, 5.0, 7.0),
        ("c", "t3", "b", "n1", "other", None, 1, 9.0, None, None, 2, 6.0, 5.0, 7.0),
        ("d", "t4", "b", "b", "sim", "1", 2, 1.0, None, None, 1, 50.0, 50.0, 50.0),  # the base: never ranked
        *[("d", "t4", "b", f"n{i}", "sim", "1", 2, float(i), None, None, 1, float(i), float(i), float(i))
          for i in range(1, 5)],
    ], traced={"t1": 12.0})
    result = assess(frame)
    cells = result.cells.set_index(["app", "model_name", "node"])
    assert len(cells) == 11 and ("a", "sim", "n3") not in cells.index
    assert cells.loc[("a", "sim", "n1"), "error"] == pytest.approx(-0.75)
    assert cells.loc[("a", "sim", "n1"), "spread"] == pytest.approx(0.1)
    assert bool(cells.loc[("a", "sim", "b"), "base"]) and not bool(cells.loc[("a", "sim", "n1"), "base"])
    # the traced run (12 s) against the base node's measured median (10 s); not a base row: no gap
    assert cells.loc[("a", "sim", "b"), "traced_gap"] == pytest.approx(0.2)
    assert pd.isna(cells.loc[("a", "sim", "n1"), "traced_gap"]) and pd.isna(cells.loc[("c", "sim", "b"), "traced_gap"])
    sets = result.sets.set_index(["app", "model_name"])
    # two targets: n1 predicted fastest, measured slowest; Spearman over 2 nodes is +-1 by construction: n/a
    assert sets.loc[("a", "sim"), "nodes"] == 2 and pd.isna(sets.loc[("a", "sim"), "spearman"])
    assert not sets.loc[("a", "sim"), "top1"] and sets.loc[("a", "sim"), "regret"] == pytest.approx(0.25)
    assert sets.loc[("c", "sim"), "top1"] is None and sets.loc[("c", "other"), "top1"] is None   # one target
    assert sets.loc[("d", "sim"), "nodes"] == 4 and sets.loc[("d", "sim"), "spearman"] == pytest.approx(1.0)
    assert sets.loc[("d", "sim"), "top1"] and sets.loc[("d", "sim"), "regret"] == pytest.approx(0.0)
    summary = result.summary.set_index("model_name")
    sim = summary.loc["sim"]
    # errors of the non-base cells only: |-0.75|, |-0.5|, |+0.5| and d's four exact ones
    assert (sim["cells"], sim["apps"]) == (7, 3)
    assert sim["median_abs_error"] == pytest.approx(0.0) and sim["worst_abs_error"] == pytest.approx(0.75)
    assert sim["median_spearman"] == pytest.approx(1.0) and sim["top1_rate"] == pytest.approx(0.5)
    assert sim["mean_regret"] == pytest.approx(0.125)
    other = summary.loc["other"]
    assert other["model_version"] == "" and other["cells"] == 1 and pd.isna(other["top1_rate"])


def test_predictions_without_any_run_are_an_error():
    with pytest.raises(UserError, match="no measured runs match the stored predictions of a"):
        assess(_frame([("a", "t1", "b", "n1", "sim", "1", 1, 5.0, None, None, None, None, None, None)]))


def _registry(db_url):
    """Nodes base and other (CPU 0 of this host), an app `sleepy` and two prediction sets of the
    similarity model (an older one that must be ignored) plus one of another model."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ids = {n: ensure_node(conn, n, collect([0])) for n in ("base", "other")}
        app_id = ensure_app(conn, "sleepy")
        old, new = utcnow() - timedelta(hours=1), utcnow()
        rows = []
        for model, version, created, times in (("similarity", "2", old, {"base": 0.2, "other": 99.0}),
                                               ("similarity", "3", new, {"base": 0.2, "other": 0.5}),
                                               ("gbt", "1", new, {"base": 0.2, "other": 0.1})):
            rows += [{"uid": new_uid(), "trace_id": None, "app_id": app_id, "node_id": ids[n],
                      "base_node_id": ids["base"], "model_name": model, "model_version": version, "threads": 1,
                      "predicted_s": t, "node_rank": None, "created_at": created} for n, t in times.items()]
        # a node of 2 CPUs where the app's phases were projected at 1 thread (they did not keep the base
        # busy): the app still runs there with 2 threads, as `nodereg run` measures it
        ids["pair"] = ensure_node(conn, "pair", collect([0]))
        conn.execute(sa.text("UPDATE nodes SET n_cpus = 2 WHERE name = 'pair'"))
        rows.append({**rows[-3], "uid": new_uid(), "node_id": ids["pair"], "predicted_s": 0.3})
        insert_rows(conn, "predictions", rows)
        add_run(conn, "sleepy", "base", 2, 50.0)  # another thread count: never compared
        add_run(conn, "sleepy", "pair", 2, 0.3)
        add_run(conn, "sleepy", "pair", 1, 9.0)   # not how the app runs on a 2-CPU node
    reg.close()


@both_backends
def test_accuracy_of_stored_predictions_against_nodereg_run(cli, db_url):
    _registry(db_url)
    assert_one_line_error(cli("accuracy", "--model", "gbt"), "no measured runs match", "nodereg run NODE")
    assert cli("runs", "add", "--new", "sleepy", "base", "--threads", "1", "--time", "0.25").code == 0
    res = cli("run", "other", "--name", "sleepy", "--repeat", "2", "--", PY, "-c", "import time; time.sleep(0.4)")
    assert res.code == 0, res.err
    res = cli("accuracy", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    cells = {(c["model_name"], c["node"]): c for c in doc["cells"]}
    assert set(cells) == {("similarity", "base"), ("similarity", "other"), ("similarity", "pair"), ("gbt", "base"),
                          ("gbt", "other")}
    assert (cells[("similarity", "pair")]["threads"], cells[("similarity", "pair")]["measured_s"]) == (2, 0.3)
    # v_predictions compares by the same rule (schema 13): the 2-thread run, not the 1-thread one (9.0 s)
    reg = open_registry(db_url)
    with reg.connect() as conn:
        view = conn.execute(sa.text("SELECT threads, measured_runs, measured_s FROM v_predictions "
                                    "WHERE node = 'pair'")).all()
    reg.close()
    assert [tuple(v) for v in view] == [(1, 1, 0.3)]
    other = cells[("similarity", "other")]
    assert other["model_version"] == "3" and other["runs"] == 2 and other["threads"] == 1
    assert 0.4 <= other["measured_s"] < 2.0
    assert other["error"] == pytest.approx((0.5 - other["measured_s"]) / other["measured_s"])
    assert cells[("similarity", "base")]["measured_s"] == 0.25 and cells[("similarity", "base")]["base"]
    summary = {s["model_name"]: s for s in doc["summary"]}
    assert summary["similarity"]["cells"] == 2 and summary["similarity"]["top1_rate"] == 1.0
    assert summary["gbt"]["top1_rate"] is None     # one target besides the base: nothing to rank
    res = cli("accuracy", "sleepy", "--model", "gbt", "--json")
    assert {s["model_name"] for s in json.loads(res.out)["summary"]} == {"gbt"}
    res = cli("accuracy", "sleepy")
    assert res.code == 0 and "summary" in res.out and "sleepy" in res.out
    assert "nan" not in res.out   # no trace stored: no traced_gap, shown as nothing
    assert_one_line_error(cli("accuracy", "nope"), "unknown app 'nope'")
    assert_one_line_error(cli("accuracy", "--model", "corredor"), "no stored predictions for model 'corredor'")


@both_backends
def test_only_later_runs_of_the_same_input_check_a_prediction(cli, db_url):
    """A run made before the prediction (it may have been its input) or on another input checks
    nothing, unless --all-runs takes the earlier ones."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ids = {n: ensure_node(conn, n, collect([0])) for n in ("base", "other")}
        app_id = ensure_app(conn, "sleepy")
        trace_id = store.save(conn, Trace(name="sleepy", node="base", host="h", command=["sleepy"], exit_status=0,
                                          status="ok", wall_s=1.0, interval_s=0.1, started_at=utcnow().isoformat(),
                                          sources=[], phases=[], meta={"input": "small"}))[0]
        add_run(conn, "sleepy", "other", 1, 7.0)                          # before the prediction
        made = utcnow() + timedelta(seconds=1)
        insert_rows(conn, "predictions", [{
            "uid": new_uid(), "trace_id": trace_id, "app_id": app_id, "node_id": ids[n], "base_node_id": ids["base"],
            "model_name": "similarity", "model_version": "3", "threads": 1, "predicted_s": t, "node_rank": None,
            "created_at": made} for n, t in (("base", 1.0), ("other", 2.0))])
    reg.close()
    assert_one_line_error(cli("accuracy"), "no measured runs match")
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE runs SET created_at = :t"), {"t": made + timedelta(seconds=1)})
        add_run(conn, "sleepy", "other", 1, 9.0, input_label="large")     # another input, later
        conn.execute(sa.text("UPDATE runs SET created_at = :t WHERE input = 'large'"),
                     {"t": made + timedelta(seconds=2)})
        add_run(conn, "sleepy", "other", 1, 3.0, input_label="small")
        conn.execute(sa.text("UPDATE runs SET created_at = :t WHERE time_s = 3.0"), {"t": made - timedelta(hours=1)})
    reg.close()
    cells = {c["node"]: c for c in json.loads(cli("accuracy", "--json").out)["cells"]}
    assert (cells["other"]["runs"], cells["other"]["measured_s"]) == (1, 7.0)        # unknown input: compared
    cells = {c["node"]: c for c in json.loads(cli("accuracy", "--json", "--all-runs").out)["cells"]}
    assert (cells["other"]["runs"], cells["other"]["measured_s"]) == (2, 5.0)        # + the earlier 'small' one
