"""Command-line front door: `nodereg`. Every failure ends as one line on stderr and a non-zero exit.

typer's standalone mode would print usage errors as a box of several lines and exit 1 on a broken
pipe, so the command tree is run here in click's non-standalone way and each outcome is reported by
the project's own convention: usage errors as one `error:` line with exit 2 (as click's), a closed
stdout (`nodereg sql ... | head`) as a quiet exit 0, interrupts as `error: interrupted` with 130.
"""

import importlib
import os
import sys
import warnings

import typer

from registry.cli import coerce, output
from registry.cli.app import app
from registry.cli.argv import hoist_global_options, plain_flags, subcommand
from registry.errors import UserError

try:  # typer >= 0.26 carries its own copy of click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on click
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError

__all__ = ["app", "main"]

# Commands register when their module is imported. A command line that names one imports only the
# modules that register it (start-up under 0.3 s, issue 30: every module of the command line took
# about 0.1 s to import); any other (--help, a typo, nothing) imports all of them.
# tests/test_startup_imports.py checks this map against what the modules register.
COMMANDS = {
    "accuracy": ("accuracy",), "apps": ("records",), "doctor": ("admin",), "evaluate": ("evaluate",),
    "export": ("bundle",), "fleet": ("fleet", "fleet_mpi"), "health": ("fleet",),
    "import": ("bundle", "evaluate", "models", "nodes", "sparecores"), "init": ("admin",),
    "inventory": ("admin",), "match": ("match",), "migrate": ("admin",), "models": ("models",),
    "nodes": ("nodes",), "profile": ("profile",), "report": ("report",), "run": ("run",),
    "runs": ("models", "records"), "scaling": ("models",), "serve": ("serve",), "sql": ("admin",),
    "trace": ("trace",), "traces": ("records",),
}
# ... and the modules of other commands a command uses: `fleet submit` parses the options it passes
# on to `nodereg profile` with that command's parser (without it: `internal error (KeyError:
# 'profile')` for the README's `nodereg fleet submit TYPE -w ... -- --quick`)
USES = {"fleet": ("profile",)}


def load_commands(args: list[str]) -> None:
    """Import the modules that register the command `args` name (all of them if it names none;
    none for `--version` alone, answered before any command)."""
    name = subcommand(args)
    if name is None and "--version" in args and "--help" not in args:
        return
    every = sorted({m for modules in COMMANDS.values() for m in modules})
    for module in (*COMMANDS[name], *USES.get(name, ())) if name in COMMANDS else every:
        importlib.import_module(f"registry.cli.{module}")


def _fail(message: str, code: int) -> None:
    from rich.text import Text

    output.err_console.print(Text("error: ", style="bold red") + Text(" ".join(message.split())), soft_wrap=True)
    sys.exit(code)


def _usage_error(exc: UsageError) -> None:
    """One line: click's message and where to read the usage. Without arguments, the help itself
    (typer's rich help has printed itself already when the exception was made)."""
    if isinstance(exc, NoArgsIsHelpError):
        output.err_console.print(exc.format_message(), end="")
        sys.exit(exc.exit_code)
    ctx = exc.ctx
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    message = exc.format_message().rstrip(".")
    _fail(message[:1].lower() + message[1:] + hint, exc.exit_code)


def _quiet_stdout() -> None:
    """The reader of stdout went away: point stdout at /dev/null so that the flush at interpreter
    shutdown does not raise a second BrokenPipeError (Python's documented recipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _run(args: list[str]) -> int:
    load_commands(args)
    command = typer.main.get_command(app)
    plain_flags(command)
    coerce.install(command)
    with command.make_context(_prog_name(), args) as ctx, warnings.catch_warnings():
        # numpy's and scikit-learn's warnings (`All-NaN slice`, `DataConversionWarning`) speak of their
        # internals, not of anything a user did; nodereg says what matters in its own words
        if not os.environ.get("NODEREG_DEBUG"):
            warnings.simplefilter("ignore")
        command.invoke(ctx)
    return 0


def _prog_name() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "nodereg"
    return "nodereg" if name in ("__main__.py", "-c", "") else name


def main() -> None:
    try:
        code = _run(hoist_global_options(sys.argv[1:]))
        sys.stdout.flush()
    except typer.Exit as exc:
        code = exc.exit_code
    except UsageError as exc:
        _usage_error(exc)
    except ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _fail("interrupted", 130)
    except UserError as exc:
        _fail(str(exc), exc.exit_code)
    except BrokenPipeError:
        _quiet_stdout()
        code = 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("NODEREG_DEBUG"):
            raise
        from registry.db import db_error, is_driver_error   # SQLAlchemy: loaded by the commands that use it

        if is_driver_error(exc):
            _fail(str(db_error(exc)), 1)
        _fail(f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); "
              "set NODEREG_DEBUG=1 to see the traceback", 70)
    sys.exit(code)
