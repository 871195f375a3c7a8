"""Start-up (issue 30, item 7): the command line imports the heavy libraries only in the commands that
use them. `nodereg --help` importing SQLAlchemy and numpy took about 0.9 s of CPU against the 0.3 s
target (scripts/bench_startup.py measures it); this guards the import graph, which is what a
stray module-level import breaks. pydantic is typer's, for every value it reads (registry/cli/coerce.py
reads plain ones without it)."""

import json
import subprocess
import sys

import pytest

from registry.db import open_registry
from registry.nodes import ensure_node

HEAVY = ("numpy", "pandas", "sqlalchemy", "duckdb", "sklearn", "scipy", "pyarrow", "psycopg", "pydantic")

_PROBE = """
import json, sys
sys.argv = ["nodereg", *{args!r}]
import registry.cli
if sys.argv[1:]:
    try:
        registry.cli.main()
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


def _run(args: list[str]) -> tuple[list[str], str]:
    """(the heavy libraries `nodereg ARGS` imported, what it printed on stdout)."""
    res = subprocess.run([sys.executable, "-c", _PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                         text=True, timeout=60)
    return json.loads(res.stderr.strip().splitlines()[-1]), res.stdout


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["nodes", "--help"]])
def test_the_command_line_starts_without_heavy_libraries(args):
    loaded, _ = _run(args)
    assert loaded == [], f"`nodereg {' '.join(args)}` imported {loaded}"


@pytest.mark.parametrize("args, shown", [(["nodes"], "alpha"), (["nodes", "--json", "--vendor", "aws"], "[]")])
def test_listing_the_nodes_of_a_duckdb_registry_needs_neither_sqlalchemy_nor_pydantic(tmp_path, args, shown):
    """`nodereg nodes` on a DuckDB file reads it through DuckDB's own module (registry/db/duckread.py):
    with SQLAlchemy, its DuckDB dialect and pydantic it took 0.75 s against the 0.3 s target."""
    path = tmp_path / "small.duckdb"
    reg = open_registry(str(path))
    with reg.begin() as conn:
        ensure_node(conn, "alpha")
    reg.close()
    loaded, out = _run(["--db", str(path), *args])
    assert loaded == [] and shown in out


def test_json_output_needs_no_rich(tmp_path):
    """A command printing JSON draws no table: rich (20-40 ms to import) is not loaded for it
    (registry.cli.output makes its consoles on first use), while the table of the same rows is drawn
    with it."""
    path = tmp_path / "small.duckdb"
    reg = open_registry(str(path))
    with reg.begin() as conn:
        ensure_node(conn, "alpha")
    reg.close()
    probe = _PROBE.replace("{heavy!r}", "('rich',)")
    loaded = {}
    for how in (["--json"], []):
        res = subprocess.run([sys.executable, "-c", probe.format(args=["--db", str(path), "nodes", *how])],
                             capture_output=True, text=True, timeout=60)
        loaded[bool(how)] = json.loads(res.stderr.strip().splitlines()[-1])
        assert "alpha" in res.stdout
    assert loaded == {True: [], False: ["rich"]}


def test_the_map_of_command_modules_names_what_each_module_registers():
    """A command line that names a command imports only the modules in registry.cli.COMMANDS: a module
    left out of it would make its command (or a subcommand of a shared group) unknown."""
    import registry.cli
    from registry.cli.app import app

    registry.cli.load_commands([])   # every command module

    def modules(typer_app) -> set[str]:
        found = {c.callback.__module__ for c in typer_app.registered_commands}
        if typer_app.registered_callback is not None:
            found.add(typer_app.registered_callback.callback.__module__)
        for group in typer_app.registered_groups:
            found |= modules(group.typer_instance)
        return found

    registered = {c.name or c.callback.__name__: {c.callback.__module__} for c in app.registered_commands}
    registered |= {g.name: modules(g.typer_instance) for g in app.registered_groups}
    assert {name: {f"registry.cli.{m}" for m in mods} for name, mods in registry.cli.COMMANDS.items()} == registered
