"""The shared archives of the two Spare Cores repositories (``sc-inspector-data.tar.gz``,
``sc-data-dumps-specs.tar.gz``, as ../shared/datasets/sparecores holds them), unpacked for the
scripts and tests that read real data. Users point `nodereg import sparecores` at their own clones.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

INSPECTOR, SPECS = "sc-inspector-data", "sc-data-dumps"


def shared_dir(repo: Path) -> Path:
    """../shared/datasets/sparecores beside the repository, or under $NODEREG_SHARED when set."""
    base = Path(os.environ["NODEREG_SHARED"]) if os.environ.get("NODEREG_SHARED") else repo.parent / "shared"
    return base / "datasets" / "sparecores"


def _archive(folder: Path, stem: str) -> Path | None:
    found = sorted(folder.glob(f"{stem}*.tar.gz"))
    return found[0] if found else None


def unpack(folder: Path, into: Path, servers: list[str] | None = None) -> tuple[Path, Path | None]:
    """(inspector clone, specs clone or None) unpacked from `folder`'s archives into `into`.

    `servers` ("aws/m7a.large", ...) unpacks only those servers' folders; otherwise everything,
    once: a marker file beside the unpacked tree says it is complete, so a later call reuses it.
    FileNotFoundError when the inspector archive is not there.
    """
    inspector = _archive(folder, INSPECTOR)
    if inspector is None:
        raise FileNotFoundError(f"no {INSPECTOR}*.tar.gz in {folder}")
    into.mkdir(parents=True, exist_ok=True)
    specs = _archive(folder, SPECS)
    wanted = None if servers is None else tuple(f"{INSPECTOR}/data/{s}/" for s in servers)
    for archive, top in ((inspector, INSPECTOR), (specs, SPECS)):
        if archive is None:
            continue
        stat = archive.stat()
        marker = into / f".{top}-{stat.st_size}-{int(stat.st_mtime)}{'-part' if wanted else ''}.done"
        if marker.exists() and wanted is None:
            continue
        with tarfile.open(archive) as tar:
            members = (m for m in tar if wanted is None or top != INSPECTOR or m.name.startswith(wanted)
                       or m.name.count("/") <= 1)
            tar.extractall(into, members=members, filter="data")
        marker.touch()
    return into / INSPECTOR, (into / SPECS) if specs else None
