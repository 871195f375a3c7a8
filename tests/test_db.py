"""Registry opening: URL choice, first-use creation, migrations, version refusal, bad files."""

import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends

from registry.db import open_registry, resolve_url
from registry.db.migrate import available


def test_url_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("NODEREG_DB", f"duckdb:///{tmp_path}/env.duckdb")
    assert resolve_url(None).database.endswith("env.duckdb")
    assert resolve_url(f"duckdb:///{tmp_path}/cli.duckdb").database.endswith("cli.duckdb")
    assert resolve_url(str(tmp_path / "bare.duckdb")).get_backend_name() == "duckdb"
    monkeypatch.delenv("NODEREG_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_url(None).database == str(tmp_path / "xdg" / "nodereg" / "registry.duckdb")
    assert resolve_url("postgresql://u:secret@h/db").drivername == "postgresql+psycopg"


def test_default_registry_is_created_on_first_use(tmp_path, monkeypatch, cli):
    monkeypatch.delenv("NODEREG_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    res = cli("init")
    assert res.code == 0, res.err
    assert (tmp_path / "xdg" / "nodereg" / "registry.duckdb").exists()


@both_backends
def test_migrations_record_versions_and_views_exist(db_url):
    reg = open_registry(db_url)
    with reg.connect() as conn:
        versions = [r[0] for r in conn.execute(sa.text("SELECT version FROM schema_version ORDER BY version"))]
        assert versions == [m.version for m in available()]   # numbers may have gaps (parallel lines of work)
        for view in ("nodes", "v_profile", "v_nodes", "v_runs", "v_predictions", "v_phases", "v_host_profile",
                     "v_hosts",
                     "v_run_batches", "v_node_prices"):
            conn.execute(sa.text(f"SELECT * FROM {view} WHERE 1 = 0"))
    reg.close()
    reopened = open_registry(db_url)  # idempotent: nothing re-applied
    with reopened.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM schema_version")).scalar() == len(available())
    reopened.close()


@both_backends
def test_newer_schema_is_refused(db_url, cli):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("INSERT INTO schema_version (version, name, applied_at, tool_version) VALUES (999, 'future', now(), '9.9')"))
    reg.close()
    assert_one_line_error(cli("nodes"), "schema version 999", "upgrade nodereg")
    assert_one_line_error(cli("init"), "schema version 999")


def test_bad_urls_and_files(cli, tmp_path):
    assert_one_line_error(cli("--db", "foo://x", "nodes"), "unsupported registry backend")
    assert_one_line_error(cli("--db", "duckdb:////proc/nope/x.duckdb", "init"), "error")
    bad = tmp_path / "bad.duckdb"
    bad.write_text("this is not a database")
    assert_one_line_error(cli("--db", str(bad), "nodes"), "not a valid DuckDB database")
    assert_one_line_error(cli("--db", str(tmp_path), "nodes"), "is a directory")


def test_password_is_never_printed(cli):
    res = cli("--db", "postgresql://user:hunter2@127.0.0.1:1/db", "nodes")
    assert res.code != 0
    assert "hunter2" not in res.err + res.out
