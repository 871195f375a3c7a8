"""Data is printed as data, and names are checked where they enter the registry.

A Slurm host list looks like `cn[01-04]`; rich reads `[...]` as markup and `:x:` as an emoji code.
Every command that prints a name must print it as it is (tables, titles, messages, progress, chart
titles), and names a table cell or a shell cannot carry (line breaks, control characters, absurd
lengths) are refused in one line before anything is run or written.
"""

import csv
import re
import sys

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends

from registry.cli import output
from registry.db import open_registry, utcnow
from registry.db.write import insert_returning
from registry.errors import UserError
from registry.inventory import collect
from registry.nodes import ensure_node

# names rich would have rendered differently (or crashed on), and a 200-character one
PRINTED = ["cn[/]", "[red]x[/red]", "a:x:b", "cn[01-04]", "n" * 200]
# names that are refused, with what the error says
REFUSED = [("a\nb", "U+000A"), ("a\tb", "U+0009"), ("n" * 201, "201 characters long"), ("", "must not be empty"),
           ("  ", "must not be empty"), (" a", "begins or ends with a space"), ("a\u2028b", "U+2028")]
FAST_PROFILE = ("--quick", "--reps", "2", "--threads", "1", "--kernels", "peak_fma")
COUNTED = ("nodes", "apps", "runs", "traces", "profiles")


@pytest.fixture
def wide(monkeypatch):
    """Tables as wide as their content (not folded at 80 columns when stdout is no terminal), so
    that a 200-character name stays whole in its cell."""
    monkeypatch.setattr(output.console, "_width", 4000)


def cells(out: str) -> set[str]:
    """The text of every cell of the tables in `out` (rich's box drawing, one line per row)."""
    return {c.strip() for line in out.splitlines() for c in re.split("[│┃]", line)[1:-1]}


def counts(db_url: str) -> dict[str, int]:
    reg = open_registry(db_url)   # created if the refused command left none (it must not have written)
    try:
        with reg.connect() as conn:
            return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in COUNTED}
    finally:
        reg.close()


def base_node(db_url: str) -> None:
    """A node measured on this host (trace runs on it), without a profile."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "base", collect())
    reg.close()


@pytest.mark.parametrize("name", PRINTED)
def test_nodes_runs_and_sql_print_names_as_data(cli, wide, name):
    assert cli("init").code == 0
    assert_one_line_error(cli("nodes", "show", name), f"unknown node {name!r}")
    added = cli("runs", "add", "--new", name, name, "--threads", "2", "--time", "1.5")
    assert added.code == 0, added.err
    assert f": {name} on {name}, 2 threads, 1.5 s\n" in added.out
    for args in (["nodes"], ["nodes", "show", name], ["runs", "list"], ["runs", "list", "--node", name],
                 ["sql", "SELECT name FROM nodes"], ["sql", "SELECT name FROM apps"]):
        res = cli(*args)
        assert res.code == 0 and "error" not in res.err, (args, res.err)
        assert name in cells(res.out), (args, res.out)
    assert f"node {name}\n" in cli("nodes", "show", name).out            # the title
    removed = cli("nodes", "rm", name, "--yes")
    assert removed.code == 0 and removed.out == f"removed node {name} (1 runs)\n", removed
    assert_one_line_error(cli("runs", "list", "--node", name), f"unknown node {name!r}")


@both_backends
def test_sql_output_is_byte_exact(cli, sql_reader):
    query = """SELECT 'a:x:b' AS ":x:", '[red]hi[/red]' AS "[b]k[/b]", 'cn[/]' AS "x" """
    res = cli("sql", query)
    assert res.code == 0, res.err
    assert res.out == ("┏━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━┓\n"
                       "┃ :x:   ┃ [b]k[/b]      ┃ x     ┃\n"
                       "┡━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━┩\n"
                       "│ a:x:b │ [red]hi[/red] │ cn[/] │\n"
                       "└───────┴───────────────┴───────┘\n")
    assert cli("sql", "SELECT 'a:x:b', '[red]hi[/red]'", "--format", "csv").out.splitlines()[1] == \
        "a:x:b,[red]hi[/red]"


def test_import_runs_names_the_new_names_as_data(cli, tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text('app,node,threads,time_s\n"[red]x[/red]","cn[01-04]",1,2.5\n')
    res = cli("import", "runs", path)
    assert res.code == 0, res.err
    assert res.out == f"imported 1 run from {path} (new apps: [red]x[/red]; new nodes: cn[01-04])\n"


@pytest.mark.parametrize("name", ["app[/]", ":x:"])
def test_trace_prints_the_name_and_exits_with_the_programs_status(cli, db_url, name):
    base_node(db_url)
    res = cli("trace", "--name", name, "--node", "base", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert res.code == 3, res.err
    assert f"{name}: failed, " in res.out
    assert "internal error" not in res.err
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        stored = conn.execute(sa.text("SELECT a.name, t.exit_status FROM traces t JOIN apps a "
                                      "ON a.app_id = t.app_id")).all()
    reg.close()
    assert [tuple(r) for r in stored] == [(name, 3)]


def test_profile_shows_the_node_name_in_progress_and_summary(cli, db_url, binary, monkeypatch):
    # a live progress display, as on a terminal (rich renders none into a pipe)
    monkeypatch.setattr(output.err_console, "_force_terminal", True)
    monkeypatch.setattr(output.err_console, "is_interactive", True)
    monkeypatch.setenv("TERM", "xterm")
    res = cli("profile", "rack[/]1", *FAST_PROFILE)
    assert res.code == 0, res.err
    assert "profiling rack[/]1" in res.err
    assert " of node rack[/]1 (CPUs " in res.out


def test_scaling_titles_name_app_and_node(cli, wide):
    for threads in (1, 2, 4, 8):
        assert cli("runs", "add", "--new", ":x:", "cn[/]", "--threads", threads, "--time", 2 + 16 / threads).code == 0
    res = cli("scaling", ":x:", "--node", "cn[/]", "--model", "amdahl", "--predict", "16")
    assert res.code == 0, res.err
    assert ":x: on cn[/] (amdahl)" in res.out


def _entries(name: str, tmp_path) -> dict[str, list[str]]:
    """Every way a name enters the registry from the command line: name -> argv."""
    path = tmp_path / "runs.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([("app", "node", "threads", "time_s"), ("lu", name, 1, 2)])
    return {"runs add app": ["runs", "add", "--new", name, "n1", "--threads", "1", "--time", "1"],
            "runs add node": ["runs", "add", "--new", "lu", name, "--threads", "1", "--time", "1"],
            "import runs": ["import", "runs", str(path)],
            "profile": ["profile", name, *FAST_PROFILE],
            "trace": ["trace", "--name", name, "--node", "n1", "--", sys.executable, "-c", "pass"]}


@pytest.mark.parametrize(("entry", "name", "fragment"), [
    (entry, name, fragment) for entry in ("runs add app", "runs add node", "import runs", "profile", "trace")
    for name, fragment in REFUSED
    if not (entry == "import runs" and name.strip() and name != name.strip())])   # the CSV reader strips cells
def test_unusable_names_are_refused_before_anything_is_written(cli, db_url, tmp_path, entry, name, fragment):
    argv = _entries(name, tmp_path)[entry]
    res = cli(*argv)
    assert_one_line_error(res, fragment, "printable characters such as cn[01-04]")
    if entry == "import runs":
        assert "runs.csv: line " in res.err
    assert set(counts(db_url).values()) == {0}


def test_trace_file_names_are_checked_when_read(tmp_path):
    from registry.io.tracefile import Trace, read_trace, write_trace
    path = tmp_path / "t.json"
    write_trace(Trace("a\nb", "n1", "h", ["x"], 0, "ok", 1.0, 0.1, "", [], []), path)
    with pytest.raises(UserError, match=r"t\.json: app name 'a\\nb' contains the character U\+000A"):
        read_trace(path)


def test_bundles_with_unusable_names_import_nothing(tmp_path, cli):
    src, dst = (f"duckdb:///{tmp_path / n}.duckdb" for n in ("src", "dst"))
    reg = open_registry(src)
    with reg.begin() as conn:      # written past the check, as an older nodereg could
        insert_returning(conn, "nodes", {"name": "cn\n1", "source": "runs", "created_at": utcnow()}, "node_id")
    reg.close()
    assert cli("--db", src, "export", tmp_path / "b.zip").code == 0
    assert_one_line_error(cli("--db", dst, "import", "bundle", tmp_path / "b.zip"), "bundle: node name 'cn\\n1'")
    assert counts(dst)["nodes"] == 0


def test_lumos_skips_folders_whose_names_cannot_be_names(tmp_path):
    from lumos_synth import make_dataset

    from registry.io.lumos import import_lumos

    root = make_dataset(tmp_path / "cloud", n_apps=1, runs=1, quirks=False)
    (root / "1 second" / "c6.large").rename(root / "1 second" / "c6\nlarge")
    reg = open_registry(f"duckdb:///{tmp_path / 'r.duckdb'}")
    summary = import_lumos(reg, root)
    with reg.connect() as conn:
        names = [r[0] for r in conn.execute(sa.text("SELECT name FROM nodes ORDER BY name"))]
    reg.close()
    assert summary.skipped == {"unusable VM type or workload name": 2}      # the app's run and the Hive run
    assert names == ["cloud/g6.2xlarge", "cloud/g6.xlarge", "cloud/r6.xlarge"]


def test_chart_titles_show_names_not_mathtext(tmp_path, cli):
    from test_report_fixtures import SynthNode, build_registry

    name = r"n$\alpha$[/]"
    url = f"duckdb:///{tmp_path / 'r.duckdb'}"
    build_registry(url, nodes=[SynthNode(name)], with_trace=False)
    out = tmp_path / "n.svg"        # the summary figure, titled with the node's name
    res = cli("--db", url, "report", "node", name, "--out", out)
    assert res.code == 0, res.err
    assert re.search(f">{re.escape(name)}: [^<]+</text>", out.read_text()), name
