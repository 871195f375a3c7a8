"""The third-party plugin of tests/plugin_example, found through its entry point: the contract holds
from outside the nodereg package (listing, check_model, `scaling` and `match` with an option)."""

import json
import os

import pytest
from conftest import assert_one_line_error
from registry_data import profile_at_speeds, three_phase_trace

from registry.db import open_registry
from registry.models import check_model, plugins
from registry.trace import store

NAME = "powerlaw"


@pytest.fixture(autouse=True)
def installed():
    """Skip (fail where scripts/test.sh installed it) when the example plugin is not installed."""
    if NAME not in plugins.installed_names():
        message = ("the example model plugin is not installed: pip install -e tests/plugin_example "
                   "(bash scripts/test.sh does)")
        if os.environ.get("NODEREG_REQUIRE_PLUGIN_EXAMPLE"):
            pytest.fail(message)
        pytest.skip(message)


def test_found_through_its_entry_point_and_listed(cli):
    infos, _ = plugins.discover()
    info = next(i for i in infos if i.name == NAME)
    assert (info.kind, info.version, info.distribution) == ("scaling", "1.0.0", "nodereg-plugin-example")
    assert info.target == "nodereg_plugin_example:PowerLawModel"
    listed = json.loads(cli("models", "--json").out)
    assert NAME in {m["name"] for m in listed["models"]}
    shown = json.loads(cli("models", NAME, "--json").out)
    assert shown["options"] == [{"option": "max_exponent", "type": "float", "default": 1.0, "range": "[0, 2]",
                                 "help": "largest b (1: linear speed-up)"}]


def test_passes_check_model():
    report = check_model(plugins.model_class(NAME))
    assert "save/load predicts identically" in report.passed and not report.failed


def test_scaling_uses_it_with_an_option(cli):
    for n in (1, 2, 4, 8):
        assert cli("runs", "add", "--new", "app", "n1", "--threads", str(n), "--time", str(80.0 / n)).code == 0
    free = json.loads(cli("scaling", "app", "--node", "n1", "--model", NAME, "--predict", "16", "--json").out)
    capped = cli("scaling", "app", "--node", "n1", "--model", NAME, "--predict", "16", "--option",
                 "max_exponent=0.5", "--json", "--save")
    assert capped.code == 0, capped.err
    capped = json.loads(capped.out)
    assert free["predictions"][0]["predicted_s"] == pytest.approx(5.0)          # 80 / 16: b = 1
    assert capped["predictions"][0]["predicted_s"] > 2 * free["predictions"][0]["predicted_s"]
    assert free["warnings"] == [] and capped["saved_uid"]
    assert_one_line_error(cli("scaling", "app", "--node", "n1", "--model", NAME, "--option", "max_exponent=3"),
                          "model 'powerlaw' option max_exponent=3: out of range [0, 2]")


def test_match_combines_it_with_the_projection_with_an_option(cli, db_url):
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("quad", 4)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        store.save(conn, three_phase_trace())
    reg.close()
    for threads, time_s in ((1, 40.0), (2, 21.0)):   # the app on b: T ~ n^-0.93
        assert cli("runs", "add", "--new", "app", "b", "--threads", str(threads), "--time", str(time_s)).code == 0
    res = cli("match", "app", "--model", NAME, "--option", "max_exponent=0.5", "--json")
    assert res.code == 0, res.err
    out = json.loads(res.out)
    quad = next(p for p in out["predictions"] if p["node"] == "quad")
    # quad at 2 threads runs as b does (21 s); from 2 to its 4 CPUs the capped curve gives 2^-0.5
    assert out["model"] == f"{NAME}+similarity" and quad["threads"] == 4
    assert quad["predicted_s"] == pytest.approx(21.0 / 2**0.5, rel=0.02)
