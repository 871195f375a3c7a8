"""`nodereg report`: node, compare, trace and match reports as self-contained HTML and as PNG.

One synthetic registry (tests/test_report_fixtures.py) is built per module; every report is
rendered once and the tests inspect the files: self-contained HTML (no external reference, charts
inline), the expected series (kernel, node, phase and metric names, axis labels, cache labels from
the inventory) and the numbers the tables derive from the profile.
"""

import json
import re
import sys

import pandas as pd
import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends
from test_report_fixtures import NODES, SynthNode, add_predictions, add_trace, build_registry, profile_points

from registry.db import open_registry
from registry.nodes import ensure_node
from registry.report import curves
from registry.report.load import NodeProfile, node_profile, resolve_trace
from registry.report.match import latest_predictions, measured
from registry.report.trace import phase_matches
from registry.io.tracefile import Phase, Trace, write_trace

# anything a browser would fetch: src/href to another host, CSS url() to one, @import
EXTERNAL = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|@import""", re.I)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """The synthetic registry, plus a node without a profile and a trace without predictions."""
    url = f"duckdb:///{tmp_path_factory.mktemp('reports') / 'registry.duckdb'}"
    info = build_registry(url)
    reg = open_registry(url)
    with reg.begin() as conn:
        ensure_node(conn, "bare", SynthNode("bare").inventory())
        info["unmatched"] = add_trace(conn, "lonely", "beta", seed=9)
    reg.close()
    info["url"] = url
    return info


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("out")


def run_cli(url, *args):
    """The real entry point in-process (module-scoped fixtures cannot use the function-scoped `cli`)."""
    from registry.cli import main
    saved = sys.argv
    sys.argv = ["nodereg", "--db", url, *map(str, args)]
    try:
        main()
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved


@pytest.fixture(scope="module")
def reports(registry, out_dir):
    """Every report rendered once, through the CLI: kind -> path."""
    url, uid = registry["url"], registry["trace"]["uid"]
    jobs = {"node.html": ("node", "alpha"), "node.png": ("node", "alpha"),
            "compare.html": ("compare", "alpha", "beta", "gamma"), "trace.html": ("trace", uid),
            "match.html": ("match", uid[:8]), "match.png": ("match", "solver")}
    paths = {}
    for name, args in jobs.items():
        paths[name] = out_dir / name
        assert run_cli(url, "report", *args, "--out", paths[name]) == 0, name
    return paths


def assert_self_contained(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(html), EXTERNAL.search(html).group(0)
    assert "<script" not in html and "<link" not in html and "<img" not in html
    # every in-document reference resolves inside the page, and no id repeats across charts
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', html):
        assert ref in set(ids), ref


def svg_texts(html: str) -> str:
    """The text the charts show (matplotlib writes SVG text as <text> elements, fonttype none)."""
    return " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", html))


def assert_png(path, min_w=600, min_h=200):
    import matplotlib.image
    img = matplotlib.image.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h, img.shape
    assert img[..., :3].std() > 0.05     # not a blank canvas


def test_node_html_shows_every_chart_with_cache_boundaries(reports):
    html = reports["node.html"].read_text()
    assert_self_contained(html)
    for fetch in ('<img src="https://example.org/a.png">', '<a href="//cdn.example.org/x.js">x</a>',
                  '<div style="background: url(http://example.org/b.png)"></div>'):
        with pytest.raises(AssertionError):       # the check itself can fail
            assert_self_contained(html.replace("</main>", fetch + "</main>"))
    assert html.count("<svg") == 5                      # bandwidth, latency, scaling, roofline, thesis
    text = svg_texts(html)
    for kernel in ("triad", "copy", "scale", "add", "load", "store", "peak_fma", "scalar_fp64", "mbw1c", "mbw2hc"):
        assert kernel in text, kernel
    for label in ("bandwidth (GB/s) (log scale)", "latency per access (ns) (log scale)",
                  "working set (bytes, log scale)", "arithmetic intensity (FLOP/byte, log scale)", "threads",
                  "Bandwidth, 1 thread", "Bandwidth, 4 threads"):
        assert label in text, label
    # cache boundaries from the inventory: per core at one thread, for all four cores at four threads
    for mark in ("L1 32 KiB", "L2 1 MiB", "L3 16 MiB", "L1 128 KiB", "L2 4 MiB"):
        assert mark in text, mark
    for title in ("Per-level figures", "Compute peaks", "Caches (data and unified)"):
        assert f"<h2>{title}</h2>" in html


def test_level_figures_follow_the_curve_plateaus(registry):
    """The per-level table's numbers are the plateaus of the synthetic node (within noise)."""
    alpha = NODES[0]
    reg = open_registry(registry["url"], readonly=True)
    with reg.connect() as conn:
        prof = node_profile(conn, "alpha")
    reg.close()
    one = {lv.label: lv for lv in curves.level_figures(curves.size_curves(prof, "bandwidth", "bandwidth_gbs", 1),
                                                       prof.caches, 1)}
    assert list(one) == ["L1", "L2", "L3", "memory"]
    assert one["L1"].kernel == "load"
    for label, plateau in zip(("L1", "L2", "L3", "memory"), alpha.bw):
        assert one[label].value == pytest.approx(1.3 * plateau, rel=0.12), label
    threads, four = curves.bandwidth_ceilings(prof)       # the roofline's slopes: triad, at 4 threads
    assert threads == 4 and {lv.kernel for lv in four} == {"triad"}
    got = {lv.label: lv.value for lv in four}
    assert {k: got[k] for k in ("L1", "L2", "memory")} == pytest.approx(
        {"L1": 4 * alpha.bw[0], "L2": 4 * alpha.bw[1], "memory": alpha.mem_max}, rel=0.12)
    assert got["L2"] > got["L3"] > got["memory"]    # L3 (4 to 16 MiB at 4 threads) is too narrow for a plateau
    _, lat = curves.latency_curves(prof)
    latency = {lv.label: lv.value for lv in curves.level_figures(lat, prof.caches, 1, best=min)}
    for label, ns in zip(("L1", "L2", "L3", "memory"), alpha.lat):
        assert latency[label] == pytest.approx(ns, rel=0.15), label
    assert curves.fp_peak(prof).kernel == "peak_fma" and curves.fp_peak(prof).threads == 4


def test_node_png_decodes(reports):
    assert_png(reports["node.png"], min_w=1500, min_h=700)


def test_compare_overlays_the_nodes(reports):
    html = reports["compare.html"].read_text()
    assert_self_contained(html)
    text = svg_texts(html)
    for node, threads in (("alpha", 4), ("beta", 2), ("gamma", 8)):
        assert f"{node} ({threads} thr)" in text
        assert re.search(rf"{node}: [\d.]+ GB/s, [\d.]+ GFLOP/s", text), node
    assert "triad bandwidth, 1 thread" in text and "peak_fma vs threads" in text
    assert "<h2>Side by side</h2>" in html


def test_compare_kernel_choice_and_errors(registry, out_dir, cli):
    url = registry["url"]
    out = out_dir / "cmp-load.html"
    res = cli("--db", url, "report", "compare", "alpha", "beta", "--kernel", "load", "--out", out, "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["charts"] == 4
    assert "load bandwidth, most threads" in svg_texts(out.read_text())
    assert_one_line_error(cli("--db", url, "report", "compare", "alpha", "alpha"), "at least two different nodes")
    assert_one_line_error(cli("--db", url, "report", "compare", "alpha", "beta", "--kernel", "nope"),
                          "kernel 'nope' is not in the profile of alpha, beta")
    assert_one_line_error(cli("--db", url, "report", "compare", "alpha", "bare"), "node 'bare' has no profile")


def test_trace_report_series_phases_signatures_and_matches(reports):
    html = reports["trace.html"].read_text()
    assert_self_contained(html)
    text = svg_texts(html)
    for name in ("cpu_util", "rss_mb", "wss_mb", "read_mb_s", "write_mb_s", "minflt_per_s", "ctxsw_per_s",
                 "0: read input", "1: compute", "2: memory sweep", "3: write output", "Phases", "CPU", "Memory",
                 "I/O", "time since the command started (s)"):
        assert name in text, name
    assert html.count("<svg") == 1
    for title in ("Phases", "Signature: proc", "Signature: counters", "Matched microbenchmark configs"):
        assert f"<h2>{title}</h2>" in html, title
    # both explanation shapes: corredor's winner/candidates with an index, similarity's neighbours
    assert "mbw1c ws=1048576 stride=8 threads=4 placement=compact (index 118)" in html
    assert "triad ws=4194304 stride=8 threads=4 placement=compact (similarity 0.91)" in html


def test_match_report_bars_whiskers_and_measurements(reports):
    html = reports["match.html"].read_text()
    assert_self_contained(html)
    text = svg_texts(html)
    for label in ("predicted (corredor)", "predicted (similarity)", "measured (median, range)", "time (s)",
                  "traced run on alpha: 60 s", "alpha", "beta", "gamma"):
        assert label in text, label
    rows = re.findall(r"<tr>(.*?)</tr>", html)
    cells = [re.findall(r"<t[dh][^>]*>([^<]*)</t[dh]>", r) for r in rows]
    body = [c for c in cells if c and c[0] in ("alpha", "beta", "gamma")]
    assert [c[0] for c in body][::2] == ["gamma", "alpha", "beta"]          # best node first
    beta_sim = next(c for c in body if c[:2] == ["beta", "similarity"])
    assert beta_sim[3] == "104" and beta_sim[6] == "100.2" and beta_sim[7] == "3" and beta_sim[8] == "3.8"
    alpha = next(c for c in body if c[:2] == ["alpha", "corredor"])
    assert alpha[6] == "" and alpha[8] == ""                                   # no runs on alpha
    assert_png(reports["match.png"], min_w=800, min_h=250)


def test_match_uses_each_models_latest_prediction(tmp_path, cli):
    url = f"duckdb:///{tmp_path / 'r.duckdb'}"
    info = build_registry(url, nodes=NODES[:2])
    reg = open_registry(url)
    with reg.begin() as conn:
        add_predictions(conn, info["trace"], "corredor", {"beta": 77.0})
    reg.close()
    out = tmp_path / "m.html"
    assert cli("--db", url, "report", "match", "solver", "--out", out).code == 0
    html = out.read_text()
    assert "<td>beta</td><td>corredor</td><td class=\"num\">1</td><td class=\"num\">77</td>" in html
    assert "97" not in re.findall(r"<td class=\"num\">([^<]*)</td>", html)


def test_trace_from_a_trace_file(tmp_path, registry, cli):
    """A file written by `nodereg trace --out` reports without the registry knowing it."""
    samples = {"t_s": [0.5 * i for i in range(1, 21)], "cpu_util": [1.0] * 10 + [2.0] * 10,
               "rss_mb": [100.0 + i for i in range(20)], "wss_mb": [None] * 20, "kbmemused": [5e5] * 20}
    phases = [Phase("setup", "auto", 0.0, 5.0, 0.5, 5.0, signature={"proc": {"cpu_util": 1.0}}),
              Phase("solve", "omp", 5.0, 10.0, 0.5, 4.0, calls=3, intervals=[[5, 6], [7, 8], [9, 10]],
                    signature={"proc": {"cpu_util": 2.0}})]
    path = write_trace(Trace("fileapp", "alpha", "h", ["./fileapp"], 0, "ok", 10.0, 0.5, "2024-01-01T00:00:00Z",
                             ["proc"], phases, samples), tmp_path / "fileapp.trace.json")
    out = tmp_path / "t.html"
    res = cli("--db", registry["url"], "report", "trace", path, "--out", out)
    assert res.code == 0, res.err
    html = out.read_text()
    assert_self_contained(html)
    text = svg_texts(html)
    assert "0: setup" in text and "1: solve" in text and "kbmemused" in text and "Kilobytes" in text
    assert "(not in the registry)" in html
    assert_one_line_error(cli("--db", registry["url"], "report", "match", path), "no predictions for trace",
                          f"run `nodereg match {path}` first")


def test_one_line_errors(registry, tmp_path, cli):
    url = registry["url"]
    assert_one_line_error(cli("--db", url, "report", "node", "nope"), "unknown node 'nope'")
    assert_one_line_error(cli("--db", url, "report", "node", "bare"), "node 'bare' has no profile",
                          "nodereg profile bare")
    assert_one_line_error(cli("--db", url, "report", "trace", "no-such-thing"), "unknown trace 'no-such-thing'")
    assert_one_line_error(cli("--db", url, "report", "match", "lonely"), "no predictions for trace",
                          "run `nodereg match lonely` first")
    assert_one_line_error(cli("--db", url, "report", "trace", str(tmp_path / "missing.json")), "does not exist")
    assert_one_line_error(cli("--db", url, "report", "node", "alpha", "--out", tmp_path / "x.pdf"),
                          "must end in .html, .png or .svg")
    assert not (tmp_path / "x.pdf").exists()


def test_ambiguous_prefix_and_default_output(registry, tmp_path, monkeypatch, cli):
    url = registry["url"]
    reg = open_registry(url, readonly=True)
    with reg.connect() as conn:
        uids = [r[0] for r in conn.execute(sa.text("SELECT uid FROM traces"))]
    reg.close()
    common = next((a[:1] for a in uids if sum(u.startswith(a[:1]) for u in uids) > 1), None)
    if common:
        assert_one_line_error(cli("--db", url, "report", "trace", common), "is ambiguous")
    monkeypatch.chdir(tmp_path)
    res = cli("--db", url, "report", "match", "solver")
    assert res.code == 0, res.err
    assert (tmp_path / "report-match-solver.html").is_file() and "wrote report-match-solver.html" in res.out


@both_backends
def test_report_queries_on_both_backends(db_url, tmp_path, cli):
    """The report SQL is portable: the loaders read the same content on DuckDB and PostgreSQL."""
    info = build_registry(db_url, nodes=NODES[:2])
    reg = open_registry(db_url, readonly=True)
    with reg.connect() as conn:
        prof = node_profile(conn, "beta")
        trace = resolve_trace(conn, info["trace"]["uid"][:6])
        preds = latest_predictions(conn, trace)
        runs = measured(conn, "solver")
    reg.close()
    assert len(prof.rows) == len(profile_points(NODES[1])) and [c.level for c in prof.caches] == [1, 2, 3]
    assert prof.rows["stride_bytes"].notna().all()
    assert trace.app == "solver" and [p.name for p in trace.phases][0] == "read input"
    assert trace.samples.shape == (120, 8) and trace.phases[1].signature["counters"]["ipc"] == 2.1
    assert sorted(zip(preds["model_name"], preds["node"])) == [("corredor", "alpha"), ("corredor", "beta"),
                                                               ("similarity", "alpha"), ("similarity", "beta")]
    assert runs.set_index("node")["median_s"].to_dict() == {"beta": pytest.approx(100.2)}
    out = tmp_path / "match.html"
    assert cli("report", "match", "solver", "--out", out).code == 0
    assert_self_contained(out.read_text())


def test_phase_matches_reads_the_explanation_shapes():
    corredor = {"phases": [{"phase": "solve", "winner": "mbw1c a", "index": 120.0,
                            "candidates": [{"config": "mbw1c a", "index": 120.0},
                                           {"config": "mbw2hc b", "index": 99.5}]},
                           {"phase": "io", "winner": None, "candidates": []}]}
    assert phase_matches(corredor) == [("solve", ["mbw1c a (index 120)", "mbw2hc b (index 99.5)"]), ("io", [])]
    whole = {"neighbours": [{"reference": "triad x", "distance": 0.25}, {"reference": "copy y", "distance": 1.5}],
             "used": 2}
    assert phase_matches(whole) == [("whole run", ["triad x (distance 0.25)", "copy y (distance 1.5)"])]
    assert phase_matches({"coverage": 1.0}) == []


def test_levels_without_a_cache_inventory_use_the_largest_working_set():
    c = pd.DataFrame({"ws_bytes": [2.0**14, 2.0**20, 2.0**27], "value": [100.0, 50.0, 12.0],
                      "unstable": [False] * 3})
    assert [(lv.label, lv.value) for lv in curves.level_figures({"triad": c}, [], 1)] == [("memory", 12.0)]
    assert curves.cache_marks([], 4) == []


def test_compute_scaling_reads_gemm_at_its_largest_working_set():
    """gemm runs at several working sets per thread count: its thread scaling is read at the largest
    (memory), as the bandwidth kernels' is; the other compute kernels have none (0, or NULL where
    imported) and keep every run."""
    rows = pd.DataFrame({"ub": ["gemm"] * 4 + ["peak_fma"] * 2, "family": "compute", "threads": [1, 1, 2, 2, 1, 2],
                         "placement": "compact", "ws_bytes": [2.0**18, 2.0**27, 2.0**19, 2.0**27, 0.0, None],
                         "stride_bytes": None, "gflops": [50.0, 40.0, 100.0, 78.0, 45.0, 90.0], "unstable": False})
    prof = NodeProfile("n", {}, {}, [], rows)
    got = {k: c["value"].tolist() for (k, _), c in curves.scaling(prof, "compute", "gflops").items()}
    assert got == {"gemm": [40.0, 78.0], "peak_fma": [45.0, 90.0]}
