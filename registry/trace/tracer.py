"""One traced run, end to end: observe the command, find its phases, give each a signature.

`observe` runs the command with every sampling source the node supports (proc always, perf
counters where the PMU exists, perf's timer samples for the instruction mix where perf runs, the
OpenMP shim when requested); `trace_command` turns that into
a `Trace` (phases of all three methods, signatures, optional cachegrind pass).
"""

import functools
import os
import socket
import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from registry.errors import UserError
from registry.inventory import Inventory
from registry.io.tracefile import Phase, Trace
from registry.measure import cachegrind as cg
from registry.measure import counters as perf
from registry.measure import hotmix, onnode, runner, signature
from registry.measure import streams as probe
from registry.measure.sampler import METRICS
from registry.trace import binary
from registry.trace import mpi as mpi_trace
from registry.trace import omp as gomp
from registry.trace import phases as ph
from registry.trace import streams as phase_streams


@dataclass
class Observation:
    run: runner.RunResult
    counter_rows: list[dict] = field(default_factory=list)
    omp_records: list[gomp.OmpRecord] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    mix_samples: list[hotmix.Sample] = field(default_factory=list)


def observe(argv: list[str], *, interval_s: float = 0.1, timeout_s: float | None = None,
            cpus: list[int] | None = None, env: dict | None = None, omp: bool = True,
            counters: bool | None = None, wss: bool = True, stdout: int | None = None,
            scratch: tuple[Path, ...] = (), mix: bool | None = None) -> Observation:
    """Run `argv` once under every available sampling source (`stdout`: a file descriptor for its
    standard output, default ours; `scratch`: the caller's temporary directories, removed with the
    run's own if the tracer is killed; `mix`: perf's timer samples for the instruction mix, by
    default where perf runs). Raises runner.Interrupted on Ctrl-C."""
    env = dict(os.environ if env is None else env)
    runner.check_command(argv, env)
    use_counters = perf.available() if counters is None else counters
    use_mix = hotmix.available() if mix is None else mix
    notes = []
    with tempfile.TemporaryDirectory(prefix="nodereg-obs-") as tmp:
        omp_out, perf_out = Path(tmp) / "gomp.tsv", Path(tmp) / "perf.csv"
        if omp:
            try:
                env.update(gomp.environment(gomp.build_shim(), omp_out, env))
            except UserError as exc:
                omp = False
                notes.append(f"OpenMP regions not traced: {exc}")
        run_argv = perf.wrap(argv, perf_out, interval_s) if use_counters else list(argv)
        mix_samples: list[hotmix.Sample] = []
        result = runner.run(run_argv, interval_s=interval_s, timeout_s=timeout_s, cpus=cpus, env=env, wss=wss,
                            scratch=(Path(tmp), *scratch), stdout=stdout,
                            attach=functools.partial(hotmix.watching, into=mix_samples, directory=Path(tmp))
                            if use_mix else None)
        result.argv = list(argv)
        counter_rows = perf.parse(perf_out.read_text()) if use_counters and perf_out.exists() else []
        records = gomp.read_records(omp_out, result.t0_monotonic) if omp else []
    sources = ["proc"] + (["counters"] if counter_rows else [])
    if not use_counters:
        notes.append("hardware counters not available on this node (perf): source 'counters' skipped")
    if mix is None and not use_mix:
        notes.append("perf cannot sample here (perf record, cpu-clock): source 'mix' skipped")
    return Observation(result, counter_rows, records, sources, notes, mix_samples)


def trace_command(argv: list[str], *, name: str, node: str, interval_s: float = 0.1,
                  timeout_s: float | None = None, cpus: list[int] | None = None, env: dict | None = None,
                  inventory: Inventory | None = None, cachegrind: bool = False,
                  probe_cmd: list[str] | None = None, cachegrind_sample_s: float | None = None,
                  omp: bool = True, streams: bool = False,
                  probe_timeout_s: float | None = None, mpi: bool = True,
                  status: Callable[[str], None] | None = None, mix: bool = True) -> tuple[Trace, list[str]]:
    """Trace `argv` on `node`; returns the trace and notes for the user (skipped sources, ...).

    `streams`: a stream-probe pass (registry.measure.streams) on the same command and input (the
    streams' sizes and the iterations are the run's own), killed after `probe_timeout_s` (default:
    probe_limit of the run's time). A failed probe keeps the trace: its reason is in
    ``meta["streams"]["error"]``. `cachegrind_sample_s`: the cachegrind pass stops after that long
    (registry.measure.cachegrind.run), and the trace's cachegrind summary says so (`sample_s`).
    Without counters and without cachegrind, a note says that only the working set tells kinds of
    work apart in this trace. `mpi`: when `argv` starts an MPI launcher, follow every rank with the
    PMPI library (registry.trace.mpi): the phases get their computation/communication split. `mix`:
    perf's timer samples for the phases' instruction mix where perf can sample (False: none)."""
    started = datetime.now(timezone.utc)
    launcher = mpi_trace.launcher(argv) if mpi else None
    with tempfile.TemporaryDirectory(prefix="nodereg-pmpi-") if launcher else nullcontext() as pmpi_out:
        run_argv, run_env = argv, onnode.thread_env(cpus, env)
        if launcher:
            prepared = mpi_trace.prepare(argv, run_env, Path(pmpi_out))
            run_argv, run_env = prepared.argv, prepared.env
        obs = observe(run_argv, interval_s=interval_s, timeout_s=timeout_s, cpus=cpus, env=run_env, omp=omp,
                      scratch=(Path(pmpi_out),) if launcher else (), mix=None if mix else False)
        obs.run.argv = list(argv)
        run = obs.run
        phases = (ph.marker_phases(run.markers, run.wall_s) + ph.omp_phases(obs.omp_records, run.wall_s)
                  + ph.auto_phases(run.samples, run.wall_s, interval_s))
        mpi_doc, mpi_notes = (mpi_trace.collect(phases, Path(pmpi_out), status=run.status, launcher_name=launcher,
                                                host=socket.gethostname(), t0_monotonic=run.t0_monotonic,
                                                markers=run.markers, wall_s=run.wall_s)
                              if launcher else (None, []))
    llc = inventory.last_level_cache() if inventory else None
    llc_bytes = llc.size_bytes if llc else None
    signature.attach(phases, run.samples, obs.counter_rows, llc_bytes, interval_s)
    if _attach_mix(phases, obs.mix_samples, run.t0_monotonic):
        obs.sources.append("mix")
    notes, sources = list(obs.notes) + mpi_notes, list(obs.sources) + (["mpi"] if mpi_doc else [])
    streams_doc = None
    try:
        notes += phase_streams.attach_declared(phases, run.markers)
    except UserError as exc:
        streams_doc = {"error": str(exc)}
    if streams and streams_doc is None:
        streams_doc = _probe_streams(argv, phases, run, cpus=cpus, env=env, status=status,
                                     timeout_s=probe_timeout_s or probe_limit(run.wall_s))
        if "error" not in streams_doc:
            sources.append("streams")
        if streams_doc.get("fallback"):
            notes.append(f"stream probe: {streams_doc['fallback']}; probed with valgrind lackey instead (slower)")
    cg_doc = None
    if cachegrind:
        if run.status != "ok":
            notes.append(f"cachegrind pass skipped: the command {run.status}")
        elif inventory is None:
            raise UserError(f"node {node!r} has no stored inventory: cachegrind needs its cache sizes")
        else:
            if status:
                status("cachegrind pass (valgrind; 20-100x slower than the run)")
            stats = cg.run(probe_cmd or argv, inventory, cpus=cpus, env=env, sample_s=cachegrind_sample_s)
            cg_doc = _attach_cachegrind(phases, stats)
            if stats.sampled:
                cg_doc["sample_s"] = cachegrind_sample_s
                notes.append(f"cachegrind pass stopped after its {cachegrind_sample_s:g} s sample: its counts "
                             "describe the start of the run")
            sources.append("cachegrind")
    elif "counters" not in sources and "mix" not in sources:
        notes.append("without hardware counters, perf's timer samples or --cachegrind, only the working set tells "
                     "a phase's kind of work apart (a cache-blocked compute phase with a large working set looks "
                     "memory-bound; integer and FP work look alike): `trace --cachegrind-sample 10` and `profile "
                     "--cachegrind` add the instruction mix to the phases and to the references")
    samples = {"t_s": [r["t_s"] for r in run.samples]}
    # `threads` is a fixed thread count the user told the app to use (OMP_NUM_THREADS): projection then
    # keeps it on every node. Without one, the app uses all of a node's CPUs (onnode.thread_env), so it
    # stays NULL and the count observed here is only recorded in meta.
    threads = onnode.fixed_threads(env)
    omp_threads = max((r.max_threads for r in obs.omp_records), default=None)
    samples.update({m: [r[m] for r in run.samples] for m in METRICS})
    trace = Trace(
        name=name, node=node, host=socket.gethostname(), command=list(argv), exit_status=run.exit_status,
        status=run.status, wall_s=run.wall_s, interval_s=interval_s, started_at=started.isoformat(),
        sources=sources, phases=phases, samples=samples, threads=threads, cachegrind=cg_doc,
        meta={"cpu_list": None if cpus is None else ",".join(map(str, cpus)),
              "probe_cmd": probe_cmd, "llc_bytes": llc_bytes, "wss_cost_s": run.wss_cost_s, "cpu_s": run.cpu_s,
              "omp_max_threads": omp_threads, "streams": streams_doc, "binary": binary.needs(argv[0]),
              "mix_samples": len(obs.mix_samples) if "mix" in sources else None,
              **({"mpi": mpi_doc} if mpi_doc else {}),
              "counters": [{k: v for k, v in r.items()} for r in obs.counter_rows] or None})
    return trace, notes


def _attach_mix(phases: list[Phase], samples: list[hotmix.Sample], t0: float) -> bool:
    """Each phase's instruction mix from the timer samples in its intervals (seconds since `t0`);
    True when at least one phase got one."""
    got = False
    for p in phases:
        metrics = hotmix.mix(samples, p.intervals or [[p.start_s, p.end_s]], t0)
        if metrics:
            p.signature["mix"] = metrics
            got = True
    return got


PROBE_LIMIT_X, PROBE_LIMIT_MIN_S = 1000, 120


def probe_limit(wall_s: float) -> float:
    """How long the stream probe may run by default: 1000x the traced run, at least 2 minutes. Our
    tool runs programs 15-170x slower; a program whose threads wait for each other by spinning (NPB
    LU's pipeline) runs far slower still, since valgrind runs one thread at a time and a spinning
    waiter burns its whole time slice: past this the probe is stopped, not left to run for hours."""
    return max(PROBE_LIMIT_MIN_S, PROBE_LIMIT_X * wall_s)


def _probe_streams(argv: list[str], phases: list[Phase], run, *, cpus, env, status, timeout_s: float) -> dict:
    """The stream-probe pass: its summary (with the phases its streams went to), or {"error": reason}."""
    if run.status != "ok":
        return {"error": f"stream probe skipped: the command {run.status}"}
    if status:
        status("stream probe (valgrind; tens of times slower than the run, hundreds with lackey)")
    try:
        result = probe.run(argv, cpus=cpus, env=env, timeout_s=timeout_s)
        attached = phase_streams.attach_probed(phases, result)
    except UserError as exc:
        return {"error": str(exc)}
    return {**result.summary(), "phases": [p.name for p in attached], "program_s": run.wall_s}


DOMINANT_SHARE = 0.75    # a phase this much of its method's time is the program, for its instruction mix


def _attach_cachegrind(phases: list[Phase], stats: cg.CachegrindStats) -> dict:
    """Per-function cachegrind metrics onto the OpenMP phases of the same function; whole-program
    metrics onto a method's phase when it is that method's only phase (it then is the program), or
    when it spans DOMINANT_SHARE of that method's phases' time: a one-thread program's loop after
    a start-up segment of a fraction of a second (Python's imports and reading its input) is what
    the counts describe, and without them it would be matched by /proc alone."""
    by_fn = {cg.function_key(fn): counts for fn, counts in stats.functions.items()}
    for p in phases:
        if p.method == "omp" and cg.function_key(p.name) in by_fn:
            p.signature["cachegrind"] = cg.metrics(by_fn[cg.function_key(p.name)])
    for method in {p.method for p in phases}:
        same = [p for p in phases if p.method == method]
        longest = max(same, key=lambda p: p.end_s - p.start_s)
        total = sum(p.end_s - p.start_s for p in same)
        if "cachegrind" not in longest.signature and (
                len(same) == 1 or longest.end_s - longest.start_s >= DOMINANT_SHARE * total):
            longest.signature["cachegrind"] = cg.metrics(stats.total)
    top = sorted(stats.functions.items(), key=lambda kv: -kv[1].get("Ir", 0.0))[:20]
    return {"options": stats.options, "total": cg.metrics(stats.total),
            "functions": {fn: cg.metrics(counts) for fn, counts in top}}
