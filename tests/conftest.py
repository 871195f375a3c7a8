"""Shared fixtures: a fresh DuckDB registry per test and an in-process CLI runner.

`cli(...)` runs the real entry point (`registry.cli.main`, the same one the console script
calls), so exit codes and the one-line error contract are what users get.
"""

import atexit
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

# pytest-xdist's workers (scripts/test.sh) start with COLUMNS=80 and LINES=24 in their environment,
# where a one-process run has neither. rich fixes a console's width from COLUMNS when the console is
# made, and this file makes registry.cli.output's two at import (below): every table and message would
# then wrap at 80 columns whatever a test sets (_wide_terminal). Without them the consoles read
# COLUMNS at each print, as in a one-process run.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

from registry.cli import main, output  # noqa: E402 - after the environment above
from registry.db import engine, migrate, migrations, open_registry, reader  # noqa: E402
from registry.db.url import duckdb_path  # noqa: E402

# A new DuckDB registry is made by applying every migration: some 170 statements, about 0.5 s on an
# idle 2-core machine and 3 s on a loaded one, and most tests start from a new one. The first is
# migrated by the real code once per session and kept as a template; a registry the code is about to
# create (a writable, migrating open of a missing file) starts as a byte copy of it and then opens
# through the real code, which finds it current. A test that changes the migrations (migrations.available)
# gets a real migration; a copy that fails (a full or read-only file system) is removed, and the real
# code meets the same disk. Processes the tests start (subprocesses) migrate for real, and so does
# every open with NODEREG_TEST_MIGRATE_EACH=1.
# registry.cli.output makes its consoles on first use (rich is not imported for --json output); a
# console reads COLUMNS when made, and tests change it between commands of one process: made here,
# before any test sets it, they read it at each print, as a process's own consoles see one terminal
output.console, output.err_console   # noqa: B018 - made for their side effect

_REAL_OPEN = engine._open
_TEMPLATE: list[str] = []       # the session's migrated registry, once made


def _migration_set() -> tuple:
    return tuple((m.version, str(m.path)) for m in migrations.available())


_REAL_MIGRATIONS = _migration_set()


def _template_copy(path) -> None:
    if not _TEMPLATE:
        where = tempfile.mkdtemp(prefix="nodereg-template-")
        atexit.register(shutil.rmtree, where, True)
        template = os.path.join(where, "registry.duckdb")
        _REAL_OPEN(sa.make_url(f"duckdb:///{template}"), readonly=False, migrate=True, site=False,
                   announce=None).close()
        _TEMPLATE.append(template)
    try:
        shutil.copyfile(_TEMPLATE[0], path)
    except OSError:
        path.unlink(missing_ok=True)


def _open_from_template(url, *, readonly, migrate, site, announce):
    path = duckdb_path(url)
    if path is not None and migrate and not readonly and not path.exists() and path.parent.is_dir() \
            and not os.environ.get("NODEREG_TEST_MIGRATE_EACH") and _migration_set() == _REAL_MIGRATIONS:
        _template_copy(path)
    return _REAL_OPEN(url, readonly=readonly, migrate=migrate, site=site, announce=announce)


engine._open = _open_from_template


# PostgreSQL comes from the environment libpq reads (PGHOST, PGPORT, PGUSER, PGPASSWORD), as set by
# Debian's `pg_virtualenv`, which .ci/run uses. Without one, PostgreSQL cases are skipped, unless
# NODEREG_REQUIRE_PG is set (as in CI), where a missing server is a failure.
BACKENDS = ["duckdb", "postgresql"]
both_backends = pytest.mark.parametrize("db_url", BACKENDS, indirect=True)


def pg_server_url(database: str = "postgres") -> str | None:
    if not os.environ.get("PGHOST"):
        return None
    user, password = os.environ.get("PGUSER", "postgres"), os.environ.get("PGPASSWORD", "")
    auth = f"{user}:{password}" if password else user
    return f"postgresql://{auth}@{os.environ['PGHOST']}:{os.environ.get('PGPORT', '5432')}/{database}"


def pg_admin() -> sa.Engine:
    return sa.create_engine(pg_server_url().replace("postgresql://", "postgresql+psycopg://"),
                            isolation_level="AUTOCOMMIT")


@contextmanager
def fresh_pg_database(template: str | None = None):
    """A fresh PostgreSQL database (dropped afterwards), empty or a copy of database `template`; skips
    (or fails, in CI) without a server."""
    if pg_server_url() is None:
        if os.environ.get("NODEREG_REQUIRE_PG"):
            pytest.fail("NODEREG_REQUIRE_PG is set but no PostgreSQL server is configured (PGHOST)")
        pytest.skip("no PostgreSQL server: run the tests under pg_virtualenv (as .ci/run does)")
    name = f"nodereg_test_{uuid.uuid4().hex[:12]}"
    admin = pg_admin()
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else "")))
    yield pg_server_url(name)
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(scope="session")
def pg_migrated_template():
    """A PostgreSQL database migrated by the real code once per session, as its admin's `nodereg init`
    leaves it: a test's registry is a copy (CREATE DATABASE ... TEMPLATE, a file copy), not some 170
    statements again (see _open_from_template for DuckDB)."""
    with fresh_pg_database() as url:
        open_registry(url).close()    # closes its connections: a template must have none
        yield sa.make_url(url).database


@pytest.fixture
def pg_registry(pg_migrated_template):
    """A fresh PostgreSQL registry at this nodereg's schema, for one test."""
    with fresh_pg_database(pg_migrated_template) as url:
        yield url


@pytest.fixture
def pg_database():
    """A fresh, empty PostgreSQL database for one test."""
    with fresh_pg_database() as url:
        yield url


def set_up_reader(url: str, role: str = reader.DEFAULT_ROLE) -> None:
    """What a site admin does once (`nodereg init`, and on PostgreSQL `--reader`) so that `nodereg sql` runs.
    A role belongs to the whole PostgreSQL cluster, which the test workers share (pytest-xdist): the
    first set-up of each role creates it, and two workers doing that at once would both try, so one
    set-up at a time (an advisory lock in the `postgres` database, which every worker sees)."""
    reg = open_registry(url)
    if url.startswith("postgresql"):
        admin = pg_admin()
        with admin.connect() as lock:
            lock.execute(sa.text("SELECT pg_advisory_lock(hashtext('nodereg tests: set_up_reader'))"))
            with reg.begin() as conn:
                reader.setup(conn, role)
            lock.execute(sa.text("SELECT pg_advisory_unlock(hashtext('nodereg tests: set_up_reader'))"))
        admin.dispose()
    reg.close()


@pytest.fixture
def sql_reader(db_url):
    """The test's registry, ready for `nodereg sql` on either backend."""
    set_up_reader(db_url)
    return db_url


@pytest.fixture(autouse=True, scope="session")
def _sigint_as_from_a_terminal():
    """A suite started as a background job of a script (`cmd &` where the shell has no job control)
    inherits SIGINT ignored, and so does every nodereg it starts, which then runs on through the
    SIGINT that tests send as Ctrl-C would (`test_interrupted_profile_leaves_nothing[2-*]` timed out
    so). With a handler here, the programs the tests start get SIGINT's default again (exec resets
    a handled signal), as from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


# In parallel (scripts/test.sh: pytest-xdist, `--dist loadfile`) a test file runs in one worker, one test
# after another: its module-scoped fixtures are set up once, and what its tests share stays theirs
# (test_sql_readonly compares the PostgreSQL cluster's roles before and after, and creates roles).
# What test files share across workers: PostgreSQL roles (set_up_reader), pg_locks (test_concurrency),
# the host's CPUs (the Slurm clusters, tests marked `alone`); each of them is handled where it is used.
@contextmanager
def between_workers(request, name: str, shared: bool = False):
    """scripts/test.sh runs the suite in parallel workers (pytest-xdist): a lock they all see (flock
    on a file of this run's temporary directory, which the workers share), exclusive or `shared`.
    Nothing to lock in a one-process run (a pytest that a test starts is one, though it inherits
    the worker's PYTEST_XDIST_WORKER: a worker is told by its config's `workerinput`)."""
    if not hasattr(request.config, "workerinput"):
        yield
        return
    basetemp = request.getfixturevalue("tmp_path_factory").getbasetemp()
    path = basetemp.parent / f"nodereg-{name}.lock"   # each worker's basetemp is below it
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield       # closing the file releases the lock


@pytest.fixture(autouse=True)
def _alone_when_marked(request):
    """A test marked `alone` runs with no other worker's test beside it: one whose assertions read
    figures measured on the CPUs, which another test's work would move. Every test holds the lock
    shared, an `alone` one exclusive; an `alone` test waiting for it holds the turn meanwhile, so that
    the other worker starts no new test and the wait ends with its current one."""
    alone = request.node.get_closest_marker("alone") is not None
    with ExitStack() as held:
        with between_workers(request, "turn"):
            held.enter_context(between_workers(request, "alone", shared=not alone))
        yield


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    """Every test as at a wide terminal: prose and tables wrap at the terminal's width (80 columns
    when piped, as under pytest), and a test that reads a phrase must not depend on where a line
    breaks. The tests of the 80-column layout set COLUMNS themselves."""
    monkeypatch.setenv("COLUMNS", "1000")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def db_url(request, tmp_path, monkeypatch):
    """The registry URL of this test (DuckDB; tests marked `both_backends` also run on PostgreSQL).
    A PostgreSQL registry exists already, as its admin's `nodereg init` leaves it (only `init` and
    `migrate` create or change a PostgreSQL schema), unless the test is marked `empty_registry` (it
    builds an older schema itself); a DuckDB file is created by the first command that writes."""
    backend = getattr(request, "param", "duckdb")
    if backend == "postgresql":
        empty = request.node.get_closest_marker("empty_registry") is not None
        url = request.getfixturevalue("pg_database" if empty else "pg_registry")
    else:
        url = f"duckdb:///{tmp_path / 'registry.duckdb'}"
    monkeypatch.setenv("NODEREG_DB", url)
    return url


@pytest.fixture
def cli(capsys, monkeypatch, db_url):
    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["nodereg", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def kinds_program(tmp_path_factory):
    """tests/programs/kinds.c built: small programs of four kinds of work (FP, stream, integer hash,
    tiled product) for the tests of the features that tell kinds apart."""
    out = tmp_path_factory.mktemp("kinds") / "kinds"
    subprocess.run(["cc", "-O2", "-o", str(out), str(Path(__file__).resolve().parent / "programs" / "kinds.c")],
                   check=True)
    return out


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """The microbenchmark driver, built once per test session into a temporary cache (NODEREG_BUILD_CACHE)."""
    from registry.microbench.driver import driver_binary

    old = os.environ.get("NODEREG_BUILD_CACHE")
    os.environ["NODEREG_BUILD_CACHE"] = str(tmp_path_factory.getbasetemp() / "nodereg-build")
    yield driver_binary()
    if old is None:
        del os.environ["NODEREG_BUILD_CACHE"]
    else:
        os.environ["NODEREG_BUILD_CACHE"] = old


def fetch_rows(db_url: str, sql: str) -> list[dict]:
    """The rows of one query on the registry at `db_url`, read-only, as dicts."""
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.text(sql))]
    reg.close()
    return rows


# What long work prints on a stderr that is no terminal (registry/cli/progress.py), before any error
PROGRESS_LINE = re.compile(r", \d+:\d\d elapsed$")


def assert_one_line_error(result: Result, *fragments: str) -> None:
    """The error contract: non-zero exit, one line on stderr starting with 'error:' (after the progress
    lines of work that had begun, on a loaded machine), no traceback."""
    assert result.code != 0, result
    lines = [ln for ln in result.err.strip().splitlines() if ln.strip() and not PROGRESS_LINE.search(ln)]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error:"), result.err
    assert "Traceback" not in result.err
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])


# duckdb 2's nanobind bindings print a screenful of "leaked instance/type/function" lines once the
# interpreter has shut down, after the hypothesis fuzz tests (tests/fuzz_bundles.py). nanobind checks
# after finalisation; the registry holds nothing then (the objects reported are duckdb's own module
# constants, and the live objects at pytest_unconfigure are the same as in runs without the report),
# so it is benign, but it buries pytest's summary in CI logs. Only those lines are dropped: the
# interpreter still finishes normally (every later hook and atexit handler runs, the exit status is
# pytest's), and anything else written to stderr at exit passes through.
_NANOBIND_REPORT = r"^(nanobind: | - leaked | - \.\.\. skipped remainder|See https://nanobind\.readthedocs\.io/)"


def pytest_configure(config):
    config.addinivalue_line("markers", "empty_registry: db_url's PostgreSQL database is left empty (no schema)")
    config.addinivalue_line("markers", "alone: under pytest-xdist, no other worker's test runs beside this one")
    atexit.register(_filter_stderr_at_exit)  # at exit: after pytest's own capture has let go of fd 2


def _filter_stderr_at_exit() -> None:
    """From here on, fd 2 goes through `grep -v` of the nanobind report to the original stderr."""
    grep = shutil.which("grep")
    if grep is None:
        return
    sys.stderr.flush()
    filt = subprocess.Popen([grep, "--line-buffered", "-v", "-E", _NANOBIND_REPORT],
                            stdin=subprocess.PIPE, stdout=sys.__stderr__.fileno())
    os.dup2(filt.stdin.fileno(), 2)
    filt.stdin.close()  # fd 2 holds the pipe now: grep ends when this process does
