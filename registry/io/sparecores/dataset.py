"""Finding the data in clones of the two Spare Cores repositories.

* sc-inspector-data: ``DIR/data/<vendor>/<server>/<task>/meta.json`` (DIR may also be the ``data``
  folder itself); its commit from ``DIR/COMMIT`` (the shared archive) or the clone's ``.git``.
* sc-data-dumps: ``DIR/data/server/<vendor>/*.json``, one document per server type; GCP's files
  are named by id, so documents are indexed by the names inside them (api_reference, name).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from registry.errors import UserError
from registry.io.folders import subdirs as _dirs

_HINT = "expected a clone of SpareCores/sc-inspector-data (DIR/data/<vendor>/<server>/<task>/meta.json)"


@dataclass(frozen=True)
class ServerDir:
    vendor: str
    server: str
    path: Path


def data_root(root: Path) -> Path:
    """The `data` folder of a clone (or `root` when it is that folder); UserError when it is neither."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"{root} is not a directory ({_HINT})")
    data = root / "data" if (root / "data").is_dir() else root
    for vendor in _dirs(data):
        for server in _dirs(Path(vendor.path))[:5]:
            if any(os.path.isfile(os.path.join(t.path, "meta.json")) for t in _dirs(Path(server.path))):
                return data
    raise UserError(f"{root} is not a Spare Cores inspector clone: no task's meta.json found ({_HINT})")


def discover(root: Path) -> tuple[Path, list[ServerDir]]:
    """The data folder and every server folder under it, sorted by vendor and server."""
    data = data_root(root)
    servers = [ServerDir(v.name, s.name, Path(s.path)) for v in _dirs(data) for s in _dirs(Path(v.path))]
    return data, servers


def commit_of(clone: Path) -> str | None:
    """The dataset's commit: a COMMIT file (the shared archive) or the clone's git HEAD; None if unknown."""
    for base in (clone, clone.parent):
        marker = base / "COMMIT"
        if marker.is_file():
            text = marker.read_text(errors="replace").strip()
            return text[:64] or None
        head = base / ".git" / "HEAD"
        if head.is_file():
            ref = head.read_text(errors="replace").strip()
            if not ref.startswith("ref: "):
                return ref[:64] or None
            name = ref[5:].strip()
            loose = base / ".git" / name
            if loose.is_file():
                return loose.read_text(errors="replace").strip()[:64] or None
            packed = base / ".git" / "packed-refs"
            if packed.is_file():
                for line in packed.read_text(errors="replace").splitlines():
                    if line.endswith(" " + name):
                        return line.split()[0][:64]
            return None
    return None


def load_specs(root: Path, vendors: set[str]) -> dict[tuple[str, str], dict]:
    """{(vendor, server name): document} of the specs dump under `root`; UserError when it is not one."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"--specs {root} is not a directory (expected a clone of SpareCores/sc-data-dumps)")
    base = root / "data" / "server" if (root / "data" / "server").is_dir() else root / "server"
    if not base.is_dir():
        raise UserError(f"--specs {root} is not a clone of SpareCores/sc-data-dumps: no data/server/<vendor>/")
    out: dict[tuple[str, str], dict] = {}
    for vendor in vendors:
        folder = base / vendor
        if not folder.is_dir():
            continue
        for entry in os.scandir(folder):
            if not entry.name.endswith(".json") or entry.name.startswith("_"):
                continue
            try:
                doc = json.loads(Path(entry.path).read_text(errors="replace"))
            except (OSError, ValueError):
                continue
            if not isinstance(doc, dict):
                continue
            for key in ("api_reference", "name", "server_id"):
                if isinstance(doc.get(key), str):
                    out.setdefault((vendor, doc[key]), doc)
    return out
