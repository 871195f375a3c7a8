"""Cachegrind signatures of the Spare Cores suite's tool configs (registry/profile/suite/cachegrind.py):
real stress-ng and `openssl speed` runs under valgrind, their steady-state instruction mix stored
with the suite profile, and `match` choosing among them for a phase traced with cachegrind.

Measured for real on this host: the branch stressor (jumps to random labels: mispredicted), the
memcpy one (copies: loads and stores, predicted branches) and openssl's sha256 over 16 KiB blocks
(arithmetic in registers: few branches and accesses). Two imported types with
figures made up so that each config's ratio names it; a traced branch stressor must then be
projected by the branch config's ratio.
"""

import json
import os
import shutil

import pytest
from conftest import assert_one_line_error

from registry.db import open_registry
from registry.inventory import collect
from registry.io.tracefile import Phase
from registry.measure import cachegrind as cg
from registry.profile.suite import cachegrind as suite_cachegrind
from registry.profile.suite import measure as suite_measure
from registry.profile.suite.plan import SuiteConfig
from registry.profile.suite.store import store_suite_profile
from registry.trace.tracer import _attach_cachegrind

NEEDS = ("valgrind", "stress-ng", "openssl")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in NEEDS),
                                reason=f"needs {', '.join(NEEDS)} (apt-get install -y {' '.join(NEEDS)})")

BRANCH = SuiteConfig("stressng", "branch", (), 1)
MEMCPY = SuiteConfig("stressng", "memcpy", (), 1, "bandwidth")
SHA = SuiteConfig("openssl", "sha256", (16384,), 0, "crypto")
SHA_1T = SuiteConfig("openssl", "sha256", (16384,), 1, "crypto")   # `-multi 1`: not upstream's, a reference here


@pytest.fixture(scope="module")
def measured():
    """The configs measured here with their cachegrind pass."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(suite_cachegrind, "WINDOWS_S", (1, 2))   # the mix, not a precise rate
        return suite_measure.measure("here", [BRANCH, MEMCPY, SHA_1T, SHA], collect(None), 1.0, True,
                                     cachegrind=True)


def test_the_mix_tells_a_branchy_stressor_from_a_copy_and_a_hash(measured):
    sig = {r.config.key: r.signature.get("cachegrind", {}) for r in measured.results}
    branch, memcpy, sha = sig[BRANCH.key], sig[MEMCPY.key], sig[SHA.key]
    assert branch and memcpy and sha, measured.notes
    # the branch stressor jumps to a random label each time: nearly every branch is mispredicted,
    # where the copy's loops and size checks are predicted (on this VM: 0.997 and 0.000)
    assert branch["branch_miss_rate"] > 0.5 > 10 * memcpy["branch_miss_rate"]
    # a copy writes what it reads, the jumps touch memory little (0.43 and 0.002 of the accesses)
    assert memcpy["write_share"] > 10 * branch["write_share"]
    assert memcpy["accesses_per_inst"] > 2 * branch["accesses_per_inst"]
    # sha256 works in registers over its block: few branches and accesses per instruction
    # (0.004 branches per instruction, against the branch stressor's 0.17 and memcpy's 0.19:
    # glibc's copy on short, varied sizes branches as often as the jump table does)
    assert min(branch["branches_per_inst"], memcpy["branches_per_inst"]) > 10 * sha["branches_per_inst"]
    assert sha["accesses_per_inst"] < branch["accesses_per_inst"] < memcpy["accesses_per_inst"]
    # the all-CPU config shares its instance's mix (measured once), and the counts are steady state
    assert sig[SHA_1T.key] == sha
    assert not measured.notes


def test_match_uses_a_traced_phase_cachegrind_signature(measured, cli, db_url):
    """`openssl speed` traced with --cachegrind-sample is projected by the one-thread sha256 config's
    ratio: its nearest reference by instruction mix, of three whose ratios on aws:x differ."""
    reg = open_registry(db_url)
    with reg.begin() as conn:
        store_suite_profile(conn, measured)
    reg.close()
    from test_suite_match import _imported  # the importer's rows for a made-up type
    here = {r.config.key: r.value for r in measured.results}
    reg = open_registry(db_url)
    with reg.begin() as conn:
        # on aws:x the branch stressor is 3x as fast as here, the copy as fast, the hash 1.5x
        figures = {(BRANCH.key.removesuffix(":1t"), 1): 3 * here[BRANCH.key],
                   (MEMCPY.key.removesuffix(":1t"), 1): here[MEMCPY.key],
                   (SHA_1T.key.removesuffix(":1t"), 1): 1.5 * here[SHA_1T.key]}
        _imported(conn, "aws:x", 2, figures, model="Test CPU 9000")
    reg.close()
    res = cli("trace", "--name", "hashing", "--node", "here", "--no-omp", "--cachegrind-sample", "5", "--json",
              "--", "openssl", "speed", "-seconds", "2", "-bytes", "16384", "-evp", "sha256")
    assert res.code == 0, res.err
    traced = json.loads(res.out)
    assert "cachegrind" in traced["sources"]
    # the shipped prior weights alone: with two references on one node, the weights the model would
    # learn from their ratios say little
    res = cli("match", "hashing", "--suite", "sparecores", "--json", "--no-store", "--option", "k=1",
              "--option", "shrink=0", "--option", "relevance_power=0")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    busy = max(out["phases"], key=lambda p: p["time_s"])
    assert busy["matches"][0]["config"] == SHA_1T.key.removesuffix(":1t"), (
        busy["matches"], [p["signature"] for p in traced["phases"]], {r.config.key: r.signature for r in measured.results})
    x = next(p for p in out["predictions"] if p["node"] == "aws:x")
    assert x["predicted_s"] == pytest.approx(out["base_time_s"] / 1.5, rel=0.1), out


def test_without_valgrind_the_suite_cachegrind_pass_is_one_clear_error(cli, tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("stress-ng", "openssl"):
        os.symlink(shutil.which(name), tools / name)
    monkeypatch.setenv("PATH", str(tools))
    assert_one_line_error(cli("profile", "here", "--suite", "sparecores", "--kernels", "stressngfull", "--quick",
                              "--cachegrind"), "valgrind")
    assert cg.available() is False


def test_a_dominant_phase_gets_the_whole_program_mix():
    """A one-thread program's loop after a short start-up segment is what a cachegrind pass counts:
    it gets the whole-program metrics; two phases of equal length share no whole-program mix."""
    counts = {"Ir": 1000.0, "Dr": 300.0, "Dw": 100.0, "Bc": 150.0, "Bcm": 15.0, "Bi": 0.0, "Bim": 0.0}
    stats = cg.CachegrindStats(total=dict(counts), functions={"main": dict(counts)})

    def phases(*bounds):
        return [Phase(f"segment {i}", "auto", a, b, 0.5, b - a) for i, (a, b) in enumerate(bounds, 1)]

    startup_then_loop = phases((0.0, 0.3), (0.3, 3.0))
    _attach_cachegrind(startup_then_loop, stats)
    assert "cachegrind" not in startup_then_loop[0].signature
    assert startup_then_loop[1].signature["cachegrind"]["branches_per_inst"] == pytest.approx(0.15)
    halves = phases((0.0, 1.5), (1.5, 3.0))
    _attach_cachegrind(halves, stats)
    assert not any("cachegrind" in p.signature for p in halves)
