"""Command-line front door: `nodereg`. Every failure ends as one line on stderr and a non-zero exit."""

import os
import sys

from rich.text import Text

# commands register on import
from registry.cli import (  # noqa: F401
    accuracy, admin, bundle, evaluate, match, models, nodes, profile, report, run, trace)
from registry.cli.app import app
from registry.cli.output import err_console
from registry.db import db_error, is_driver_error
from registry.errors import UserError

__all__ = ["app", "main"]


def _fail(message: str, code: int) -> None:
    err_console.print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)
    sys.exit(code)


def main() -> None:
    try:
        app()  # standalone: typer itself reports usage errors (exit 2) and exits
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except UserError as exc:
        _fail(str(exc), exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("NODEREG_DEBUG"):
            raise
        if is_driver_error(exc):
            _fail(str(db_error(exc)), 1)
        _fail(f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); "
              "set NODEREG_DEBUG=1 to see the traceback", 70)
