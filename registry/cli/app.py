"""The typer application and the state every command shares (which registry, how long to wait)."""

import sys
from dataclasses import dataclass, field

import typer

from registry import db
from registry.cli.output import say
from registry.errors import RegistryLocked, UserError

app = typer.Typer(
    name="nodereg",
    help="Node characterization registry: profile nodes, trace applications, predict where they run best.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
import_app = typer.Typer(help="Bring data into the registry: bundles, measured runs, external datasets.",
                         no_args_is_help=True)
app.add_typer(import_app, name="import")


# Seconds a command waits for a registry another process is writing. Not 0: two loops of `runs add`
# on one DuckDB file failed 6 times in 25 each; each write holds the lock for well under a second.
DEFAULT_WAIT_S = 10.0


@dataclass
class State:
    db_url: str | None = None
    wait_s: float = DEFAULT_WAIT_S
    _open: dict = field(default_factory=dict)
    _quick: object = None      # a QuickReader (registry/db/duckread.py), or None

    def registry(self, *, readonly: bool = False, current_for: str | None = None) -> "db.Registry":
        """The registry for this invocation, opened once per mode. A read-only open creates nothing
        and changes no PostgreSQL schema; a writable one needs this nodereg's schema on PostgreSQL
        (`nodereg migrate`); a DuckDB file is migrated when opened (registry/db/upgrade.py). An
        older PostgreSQL schema is read as it is, with a warning, unless the command `current_for`
        needs the current one."""
        from registry.db import upgrade

        if readonly not in self._open:
            self.close()  # DuckDB: one configuration per file per process
            reg = self._open_waiting(readonly)
            self._open[readonly] = reg
            if current_for is None and upgrade.behind(reg):
                _announce(upgrade.behind(reg))
        if current_for is not None:
            upgrade.require_current(self._open[readonly], current_for)
        return self._open[readonly]

    def reader(self, current_for: str | None = None):
        """The registry for a command that only reads (through `dicts`, or on connections whose SQL
        goes through registry.db.statement and registry.db.read): a DuckDB file or a PostgreSQL registry
        at this nodereg's schema opens without SQLAlchemy (registry/db/duckread.py: start-up under
        0.3 s; registry/db/pgread.py), anything
        else as `registry(readonly=True, current_for=...)` does, with its waits, warnings and errors."""
        if self._open:
            return next(iter(self._open.values()))
        if self._quick is None:
            from registry.db import duckread, pgread

            self._quick = duckread.open_current(self.db_url) or pgread.open_current(self.db_url)
        return self._quick or self.registry(readonly=True, current_for=current_for)

    def _open_waiting(self, readonly: bool) -> "db.Registry":
        """Open the registry; when another process holds it, say so and wait up to --wait seconds."""
        try:
            return db.open_registry(self.db_url, readonly=readonly, site=True, announce=_announce)
        except RegistryLocked as exc:
            if self.wait_s <= 0:
                raise
            held = str(exc).split(";")[0]
            say(f"{held}: waiting up to {self.wait_s:g} s for it (--wait SECONDS)", err=True)
            return db.open_registry(self.db_url, readonly=readonly, wait_s=self.wait_s, site=True, announce=_announce)

    def adopt(self, reg: "db.Registry") -> None:
        """Use `reg`, opened by the command itself (`migrate`), as this invocation's writable registry."""
        self.close()
        self._open[False] = reg

    def close(self) -> None:
        for reg in [*self._open.values(), *([self._quick] if self._quick else [])]:
            reg.close()
        self._open.clear()
        self._quick = None


def model_options_flag():
    """The repeatable `--option KEY=VALUE` of every command that builds a model (registry.models.options)."""
    return typer.Option(None, "--option", metavar="KEY=VALUE",
                        help="Set a model option (repeatable); `nodereg models NAME` lists them.")


def confirm(yes: bool, question: str, refusal: str) -> None:
    """Go on only with --yes or a 'yes' typed at a terminal."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UserError(f"{refusal} without confirmation: pass --yes")
    if not typer.confirm(question):
        raise UserError("not removed")


def remove_confirmed(ctx: typer.Context, yes: bool, find, remove, question: str, refusal: str) -> dict:
    """Look the thing up (`find(conn)`: its id, or a UserError), ask (see `confirm`), then
    `remove(conn, id)` in one transaction; returns what `remove` returns (rows per table)."""
    reg = state(ctx).registry()
    with reg.connect() as conn:
        find(conn)
    confirm(yes, question, refusal)
    with reg.begin() as conn:
        return remove(conn, find(conn))


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("nodereg")
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = "unknown (not installed)"
        typer.echo(f"nodereg {number}")
        raise typer.Exit()


def state(ctx: typer.Context) -> State:
    return ctx.ensure_object(State)


def current_reader(st: State, command: str) -> "db.Registry":
    """The registry, read-only, at this nodereg's schema: commands such as `match` read (and store)
    columns an older schema lacks. A DuckDB file is migrated as it opens; an older PostgreSQL
    schema is left alone, with a line saying how its admin migrates it."""
    return st.registry(readonly=True, current_for=command)


def _announce(line: str) -> None:
    """What the opening of a registry tells the user (a migration on open, an older schema): stderr."""
    say(line, err=True)


@app.callback()
def _global_options(
    ctx: typer.Context,
    db: str = typer.Option(None, "--db", envvar="NODEREG_DB", show_envvar=True,
                           help="Registry: a DuckDB file's path (absolute or relative, e.g. ~/reg.duckdb) or a "
                                "postgresql://user@host/db URL. Default: a DuckDB file in your data directory."),
    wait: float = typer.Option(DEFAULT_WAIT_S, "--wait", min=0, help="Seconds to wait for a registry another process "
                                                                     "is writing (also accepted after the command)."),
    _version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                  help="Print the version and exit."),
) -> None:
    ctx.obj = State(db_url=db, wait_s=wait)
    ctx.call_on_close(ctx.obj.close)
