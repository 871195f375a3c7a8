"""Limits said out loud (issue 28, item 4): a thread count between two measured ones is interpolated,
not snapped down; one beyond the profile, or far beyond what the app was traced with, is warned about
and gets a wider interval; a phase of unknown CPU use is said to be taken as fully parallel."""

import json

import sqlalchemy as sa

from conftest import both_backends

from registry.db import open_registry
from registry_data import profile_at_speeds, three_node_registry


def _registry(db_url) -> None:
    """The match registry and `quad` (4 CPUs of the base's speed) measured at 1, 2 and 4 threads only."""
    three_node_registry(db_url)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        profile_at_speeds(conn, "quad", 4, base=False)
        conn.execute(sa.text("DELETE FROM profile_runs WHERE config_id IN (SELECT config_id FROM ub_configs "
                             "WHERE threads = 3 AND config_key LIKE 'quad:%')"))
    reg.close()


def _quad(cli, db_url, cpus: int) -> tuple[dict, list[str]]:
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text("UPDATE nodes SET n_cpus = :n WHERE name = 'quad'"), {"n": cpus})
    reg.close()
    res = cli("match", "app", "--json", "--no-store")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    return next(p for p in doc["predictions"] if p["node"] == "quad"), doc["warnings"]


def test_a_thread_count_between_two_measured_is_interpolated(cli, db_url):
    _registry(db_url)
    two, _ = _quad(cli, db_url, 2)
    four, _ = _quad(cli, db_url, 4)
    three, warnings = _quad(cli, db_url, 3)
    assert four["predicted_s"] < three["predicted_s"] < two["predicted_s"] - 0.5   # snapping gave `two`
    assert three["threads"] == 3
    assert not any("more threads than the profiles measured" in w for w in warnings)


def test_beyond_the_measured_threads_and_the_traced_ones_is_said(cli, db_url):
    _registry(db_url)
    four, _ = _quad(cli, db_url, 4)
    eight, warnings = _quad(cli, db_url, 8)
    assert eight["predicted_s"] == four["predicted_s"]           # projected at the 4 measured threads ...
    assert eight["low_s"] < four["low_s"]                        # ... with room for the 4 more
    assert any("more threads than the profiles measured on quad (8 threads, measured up to 4)" in w for w in warnings)
    assert any("traced with 2 threads; on quad (8)" in w for w in warnings)


def test_a_phase_of_unknown_cpu_use_is_said_to_be_taken_as_parallel(cli, db_url):
    from registry.db import utcnow
    from registry.io.tracefile import Phase, Trace

    unknown = Trace(name="app", node="b", host="h", command=["app"], exit_status=0, status="ok", wall_s=5.0,
                    interval_s=0.1, started_at=utcnow().isoformat(), sources=["proc"],
                    phases=[Phase("blink", "auto", 0.0, 5.0, 1.0, 5.0, signature={"proc": {"wss_llc": 0.01}})])
    three_node_registry(db_url, unknown)
    doc = json.loads(cli("match", "app", "--json", "--no-store").out)
    assert any("phase blink: its CPU use is unknown" in w for w in doc["warnings"])


def _sized_trace(name: str, memory_mb: float | None):
    """three_phase_trace under `name`, its memory phase's working set `memory_mb` (None: not read)."""
    from registry_data import three_phase_trace

    trace = three_phase_trace()
    trace.name = name
    if memory_mb is not None:
        trace.phases[1].signature["proc"]["wss_mb"] = memory_mb
        trace.phases[0].signature["proc"]["wss_mb"] = 1.0
    return trace


@both_backends
def test_working_sets_beyond_the_profile_or_across_a_cache_are_said_and_widen(cli, db_url):
    """The base's largest config is 64 MiB and every node's last-level cache 32 MiB, but `fast`'s is
    256 MiB: a 100 MiB memory phase is beyond what the base measured (every node widened) and would
    fit fast's caches (fast widened, named); `one`'s caches are the base's (not named)."""
    from registry.trace import store

    three_node_registry(db_url, _sized_trace("app", 100.0))
    reg = open_registry(db_url)
    with reg.begin() as conn:
        store.save(conn, _sized_trace("plain", None))
        conn.execute(sa.text("UPDATE ub_configs SET ws_bytes = 67108864 WHERE config_key LIKE 'b:%'"))
        conn.execute(sa.text("UPDATE node_caches SET size_bytes = 268435456 WHERE level = 3 AND node_id = "
                             "(SELECT node_id FROM nodes WHERE name = 'fast')"))
    reg.close()

    def match(app):
        res = cli("match", app, "--json", "--no-store")
        assert res.code == 0, res.err
        doc = json.loads(res.out)
        return {p["node"]: p["high_s"] / p["low_s"] for p in doc["predictions"]}, doc["warnings"]

    sized, warnings = match("app")
    plain, plain_warnings = match("plain")
    assert not any("working set" in w for w in plain_warnings)
    assert any(w.startswith("b: phase memory's working set (100 MiB) is larger than any config its profile "
                            "measured (64 MiB)") for w in warnings), warnings
    crossing = [w for w in warnings if "would fit the last-level caches" in w]
    assert len(crossing) == 1 and crossing[0].startswith("fast: phase memory's") and "one" not in crossing[0]
    assert sized["fast"] > plain["fast"] * 1.2 and sized["one"] > plain["one"] * 1.1
    assert sized["fast"] / plain["fast"] > sized["one"] / plain["one"]
