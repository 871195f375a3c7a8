"""The stream probe (our valgrind tool, or lackey into microbench/streamprobe.c) and `nodereg trace --streams`.

tests/programs/triad.c and matmul.c are compiled here and probed with two OpenMP threads by both
probes; their streams are known from the source (see each file's header): sizes within 2%, strides
exact, shared (C) or private (P) right. The tool falls back to lackey when it cannot be built.
Declared streams (the thesis's manual fallback) go through the marker FIFO. Small inputs: lackey
runs hundreds of times slower than the program.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error

from registry.db import open_registry
from registry.errors import UserError
from registry.io.tracefile import Phase, read_trace
from registry.measure import streams as probe
from registry.measure import streamtool
from registry.trace import streams as phase_streams

PROGRAMS = Path(__file__).resolve().parent / "programs"
needs_valgrind = pytest.mark.skipif(not shutil.which("valgrind") or not shutil.which("cc"),
                                    reason="needs valgrind and a C compiler")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The test programs, built without vectorisation (one element per access, as the source reads)."""
    out = tmp_path_factory.mktemp("programs")
    for name in ("triad", "matmul", "fragile", "spread", "tworegions"):
        subprocess.run(["cc", "-O2", "-fopenmp", "-fno-tree-vectorize", str(PROGRAMS / f"{name}.c"), "-o",
                        str(out / name)], check=True)
    return out


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")


def _close(value, expected, pct=2.0):
    return abs(value - expected) <= expected * pct / 100


def test_reader_output_is_parsed():
    text = "total\t1000\t2\t50\t1\nstream\t80000\t8\t8\tP\tseq\t600\t300\t0.9990\t4096\t84096\n"
    accesses, threads, every, (s,) = probe.parse(text)
    assert (accesses, threads, every) == (1000, 2, 1)
    assert s.descriptor() == {"size_elems": 10_000, "stride_bytes": 8, "dtype": "8B", "elem_bytes": 8, "access": "P",
                              "pattern": "seq"}
    assert s.iterations == 300


TOOLS = pytest.mark.parametrize("tool", [streamtool.TOOL, "lackey"])


@pytest.fixture
def tool_buildable(tool):
    """Our tool where valgrind's tool headers and archives are installed; a skip elsewhere, a failure
    with NODEREG_REQUIRE_STREAMTOOL=1 (CI installs them)."""
    if tool == streamtool.TOOL:
        try:
            streamtool.locate()
        except UserError as exc:
            if os.environ.get("NODEREG_REQUIRE_STREAMTOOL"):
                pytest.fail(f"NODEREG_REQUIRE_STREAMTOOL is set but {exc}")
            pytest.skip(str(exc))


@needs_valgrind
@TOOLS
def test_triad_streams_are_found_exactly(built, two_threads, tool, tool_buildable):
    n, reps = 8192, 2
    result = probe.run([str(built / "triad"), str(n), str(reps)], tool=tool)
    streams = result.significant()
    assert len(streams) == 3 and result.threads == 2 and result.probe == tool
    for s in streams:   # static schedule: each thread owns half of a, b and c
        assert _close(s.size_bytes / 8, n / 2) and s.stride_bytes == 8 and s.elem_bytes == 8
        assert s.access == "P" and s.pattern == "seq" and s.iterations == reps * n // 2


@needs_valgrind
@TOOLS
def test_matmul_streams_are_found_exactly(built, two_threads, tool, tool_buildable):
    n = 40
    a, b = probe.run([str(built / "matmul"), str(n)], tool=tool).significant()   # address order: a, then b
    assert _close(a.size_bytes / 8, n * n / 2) and a.stride_bytes == 8 and a.access == "P"   # own rows of a
    assert _close(b.size_bytes / 8, n * n) and b.stride_bytes == 8 * n and b.access == "C"   # all of b, by column
    assert a.iterations == b.iterations == n * n * n // 2


@needs_valgrind
def test_a_stream_spread_over_many_instructions_is_found(built):
    """1024 loops over one array, each under 0.1% of the accesses: still one stream."""
    (s,) = probe.run([str(built / "spread"), "4096"]).significant()
    assert _close(s.size_bytes / 8, 4096) and s.stride_bytes == 8 and s.access == "C" and s.iterations == 4096


@needs_valgrind
def test_sampled_windows_scale_the_counts(built, two_threads):
    """One window of 8192 accesses in four: the same streams, the counts scaled back by four."""
    argv = [str(built / "triad"), str(1 << 16), "4"]
    full = probe.run(argv).significant()
    sampled = probe.run(argv, every=4, window=8192).significant()
    assert [(s.stride_bytes, s.access) for s in sampled] == [(s.stride_bytes, s.access) for s in full]
    assert all(abs(s.iterations - f.iterations) <= f.iterations * 0.1 for s, f in zip(sampled, full))


def _fake_valgrind(tmp_path, monkeypatch):
    """A `valgrind` on PATH whose prefix has no tool headers or archives."""
    bin_dir = tmp_path / "prefix" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "valgrind").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "valgrind").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_missing_tool_headers_are_one_line(tmp_path, monkeypatch):
    _fake_valgrind(tmp_path, monkeypatch)
    with pytest.raises(UserError, match="tool headers or libraries are not installed") as exc:
        streamtool.locate()
    assert "\n" not in str(exc.value)


def _break_the_build(monkeypatch):
    flags = streamtool._flags
    monkeypatch.setattr(streamtool, "_flags", lambda vg: [*flags(vg), "-include", "/nonexistent/nodereg.h"])


@needs_valgrind
def test_a_failing_tool_build_falls_back_to_lackey(built, two_threads, monkeypatch):
    _break_the_build(monkeypatch)
    with pytest.raises(UserError, match=f"building {streamtool.TOOL}-.* failed"):
        probe.run([str(built / "triad"), "8192", "2"], tool=streamtool.TOOL)
    result = probe.run([str(built / "triad"), "8192", "2"])
    assert result.probe == "lackey" and "failed" in result.fallback and len(result.significant()) == 3


@needs_valgrind
def test_trace_notes_the_lackey_fallback(cli, db_url, built, two_threads, monkeypatch):
    _break_the_build(monkeypatch)
    res = cli("trace", "--name", "triad", "--streams", "--", built / "triad", "8192", "2")
    assert res.code == 0, res.err
    assert "probed with valgrind lackey instead" in res.err
    assert [r[1:] for r in _stored_streams(db_url)] == [(i, 4096, 8, "P") for i in range(3)]


def _stored_streams(db_url) -> list[tuple]:
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT p.name, s.stream_index, s.size_elems, s.stride_bytes, s.access FROM phase_streams s "
            "JOIN phases p ON p.phase_id = s.phase_id ORDER BY p.name, s.stream_index")).fetchall()
    reg.close()
    return [tuple(r) for r in rows]


@needs_valgrind
def test_trace_streams_stores_them_and_writes_them_to_the_file(cli, db_url, built, two_threads, tmp_path):
    out = tmp_path / "triad.json"
    res = cli("trace", "--name", "triad", "--out", out, "--", built / "triad", "8192", "2")
    assert res.code == 0, res.err
    plain = _stored_streams(db_url)
    assert plain == []      # no --streams: no probe
    res = cli("trace", "--name", "triad", "--streams", "--out", out, "--", built / "triad", "8192", "2")
    assert res.code == 0, res.err
    assert "stream probe (valgrind;" in res.err     # piped, the probe's wait is said in a line, not a spinner
    stored = _stored_streams(db_url)
    assert [r[1:] for r in stored] == [(i, 4096, 8, "P") for i in range(3)]
    (phase,) = [p for p in read_trace(out).phases if p.streams]
    assert phase.name == stored[0][0] and phase.iterations == 8192 and len(phase.streams) == 3


def _probed(*functions) -> probe.ProbeResult:
    streams = tuple(probe.ProbedStream(80_000, 8, 8, "P", "seq", 1000, 500, 1.0, f) for f in functions)
    return probe.ProbeResult(1000 * len(functions), 2, 1, streams, 1.0)


def _phases() -> list[Phase]:
    return [Phase("main._omp_fn.0", "omp", 0.0, 5.0, 0.5, 5.0), Phase("main._omp_fn.1", "omp", 5.0, 6.0, 0.1, 1.0),
            Phase("solve", "marker", 0.0, 6.0, 0.6, 6.0)]


def test_probed_streams_go_to_the_region_of_their_function():
    phases = _phases()
    attached = phase_streams.attach_probed(phases, _probed("main._omp_fn.1", "main._omp_fn.1", "main"))
    assert [p.name for p in attached] == ["main._omp_fn.1"]   # not the longest phase; main's stream left out
    assert len(phases[1].streams) == 2 and phases[1].iterations == 500 and not phases[0].streams


def test_probed_streams_without_functions_go_to_the_longest_phase():
    phases = _phases()
    attached = phase_streams.attach_probed(phases, _probed(None, None))   # lackey: no function names
    assert [p.name for p in attached] == ["solve"] and len(phases[2].streams) == 2


@needs_valgrind
def test_trace_streams_split_by_openmp_region(cli, db_url, built, two_threads):
    n = 1 << 18   # enough work for both regions to be phases (>= 1% of the run) also on a loaded machine
    res = cli("trace", "--name", "two", "--streams", "--", built / "tworegions", str(n), "20")
    assert res.code == 0, res.err
    assert _stored_streams(db_url) == ([("main._omp_fn.0", i, n // 2, 8, "P") for i in range(3)]
                                       + [("main._omp_fn.1", i, n, 8, "P") for i in range(2)])


def _assert_error_after_trace(res, *fragments: str) -> None:
    """A trace that was stored and whose stream part failed: the progress lines, then one error line."""
    errors = [ln for ln in res.err.splitlines() if ln.startswith("error:")]
    assert res.code != 0 and len(errors) == 1 and "Traceback" not in res.err, res.err
    assert res.err.strip().splitlines()[-1] == errors[0] and all(f in errors[0] for f in fragments), res.err


def _marker_program(streams: int) -> list[str]:
    code = ("from registry.trace import markers\n"
            "with markers.phase('solve'):\n"
            f"    for i in range({streams}):\n"
            "        markers.stream('solve', 1000 * (i + 1), 8, 8, 'C' if i else 'P')\n"
            "    markers.iterations('solve', 2.5e9)\n")
    return [sys.executable, "-c", code]


def test_declared_streams_reach_phase_streams(cli, db_url):
    res = cli("trace", "--name", "declared", "--", *_marker_program(2))
    assert res.code == 0, res.err
    assert _stored_streams(db_url) == [("solve", 0, 1000, 8, "P"), ("solve", 1, 2000, 8, "C")]
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        assert conn.execute(sa.text("SELECT iterations FROM phases WHERE name = 'solve'")).scalar_one() == 2.5e9
    reg.close()


def test_too_many_streams_keep_the_trace_without_them(cli, db_url):
    res = cli("trace", "--name", "declared", "--", *_marker_program(9))
    _assert_error_after_trace(res, "phase solve has 9 streams", "at most 8", "stored without them")
    assert _stored_streams(db_url) == []
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        meta = json.loads(conn.execute(sa.text("SELECT meta_json FROM traces")).scalar_one())
    reg.close()
    assert "9 streams" in meta["streams"]["error"]


def test_valgrind_missing_is_one_line_before_running(cli, db_url, monkeypatch, tmp_path):
    assert cli("init").code == 0
    monkeypatch.setenv("PATH", str(tmp_path))   # no valgrind (and nothing else) on the path
    res = cli("trace", "--streams", "--", sys.executable, "-c", "pass")
    assert_one_line_error(res, "--streams needs valgrind")
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM traces")).scalar_one() == 0
    reg.close()


@needs_valgrind
def test_a_program_failing_under_the_probe_keeps_the_trace(cli, db_url, built):
    res = cli("trace", "--name", "fragile", "--streams", "--", built / "fragile")   # fails only under valgrind
    _assert_error_after_trace(res, "failed under the stream probe (exit status 3)", "stored without them")
    res = cli("trace", "--name", "fragile", "--streams", "--", built / "fragile", "crash")
    _assert_error_after_trace(res, "was killed by SIGSEGV under the stream probe", "stored without them")
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        assert conn.execute(sa.text("SELECT status FROM traces")).scalars().all() == ["ok", "ok"]
    reg.close()


@needs_valgrind
def test_a_probe_past_its_time_limit_is_stopped_and_the_trace_kept(cli, db_url, built):
    """NPB LU's spinning waiters ran for over 11 minutes under the probe (a 1 s program); the probe
    has a limit (--probe-timeout, default 1000x the traced run, at least 2 minutes)."""
    from registry.trace.tracer import probe_limit

    assert (probe_limit(0.05), probe_limit(1.5)) == (120, 1500)
    res = cli("trace", "--name", "slow", "--streams", "--probe-timeout", "0.2", "--", built / "triad", "2000000", "5")
    _assert_error_after_trace(res, "the stream probe ran past 0.2 s", "stored without them")
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        assert conn.execute(sa.text("SELECT status FROM traces")).scalars().all() == ["ok"]
    reg.close()
