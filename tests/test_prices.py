"""Node prices (`nodes set`, `import prices`) and `match --objective cost --deadline --budget`.

The registry of tests/test_match.py: `fast` is predicted about 12.7 s, the base `b` 21 s, `one` about
36 s; prices make `one` the cheapest per run and `fast` the dearest.
"""

import json

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends

from registry.db import open_registry
from registry.report.load import resolve_trace
from registry.report.match import costs, latest_predictions, pareto_figure
from registry_data import three_node_registry

pytestmark = both_backends


@pytest.fixture
def registry(db_url):
    three_node_registry(db_url)


def _prices(db_url) -> list[tuple]:
    reg = open_registry(db_url)
    try:
        with reg.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(
                "SELECT node, price_per_hour, currency, current FROM v_node_prices ORDER BY node, valid_from"))]
    finally:
        reg.close()


def _csv(tmp_path, text: str):
    path = tmp_path / "prices.csv"
    path.write_text("node,price_per_hour,currency,source,date\n" + text)
    return path


def test_prices_are_kept_with_history_and_the_latest_date_counts(cli, db_url, registry, tmp_path):
    assert cli("nodes", "set", "fast", "--price-per-hour", "3.6", "--date", "2026-02-01").code == 0
    path = _csv(tmp_path, "fast,7.2,usd,list,2026-01-01\none,0.36,USD,list,2026-01-01\n")
    res = cli("import", "prices", str(path))
    assert res.code == 0, res.err
    assert cli("import", "prices", str(path)).out.strip().endswith("(0 new)")   # idempotent
    assert _prices(db_url) == [("fast", 7.2, "USD", False), ("fast", 3.6, "USD", True), ("one", 0.36, "USD", True)]


@pytest.mark.parametrize("rows, fragment", [
    ("fast,1,USD,l,2026-01-01\nghost,1,USD,l,2026-01-01\n", "line 4: unknown node 'ghost'"),
    ("fast,-1,USD,l,2026-01-01\n", "line 3: the price per hour must be a number >= 0"),
    ("fast,,USD,l,2026-01-01\n", "line 3: the price per hour is missing"),
    ("fast,1,dollars,l,2026-01-01\n", "line 3: the currency must be a 3-letter code"),
    ("fast,1,USD,l,01/02/2026\n", "line 3: the date must be YYYY-MM-DD"),
])
def test_a_bad_price_file_is_one_error_and_imports_nothing(cli, db_url, registry, tmp_path, rows, fragment):
    path = _csv(tmp_path, "one,1,USD,l,2026-01-01\n" + rows)
    assert_one_line_error(cli("import", "prices", str(path)), str(path), fragment)
    assert _prices(db_url) == []


def test_set_price_errors(cli, registry):
    assert_one_line_error(cli("nodes", "set", "ghost", "--price-per-hour", "1"), "unknown node 'ghost'")
    assert_one_line_error(cli("nodes", "set", "fast", "--price-per-hour", "-2"), "must be a number >= 0")
    assert_one_line_error(cli("nodes", "set", "fast"), "--price-per-hour")


def _match(cli, *args) -> dict:
    res = cli("match", "app", "--json", "--no-store", *args)
    assert res.code == 0, res.err
    return json.loads(res.out)


def test_cost_objective_ranks_by_price_times_time_with_its_interval(cli, registry, tmp_path):
    cli("import", "prices", str(_csv(tmp_path, "fast,3.6,USD,l,2026-01-01\nb,1.8,USD,l,2026-01-01\n"
                                               "one,0.36,USD,l,2026-01-01\n")))
    by_time = _match(cli)
    assert [p["node"] for p in by_time["predictions"]] == ["fast", "b", "one"]
    by_cost = _match(cli, "--objective", "cost")
    assert by_cost["objective"] == "cost"
    assert [p["node"] for p in by_cost["predictions"]] == ["one", "b", "fast"]
    for p in by_cost["predictions"]:
        price = {"fast": 3.6, "b": 1.8, "one": 0.36}[p["node"]]
        assert p["cost"] == pytest.approx(price * p["predicted_s"] / 3600)
        assert p["cost_low"] == pytest.approx(price * p["low_s"] / 3600) and p["currency"] == "USD"
    assert [p["rank"] for p in by_cost["predictions"]] == [1, 2, 3]


def test_deadline_and_budget_leave_nodes_out_and_say_so(cli, registry, tmp_path):
    cli("import", "prices", str(_csv(tmp_path, "fast,3.6,USD,l,2026-01-01\nb,1.8,USD,l,2026-01-01\n")))
    out = _match(cli, "--objective", "cost", "--deadline", "30")
    assert [p["node"] for p in out["predictions"]] == ["b", "fast"]
    assert {x["node"]: x["reason"] for x in out["excluded"]}["one"].startswith("predicted 3")
    out = _match(cli, "--budget", "0.011")      # b costs 0.0105 per run, fast 0.0127
    assert [p["node"] for p in out["predictions"]] == ["b"]
    reasons = {x["node"]: x["reason"] for x in out["excluded"]}
    assert "exceeds the budget" in reasons["fast"] and reasons["one"] == "no price"
    res = cli("match", "app", "--no-store", "--deadline", "15")
    assert res.code == 0 and "left out: one: predicted" in res.err and "left out: b:" in res.err


def test_mixed_currencies_are_refused_for_a_cost_ranking(cli, registry, tmp_path):
    cli("import", "prices", str(_csv(tmp_path, "fast,3.6,USD,l,2026-01-01\nb,1.8,EUR,l,2026-01-01\n")))
    assert_one_line_error(cli("match", "app", "--no-store", "--objective", "cost"), "several currencies",
                          "EUR on b", "USD on fast")
    assert _match(cli, "--objective", "cost", "--nodes", "b,one")["predictions"][0]["node"] == "b"
    assert_one_line_error(cli("match", "app", "--objective", "money"), "--objective must be one of time, cost")


def test_report_match_draws_the_time_cost_pareto_front(cli, db_url, registry, tmp_path):
    cli("import", "prices", str(_csv(tmp_path, "fast,3.6,USD,l,2026-01-01\nb,3.7,USD,l,2026-01-01\n"
                                               "one,0.36,USD,l,2026-01-01\n")))
    assert cli("match", "app").code == 0
    out = tmp_path / "m.html"
    res = cli("report", "match", "app", "--out", out)
    assert res.code == 0, res.err
    html = out.read_text()
    assert "Time and cost per run" in html and "cost per run (USD)" in html
    # b is slower than fast and dearer per run (3.7 x 21 s > 3.6 x 12.7 s): off the front
    assert "Pareto front (no node is both faster and cheaper): fast, one." in html
    reg = open_registry(db_url)
    with reg.connect() as conn:
        priced = costs(conn, latest_predictions(conn, resolve_trace(conn, "app")), "similarity")
    reg.close()
    assert priced.set_index("node")["pareto"].to_dict() == {"fast": True, "b": False, "one": True}
    png = tmp_path / "pareto.png"
    pareto_figure(priced, "similarity").savefig(png)
    assert png.stat().st_size > 10_000
