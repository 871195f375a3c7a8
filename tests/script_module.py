"""A script of scripts/ loaded as a module, for the tests of its parts that need no benchmark."""

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@contextmanager
def script_module(name: str) -> Iterator[ModuleType]:
    """scripts/NAME.py as the module NAME, registered while in use (its dataclasses look their
    module up in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]
