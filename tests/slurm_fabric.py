"""A real two-node Slurm cluster on this one host, for the MPI kernels between nodes (`nodereg fleet
mpi`, tests/test_fleet_fabric.py).

Debian's slurmd is built without multiple-slurmd support (one slurmd per host name), so each node
is a slurmd in namespaces of its own: a network namespace (`ip netns`) joined to a bridge on the
host by a veth pair, with its own address; a UTS namespace whose host name is the node's name
(`cn01`, `cn02`); a mount namespace in which /etc/hosts names the nodes (the host's own file is
not changed). Each slurmd runs on its own half of the host's CPUs (`taskset`; the jobs' processes
inherit it, as they inherit a cgroup's CPUs on a real node). munged and slurmctld run on the host,
the controller listening on the bridge's address. A job of both nodes then really spans two
"hosts" as Slurm and Open MPI see them: Open MPI starts its daemon on the second node through
srun, and the ranks talk over TCP between the two network namespaces, not through shared memory.

Needs root, iproute2, util-linux (nsenter, unshare, taskset), Slurm and Open MPI; without them the
tests skip with the reason (NODEREG_REQUIRE_SLURM / NODEREG_REQUIRE_MPI: a failure instead).
Everything is removed at the end: daemons, namespaces, bridge.
"""

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import between_workers
from slurm_cluster import (QUIET, SlurmCluster, SlurmConf, _unavailable, check_installed, conf, prepare,
                           start_munged, stop, wait_idle)

from registry.microbench import mpi

NODES = ("cn01", "cn02")
PARTITION = "fabric"
TOOLS = ("ip", "nsenter", "unshare", "taskset", "mount")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Network:
    """A bridge on the host and one network namespace per node, on a /24 of their own (named after
    this process, so that two test runs on one host do not meet)."""

    def __init__(self) -> None:
        tag = os.getpid() % 100000
        self.bridge, self.subnet = f"nrbr{tag}", f"10.{200 + tag % 50}.{tag % 250}"
        self.host_ip = f"{self.subnet}.1"
        self.spaces: dict[str, str] = {}    # node -> namespace
        self.addresses: dict[str, str] = {}

    def up(self, nodes) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, node in enumerate(nodes):
            ns, veth = f"{self.bridge}{node}", f"{self.bridge}v{i}"
            _ip("netns", "add", ns)
            self.spaces[node], self.addresses[node] = ns, f"{self.subnet}.{11 + i}"
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[node]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def down(self) -> None:
        for ns in self.spaces.values():
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)


def _cpu_halves() -> list[list[int]]:
    cpus = sorted(os.sched_getaffinity(0))
    half = max(1, len(cpus) // 2)
    return [cpus[:half], cpus[half:] or cpus[:half]]


@pytest.fixture(scope="module")
def fabric_cluster(request, tmp_path_factory):
    """A running two-node Slurm cluster (nodes cn01 and cn02, partition `fabric`) on this host."""
    check_installed()
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        _unavailable(f"the two-node test cluster needs {', '.join(missing)} (iproute2, util-linux)")
    if mpi.missing():
        if os.environ.get("NODEREG_REQUIRE_MPI"):
            pytest.fail(f"NODEREG_REQUIRE_MPI is set but {mpi.missing()}")
        pytest.skip(f"{mpi.missing()}: {mpi.INSTALL_HINT}")
    with between_workers(request, "slurm"):   # one Slurm cluster at a time (tests/slurm_cluster.py)
        yield from _two_node_cluster(tmp_path_factory)


def _two_node_cluster(tmp_path_factory):
    net = Network()
    try:
        net.up(NODES)
    except subprocess.CalledProcessError as exc:
        net.down()
        _unavailable(f"network namespaces cannot be made here ({' '.join(exc.cmd)}: {exc.stderr.strip()})")
    root = Path(tmp_path_factory.mktemp("slurm-fabric"))
    key = prepare(root, list(NODES))
    host = socket.gethostname().split(".")[0]
    cluster = SlurmCluster(root, root / "slurm.conf", NODES[0], PARTITION)
    halves = _cpu_halves()
    cluster.conf.write_text(conf(root, f"{host}({net.host_ip})", PARTITION, [
        f"NodeName={n} NodeAddr={net.addresses[n]} CPUs={len(cpus)} State=UNKNOWN" for n, cpus in zip(NODES, halves)]))
    hosts = root / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + f"{net.host_ip} {host}\n"
                     + "".join(f"{net.addresses[n]} {n}\n" for n in NODES))
    with SlurmConf(cluster.conf):
        procs = []
        try:
            procs.append(start_munged(cluster, key))
            procs.append(subprocess.Popen(["slurmctld", "-D", "-f", str(cluster.conf)], **QUIET))
            for node, cpus in zip(NODES, halves):   # each exec()s the next: the process is slurmd's
                inner = (f"hostname {node} && mount --bind {hosts} /etc/hosts && exec taskset -c "
                         f"{','.join(map(str, cpus))} slurmd -D -f {cluster.conf}")
                procs.append(subprocess.Popen(["nsenter", f"--net=/run/netns/{net.spaces[node]}", "unshare", "--uts",
                                               "--mount", "sh", "-c", inner], **QUIET))
            wait_idle(cluster, procs)
            yield cluster
        finally:
            stop(procs)
            net.down()
