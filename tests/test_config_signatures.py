"""Signatures of microbenchmark configs from the sources phases have: cachegrind (on request) and
perf counters (where the node counts; here a stand-in perf, since this VM has no PMU)."""

import dataclasses
import os

import pytest
import sqlalchemy as sa

from registry.db import open_registry
from registry.inventory import Cache, collect
from registry.profile import cachegrind_pass, catalog
from registry.profile.sweep import Config
from registry.measure import cachegrind, counters

CPU = min(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(not cachegrind.available(), reason="needs valgrind")


def _signatures(db_url: str, source: str) -> dict[str, dict[str, float]]:
    reg = open_registry(db_url, readonly=True)
    try:
        with reg.connect() as conn:
            rows = conn.execute(sa.text("""
                SELECT u.name, g.metric, g.value FROM signatures g JOIN profile_runs r ON r.run_id = g.owner_id
                JOIN ub_configs c ON c.config_id = r.config_id JOIN microbenchmarks u ON u.ub_id = c.ub_id
                WHERE g.owner_kind = 'profile_run' AND g.source = :s"""), {"s": source}).fetchall()
    finally:
        reg.close()
    out: dict[str, dict[str, float]] = {}
    for name, metric, value in rows:
        out.setdefault(name, {})[metric] = value
    return out


def test_cachegrind_tells_cache_resident_from_memory_resident_configs(binary):
    # A node whose last-level cache is 1 MiB, so that a memory-resident config stays small under valgrind.
    inv = dataclasses.replace(collect([CPU]), caches=[Cache(1, "Data", 32768, 64, 1, 1),
                                                      Cache(2, "Unified", 1 << 20, 64, 1, 1)])
    load = catalog.get("load")

    def config(nbytes: int) -> Config:
        return Config(ub=load, threads=1, placement="compact", cpus=(CPU,), n=nbytes // 8)

    in_l1, in_memory = cachegrind_pass.measure(config(8192), inv), cachegrind_pass.measure(config(8 << 20), inv)
    assert in_l1["d1_miss_rate"] < 0.01 and in_l1["ll_miss_rate"] < 0.01
    # one miss per 64-byte line: every access of a memory-resident stream of 8..64-byte loads misses
    # at least 1 in 8 times, in D1 and LL alike
    assert in_memory["ll_miss_rate"] > 0.1 and in_memory["d1_miss_rate"] >= in_memory["ll_miss_rate"]
    assert in_memory["ll_mpki"] > 100 * max(in_l1["ll_mpki"], 0.01)
    assert 0.1 < in_memory["accesses_per_inst"] < 2


def test_cachegrind_simulates_gemm_only_where_a_pass_takes_seconds(binary):
    """A pass of gemm cannot be shortened (one whole update of C): at its L2 point (N = 128 here) two
    passes are simulated in about a second, register tiles with few memory accesses per instruction;
    its L3 and memory configs, tens of seconds to minutes under valgrind, are left out."""
    gemm = [Config(ub=catalog.get("gemm"), threads=1, placement="compact", cpus=(CPU,), n=n, level=level)
            for n, level in ((128, "L2"), (832, "L3"), (4032, "memory"))]
    got = cachegrind_pass.measure_all(gemm, collect([CPU]))
    assert list(got) == [gemm[0].key]
    assert got[gemm[0].key]["instructions"] > 5e5 and got[gemm[0].key]["accesses_per_inst"] < 0.5


def test_profile_cachegrind_stores_the_source_for_representatives(cli, db_url, binary):
    res = cli("profile", "n", "--cpus", str(CPU), "--kernels", "peak_fma,scalar_fp64", "--quick", "--reps", "1",
              "--cachegrind")
    assert res.code == 0, res.err
    sigs = _signatures(db_url, "cachegrind")
    assert set(sigs) == {"peak_fma", "scalar_fp64"}
    for metrics in sigs.values():  # register-resident FMA chains: almost no memory accesses
        assert metrics["instructions"] > 1e6 and metrics["accesses_per_inst"] < 0.05


FAKE_PERF = """#!/bin/sh
# perf on a node with a PMU, as far as nodereg sees it: the probe counts, and `perf stat -I ... -o FILE
# -e ... -p PID` writes two intervals of made-up counts and runs until interrupted.
if [ "$2" = "-x" ]; then echo "1000,,instructions,1000,100.00,," >&2; exit 0; fi
if [ "$1" = "record" ]; then exit 1; fi   # timer samples for source mix: not this stand-in's
trap 'exit 0' INT
printf '%s\\n' 0.1,4000,,cycles,1,100,, 0.1,2000,,instructions,1,100,, 0.1,100,,cache-references,1,100,, \\
    0.1,10,,cache-misses,1,100,, 0.2,4000,,cycles,1,100,, 0.2,6000,,instructions,1,100,, \\
    0.2,100,,cache-references,1,100,, 0.2,30,,cache-misses,1,100,, > "$7"
while :; do sleep 0.02; done
"""


def test_profile_records_counters_where_perf_counts(cli, db_url, binary, tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "perf"
    fake.parent.mkdir()
    fake.write_text(FAKE_PERF)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    counters.available.cache_clear()
    try:
        assert counters.available()
        res = cli("profile", "n", "--cpus", str(CPU), "--kernels", "peak_fma", "--quick", "--reps", "1")
    finally:
        counters.available.cache_clear()
    assert res.code == 0, res.err
    sig = _signatures(db_url, "counters")["peak_fma"]
    assert sig == pytest.approx({"ipc": 1.0, "cache_miss_rate": 0.2, "misses_per_kinst": 5.0})


def test_signature_windows_take_the_sweeps_passes():
    """A window's repetitions run at the passes the sweep measured, scaled to REP_S: calibrating again
    cost each of the quick profile's 46 windows 0.1 s (docs/microbench.md). A config the sweep did
    not time (no repetitions, or none that took time) is left to the driver's calibration."""
    from types import SimpleNamespace

    from registry.profile import signatures

    def measured(key: str, passes: int, times: list[float]):
        return SimpleNamespace(config=SimpleNamespace(key=key), passes=passes, times=times)

    got = signatures.passes_for([measured("a", 1000, [0.021, 0.020, 0.019]), measured("b", 3, [0.5, 0.7, 0.6]),
                                 measured("c", 10, []), measured("d", 10, [0.0])])
    assert got == {"a": round(1000 * signatures.REP_S / 0.020), "b": 1}
