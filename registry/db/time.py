"""Timestamps are stored as naive UTC (portable across DuckDB and PostgreSQL TIMESTAMP)."""

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)
