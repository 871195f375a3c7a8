"""The web pages in a real browser: Debian's Chromium, headless, driven by Playwright (never
`playwright install`: the system browser). Loads every page, clicks a sort, a facet filter, a
compare and an export, and checks what a person would see: rows, drawn charts, hostile names as
text, no script run from data. With NODEREG_SCREENSHOTS=DIR it saves the main pages there (the
screenshots in docs/img/ come from this test)."""

import csv
import io
import os
from pathlib import Path
from urllib.parse import urlencode

import pytest
from web_data import APP, SCRIPT, build
from web_server import serving

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        if os.environ.get("NODEREG_REQUIRE_BROWSER"):
            pytest.fail(f"NODEREG_REQUIRE_BROWSER is set but {CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"no {CHROMIUM}: apt-get install chromium (as .ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1500, "height": 1000}, accept_downloads=True)
        yield context
        context.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    url = f"duckdb:///{tmp_path_factory.mktemp('web') / 'registry.duckdb'}"
    build(url)
    with serving(url) as base:
        yield base


@pytest.fixture
def tab(browser):
    page = browser.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    assert page.dialogs == [], "a script from the data ran"
    assert page.errors == [], page.errors
    page.close()


def body_rows(page, table: str):
    return page.locator(f'table[data-table="{table}"] tbody tr')


def plots(page) -> int:
    """Charts plotly.js has drawn (an SVG with at least one trace)."""
    page.wait_for_function("[...document.querySelectorAll('div.chart')].every("
                           "d => d.classList.contains('js-plotly-plot') && d.querySelector('svg.main-svg'))")
    return page.locator("div.chart.js-plotly-plot").count()


def test_every_page_loads_and_draws(tab, site):
    for path, params, charts in [("/", {}, 0), ("/nodes", {}, 0), ("/node", {"name": "alpha"}, 5),
                                 ("/compare", {"node": ["alpha", "gamma"]}, 3), ("/apps", {}, 0),
                                 ("/app", {"name": "solver"}, 0), ("/predictions", {"app": "solver"}, 1),
                                 ("/accuracy", {}, 1), ("/sql", {"q": "SELECT name, n_cpus FROM nodes", "x": "name",
                                                                 "y": "n_cpus", "kind": "bar"}, 1), ("/api", {}, 0)]:
        res = tab.goto(f"{site}{path}?{urlencode(params, doseq=True)}")
        assert res.status == 200, path
        assert tab.locator("h1").first.is_visible()
        if charts:
            assert plots(tab) >= charts, path
            assert tab.locator("div.chart .scatterlayer .trace, div.chart .barlayer .trace").count() >= charts
    tab.goto(f"{site}/node?name=nope")
    assert "no node type named" in tab.locator("p.error").inner_text()


def test_sort_filter_compare_export(tab, site):
    tab.goto(f"{site}/nodes")
    assert body_rows(tab, "nodes").count() == 10
    tab.click("th a.sort[data-key=memory_gbs]")
    tab.wait_for_url("**sort=memory_gbs**")
    tab.click("th a.sort[data-key=memory_gbs]")       # again: descending
    tab.wait_for_url("**sort=-memory_gbs**")
    column = [c.get_attribute("data-key") for c in tab.locator("thead th a.sort").all()].index("memory_gbs")
    values = [float(t) for t in tab.locator(f"table[data-table=nodes] tbody tr td:nth-child({column + 2})")
              .all_inner_texts() if t.strip()]
    assert len(values) >= 7 and values == sorted(values, reverse=True)
    # a facet: the vendor aws, applied from the form; the URL holds it
    tab.check('fieldset[data-facet=vendor] input[value="aws"]')
    tab.click("#apply")
    tab.wait_for_url("**vendor=aws**")
    assert sorted(tab.locator("table[data-table=nodes] tbody td a[href*='node?']").all_inner_texts()) == \
        ["aws/c7g.large", "aws/c7i.large"]
    # an export of what is shown (all rows the filters keep)
    with tab.expect_download() as dl:
        tab.click("#table-nodes a.export-csv")
    rows = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text())))
    assert sorted(r["node type"] for r in rows) == ["aws/c7g.large", "aws/c7i.large"]
    # compare two of them
    tab.check('input[name=node][value="aws/c7g.large"]')
    tab.check('input[name=node][value="aws/c7i.large"]')
    tab.click("#compare-button")
    tab.wait_for_url("**/compare?**")
    assert tab.locator("#compare-table thead th").all_inner_texts()[2:] == ["aws/c7g.large (baseline)",
                                                                            "aws/c7i.large"]
    tab.select_option("#base", "aws/c7i.large")
    tab.click("form.inline button")
    tab.wait_for_url("**base=aws%2Fc7i.large**")
    assert "(baseline)" in tab.locator("#compare-table thead th").nth(3).inner_text()


def test_hostile_names_show_as_text(tab, site):
    tab.goto(f"{site}/node?{urlencode({'name': SCRIPT})}")
    assert tab.locator("h1").inner_text() == SCRIPT
    assert plots(tab) >= 3
    tab.goto(f"{site}/compare?{urlencode({'node': [SCRIPT, 'cn[01-04]', 'alpha']}, doseq=True)}")
    plots(tab)
    legend = tab.locator("#chart-bandwidth .legendtext").all_text_contents()
    assert any(t.startswith(SCRIPT) for t in legend) and any(t.startswith("cn[01-04]") for t in legend)
    tab.goto(f"{site}/predictions?{urlencode({'app': APP})}")
    assert tab.locator("h1").inner_text() == f"Predictions for {APP}"
    plots(tab)
    assert SCRIPT in tab.locator("#chart-intervals .ytick text").all_text_contents()
    assert tab.locator("img").count() == 0                      # the app's name made no image element
    tab.goto(f"{site}/nodes?per=500")
    assert SCRIPT in tab.locator("table[data-table=nodes] tbody").inner_text()


SHOTS = {"overview": "/", "nodes": "/nodes?priced=true&sort=-memory_gbs_per_usd",
         "node": "/node?name=gamma", "compare": "/compare?node=alpha&node=beta&node=gamma&base=beta",
         "predictions": "/predictions?app=solver&sort=cost", "sql": "/sql?q=SELECT+node%2C+ws_bytes%2C+bandwidth_gbs"
         "+FROM+v_profile+WHERE+ub+%3D+%27triad%27+AND+threads+%3D+1+AND+node+%3D+%27gamma%27+ORDER+BY+ws_bytes"
         "&x=ws_bytes&y=bandwidth_gbs&kind=line"}


@pytest.mark.skipif(not os.environ.get("NODEREG_SCREENSHOTS"), reason="NODEREG_SCREENSHOTS=DIR not set")
def test_screenshots(tab, site):
    """The pictures of docs/web.md and the README (NODEREG_SCREENSHOTS=docs/img)."""
    folder = Path(os.environ["NODEREG_SCREENSHOTS"])
    for name, path in SHOTS.items():
        tab.goto(site + path)
        if tab.locator("div.chart").count():
            plots(tab)
        tab.screenshot(path=str(folder / f"web-{name}.png"))
        assert (folder / f"web-{name}.png").stat().st_size > 10_000
