"""Listing the sub-folders of a dataset folder, as every folder-tree importer does."""

from __future__ import annotations

import os
from pathlib import Path

from registry.errors import UserError


def subdirs(path: Path) -> list[os.DirEntry]:
    """The visible sub-folders of `path`, sorted by name; UserError when `path` cannot be read."""
    try:
        return sorted((e for e in os.scandir(path) if e.is_dir() and not e.name.startswith(".")),
                      key=lambda e: e.name)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
