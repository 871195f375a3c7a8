"""Profiles of one node type on several hosts, with chosen speeds, without measuring anything.

The configs are a real quick plan of this machine (so levels, keys and signatures are what a
profile stores); the times are made up: every kernel runs at `speed` x 1 GB/s or GFLOP/s, and
the pointer chase at 1000 / `speed` ns. `speed` may depend on the config, to degrade one figure.
"""

import dataclasses
import functools
import os
from collections.abc import Callable

import sqlalchemy as sa

from registry.db import utcnow
from registry.db.write import new_uid
from registry.profile import catalog, profiler
from registry.profile.runner import Measurement
from registry.profile.store import ProfileRecord, store_profile
from registry.profile.sweep import Config

CPU = min(os.sched_getaffinity(0))
KERNELS = "triad,load,chase,peak_fma"


@functools.cache
def _prepared(kernels: str) -> profiler.Prepared:
    return profiler.prepare(profiler.ProfileOptions("plan", "quick", cpus=[CPU], threads=[1],
                                                    kernels=catalog.select(kernels)))


def memory_only(factor: float) -> Callable[[Config], float]:
    """A speed that is `factor` for configs whose working set is in memory, 1 elsewhere."""
    return lambda c: factor if c.ws_level == "memory" else 1.0


def host_record(node: str, host: str, speed: float | Callable[[Config], float] = 1.0,
                kernels: str = KERNELS) -> ProfileRecord:
    prep = _prepared(kernels)
    speed_of = speed if callable(speed) else (lambda c: speed)
    ms = []
    for c in prep.plan.configs:
        t = 1e-3 / speed_of(c)
        ms.append(Measurement(c, times=[t, t], iterations=1000, passes=1, checksum=1.0,
                              bytes_per_rep=1e6 if c.ub.family == "bandwidth" else 0.0,
                              flops_per_rep=1e6 if c.ub.family == "compute" else 0.0,
                              cpus_used=(CPU,), unstable=False))
    inv = dataclasses.replace(prep.inventory, hostname=host)
    now = utcnow()
    return ProfileRecord(node, inv, "custom", ms, now, now, 1.0, "test", None, None, uid=new_uid())


def store_hosts(reg, node: str, speeds: dict[str, float | Callable[[Config], float]]) -> dict[str, str]:
    """One profile per host of `node`; returns {host: profile uid}."""
    uids = {}
    for host, speed in speeds.items():
        record = host_record(node, host, speed)
        reg.write(lambda conn, r=record: store_profile(conn, r))
        uids[host] = record.uid
    return uids


def degraded_copy(conn: sa.Connection, profile_uid: str, host: str, factor: float) -> str:
    """A crafted profile of another host: a copy of profile `profile_uid` with every time divided by
    `factor` (factor 0.5: half the bandwidth and FLOP rate, twice the latency). Returns its uid."""
    uid = new_uid()
    old = conn.execute(sa.text("SELECT profile_id FROM profiles WHERE uid = :u"), {"u": profile_uid}).scalar_one()
    new = conn.execute(sa.text(
        "INSERT INTO profiles (uid, node_id, mode, started_at, finished_at, duration_s, tool_version, host, "
        "cpu_list, status) SELECT :uid, node_id, 'import', started_at, finished_at, duration_s, tool_version, :host, "
        "cpu_list, 'complete' FROM profiles WHERE profile_id = :old RETURNING profile_id"),
        {"uid": uid, "host": host, "old": old}).scalar_one()
    conn.execute(sa.text(
        "INSERT INTO profile_runs (profile_id, config_id, iterations, reps, median_s, min_s, cv, tpi_us, "
        "bytes_per_rep, flops_per_rep, bandwidth_gbs, gflops, latency_ns, checksum, unstable) "
        "SELECT :new, config_id, iterations, reps, median_s / :f, min_s / :f, cv, tpi_us / :f, bytes_per_rep, "
        "flops_per_rep, bandwidth_gbs * :f, gflops * :f, latency_ns / :f, checksum, unstable "
        "FROM profile_runs WHERE profile_id = :old"), {"new": new, "old": old, "f": factor})
    # each new run's counterpart: the old run of the same config
    pairs = ("FROM profile_runs n JOIN profile_runs o ON o.config_id = n.config_id AND o.profile_id = :old "
             "JOIN {table} s ON {on} WHERE n.profile_id = :new")
    conn.execute(sa.text("INSERT INTO profile_reps (run_id, rep, time_s) SELECT n.run_id, s.rep, s.time_s / :f "
                         + pairs.format(table="profile_reps", on="s.run_id = o.run_id")),
                 {"new": new, "old": old, "f": factor})
    conn.execute(sa.text("INSERT INTO signatures (owner_kind, owner_id, source, metric, value) "
                         "SELECT s.owner_kind, n.run_id, s.source, s.metric, s.value "
                         + pairs.format(table="signatures", on="s.owner_kind = 'profile_run' AND s.owner_id = o.run_id")),
                 {"new": new, "old": old})
    return uid
