"""`nodereg sql` is read-only whatever the statement says, on both backends (docs/storage.md).

Every statement of REFUSED runs through the real CLI against one populated registry per backend
(on PostgreSQL through a superuser URL, the worst case): each must end in one line `error: ...`
and leave the registry, the cluster's roles and large objects, the file system and other
sessions as they were.
"""

import os
import shutil
import tempfile
import types
import uuid

import pytest
import sqlalchemy as sa
from conftest import BACKENDS, assert_one_line_error, fresh_pg_database, set_up_reader
from registry_data import populate

from registry.db import open_registry, reader

MULTI = {"duckdb": "one statement per call", "postgresql": "cannot insert multiple commands"}
NOT_RUN = "returns no rows, so it was not run"
NO_FILES = "file system operations are disabled"
READ_ONLY = "read-only"
DENIED = "permission denied for function"
IN_DEFINER = "within security-definer function"
MISSING = "does not exist"
SYNTAX = "syntax error"

# statement (placeholders: dir, a folder the server may write; pid, another session; admin, the
# URL's superuser; lo, a large object), then the error on DuckDB and on PostgreSQL
REFUSED = [
    ("COMMIT; CREATE TABLE evil (a int)", MULTI["duckdb"], MULTI["postgresql"]),
    ("BEGIN; DELETE FROM nodes", MULTI["duckdb"], MULTI["postgresql"]),
    ("SELECT 1; SELECT 2", MULTI["duckdb"], MULTI["postgresql"]),
    ("/* only a comment */", "holds 0", NOT_RUN),
    ("SELEC oops", SYNTAX, SYNTAX),
    ("CREATE TABLE evil (a int)", READ_ONLY, NOT_RUN),
    ("DELETE FROM nodes", READ_ONLY, NOT_RUN),
    ("INSERT INTO apps (name, created_at) VALUES ('x', now())", READ_ONLY, NOT_RUN),
    ("/* harmless */ UPDATE nodes SET name = 'x'", READ_ONLY, NOT_RUN),
    ("DROP VIEW v_nodes", READ_ONLY, NOT_RUN),
    ("DELETE FROM nodes RETURNING *", READ_ONLY, READ_ONLY),
    ("WITH x AS (DELETE FROM nodes RETURNING *) SELECT * FROM x", READ_ONLY, READ_ONLY),
    ("EXPLAIN ANALYZE DELETE FROM nodes", READ_ONLY, READ_ONLY),
    ("SELECT * FROM nodes FOR UPDATE", SYNTAX, READ_ONLY),
    ("COPY (SELECT 1) TO '{dir}/copy.csv'", NO_FILES, NOT_RUN),
    ("COPY nodes FROM '{dir}/none.csv'", NO_FILES, NOT_RUN),
    ("EXPORT DATABASE '{dir}/export'", NO_FILES, SYNTAX),
    ("SELECT lo_export({lo}, '{dir}/lo.bin')", MISSING, DENIED),
    ("SELECT * FROM read_csv('/etc/passwd')", NO_FILES, MISSING),
    ("SELECT pg_read_file('/etc/passwd')", MISSING, DENIED),
    ("ATTACH '{dir}/other.duckdb' AS other", NO_FILES, SYNTAX),
    ("ATTACH ':memory:' AS mem", "read-only mode", SYNTAX),
    ("INSTALL httpfs", NO_FILES, SYNTAX),
    ("LOAD httpfs", "disabled", SYNTAX),
    ("SET enable_external_access = true", "Cannot enable external access", NOT_RUN),
    ("SELECT pg_terminate_backend({pid})", MISSING, "must be a superuser to terminate"),
    ("SELECT pg_reload_conf()", MISSING, DENIED),
    ("SET TRANSACTION READ WRITE", SYNTAX, NOT_RUN),
    ("SELECT set_config('transaction_read_only', 'off', true)", MISSING, "before any query"),
    ("DO $$ BEGIN CREATE TABLE evil (a int); END $$", SYNTAX, NOT_RUN),
    ("SET ROLE {admin}", SYNTAX, NOT_RUN),
    ("RESET ROLE", "unrecognized configuration parameter", NOT_RUN),
    ("SET SESSION AUTHORIZATION {admin}", SYNTAX, NOT_RUN),
    ("SELECT set_config('role', '{admin}', true)", MISSING, IN_DEFINER),
    ("SELECT set_config('session_authorization', '{admin}', true)", MISSING, IN_DEFINER),
    ("SELECT set_config('role', '{admin}', true), query_to_xml('SELECT pg_terminate_backend({pid})', true, false, '')",
     MISSING, IN_DEFINER),
    ("SELECT query_to_xml('SELECT pg_reload_conf()', true, false, '')", MISSING, DENIED),
    ("SELECT query_to_xml('SET ROLE {admin}', true, false, '')", MISSING, "SET is not allowed"),
]


@pytest.fixture(scope="module", params=BACKENDS)
def target(request, tmp_path_factory):
    """A populated registry on one backend, a folder anyone may write to, and (PostgreSQL) another session."""
    folder = tempfile.mkdtemp(prefix="nodereg-sql-", dir="/tmp")  # the server's user must be able to write here
    os.chmod(folder, 0o777)
    try:
        if request.param == "duckdb":
            url = f"duckdb:///{tmp_path_factory.mktemp('sql') / 'registry.duckdb'}"
            _populate(url)
            yield types.SimpleNamespace(backend="duckdb", url=url, dir=folder, victim=None,
                                        fmt={"dir": folder, "pid": 0, "admin": "root", "lo": 0})
        else:
            with fresh_pg_database() as url:
                _populate(url)
                set_up_reader(url)
                victim = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"),
                                          isolation_level="AUTOCOMMIT").connect()
                pid, admin, lo = victim.execute(sa.text(
                    "SELECT pg_backend_pid(), current_user, lo_from_bytea(0, 'secret')")).one()
                yield types.SimpleNamespace(backend="postgresql", url=url, dir=folder, victim=victim,
                                            fmt={"dir": folder, "pid": pid, "admin": admin, "lo": lo})
                victim.close()
                victim.engine.dispose()
    finally:
        shutil.rmtree(folder)


def _populate(url: str) -> None:
    reg = open_registry(url)
    with reg.begin() as conn:
        populate(conn)
    reg.close()


def _state(url: str) -> dict:
    """What a statement could have changed, seen through a separate connection."""
    reg = open_registry(url, readonly=True)
    with reg.connect() as conn:
        inspector = sa.inspect(conn)
        tables = sorted(inspector.get_table_names())
        state = {"views": sorted(inspector.get_view_names()),
                 "rows": {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in tables}}
        if reg.dialect == "postgresql":
            state["roles"] = conn.execute(sa.text("SELECT rolname, rolsuper FROM pg_roles ORDER BY 1")).all()
            state["large objects"] = conn.execute(sa.text("SELECT count(*) FROM pg_largeobject_metadata")).scalar()
    reg.close()
    return state


@pytest.mark.parametrize("statement, on_duckdb, on_postgresql", REFUSED, ids=[s for s, *_ in REFUSED])
def test_refused_and_nothing_changed(target, cli, statement, on_duckdb, on_postgresql):
    before = _state(target.url)
    res = cli("--db", target.url, "sql", statement.format(**target.fmt))
    assert_one_line_error(res, on_duckdb if target.backend == "duckdb" else on_postgresql)
    assert _state(target.url) == before
    assert os.listdir(target.dir) == []
    if target.victim is not None:
        assert target.victim.execute(sa.text("SELECT 1")).scalar() == 1  # still alive


# query, its CSV output (header included)
WORKS = [
    ("SELECT name FROM nodes WHERE name LIKE 'n%'", ["name", "n1"]),
    ("SELECT '100%' AS p, '%s' AS s, '?' AS q, '%(x)s' AS x", ["p,s,q,x", "100%,%s,?,%(x)s"]),
    ("SELECT count(*) AS n FROM v_profile WHERE node LIKE '%1' AND ub LIKE 'mbw_c'", ["n", "2"]),
    ("SELECT name, n_cpus FROM v_nodes", ["name,n_cpus", "n1,2"]),
    ("SELECT app, node, runs FROM v_runs", ["app,node,runs", "app1,n1,3"]),
    ("SELECT node, model_name FROM v_predictions", ["node,model_name", "n1,similarity"]),
    ("SELECT count(*) AS phases FROM v_phases", ["phases", "2"]),
    ("SELECT 1 AS a, 1 AS a", ["a,a", "1,1"]),
]


@pytest.mark.parametrize("query, csv", WORKS, ids=[q for q, _ in WORKS])
def test_queries_work(target, cli, query, csv):
    res = cli("--db", target.url, "sql", query, "-f", "csv")
    assert res.code == 0, res.err
    assert res.out.splitlines() == csv


def test_postgresql_runs_as_the_reader(target, cli):
    if target.backend != "postgresql":
        pytest.skip("PostgreSQL's reader role")
    res = cli("--db", target.url, "sql", "SELECT current_user AS u, session_user AS s", "-f", "csv")
    assert res.out.splitlines() == ["u,s", f"{reader.DEFAULT_ROLE},{target.fmt['admin']}"]


@pytest.fixture
def site(pg_database):
    """A PostgreSQL registry with the roles of a site: a reader (not set up yet); alice, an analyst
    who is granted it; bob, the registry's owner (migrations run as him), not granted it.
    Role names are unique: roles belong to the whole cluster."""
    suffix = uuid.uuid4().hex[:8]
    roles = types.SimpleNamespace(reader=f"reader_{suffix}", alice=f"alice_{suffix}", bob=f"bob_{suffix}")
    _populate(pg_database)
    db = sa.create_engine(pg_database.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with db.connect() as conn:
        for login in (roles.alice, roles.bob):
            conn.execute(sa.text(f"CREATE ROLE {login} LOGIN PASSWORD 'pw'"))
        conn.execute(sa.text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {roles.bob}"))
        conn.execute(sa.text(f"GRANT CREATE ON SCHEMA public TO {roles.bob}"))
        conn.execute(sa.text(f"ALTER TABLE schema_version OWNER TO {roles.bob}"))
    url = sa.make_url(pg_database)
    yield types.SimpleNamespace(url=pg_database, db=db, roles=roles, admin=url.username, **{
        f"{name}_url": url.set(username=getattr(roles, name), password="pw").render_as_string(hide_password=False)
        for name in ("alice", "bob")})
    with db.connect() as conn:
        everyone = ", ".join(vars(roles).values())
        conn.execute(sa.text(f"DROP OWNED BY {everyone}"))
        conn.execute(sa.text(f"DROP ROLE {everyone}"))
    db.dispose()


def test_site_set_up(site, cli):
    """The set-up docs/storage.md describes, and each way it can be missing or wrong."""
    sql = ("sql", "SELECT current_user AS u, count(*) AS n FROM nodes", "-f", "csv")
    assert_one_line_error(cli("--db", site.url, *sql), f"`{reader.SET_UP}`")
    assert_one_line_error(cli("--db", site.url, "init", "--reader", site.admin), "SUPERUSER", "choose another name")
    assert_one_line_error(cli("--db", site.url, "init", "--reader", "Bad-Name"), "invalid role name")
    assert_one_line_error(cli("--db", site.bob_url, "init", "--reader", site.roles.reader), "needs a superuser")
    for _ in range(2):  # idempotent
        res = cli("--db", site.url, "init", "--reader", site.roles.reader)
        assert res.code == 0 and f"read-only role {site.roles.reader}: SELECT on " in res.out, res.err
    with site.db.connect() as conn:
        conn.execute(sa.text(f"GRANT {site.roles.reader} TO {site.roles.alice}"))
    with sa.create_engine(site.bob_url.replace("postgresql://", "postgresql+psycopg://")).begin() as conn:
        conn.execute(sa.text("CREATE TABLE later (a int)"))  # a later migration: default privileges cover it
    assert cli("--db", site.url, *sql).out.splitlines() == ["u,n", f"{site.roles.reader},1"]
    assert cli("--db", site.alice_url, *sql).out.splitlines() == ["u,n", f"{site.roles.reader},1"]
    assert cli("--db", site.alice_url, "sql", "SELECT count(*) AS n FROM later", "-f", "csv").out.splitlines() == ["n", "0"]
    assert_one_line_error(cli("--db", site.bob_url, *sql), f"GRANT {site.roles.reader} TO {site.roles.bob}")
    with site.db.connect() as conn:
        conn.execute(sa.text(f"ALTER ROLE {site.roles.reader} CREATEDB"))
    assert_one_line_error(cli("--db", site.alice_url, *sql), f"role {site.roles.reader}, which has CREATEDB: refused")


def test_reader_is_for_postgresql(cli):
    assert_one_line_error(cli("init", "--reader", reader.DEFAULT_ROLE), "--reader is for PostgreSQL")
