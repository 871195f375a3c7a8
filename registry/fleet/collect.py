"""`nodereg fleet collect DIR`: merge the bundles a fleet's tasks wrote (`fleet submit --to-dir`).

All of them in one transaction: a damaged bundle stops the collect with its name and nothing of
the others is kept, so fixing it and collecting again is safe. Importing is idempotent (bundle
rows are identified by name and uid), so collecting a directory twice, or after more tasks have
finished, adds only what is new. Bundles being written are `.NAME.zip.part` and are not read.
"""

from pathlib import Path

import sqlalchemy as sa

from registry.errors import UserError


def bundles(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise UserError(f"{directory} is not a directory")
    found = sorted(p for p in directory.glob("*.zip") if not p.name.startswith("."))
    if not found:
        raise UserError(f"no bundles (*.zip) in {directory}: have the fleet's tasks finished? (`nodereg fleet status`)")
    return found


def collect(conn: sa.Connection, paths: list[Path]) -> dict[str, int]:
    """Import every bundle through `conn` (the caller's one transaction); rows added per table."""
    from registry.io.bundle import import_bundle

    added: dict[str, int] = {}
    for path in paths:
        try:
            result = import_bundle(conn, path, same_type=True)
        except UserError as exc:
            raise UserError(f"{path.name}: {exc}") from None
        for table, n in result["added"].items():
            added[table] = added.get(table, 0) + n
    return added
