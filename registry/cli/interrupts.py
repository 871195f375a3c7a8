"""Ctrl-C and SIGTERM during a long command: say what happened and what was kept.

Python ends on SIGTERM without running `finally` blocks or printing anything; a batch system or
`timeout` sends exactly that. Inside `interrupts_reported`, SIGTERM raises like Ctrl-C does, so the
work unwinds (the microbenchmark driver is closed, an open transaction rolls back) and the command
ends with one line and the shell's exit status for the signal (128 + N: 130, 143).
"""

import signal
from contextlib import contextmanager

from registry.errors import UserError


class Terminated(BaseException):
    """SIGTERM arrived (a BaseException, like KeyboardInterrupt: no `except Exception` swallows it)."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextmanager
def interrupts_reported(what: str):
    """Report Ctrl-C / SIGTERM inside the block as `error: interrupted: <what>`."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    except KeyboardInterrupt:
        raise UserError(f"interrupted: {what}", exit_code=128 + signal.SIGINT) from None
    except Terminated:
        raise UserError(f"terminated (SIGTERM): {what}", exit_code=128 + signal.SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
