"""Many writers on one PostgreSQL registry lose nothing: bundle imports racing on shared names and uids,
profiles racing to add the same new microbenchmarks and configs."""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from fleet_data import host_record
from registry_data import populate

from registry.db import open_registry, utcnow
from registry.db.migrate import available
from registry.doctor import check
from registry.profile import catalog, profiler
from registry.profile.runner import Measurement
from registry.profile.store import ProfileRecord


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_four_concurrent_imports(tmp_path, db_url):
    bundles = []
    for i in range(3):
        src = f"duckdb:///{tmp_path / f'src{i}.duckdb'}"
        reg = open_registry(src)
        with reg.begin() as conn:  # distinct nodes; the same app and microbenchmark configs in all
            populate(conn, node=f"node{i}", app="shared-app")
        reg.close()
        subprocess.run([sys.executable, "-m", "registry", "--db", src, "export", str(tmp_path / f"b{i}")], check=True)
        bundles.append(tmp_path / f"b{i}")
    bundles.append(bundles[0])  # the same bundle twice at once: uid races
    open_registry(db_url).close()
    env = {**os.environ, "NODEREG_DB": db_url}
    procs = [subprocess.Popen([sys.executable, "-m", "registry", "import", "bundle", str(b)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for b in bundles]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    reg = open_registry(db_url)
    with reg.connect() as conn:
        count = lambda t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()  # noqa: E731
        assert (count("nodes"), count("apps"), count("profiles"), count("runs"), count("ub_configs")) == (3, 1, 3, 9, 2)
        assert count("profile_reps") == 3 * 2 * 3 and count("ub_streams") == 2
    reg.close()


CPUS = sorted(os.sched_getaffinity(0))
# Four profiles at once on distinct nodes, with nested kernel sets (the last two the same): every new
# microbenchmark and config row is wanted by several of them. Compute kernels only: one config
# each, no memory-sized working set, so each profile measures for about a second.
KERNELS = ["int_ops", "peak_fma", "scalar_fp64"]
PROFILES = [(f"n{i}", CPUS[i % len(CPUS)], ",".join(KERNELS[:min(i, 2) + 1])) for i in range(4)]


def _waiting_on(conn, table: str) -> int:
    """Backends queued behind a lock on `table` of this database (pg_locks holds the whole cluster's, and
    another test's database, a copy of the same template, has the same table OIDs)."""
    return conn.execute(sa.text("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = CAST(:t AS regclass) "
                                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
                        {"t": table}).scalar()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_four_concurrent_profiles(db_url, binary):
    env = {**os.environ, "NODEREG_DB": db_url}
    reg = open_registry(db_url)
    gate = reg.connect()
    # Hold the microbenchmarks table until all four are about to store: they then race on the same
    # new microbenchmark and config rows at the same moment, not one after another by chance.
    gate.execute(sa.text("LOCK TABLE microbenchmarks IN ACCESS EXCLUSIVE MODE"))
    procs = [subprocess.Popen([sys.executable, "-m", "registry", "profile", node, "--cpus", str(cpu), "--quick",
                               "--reps", "2", "--kernels", kernels, "--json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for node, cpu, kernels in PROFILES]
    try:
        deadline = time.monotonic() + 90
        with reg.connect() as watch:
            while _waiting_on(watch, "microbenchmarks") < len(procs):
                assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
                    [p.communicate() for p in procs if p.poll() is not None]
                time.sleep(0.05)
    finally:
        gate.rollback()
        gate.close()
    summaries = {}
    for (node, _, _), p in zip(PROFILES, procs):
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        summaries[node] = json.loads(out)

    # what each profile must hold, planned independently of the processes
    plans = {node: profiler.prepare(profiler.ProfileOptions(node, "quick", cpus=[cpu], reps=2,
                                                            kernels=catalog.select(kernels))).plan.configs
             for node, cpu, kernels in PROFILES}
    keys: set[str] = {c.key for configs in plans.values() for c in configs}
    ubs = {c.ub.name for configs in plans.values() for c in configs}
    with reg.connect() as conn:
        q = lambda sql: [tuple(r) for r in conn.execute(sa.text(sql))]  # noqa: E731
        per_node = q("SELECT n.name, p.uid, count(DISTINCT r.run_id), count(s.run_id) FROM nodes n "
                     "JOIN profiles p ON p.node_id = n.node_id JOIN profile_runs r ON r.profile_id = p.profile_id "
                     "JOIN profile_reps s ON s.run_id = r.run_id GROUP BY n.name, p.uid ORDER BY n.name")
        assert per_node == [(node, summaries[node]["profile_uid"], len(plans[node]), 2 * len(plans[node]))
                            for node, _, _ in PROFILES]
        assert sorted(k for (k,) in q("SELECT config_key FROM ub_configs")) == sorted(keys)  # no duplicates
        assert sorted(n for (n,) in q("SELECT name FROM microbenchmarks")) == sorted(ubs)
        # every run points at its own config, and has its streams signature
        runs = q("SELECT n.name, c.config_key FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id "
                 "JOIN profiles p ON p.profile_id = r.profile_id JOIN nodes n ON n.node_id = p.node_id")
        assert sorted(runs) == sorted((node, c.key) for node, configs in plans.items() for c in configs)
        assert q("SELECT count(DISTINCT owner_id) FROM signatures WHERE owner_kind = 'profile_run' "
                 "AND source = 'streams'") == [(len(runs),)]
        assert check(conn) == []
    reg.close()


def _unmeasured(node: str, kernels: list[str]) -> ProfileRecord:
    """A profile of `kernels` with made-up timings (what is raced on here is storage, not measurement)."""
    prep = profiler.prepare(profiler.ProfileOptions(node, "quick", cpus=CPUS[:1], kernels=catalog.select(
        ",".join(kernels))))
    ms = [Measurement(c, times=[1e-3, 2e-3], iterations=10, passes=1, checksum=1.0, bytes_per_rep=1e6,
                      flops_per_rep=0.0, cpus_used=(CPUS[0],), unstable=False) for c in prep.plan.configs]
    return ProfileRecord(node, prep.inventory, "custom", ms, utcnow(), utcnow(), 1.0, "test", None, None)


def _save_at_once(reg, records: list[ProfileRecord]) -> None:
    """Store every record from its own thread, all released at one instant."""
    barrier = threading.Barrier(len(records))

    def save(record):
        barrier.wait()
        return profiler.save(reg, record)

    with ThreadPoolExecutor(len(records)) as pool:
        list(pool.map(save, records))


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_dozen_writers_add_the_same_new_configs(db_url):
    """Nested kernel sets stored at one instant: the writer wanting all twelve microbenchmarks meets
    a rival's uncommitted row at each; it must wait for it, not fail (whole-transaction retries ran
    out here: three attempts for up to eleven rivals)."""
    names = [ub.name for ub in catalog.ALL[:12]]
    records = [_unmeasured(f"w{i}", names[:i + 1]) for i in range(len(names))]
    reg = open_registry(db_url)
    _save_at_once(reg, records)
    with reg.connect() as conn:
        q = lambda sql: [tuple(r) for r in conn.execute(sa.text(sql))]  # noqa: E731
        configs = {m.config.key: m.config for r in records for m in r.measurements}
        assert sorted(k for (k,) in q("SELECT config_key FROM ub_configs")) == sorted(configs)
        assert q("SELECT count(*) FROM profile_runs") == [(sum(len(r.measurements) for r in records),)]
        # each config's streams written once, by the writer that added the config
        assert q("SELECT count(*) FROM ub_streams") == [(sum(len(c.descriptors()) for c in configs.values()),)]
        assert check(conn) == []
    reg.close()


_OPEN_WHEN_TOLD = """
import sys, time, pathlib
from registry.db import open_registry
gate = pathlib.Path(sys.argv[2])
while not gate.exists():
    time.sleep(0.005)
open_registry(sys.argv[1]).close()
"""


def test_eight_processes_open_an_empty_registry_at_once(tmp_path, pg_database):
    """Eight processes create one fresh registry at once (scripts, or admins running `init`): each
    migrates it, under the advisory lock one at a time (without it, they fail on tables created
    meanwhile by another)."""
    db_url = pg_database
    gate = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN_WHEN_TOLD, db_url, str(gate)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    time.sleep(1.5)  # all of them imported and polling
    gate.touch()
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    reg = open_registry(db_url)
    with reg.connect() as conn:
        versions = [v for (v,) in conn.execute(sa.text("SELECT version FROM schema_version ORDER BY version"))]
        assert versions == [m.version for m in available()]
        assert check(conn) == []
    reg.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_eight_hosts_store_profiles_of_one_type_at_once(db_url):
    """A fleet's hosts finish together: eight profiles of one new node type, all wanting the same
    new node, microbenchmark and config rows at one instant, each land whole, under its host."""
    records = [host_record("fleet-type", f"cn{i:02d}", 1.0 + i / 10) for i in range(8)]
    reg = open_registry(db_url)
    _save_at_once(reg, records)
    with reg.connect() as conn:
        q = lambda sql: [tuple(r) for r in conn.execute(sa.text(sql))]  # noqa: E731
        assert q("SELECT name FROM nodes") == [("fleet-type",)]
        assert q("SELECT host, profiles FROM v_hosts ORDER BY host") == [(f"cn{i:02d}", 1) for i in range(8)]
        configs = {m.config.key for m in records[0].measurements}
        assert sorted(k for (k,) in q("SELECT config_key FROM ub_configs")) == sorted(configs)
        assert q("SELECT count(*) FROM profile_runs") == [(8 * len(configs),)]
        assert check(conn) == []
    reg.close()
