"""inventory, sql and nodes commands: success and error paths."""

import json

from conftest import assert_one_line_error, both_backends
from registry_data import populate

from registry.db import open_registry


def _populated(db_url, **kw):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        ids = populate(conn, **kw)
    reg.close()
    return ids


def test_inventory_json_has_model_and_count(cli):
    res = cli("inventory", "--json")
    assert res.code == 0, res.err
    inv = json.loads(res.out)
    assert inv["cpu_model"] and inv["cpu_count"] >= 1
    assert any(c["level"] == 1 for c in inv["caches"])
    one = json.loads(cli("inventory", "--json", "--cpus", "0").out)
    assert one["cpu_count"] == 1 and one["cpus"] == [0]


def test_inventory_table_and_bad_cpus(cli):
    res = cli("inventory")
    assert res.code == 0 and "CPU model" in res.out
    assert_one_line_error(cli("inventory", "--cpus", "x-y"), "malformed CPU list")
    assert_one_line_error(cli("inventory", "--cpus", "4096"), "not online")


@both_backends
def test_sql_formats(cli, sql_reader, db_url):
    _populated(db_url)
    csv = cli("sql", "SELECT name, n_cpus FROM nodes ORDER BY name", "--format", "csv")
    assert csv.code == 0
    assert csv.out.splitlines() == ["name,n_cpus", "n1,2"]
    js = json.loads(cli("sql", "SELECT node, ub, tpi_us FROM v_profile ORDER BY tpi_us", "-f", "json").out)
    assert [r["ub"] for r in js] == ["mbw1c", "mbw1c"] and js[0]["node"] == "n1"
    table = cli("sql", "SELECT app, node, runs FROM v_runs")
    assert table.code == 0 and "app1" in table.out
    assert cli("sql", "SELECT '12:30' AS t", "-f", "csv").out.splitlines()[1] == "12:30"


@both_backends
def test_nodes_list_show_rm(cli, sql_reader, db_url):
    _populated(db_url, node="n1")
    _populated(db_url, node="n2", app="app2")
    listing = json.loads(cli("nodes", "--json").out)
    assert [n["name"] for n in listing] == ["n1", "n2"]
    assert listing[0]["profiles"] == 1 and listing[0]["measured_runs"] == 3
    show = json.loads(cli("nodes", "show", "n1", "--json").out)
    assert show["inventory"]["cpu_model"] == "Test CPU 9000" and len(show["caches"]) == 3
    assert show["traces"] == 1 and len(show["profiles"]) == 1
    assert "node n1" in cli("nodes", "show", "n1").out
    assert_one_line_error(cli("nodes", "show", "zz"), "unknown node 'zz'", "n1")
    assert_one_line_error(cli("nodes", "rm", "n1"), "--yes")
    assert cli("nodes", "rm", "n1", "--yes").code == 0
    assert [n["name"] for n in json.loads(cli("nodes", "--json").out)] == ["n2"]
    left = json.loads(cli("sql", "SELECT (SELECT count(*) FROM profile_reps) AS reps, "
                                 "(SELECT count(*) FROM signatures) AS sigs, "
                                 "(SELECT count(*) FROM trace_samples) AS samples", "-f", "json").out)[0]
    assert left == {"reps": 6, "sigs": 4, "samples": 10}  # exactly n2's rows remain
    assert_one_line_error(cli("nodes", "rm", "n1", "--yes"), "unknown node")


@both_backends
def test_empty_registry_listing(cli):
    assert cli("init").code == 0
    res = cli("nodes")
    assert res.code == 0 and "no nodes" in res.err
