"""Where the shipped non-Python files live.

`microbench/` and `schema/` sit at the top of the source tree (the design card's layout) and are
copied into the wheel as `registry/_data/...`; an editable install reads them from the tree.
"""

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Directory of shipped data `name` ('microbench' or 'schema')."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"nodereg installation is missing its '{name}' directory")
