"""`nodereg sql`: one analyst statement, run read-only whatever the statement says.

Enforced by the databases and their drivers, never by reading the SQL text here:
- One statement per call. DuckDB's own parser splits the text and only a lone statement runs;
  PostgreSQL's extended protocol refuses several commands in one Parse.
- No parameter parsing: neither driver is given parameters, so `%`, `%s` and `?` are plain text.
- DuckDB: the file is open `read_only` and external access is switched off for the rest of the
  connection before the statement runs (a read-only DuckDB still writes COPY TO and EXPORT files,
  ATTACHes, INSTALLs and reads any file; tried).
- PostgreSQL: a READ ONLY transaction, `SET LOCAL ROLE` to the reader, and the statement run inside
  the reader's SECURITY DEFINER function (registry/db/reader.py), always rolled back. A statement
  that returns no rows (COPY, SET, DO, ...) is never run: outside that function it would run with
  the connection's privileges.
"""

import threading
from dataclasses import dataclass

from registry.db import reader
from registry.errors import UserError


@dataclass(frozen=True)
class Bounds:
    """How long one statement may run and how many rows it may return (0: no limit). The database
    stops the statement (PostgreSQL's statement_timeout, DuckDB's interrupt): a query left running
    holds locks that stop others (a migration waits for every reader). Rows are fetched through a
    cursor, one more than allowed at most."""

    timeout_s: float = 0
    max_rows: int = 0
    cut: bool = False   # a page's bounds: the first max_rows rows, never a refusal, no command-line hint

    def too_many(self, rows: list) -> None:
        if self.max_rows and len(rows) > self.max_rows and not self.cut:
            raise UserError(f"the query returns more than {self.max_rows:,} rows (--max-rows): nothing printed; "
                            "narrow it (WHERE, LIMIT) or raise --max-rows (0: no limit)")

    def timed_out(self) -> UserError:
        hint = "" if self.cut else "; narrow it or raise --timeout (0: no limit)"
        return UserError(f"the query ran longer than {self.timeout_s:g} s (the time limit) and was stopped by "
                         f"the database{hint}")

    def fetch(self, cur) -> list:
        rows = cur.fetchmany(self.max_rows + (0 if self.cut else 1)) if self.max_rows else cur.fetchall()
        self.too_many(rows)
        return rows


def run_readonly(registry, text: str, bounds: Bounds = Bounds()) -> tuple[list[str], list[tuple]]:
    """Run `text` read-only on `registry` within `bounds`; returns (column names, rows)."""
    raw = registry.engine.raw_connection()
    try:
        return run_on(raw.driver_connection, registry.dialect, text, bounds)
    finally:
        raw.close()


def run_on(driver_conn, dialect: str, text: str, bounds: Bounds = Bounds()) -> tuple[list[str], list[tuple]]:
    """`run_readonly` on a driver connection of a read-only registry (`nodereg serve` opens its own)."""
    run = _postgres if dialect == "postgresql" else _duckdb
    return run(driver_conn, text, bounds)


def _duckdb(con, text: str, bounds: Bounds) -> tuple[list[str], list[tuple]]:
    import duckdb

    con.execute("SET enable_external_access = false")  # one-way: DuckDB refuses to turn it back on
    statements = con.extract_statements(text)
    if len(statements) != 1:
        raise UserError(f"`nodereg sql` runs one statement per call; this text holds {len(statements)}")
    timer = threading.Timer(bounds.timeout_s, con.interrupt) if bounds.timeout_s else None
    if timer is not None:
        timer.start()
    try:
        con.execute(statements[0])
        if not con.description:  # None, or no columns (CHECKPOINT)
            raise UserError("the statement returned no rows")
        return [d[0] for d in con.description], bounds.fetch(con)
    except duckdb.InterruptException:
        raise bounds.timed_out() from None
    finally:
        if timer is not None:
            timer.cancel()


def _postgres(pg, text: str, bounds: Bounds) -> tuple[list[str], list[tuple]]:
    import psycopg

    pg.rollback()
    pg.read_only = True  # psycopg opens the transaction with BEGIN READ ONLY
    try:
        with psycopg.RawCursor(pg) as cur:  # $1 placeholders: the client parses nothing
            cur.execute("SELECT set_config('statement_timeout', $1, true)", [f"{round(bounds.timeout_s * 1000)}"])
            role = _become_reader(cur, pg.info.user)
            try:
                fields = _describe(pg, text)
                query = _through_reader(cur, fields)
                with psycopg.RawServerCursor(pg, "nodereg_sql") as rows:  # the server keeps what is not fetched
                    rows.execute(query, [text])
                    return [name for name, *_ in fields], bounds.fetch(rows)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise UserError(f"`nodereg sql` runs as the read-only role {role}, which may not do this: "
                                f"{str(exc).splitlines()[0]}") from None
            except psycopg.errors.QueryCanceled:
                raise bounds.timed_out() from None
    finally:
        pg.rollback()


def _through_reader(cur, fields: list[tuple[str, int, int]]):
    """The call of the reader's function that returns the statement's rows, typed as the statement types them."""
    from psycopg import sql

    if not fields:
        raise UserError("the statement returns no rows, so it was not run: `nodereg sql` runs one "
                        "read-only query (SELECT, WITH, VALUES, TABLE, SHOW, EXPLAIN)")
    types = cur.execute("SELECT format_type(t, m) FROM unnest($1::oid[], $2::int4[]) WITH ORDINALITY AS f(t, m, i) "
                        "ORDER BY i", [[oid for _, oid, _ in fields], [mod for *_, mod in fields]]).fetchall()
    columns = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(f"c{i}"), sql.SQL(t))
                                 for i, (t,) in enumerate(types))
    return sql.SQL("SELECT * FROM {}($1) AS t({})").format(sql.Identifier(reader.FUNCTION), columns)


def _become_reader(cur, user: str) -> str:
    """SET LOCAL ROLE to the registry's reader (the owner of its function); returns the role's name."""
    import psycopg
    from psycopg import sql

    found = cur.execute(reader.FIND).fetchone()
    if found is None:
        raise reader.missing()
    role, powers = found
    if powers:
        raise reader.unsafe(role, powers)
    try:
        cur.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
    except psycopg.errors.InsufficientPrivilege:
        raise reader.not_granted(role, user) from None
    return role


def _describe(pg, text: str) -> list[tuple[str, int, int]]:
    """(name, type oid, type modifier) of each column `text` returns, from Parse + Describe (nothing runs).

    Parse is where PostgreSQL refuses several commands; psycopg has no describe-only call, so this
    goes through its libpq wrapper.
    """
    from psycopg import errors, pq

    encoding = pg.info.encoding
    for result in (pg.pgconn.prepare(b"", text.encode(encoding)), pg.pgconn.describe_prepared(b"")):
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise errors.error_from_result(result, encoding=encoding)
    return [(result.fname(i).decode(encoding), result.ftype(i), result.fmod(i)) for i in range(result.nfields)]
