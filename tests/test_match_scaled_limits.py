"""`match --model SCALING` says how far the app's curve is trusted, as `nodereg scaling` does.

The registry of tests/test_match.py (base `b`, 2 CPUs, the app traced there at 2 threads) with two
nodes of the base's speed: `quad` (4 CPUs, inside the runs' thread counts) and `wide` (24 CPUs, 3x
beyond the largest run, at 8 threads). Runs whose speed-up stops at 4 threads fail the backtest
(Amdahl fitted on 1, 2 and 4 threads, where the app scales perfectly, predicts half the time it took
at 8): the warning names it and `wide`'s interval widens on the high end by the miss, ln 2; runs on
Amdahl's law pass it and only the extrapolation is said.
"""

import json
import math

import pytest
from conftest import both_backends

from registry.db import open_registry
from registry_data import profile_at_speeds, three_node_registry

STOPS_AT_4 = {1: 42.0, 2: 21.0, 4: 10.5, 8: 10.5}           # 42 / n up to 4 threads, then no faster
AMDAHL = {n: 2.0 + 38.0 / n for n in (1, 2, 4, 8)}          # serial 2 s: any split predicts the rest exactly


@pytest.fixture
def registry(db_url):
    three_node_registry(db_url)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("quad", 4), ("wide", 24)):
            profile_at_speeds(conn, node, cpus, base=False)
    reg.close()


def _match(cli, runs: dict[int, float], model: str = "amdahl") -> tuple[dict, list[str]]:
    for threads, time_s in runs.items():
        assert cli("runs", "add", "--new", "app", "b", "--threads", str(threads), "--time", str(time_s)).code == 0
    res = cli("match", "app", "--model", model, "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    return {p["node"]: p for p in out["predictions"]}, out["warnings"]


def _step(pred: dict, words: str) -> int | None:
    return next((i for i, s in enumerate(pred["interval_steps"]) if words in s["step"]), None)


@both_backends
def test_a_failing_backtest_is_said_and_widens_the_extrapolated_intervals(cli, registry):
    pred, warnings = _match(cli, STOPS_AT_4)
    said = [w for w in warnings if "predicts 8 threads" in w]
    assert len(said) == 1 and said[0].startswith("amdahl on the runs on b: ") and "50% median error" in said[0]
    assert any("on wide (24) its curve is extrapolated more than 2x" in w for w in warnings)
    wide = pred["wide"]
    i = _step(wide, "amdahl backtest's miss at 8 threads (50%), on the high end")
    assert i is not None
    before, after, t = wide["interval_steps"][i - 1], wide["interval_steps"][i], wide["predicted_s"]
    # the miss is ln(10.5 / 5.25) = ln 2, added to the high end's log half-width by the root sum of squares
    assert math.log(after["high_s"] / t) == pytest.approx(math.hypot(math.log(before["high_s"] / t), math.log(2)))
    assert after["low_s"] == pytest.approx(before["low_s"])
    # quad's 4 threads lie inside the runs: its prediction does not rest on the extrapolation
    assert _step(pred["quad"], "backtest") is None and pred["quad"]["threads"] == 4


@pytest.mark.parametrize("runs", [AMDAHL, {1: 40.0, 2: 21.0}], ids=["fits", "too-few-to-backtest"])
def test_no_backtest_warning_where_the_curve_passes_or_cannot_be_backtested(cli, registry, runs):
    pred, warnings = _match(cli, runs)
    assert not any("median error" in w for w in warnings)
    assert _step(pred["wide"], "backtest") is None
    # far beyond the runs is said whatever the backtest found
    largest = max(runs)
    assert any(f"the app's runs on b reach {largest} threads; on wide (24) its curve is extrapolated" in w
               for w in warnings)


def test_downey_backtest_on_runs_whose_speed_up_stops(cli, registry):
    pred, warnings = _match(cli, STOPS_AT_4, model="downey")
    assert any(w.startswith("downey on the runs on b: ") and "predicts 8 threads" in w for w in warnings)
    wide = pred["wide"]
    i = _step(wide, "downey backtest's miss at 8 threads")
    assert i is not None and wide["interval_steps"][i]["high_s"] > wide["interval_steps"][i - 1]["high_s"]
