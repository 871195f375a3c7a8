"""`nodereg fleet mpi`: the MPI kernels between two nodes, one Slurm job, into a fabric profile, on
a real two-node cluster made on this host (tests/slurm_fabric.py: each slurmd in namespaces of its
own, the ranks talking over TCP between them).

The registry is a DuckDB file: the job stores from its first node, inside that node's network
namespace, where the PostgreSQL of pg_virtualenv (listening on the host's loopback) is out of
reach; the storing itself is the profile's own, tested on both backends elsewhere.
"""

import json
import subprocess

import pytest
from conftest import assert_one_line_error, fetch_rows
from slurm_fabric import PARTITION, fabric_cluster  # noqa: F401 - the fixture

TYPE = "cnx"
QUICK_SIZES = [8, 1024, 65536, 4 * 1024 * 1024]


@pytest.fixture(autouse=True)
def settled(fabric_cluster):  # noqa: F811
    fabric_cluster.settle()
    yield
    subprocess.run(["scontrol", "update", "NodeName=cn02", "State=RESUME"], capture_output=True, check=False)
    fabric_cluster.settle()


def fabric(cli, tmp_path, *args: str):
    return cli("fleet", "mpi", TYPE, "-p", PARTITION, "--log-dir", str(tmp_path / "logs"), *args)


def test_fabric_profile_across_two_nodes(cli, db_url, tmp_path, fabric_cluster):  # noqa: F811
    res = fabric(cli, tmp_path, "-w", "cn[01-02]", "--mode", "quick", "--reps", "3", "--timeout", "600", "--json")
    assert res.code == 0, f"{res.err}\n{fabric_cluster.log_tail()}"
    out = json.loads(res.out)
    assert out["node"] == f"fabric:{TYPE}" and out["host"] == "cn01,cn02"
    rows = out["rows"]
    assert sorted((r["kernel"], r["bytes"]) for r in rows) == sorted(
        (k, b) for k in ("allreduce", "exchange", "pingpong") for b in QUICK_SIZES)
    assert all(r["ranks"] == 2 and r["nodes"] == 2 and r["us"] > 0 for r in rows)
    ping = {r["bytes"]: r for r in rows if r["kernel"] == "pingpong"}
    # over TCP between the nodes: a 4 MiB message takes longer than 8 B, and moves more bytes per second
    assert ping[4 * 1024 * 1024]["us"] > ping[8]["us"]
    assert ping[4 * 1024 * 1024]["bandwidth_gbs"] > ping[8]["bandwidth_gbs"] > 0
    # what the registry holds: one profile of the fabric node, its hosts, the configs across nodes in us
    profile, = fetch_rows(db_url, "SELECT p.host, p.cflags, p.mode FROM profiles p "
                                  "JOIN nodes n ON n.node_id = p.node_id WHERE n.name = 'fabric:cnx'")
    assert profile["host"] == "cn01,cn02" and "across cn01,cn02" in profile["cflags"] and profile["mode"] == "quick"
    configs = fetch_rows(db_url, "SELECT DISTINCT c.placement, c.unit, c.threads FROM ub_configs c "
                                 "JOIN profile_runs r ON r.config_id = c.config_id")
    assert configs == [{"placement": "across_nodes", "unit": "us", "threads": 2}]
    assert fetch_rows(db_url, "SELECT COUNT(*) AS n FROM profile_reps") == [{"n": 12 * 3}]


def test_bad_hosts_and_a_down_node_submit_nothing(cli, db_url, tmp_path, fabric_cluster):  # noqa: F811
    res = fabric(cli, tmp_path, "-w", "cn01")
    assert_one_line_error(res, "need at least two hosts")
    res = fabric(cli, tmp_path, "-w", "cn[01-03]")
    assert_one_line_error(res, "Slurm knows no node cn03")
    subprocess.run(["scontrol", "update", "NodeName=cn02", "State=DOWN", "Reason=test"], check=True)
    res = fabric(cli, tmp_path, "-w", "cn[01-02]")
    assert_one_line_error(res, "node cn02 (down")
    assert not list((tmp_path / "logs").glob("fabric_*.sh"))    # nothing was submitted


def test_failed_and_overdue_jobs_are_one_line_and_store_nothing(cli, db_url, tmp_path, fabric_cluster):  # noqa: F811
    res = fabric(cli, tmp_path, "-w", "cn[01-02]", "--nodereg", "false", "--timeout", "300")
    assert_one_line_error(res, "failed (exit status 1)")
    res = fabric(cli, tmp_path, "-w", "cn[01-02]", "--nodereg", "sh -c 'sleep 600'", "--timeout", "3")
    assert_one_line_error(res, "did not finish within 3 s")
    assert fetch_rows(db_url, "SELECT COUNT(*) AS n FROM profiles") == [{"n": 0}]
