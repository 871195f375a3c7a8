"""A node's headline figures mean one thing wherever they are quoted (#32 point 9).

`best_fp64_gflops` was the maximum of peak_fma over every thread count while the memory bandwidth is
taken at the most threads measured; on a busy host the one-thread run can beat the all-thread one, and
`nodes`, the profile's summary and the reports then quoted three values. Here the synthetic node's
one-thread FP peak is made far faster than its most-thread one: every reader must still quote the
most-thread figure.
"""

import json

import pytest
import sqlalchemy as sa
from conftest import both_backends
from test_report_fixtures import NODES, build_registry

from registry.db import open_registry
from registry.report import curves
from registry.report.load import node_profile
from registry.web.queries import node_summary

NODE = NODES[0]   # alpha: 4 CPUs, peak_fma at 1, 2 and 4 threads


@both_backends
def test_the_fp64_peak_is_the_most_threads_figure_everywhere(cli, db_url):
    build_registry(db_url, [NODE], with_trace=False)
    reg = open_registry(db_url)
    with reg.begin() as conn:
        conn.execute(sa.text(
            "UPDATE profile_runs SET gflops = gflops * 50 WHERE config_id IN (SELECT c.config_id FROM ub_configs c "
            "JOIN microbenchmarks u ON u.ub_id = c.ub_id WHERE u.name = 'peak_fma' AND c.threads = 1)"))
    with reg.connect() as conn:
        prof = node_profile(conn, NODE.name)
        view = conn.execute(sa.text("SELECT fp64_gflops FROM v_nodes WHERE name = :n"), {"n": NODE.name}).scalar_one()
        host = conn.execute(sa.text("SELECT fp64_gflops FROM v_hosts WHERE node = :n"), {"n": NODE.name}).scalar_one()
        web = node_summary(conn).set_index("name").loc[NODE.name, "fp64_gflops"]
    reg.close()
    fma = prof.family("compute")
    fma = fma[fma["ub"] == "peak_fma"]
    most = int(fma["threads"].max())
    at_most = float(fma.loc[fma["threads"] == most, "gflops"].max())
    assert most == NODE.cpus and float(fma["gflops"].max()) > 10 * at_most   # the one-thread run is the max
    peak = curves.node_fp64(prof)
    assert (peak.kernel, peak.threads) == ("peak_fma", most)
    assert peak.value == pytest.approx(at_most) == pytest.approx(view) == pytest.approx(host) == pytest.approx(web)
    assert curves.fp_peak(prof) == peak            # the roofline's ceiling
    assert "the most measured" in peak.describe()

    (row,) = [r for r in json.loads(cli("nodes", "--json").out) if r["name"] == NODE.name]
    assert row["fp64_gflops"] == pytest.approx(view) and "best_fp64_gflops" not in row
    table = cli("nodes")
    assert table.code == 0
    said = " ".join(table.out.split())
    assert "fp64_gflops: peak_fma at the most threads measured" in said
    assert "memory_triad_gbs: STREAM triad at the most threads measured, largest working set" in said
