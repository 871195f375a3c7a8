"""`nodereg import sparecores`: each upstream format, failed / missing / older tasks, CPU families,
idempotence, both backends, the suite readers, CLI errors; and a few real servers when ../shared has them."""

import json
import math

import pytest
import sqlalchemy as sa
from conftest import assert_one_line_error, both_backends
from sparecores_synth import Server, write_server, write_specs, write_task
import sparecores_synth as synth

from registry.crossarch.data import load
from registry.db import open_registry
from registry.io.sparecores import app_group, cpu_family, parse_server
from registry.io.sparecores import appruns, micro
from registry.io.sparecores.apps import COMPRESSION_WORK, GEEKBENCH_WORK, REQUESTS_WORK, app_family
from registry.io.sparecores.family import classify
from registry.suites import node_table, suite_costs

ARM = Server(name="c7g.large", arch="aarch64", vendor_id="ARM", model_name="Neoverse-V1", family=None, model=1,
             speed=0.8, flags=["fp", "asimd", "sve"])


def _by_key(items):
    return {m.config_key: m for m in items}


def _close(a, b):
    return math.isclose(a, b, rel_tol=1e-9)


# ----------------------------------------------------------------------------------------- parsers


@pytest.mark.parametrize("old", [False, True])
def test_membench_both_header_versions(old):
    text, figures = synth.membench(Server(speed=2.0), old=old)
    got = _by_key(micro.parse_membench(text))
    assert set(got) == set(figures)
    for key, value in figures.items():
        assert _close(got[key].value, value)
    lat = got["sparecores:membench:latency:64MiB:1t"]
    assert (lat.unit, lat.higher_is_better, lat.threads, lat.family, lat.ws_bytes) == ("ns", False, 1, "latency", 2**26)
    read = got["sparecores:membench:read:16KiB:all"]
    assert (read.unit, read.higher_is_better, read.threads, read.family) == ("MB/s", True, 0, "bandwidth")


@pytest.mark.parametrize("size", ["inf", "-inf", "nan", "1e400", "999999999999999999999999999999"])
def test_a_membench_row_without_a_finite_size_is_skipped(size):
    """The reader fuzzer's cases: a size of inf crashed the import (OverflowError), and a size of
    10^30 KiB reached the database past INT64 (a database error, the whole server's import lost)."""
    text, figures = synth.membench(Server())
    header, first, *rest = text.splitlines()
    broken = first.split(",")
    broken[header.split(",").index("size_kb")] = size
    got = _by_key(micro.parse_membench("\n".join([header, ",".join(broken), *rest])))
    assert got and len(got) < len(figures)


def test_a_cache_past_a_pebibyte_is_no_cache_not_a_database_error():
    """The reader fuzzer's case: an lscpu L3 of 10^30 bytes reached node_caches past INT64."""
    from registry.io.sparecores.inventory import from_lscpu, lscpu_fields
    text, _ = synth.lscpu(Server())
    fields = lscpu_fields(text.replace('"8388608 (1 instance)"', '"' + "9" * 30 + ' (1 instance)"'))
    levels = {c["level"] for c in from_lscpu(fields, "aws")["caches"]}
    assert levels == {1, 2}


def test_bw_mem_sizes_are_lmbench_megabytes():
    text, figures = synth.bw_mem(Server())
    got = _by_key(micro.parse_bw_mem(text))
    assert set(got) == set(figures)
    assert len(micro.parse_bw_mem(text + "\nrd 1e30 5000.0\n")) == len(got)     # no pebibyte working set
    assert got["sparecores:bw_mem:rd:16KB:all"].ws_bytes == 16384
    assert got["sparecores:bw_mem:rdwr:512MB:all"].ws_bytes == 512_000_000
    with pytest.raises(ValueError):
        micro.parse_bw_mem("Segmentation fault\n")


def test_stressng_new_full_and_old_formats():
    s = Server(vcpus=4)
    for text, figures in (synth.stressngfull(s), synth.stressng_benchmarks(s), synth.stressng_old(s, False),
                          synth.stressng_old(s, True)):
        parsed = (micro.parse_stressngfull(text) if "," in text.splitlines()[0] and "{" not in text else
                  micro.parse_stressng_benchmarks(text) if text.startswith("{") else
                  micro.parse_stressng_cpu(text, "stressngsinglecore" if "hogs: 1 cpu" in text else "stressng"))
        got = _by_key(parsed)
        assert {k: v.value for k, v in got.items()} == pytest.approx(figures)
    fams = {k: m.family for k, m in _by_key(micro.parse_stressng_benchmarks(synth.stressng_benchmarks(s)[0])).items()}
    assert fams["sparecores:stressng:crypt:1t"] == "crypto"
    assert fams["sparecores:stressng:stream:all"] == "bandwidth"
    assert fams["sparecores:stressng:fork:all"] == "system"


def test_passmark_yaml_units_and_single_thread():
    text, figures = synth.passmark(Server(speed=1.5))
    got = _by_key(micro.parse_passmark(text))
    assert {k: v.value for k, v in got.items()} == pytest.approx(figures)
    assert got["sparecores:passmark:CPU_SINGLETHREAD:1t"].threads == 1
    assert not got["sparecores:passmark:ME_LATENCY:all"].higher_is_better
    with pytest.raises(ValueError):
        micro.parse_passmark("Results: [unclosed\n")


def test_openssl_parsed_json():
    text, figures = synth.openssl(Server())
    got = _by_key(micro.parse_openssl(text))
    assert {k: v.value for k, v in got.items()} == pytest.approx(figures)
    assert got["sparecores:openssl:sha256:16384:all"].unit == "bytes/s"


def test_geekbench_rates_with_prefixes_and_work():
    assert appruns.geekbench_rate("10.3 Klines/sec") == (pytest.approx(10300.0), "lines/s")
    assert appruns.geekbench_rate("1.2 GB/sec") == (pytest.approx(1.2e9), "bytes/s")
    assert appruns.geekbench_rate("62.8 Kpixels/sec") == (pytest.approx(62800.0), "pixels/s")
    assert appruns.geekbench_rate("9.87 routes/sec") == (pytest.approx(9.87), "routes/s")
    assert appruns.geekbench_rate("") is None
    text, figures = synth.geekbench(Server(speed=1.3))
    got = {a.app: a for a in appruns.parse_geekbench(text)}
    assert set(got) == set(figures)
    for app, (rate, unit) in figures.items():
        slug = app.split(":")[1]
        assert got[app].unit == unit and _close(got[app].rate, rate)
        assert _close(got[app].time_s, GEEKBENCH_WORK[slug] / rate)
        assert got[app].threads == (1 if app.endswith(":single") else None)


def test_compression_redis_static_web():
    s = Server(vcpus=8)
    text, figures = synth.compression(s)
    got = {a.app: a for a in appruns.parse_compression(text)}
    assert set(got) == set(figures)
    assert all(_close(got[k].time_s, COMPRESSION_WORK / v) for k, v in figures.items())
    assert "compression:bzip3-b1MiB:compress:all" in got and got["compression:zstd-3:compress:1t"].threads == 1
    assert "compression:brotli-4:compress:all" not in got         # run single-threaded only: no all-core figure
    one_core = {a.app for a in appruns.parse_compression(synth.compression(Server(vcpus=1))[0])}
    assert {"compression:brotli-4:compress:all", "compression:zstd-3:compress:all"} <= one_core
    # the all-core figures of zstd and bzip3 measured up to 2024-09-20 are another measurement: an
    # app of their own (the day after, and every other algorithm, keep `all`)
    early = {a.app for a in appruns.parse_compression(text, "2024-09-20T23:59:00")}
    later = {a.app for a in appruns.parse_compression(text, "2024-09-21T00:01:00")}
    assert later == set(figures)
    assert {"compression:zstd-3:compress:all-2024", "compression:bzip3-b1MiB:decompress:all-2024"} <= early
    assert "compression:zstd-3:compress:all" not in early and "compression:gzip-9:compress:all" in early
    assert early - later == {k.replace(":all", ":all-2024") for k in later - early}
    # newer runs name lz4's block size by its frame id (0: the default, 64 KiB; 6: 1 MiB; 7: 4 MiB): the same apps
    ids = json.loads(text)
    for entry in ids["lz4"]["1"]:
        entry["extra_args"] = {"block_size": 0}
    ids["lz4"]["1"] += [dict(e, extra_args={"block_size": b}) for e in ids["lz4"]["1"] for b in (6, 7)]
    by_id = {a.app: a.rate for a in appruns.parse_compression(json.dumps(ids))}
    assert {k: v for k, v in by_id.items() if k in figures} == pytest.approx(figures)
    assert {k for k in by_id if k.startswith("compression:lz4")} == {
        f"compression:lz4-1-b{b}:{op}:{tag}" for b in ("64KiB", "1MiB", "4MiB")
        for op in ("compress", "decompress") for tag in ("1t", "all")}
    text, figures = synth.redis(s)
    got = {a.app: a for a in appruns.parse_redis(text)}
    assert {k: a.rate for k, a in got.items()} == pytest.approx(figures)
    assert _close(got["redis:set:p16"].time_s, REQUESTS_WORK / figures["redis:set:p16"])
    text, figures = synth.static_web(s)
    got = {a.app: a.rate for a in appruns.parse_static_web(text, s.vcpus)}
    assert got == pytest.approx(figures)          # the best over wrk's thread counts, per connection per vCPU


def test_llm_tokens_per_second_of_cpu_builds_only():
    s = Server(vcpus=8)
    text, figures = synth.llm(s, gpu=True)
    got = {a.app: a for a in appruns.parse_llm(text)}
    assert set(got) == set(figures)                       # the GPU lines (20x faster) are not CPU results
    assert {k: a.rate for k, a in got.items()} == pytest.approx(figures)
    assert _close(got["llm:gemma-2b-q4-k-m:tg128"].time_s, 128 / figures["llm:gemma-2b-q4-k-m:tg128"])
    assert got["llm:smollm-135m-q4-k-m:pp512"].work == 512 and got["llm:smollm-135m-q4-k-m:pp16"].threads is None
    gpu_only = "\n".join(line for line in text.splitlines() if '"CUDA"' in line)
    assert appruns.parse_llm(gpu_only) == []              # read, but no CPU figure: the server says "no figures"
    with pytest.raises(ValueError):
        appruns.parse_llm("llama-bench: error: unknown argument\n")
    assert app_family("llm:gemma-2b-q4-k-m:tg128") == app_family("llm:smollm-135m-q4-k-m:pp16") == "llm"


def test_cpu_family_rule():
    cases = [(("AuthenticAMD", "AMD EPYC 9R14", "25", "17"), "Zen 4"), (("AuthenticAMD", "AMD EPYC 7R13", 25, 1), "Zen 3"),
             (("AuthenticAMD", "AMD EPYC 7R32", 23, 49), "Zen 2"), (("AuthenticAMD", "AMD EPYC 9R45", 26, 2), "Zen 5"),
             (("GenuineIntel", "Intel Xeon 8488C", 6, 143), "Sapphire Rapids"),
             (("GenuineIntel", "Xeon 8259CL", 6, 85, 7), "Cascade Lake"),
             (("GenuineIntel", "Xeon 8124M", 6, 85, 4), "Skylake"),
             (("GenuineIntel", "GENUINE INTEL(R) 0000", 6, 207), "Emerald Rapids"),
             (("GenuineIntel", "Xeon 6975P-C", 6, 173), "Granite Rapids"),
             (("GenuineIntel", "Some Future Xeon", 6, 250), "Some Future Xeon")]
    for args, want in cases:
        assert cpu_family(*args) == want, args
    assert classify("ARM", "Neoverse-V1", cloud="aws") == ("AWS", "Graviton3")
    assert classify("ARM", "Neoverse-N1", cloud="aws") == ("AWS", "Graviton2")
    assert classify("ARM", "Neoverse-N1", cloud="azure") == ("Ampere", "Neoverse-N1")
    assert classify("ARM", "Neoverse-N2", cloud="azure") == ("Microsoft", "Cobalt 100")
    assert classify("ARM", "Neoverse-V2", cloud="gcp") == ("Google", "Axion C4A")
    assert classify("ARM", "Cortex-X9", cloud="aws") == ("ARM", "Cortex-X9")
    assert classify(None, None) == (None, None)


def test_app_groups():
    assert app_group("geekbench:clang:single") == "geekbench-single"
    assert app_group("geekbench:file-compression:multi") == "geekbench-multi"
    assert app_group("compression:zstd-3:compress:1t") == "compression"
    assert app_group("redis:set:p16") == app_group("static_web:1k:c4") == "redis-web"
    assert app_group("llm:gemma-2b-q4-k-m:pp512") == "llm"
    assert app_group("lu.W") is None and app_group("geekbench:clang") is None


# ---------------------------------------------------------------------------------- server folders


def test_parse_server_failed_unfinished_missing_and_older_tasks(tmp_path):
    s = Server(vcpus=4)
    written = write_server(tmp_path, s, skip=("membench", "stressng_benchmarks", "redis", "llm"),
                           failed={"geekbench": -4, "static_web": None}, old_stressng=True)
    write_task(tmp_path, s, "openssl", "not json at all")
    write_task(tmp_path, s, "llm_speed", "{}")            # llm, a newer task, absent: not "not run" either
    rec = parse_server(tmp_path / "data" / "aws" / s.name)
    assert rec.name == "aws:m7a.large"
    assert rec.skipped == {"geekbench": "failed (exit code -4)", "static_web": "did not finish", "redis": "not run",
                           "openssl": "unreadable output", "llm_speed": "not imported (unknown task)"}
    keys = {m.config_key for m in rec.measurements}
    assert {"sparecores:stressng:cpu_all:all", "sparecores:stressng:cpu_all:1t"} <= keys
    assert not any(k.startswith(("sparecores:membench", "sparecores:openssl")) for k in keys)
    assert {a.task for a in rec.apps} == {"compression_text"}
    assert set(written["compression_text"]) == {a.app for a in rec.apps}
    inv = rec.inventory
    assert (inv["architecture"], inv["vcpus"], inv["cpu_vendor"], inv["cpu_family"]) == ("x86_64", 4, "AMD", "Zen 4")
    assert inv["memory_bytes"] == 7736 * 2**20          # PassMark's, without specs
    prov = rec.provenance("abc")
    assert prov["commit"] == "abc" and "geekbench" not in prov["tasks"] and "passmark" in prov["tasks"]


def test_llm_runs_on_another_cpu_than_lscpus_are_not_the_servers(tmp_path):
    """A type moved to newer hosts between its sessions: its llm figures are another CPU's."""
    moved = Server(name="d4.large", model_name="Intel(R) Xeon(R) CPU E5-2673 v4 @ 2.30GHz")
    write_server(tmp_path, moved)
    text = synth.llm(Server(model_name="Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz"))[0]
    write_task(tmp_path, moved, "llm", text)
    same = Server(name="d4s.large", model_name="Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz")
    write_server(tmp_path, same)
    write_task(tmp_path, same, "llm", text.replace("Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz",
                                                   "Intel Xeon Platinum 8370C CPU @ 2.80GHz"))   # spelt otherwise
    arm = Server(name="c7g.large", arch="aarch64", vendor_id="ARM", model_name="Neoverse-V1", family=None, model=None)
    write_server(tmp_path, arm)
    write_task(tmp_path, arm, "llm", text.replace("Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz", "CPU"))
    rec = parse_server(tmp_path / "data/aws/d4.large")
    assert rec.skipped["llm"] == "ran on another CPU than lscpu's (Intel(R) Xeon(R) Platinum 8370C CPU @ 2.80GHz)"
    assert not any(a.task == "llm" for a in rec.apps) and any(a.task == "geekbench" for a in rec.apps)
    for name in ("d4s.large", "c7g.large"):          # the same model spelt otherwise; llama.cpp's "CPU" on Arm
        rec = parse_server(tmp_path / "data/aws" / name)
        assert "llm" not in rec.skipped and sum(a.task == "llm" for a in rec.apps) == 8, name
    write_task(tmp_path, same, "llm", "[" * 100_000)   # damaged past the JSON parser's depth: read, never raised
    assert parse_server(tmp_path / "data/aws/d4s.large").skipped["llm"] == "unreadable output"


def test_specs_fill_what_lscpu_lacks(tmp_path):
    s = Server(name="g5.xlarge", vcpus=4)
    write_server(tmp_path, s, failed={"lscpu": -1})
    write_specs(tmp_path / "specs", s, memory_mib=16384, gpus=1)
    spec = json.loads((tmp_path / "specs/data/server/aws/g5_xlarge.json").read_text())
    rec = parse_server(tmp_path / "data/aws/g5.xlarge", spec)
    inv = rec.inventory
    assert (inv["vcpus"], inv["architecture"], inv["memory_bytes"], inv["gpu_count"], inv["source"]) == (
        4, "x86_64", 16384 * 2**20, 1, "specs")


# ---------------------------------------------------------------------------------------- imports


def _counts(url):
    reg = open_registry(url)
    with reg.connect() as conn:
        out = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
               for t in ("nodes", "profiles", "profile_runs", "ub_configs", "runs", "apps", "node_caches")}
    reg.close()
    return out


MICRO_TASKS = ("membench", "bw_mem", "stressngfull", "stressng", "stressngsinglecore", "stressng_benchmarks",
               "passmark", "openssl")
APP_TASKS = ("geekbench", "compression_text", "redis", "static_web", "llm")


def _dataset(root):
    x86 = Server(vcpus=2)
    arm = ARM
    big = Server(vendor="gcp", name="n2-standard-8", vcpus=8, vendor_id="GenuineIntel",
                 model_name="Intel(R) Xeon(R) CPU @ 2.80GHz", family=6, model=106, speed=1.2)
    figures = [(x86, write_server(root, x86, old_stressng=True)), (arm, write_server(root, arm, old_membench=True)),
               (big, write_server(root, big))]
    dead = Server(vendor="azure", name="Standard_X1")
    write_server(root, dead, failed={t: -1 for t in synth.writers(dead)})
    (root / "COMMIT").write_text("1234abcd\n")
    return figures


@both_backends
def test_import_stores_every_figure_and_is_idempotent(cli, db_url, tmp_path):
    figures = _dataset(tmp_path / "clone")
    first = cli("--db", db_url, "import", "sparecores", str(tmp_path / "clone"), "--json", "--workers", "1")
    assert first.code == 0, first.err
    summary = json.loads(first.out)
    assert summary["commit"] == "1234abcd"
    added = summary["added"]
    assert (summary["servers"], added["nodes"], added["profiles"]) == (4, 3, 3)
    assert summary["servers_skipped"] == {"no usable task (all failed or missing)": 1}
    assert summary["tasks_skipped"]["lscpu: failed (exit code -1)"] == 1
    n_measure = sum(len(f) for _, tasks in figures for t, f in tasks.items() if t in MICRO_TASKS)
    n_runs = sum(len(f) for _, tasks in figures for t, f in tasks.items() if t in APP_TASKS)
    assert (added["measurements"], added["runs"]) == (n_measure, n_runs)
    before = _counts(db_url)
    assert (before["profile_runs"], before["runs"], before["nodes"]) == (n_measure, n_runs, 3)

    reg = open_registry(db_url)
    with reg.connect() as conn:
        stored = {(n, k): (v, m) for n, k, v, m in conn.execute(sa.text(
            "SELECT n.name, c.config_key, pr.value, pr.median_s FROM profile_runs pr JOIN profiles p USING (profile_id) "
            "JOIN nodes n USING (node_id) JOIN ub_configs c USING (config_id)"))}
        runs = {(n, a): (t, th) for n, a, t, th in conn.execute(sa.text(
            "SELECT n.name, a.name, r.time_s, r.threads FROM runs r JOIN nodes n USING (node_id) "
            "JOIN apps a USING (app_id) WHERE r.source = 'sparecores'"))}
        node = conn.execute(sa.text("SELECT n_cpus, architecture, cpu_vendor, cpu_family, isa_flags, vendor, source "
                                    "FROM nodes WHERE name = 'aws:c7g.large'")).one()
        suites = {r[0] for r in conn.execute(sa.text("SELECT DISTINCT suite FROM microbenchmarks"))}
        prov = json.loads(conn.execute(sa.text("SELECT provenance_json FROM profiles")).first()[0])
    reg.close()
    for server, tasks in figures:
        for task, figs in tasks.items():
            for key, value in figs.items():
                if task not in MICRO_TASKS + APP_TASKS:
                    continue
                if key.startswith("sparecores:"):
                    v, median = stored[(f"{server.vendor}:{server.name}", key)]
                    assert _close(v, value)
                    lower = ":latency:" in key or "ME_LATENCY" in key
                    assert _close(median, value if lower else 1 / value)
                else:
                    rate = value[0] if isinstance(value, tuple) else value
                    t, threads = runs[(f"{server.vendor}:{server.name}", key)]
                    slug = key.split(":")[1]
                    work = GEEKBENCH_WORK.get(slug) if key.startswith("geekbench") else (
                        COMPRESSION_WORK if key.startswith("compression") else
                        int(key.rsplit(":", 1)[1][2:]) if key.startswith("llm") else REQUESTS_WORK)   # tokens
                    assert _close(t, work / rate), key
                    assert threads == (1 if key.endswith((":1t", ":single")) else None), key
    assert tuple(node) == (2, "aarch64", "AWS", "Graviton3", "fp asimd sve", "aws", "import")
    assert suites == {"sparecores"}
    assert prov["dataset"] == "sparecores/sc-inspector-data" and prov["commit"] == "1234abcd"

    again = cli("--db", db_url, "import", "sparecores", str(tmp_path / "clone"), "--json", "--workers", "1")
    assert again.code == 0, again.err
    s2 = json.loads(again.out)
    assert set(s2["added"].values()) == {0} and (s2["servers_unchanged"], s2["nodes_updated"]) == (3, 0)
    assert _counts(db_url) == before


def test_a_newer_commit_adds_what_changed(cli, db_url, tmp_path):
    clone = tmp_path / "clone"
    s = Server(vcpus=2)
    write_server(clone, s)
    assert cli("--db", db_url, "import", "sparecores", str(clone), "--workers", "1").code == 0
    before = _counts(db_url)
    faster = Server(vcpus=2, speed=2.0)
    write_task(clone, s, "redis", synth.redis(faster)[0], start="2026-01-01T10:00:00")
    write_task(clone, s, "bw_mem", synth.bw_mem(faster)[0], start="2026-01-01T11:00:00")
    out = cli("--db", db_url, "import", "sparecores", str(clone), "--json", "--workers", "1")
    summary = json.loads(out.out)
    every_figure = sum(len(figs) for t, (_, figs) in synth.writers(s).items() if t in MICRO_TASKS)   # all, anew
    assert summary["added"] == {"nodes": 0, "configs": 0, "profiles": 1, "measurements": every_figure, "apps": 0,
                                "runs": 3}
    after = _counts(db_url)
    assert after["runs"] == before["runs"] + 3 and after["profiles"] == 2
    costs = suite_costs(open_registry(db_url))          # the latest profile: bw_mem at speed 2
    want = synth.bw_mem(faster)[1]["sparecores:bw_mem:rd:16KB:all"]
    assert _close(costs.loc["aws:m7a.large", "sparecores:bw_mem:rd:16KB:all"], 1 / want)


@both_backends
def test_suite_costs_and_node_table(cli, db_url, tmp_path):
    _dataset(tmp_path / "clone")
    assert cli("--db", db_url, "import", "sparecores", str(tmp_path / "clone"), "--workers", "1").code == 0
    reg = open_registry(db_url)
    costs = suite_costs(reg)
    assert sorted(costs.index) == ["aws:c7g.large", "aws:m7a.large", "gcp:n2-standard-8"]
    assert costs.loc["gcp:n2-standard-8", "sparecores:membench:latency:16KiB:1t"] == pytest.approx(
        synth.membench(Server(speed=1.2))[1]["sparecores:membench:latency:16KiB:1t"])
    assert math.isnan(costs.loc["gcp:n2-standard-8", "sparecores:stressng:cpu_all:all"])   # older task: m7a only
    assert list(suite_costs(reg, nodes=["aws:c7g.large"]).index) == ["aws:c7g.large"]
    assert suite_costs(reg, suite="nodereg").empty
    table = node_table(reg)
    assert table.loc["gcp:n2-standard-8", ["architecture", "cpu_family", "n_cpus"]].tolist() == ["x86_64", "Ice Lake", 8]
    reg.close()


@both_backends
def test_clouds_the_shared_data_lacks_import_alike(cli, db_url, tmp_path):
    """Spare Cores measures Hetzner, UpCloud, OVH and Alibaba too: a vendor's folder is read by the
    same rules (an Ampere Altra outside AWS is Ampere's Neoverse-N1, not a Graviton2). The specs say
    which types sell vCPUs shared with other tenants; the cross-node data knows them."""
    servers = [Server(vendor="hcloud", name="cax21", vcpus=4, arch="aarch64", vendor_id="ARM", model_name="Neoverse-N1",
                      family=None, model=None), Server(vendor="hcloud", name="cpx31", vcpus=4),
               Server(vendor="upcloud", name="2xCPU-4GB", speed=0.8)]
    for s in servers:
        write_server(tmp_path / "clone", s)
        write_specs(tmp_path / "specs", s, allocation="SHARED" if s.name == "cax21" else "DEDICATED")
    out = cli("--db", db_url, "import", "sparecores", str(tmp_path / "clone"), "--specs", str(tmp_path / "specs"),
              "--workers", "1")
    assert out.code == 0, out.err
    table = node_table(open_registry(db_url))
    assert table.loc["hcloud:cax21", ["cpu_vendor", "cpu_family", "architecture"]].tolist() == [
        "Ampere", "Neoverse-N1", "aarch64"]
    assert table.loc["upcloud:2xCPU-4GB", "cpu_family"] == "Zen 4"
    listed = json.loads(cli("--db", db_url, "nodes", "--vendor", "hcloud", "--json").out)
    assert sorted(n["name"] for n in listed) == ["hcloud:cax21", "hcloud:cpx31"]
    shared = load(open_registry(db_url)).nodes["shared_vcpus"]
    assert shared.to_dict() == {"hcloud:cax21": True, "hcloud:cpx31": False, "upcloud:2xCPU-4GB": False}


def test_cli_errors(cli, db_url, tmp_path):
    assert_one_line_error(cli("--db", db_url, "import", "sparecores", str(tmp_path / "nope")), "not a directory")
    (tmp_path / "empty" / "data" / "aws").mkdir(parents=True)
    assert_one_line_error(cli("--db", db_url, "import", "sparecores", str(tmp_path / "empty")),
                          "not a Spare Cores inspector clone")
    write_server(tmp_path / "clone", Server())
    assert_one_line_error(cli("--db", db_url, "import", "sparecores", str(tmp_path / "clone"), "--specs",
                              str(tmp_path / "clone")), "sc-data-dumps")
    assert _counts(db_url)["nodes"] == 0


# ------------------------------------------------------------------------------- real data (../shared)

REAL = ["aws/m7a.large", "aws/c7g.large", "aws/c6g.large", "azure/Standard_D2ps_v6", "gcp/c4a-standard-8"]


def test_real_servers_from_the_shared_archive(cli, db_url, tmp_path):
    from pathlib import Path

    from registry.io.sparecores.archive import shared_dir, unpack

    folder = shared_dir(Path(__file__).resolve().parents[1])
    if not folder.is_dir():
        pytest.skip(f"no Spare Cores archives at {folder}")
    inspector, specs = unpack(folder, tmp_path / "sc", servers=REAL)
    args = ["--db", db_url, "import", "sparecores", str(inspector), "--json", "--workers", "1"]
    out = cli(*args, *(["--specs", str(specs)] if specs else []))
    assert out.code == 0, out.err
    table = node_table(open_registry(db_url))
    m7a = table.loc["aws:m7a.large"]
    assert (m7a.architecture, m7a.cpu_vendor, m7a.cpu_family, m7a.n_cpus) == ("x86_64", "AMD", "Zen 4", 2)
    assert set(table.loc[["aws:c7g.large", "aws:c6g.large"], "cpu_family"]) == {"Graviton3", "Graviton2"}
    arm = table[table.cpu_vendor.isin(["AWS", "Microsoft", "Google"])]
    assert len(arm) == 4 and set(arm.architecture) == {"aarch64"}
    costs = suite_costs(open_registry(db_url))
    assert costs.shape[0] == 5 and costs.shape[1] > 100


# ------------------------------------------------------------------------------------ nodes filters


@both_backends
def test_nodes_filters(cli, db_url, tmp_path):
    _dataset(tmp_path / "clone")
    assert cli("--db", db_url, "import", "sparecores", str(tmp_path / "clone"), "--workers", "1").code == 0

    def names(*args):
        out = cli("--db", db_url, "nodes", "--json", *args)
        assert out.code == 0, out.err
        return sorted(r["name"] for r in json.loads(out.out))

    assert names() == ["aws:c7g.large", "aws:m7a.large", "gcp:n2-standard-8"]
    assert names("--vendor", "aws") == ["aws:c7g.large", "aws:m7a.large"]
    assert names("--arch", "arm64") == names("--arch", "aarch64") == ["aws:c7g.large"]
    assert names("--family", "graviton3") == ["aws:c7g.large"]
    assert names("--family", "Zen 4", "--family", "Ice Lake") == ["aws:m7a.large", "gcp:n2-standard-8"]
    assert names("--min-vcpus", "4") == ["gcp:n2-standard-8"]
    assert names("--vendor", "aws", "--arch", "x86_64", "--max-vcpus", "2") == ["aws:m7a.large"]
    assert names("--cpu-vendor", "intel", "--max-vcpus", "4") == []
    table = cli("--db", db_url, "nodes", "--vendor", "gcp")
    assert "Lake" in table.out and "Grav" not in table.out and "Zen" not in table.out   # family column, gcp only
    assert_one_line_error(cli("--db", db_url, "nodes", "--min-vcpus", "8", "--max-vcpus", "2"), "--min-vcpus")
    shown = json.loads(cli("--db", db_url, "nodes", "show", "aws:c7g.large", "--json").out)
    assert (shown["architecture"], shown["cpu_family"], shown["inventory"]["cpu_model"]) == (
        "aarch64", "Graviton3", "Neoverse-V1")
    assert "Graviton3" in cli("--db", db_url, "nodes", "show", "aws:c7g.large").out


def test_a_server_the_database_refuses_loses_no_other(db_url, tmp_path, monkeypatch):
    """A batch that fails is written again server by server: the bad one is reported, the rest stored."""
    from registry.io.sparecores import store

    for name in ("a.large", "b.large", "c.large"):
        write_server(tmp_path / "clone", Server(name=name))
    real = store._Batch._runs

    def refuse_b(self, recs, now):
        if any(r.server == "b.large" for r in recs):
            raise sa.exc.IntegrityError("INSERT INTO runs", {}, Exception("duplicate key (simulated)"))
        return real(self, recs, now)

    monkeypatch.setattr(store._Batch, "_runs", refuse_b)
    reg = open_registry(db_url)
    summary = store.import_sparecores(reg, tmp_path / "clone", batch=3)
    assert [f.split(":")[:2] for f in summary.failed] == [["aws", "b.large"]]
    assert summary.added["nodes"] == 2 and summary.servers_imported == 2
    with reg.connect() as conn:
        names = {r[0] for r in conn.execute(sa.text("SELECT name FROM nodes"))}
        orphans = conn.execute(sa.text("SELECT count(*) FROM profiles WHERE node_id NOT IN "
                                       "(SELECT node_id FROM nodes)")).scalar()
    reg.close()
    assert names == {"aws:a.large", "aws:c.large"} and orphans == 0     # nothing of b.large half-written
    monkeypatch.setattr(store._Batch, "_runs", real)
    again = store.import_sparecores(open_registry(db_url), tmp_path / "clone")
    assert again.added["nodes"] == 1 and again.failed == []             # b.large on the next import


def _ints(value, path=""):
    """Every integer in a parsed record's values, with where it is."""
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _ints(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _ints(v, f"{path}[{i}]")


def test_no_number_of_any_output_reaches_the_database_past_its_column(tmp_path):
    """Every number of every task's output, one at a time, replaced by 10^30: whatever the parser
    keeps fits its column (sizes BIGINT, counts INTEGER). The reader fuzzer's random cases found two
    such numbers (a membench size, an lscpu cache size) in CI runs; this visits them all."""
    from fuzz_sparecores import _NUMBER
    from registry.io.sparecores.server import parse_server

    s = Server()
    folder = tmp_path / "data" / s.vendor / s.name
    for task, (text, _) in synth.writers(s, old_stressng=True).items():
        for m in _NUMBER.finditer(text):
            write_server(tmp_path, s, old_stressng=True)
            write_task(tmp_path, s, task, text[:m.start()] + "9" * 30 + text[m.end():])
            record = parse_server(folder)
            found = [*_ints(record.inventory, "inventory"),
                     *((f"{x.config_key}.ws_bytes", x.ws_bytes) for x in record.measurements if x.ws_bytes),
                     *((f"{a.app}.threads", a.threads) for a in record.apps if a.threads)]
            for where, n in found:
                bound = 2**63 if where.endswith(("bytes", "ws_bytes")) else 2**31
                assert 0 <= n < bound, (task, m.group(), where, n)
