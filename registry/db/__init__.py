"""Registry storage: URL resolution, engine, migrations and bulk writes (DuckDB and PostgreSQL).

The names below load their modules on first use (PEP 562), so that importing a module of this
package, or the command line that names them, does not import SQLAlchemy: `nodereg --help` must
start in well under a second (scripts/bench_startup.py).
"""

import importlib

_HOMES = {"Registry": "engine", "db_error": "engine", "is_driver_error": "engine", "open_registry": "engine",
          "utcnow": "time", "mask": "url", "resolve_url": "url"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
