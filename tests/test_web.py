"""`nodereg serve` in-process (Starlette's TestClient), on both backends: every page, the escaping
of hostile names, exports and the JSON API, facets and sorting, 4xx pages for bad parameters, the
SQL box's read-only path with its time limit and row cap, and snapshots while a writer holds the
DuckDB file."""

import csv
import io
import json
import re
import subprocess
import sys
from urllib.parse import urlencode

import pytest
from conftest import both_backends, set_up_reader
from web_data import APP, IMPORTED, LONG, SCRIPT, build

from registry.web import views

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


@pytest.fixture
def site(db_url):
    from fastapi.testclient import TestClient

    from registry.web.app import create_app

    info = build(db_url)
    set_up_reader(db_url)
    app = create_app(db_url, lock_wait_s=0.3)
    with TestClient(app, raise_server_exceptions=False) as client:
        client.info = info
        yield client
    app.state.source.close()


def page(client, path: str, status: int = 200, **params) -> str:
    res = client.get(path + ("?" + urlencode(params, doseq=True) if params else ""))
    assert res.status_code == status, (path, params, res.text[:500])
    assert "Traceback" not in res.text
    return res.text


@both_backends
def test_every_page_renders_hostile_names_as_text(site):
    uid = site.info["hostile_trace"]["uid"]
    pages = [("/", {}), ("/nodes", {}), ("/nodes", {"per": 500}), ("/node", {"name": SCRIPT}),
             ("/node", {"name": "cn[01-04]"}), ("/node", {"name": LONG}), ("/node", {"name": "aws/c7g.large"}),
             ("/compare", {"node": [SCRIPT, "cn[01-04]", "alpha"]}), ("/apps", {}), ("/app", {"name": APP}),
             ("/trace", {"uid": uid}), ("/predictions", {"app": APP}), ("/predictions", {"app": "solver"}),
             ("/accuracy", {}), ("/sql", {"q": "SELECT name FROM nodes"}), ("/api", {})]
    for path, params in pages:
        html = page(site, path, **params)
        assert SCRIPT not in html and APP not in html, path     # never as markup, not even inside chart JSON
        assert not EXTERNAL.search(html), (path, EXTERNAL.search(html))   # nothing fetched from elsewhere
    node = page(site, "/node", name=SCRIPT)
    assert f"<h1 class=\"name\">{ESCAPED}</h1>" in node
    assert 'id="fig-bandwidth' in node and 'id="chart-roofline"' in node and 'id="chart-latency"' in node
    prices = json.loads(re.search(r'id="fig-prices">(.*?)</script>', node, re.S).group(1))["data"]
    assert [(t["name"], t["y"]) for t in prices] == [("USD", [pytest.approx(0.33), 0.3])]   # 2 prices, in order
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" not in node or "&amp;lt;" not in node
    listing = page(site, "/nodes", per=500)
    assert ESCAPED in listing and "cn[01-04]" in listing and LONG in listing
    assert f'value="{ESCAPED}"' in listing            # the compare checkbox's attribute
    assert "quote&#34;&#39;s &amp; &lt;b&gt;node&lt;/b&gt;" in listing
    trace = page(site, "/trace", uid=uid)
    assert "read input" in trace and "memory sweep" in trace
    # chart labels: entity-escaped for plotly, JSON-escaped for the page
    figure = json.loads(re.search(r'<script type="application/json" id="fig-intervals">(.*?)</script>',
                                  page(site, "/predictions", app=APP), re.S).group(1))
    assert ESCAPED in figure["data"][0]["y"]


@both_backends
def test_api_and_exports_hold_the_exact_values(site):
    nodes = site.get("/api/nodes", params={"per": 500}).json()["tables"]["nodes"]["rows"]
    names = {r["name"] for r in nodes}
    assert {SCRIPT, "cn[01-04]", LONG, "alpha", "aws/c7g.large"} <= names
    # the table's headline figures are v_nodes' (computed another way, for 10,000 types at once)
    view = site.get("/api/sql", params={"q": "SELECT name, memory_triad_gbs, fp64_gflops FROM v_nodes"}).json()
    expected = {r["c0"]: (r["c1"], r["c2"]) for r in view["tables"]["sql"]["rows"]}
    got = {r["name"]: (r["memory_gbs"], r["fp64_gflops"]) for r in nodes}
    assert got.keys() == expected.keys() and sum(v[0] is not None for v in got.values()) == 7
    for name, (bw, fp) in got.items():
        assert (bw, fp) == (pytest.approx(expected[name][0]), pytest.approx(expected[name][1])), name
    fig = "othersuite openssl sha256 16KiB"
    res = site.get("/nodes.csv", params={"vendor": "aws", "fig": fig, "sort": "-fig0"})
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(res.text)))
    assert [r["node type"] for r in rows] == ["aws/c7i.large", "aws/c7g.large"]   # by the figure, descending
    per_usd = {r["node type"]: float(r[f"{fig} per $/h (MB/s per USD/h)"]) for r in rows}
    expected = {f"{v}/{n}": value / price for v, n, *_, price, value in IMPORTED if v == "aws"}
    assert per_usd == pytest.approx(expected)
    assert rows[0][f"{fig} (MB/s)"] == "36000.0"
    compare = site.get("/compare.json", params={"node": ["alpha", "gamma"], "base": "alpha"}).json()
    rel = {(r[0], r[2]): r[4] for r in (list(x.values()) for x in compare["rows"])}
    assert rel[("vCPUs", "alpha")] == 1.0 and rel[("vCPUs", "gamma")] == pytest.approx(2.0)  # 8 vs 4 CPUs
    preds = site.get("/predictions.csv", params={"app": APP, "sort": "cost"}).text
    assert SCRIPT in preds and len(preds.strip().splitlines()) == 5     # whole, not paged: 4 nodes + header
    spec = site.get("/openapi.json").json()
    assert {"/api/nodes", "/api/node", "/api/compare", "/api/predictions", "/api/sql", "/nodes.{fmt}"} <= \
        set(spec["paths"])
    # spreadsheet formulas in names are neutralised in CSV
    assert all(not line.startswith(("=", "+", "@")) for line in preds.splitlines())


@both_backends
def test_facets_filters_sort_and_paging(site):
    api = site.get("/api/nodes", params={"per": 3, "sort": "-memory_gbs"}).json()
    facets = {f["key"]: {o["value"]: o["count"] for o in f["options"]} for f in api["facets"]}
    assert facets["vendor"] == {"(none)": 7, "aws": 2, "gcp": 1}
    assert facets["architecture"]["aarch64"] == 1
    rows = api["tables"]["nodes"]["rows"]
    assert len(rows) == 3 and api["pages"] == 4 and api["tables"]["nodes"]["total"] == 10
    bw = [r["memory_gbs"] for r in rows]
    assert bw == sorted(bw, reverse=True) and bw[0] is not None
    # a facet's counts ignore its own choice (so the other values stay choosable)
    aws = site.get("/api/nodes", params={"vendor": "aws"}).json()
    assert {o["value"]: o["count"] for o in aws["facets"][0]["options"]}["gcp"] == 1
    assert aws["tables"]["nodes"]["total"] == 2
    none = site.get("/api/nodes", params={"vendor": "(none)", "vcpus_min": 4, "priced": "true"}).json()
    assert {r["name"] for r in none["tables"]["nodes"]["rows"]} == {"alpha", "gamma", "cn[01-04]"}  # LONG: no price
    assert site.get("/api/nodes", params={"q": "CN[01"}).json()["tables"]["nodes"]["total"] == 1


@both_backends
def test_bad_parameters_are_4xx_pages(site):
    for path, params, status in [("/node", {"name": "nope"}, 404), ("/node", {}, 400), ("/nodes", {"sort": "x"}, 400),
                                 ("/nodes", {"page": "two"}, 400), ("/nodes", {"page": 99}, 400),
                                 ("/nodes", {"per": 100000}, 400),
                                 ("/nodes", {"vcpus_min": "lots"}, 400), ("/nodes", {"mem_max": "nan"}, 400), ("/nodes", {"cols": "password"}, 400),
                                 ("/nodes", {"fig": "no such config"}, 400), ("/compare", {"node": "alpha"}, 400),
                                 ("/compare", {"node": ["alpha", "beta"], "base": "gamma"}, 400),
                                 ("/compare", {"node": ["alpha", SCRIPT + "x"]}, 404),
                                 ("/predictions", {"app": "nope"}, 404), ("/predictions", {"app": "solver",
                                                                                          "model": "x"}, 400),
                                 ("/trace", {"uid": "../../etc"}, 400), ("/nodes.xml", {}, 400),
                                 ("/node.csv", {"name": "alpha", "table": "secrets"}, 400),
                                 ("/sql", {"q": "SELECT 1", "x": "nope", "y": "1"}, 400), ("/no/such/page", {}, 404)]:
        html = page(site, path, status, **params)
        assert 'class="error"' in html or '"error"' in html, (path, html[:300])
    html = page(site, "/node", 404, name=SCRIPT + "?")
    assert ESCAPED in html and SCRIPT not in html          # the error line names it, escaped
    assert site.get("/api/node", params={"name": "nope"}).json()["error"].startswith("no node type named")


@both_backends
def test_sql_box_is_read_only_with_a_time_limit_and_a_row_cap(site, db_url, monkeypatch, tmp_path):
    for q in (f"COPY nodes TO '{tmp_path / 'x.csv'}'", "DELETE FROM nodes", "CREATE TABLE t (a int)",
              "SELECT 1; SELECT 2"):
        assert "error" in site.get("/api/sql", params={"q": q}).json(), q
        assert not (tmp_path / "x.csv").exists()
    ok = site.get("/api/sql", params={"q": "SELECT name FROM nodes WHERE name = 'alpha'"}).json()
    assert ok["tables"]["sql"]["rows"] == [{"c0": "alpha"}]
    series = "range(25000) t(i)" if db_url.startswith("duckdb") else "generate_series(1, 25000) t(i)"
    capped = site.get("/api/sql", params={"q": f"SELECT i FROM {series}"}).json()
    assert capped["capped"] == views.SQL_ROW_CAP and len(capped["tables"]["sql"]["rows"]) == views.SQL_ROW_CAP
    whole = site.get("/sql.csv", params={"q": f"SELECT i FROM {series}"}).text
    assert len(whole.strip().splitlines()) == 25001        # exports are not capped
    monkeypatch.setattr(views, "SQL_TIME_LIMIT_S", 0.5)
    slow = ("SELECT count(*) FROM range(200000) a, range(200000) b WHERE a.range * b.range = 7"
            if db_url.startswith("duckdb") else "SELECT 1 AS slept FROM pg_sleep(5)")
    err = site.get("/api/sql", params={"q": slow}).json()["error"]
    assert "time limit" in err
    chart = page(site, "/sql", q="SELECT name, n_cpus FROM nodes ORDER BY name", x="name", y="n_cpus", kind="bar")
    assert 'id="fig-result"' in chart


def test_snapshot_while_a_writer_holds_the_file(site, db_url, tmp_path):
    path = db_url.removeprefix("duckdb:///")
    fresh = page(site, "/nodes")
    assert "A writer holds the registry" not in fresh
    hold = ("import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "c.execute(\"UPDATE nodes SET cpu_model = 'changed' WHERE name = 'alpha'\"); "
            "print('locked', flush=True); time.sleep(30)")
    holder = subprocess.Popen([sys.executable, "-c", hold, path], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        stale = page(site, "/nodes")
        assert "A writer holds the registry" in stale and "in use by another process" in stale
        assert "alpha" in stale                                           # the snapshot's rows
        res = site.get("/accuracy")                                       # never seen: no snapshot
        assert res.status_code == 503 and res.headers["retry-after"] == "2"
    finally:
        holder.kill()
        holder.wait()
    assert "A writer holds the registry" not in page(site, "/nodes")


def test_serve_command_errors_are_one_line(cli, db_url):
    import socket

    from conftest import assert_one_line_error

    assert cli("init").code == 0      # serve reads: it creates no registry (#30)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_one_line_error(cli("serve", "--port", port), f"cannot listen on 127.0.0.1:{port}", "in use")
    assert_one_line_error(cli("--db", "duckdb:////nonexistent-dir/x.duckdb", "serve"), "there is no registry")
    assert_one_line_error(cli("serve", "--host", "no-such-host.invalid"), "cannot listen on no-such-host.invalid")


def test_links_carry_the_reverse_proxy_prefix(db_url):
    from fastapi.testclient import TestClient

    from registry.web.app import create_app

    build(db_url)
    app = create_app(db_url)
    with TestClient(app, root_path="/nodereg") as client:    # the server's setting (`serve --root-path`)
        html = client.get("/nodes").text           # the proxy strips the prefix before passing the request on
    app.state.source.close()
    links = re.findall(r'(?:href|src|action)="([^"]*)"', html)
    assert links and all(link.startswith(("/nodereg/", "?")) for link in links), links[:10]
    assert "/nodereg/static/style.css" in links and "/nodereg/nodes.csv" in " ".join(links)


def test_an_empty_registry_renders(cli, db_url):
    from fastapi.testclient import TestClient

    from registry.web.app import create_app

    assert cli("init").code == 0
    app = create_app(db_url)
    with TestClient(app) as client:
        for path in ("/", "/nodes", "/apps", "/accuracy", "/sql", "/nodes.csv"):
            res = client.get(path)
            assert res.status_code == 200 and "Traceback" not in res.text, path
        assert client.get("/api/nodes").json()["tables"]["nodes"]["total"] == 0
        assert "no stored predictions" in client.get("/accuracy").text
    app.state.source.close()
