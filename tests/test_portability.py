"""Can the traced binary run on a node? An x86 AVX-512 build is not ranked on an aarch64 node, nor on
an AVX2-only one, unless the app is portable (issue 28, item 5)."""

import json
import shutil
import subprocess
import textwrap

import pytest
import sqlalchemy as sa
from conftest import both_backends

from registry.db import open_registry
from registry.match.portability import Offer, cannot_run, node_offers
from registry.nodes import ensure_node
from registry.trace import store
from registry.trace.binary import needs
from registry_data import fake_inventory, profile_at_speeds, three_phase_trace

AVX512_SOURCE = textwrap.dedent("""
    int main(int argc, char **argv) {
        if (argc > 99)   /* never taken: the code is there, as in a binary built for AVX-512 */
            __asm__ volatile("vpxorq %%zmm1, %%zmm1, %%zmm1" ::: "xmm1");
        return 0;
    }
""")


def _compile(tmp_path, name, source, *flags):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / name
    subprocess.run([cc, "-O2", *flags, str(src), "-o", str(out)], check=True, capture_output=True)
    return out


def test_the_isa_extensions_a_binary_uses_are_read_from_its_code(tmp_path):
    wide = needs(str(_compile(tmp_path, "wide", AVX512_SOURCE)))
    assert wide["arch"] == "x86_64" and "avx512f" in wide["isa"] and wide["isa_from"] == "code"
    plain = needs(str(_compile(tmp_path, "plain", "int main(void) { return 0; }\n", "-march=x86-64")))
    assert plain["arch"] == "x86_64" and "avx512f" not in plain["isa"]
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    assert needs(str(script)) is None      # its interpreter is built for each node


def test_what_a_node_cannot_run():
    x86_avx512 = {"arch": "x86_64", "isa": ["avx512f"]}
    base = Offer("x86_64", {"avx2", "avx512f"})
    assert "built for x86_64, the node is aarch64" in cannot_run(x86_avx512, Offer("aarch64", {"asimd"}), base)
    assert "avx512f" in cannot_run(x86_avx512, Offer("x86_64", {"avx2"}), base)
    assert cannot_run(x86_avx512, Offer("x86_64", None), base) is None          # unknown flags: not judged
    assert cannot_run(x86_avx512, Offer(None, None), base) is None
    # the binary ran on a base without the extension: it picks its code path at run time
    assert cannot_run(x86_avx512, Offer("x86_64", {"avx2"}), Offer("x86_64", {"avx2"})) is None
    assert cannot_run({"arch": "i686", "isa": []}, Offer("x86_64", set()), base) is None


def test_a_profiled_node_records_what_it_offers(db_url):
    from registry.db import utcnow
    from registry.profile.store import ProfileRecord, store_profile

    reg = open_registry(db_url)
    with reg.begin() as conn:
        now = utcnow()
        store_profile(conn, ProfileRecord("x", fake_inventory(model="Intel(R) Xeon(R) Gold 6338"), "quick", [], now,
                                          now, 1.0, "test", None, None))
        row = conn.execute(sa.text("SELECT architecture, isa_flags, cpu_vendor FROM nodes WHERE name = 'x'")).one()
    reg.close()
    assert tuple(row) == ("x86_64", "avx2", "Intel")


@both_backends
def test_an_avx512_trace_is_not_ranked_on_an_aarch64_node_without_portable(cli, db_url):
    trace = three_phase_trace()
    trace.meta["binary"] = {"path": "/opt/app", "arch": "x86_64", "isa": ["avx512f"], "isa_from": "code"}
    reg = open_registry(db_url)
    with reg.begin() as conn:
        for node, cpus in (("b", 2), ("fast", 2), ("one", 1), ("quad", 4)):
            profile_at_speeds(conn, node, cpus, base=node == "b")
        ensure_node(conn, "arm", fake_inventory())           # stored before nodes had an architecture column
        for node, arch, flags in (("b", "x86_64", "avx2 avx512f"), ("one", "x86_64", "avx2 avx512f fma"),
                                  ("fast", "x86_64", "avx2 fma"), ("quad", "aarch64", "asimd sve")):
            conn.execute(sa.text("UPDATE nodes SET architecture = :a, isa_flags = :f WHERE name = :n"),
                         {"a": arch, "f": flags, "n": node})
        conn.execute(sa.text("UPDATE nodes SET architecture = NULL, isa_flags = NULL, inventory_json = :j "
                             "WHERE name = 'arm'"),
                     {"j": json.dumps({**fake_inventory().to_dict(), "architecture": "aarch64"})})
        assert node_offers(conn)["arm"] == Offer("aarch64", {"avx2"})
        assert node_offers(conn)["b"] == Offer("x86_64", {"avx2", "avx512f"})
        ensure_node(conn, "unknown", None)     # nothing known of it: left out of the offers (not judged)
        assert "unknown" not in node_offers(conn)
        store.save(conn, trace)
    reg.close()
    res = cli("match", "app", "--json", "--no-store")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert sorted(p["node"] for p in doc["predictions"]) == ["b", "one"]
    assert [p["rank"] for p in doc["predictions"]] == [1, 2]
    reasons = {x["node"]: x["reason"] for x in doc["excluded"]}
    assert "the node is aarch64" in reasons["quad"] and "avx512f" in reasons["fast"]
    text = cli("match", "app", "--no-store")
    assert "left out: quad: cannot run the traced binary" in text.err
    portable = json.loads(cli("match", "app", "--json", "--no-store", "--portable").out)
    assert sorted(p["node"] for p in portable["predictions"]) == ["b", "fast", "one", "quad"]
