"""Measured runs: adding, CSV import (all or nothing), loading."""

import pytest
import sqlalchemy as sa

from registry.db import open_registry
from registry.errors import UserError
from registry.nodes import ensure_node
from registry.runs import add_run, import_runs_csv, list_runs, load_runs


@pytest.fixture
def registry(tmp_path):
    reg = open_registry(f"duckdb:///{tmp_path / 'runs.duckdb'}")
    yield reg
    reg.close()


def count(reg, table: str) -> int:
    with reg.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def write(tmp_path, text: str, name: str = "runs.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_add_run_creates_app_and_node_and_validates(registry):
    with registry.begin() as conn:
        uid = add_run(conn, "lu", "n1", 4, 12.5)
        add_run(conn, "lu", "n1", "4", "12.7")               # same app/node: reused, repetition kept
        ensure_node(conn, "n2")
        add_run(conn, "lu", "n2", 8, 7.0)                     # a node that existed already
    assert len(uid) == 36
    assert count(registry, "apps") == 1 and count(registry, "nodes") == 2 and count(registry, "runs") == 3
    with registry.connect() as conn:
        source = conn.execute(sa.text("SELECT source FROM nodes WHERE name = 'n1'")).scalar_one()
        assert source == "runs"
        frame = load_runs(conn, "lu", "n1")
    assert frame.threads.tolist() == [4, 4] and frame.time_s.tolist() == [12.5, 12.7]
    with registry.begin() as conn:
        for threads, time_s, msg in ((0, 1.0, "threads"), ("x", 1.0, "threads"), (2, -1, "time_s"),
                                     (2, "nan", "time_s"), (2, "fast", "time_s")):
            with pytest.raises(UserError, match=msg):
                add_run(conn, "lu", "n1", threads, time_s)


def test_csv_import_keeps_repetitions_and_creates_apps_and_nodes(registry, tmp_path):
    path = write(tmp_path, "app,node,threads,time_s,comment\n"
                           "lu,n1,1,100,first\nlu,n1,2,52,\nlu,n1,2,51.5,\ncg,n2,4,9.5,x\n")
    with registry.begin() as conn:
        summary = import_runs_csv(conn, path)
    assert summary.runs == 4 and summary.apps_created == ["lu", "cg"] and summary.nodes_created == ["n1", "n2"]
    with registry.connect() as conn:
        rows = list_runs(conn, app="lu")
        assert [(r["threads"], r["time_s"], r["source"]) for r in rows] == [(1, 100.0, "csv"), (2, 52.0, "csv"),
                                                                            (2, 51.5, "csv")]
        assert len({r["uid"] for r in list_runs(conn)}) == 4


def test_csv_import_is_idempotent_and_keeps_the_input(registry, tmp_path):
    text = "app,node,threads,time_s,input\nlu,n1,2,52,small\nlu,n1,2,52,small\nlu,n1,2,52,\n"
    path = write(tmp_path, text)
    with registry.begin() as conn:
        assert import_runs_csv(conn, path).runs == 3       # identical rows in one file are repetitions
    with registry.begin() as conn:
        again = import_runs_csv(conn, path)
    assert (again.runs, again.already) == (0, 3) and count(registry, "runs") == 3
    grown = write(tmp_path, text + "lu,n1,2,52,small\ncg,n2,1,3,\n", "grown.csv")
    with registry.begin() as conn:
        assert import_runs_csv(conn, grown).runs == 2
    assert count(registry, "runs") == 5
    with registry.connect() as conn:
        inputs = conn.execute(sa.text("SELECT input, count(*) FROM runs GROUP BY input ORDER BY input")).all()
    assert [tuple(r) for r in inputs] == [("small", 3), (None, 2)]


def test_a_workload_is_its_command_and_named_files(tmp_path):
    from registry.workload import identity, same_input

    data = write(tmp_path, "x" * 10, "in.dat")
    argv = ["./app", "-n", "3", str(data)]
    assert identity(argv) == identity(list(argv)) and identity(argv).startswith("cmd:")
    assert identity(argv) != identity(["./app", "-n", "4", str(data)])
    first = identity(argv)
    data.write_text("x" * 20)                                # another input file behind the same name
    assert identity(argv) != first
    assert identity(argv, "large") == "large"
    with pytest.raises(UserError, match="input"):
        identity(argv, " ")
    assert same_input(None, "a") and same_input("a", "a") and not same_input("a", "b")


@pytest.mark.parametrize(("text", "message"), [
    ("app,node,threads\nlu,n1,1\n", "lacks the column time_s"),
    ("app,node,threads,time_s\nlu,n1,1,10\nlu,n1,two,5\n", "line 3: threads must be a whole number"),
    ("app,node,threads,time_s\nlu,n1,1,10\nlu,n1,2,-5\n", "line 3: time_s must be a number of seconds > 0"),
    ("app,node,threads,time_s\nlu,n1,1,10,extra\n", "line 2: expected 4 fields"),
    ("app,node,threads,time_s\nlu,n1,1\n", "line 2: expected 4 fields"),
    ("app,node,threads,time_s\n,n1,1,10\n", "line 2: the app name must not be empty"),
    ("app,node,threads,time_s\n", "no runs in the file"),
    ("", "lacks the columns app, node, threads, time_s"),
])
def test_malformed_csv_is_one_clear_error_and_writes_nothing(registry, tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as exc, registry.begin() as conn:
        import_runs_csv(conn, path)
    assert message in str(exc.value) and str(path) in str(exc.value)
    assert count(registry, "runs") == 0 and count(registry, "apps") == 0 and count(registry, "nodes") == 0


def test_unreadable_csv(registry, tmp_path):
    with registry.begin() as conn, pytest.raises(UserError, match="no such file"):
        import_runs_csv(conn, tmp_path / "missing.csv")
    bad = tmp_path / "bin.csv"
    bad.write_bytes(b"app,node\xff\xfe,threads\n")
    with registry.begin() as conn, pytest.raises(UserError, match="UTF-8"):
        import_runs_csv(conn, bad)


def test_load_runs_names_what_is_missing(registry):
    with registry.begin() as conn:
        add_run(conn, "lu", "n1", 4, 12.5)
        ensure_node(conn, "n2")
    with registry.connect() as conn:
        with pytest.raises(UserError, match="unknown app 'cg' \\(known: lu\\)"):
            load_runs(conn, "cg", "n1")
        with pytest.raises(UserError, match="unknown node 'n9'"):
            load_runs(conn, "lu", "n9")
        with pytest.raises(UserError, match="no runs of 'lu' on 'n2'"):
            load_runs(conn, "lu", "n2")


def test_the_base_time_takes_only_runs_of_the_traced_input(cli, db_url):
    import json

    from registry_data import three_node_registry, three_phase_trace

    trace = three_phase_trace()
    trace.meta["input"] = "small"
    three_node_registry(db_url, trace)
    for time_s, label in (("19", "small"), ("23", None), ("400", "large"), ("500", "large")):
        args = ["runs", "add", "app", "b", "--threads", "2", "--time", time_s]
        assert cli(*args, *(["--input", label] if label else [])).code == 0
    doc = json.loads(cli("match", "app", "--json", "--no-store").out)
    assert doc["base_time_s"] == 21.0               # median of 21 (traced), 19 and 23: not the large input's
