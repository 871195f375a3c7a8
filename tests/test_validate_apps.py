"""scripts/validate_apps.py, the parts that need no benchmark: node variants from a CPU topology, program commands."""

import os
import sys
from pathlib import Path

import pytest
from script_module import script_module

from registry.profile.placement import Cpu


@pytest.fixture(scope="module")
def script():
    with script_module("validate_apps") as module:
        yield module


def test_variants_cover_sizes_placements_and_smt(script, monkeypatch):
    """Two sockets of two cores with two SMT siblings each (CPU n and n + 4 share a core)."""
    topology = [Cpu(c, package=(c % 4) // 2, core=c % 2, llc=0 if c % 4 < 2 else 2) for c in range(8)]
    monkeypatch.setattr(script.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(script, "read_topology", lambda cpus: [t for t in topology if t.cpu in cpus])
    found = {v.name: v.cpus for v in script.variants("val")}
    assert found == {"val-1c": (0,), "val-2c": (0, 1), "val-2c-scatter": (0, 2), "val-4c": (0, 1, 2, 3),
                     "val-8c": tuple(range(8)), "val-2c-smt": (0, 4)}


def test_programs_run_directly_with_a_fixed_worker_count(script, tmp_path):
    xz = script.program("xz", tmp_path, 4, tmp_path / "none.tar.gz")
    assert xz.argv[:2] == ["xz", "-T4"] and Path(xz.argv[-1]).stat().st_size == script.INPUT_MB * 2**20
    with pytest.raises(RuntimeError, match="no NPB archive"):
        script.program("cg.A", tmp_path, 4, tmp_path / "none.tar.gz")
    with pytest.raises(ValueError, match="unknown program 'nope'"):
        script.program("nope", tmp_path, 4, tmp_path / "none.tar.gz")


def test_short_programs_get_more_repetitions(script):
    """At least --repeat; more for a short program, so that one node's runs add up to MEASURED_S,
    up to MAX_REPEAT."""
    assert script.repetitions(3, 9.0) == 3                                 # NPB EP.A
    assert script.repetitions(3, 1.12) == 8                                # NPB BT.W: 8 x 1.12 s >= 8 s
    assert script.repetitions(3, 0.55) == script.repetitions(3, 0.0) == script.MAX_REPEAT
    assert script.repetitions(5, 2.0) == 5


def test_runs_are_interleaved_before_match(script, monkeypatch, tmp_path):
    """Trace, then the runs, one per variant in turn (the base first), so that a drift of the machine's
    speed moves every variant alike, then match (which starts from the base runs' median). A program
    of a fixed team (xz -T2) is traced and run with nodereg told the team; match needs no telling."""
    calls, teams = [], []

    def nodereg(db, *args, quiet=True, team=None):
        calls.append(args[0] if args[0] != "run" else f"run {args[1]} x{args[args.index('--repeat') + 1]}")
        teams.append(team)
        return script.subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(script, "nodereg", nodereg)
    monkeypatch.setattr(script, "read_trace", lambda path: type("T", (), {"wall_s": 2.0, "meta": {"uid": "u1"}})())
    base, other = script.Variant("val-2c", (0, 1)), script.Variant("val-1c", (0,))
    args = type("A", (), {"timeout": 60.0, "model": "similarity", "repeat": 3, "measured_s": script.MEASURED_S})()
    uid = script.validate(script.Program("p", ["p"]), "duckdb://", base, [other, base], tmp_path, args)
    assert uid == "u1" and calls == ["trace", *["run val-2c x1", "run val-1c x1"] * 4, "match"]
    assert set(teams) == {None}
    calls.clear()
    teams.clear()
    xz = script.program("xz", tmp_path, 2, tmp_path / "npb.tar.gz")
    assert xz.team == 2 and "-T2" in xz.argv
    script.validate(xz, "duckdb://", base, [other, base], tmp_path, args)
    assert teams == [2] * (len(calls) - 1) + [None] and calls[-1] == "match"


def test_a_fixed_team_is_told_to_nodereg_by_omp_num_threads(script, monkeypatch):
    """`nodereg(..., team=2)` runs nodereg with OMP_NUM_THREADS=2 (how `trace` and `run` learn a fixed
    team, registry/measure/onnode.py), and without a team leaves the environment as it is."""
    seen = []
    monkeypatch.setattr(script.subprocess, "run", lambda argv, **kw: seen.append(kw.get("env")))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    script.nodereg("duckdb://", "trace", "--", "xz", team=2)
    script.nodereg("duckdb://", "match", "u1")
    assert seen[0]["OMP_NUM_THREADS"] == "2" and seen[0]["PATH"] == os.environ["PATH"] and seen[1] is None


def test_coverage_rounds_calibrate_on_the_rounds_before(script):
    """scripts/coverage_repeat.py: round 2's conformal coverage scales its own half-widths by the
    80% quantile of round 1's scores, never by its own."""
    # round 1: outcomes 0.5, 1.0, 1.5, 2.0 half-widths out (+-10% intervals); round 2: 1.2 and 2.5 out
    cells = [{"round": r, "score": s} for r, s in ((1, 0.5), (1, 1.0), (1, 1.5), (1, 2.0), (2, 1.2), (2, 2.5))]
    with script_module("coverage_repeat") as cov:
        coverage, based_on, scale = cov.conformal_coverage(cells, 2)
        assert (based_on, scale) == (4, 2.0) and coverage == 0.5        # 1.2 inside x2.0, 2.5 outside
        assert cov.conformal_coverage(cells, 1)[0] is None               # nothing earlier to calibrate on


def test_coverage_rounds_report_the_validation_targets(script):
    """scripts/coverage_repeat.py: each round's median |error| and its worst signed error, in %,
    as registry/accuracy.py defines the error ((predicted - measured) / measured)."""
    def cell(rnd, predicted, measured):
        return {"round": rnd, "predicted_s": predicted, "measured_s": measured, "low_s": predicted / 2,
                "high_s": predicted * 2, "covered": True, "covered_without_caveats": True, "caveat_factor": 1.0,
                "scale": 1.0, "score": 0.5}

    cells = [cell(1, 1.1, 1.0), cell(1, 0.7, 1.0), cell(1, 1.05, 1.0), cell(2, 2.0, 2.0)]
    with script_module("coverage_repeat") as cov:
        first, second = cov.summary(cells, 2)
        assert first["median_error_pct"] == pytest.approx(10.0) and first["worst_error_pct"] == pytest.approx(-30.0)
        assert second["median_error_pct"] == 0.0 and second["worst_error_pct"] == 0.0


def test_an_unknown_model_stops_the_suites_before_any_work(script, monkeypatch, tmp_path):
    """validate_apps.py and coverage_repeat.py check `--model` before profiling anything (a lent
    machine once spent its suite's time on profiles and runs whose every `match` then failed)."""
    assert script.unusable_model("similarity") is None
    assert "unknown model 'no-such-model'" in script.unusable_model("no-such-model")
    db = tmp_path / "r.duckdb"
    monkeypatch.setattr(script, "nodereg", lambda *a, **k: pytest.fail("no nodereg command may run"))
    monkeypatch.setattr(sys, "argv", ["validate_apps.py", "--model", "no-such-model", "--db", f"duckdb:///{db}"])
    assert script.main() == 2
    with script_module("coverage_repeat") as cov:
        monkeypatch.setattr(cov.va, "nodereg", lambda *a, **k: pytest.fail("no nodereg command may run"))
        monkeypatch.setattr(sys, "argv", ["coverage_repeat.py", "--model", "no-such-model", "--db", f"duckdb:///{db}"])
        assert cov.main() == 2
    assert not db.exists()
