"""The command line as users type it, before click parses it.

`--db` and `--wait` belong to `nodereg` itself, but people write them where they think of them:
`nodereg profile vm --wait 30` (the lock error says "pass --wait SECONDS"). Click only accepts a
group's options before the subcommand, so they are moved there. Everything after `--` is another
program's command line (`nodereg trace -- ./app --wait 5`) and is left alone.
"""

from collections.abc import Iterator

import typer

GLOBAL_OPTIONS = ("--db", "--wait")   # each takes one value


def _global(token: str) -> str | None:
    """The global option `token` names (`--wait` or `--wait=5`), else None."""
    name = token.split("=", 1)[0]
    return name if name in GLOBAL_OPTIONS else None


def hoist_global_options(args: list[str]) -> list[str]:
    """`args` with every global option written after the subcommand moved in front of it."""
    start = _subcommand_index(args)
    hoisted, rest = [], list(args[:start])
    tokens = iter(range(start, len(args)))
    for i in tokens:
        token = args[i]
        if token == "--":
            rest += args[i:]
            break
        if _global(token) is None:
            rest.append(token)
        elif "=" in token or i + 1 == len(args):
            hoisted.append(token)
        else:
            hoisted += [token, args[i + 1]]
            next(tokens)
    return hoisted + rest


def subcommand(args: list[str]) -> str | None:
    """The subcommand `args` name (global options first, as `hoist_global_options` leaves them), or None."""
    start = _subcommand_index(args)
    return args[start] if start < len(args) and args[start] != "--" else None


def _subcommand_index(args: list[str]) -> int:
    """Where the subcommand starts: the first token that is neither a global option nor its value."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        i += 1 if "=" in args[i] or _global(args[i]) is None else 2
    return min(i, len(args))


def walk(command) -> Iterator:
    """`command` and every subcommand below it."""
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from walk(sub)


def parameters(cmd) -> list:
    """The parameters of one command, its help option included."""
    help_option = cmd.get_help_option(typer.Context(cmd))   # made once per command, then cached
    return [*cmd.params, *([help_option] if help_option else [])]


def plain_flags(command) -> None:
    """Boolean flags take no value: show none in help (typer's rich help writes `<bool>` for them,
    which reads as if `--json true` were the way to write it)."""
    for cmd in walk(command):
        for param in parameters(cmd):
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
