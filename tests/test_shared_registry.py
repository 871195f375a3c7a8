"""A shared registry never surprises its site (issue 30): reads that never write, schema changes only
by `nodereg migrate`, checksummed and saved-first migrations, exports from one snapshot, bounded
bundle imports, a lock per trace when predictions are stored, and `nodes rm` keeping other nodes'
history."""

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends, fetch_rows, set_up_reader
from registry_data import populate, three_node_registry, three_phase_trace

from registry.db import migrate, migrations, open_registry
from registry.db.relations import SPECS
from registry.doctor import check
from registry.io import bundle as bundle_mod

PY = sys.executable


def _version(url: str) -> int:
    return fetch_rows(url, "SELECT max(version) AS v FROM schema_version")[0]["v"]


def _at_version(url: str, version: int) -> None:
    """A registry as a nodereg whose newest migration was `version` left it."""
    reg = open_registry(url, migrate=False)
    migrate.migrate(reg.engine, target=version)
    reg.close()


def _populated(url: str, **kw) -> dict:
    reg = open_registry(url)
    with reg.begin() as conn:
        ids = populate(conn, **kw)
    reg.close()
    return ids


# --- reads never write -----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("sql", "SELECT 1"), ("nodes",), ("match", "app", "--no-store"), ("accuracy",),
                                  ("report", "node", "n1"), ("doctor",), ("export", "out.zip")])
def test_a_read_creates_no_registry(cli, tmp_path, args):
    path = tmp_path / "typo.duckdb"
    assert_one_line_error(cli("--db", str(path), *args), "no registry", "creates none")
    assert list(tmp_path.iterdir()) == []


def test_reads_open_read_only_beside_another_reader(cli, db_url, tmp_path):
    """Another process holds the DuckDB file open read-only: every read command still runs (a
    writable open, as `doctor` made, is refused while any other process has the file)."""
    three_node_registry(db_url)
    assert cli("match", "app").code == 0
    holder = subprocess.Popen([PY, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], read_only=True); "
                               "print('open', flush=True); time.sleep(120)", db_url.removeprefix("duckdb:///")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert "problems" in cli("doctor").out   # it ran (the fixture's profiles have no repetitions)
        for args in (("nodes",), ("sql", "SELECT count(*) FROM nodes"), ("match", "app", "--no-store"),
                     ("report", "node", "b", "--out", str(tmp_path / "b.html")), ("export", str(tmp_path / "e"))):
            res = cli(*args)
            assert res.code == 0, (args, res.err)
        assert "no measured runs" in cli("accuracy").err   # read, and found nothing to compare
    finally:
        holder.kill()
        holder.wait()


@both_backends
def test_sql_is_stopped_by_the_database_after_its_timeout(cli, db_url):
    assert cli("init").code == 0
    set_up_reader(db_url)
    slow = ("SELECT 1 AS x FROM pg_sleep(30)" if db_url.startswith("postgresql") else
            "SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000000) b")
    started = time.monotonic()
    assert_one_line_error(cli("sql", slow, "--timeout", "1"), "longer than 1 s", "--timeout")
    assert time.monotonic() - started < 25
    assert cli("sql", "SELECT 1 AS one", "--timeout", "5", "-f", "csv").out.splitlines() == ["one", "1"]


@both_backends
def test_sql_refuses_more_rows_than_allowed(cli, db_url):
    assert cli("init").code == 0
    set_up_reader(db_url)
    query = "SELECT i FROM generate_series(1, 100) AS t(i)"
    assert_one_line_error(cli("sql", query, "--max-rows", "10"), "more than 10 rows", "--max-rows")
    out = cli("sql", query, "--max-rows", "100", "-f", "csv")
    assert out.code == 0 and len(out.out.splitlines()) == 101


# --- migrations a site can plan ----------------------------------------------------------------------

def test_postgres_schema_changes_only_by_migrate(cli, pg_database):
    """An older PostgreSQL registry: reads go on (saying so), writes and `match` say how to migrate,
    nothing migrates it but `nodereg migrate`; its dry run changes nothing."""
    url = pg_database
    assert_one_line_error(cli("--db", url, "runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new"),
                          "no nodereg registry yet", "init")
    assert_one_line_error(cli("--db", url, "nodes"), "no nodereg registry yet")
    _at_version(url, 13)
    listing = cli("--db", url, "nodes")
    assert listing.code == 0 and "schema version 13" in listing.err and "migrate" in listing.err
    assert_one_line_error(cli("--db", url, "accuracy"), f"needs schema version {migrate.latest_version()}",
                          "has 13", "migrate")
    assert_one_line_error(cli("--db", url, "match", "app", "--no-store"), "needs schema version")
    assert_one_line_error(cli("--db", url, "runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new"),
                          "schema version 13", "nodereg --db", "migrate")
    assert cli("--db", url, "doctor").code == 1   # reads; reports the drift
    dry = cli("--db", url, "migrate", "--dry-run")
    assert dry.code == 0 and "0014_imported_suites.sql" in dry.out and "nothing was changed" in dry.out
    assert _version(url) == 13
    done = cli("--db", url, "migrate")
    assert done.code == 0 and f"from schema 13 to {migrate.latest_version()}" in done.out
    assert cli("--db", url, "runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new").code == 0
    assert cli("--db", url, "doctor").code == 0


@both_backends
def test_applied_migrations_carry_checksums_and_a_changed_file_is_refused(cli, db_url, tmp_path, monkeypatch):
    assert cli("init").code == 0
    recorded = {r["version"]: r["checksum"] for r in fetch_rows(db_url, "SELECT version, checksum FROM schema_version")}
    assert recorded == {m.version: m.checksum for m in migrate.available()}
    original = migrate.available()
    views = next(m for m in original if m.version == 2)

    def shipped_with(text: str) -> None:
        changed = tmp_path / views.file
        changed.write_text(text)
        monkeypatch.setattr(migrations, "available", lambda: [dataclasses.replace(m, path=changed) if m is views else m
                                                           for m in original])

    shipped_with("-- a reworded comment\n" + views.path.read_text())
    assert cli("migrate").code == 0 and cli("doctor").code == 0   # the same statements
    shipped_with(views.path.read_text().replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1))
    assert_one_line_error(cli("migrate"), "0002_analyst_views.sql", "differ", "checksum")
    assert "0002_analyst_views.sql differs" in cli("doctor").out


def test_a_duckdb_file_migrates_on_open_and_saves_what_a_step_deletes(cli, db_url):
    """Migration 9 drops a table: the command that opens an older file says it migrates it and
    saves the registry first, as a bundle beside the file."""
    _at_version(db_url, 8)
    path = Path(db_url.removeprefix("duckdb:///"))
    res = cli("nodes")
    assert res.code == 0
    assert "migrating registry" in res.err and "from schema 8" in res.err and "saving the registry to" in res.err
    (backup,) = path.parent.glob(f"{path.name}.schema8-*.zip")
    with zipfile.ZipFile(backup) as zf:
        assert {"similarity_weights.parquet", "schema_version.parquet", "manifest.json"} <= set(zf.namelist())
    assert _version(db_url) == migrate.latest_version()
    imported = cli("--db", str(path.parent / "restored.duckdb"), "import", "bundle", str(backup))
    assert imported.code == 0, imported.err


def test_migrate_saves_a_postgres_registry_before_deleting_data(cli, pg_database, tmp_path):
    url = pg_database
    _at_version(url, 8)
    assert_one_line_error(cli("--db", url, "migrate", "--no-backup"), "without a backup", "--yes")
    assert _version(url) == 8
    backup = tmp_path / "before.zip"
    res = cli("--db", url, "migrate", "--backup", str(backup))
    assert res.code == 0 and str(backup) in res.out and "DROP TABLE similarity_weights" in res.out
    with zipfile.ZipFile(backup) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["schema_version"] == 8 and manifest["tables"]["similarity_weights"] > 0
    assert _version(url) == migrate.latest_version()


# --- consistent export -------------------------------------------------------------------------------

@both_backends
def test_export_is_one_snapshot_while_another_session_writes(db_url, tmp_path, monkeypatch):
    """A second node with everything hanging on it is committed after the export read `nodes`: the
    bundle must hold none of it (or all of it), and import whole."""
    _populated(db_url, node="n1", app="a1")
    reg = open_registry(db_url)
    read = bundle_mod._read_table

    def read_then_someone_writes(conn, table):
        frame = read(conn, table)
        if table == "nodes":
            writer = threading.Thread(target=lambda: _populated(db_url, node="n2", app="a2"))
            writer.start()
            writer.join()
        return frame

    monkeypatch.setattr(bundle_mod, "_read_table", read_then_someone_writes)
    with reg.connect() as conn:
        manifest = bundle_mod.export_bundle(conn, tmp_path / "b")
    reg.close()
    monkeypatch.undo()
    assert manifest["tables"]["nodes"] == 1 and manifest["tables"]["profiles"] == 1
    other = open_registry(f"duckdb:///{tmp_path / 'other.duckdb'}")
    other.write(lambda conn: bundle_mod.import_bundle(conn, tmp_path / "b"))
    with other.connect() as conn:
        counts = {s.table: conn.execute(sa.text(f"SELECT count(*) FROM {s.table}")).scalar() for s in SPECS}
        assert check(conn) == []
    other.close()
    # derived rows (packed profiles) are not in a bundle: the import packs each profile it adds
    assert counts.pop("profile_vectors") == counts["profiles"]
    assert counts == manifest["tables"]


# --- bounded import ----------------------------------------------------------------------------------

@pytest.fixture
def exported(tmp_path) -> Path:
    src = f"duckdb:///{tmp_path / 'src.duckdb'}"
    _populated(src)
    reg = open_registry(src, readonly=True)
    with reg.connect() as conn:
        bundle_mod.export_bundle(conn, tmp_path / "good.zip")
    reg.close()
    return tmp_path / "good.zip"


def _with_member(good: Path, name: str, data: bytes, out: Path) -> Path:
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item))
        dst.writestr(name, data)
    return out


def _nothing_imported(db_url) -> bool:
    return fetch_rows(db_url, "SELECT count(*) AS n FROM nodes")[0]["n"] == 0


def test_import_limits_refuse_before_unpacking(cli, db_url, exported, tmp_path):
    assert cli("init").code == 0
    bomb = _with_member(exported, "zeros.parquet", bytes(64 * 2**20), tmp_path / "bomb.zip")
    assert bomb.stat().st_size < 2**20   # 64 MiB of zeros in well under 1 MiB
    assert_one_line_error(cli("import", "bundle", str(bomb), "--max-size", "16M"), "unpacks to 64.", "--max-size")
    escape = _with_member(exported, "../escaped.parquet", b"x", tmp_path / "escape.zip")
    assert_one_line_error(cli("import", "bundle", str(escape)), "'../escaped.parquet'", "refused")
    assert not (tmp_path / "escaped.parquet").exists()
    assert_one_line_error(cli("import", "bundle", str(exported), "--max-members", "5"), "--max-members")
    assert_one_line_error(cli("import", "bundle", str(exported), "--max-rows", "9"), "trace_samples holds 10 rows")
    assert _nothing_imported(db_url)
    assert cli("import", "bundle", str(exported), "--max-rows", "10").code == 0 and not _nothing_imported(db_url)


# --- a lock per trace --------------------------------------------------------------------------------

def test_storing_predictions_locks_one_trace_not_the_table(tmp_path, pg_database):
    """While one `match` stores app's set (its transaction open), a match of another app stores at
    once; a second match of the same app waits for the first, then finds its set and stores nothing."""
    from registry.match.project import load_inputs, model_identity, project
    from registry.match.stored import inputs_digest, store_predictions
    from registry.trace import store
    from registry.trace.lookup import find_trace

    url = pg_database
    three_node_registry(url)
    reg = open_registry(url)
    with reg.begin() as conn:
        store.save(conn, dataclasses.replace(three_phase_trace(), name="other"))
    nodereg = [PY, "-m", "registry", "--db", url, "match"]
    with reg.connect() as conn:
        found = find_trace(conn, "app")
        inputs = load_inputs(conn, found, model="similarity")
        digest = inputs_digest(conn, inputs, model_identity("similarity"))
        store_predictions(conn, inputs, project(inputs), digest)   # uncommitted: its lock is held
        other = subprocess.run([*nodereg, "other"], capture_output=True, text=True, timeout=120)
        assert other.returncode == 0, other.stderr
        same = subprocess.Popen([*nodereg, "app"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert same.poll() is None   # waits for the set of its trace
        conn.commit()
    assert same.wait(timeout=120) == 0, same.stderr.read()
    sets = fetch_rows(url, "SELECT a.name, count(DISTINCT p.inputs_digest) AS sets FROM predictions p "
                           "JOIN apps a ON a.app_id = p.app_id GROUP BY a.name ORDER BY a.name")
    reg.close()
    assert [(r["name"], r["sets"]) for r in sets] == [("app", 1), ("other", 1)]


# --- history kept ------------------------------------------------------------------------------------

@both_backends
def test_removing_the_base_node_keeps_the_other_nodes_accuracy(cli, db_url):
    three_node_registry(db_url)
    assert cli("match", "app").code == 0
    assert cli("runs", "add", "app", "fast", "--threads", "2", "--time", "7").code == 0

    def fast_cell() -> dict:
        res = cli("accuracy", "--json")
        assert res.code == 0, res.err
        (cell,) = [c for c in json.loads(res.out)["cells"] if c["node"] == "fast"]
        return cell

    before = fast_cell()
    removed = cli("nodes", "rm", "b", "--yes")
    assert removed.code == 0 and "kept 2 predictions made from it" in removed.out
    after = fast_cell()
    assert (after["predicted_s"], after["measured_s"], after["error"]) == \
        (before["predicted_s"], before["measured_s"], before["error"])
    assert after["base_node"] == "(removed)"
    assert [p for p in json.loads(cli("doctor", "--json").out)["problems"] if p["kind"] == "orphan"] == []


# --- children pinned without preexec_fn --------------------------------------------------------------

def test_children_start_on_the_given_cpus_and_other_threads_keep_theirs():
    from registry.measure.runner import pinned

    every, cpu = os.sched_getaffinity(0), min(os.sched_getaffinity(0))
    inside, done, seen = threading.Event(), threading.Event(), {}

    def start_pinned():
        with pinned({cpu}):
            child = subprocess.run([PY, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                                   capture_output=True, text=True)
            inside.set()
            done.wait(10)
        seen["child"], seen["after"] = child.stdout.strip(), os.sched_getaffinity(0)

    thread = threading.Thread(target=start_pinned)
    thread.start()
    assert inside.wait(60)
    assert os.sched_getaffinity(0) == every   # this thread's mask is its own
    done.set()
    thread.join()
    assert seen == {"child": str([cpu]), "after": every}
    sources = Path(__file__).resolve().parents[1] / "registry"
    assert not [p for p in sources.rglob("*.py") if "preexec_fn=" in p.read_text()]
