"""Tracing real programs with a known phase structure: boundaries, markers, OpenMP regions, signatures.

The test program (scripts/trace_testprog.c) computes in registers, streams a buffer twice the size
of the last-level cache, and sleeps; its C markers carry exact CLOCK_MONOTONIC times, which are the
truth the automatic boundaries are checked against.
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from registry.inventory import collect
from registry.microbench.build import compile_c, source
from registry.measure import runner, signature
from registry.trace import omp, phases
from registry.trace.tracer import observe, trace_command

PROG = Path(__file__).resolve().parents[1] / "scripts" / "trace_testprog.c"
INTERVAL = 0.1


def _build(*flags: str) -> Path:
    return compile_c([PROG], "trace_testprog", extra_flags=(f"-I{source('include')}", *flags),
                     depends=[source("include/nodereg_phase.h")])


@pytest.fixture(scope="module")
def inventory():
    return collect()


@pytest.fixture(scope="module")
def buffer_mb(inventory):
    llc = inventory.last_level_cache()
    return max(64, 2 * (llc.size_bytes >> 20) if llc else 64)


@pytest.fixture(scope="module")
def traced(buffer_mb):
    """One observed run: compute 1 s, stream 1 s, sleep 0.6 s, compute 0.6 s, markers on, 1 thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    argv = [str(_build()), "-m", "-b", str(buffer_mb), "compute:1", "stream:1", "sleep:0.6", "compute:0.6"]
    return observe(argv, interval_s=INTERVAL, env=env)


def test_markers_from_the_c_header_are_exact(traced):
    found = phases.marker_phases(traced.run.markers, traced.run.wall_s)
    by_name = {p.name: p for p in found}
    assert set(by_name) == {"compute", "stream", "sleep"}
    assert by_name["compute"].calls == 2
    assert by_name["stream"].end_s - by_name["stream"].start_s == pytest.approx(1.0, abs=0.08)
    assert by_name["sleep"].end_s - by_name["sleep"].start_s == pytest.approx(0.6, abs=0.05)
    assert sum(p.weight for p in found) == pytest.approx(1.0, abs=0.05)


def test_automatic_boundaries_within_one_interval(traced):
    truth = sorted(b for p in phases.marker_phases(traced.run.markers, traced.run.wall_s)
                   for b, _ in p.intervals if b > 0.05)
    assert len(truth) == 3
    auto = phases.auto_phases(traced.run.samples, traced.run.wall_s, INTERVAL)
    found = [p.start_s for p in auto[1:]]
    for t in truth:
        assert min(abs(f - t) for f in found) <= INTERVAL, (t, found)
    assert len(auto) <= len(truth) + 1 + 2  # first touch of the buffer may show as its own segment


def test_a_steady_program_is_one_phase():
    res = runner.run(["sleep", "1.5"], interval_s=INTERVAL)
    assert len(phases.auto_phases(res.samples, res.wall_s, INTERVAL)) == 1


def test_signatures_tell_memory_bound_from_compute_bound(traced, inventory):
    found = phases.marker_phases(traced.run.markers, traced.run.wall_s)
    signature.attach(found, traced.run.samples, [], inventory.last_level_cache().size_bytes, INTERVAL)
    sig = {p.name: p.signature["proc"] for p in found}
    assert sig["stream"]["wss_llc"] > 1.0
    assert sig["compute"]["wss_llc"] < 0.1
    assert sig["compute"]["cpu_util"] > 0.2 and sig["sleep"]["cpu_util"] < 0.05  # (other jobs share the CPUs)
    assert sig["stream"]["rss_mb"] > sig["compute"]["rss_mb"] or sig["stream"]["wss_mb"] > 10


def test_openmp_shim_times_each_outlined_function(traced):
    recs = traced.omp_records
    names = {r.function for r in recs}
    assert names == {"compute._omp_fn.0", "stream._omp_fn.0"}, names
    found = {p.name: p for p in phases.omp_phases(recs, traced.run.wall_s)}
    compute, stream = found["compute._omp_fn.0"], found["stream._omp_fn.0"]
    assert compute.calls == 2 and stream.calls > 3  # one region per compute phase, one per stream pass
    assert compute.time_s == pytest.approx(1.6, abs=0.15)
    markers = {p.name: p for p in phases.marker_phases(traced.run.markers, traced.run.wall_s)}
    assert stream.start_s == pytest.approx(markers["stream"].start_s, abs=0.02)
    for r in recs:
        assert 0 < r.slowest_s <= r.wall_s + 1e-6 and r.max_threads == 1


def test_shim_reports_the_slowest_of_several_threads(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    obs = observe([str(_build()), "compute:0.3"], interval_s=INTERVAL, env=env)
    (rec,) = obs.omp_records
    assert rec.max_threads == 2
    assert rec.slowest_s <= rec.wall_s + 1e-6
    assert rec.thread_s == pytest.approx(2 * rec.slowest_s, rel=0.25)


def test_shim_busy_threads_give_the_serial_share_that_proc_misses(tmp_path):
    """Only thread 0 works in the region, thread 1 spins at its end (OMP_WAIT_POLICY=active): /proc
    counts two busy CPUs, the shim one working thread, and `match` takes the region as serial."""
    from registry.match.project import parallel_use
    from registry.match.references import thread_parts

    program = compile_c([Path(__file__).parent / "programs" / "lopsided.c"], "lopsided")
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "active"}
    obs = observe([str(program), "0.6"], interval_s=INTERVAL, env=env)
    (phase,) = phases.omp_phases(obs.omp_records, obs.run.wall_s)
    assert phase.signature["omp"]["threads"] == 2
    assert 0.8 < phase.signature["omp"]["busy_threads"] < 1.25
    signature.attach([phase], obs.run.samples, [], None, INTERVAL)
    assert parallel_use(phase.signature) == phase.signature["omp"]["busy_threads"]
    parts = thread_parts(parallel_use(phase.signature), 2, 2)
    assert sum(share for mode, k, share in parts if (mode, k) == ("fixed", 1)) > 0.75


def test_python_markers_and_plain_fifo_protocol(tmp_path):
    """Python markers carry their own time; a bare `begin NAME` line takes the time the tracer read
    it, which on a busy machine lags the write by the tracer's scheduling (0.26 s read for a 0.2 s
    phase while another CPU-bound job ran): each bare boundary is checked against the moment the
    program wrote it, on the same clock (CLOCK_MONOTONIC)."""
    written = tmp_path / "written.txt"
    script = textwrap.dedent(f"""
        import os, time
        from registry.trace.markers import phase
        with phase("load data"):
            time.sleep(0.3)
        with open(os.environ["NODEREG_PHASE_FIFO"], "w") as fifo, open({str(written)!r}, "w") as out:
            out.write(f"{{time.monotonic()}}\\n")    # the bare protocol, no timestamp
            fifo.write("begin raw\\n"); fifo.flush()
            time.sleep(0.2)
            out.write(f"{{time.monotonic()}}\\n")
            fifo.write("end raw\\n")
    """)
    res = runner.run([sys.executable, "-c", script], interval_s=INTERVAL)
    assert res.status == "ok"
    found = {p.name: p for p in phases.marker_phases(res.markers, res.wall_s)}
    assert set(found) == {"load_data", "raw"}
    assert found["load_data"].end_s - found["load_data"].start_s == pytest.approx(0.3, abs=0.03)
    begun, ended = (float(t) - res.t0_monotonic for t in written.read_text().split())
    for read_s, wrote_s in ((found["raw"].start_s, begun), (found["raw"].end_s, ended)):
        assert wrote_s <= read_s < wrote_s + 1.0      # read after it was written, while the run went on
    assert found["raw"].start_s >= found["load_data"].end_s


def test_markers_are_silent_outside_a_trace_and_import_cheaply(tmp_path):
    code = ("import sys; from registry.trace.markers import phase\n"
            "with phase('x'): pass\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'sqlalchemy') if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if k != "NODEREG_PHASE_FIFO"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"
    fifo = tmp_path / "nobody-reads"
    os.mkfifo(fifo)
    env["NODEREG_PHASE_FIFO"] = str(fifo)  # a FIFO without a reader must not block or fail
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=20)


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind not installed")
def test_cachegrind_pass_maps_onto_openmp_phases(inventory, buffer_mb):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    probe = [str(_build("-mno-avx512f")), "-b", str(buffer_mb), "compute:0.2", "stream:0.2"]  # no AVX-512 in valgrind
    trace, _ = trace_command([str(_build()), "-b", str(buffer_mb), "compute:0.6", "stream:0.6"], name="tp",
                             node="base", env=env, inventory=inventory, cachegrind=True, probe_cmd=probe)
    assert "cachegrind" in trace.sources
    assert any(o.startswith("--LL=") for o in trace.cachegrind["options"])
    cg = {p.name: p.signature["cachegrind"] for p in trace.phases if p.method == "omp"}
    assert cg["stream._omp_fn.0"]["ll_mpki"] > 100 * max(cg["compute._omp_fn.0"]["ll_mpki"], 1e-3)
    assert cg["stream._omp_fn.0"]["d1_miss_rate"] > 0.05
    assert cg["compute._omp_fn.0"]["instructions"] > 1e6


def test_symbols_resolve_for_pie_executables():
    prog = _build()
    table = omp._functions(str(prog))
    assert "compute._omp_fn.0" in table.values()
