"""The quick start of read-only listings (issue 30, item 7): a DuckDB registry read through DuckDB's
own module (registry/db/duckread.py) gives what the SQLAlchemy path gives, and steps aside for
anything it does not handle; plain option values read without pydantic (registry/cli/coerce.py)
keep typer's meaning and, for a bad value, typer's error."""

import pytest
import sqlalchemy as sa

from conftest import assert_one_line_error
from registry.cli import coerce
from registry.db import duckread, migrations, open_registry
from registry.nodes import ensure_node

# a `::` cast, a `:name` parameter used twice, and one inside a comparison
SQL = """SELECT name, n_cpus, n_cpus::VARCHAR AS cpus_text, :tag AS tag, created_at
FROM nodes WHERE name <> :skip AND (:tag IS NOT NULL) ORDER BY name"""


@pytest.fixture
def registry_file(tmp_path):
    path = tmp_path / "reg.duckdb"
    reg = open_registry(str(path))
    with reg.begin() as conn:
        for name, cpus in (("a", 2), ("b", 4), ("c", None)):
            node = ensure_node(conn, name)
            conn.execute(sa.text("UPDATE nodes SET n_cpus = :n WHERE node_id = :id"), {"n": cpus, "id": node})
    reg.close()
    return path


def test_the_quick_reader_returns_what_the_sqlalchemy_path_returns(registry_file):
    params = {"skip": "b", "tag": "x"}
    reg = open_registry(str(registry_file), readonly=True)
    expected = reg.dicts(SQL, params)
    reg.close()
    quick = duckread.open_current(str(registry_file))
    assert quick is not None
    try:
        got = quick.dicts(SQL, params)
    finally:
        quick.close()
    assert got == expected
    assert [(r["name"], r["cpus_text"], r["tag"]) for r in got] == [("a", "2", "x"), ("c", None, "x")]


def test_the_quick_reader_steps_aside_for_what_it_does_not_handle(tmp_path, registry_file):
    older = tmp_path / "older.duckdb"
    older.write_bytes(registry_file.read_bytes())
    reg = open_registry(str(older))
    with reg.begin() as conn:
        conn.execute(sa.text("DELETE FROM schema_version WHERE version = (SELECT max(version) FROM schema_version)"))
    reg.close()
    foreign = tmp_path / "foreign.duckdb"
    foreign.write_text("not a database")
    for named in (str(older), str(foreign), str(tmp_path / "missing.duckdb"), "postgresql://u@h/db",
                  f"duckdb:///{registry_file}?access_mode=read_only", "duckdb:///:memory:",
                  f"duckdb:///{older}", f"duckdb:///{str(registry_file).lstrip('/')}"):   # relative: not there
        assert duckread.open_current(named) is None, named


def test_a_plain_duckdb_url_reads_as_quickly_as_the_path(registry_file, monkeypatch):
    """`--db duckdb:////abs/reg.duckdb` (SQLAlchemy's form) is the same file as the path: read without
    SQLAlchemy's 0.4 s of imports, relative URLs as SQLAlchemy reads them (from the working directory)."""
    monkeypatch.chdir(registry_file.parent)
    for named in (f"duckdb:///{registry_file}", "duckdb:///reg.duckdb"):
        quick = duckread.open_current(named)
        assert quick is not None, named
        try:
            assert [r["name"] for r in quick.dicts("SELECT name FROM nodes ORDER BY name")] == ["a", "b", "c"]
        finally:
            quick.close()


def test_nodes_reads_an_older_duckdb_registry_the_usual_way(cli, tmp_path, monkeypatch):
    """A file a schema behind is opened by open_registry, which migrates it on open and says so."""
    shipped = migrations.available()
    monkeypatch.setattr(migrations, "available", lambda: shipped[:-1])
    path = tmp_path / "older.duckdb"
    reg = open_registry(str(path))
    with reg.begin() as conn:
        ensure_node(conn, "a")
    reg.close()
    monkeypatch.setattr(migrations, "available", lambda: shipped)
    res = cli("--db", str(path), "nodes", "--json")
    assert res.code == 0 and "migrating registry" in res.err
    assert '"name": "a"' in res.out


def test_plain_values_read_as_typer_reads_them():
    assert [coerce.read(int, v) for v in ("5", "-3", 7)] == [5, -3, 7]
    assert [coerce.read(float, v) for v in ("2", "2.5", ".5", 10)] == [2.0, 2.5, 0.5, 10.0]
    assert coerce.read(str, "x") == "x" and coerce.read(bool, False) is False
    # anything else goes to typer's adapter
    for kind, value in ((int, "5.0"), (int, " 5"), (int, "1_000"), (float, "1e3"), (float, "nan"), (int, True)):
        assert coerce.read(kind, value) is coerce._UNREAD, (kind, value)


def test_option_values_keep_their_meaning_and_their_errors(cli, db_url):
    for name, cpus in (("small", 2), ("big", 8)):
        cli("runs", "add", "app", name, "--threads", "1", "--time", "1", "--new")
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for name, cpus in (("small", 2), ("big", 8)):
            conn.execute(sa.text("UPDATE nodes SET n_cpus = :n WHERE name = :name"), {"n": cpus, "name": name})
    reg.close()
    res = cli("nodes", "--min-vcpus", "4", "--json")
    assert res.code == 0 and '"big"' in res.out and '"small"' not in res.out
    assert_one_line_error(cli("nodes", "--min-vcpus", "-1"), "--min-vcpus", "greater than or equal to 0")
    assert_one_line_error(cli("nodes", "--min-vcpus", "four"), "--min-vcpus", "valid integer")
    assert_one_line_error(cli("--wait", "soon", "nodes"), "--wait", "valid number")


def test_a_postgresql_server_that_cannot_be_reached_is_tried_once(cli, monkeypatch):
    """The PostgreSQL quick reader (registry/db/pgread.py) says a failed connection in one line at
    once; before, the usual open tried the same server again (a host that drops packets made the
    user wait twice for libpq's connect timeout)."""
    import psycopg

    tries = []

    def refused(*args, **kwargs):
        tries.append(args)
        raise psycopg.OperationalError("connection to server at \"127.0.0.1\", port 5999 failed: Connection refused")

    monkeypatch.setattr(psycopg, "connect", refused)
    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(lambda cls, *a, **k: refused(*a)))
    res = cli("--db", "postgresql://someone:secret@localhost:5999/none", "nodes")
    assert res.code == 1 and len(tries) == 1, (res, tries)
    assert res.err.startswith("error: database error (postgresql+psycopg://someone:***@localhost:5999/none)")
    assert "Connection refused" in res.err and "secret" not in res.err and len(res.err.strip().splitlines()) == 1
