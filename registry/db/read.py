"""Reading query results into DataFrames, fast on both backends.

pandas.read_sql fetches row by row through the DB-API (about 1 s per million rows); DuckDB can hand
over a result as columns directly, which `nodereg match` needs to read a 10,000-node registry in
well under a second. Both also take a QuickReader (registry/db/duckread.py) for `conn`, which reads
a DuckDB registry without SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlalchemy as sa


def _compiled(conn: sa.Connection, sql: str, params: Mapping | None) -> tuple[str, list]:
    """`sql` with named :params as DuckDB's own connection takes it: text and positional values."""
    import sqlalchemy as sa

    compiled = sa.text(sql).bindparams(**(params or {})).compile(
        dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    return str(compiled), [compiled.params[name] for name in compiled.positiontup] if compiled.positiontup else []


def _duckdb_result(conn: sa.Connection, sql: str, params: Mapping | None):
    """`sql` run by DuckDB's own connection (inside the caller's transaction), whose result can be
    handed over as columns rather than fetched row by row."""
    native = getattr(conn, "native", None)
    if native is not None:    # a QuickReader
        return native(sql, params)
    return conn.connection.driver_connection.execute(*_compiled(conn, sql, params))


def read_frame(conn: sa.Connection, sql: str, params: Mapping | None = None):
    """Run `sql` (named :params) and return a pandas DataFrame."""
    import pandas as pd

    if conn.dialect.name == "duckdb":
        return _duckdb_result(conn, sql, params).df()
    rows = getattr(conn, "rows", None)
    if rows is not None:    # a QuickReader on PostgreSQL: its rows as pandas.read_sql frames them
        result = rows(sql, params)
        return pd.DataFrame.from_records(result.plain(), columns=result.keys(), coerce_float=True)
    import sqlalchemy as sa

    return pd.read_sql(sa.text(sql), conn, params=dict(params or {}))


def read_arrays(conn: sa.Connection, sql: str, params: Mapping | None = None) -> dict:
    """Run `sql` and return {column: numpy array}, NULL as NaN in numeric columns and None in the
    others. For results of millions of rows, where building a DataFrame is half the cost (DuckDB
    hands over numpy arrays), and for `nodereg match`, which does not import pandas."""
    import numpy as np

    if conn.dialect.name != "duckdb":
        return _fetched_columns(conn, sql, params)
    columns = _duckdb_result(conn, sql, params).fetchnumpy()
    return {c: _filled(a) if np.ma.isMaskedArray(a) else np.asarray(a) for c, a in columns.items()}


def fetch_chunks(conn: sa.Connection, sql: str, params: Mapping | None = None, rows: int = 1000):
    """The rows of `sql` as lists of at most `rows` plain tuples, fetched as they are read: a result
    of large values (the packed profiles' 39 MB at 10,000 nodes) is never held as Python objects all
    at once. The caller reads every chunk before it runs another statement on `conn`."""
    if getattr(conn, "stream", None) is not None:      # a QuickReader on PostgreSQL (registry/db/pgread.py)
        yield from conn.stream(sql, params, rows)
        return
    if conn.dialect.name == "duckdb":
        cursor = _duckdb_result(conn, sql, params)
    else:
        from registry.db.statement import execute

        cursor = execute(conn, sql, params)
    while chunk := cursor.fetchmany(rows):
        yield chunk


def _fetched_columns(conn: sa.Connection, sql: str, params: Mapping | None) -> dict:
    """`read_arrays` through the DB-API (PostgreSQL), without pandas (a third of a second to import,
    for `match`'s 10,000-row reads): the rows fetched, then each column as pandas.read_sql makes it:
    integers (or booleans) without NULL as such, numbers (decimals too) with NULL as floats with NaN,
    anything else as objects with None."""
    from registry.db.statement import execute

    result = execute(conn, sql, params)
    names, rows = list(result.keys()), getattr(result, "plain", result.fetchall)()   # (a QuickReader's: no row objects)
    columns = list(zip(*rows)) if rows else [()] * len(names)
    return {name: _column(values) for name, values in zip(names, columns)}


def _column(values: tuple):
    """One fetched column as an array (see `_fetched_columns`)."""
    import decimal

    import numpy as np

    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {int, bool} and len(kinds) == 1 and None not in values:
        return np.array(values, dtype=np.int64 if int in kinds else bool)
    if kinds and kinds <= {int, float, decimal.Decimal}:
        return np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    return np.fromiter(values, dtype=object, count=len(values))


def _filled(column):
    """A masked (NULL-holding) column as a plain array: NaN for numbers, None for anything else."""
    import numpy as np

    if column.dtype.kind in "biuf":
        return np.ma.filled(column.astype(float), np.nan)
    out = np.asarray(column.data, dtype=object).copy()
    out[np.ma.getmaskarray(column)] = None
    return out
