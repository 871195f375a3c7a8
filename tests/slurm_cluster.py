"""A real one-host Slurm cluster for the tests: munged, slurmctld and slurmd from Debian's packages
(`munge`, `slurmctld`, `slurmd`, `slurm-client`; .ci/run installs them), started in the foreground
with a minimal slurm.conf naming this host with its CPUs. Keys, state, spool, sockets and logs
live in a temporary directory; the ports are free ones picked at start, so nothing of a system
Slurm is touched. The daemons run as root (as CI does); Slurm's client commands find the cluster
through SLURM_CONF, set in this process's environment while the fixture lives.

Without the binaries (or without root) the tests that need it are skipped, with the reason; with
NODEREG_REQUIRE_SLURM=1 (as in CI) that is a failure instead.
"""

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import between_workers

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "sinfo", "scancel")
QUIET = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}   # the daemons log to ROOT/log
QUIET_S = 180   # for the node to be idle again after a test: cancelled steps end within KillWait + their exit


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    node: str           # the one node's name (this host's short name)
    partition: str

    def log_tail(self, lines: int = 20) -> str:
        """The daemons' last log lines, for assertion messages."""
        out = []
        for log in sorted((self.root / "log").glob("*.log")):
            out += [f"--- {log.name}", *log.read_text(errors="replace").splitlines()[-lines:]]
        return "\n".join(out)

    def settle(self, timeout_s: float = QUIET_S) -> None:
        """Leave the cluster as a test found it: no job left (any left is cancelled) and the node idle,
        resumed if Slurm drained it (a step it could not kill in time on a loaded machine drains the
        node, and every later job would wait 'pending' behind it). Fails, saying so, past `timeout_s`."""
        subprocess.run(["scancel", "--full", "--partition", self.partition], capture_output=True, check=False)
        deadline = time.monotonic() + timeout_s
        state, jobs = "", ""
        while time.monotonic() < deadline:
            jobs = subprocess.run(["squeue", "--noheader", "--format=%i %T"], capture_output=True,
                                  text=True).stdout.strip()
            state = subprocess.run(["sinfo", "--noheader", "--format=%T"], capture_output=True,
                                   text=True).stdout.strip()
            if not jobs and state == "idle":
                return
            if state.startswith(("drain", "down")) and not jobs:
                subprocess.run(["scontrol", "update", f"NodeName={self.node}", "State=RESUME"],
                               capture_output=True, check=False)
            time.sleep(1)
        pytest.fail(f"the test Slurm cluster did not settle in {timeout_s:.0f} s (node {state or 'unknown'}, "
                    f"jobs: {jobs or 'none'}):\n{self.log_tail()}")


def _unavailable(reason: str) -> None:
    if os.environ.get("NODEREG_REQUIRE_SLURM"):
        pytest.fail(f"NODEREG_REQUIRE_SLURM is set but {reason}")
    pytest.skip(f"{reason}: apt-get install slurmctld slurmd slurm-client munge (as .ci/run does)")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def conf(root: Path, controller: str, partition: str, nodes: list[str]) -> str:
    """A minimal slurm.conf: the controller as `name(address)`, one `NodeName=...` line per node.
    Each slurmd's spool, pid file and log are named for its node (%n), so several can share `root`."""
    ctld_port, slurmd_port = _free_ports(2)
    node_lines = "\n".join(nodes)
    return f"""ClusterName=nodereg-test
SlurmctldHost={controller}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/spool/%n/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=600
{node_lines}
PartitionName={partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        p.terminate()
    for p in reversed(procs):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_idle(cluster: SlurmCluster, procs: list[subprocess.Popen], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dead = [p.args[0] for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited at start:\n{cluster.log_tail()}")
        res = subprocess.run(["sinfo", "--noheader", "--format=%T"], capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip() == "idle":
            return
        time.sleep(0.2)
    raise RuntimeError(f"the Slurm node did not come up in {timeout_s:.0f} s:\n{cluster.log_tail()}")


def prepare(root: Path, nodes: list[str]) -> Path:
    """The directories and munge key of a cluster in `root`; the key's path."""
    for sub in ("munge", "state", "log", *(f"spool/{n}" for n in nodes)):
        (root / sub).mkdir(parents=True)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    return key


def start_munged(cluster: SlurmCluster, key: Path) -> subprocess.Popen:
    """munged on the cluster's own socket, once it answers."""
    munge, root = cluster.root / "munge", cluster.root
    proc = subprocess.Popen(["munged", "--foreground", "--force", f"--socket={munge}/munge.socket",
                             f"--key-file={key}", f"--pid-file={munge}/munged.pid",
                             f"--log-file={root}/log/munged.log", f"--seed-file={munge}/seed"], **QUIET)
    deadline = time.monotonic() + 10
    while not (munge / "munge.socket").exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            stop([proc])
            raise RuntimeError(f"munged did not start:\n{cluster.log_tail()}")
        time.sleep(0.05)
    return proc


def check_installed() -> None:
    """Skip (or, with NODEREG_REQUIRE_SLURM, fail) where the daemons cannot run."""
    missing = [b for b in DAEMONS + CLIENTS if shutil.which(b) is None]
    if missing:
        _unavailable(f"Slurm is not installed ({', '.join(missing)} not found)")
    if os.geteuid() != 0:
        _unavailable("the one-host Slurm cluster runs its daemons as root, and this is not root")


class SlurmConf:
    """SLURM_CONF pointed at a test cluster's configuration while the cluster lives."""

    def __init__(self, path: Path):
        self.path, self.old = path, os.environ.get("SLURM_CONF")

    def __enter__(self):
        os.environ["SLURM_CONF"] = str(self.path)

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = self.old


@pytest.fixture(scope="module")
def slurm_cluster(request, tmp_path_factory):
    """A running one-host Slurm cluster (module-scoped: starting one takes a few seconds). One Slurm
    cluster at a time in a parallel run: its node takes the host's CPUs (tests/slurm_fabric.py too)."""
    check_installed()
    with between_workers(request, "slurm"):
        yield from _one_host_cluster(tmp_path_factory)


def _one_host_cluster(tmp_path_factory):
    root = Path(tmp_path_factory.mktemp("slurm"))
    node, partition = socket.gethostname().split(".")[0], "fleet"
    key = prepare(root, [node])
    cluster = SlurmCluster(root, root / "slurm.conf", node, partition)
    cluster.conf.write_text(conf(root, f"{node}(127.0.0.1)", partition,
                                 [f"NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN"]))
    with SlurmConf(cluster.conf):
        procs = [start_munged(cluster, key)]
        try:
            procs.append(subprocess.Popen(["slurmctld", "-D", "-f", str(cluster.conf)], **QUIET))
            procs.append(subprocess.Popen(["slurmd", "-D", "-f", str(cluster.conf)], **QUIET))
            wait_idle(cluster, procs)
            yield cluster
        finally:
            stop(procs)
