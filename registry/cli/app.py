"""The typer application and the state every command shares (which registry, how long to wait)."""

from dataclasses import dataclass, field

import typer

from registry.db import Registry, open_registry

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


@dataclass
class State:
    db_url: str | None = None
    wait_s: float = 0.0
    _open: dict = field(default_factory=dict)

    def registry(self, *, readonly: bool = False) -> Registry:
        """The registry for this invocation, opened once per mode."""
        if readonly not in self._open:
            self.close()  # DuckDB: one configuration per file per process
            self._open[readonly] = open_registry(self.db_url, readonly=readonly, wait_s=self.wait_s)
        return self._open[readonly]

    def close(self) -> None:
        for reg in self._open.values():
            reg.close()
        self._open.clear()


def state(ctx: typer.Context) -> State:
    return ctx.ensure_object(State)


def current_reader(st: State) -> Registry:
    """The registry, read-only, at this nodereg's schema: an older one is migrated first (through a
    writable open), since commands such as `match` read and store columns the older schema lacks."""
    from registry.db.migrate import current_version, latest_version

    reg = st.registry(readonly=True)
    with reg.connect() as conn:
        if current_version(conn) >= latest_version():
            return reg
    st.registry()
    return st.registry(readonly=True)


@app.callback()
def _global_options(
    ctx: typer.Context,
    db: str = typer.Option(None, "--db", envvar="NODEREG_DB", show_envvar=True,
                           help="Registry URL (SQLAlchemy): duckdb:///file.duckdb or postgresql://... "
                                "Default: a DuckDB file in your data directory."),
    wait: float = typer.Option(0.0, "--wait", min=0, help="Seconds to wait for a registry another process is writing."),
) -> None:
    ctx.obj = State(db_url=db, wait_s=wait)
    ctx.call_on_close(ctx.obj.close)
