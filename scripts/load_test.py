#!/usr/bin/env python3
"""Load test of a shared PostgreSQL registry: concurrent readers and writers for a while, then the
errors, the rows written and found, and each command's latency percentiles.

    pg_virtualenv python scripts/load_test.py --duration 300            # a throw-away cluster (PGHOST set)
    python scripts/load_test.py --db postgresql://me@dbhost/loadtest    # an empty database of yours

Readers (16 by default) loop over `nodereg match APP --no-store`, `nodereg match APP` (stores a set
when the registry changed), `nodereg sql` and `nodereg accuracy`; writers (4) over `nodereg runs add`,
`nodereg import runs FILE.csv` (20 rows) and `nodereg import bundle` (a bundle of its own: a new
node with a profile). Every command is the real CLI in its own process, as users run it. Rows
written are counted from the commands that said they succeeded and compared with the registry at
the end: a difference is a lost (or doubled) row. The registry is synthetic (scripts/bench_scale.py):
`--nodes` node types of `--configs` configs each, the app traced on the first.
"""

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scale  # noqa: E402 - the synthetic registry

from registry.db import open_registry, reader  # noqa: E402

console = Console()
APP = "bench-app"


def _server_database() -> str:
    """A new database on the server of the environment (PGHOST, as pg_virtualenv sets it)."""
    if not os.environ.get("PGHOST"):
        raise SystemExit("error: no --db and no PGHOST: run under pg_virtualenv or pass --db postgresql://...")
    user, password = os.environ.get("PGUSER", "postgres"), os.environ.get("PGPASSWORD", "")
    server = f"postgresql+psycopg://{user}{':' + password if password else ''}@{os.environ['PGHOST']}:" \
             f"{os.environ.get('PGPORT', '5432')}"
    name = f"nodereg_load_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return f"{server}/{name}".replace("postgresql+psycopg://", "postgresql://")


def prepare(url: str, nodes: int, configs: int, workdir: Path, bundles: int) -> None:
    """The registry (as its admin leaves it: schema, reader role), a stored prediction set and runs
    for `accuracy`, and the writers' bundles."""
    bench_scale.build(url, nodes, configs, 0)
    bench_scale.add_trace(url, workdir)
    reg = open_registry(url)
    with reg.begin() as conn:
        reader.setup(conn, reader.DEFAULT_ROLE)
    reg.close()
    first = _run(url, ["match", APP])
    if first.returncode:
        raise SystemExit(f"error: the first match failed: {first.stderr.strip()}")
    for node in ("node00001", "node00002"):
        _run(url, ["runs", "add", APP, node, "--threads", "2", "--time", "31"])
    for i in range(bundles):
        _bundle(workdir / f"bundle{i}", f"loaded{i:03d}", configs)


def _bundle(path: Path, node: str, configs: int) -> None:
    """A bundle of one new node with a profile of the registry's configs (a DuckDB registry of its own,
    exported)."""
    from registry.io.bundle import export_bundle

    src = f"duckdb:///{path}.duckdb"
    with console.status(f"bundle {path.name}"):
        bench_scale.build(src, 1, configs, 0)
    reg = open_registry(src)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE nodes SET name = :n"), {"n": node})
    with reg.connect() as conn:
        export_bundle(conn, path)
    reg.close()


def _run(url: str, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "registry", "--db", url, *args], capture_output=True, text=True)


def _run_timed(url: str, args: list[str]) -> tuple[int, str, float]:
    """(exit status, stderr, CPU seconds of the command's process: user + system) of `nodereg ARGS`.
    Its output goes to files, not pipes, so that the process is reaped by wait4, which reports its
    own CPU time (rusage of all children would mix the threads' concurrent commands)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "registry", "--db", url, *args], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return proc.returncode, err.read().decode(errors="replace"), usage.ru_utime + usage.ru_stime


class Load:
    """The commands run, their latencies and failures, and the rows the writers were told they added."""

    def __init__(self, url: str, workdir: Path, deadline: float):
        self.url, self.workdir, self.deadline = url, workdir, deadline
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.written = defaultdict(int)
        self.lock = threading.Lock()
        self.bundles = iter(sorted(workdir.glob("bundle*[0-9]")))
        self.imports = itertools.count()

    def command(self, name: str, args: list[str]) -> bool:
        t0 = time.perf_counter()
        code, stderr, cpu = _run_timed(self.url, args)
        with self.lock:
            self.latency[name].append(time.perf_counter() - t0)
            self.cpu[name].append(cpu)
            if code:
                self.errors.append(f"{name}: {(stderr.strip().splitlines() or ['exit ' + str(code)])[-1]}")
        return code == 0

    def reader(self, seed: int) -> None:
        for step in itertools.count(seed):
            if time.monotonic() > self.deadline:
                return
            kind = step % 4
            if kind == 0:
                self.command("match --no-store", ["match", APP, "--no-store", "--json"])
            elif kind == 1:
                self.command("match", ["match", APP, "--json"])
            elif kind == 2:
                self.command("sql", ["sql", "SELECT node, count(*) AS n FROM v_profile GROUP BY node ORDER BY n DESC "
                                            "LIMIT 5", "--format", "csv"])
            else:
                self.command("accuracy", ["accuracy", APP, "--all-runs", "--json"])   # (runs before the latest set too)

    def _runs_file(self) -> Path:
        """A CSV of 20 runs no other import has (the k-th of the whole load): importing runs is
        idempotent (the same runs imported twice add nothing), so each import brings new
        measurements, as a site's would."""
        k = next(self.imports)      # (one counter for every writer: their steps coincide)
        path = self.workdir / f"runs-{k}.csv"
        path.write_text("app,node,threads,time_s\n" + "".join(f"{APP},node{n:05d},2,{30 + n / 10 + k / 1e4}\n"
                                                              for n in range(3, 23)))
        return path

    def writer(self, seed: int) -> None:
        for step in itertools.count(seed):
            if time.monotonic() > self.deadline:
                return
            kind = step % 3
            if kind == 0 and self.command("runs add", ["runs", "add", APP, f"node{step % 50:05d}", "--threads", "2",
                                                      "--time", f"{30 + step % 7}"]):
                with self.lock:
                    self.written["runs"] += 1
            elif kind == 1 and self.command("import runs", ["import", "runs", str(self._runs_file())]):
                with self.lock:
                    self.written["runs"] += 20
            elif kind == 2:
                with self.lock:
                    bundle = next(self.bundles, None)
                if bundle is not None and self.command("import bundle", ["import", "bundle", str(bundle)]):
                    with self.lock:
                        self.written["nodes"] += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="an empty PostgreSQL database (default: a new one on PGHOST)")
    ap.add_argument("--duration", type=float, default=300, help="seconds of load (default 300)")
    ap.add_argument("--readers", type=int, default=16)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--configs", type=int, default=300)
    args = ap.parse_args()
    url = args.db or _server_database()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with console.status("preparing the registry"):
            prepare(url, args.nodes, args.configs, workdir, bundles=max(4, int(args.duration / 10)))
        counts_before = _counts(url)
        load = Load(url, workdir, time.monotonic() + args.duration)
        threads = [threading.Thread(target=load.reader, args=(i,)) for i in range(args.readers)]
        threads += [threading.Thread(target=load.writer, args=(i,)) for i in range(args.writers)]
        started = time.monotonic()
        with console.status(f"{args.readers} readers and {args.writers} writers for {args.duration:g} s"):
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elapsed = time.monotonic() - started
    counts_after = _counts(url)
    lost = {t: load.written[t] - (counts_after[t] - counts_before[t]) for t in ("runs", "nodes")}
    table = Table(title=f"{args.readers} readers, {args.writers} writers, {elapsed:.0f} s, {args.nodes} nodes x "
                        f"{args.configs} configs; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for column in ("command", "runs", "errors", "p50 s", "p95 s", "max s", "CPU p50 s"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, times in sorted(load.latency.items()):
        failed = sum(e.startswith(name + ":") for e in load.errors)
        p50, p95 = np.percentile(times, [50, 95])
        table.add_row(name, str(len(times)), str(failed), f"{p50:.2f}", f"{p95:.2f}", f"{max(times):.2f}",
                      f"{np.median(load.cpu[name]):.2f}")
    console.print(table)
    # every client loops without a pause: with the CPUs busy, a command waits its share of them
    busy = sum(map(sum, load.cpu.values()))
    console.print(f"CPU time of the commands: {busy:.0f} s in {elapsed:.0f} s on {os.cpu_count()} CPUs "
                  f"({busy / elapsed / (os.cpu_count() or 1):.0%} of them, the database server not counted); with "
                  f"{args.readers + args.writers} clients looping, a command's latency is about "
                  f"{args.readers + args.writers} / {os.cpu_count()} of its CPU time once the CPUs are saturated")
    console.print(f"rows written (said by the commands) vs found: runs {load.written['runs']} vs "
                  f"{counts_after['runs'] - counts_before['runs']}, nodes {load.written['nodes']} vs "
                  f"{counts_after['nodes'] - counts_before['nodes']}; lost {sum(lost.values())}")
    deadlocks = [e for e in load.errors if "deadlock" in e.lower()]
    console.print(f"errors {len(load.errors)}, deadlocks {len(deadlocks)}")
    for e in sorted(set(load.errors))[:20]:
        console.print(f"  {e}", markup=False)
    if load.errors or any(lost.values()):
        sys.exit(1)


def _counts(url: str) -> dict[str, int]:
    reg = open_registry(url, readonly=True)
    with reg.connect() as conn:
        out = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in ("runs", "nodes")}
    reg.close()
    return out


if __name__ == "__main__":
    main()
