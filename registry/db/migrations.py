"""The migration files this nodereg ships (schema/migrations/NNNN_name.sql): their versions, the
statements they run, checksums and what they destroy. Apart from registry/db/migrate.py, which applies
them, so that knowing this nodereg's schema version needs no SQLAlchemy (registry/db/duckread.py)."""

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from registry.resources import data_dir

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# statements that take data away; the table a migration creates itself (a scratch table) is not data
_DESTROYS = re.compile(r"^\s*(?:(DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?|DROP\s+TABLE(?:\s+IF\s+EXISTS)?)\s+(\w+)"
                       r"|ALTER\s+TABLE\s+(\w+)\s+DROP\s+(?:COLUMN\s+)?(\w+))", re.IGNORECASE)
_CREATES = re.compile(r"^\s*CREATE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+(\w+)", re.IGNORECASE)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def statements(self) -> list[str]:
        text = self.path.read_text()
        parts = re.split(r"(?m)^\s*;\s*$", text)
        return [p.strip() for p in parts if _strip_comments(p).strip()]

    @cached_property
    def checksum(self) -> str:
        """sha256 of the statements as they run, comments and spacing aside."""
        import hashlib   # here: the version check of a quick read needs none

        body = "\n;\n".join(" ".join(_strip_comments(s).split()) for s in self.statements())
        return hashlib.sha256(body.encode()).hexdigest()

    @cached_property
    def destroys(self) -> list[str]:
        """What the migration deletes or drops, in words (e.g. 'DELETE FROM predictions'); [] for none."""
        found, scratch = [], set()
        for stmt in (_strip_comments(s) for s in self.statements()):
            created = _CREATES.match(stmt)
            if created:
                scratch.add(created.group(1).lower())
            m = _DESTROYS.match(stmt)
            if m and m.group(2) and m.group(2).lower() not in scratch:
                found.append(f"{' '.join(m.group(1).upper().split())} {m.group(2)}")
            elif m and m.group(3):
                found.append(f"ALTER TABLE {m.group(3)} DROP COLUMN {m.group(4)}")
        return found

    @property
    def file(self) -> str:
        return self.path.name


def _strip_comments(sql: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


def available() -> list[Migration]:
    found = []
    for path in sorted((data_dir("schema") / "migrations").glob("*.sql")):
        m = _NAME.match(path.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), path))
    return found


def latest_version() -> int:
    return max(m.version for m in available())
