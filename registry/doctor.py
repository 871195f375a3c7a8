"""Registry integrity: orphans, incomplete measurements, schema drift; and what can be repaired.

References between tables are logical (see schema/README.md), so a crash of an old version, a
hand-written DELETE or a partial restore can leave rows whose parent is gone. Writes are
transactional, so incomplete rows should not exist; doctor checks anyway.
"""

import functools
from dataclasses import dataclass

import sqlalchemy as sa

from registry.db.migrate import VERSION_DDL, available, plan
from registry.db.relations import references
from registry.profile.vectors import RECORD_BYTES
from registry.values import plural


@dataclass
class Problem:
    kind: str          # orphan | incomplete | drift
    table: str
    detail: str
    count: int
    fixable: bool


def _orphans(conn: sa.Connection) -> list[tuple[str, str, int]]:
    found = []
    for table, column, cond, parent, pk in references():
        where = f"{column} IS NOT NULL AND {column} NOT IN (SELECT {pk} FROM {parent})"
        if cond:
            where = f"{cond} AND {where}"
        n = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE {where}")).scalar_one()
        if n:
            found.append((table, where, n, f"{column} -> missing {parent}"))
    return found


_INCOMPLETE = {
    "profiles": "status <> 'complete' OR profile_id NOT IN (SELECT profile_id FROM profile_runs)",
    "profile_runs": "run_id NOT IN (SELECT run_id FROM profile_reps)",
    # a packed profile (registry/profile/vectors.py) that does not hold its profile's runs: removed,
    # the profile is read from its runs again
    "profile_vectors": f"octet_length(data) <> {RECORD_BYTES} * runs OR runs <> "
                       "(SELECT count(*) FROM profile_runs r WHERE r.profile_id = profile_vectors.profile_id)",
}


@functools.cache
def _expected_columns() -> dict[str, set[str]]:
    """Tables/views and their columns as this version's migrations create them (on a scratch DuckDB;
    ~70 ms, so once per process)."""
    eng = sa.create_engine("duckdb:///:memory:")
    try:
        with eng.begin() as conn:
            conn.execute(sa.text(VERSION_DDL))
            for mig in available():
                for stmt in mig.statements():
                    conn.execute(sa.text(stmt))
            return _columns(conn)
    finally:
        eng.dispose()


def _columns(conn: sa.Connection) -> dict[str, set[str]]:
    """{table or view: columns} of the current schema (information_schema: both backends have it)."""
    rows = conn.execute(sa.text("SELECT table_name, column_name FROM information_schema.columns "
                                "WHERE table_schema = current_schema()"))
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


def check(conn: sa.Connection) -> list[Problem]:
    problems = [Problem("orphan", t, f"{plural(n, 'row')} with {d}", n, True) for t, _, n, d in _orphans(conn)]
    for table, where in _INCOMPLETE.items():
        n = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE {where}")).scalar_one()
        if n:
            problems.append(Problem("incomplete", table, f"{plural(n, 'incomplete row')}", n, True))
    actual = _columns(conn)
    for name, cols in _expected_columns().items():
        if name not in actual:
            problems.append(Problem("drift", name, "missing table or view (run `nodereg init`)", 1, False))
        elif cols - actual[name]:
            missing = sorted(cols - actual[name])
            problems.append(Problem("drift", name, f"missing {'column' if len(missing) == 1 else 'columns'}: "
                                    f"{', '.join(missing)}", 1, False))
    for mig in plan(conn).changed:
        problems.append(Problem("drift", "schema_version", f"{mig.file} differs from the migration this registry "
                                "applied (checksum)", 1, False))
    return problems


def fix(conn: sa.Connection) -> dict[str, int]:
    """Delete incomplete rows and orphans until none are left; returns rows deleted per table."""
    deleted: dict[str, int] = {}

    def delete(table: str, where: str) -> int:
        n = conn.execute(sa.text(f"DELETE FROM {table} WHERE {where}")).rowcount or 0
        deleted[table] = deleted.get(table, 0) + n
        return n

    for table, where in _INCOMPLETE.items():
        delete(table, where)
    while True:  # removing an orphan can orphan its own children
        orphans = _orphans(conn)
        if not orphans:
            return {t: n for t, n in deleted.items() if n}
        for table, where, _, _ in orphans:
            delete(table, where)
