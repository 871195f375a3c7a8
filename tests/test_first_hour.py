"""The first hour of a new user (issue 22, docs/first-hour.md): command-line conventions, typos that
must not create things, removing single facts, a busy host, and match's caveats."""

import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error

from registry.cli.argv import hoist_global_options
from registry.db import open_registry
from registry.measure import load
from registry.trace import store
from registry_data import profile_at_speeds, three_phase_trace


def _count(db_url: str, sql: str) -> int:
    reg = open_registry(db_url, readonly=True)
    try:
        with reg.connect() as conn:
            return conn.execute(sa.text(sql)).scalar_one()
    finally:
        reg.close()


def test_usage_errors_are_one_line_with_exit_2(cli):
    for args, fragment in ((("nodes", "--bogus"), "no such option: --bogus"),
                           (("runs", "add"), "missing argument 'APP'"),
                           (("nodes", "--json", "true"), "no such command 'true'")):
        res = cli(*args)
        assert_one_line_error(res, fragment, "--help`")
        assert res.code == 2


def test_version_and_flags_without_a_value_hint(cli):
    res = cli("--version")
    assert res.code == 0 and res.out.startswith("nodereg ")
    shown = cli("nodes", "--help").out
    assert "--json" in shown and "<bool>" not in shown


def test_wait_and_db_are_accepted_after_the_subcommand(cli, db_url, tmp_path):
    assert cli("init", "--wait", "1").code == 0
    assert cli("nodes", "--wait", "1").code == 0
    other = tmp_path / "other.duckdb"
    assert cli("runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new", f"--db=duckdb:///{other}").code == 0
    assert other.exists() and _count(db_url, "SELECT count(*) FROM runs") == 0


def test_hoisting_leaves_another_programs_arguments_alone():
    assert hoist_global_options(["trace", "--name", "x", "--wait", "3", "--", "./app", "--wait", "5"]) == \
        ["--wait", "3", "trace", "--name", "x", "--", "./app", "--wait", "5"]
    assert hoist_global_options(["--db", "u", "nodes"]) == ["--db", "u", "nodes"]


def test_a_closed_pipe_is_a_quiet_exit_0(db_url):
    open_registry(db_url).close()
    proc = subprocess.Popen([sys.executable, "-m", "registry", "--db", db_url, "sql",
                             "SELECT * FROM range(200000)", "--format", "csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"range\n"
    proc.stdout.close()            # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == ""


def test_runs_add_creates_names_only_when_asked_and_says_how_to_undo(cli, db_url):
    assert cli("runs", "add", "twophase", "two", "--threads", "1", "--time", "2", "--new").code == 0
    typo = cli("runs", "add", "twophse", "tow", "--threads", "1", "--time", "2")
    assert_one_line_error(typo, "unknown app 'twophse' (did you mean 'twophase'?) and node 'tow' (did you mean "
                                "'two'?): pass --new to create them")
    assert _count(db_url, "SELECT count(*) FROM nodes") == 1 and _count(db_url, "SELECT count(*) FROM runs") == 1
    res = cli("runs", "add", "foo", "typo-node", "--threads", "1", "--time", "2", "--new")
    assert res.code == 0
    undo = re.search(r"note: created app 'foo' and node 'typo-node'; `(.+)` and `(.+)` undo it", res.err)
    assert undo, res.err
    for command in undo.groups():
        assert cli(*shlex.split(command)[1:]).code == 0, command
    assert _count(db_url, "SELECT count(*) FROM nodes WHERE name = 'typo-node'") == 0
    assert _count(db_url, "SELECT count(*) FROM apps WHERE name = 'foo'") == 0
    assert _count(db_url, "SELECT count(*) FROM runs") == 1
    again = cli("runs", "add", "twophase", "two", "--threads", "1", "--time", "2")
    assert again.code == 0 and "created" not in again.err


def test_a_registry_in_a_missing_directory_is_not_created(cli, tmp_path):
    missing = tmp_path / "nonexistent_dir"
    assert_one_line_error(cli("--db", f"duckdb:///{missing}/x.duckdb", "runs", "add", "a", "n", "--threads", "1",
                              "--time", "2"), "does not exist")
    assert_one_line_error(cli("--db", f"duckdb:///{missing}/x.duckdb", "nodes"), "no registry", "creates none")
    assert not missing.exists()


def test_report_out_in_a_missing_directory_is_refused(tmp_path):
    from registry.errors import UserError
    from registry.report.document import _write_atomic

    with pytest.raises(UserError, match="does not exist"):
        _write_atomic(tmp_path / "nonexistent" / "x.html", b"x")
    assert not (tmp_path / "nonexistent").exists()


@pytest.fixture
def traced(db_url):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        _, uid = store.save(conn, three_phase_trace())
    reg.close()
    return uid


def test_traces_apps_and_runs_are_listed_and_removed(cli, db_url, traced):
    listed = json.loads(cli("traces", "--json").out)
    assert [t["uid"] for t in listed] == [traced]
    assert_one_line_error(cli("traces", "rm", traced[:8]), "pass --yes")      # no terminal: no silent removal
    assert_one_line_error(cli("traces", "rm", "nope", "--yes"), "no trace with uid 'nope'")
    assert _count(db_url, "SELECT count(*) FROM traces") == 1
    assert cli("match", traced).code == 0                                       # predictions refer to it
    res = cli("traces", "rm", traced[:8], "--yes")
    assert res.code == 0, res.err
    for table in ("traces", "phases", "trace_samples", "predictions"):
        assert _count(db_url, f"SELECT count(*) FROM {table}") == 0, table
    assert _count(db_url, "SELECT count(*) FROM signatures WHERE owner_kind = 'phase'") == 0
    assert not [p for p in json.loads(cli("doctor", "--json").out)["problems"] if p["kind"] == "orphan"]

    cli("runs", "add", "app", "b", "--threads", "1", "--time", "2")
    uid = json.loads(cli("runs", "list", "--json").out)[0]["uid"]
    assert_one_line_error(cli("runs", "rm", uid, "nope", "--yes"), "no run with uid 'nope'")
    assert _count(db_url, "SELECT count(*) FROM runs") == 1                     # all or nothing
    assert cli("runs", "rm", uid, "--yes").code == 0
    assert _count(db_url, "SELECT count(*) FROM runs") == 0

    assert [a["name"] for a in json.loads(cli("apps", "--json").out)] == ["app"]
    assert cli("apps", "rm", "app", "--yes").code == 0
    assert _count(db_url, "SELECT count(*) FROM apps") == 0
    assert_one_line_error(cli("apps", "rm", "app", "--yes"), "unknown app 'app'")


def _busy(monkeypatch):
    """A fake load source: another nodereg profile is running."""
    monkeypatch.setattr(load, "other_measurers", lambda: ["4242 nodereg profile other"])


PEAK = ("--quick", "--kernels", "peak_fma", "--threads", "1", "--reps", "2")


def test_a_busy_host_is_warned_about_and_recorded(cli, db_url, binary, monkeypatch):
    _busy(monkeypatch)
    res = cli("profile", "n", *PEAK)
    assert res.code == 0, res.err
    assert "warning: the host is busy: another nodereg measurement is running (4242" in res.err
    stored = json.loads(_count(db_url, "SELECT host_load_json FROM profiles"))
    assert stored["busy"].startswith("another nodereg measurement") and stored["measurers"]


def test_strict_refuses_a_busy_host(cli, db_url, binary, monkeypatch):
    _busy(monkeypatch)
    assert_one_line_error(cli("profile", "n", *PEAK, "--strict"), "the host is busy", "--strict")
    assert _count(db_url, "SELECT count(*) FROM nodes") == 0


def test_an_idle_host_is_recorded_as_idle(cli, db_url, binary, monkeypatch):
    monkeypatch.setattr(load, "other_measurers", lambda: [])
    monkeypatch.setattr(load.CpuMeter, "read", lambda self: 0.0)
    res = cli("profile", "n", *PEAK, "--strict")
    assert res.code == 0 and "warning" not in res.err, res.err
    assert json.loads(_count(db_url, "SELECT host_load_json FROM profiles"))["busy"] is None


def test_the_host_is_looked_at_since_the_command_began():
    """`profile` starts its load meter when it begins: the window (0.5 s) is filled by its own start-up
    (imports, the registry, the build; its own CPU time is not counted as load) instead of a sleep
    before measuring (issue 30: `profile --quick` < 45 s)."""
    import time

    def took(since=None) -> float:
        t0 = time.monotonic()
        load.sample(since=since)
        return time.monotonic() - t0

    assert took() >= 0.5
    started = load.CpuMeter()
    time.sleep(0.5)
    assert took(started) < 0.2


def test_match_names_and_widens_caveated_profiles(cli, db_url, traced):
    calm = json.loads(cli("match", traced, "--json", "--no-store").out)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE profiles SET host_load_json = :j WHERE node_id = "
                             "(SELECT node_id FROM nodes WHERE name = 'fast')"),
                     {"j": json.dumps({"busy": "other processes keep 2.0 CPU(s) busy"})})
    reg.close()
    res = cli("match", traced, "--json", "--no-store")
    loaded = json.loads(res.out)
    assert [c["kind"] for c in loaded["caveats"]] == ["loaded"]
    assert any(w.startswith("fast: its profile was measured on a busy host") for w in loaded["warnings"])
    before = {p["node"]: p for p in calm["predictions"]}
    for p in loaded["predictions"]:
        assert p["predicted_s"] == pytest.approx(before[p["node"]]["predicted_s"])
        widened = p["node"] == "fast"
        assert (p["high_s"] > before[p["node"]]["high_s"]) is widened
        assert (p["low_s"] < before[p["node"]]["low_s"]) is widened
    assert "warning: fast: its profile was measured on a busy host" in cli("match", traced, "--no-store").err


def test_a_caveat_shared_by_nodes_names_each_ones_command(cli, db_url):
    """Two nodes profiled on a busy host shared one warning, `one, twin: its profile was measured on a
    busy host ...; re-profile on an idle host: `nodereg profile one --wait-idle 600``: twin's command
    was missing (trial 3)."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node in ("b", "fast", "quad"):
            profile_at_speeds(conn, node, 2, base=node == "b")
        store.save(conn, three_phase_trace())
        conn.execute(sa.text("UPDATE profiles SET host_load_json = :j WHERE node_id IN "
                             "(SELECT node_id FROM nodes WHERE name IN ('fast', 'quad'))"),
                     {"j": json.dumps({"busy": "other processes keep 2.0 CPUs busy"})})
    reg.close()
    said = " ".join(cli("match", "app", "--no-store").err.split())
    assert "warning: fast, quad: each one's profile was measured on a busy host (other processes keep 2.0 CPUs " \
           "busy); their intervals widened x2.4; re-profile on an idle host: `nodereg profile fast --wait-idle 600` " \
           "and `nodereg profile quad --wait-idle 600`" in said, said


def test_configs_are_explained_in_words_and_the_base_time_is_named(cli, traced):
    from registry.match.references import config_in_words

    assert config_in_words("triad|memory|nt") == "triad from memory, non-temporal stores"
    assert config_in_words('mbw1c|{"streams": [[67108864, 8, "f64", "C", "seq"]]}') == \
        "mbw1c: 1 stream: 67108864 f64, stride 8 B, shared, seq"
    assert config_in_words('{"placement":"compact","streams":[[524288,8,"f64","P","seq"]],"ub":"mbw1p"}') == \
        "mbw1p: 1 stream: 524288 f64, stride 8 B, private, seq"       # corredor's config identity
    assert config_in_words('{"placement":"scatter","streams":[[64,8,"f64","C","seq"]],"ub":"mbw1c"}') == \
        "mbw1c: 1 stream: 64 f64, stride 8 B, shared, seq, placement scatter"
    shown = cli("match", traced, "--no-store")
    assert "traced run 21 s" in shown.out and '{"' not in shown.out, shown.out
    cli("runs", "add", "app", "b", "--threads", "2", "--time", "30")
    cli("runs", "add", "app", "b", "--threads", "2", "--time", "31")
    assert "base time 30 s (median of the traced run, 21 s, and measured runs)" in \
        cli("match", traced, "--no-store").out


def test_a_window_length_is_not_plotted_as_a_rate():
    import pandas as pd

    from registry.report.trace import metric_groups

    panels, _ = metric_groups(pd.DataFrame({"wss_window_s": [0.5, 1.0], "rd_sec/s": [1.0, 2.0]}))
    assert ("Durations", "seconds", ["wss_window_s"]) in panels
    assert ("Rates", "per second", ["rd_sec/s"]) in panels


def test_size_ticks_fit_a_narrow_panel():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from registry.report.charts import TICK_LABEL_IN, bytes_axis

    fig = Figure(figsize=(3, 3))
    ax = fig.add_subplot()
    bytes_axis(ax, [2.0**k for k in range(10, 30)])
    width_in = ax.get_position().width * fig.get_figwidth()
    assert len(ax.get_xticks()) <= width_in / TICK_LABEL_IN + 1


def test_one_memory_bandwidth_in_nodes_roofline_and_report(cli, db_url):
    from test_report_fixtures import build_registry

    from registry.report import curves
    from registry.report.load import node_profile
    from registry.report.node import facts, roofline_lines

    build_registry(db_url, with_trace=False)
    listed = {n["name"]: n["memory_triad_gbs"] for n in json.loads(cli("nodes", "--json").out)}
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        for name, quoted in listed.items():
            prof = node_profile(conn, name)
            memory = curves.memory_bandwidth(prof)
            assert memory.value == pytest.approx(quoted), name
            assert memory.threads == prof.rows["threads"].max()
            lines, _ = roofline_lines(prof)
            assert f"memory: {quoted:.3g} GB/s" in [ln.label for ln in lines], name
            assert ("memory bandwidth", f"{quoted:.3g} GB/s ({memory.describe()})") in facts(prof)
    reg.close()


# Issue 32: the first hour, second round.

def test_an_app_name_is_looked_up_before_a_file_of_that_name(cli, traced, tmp_path, monkeypatch):
    """`nodereg trace` names the app after the program: in its build directory `match app` must find
    the app, not read the executable `./app` as a trace file (and say that both exist)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app").write_bytes(b"\x7fELF\x02\x01\x01\x00\x80\x81")
    res = cli("match", "app")
    assert res.code == 0, res.err
    assert "note: 'app' taken as the app in the registry; for the file of that name write ./app" in res.err
    rep = cli("report", "match", "app", "--out", str(tmp_path / "m.html"))
    assert rep.code == 0 and "./app" in rep.err, rep.err
    assert_one_line_error(cli("match", "./app"), "app is not a nodereg trace file (binary data, not JSON text); "
                          "a program is traced with `nodereg trace --name APP -- ./app`")    # a path is a path


def test_unknown_traces_are_worded_alike_in_match_and_report(cli, traced, tmp_path):
    said = [cli(*args, "nosuch").err for args in (("match",), ("report", "match"), ("report", "trace"))]
    assert said[0] == said[1] == said[2], said
    assert "unknown trace 'nosuch'" in said[0] and "apps with traces: app" in said[0]


def test_db_takes_plain_paths_and_refuses_other_files(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    add = ("runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new")
    for given, made in (("sub/rel.duckdb", tmp_path / "sub" / "rel.duckdb"),
                        (str(tmp_path / "abs.duckdb"), tmp_path / "abs.duckdb")):
        assert cli("--db", given, *add).code == 0
        assert _count(str(made), "SELECT count(*) FROM runs") == 1, given
    trace = tmp_path / "twophase.json"
    trace.write_text('{"version": 1}')
    for args in (("--db", str(trace), *add), ("--db", "twophase.json", "nodes"), ("--db", "new.json", "nodes")):
        res = cli(*args)
        assert_one_line_error(res, "not a valid DuckDB database" if "twophase" in args[1] else "another format")
    assert trace.read_text() == '{"version": 1}' and not (tmp_path / "new.json").exists()
    # SQLAlchemy's three slashes are relative: an absolute path meant that way is named, not guessed
    res = cli("--db", f"duckdb://{tmp_path}/x.duckdb", "nodes")
    assert_one_line_error(res, f"for {tmp_path}/x.duckdb pass --db {tmp_path}/x.duckdb")
    assert "registry " + str(tmp_path / "abs.duckdb") in cli("--db", str(tmp_path / "abs.duckdb"), "init").out


_NUMBER = re.compile(r"-?\d[\d,.]*(?:e[-+]\d+)?")


def _header_lines(text: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        inside = (inside or line.startswith("┏")) and not line.startswith("┡")
        if inside and line.startswith("┃"):
            lines.append(line)
    return lines


def _assert_fits_80(wide: str, narrow: str, what, numbers: bool = True) -> None:
    """`narrow`'s tables (80 columns) fit, and hold every number and every header word of `wide` whole
    (prose lines around them, such as match's phases, are the terminal's to wrap)."""
    assert all(len(line) <= 80 for line in narrow.splitlines() if re.search("[│┃┏┗└┡]", line)), (what, narrow)
    missing = Counter(_NUMBER.findall(wide)) - Counter(_NUMBER.findall(narrow))
    assert not (numbers and missing), (what, missing, narrow)
    words = {w for line in _header_lines(wide) for w in re.findall(r"[^\W_]+", line)}
    split = words - {w for line in _header_lines(narrow) for w in re.findall(r"[^\W_]+", line)}
    assert not split, (what, split, narrow)


def _assert_prose_fits_80(wide, narrow, what) -> None:
    """Every line of `narrow` (stdout and stderr, 80 columns) fits, an `error:` line aside (one line by
    contract); prose wraps at spaces only, so every word of `wide` (a number, a node name) is whole in
    it, and every command in backquotes is on one line."""
    for text in (narrow.out, narrow.err):
        long = [line for line in text.splitlines() if len(line) > 80 and not line.startswith("error:")]
        assert not long, (what, long)
    for w, n in ((wide.out, narrow.out), (wide.err, narrow.err)):
        prose = [line for line in w.splitlines() if not re.search("[│┃┏┗└┡━─]", line)]
        words = Counter(word for line in prose for word in line.split())
        narrow_words = Counter(word for line in n.splitlines() if not re.search("[│┃┏┗└┡━─]", line)
                               for word in line.split())
        assert not words - narrow_words, (what, words - narrow_words, n)
        for command in re.findall(r"`[^`]+`", " ".join(prose)):
            assert any(command in line for line in n.splitlines()), (what, command, n)


def test_every_table_command_fits_80_columns(cli, db_url, traced, monkeypatch, tmp_path):
    for threads, seconds in ((1, 40.0), (2, 21.5), (2, 22.0), (4, 12.5)):
        cli("runs", "add", "app", "b", "--threads", str(threads), "--time", str(seconds))
    cli("runs", "add", "app", "fast", "--threads", "2", "--time", "15.25")
    assert cli("match", "app").code == 0
    commands = [("nodes",), ("nodes", "show", "b"), ("traces",), ("apps",), ("runs", "list"), ("match", "app"),
                ("match", "app", "--explain", "--no-store"), ("models",), ("models", "similarity"), ("health",),
                ("accuracy", "--all-runs"), ("scaling", "app", "--node", "b", "--predict", "4,8"), ("inventory",), ("doctor",),
                ("sql", "SELECT node, config_key, bandwidth_gbs, gflops, latency_ns FROM v_profile "
                        "ORDER BY node, config_key LIMIT 5")]
    for args in commands:
        monkeypatch.setenv("COLUMNS", "300")
        wide = cli(*args)
        monkeypatch.setenv("COLUMNS", "80")
        narrow = cli(*args)
        assert wide.code == narrow.code and narrow.code in ((0, 1) if args == ("doctor",) else (0,)), (args, narrow.err)
        assert "┃" in narrow.out, args      # (two renderings of the same rows: every query is ordered)
        listing = args == ("models",)     # one line per model: descriptions are cut (`models NAME` has them)
        _assert_fits_80(wide.out, narrow.out, args, numbers=not listing)
        _assert_prose_fits_80(wide, narrow, args)
        if listing:
            assert narrow.out.count("│") == narrow.out.count("…") * 5 > 40, narrow.out
    for node in ("b", "fast"):     # runs after the predictions, at the predictions' thread counts
        for threads in (1, 2):
            cli("runs", "add", "app", node, "--threads", str(threads), "--time", "30")
    for args in (("accuracy",), ("report", "match", "app", "--out", str(tmp_path / "m.html"))):
        monkeypatch.setenv("COLUMNS", "300")
        wide = cli(*args)
        monkeypatch.setenv("COLUMNS", "80")
        narrow = cli(*args)
        assert wide.code == narrow.code == 0, (args, narrow.err)
        _assert_prose_fits_80(wide, narrow, args)


def test_a_wide_table_is_split_not_squeezed(capsys, monkeypatch):
    """Numbers do not wrap and header names break only at `_`: more columns than 80 characters hold
    go on in a second table led by the first column; uids are shown as 8 characters."""
    from registry.cli.output import print_table

    rows = [{"kernel": f"k{i}", "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
             **{f"memory_triad_gbs_{t}_threads": 1234.5678 * i + t / 7 for t in range(1, 9)},
             "note": "a text cell that may wrap at its spaces"} for i in range(1, 4)]
    monkeypatch.setenv("COLUMNS", "300")
    print_table(rows, title="bandwidth")
    wide = capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", "80")
    print_table(rows, title="bandwidth")
    narrow = capsys.readouterr().out
    _assert_fits_80(wide, narrow, "wide table")
    assert "bandwidth (continued)" in narrow and narrow.count("│ k2 ") >= 2
    assert "0f1e2d3c " in narrow and "0f1e2d3c-" not in narrow


def test_match_warnings_are_said_once_per_group_of_nodes_in_words():
    from registry.cli.match_output import summarise_warnings

    key = 'mbw1c|{"streams": [[2048, 8, "f64", "C", "seq"]]}'
    nodes = [f"n{i}" for i in range(11)]
    warnings = [f"phase {p}: config {key} has no time on {n}; projected with the remainder"
                for n in nodes[1:] for p in ("solve", "io")]
    warnings += [f"{n}: its profile was measured on a busy host; its interval widened x2.4" for n in ("n1", "n2")]
    warnings += ["n1: some phases could not be projected"]
    said = summarise_warnings(warnings, nodes)
    assert len(said) == 3, said
    assert said[0] == ("10 nodes (n1, n2, n3, ...): phases solve, io: config mbw1c: 1 stream: 2048 f64, stride 8 B, "
                       "shared, seq has no time there; projected with the remainder")
    assert said[1] == "n1, n2: its profile was measured on a busy host; its interval widened x2.4"
    assert not any("{" in w or "|" in w for w in said)
    # trial 3: `phases 5 phases (segment 1, ...)`, and `its` for several phases
    many = summarise_warnings([f"n1: phase p{i}: its nearest references disagree" for i in range(5)], nodes)
    assert many == ["n1: 5 phases (p0, p1, p2, ...): each one's nearest references disagree"], many


def test_nodes_whose_intervals_overlap_share_a_rank(cli, traced, db_url):
    from types import SimpleNamespace

    from registry.cli.match_output import tied_ranks

    def node(name, rank, v, lo, hi):
        return SimpleNamespace(node=name, rank=rank, predicted_s=v, low_s=lo, high_s=hi, cost=None)

    ranked = [node("a", 1, 10.0, 9.0, 11.0), node("b", 2, 10.2, 9.1, 11.3), node("c", 3, 10.3, 9.5, 11.0),
              node("d", 4, 20.0, 18.0, 22.0)]
    assert tied_ranks(ranked, "time") == (["1=", "1=", "1=", "4"], [["a", "b", "c"]])
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profile_at_speeds(conn, "quad", 2, base=False)     # the same speeds as the base node b
    reg.close()
    res = cli("match", "app", "--no-store")
    assert "tie: b, quad: each one's prediction lies inside the other's interval" in res.out, res.out
    assert re.search(r"│ 2= +│ (b|quad) ", res.out) and not re.search(r"│ 3 +│", res.out), res.out


def test_suggested_commands_are_shell_quoted(cli, db_url):
    from registry.nodes import ensure_node
    from registry.values import command_line

    assert command_line("nodereg", "profile", "it's") == "`nodereg profile 'it'\"'\"'s'`"
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ensure_node(conn, "it's", source="runs")
    reg.close()
    assert_one_line_error(cli("report", "node", "it's"), "run `nodereg profile 'it'\"'\"'s'` first")


def test_match_on_a_node_without_a_profile_names_it_and_the_command(cli, db_url, traced):
    """`match --nodes "it's"` said `no profile for node(s) it's`: the name quoted, the command too."""
    assert cli("runs", "add", "app", "it's", "--threads", "1", "--time", "2", "--new").code == 0
    assert_one_line_error(cli("match", "app", "--nodes", "it's"), "no profile for node \"it's\": profile it first "
                          "(`nodereg profile 'it'\"'\"'s'` on that node) or leave it out")


def test_mistyped_command_lines_exit_2(cli, db_url):
    assert cli("init").code == 0
    for args in (("trace", "--name", "x", "--"), ("run", "n", "--"),
                 ("runs", "add", "a", "n", "--threads", "0", "--time", "1"), ("profile", "n", "--threads", "0")):
        res = cli(*args)
        assert res.code == 2, (args, res)
        assert len(res.err.strip().splitlines()) == 1 and res.err.startswith("error:"), res.err
    assert _count(db_url, "SELECT count(*) FROM nodes") == 0


def test_an_empty_registry_is_described_not_an_error(cli, db_url):
    assert cli("init").code == 0      # (a read-only command creates no registry: #30)
    res = cli("accuracy")
    assert res.code == 0 and res.out == "" and "no predictions yet" in res.err, res
    assert json.loads(cli("accuracy", "--json").out) == {"cells": [], "sets": [], "summary": []}
    res = cli("runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new")
    assert "on n, 1 thread, 2 s" in res.out, res


def test_export_replaces_a_bundle_only_with_force(cli, db_url, tmp_path):
    cli("runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new")
    for out in (tmp_path / "b.zip", tmp_path / "bdir"):
        assert cli("export", str(out)).code == 0
        assert_one_line_error(cli("export", str(out)), "already exists", "--force")
        cli("runs", "add", "a", "n", "--threads", "2", "--time", "1")
        assert cli("export", str(out), "--force").code == 0, out
        assert cli("--db", str(tmp_path / f"{out.stem}.duckdb"), "import", "bundle", str(out)).code == 0
        assert _count(str(tmp_path / f"{out.stem}.duckdb"), "SELECT count(*) FROM runs") == \
            _count(db_url, "SELECT count(*) FROM runs")
    other = tmp_path / "notes.zip"
    other.write_text("mine")
    assert_one_line_error(cli("export", str(other), "--force"), "not a nodereg bundle")
    assert other.read_text() == "mine"


def test_library_warnings_do_not_reach_the_terminal(cli, db_url, traced):
    """numpy's `All-NaN slice` and scikit-learn's warnings leaked into `evaluate`; a command's own words
    are what users see (NODEREG_DEBUG=1 shows them). A real process: pytest records warnings itself."""
    cli("match", "app")
    cli("runs", "add", "app", "fast", "--threads", "2", "--time", "9")
    script = ("import sys, numpy as np; from registry import accuracy; real = accuracy.assess\n"
              "def assess(frame):\n    np.nanmedian(np.array([np.nan]))\n    return real(frame)\n"
              "accuracy.assess = assess; sys.argv = ['nodereg', 'accuracy']\n"
              "from registry.cli import main; main()")
    for debug, shown in (("", False), ("1", True)):
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "NODEREG_DB": db_url, "NODEREG_DEBUG": debug})
        assert res.returncode == 0, res.stderr
        assert ("All-NaN" in res.stderr) is shown, res.stderr


def test_writers_wait_a_little_by_default_and_say_so(cli, db_url, tmp_path):
    """Two loops of `runs add` on one DuckDB file failed 6 times in 25 each without --wait: a write
    now waits (10 s by default) for a registry another process holds, and says that it waits."""
    assert cli("init").code == 0
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('locked', flush=True); time.sleep(1.5)", str(tmp_path / "registry.duckdb")],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    res = cli("runs", "add", "a", "n", "--threads", "1", "--time", "2", "--new")
    holder.wait()
    assert res.code == 0, res.err
    assert f"is in use by another process (PID {holder.pid}" in res.err and "waiting up to 10 s" in res.err
    assert _count(db_url, "SELECT count(*) FROM runs") == 1


def test_wait_idle_says_that_it_waits_and_when_the_host_calmed_down(cli, db_url, binary, monkeypatch):
    """`profile --wait-idle 8` printed nothing for 8.8 s: now a line when the wait starts (with why),
    a countdown at a terminal, and a line when it ends."""
    calls = []

    def measurers():
        calls.append(1)
        return ["4242 nodereg profile other"] if len(calls) <= 2 else []

    monkeypatch.setattr(load, "other_measurers", measurers)
    monkeypatch.setattr(load.CpuMeter, "read", lambda self: 0.0)
    res = cli("profile", "n", *PEAK, "--wait-idle", "30")
    assert res.code == 0, res.err
    assert "the host is busy (another nodereg measurement is running (4242 nodereg profile other)): waiting up " \
           "to 30 s for it to calm down (--wait-idle)" in res.err
    assert "the host is idle now: profiling" in res.err and "warning" not in res.err, res.err


def test_a_node_is_not_redefined_by_other_cpus_unless_asked(cli, db_url, binary, monkeypatch):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    monkeypatch.setattr(load, "other_measurers", lambda: [])
    assert cli("profile", "cn", *PEAK, "--cpus", str(cpus[0])).code == 0
    assert cli("profile", "cn", *PEAK, "--cpus", str(cpus[1])).code == 0          # the same count: another host's CPU
    res = cli("profile", "cn", *PEAK, "--cpus", f"{cpus[0]},{cpus[1]}")
    assert_one_line_error(res, "node 'cn' was profiled on 1 CPU", "would measure 2 CPUs", "--redefine")
    assert _count(db_url, "SELECT count(*) FROM profiles") == 2
    assert cli("profile", "cn", *PEAK, "--cpus", f"{cpus[0]},{cpus[1]}", "--redefine").code == 0
    assert _count(db_url, "SELECT n_cpus FROM nodes WHERE name = 'cn'") == 2


def test_profile_prose_fits_80_columns(cli, db_url, binary, monkeypatch):
    """The busy host's warning, the figures and the stored line of `profile` ran to 150 columns when
    piped, and so did the progress lines of --wait-idle (each with the reason the host is busy)."""
    from registry.cli import progress

    _busy(monkeypatch)
    monkeypatch.setattr(progress, "PLAIN_MIN_S", 0.0)
    monkeypatch.setenv("COLUMNS", "80")
    res = cli("profile", "a-node-with-a-rather-long-name", *PEAK, "--wait-idle", "2")
    assert res.code == 0, res.err
    assert "warning: the host is busy" in res.err and "stored profile" in res.out, res
    assert "waiting for an idle host, " in res.err, res.err
    long = [line for text in (res.out, res.err) for line in text.splitlines() if len(line) > 80]
    assert not long, long
    assert "a-node-with-a-rather-long-name" in res.out


def test_profile_says_its_progress_when_piped(cli, db_url, binary, monkeypatch):
    """rich's bar draws nothing when stderr is no terminal: `profile ... | tee` or a CI log showed
    nothing for minutes. There it prints plain lines (here one per tenth of the work, the pause
    between lines set to 0): the configurations done, the share of the work and the time."""
    from registry.cli import progress

    monkeypatch.setattr(load, "other_measurers", lambda: [])
    monkeypatch.setattr(progress, "PLAIN_MIN_S", 0.0)
    res = cli("profile", "p", "--quick", "--kernels", "peak_fma,triad", "--threads", "1", "--reps", "2")
    assert res.code == 0, res.err
    lines = [line for line in res.err.splitlines() if line.startswith("profiling p: ")]
    done = [re.fullmatch(r"profiling p: (\d+)/(\d+) configurations(, signatures)?, (\d+)% done, \d+:\d\d elapsed",
                         line) for line in lines]
    assert len(done) >= 3 and all(done), res.err
    shares = [int(m.group(4)) for m in done]
    assert shares == sorted(shares) and shares[-1] == 100, res.err


def test_profile_quotes_the_memory_bandwidth_nodes_quotes(cli, db_url, binary, monkeypatch):
    """Node `two`'s memory bandwidth was 26.2 in `nodes`, 35.44 in the profile summary: the profile
    now says the one figure `nodes` and the reports quote, and its table says what its cells are."""
    monkeypatch.setattr(load, "other_measurers", lambda: [])
    res = cli("profile", "m", "--quick", "--kernels", "triad", "--threads", "1", "--reps", "2")
    assert res.code == 0, res.err
    quoted = json.loads(cli("nodes", "--json").out)[0]["memory_triad_gbs"]
    assert f"memory bandwidth: {quoted:.3g} GB/s (triad, 1 thread, largest working set" in res.out, res.out
    assert "the best over each level's working sets" in res.out


def _match_on_two_nodes(cli, db_url, trace, *args):
    """`match app --no-store` of `trace` on nodes b (its base) and fast."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        store.save(conn, trace)
    reg.close()
    res = cli("match", "app", "--no-store", *args)
    assert res.code == 0, res.err
    return res


def test_match_says_which_phase_set_it_used_and_why(cli, db_url):
    """A two-loop program's trace held 3 OpenMP regions and 3 segments, and match used one set, then
    the other, without a word: it now names the set, its coverage and the rule."""
    from registry.io.tracefile import Phase

    trace = three_phase_trace()
    trace.phases.append(Phase("main._omp_fn.0", "omp", 0, 10, 10 / 21, 10.0,
                              signature={"proc": {"cpu_util": 1.98, "wss_llc": 0.01}}))
    res = _match_on_two_nodes(cli, db_url, trace)
    said = " ".join(res.out.split())
    assert "phases: 3 phases from change points of the samples, covering 100% of the run (other sets: OpenMP " \
           "regions 48%); the set covering the most is used" in said, res.out


def test_match_names_the_openmp_regions_it_used_with_their_gaps(cli, db_url):
    """A two-loop OpenMP program: its 2 regions (83% of the run) with the change-point segments in
    their gaps were used, and match said "5 phases from change points ... the set covering the most
    is used" (trial 3): the set and the rule that chose it are named."""
    from registry.io.tracefile import Phase

    trace = three_phase_trace()
    trace.phases += [Phase("main._omp_fn.0", "omp", 0, 9, 9 / 21, 9.0, signature={"proc": {"cpu_util": 1.98,
                                                                                              "wss_llc": 0.01}}),
                     Phase("main._omp_fn.1", "omp", 11, 20, 9 / 21, 9.0, signature={"proc": {"cpu_util": 1.98,
                                                                                               "wss_llc": 8.0}})]
    res = _match_on_two_nodes(cli, db_url, trace)
    said = " ".join(res.out.split())
    assert "phases: 2 OpenMP regions covering 86% of the run, their gaps filled by 3 change-point " \
           "segments (other sets: change points of the samples 100%); what the app declares (its markers, then " \
           "OpenMP regions) is used when it covers at least 50% of the run" in said, res.out


def test_a_phase_like_no_config_says_what_it_is_projected_by(cli, db_url):
    """A phase whose signature shares no feature with the references said "its base time is kept on
    every node" while its warning said (rightly) that the node's median ratio is used."""
    from registry.io.tracefile import Phase

    trace = three_phase_trace()
    trace.phases.append(Phase("blind", "auto", 21, 21.05, 0.0024, 0.05, signature={"proc": {}}))
    trace.wall_s = 21.05
    res = _match_on_two_nodes(cli, db_url, trace, "--json", "--explain")
    blind = next(p for p in json.loads(res.out)["phases"] if p["name"] == "blind")
    assert blind["per_node"]["fast"]["predicted_s"] != pytest.approx(0.05), blind     # not kept
    said = " ".join(cli("match", "app", "--no-store").out.split())
    assert "phase blind: 0.05" in said and "base time is kept" not in said, said
    assert "nearest: none (no microbenchmark config resembles it): each node's median ratio over all " \
           "references" in said, said


def test_a_node_name_stays_on_one_line_at_80_columns(monkeypatch):
    """A cloud type's name (26 characters, no space) is how a row is told apart: it is not folded
    (`azure:Standa` over `rd_D160alds_` over `v7`) beside seven other columns (match --from-runs)."""
    import io

    from rich.console import Console

    from registry.cli import output

    out = io.StringIO()
    monkeypatch.setattr(output, "console", Console(width=80, file=out, soft_wrap=True))
    name = "azure:Standard_D160alds_v7"
    output.print_table([{"rank": 1, "node": name, "predicted_s": 72.02, "interval_s": "53.1 - 97.7",
                         "cpu_family": "Zen 5", "arch": "x86_64", "cost": "1.23 USD",
                         "warnings": "predicted from x86_64 runs only"}])
    assert any(name in line for line in out.getvalue().splitlines()), out.getvalue()
    # nor a model's (evaluate's table had `geekbench-ra` over `tio`, trial 3)
    output.print_table([{"model": "geekbench-ratio", "apps": 3, "MAPE": 17.86, "med APE %": 13.4, "top-1 %": 33.33,
                         "top-3 %": 100, "regret %": 26.03, "s": 0.05, "error": "failed (see below)"}])
    assert any("geekbench-ratio" in line for line in out.getvalue().splitlines()), out.getvalue()
    # nor a word of a text cell up to 20 characters (trial 5: `nodes show`'s profiles table had the
    # compiler `cc (Debian   ` over `12.2.0-14+de` over `b12u1)`)
    output.print_table([{"uid": "20771887", "host": "vm", "mode": "custom", "started_at": "2026-11-26 08:45:50",
                         "duration_s": 31.98, "cpu_list": "0-1", "compiler": "cc (Debian 12.2.0-14+deb12u1) 12.2.0",
                         "configs": 32}])
    assert any("12.2.0-14+deb12u1)" in line for line in out.getvalue().splitlines()), out.getvalue()


def test_a_phase_far_from_references_alike_in_signature_gets_a_finite_interval():
    """Trial 4: a busy host's profile (31 of 32 configs unstable) had references nearly alike in
    signature whose ratios differed by x3; the interval's distance term learnt ~14 log units per unit
    of distance, and `match` printed `0.0459 - 3.63e+16 s` for a 2 s program. The term is capped at
    the node's span of ratios (here 0.7-4)."""
    import pandas as pd

    from registry.models.base import Query, ReferenceSet
    from registry.models.similarity import SimilarityModel

    xs = {"a": 0.0, "b": 0.02, "c": 1.0, "d": 1.02, "e": 2.0, "f": 2.02}
    ratios = {"a": 1.0, "b": 3.0, "c": 2.0, "d": 0.7, "e": 1.5, "f": 4.0}
    refs = ReferenceSet("base", pd.DataFrame({k: {"sar.x": v} for k, v in xs.items()}).T,
                        np.log(pd.DataFrame({k: {"n": v} for k, v in ratios.items()}).T))
    model = SimilarityModel().fit(refs)
    for x in (1.5, 3.0, 20.0):
        p = model.predict(Query("q", pd.Series({"sar.x": x}), 1.0), ["n"])[0]
        assert 0.7 / 20 < p.low_s < p.predicted_s < p.high_s < 4.0 * 20, (x, p.low_s, p.high_s)


def test_cpus_are_counted_in_words_not_cpu_s(cli, db_url, binary, monkeypatch):
    """Trial 4: `tracing ./twophase on node trialnode, CPU(s) 0-1`, `other processes keep 1.9 CPU(s)
    busy`, and `stored profile ... of node one (CPUs 0)` for a one-CPU node."""
    from registry import cpulist

    assert cpulist.named([0]) == "CPU 0" and cpulist.named("0-1") == "CPUs 0-1"
    assert load.HostLoad(other_cpus=1.02).busy() == "other processes keep 1.0 CPU busy"
    assert load.HostLoad(other_cpus=1.9).busy() == "other processes keep 1.9 CPUs busy"
    monkeypatch.setattr(load, "other_measurers", lambda: [])
    monkeypatch.setattr(load.CpuMeter, "read", lambda self: 1.9)
    cpu = min(os.sched_getaffinity(0))
    res = cli("profile", "one", *PEAK, "--cpus", str(cpu))
    assert res.code == 0, res.err
    assert f"of node one (CPU {cpu}):" in res.out and "1.9 CPUs busy" in res.err, res
    assert "(s)" not in res.out + res.err
    res = cli("trace", "--name", "t", "--node", "one", "--", sys.executable, "-c", "pass")
    assert res.code == 0, res.err
    assert f"on node one, CPU {cpu} (every" in res.err and "(s)" not in res.err, res.err


def test_another_measurement_is_named_by_its_program_not_its_path(monkeypatch):
    """Trial 4: match's warning quoted another user's driver by its full path
    (`/tmp/pytest-of-root/pytest-576/nodereg-build/build/346655c87b9d2670/nodereg-ub`, 81 columns)."""
    class Proc:           # a process outside this test's family (a pid no process here has)
        info = {"pid": 4194999, "name": "nodereg-ub",
                "cmdline": ["/tmp/pytest-of-root/pytest-576/nodereg-build/build/346655c87b9d2670/nodereg-ub",
                            "--config", "/tmp/x/config.json"]}

    monkeypatch.setattr(load.psutil, "process_iter", lambda attrs: [Proc()])
    assert load.other_measurers() == ["4194999 nodereg-ub --config config.json"]


def test_advice_said_for_two_caveats_of_a_node_is_said_once():
    """Trial 4: `one: 11 of 16 configs ... unstable; ...; re-profile on an idle host: `nodereg profile
    one --wait-idle 600`; its profile was measured on a busy host (...); ...; re-profile on an idle
    host: `nodereg profile one --wait-idle 600``: the same advice twice in one warning."""
    from registry.cli.match_output import summarise_warnings

    advice = "re-profile on an idle host: `nodereg profile one --wait-idle 600`"
    said = summarise_warnings([f"one: 11 of 16 configs of its profile were unstable; its interval widened x1.7; {advice}",
                               f"one: its profile was measured on a busy host; its interval widened x2.4; {advice}"],
                              ["one"])
    assert said == ["one: 11 of 16 configs of its profile were unstable; its interval widened x1.7; its profile "
                    f"was measured on a busy host; its interval widened x2.4; {advice}"], said


def test_the_demos_closing_advice_fits_80_columns():
    """Trial 4: the demo's last lines (`nodereg trace ... && nodereg match myapp.json`, and the advice
    with its command) ran to 91 and 108 columns; with a cloud host's name (the demo's default node
    name) they fit 80."""
    from pathlib import Path

    script = (Path(__file__).resolve().parents[1] / "scripts" / "demo.sh").read_text()
    text = script.split("cat <<NEXT\n", 1)[1].split("\nNEXT", 1)[0]
    said = text.replace("$VENV", ".venv").replace("$NODE", "ip-172-31-22-123.ec2.internal").replace("\\`", "`")
    assert "nodereg profile" in said and "--wait-idle 600" in said
    long = [line for line in said.splitlines() if len(line) > 80]
    assert not long, long


def test_evaluate_says_why_a_model_failed_in_words():
    """Trial 4's `nodereg evaluate` (three traced apps, runs on three nodes): `best-micro-ratio failed:
    ValueError: attempt to get argmin of an empty sequence` (a trace's signature lacks features the
    profile's configs have: every config's fit was NaN), and `paris failed: UserError: ...`."""
    import pandas as pd

    from registry.errors import UserError
    from registry.models.base import Query, ReferenceSet
    from registry.models.ratio_baselines import BestMicroRatioBaseline

    features = pd.DataFrame({"a": {"sar.x": 0.0, "proc.y": 1.0}, "b": {"sar.x": 1.0, "proc.y": 2.0},
                             "c": {"sar.x": 2.0, "proc.y": 3.0}}).T
    ratios = np.log(pd.DataFrame({"a": {"n": 1.0}, "b": {"n": 2.0}, "c": {"n": 4.0}}).T)
    model = BestMicroRatioBaseline().fit(ReferenceSet("base", features, ratios))
    p = model.predict(Query("q", pd.Series({"sar.x": 1.0}), 10.0), ["n"])[0]
    assert p.predicted_s == pytest.approx(20.0), p        # b's ratio: the one config it matches
    from registry.evaluate import _failure

    assert _failure(UserError("similar-runs needs at least 2 references")) == "similar-runs needs at least 2 references"


def test_best_micro_ratio_on_signatures_keeps_a_ratio_it_measured():
    """Trial 5: `nodereg evaluate` printed best-micro-ratio's MAPE as 9.360e+41 %. On a traced app's
    signature (no calibration times) it added the mean difference of the signature's features (an
    RSS of 300 MB against a config's 5) to a log ratio as if they were log times."""
    import pandas as pd

    from registry.models.base import Query, ReferenceSet
    from registry.models.ratio_baselines import BestMicroRatioBaseline

    features = pd.DataFrame({"a": {"proc.rss_mb": 5.0, "proc.cpu_util": 1.0, "proc.wss_llc": 0.1},
                             "b": {"proc.rss_mb": 40.0, "proc.cpu_util": 2.0, "proc.wss_llc": 3.0}}).T
    ratios = np.log(pd.DataFrame({"a": {"n": 1.5}, "b": {"n": 2.0}}).T)
    model = BestMicroRatioBaseline().fit(ReferenceSet("base", features, ratios))
    query = pd.Series({"proc.rss_mb": 300.0, "proc.cpu_util": 2.0, "proc.wss_llc": 4.0})
    p = model.predict(Query("q", query, 10.0), ["n"])[0]
    assert p.predicted_s in (pytest.approx(15.0), pytest.approx(20.0)), p     # one config's own ratio


def test_a_busy_hosts_waves_are_no_phases_of_the_program():
    """Trial 4: `xz -T2` beside other work got 0.3-0.8 CPUs, rising and falling with the others' load
    (9 segments); what it asked for was 2 CPUs, then 1 in its one-thread tail. The sampler's
    `runq_util` (time its threads waited for a CPU) plus the CPU time it got is that demand."""
    from registry.trace import phases

    rng = np.random.default_rng(4)
    n = 600
    demand = np.where(np.arange(n) < 400, 2.0, 1.0)
    stolen = np.repeat(rng.uniform(0.0, 0.6, n // 40), 40)            # others' load, changing every 4 s
    got = demand * (1 - stolen / 2) + rng.normal(0, 0.03, n)
    samples = [{"t_s": (i + 1) * 0.1, "cpu_util": g, "rss_mb": 300.0, "runq_util": d - g}
               for i, (g, d) in enumerate(zip(got, demand))]
    found = phases.auto_phases(samples, n * 0.1, 0.1)
    assert [round(p.start_s) for p in found] == [0, 40], [round(p.start_s, 1) for p in found]


def test_init_says_it_created_a_new_registry(cli, tmp_path):
    """Trial 4: `nodereg --db new.duckdb init` said `migrated from schema 0 to 22 (latest 22)`."""
    from registry.db.migrate import latest_version

    res = cli("--db", str(tmp_path / "new.duckdb"), "init")
    assert res.code == 0, res.err
    said = res.out + res.err
    assert f"new.duckdb: created (schema {latest_version()})" in said and "schema 0" not in said, said
    again = cli("--db", str(tmp_path / "new.duckdb"), "init")
    assert "new.duckdb: schema version" in again.out + again.err and ": created (" not in again.out + again.err


def test_no_message_says_a_count_with_s_in_parentheses():
    """Trial 4 still met `CPU(s)`, and the sources held `host(s)`, `node(s)`, `column(s)`, `rank(s)`, ...
    in a dozen messages: every string of the package is read for a word ending in `(s)`, but for
    lscpu's own field names, which its output is parsed by and an error quotes."""
    import ast
    from pathlib import Path

    lscpu = {"CPU(s):", "Thread(s) per core:", "Core(s) per socket:", "Socket(s):", "NUMA node(s):",
             "no Architecture or CPU(s) field"}
    root = Path(__file__).resolve().parents[1] / "registry"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value not in lscpu:
                found += [f"{path.relative_to(root)}:{node.lineno}: {m}"
                          for m in re.findall(r"\w+\(s\)", node.value)
                          if "`" not in node.value]      # a docstring quoting what is no longer said
    assert not found, found


def test_the_tours_fleet_command_parses_the_profile_options(tmp_path):
    """`nodereg fleet submit TYPE -w 'cn[01-64]' -- --quick` (the README's tour) said `internal error
    (KeyError: 'profile')`: a command line naming `fleet` loaded only the fleet commands, and
    submit checks the options it passes on with `profile`'s parser. A process of its own: the
    test session has every command loaded."""
    res = subprocess.run([sys.executable, "-m", "registry", "fleet", "submit", "t", "-w", "cn01,cn02",
                          "--to-dir", str(tmp_path), "--log-dir", str(tmp_path), "--dry-run", "--", "--quick"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("#!/bin/bash") and "--quick" in res.stdout
    bad = subprocess.run([sys.executable, "-m", "registry", "fleet", "submit", "t", "-w", "cn01",
                          "--to-dir", str(tmp_path), "--log-dir", str(tmp_path), "--dry-run", "--", "--bogus"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--bogus" in bad.stderr and "internal error" not in bad.stderr, bad.stderr
