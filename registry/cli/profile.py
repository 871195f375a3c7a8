"""`nodereg profile NODE`: measure this machine (or a restricted configuration of it) and store
its microbenchmark profile."""

from collections.abc import Sequence

import typer
from rich.progress import BarColumn, SpinnerColumn, TaskProgressColumn, TimeElapsedColumn, TimeRemainingColumn

from registry import cpulist
from registry.cli.app import app, state
from registry.cli.interrupts import interrupts_reported
from registry.cli.output import err_console, print_json, print_table, say, text_column
from registry.cli.progress import Progress
from registry.errors import UserError
from registry.measure import load
from registry.values import command_line, plural


def _threads(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        counts = cpulist.parse(text)
    except UserError:
        raise UserError(f"malformed --threads {text!r}: expected e.g. 1,2 or 1-4", exit_code=2) from None
    if counts[0] < 1:
        raise UserError(f"--threads {text!r}: thread counts start at 1", exit_code=2)
    return counts


def _print_summary(summary: dict, threads: Sequence[int]) -> None:
    """Summary tables: bandwidth per level and thread count, latency per level, compute."""
    cols = [str(t) for t in threads]
    rows = []
    for kernel, levels in summary["bandwidth_gbs"].items():
        for level, per in levels.items():
            rows.append({"kernel": kernel, "level": level, **{f"{t} thr": per.get(t) for t in cols}})
    if rows or not (summary["mpi"] or summary["jacobi"]):   # a profile of only the MPI kernels has no bandwidth table
        print_table(rows, ["kernel", "level", *[f"{t} thr" for t in cols]],
                    title="bandwidth (GB/s), the best over each level's working sets and placements",
                    empty="no bandwidth kernels measured")
    if summary["latency_ns"]:
        print_table([{"level": lvl, "latency_ns": v} for lvl, v in summary["latency_ns"].items()],
                    title="latency (ns, 1 thread)")
    compute = [{"kernel": name, **{f"{t} thr": per.get(t) for t in cols}} for name, per in summary["compute"].items()]
    if compute:
        print_table(compute, ["kernel", *[f"{t} thr" for t in cols]], title="compute (G ops/s)")
    if summary["mpi"]:
        print_table(summary["mpi"], title="MPI on this node (us per operation, ping-pong one-way; GB/s)")
    if summary["jacobi"]:
        print_table(summary["jacobi"], title="Jacobi data generator (us per time step: halo exchange, sweep)")


def _literal(name: str) -> str:
    """A name inside a str.format template (a progress line), braces and all."""
    return name.replace("{", "{{").replace("}", "}}")


def _check_host(wait_idle: float | None, strict: bool, since: load.CpuMeter) -> load.HostLoad:
    """Look at the host before measuring (since the command began, `since`): wait for it
    (--wait-idle), refuse (--strict) or warn."""
    seen = _wait_idle(wait_idle) if wait_idle else load.sample(since=since)
    why = seen.busy()
    if why and strict:
        raise UserError(f"the host is busy: {why}; refusing to profile (--strict)"
                        + (f" after waiting {wait_idle:g} s" if wait_idle else ""))
    if why:
        say(f"warning: the host is busy: {why}. Bandwidth and latency measured now will be low "
            f"and unstable; the load is stored with the profile and `nodereg match` flags it. "
            f"--wait-idle SECONDS waits for an idle host, --strict refuses", err=True, style="yellow")
    return seen


def _node_figures(st, node: str):
    """The node's memory bandwidth and FP64 peak as every other command quotes them
    (registry.report.curves: each kernel at the most threads measured; triad at its largest working
    set), from the profile just stored; (None, None) where neither kernel was measured."""
    from registry.report.curves import memory_bandwidth, node_fp64
    from registry.report.load import node_profile

    with st.registry().connect() as conn:     # (the registry the profile was stored in: no second open)
        try:
            prof = node_profile(conn, node)
        except UserError:      # nothing a figure is read from was measured
            return None, None
        return memory_bandwidth(prof), node_fp64(prof)


def _same_cpu_count(conn, node: str, inventory) -> None:
    """A node name stands for one CPU set: profiling `cn[01-04]` again with other --cpus silently made
    one node of two configurations (both profiles under it). Refused unless --redefine."""
    import sqlalchemy as sa

    row = conn.execute(sa.text("SELECT n.n_cpus, n.cpu_list FROM nodes n WHERE n.name = :n AND EXISTS "
                               "(SELECT 1 FROM profiles p WHERE p.node_id = n.node_id)"), {"n": node}).first()
    if row is not None and row.n_cpus is not None and row.n_cpus != inventory.cpu_count:
        was = f"{plural(row.n_cpus, 'CPU')}" + (f" ({row.cpu_list})" if row.cpu_list else "")
        now = f"{plural(inventory.cpu_count, 'CPU')} ({inventory.cpu_list})"
        raise UserError(f"node {node!r} was profiled on {was}; this profile would measure {now}: give this "
                        "configuration another node name, or pass --redefine to change the node")


def _wait_idle(wait_s: float) -> load.HostLoad:
    """--wait-idle: wait for the host to calm down, saying so and counting down (a silent wait of up
    to ten minutes reads as a hang)."""
    seen = load.sample()
    if not seen.busy():
        return seen
    say(f"the host is busy ({seen.busy()}): waiting up to {wait_s:g} s for it to calm down (--wait-idle)", err=True)
    columns = (SpinnerColumn(), text_column("{task.description}"), BarColumn(), text_column("{task.fields[left]}"))
    with Progress(*columns, console=err_console, plain="waiting for an idle host, {task.fields[left]}") as progress:
        task = progress.add_task("waiting for an idle host", total=wait_s, left=f"{wait_s:.0f} s left")
        seen = load.wait_until_idle(wait_s, on_sample=lambda now, left: progress.update(
            task, completed=wait_s - left, left=f"{left:.0f} s left", description=f"busy: {now.busy()}"))
    say("the host is idle now: profiling" if not seen.busy() else f"still busy after {wait_s:g} s", err=True)
    return seen


def _watch_host(watch: load.Watch, strict: bool) -> None:
    """Between configurations: note new load; with --strict stop (nothing is stored)."""
    now = watch.check()
    why = now.busy() if now else None
    if why and strict:
        raise UserError(f"the host became busy while profiling: {why}; nothing was stored (--strict)")
    if why and not watch.warned:
        watch.warned = True
        say(f"warning: the host became busy while profiling: {why}", err=True, style="yellow")


@app.command()
def profile(
    ctx: typer.Context,
    node: str = typer.Argument(..., help="Node name to store the profile under (created if new)."),
    quick: bool = typer.Option(False, "--quick", help="Small sweep (about 80 s on an idle 2-core VM): every cache level, "
                                                      "bandwidth, latency and FP peak."),
    full: bool = typer.Option(False, "--full", help="Everything: denser sizes, every stride, both placements."),
    cpus: str = typer.Option(None, "--cpus", help="Profile the node made of these CPUs only (e.g. 0 or 0-3); "
                                                  "stored as that restricted configuration."),
    threads: str = typer.Option(None, "--threads", help="Thread counts, e.g. 1,2 or 1-4 (default: 1..CPUs)."),
    reps: int = typer.Option(None, "--reps", help="Exactly N repetitions per configuration "
                                                  "(default: until the median is stable)."),
    kernels: str = typer.Option(None, "--kernels", help="Microbenchmarks or families, comma-separated "
                                                        "(e.g. triad,peak_fma or thesis,latency)."),
    cachegrind: bool = typer.Option(False, "--cachegrind", help="Also measure the representative configs' "
                                    "cachegrind signatures (valgrind; 1-2 minutes more; with --suite: every "
                                    "config's, about 5 s each), to match phases traced with --cachegrind."),
    host: str = typer.Option(None, "--host", help="Record the profile as measured on this host (default: "
                                                  "this machine's hostname; `nodereg fleet` passes the "
                                                  "Slurm node name)."),
    wait_idle: float = typer.Option(None, "--wait-idle", min=0, metavar="SECONDS",
                                    help="When the host is busy (other processes, another nodereg measurement), "
                                         "wait up to this long for it to become idle."),
    strict: bool = typer.Option(False, "--strict", help="Refuse to measure (or to store) on a busy host; "
                                                        "by default a warning is printed and the load is stored."),
    suite: str = typer.Option(None, "--suite", help="Measure an imported suite's locally runnable part instead "
                                                    "of our kernels: 'sparecores' (stress-ng, openssl speed, "
                                                    "membench and bw_mem sizes; --kernels picks tasks)."),
    redefine: bool = typer.Option(False, "--redefine", help="Let this profile give NODE another number of CPUs "
                                                           "than its earlier profiles (refused otherwise)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Measure this node's microbenchmark profile and store it with the node's inventory.

    Ctrl-C or SIGTERM stop it with nothing stored (exit 130 or 143)."""
    started = load.CpuMeter()   # the host's load is looked at from now (_check_host)
    from registry.match.caveats import UNSTABLE_SHARE as UNSTABLE_ADVICE

    if suite not in (None, "nodereg"):
        if full or cpus or threads or reps or host:
            raise UserError("--suite takes only --quick, --kernels (tasks), --cachegrind, --wait-idle, --strict "
                            "and --json")
        _profile_suite(ctx, node, suite, quick, kernels, cachegrind, wait_idle, strict, as_json, started)
        return
    # imported here, as the other commands' start-up does not need the profiler
    from registry.profile import cachegrind_pass, catalog, parallel_check, profiler, signatures
    from registry.profile.runner import estimate_s
    from registry.profile.summary import summarize

    if quick and full:
        raise UserError("--quick and --full exclude each other")
    opts = profiler.ProfileOptions(
        node=node, mode="quick" if quick else "full" if full else "default",
        cpus=cpulist.parse(cpus) if cpus is not None else None, threads=_threads(threads), reps=reps,
        kernels=catalog.select(kernels), cachegrind=cachegrind, host=host)
    prep = profiler.prepare(opts)
    with state(ctx).registry().connect() as conn:   # a bad registry fails now, not after the measurements
        if not redefine:
            _same_cpu_count(conn, node, prep.inventory)
    state(ctx).close()      # ... and holds no lock while measuring (reopened, with --wait, to store)
    for note in prep.plan.notes:
        say(f"note: {note}", err=True)

    configs = prep.plan.configs
    signed = signatures.representatives(configs)
    total = sum(estimate_s(c, prep.policy) for c in configs) + len(signed) * signatures.COST_S
    if cachegrind:
        total += sum(cachegrind_pass.estimate_s(c) for c in signed if cachegrind_pass.affordable(c))
    columns = (SpinnerColumn(), text_column("{task.description}"), BarColumn(), TaskProgressColumn(),
               text_column("{task.fields[done]}/{task.fields[count]} configurations"), TimeElapsedColumn(),
               text_column("ETA"),
               TimeRemainingColumn())
    with interrupts_reported(f"the profile of {node} was not finished: nothing was stored"):
        profiler.build(prep)   # built (or found in the cache) first: a build error comes before any load warning
        seen = _check_host(wait_idle, strict, started)
        watch = load.Watch()
        plain = f"profiling {_literal(node)}: " + "{task.fields[done]}/{task.fields[count]} configurations{task.fields[then]}"
        with Progress(*columns, console=err_console, plain=plain) as progress:
            task = progress.add_task(f"profiling {node}", total=total, done=0, count=len(configs), then="")
            measured: set[int] = set()   # the count is of configurations, as the summary's; the signature
                                         # (and cachegrind) passes over some of them again are said, not counted

            def advance(config, weight):
                again = id(config) in measured
                measured.add(id(config))
                progress.update(task, advance=weight, done=len(measured), then=", signatures" if again else "",
                                description=f"{config.ub.name} x{config.threads}" + (" (signature)" if again else ""))
                _watch_host(watch, strict)

            record = profiler.measure(opts, prep, advance)
        after = load.HostLoad(unscaled=parallel_check.unscaled(record.measurements, prep.topology))
        if after.unscaled:
            if strict:
                raise UserError(f"{after.busy()}; nothing was stored (--strict)")
            say(f"warning: {after.busy()}. The profile is stored with that caveat (`nodereg match` widens "
                "its intervals); profile again for figures to rely on", err=True, style="yellow")
        record.host_load = seen.merge(watch.seen).merge(after).to_dict()
        profiler.save(state(ctx).registry(), record)

    unstable = sum(m.unstable for m in record.measurements)
    summary = {"node": node, "profile_uid": record.uid, "mode": record.mode, "cpu_list": prep.inventory.cpu_list,
               "threads": prep.plan.threads, "configs": len(record.measurements), "unstable": unstable,
               "duration_s": round(record.duration_s, 2), **summarize(record.measurements)}
    memory, peak = _node_figures(state(ctx), node)
    summary["memory_bandwidth_gbs"] = memory and round(memory.value, 3)
    summary["fp64_gflops"] = peak and round(peak.value, 3)
    if as_json:
        print_json(summary)
        return
    _print_summary(summary, prep.plan.threads)
    if memory is not None:
        say(f"memory bandwidth: {memory.value:.3g} GB/s ({memory.describe()}): the node's figure in "
            "`nodereg nodes` (memory_triad_gbs), match and reports")
    if peak is not None:
        say(f"FP64 peak: {peak.value:.3g} GFLOP/s ({peak.describe()}): the node's figure in "
            "`nodereg nodes` (fp64_gflops), match and reports")
    say(f"stored profile {record.uid} of node {node} ({cpulist.named(prep.inventory.cpu_list)}): "
        f"{plural(len(record.measurements), 'configuration')}, {unstable} unstable, {record.duration_s:.1f} s")
    if unstable > len(record.measurements) * UNSTABLE_ADVICE:
        say(f"note: {plural(unstable, 'configuration')} kept varying between repetitions (README: unstable); "
            "on a busy or frequency-scaling host re-run "
            f"{command_line('nodereg', 'profile', node, '--wait-idle', '600')}; "
            "`nodereg match` widens its intervals for this node meanwhile", err=True)


def _profile_suite(ctx: typer.Context, node: str, suite: str, quick: bool, tasks: str | None, cachegrind: bool,
                   wait_idle: float | None, strict: bool, as_json: bool, started: load.CpuMeter) -> None:
    """`profile NODE --suite sparecores`: the imported suite's configs that run here (docs/sparecores-trace.md);
    `cachegrind`: with each config's cachegrind signature (registry.profile.suite.cachegrind)."""
    from registry.db.names import check_name
    from registry.inventory import collect
    from registry.measure import cachegrind as cg
    from registry.profile.suite import cachegrind as suite_cachegrind
    from registry.profile.suite import measure as suite_measure
    from registry.profile.suite import plan as suite_plan
    from registry.profile.suite import tools
    from registry.profile.suite.store import store_suite_profile

    if suite != suite_plan.SUITE:
        raise UserError(f"unknown suite {suite!r}: `--suite sparecores` measures the Spare Cores suite here")
    check_name(node, "node")
    chosen = [t.strip() for t in tasks.split(",") if t.strip()] if tasks else None
    needs_stressng = chosen is None or any(t.startswith("stressng") for t in chosen)
    available = tools.stress_ng_stressors() if needs_stressng and not tools.missing_tools(
        [suite_plan.SuiteConfig("stressng", "cpu")]) else None
    configs = suite_plan.plan(quick, chosen, available)
    missing = tools.missing_tools(configs)
    if missing:
        raise UserError(f"the Spare Cores suite needs {', '.join(missing)} on this machine")
    if cachegrind:
        cg.require()
    inv = collect(None)
    state(ctx).registry()
    state(ctx).close()
    seconds = 1.0 if quick else 2.0
    total = sum(suite_measure.estimate_s(c, seconds) for c in configs)
    if cachegrind:
        total += suite_cachegrind.total_s(configs, inv)
    columns = (SpinnerColumn(), text_column("{task.description}"), BarColumn(), TaskProgressColumn(),
               TimeElapsedColumn(), text_column("ETA"), TimeRemainingColumn())
    with interrupts_reported(f"the suite profile of {node} was not finished: nothing was stored"):
        seen = _check_host(wait_idle, strict, started)
        watch = load.Watch()
        plain = f"profiling {_literal(node)} ({suite}): {{task.description}}"
        with Progress(*columns, console=err_console, plain=plain) as progress:
            bar = progress.add_task(f"{len(configs)} configurations", total=total)

            def advance(config, weight):
                progress.update(bar, advance=weight, description=config.key)
                _watch_host(watch, strict)

            record = suite_measure.measure(node, configs, inv, seconds, quick, advance, cachegrind)
        record.host_load = seen.merge(watch.seen).to_dict()
        state(ctx).registry().write(lambda conn: store_suite_profile(conn, record))
    rows = [{"config": r.config.key, "value": r.value, "unit": r.config.unit,
             "cpu_util": r.signature.get("proc", {}).get("cpu_util"),
             **({"branches_per_inst": r.signature.get("cachegrind", {}).get("branches_per_inst")} if cachegrind else {})}
            for r in record.results]
    for note in record.notes:
        say(f"note: {note}", err=True)
    if as_json:
        print_json({"node": node, "suite": suite, "profile_uid": record.uid, "configs": len(rows),
                    "duration_s": round(record.duration_s, 2), "tools": record.tools, "runs": rows,
                    "host_load": record.host_load, "notes": record.notes})
        return
    print_table(rows, title=f"{node}: the {suite} suite measured here")
    say(f"stored suite profile {record.uid} of node {node}: {len(rows)} configurations, "
        f"{record.duration_s:.1f} s")
