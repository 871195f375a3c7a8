"""`nodereg fleet mpi`: the MPI kernels between nodes, as one Slurm job across them, into the
profile of a fabric node (`fabric:TYPE`).

A node's own MPI profile (docs/mpi.md) says how fast its ranks exchange messages through shared
memory; an application of more ranks than one node holds also talks through the network between
nodes. This measures the same kernels (microbench/ub_mpi.c: ping-pong, Exchange, Allreduce) in one
job of several nodes of a type, `per_node` ranks on each, started by the job's own MPI launcher:
Open MPI then takes the allocation from Slurm, starts its daemons through it and picks the
fabric's transport itself (what the site's MPI programs get), not the node-local settings of a
single-node profile. Ranks are numbered round-robin over the nodes (`--rank-by node`), so the
ping-pong's two ranks, and every Exchange neighbour with two nodes, are on different nodes.

The job stores one profile (node `fabric:TYPE`, its hosts in `profiles.host`, the configs at
placement `across_nodes` with the job's nodes among their parameters) straight into the registry,
in one transaction, from its first node; `submit_and_wait` follows it to the end and turns every
way it can fail (Slurm missing, a host unknown or down, the job failing or running past its time)
into one line.
"""

import json
import shlex
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from registry.db.statement import execute
from registry.errors import UserError
from registry.fleet import fabric_node, slurm
from registry.values import plural

PLACEMENT = "across_nodes"
KERNELS = ("pingpong", "exchange", "allreduce")
POLL_S = 1.0
# sinfo's states of a node that will not run the job (a trailing '*' also means: not responding)
_UNUSABLE = ("down", "drain", "fail", "future", "inval", "unk", "power", "maint", "reboot")
# squeue's pending reasons that no wait will end
_HOPELESS = ("ReqNodeNotAvail", "NodeDown", "PartitionDown", "PartitionInactive", "BadConstraints",
             "PartitionNodeLimit", "InvalidAccount", "InvalidQOS")


@dataclass
class FabricJob:
    node: str                   # the node type whose fabric is measured
    hosts: list[str]            # the Slurm nodes of the job, in order
    per_node: int               # ranks on each
    log_dir: Path
    nodereg: list[str]          # how the job runs nodereg on its first node
    db_url: str                 # the registry the job stores into
    mode: str = "default"       # the kernels' message sizes and repetition length (quick/default/full)
    reps: int | None = None
    partition: str | None = None
    exclusive: bool = False
    sbatch_args: list[str] = field(default_factory=list)
    job_id: str | None = None
    # names the job's files: Slurm's job ids start again after a controller's state is reset (and wrap
    # round), and a finished job's exit status must not be taken for a new one's
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def file(self, suffix: str) -> Path:
        return self.log_dir / f"fabric_{self.token}.{suffix}"

    def task_args(self) -> list[str]:
        """The arguments of `nodereg fleet mpi-task` that the job runs."""
        return ["fleet", "mpi-task", self.node, "--hosts", ",".join(self.hosts), "--ranks-per-node",
                str(self.per_node), "--mode", self.mode, *(["--reps", str(self.reps)] if self.reps else [])]

    def script(self) -> str:
        """The batch script (bash): one job of all the hosts."""
        q = shlex.quote
        directives = ["--job-name=nodereg-fabric", f"--nodes={len(self.hosts)}",
                      f"--ntasks-per-node={self.per_node}", f"--nodelist={','.join(self.hosts)}",
                      f"--output={self.file('log')}"]
        directives += [f"--partition={self.partition}"] if self.partition else []
        directives += ["--exclusive"] if self.exclusive else []
        return "\n".join([
            "#!/bin/bash",
            *(f"#SBATCH {d}" for d in directives + list(self.sbatch_args)),
            f"# Written by `nodereg fleet mpi`: the MPI kernels between {len(self.hosts)} nodes of type "
            f"{self.node}, {plural(self.per_node, 'rank')} on each,",
            f"# into the profile of node {fabric_node(self.node)} in {self.db_url}.",
            "set -u",
            f"nodereg=({' '.join(map(q, self.nodereg))})",
            f'"${{nodereg[@]}}" --db {q(self.db_url)} {" ".join(map(q, self.task_args()))}',
            "rc=$?",
            f"echo \"$rc\" > {q(str(self.file('rc')))}",
            'exit "$rc"',
            ""])


def check_hosts(hosts: list[str], partition: str | None) -> None:
    """Every host known to Slurm (in the partition, if given) and able to run a job, or one line
    naming those that are not: a job asking for a node that is down would wait for ever."""
    if len(hosts) < 2:
        raise UserError(f"the MPI kernels between nodes need at least two hosts (-w 'cn[01-02]'), not {len(hosts)}")
    args = ["--noheader", "--Node", "--format=%N|%T", f"--nodes={','.join(hosts)}"]
    res = slurm.run("sinfo", *args, *([f"--partition={partition}"] if partition else []))
    states: dict[str, str] = {}
    for line in res.stdout.splitlines():
        name, _, state = line.strip().partition("|")
        states.setdefault(name, state.lower())
    unknown = [h for h in hosts if h not in states]
    if unknown:
        where = f" in partition {partition!r}" if partition else ""
        raise UserError(f"Slurm knows no node {', '.join(unknown)}{where} (see `sinfo -N`)")
    down = [f"{h} ({states[h]})" for h in hosts if states[h].endswith("*") or states[h].startswith(_UNUSABLE)]
    if down:
        raise UserError(f"node {', '.join(down)} cannot run jobs: the job would wait for it for ever "
                        "(`sinfo -R` says why; `scontrol update NodeName=... State=RESUME` once it is fixed)")


def submit(job: FabricJob) -> str:
    """Submit the job; its id (the script is kept as LOG_DIR/fabric_TOKEN.sh, beside its log and exit status)."""
    job.log_dir.mkdir(parents=True, exist_ok=True)
    script = job.script()
    out = slurm.run("sbatch", "--parsable", stdin=script).stdout.strip()
    job.job_id = out.split(";")[0]
    if not job.job_id.isdigit():
        raise UserError(f"sbatch answered {out!r}, not a job id")
    job.file("sh").write_text(script)
    return job.job_id


def _log_tail(job: FabricJob, lines: int = 3) -> str:
    try:
        text = job.file("log").read_text(errors="replace")
    except OSError:
        return "no log"
    kept = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept) or "empty log"


def _exit_status(job: FabricJob) -> int | None:
    try:
        return int(job.file("rc").read_text().strip())
    except (OSError, ValueError):
        return None


def wait(job: FabricJob, timeout_s: float, tick: Callable[[str], None] = lambda state: None) -> None:
    """Follow the job to its end; a UserError (the job cancelled first where it may still run) when
    it fails, cannot start, or runs past `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    gone_since = None
    while True:
        rc = _exit_status(job)
        if rc is not None:
            if rc != 0:
                raise UserError(f"fabric job {job.job_id} failed (exit status {rc}): {_log_tail(job)} "
                                f"(log: {job.file('log')})")
            return
        info = slurm.queue_job(job.job_id)
        state, reason = (info or {}).get("state", ""), (info or {}).get("reason", "")
        if state == "PENDING" and reason.startswith(_HOPELESS):
            slurm.cancel(job.job_id)
            raise UserError(f"fabric job {job.job_id} cannot start ({reason}): a node of "
                            f"{','.join(job.hosts)} is down or unavailable; the job was cancelled")
        if state and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "COMPLETED"):
            raise UserError(f"fabric job {job.job_id} ended {state}: {_log_tail(job)} (log: {job.file('log')})")
        if not state or state == "COMPLETED":   # ended (or forgotten) without its exit status: give the
            gone_since = gone_since or time.monotonic()   # shared file system a moment to show it
            if time.monotonic() - gone_since > 10:
                raise UserError(f"fabric job {job.job_id} ended without an exit status: {_log_tail(job)}")
        if time.monotonic() > deadline:
            slurm.cancel(job.job_id)
            raise UserError(f"fabric job {job.job_id} did not finish within {timeout_s:g} s (--timeout; "
                            f"it was {state.lower() or 'gone'}{f': {reason}' if reason not in ('', 'None') else ''}): "
                            "cancelled, nothing stored")
        tick(state.lower() or "ending")
        time.sleep(POLL_S)


def measure(node_type: str, hosts: list[str], per_node: int, mode: str, reps: int | None,
            advance: Callable = lambda c, w: None):
    """Inside the job, on its first node: run the kernels across the job's nodes and return the
    unstored profile record of the fabric node."""
    from registry import __version__
    from registry.inventory import collect
    from registry.microbench import mpi
    from registry.profile import mpi_runner
    from registry.profile.catalog import BY_NAME
    from registry.profile.stats import RepPolicy
    from registry.profile.store import ProfileRecord
    from registry.profile.sweep import MPI_SIZES, Config
    from registry.db.time import utcnow

    started, t0 = utcnow(), time.monotonic()
    ranks = len(hosts) * per_node
    configs = [Config(BY_NAME[k], ranks, PLACEMENT, tuple(range(per_node)), msg_bytes=size, nodes=len(hosts))
               for k in KERNELS for size in MPI_SIZES[mode]]
    policy = RepPolicy.for_mode(mode, reps)
    node_mpi = mpi.find("the MPI kernels between nodes need one on every node")
    program = mpi.binary(node_mpi)
    ran, records = mpi.launch(node_mpi, program, ranks, list(KERNELS), list(MPI_SIZES[mode]),
                              policy.min_reps if policy.fixed else policy.max_reps, policy.target_s,
                              mpi_runner.timeout_s(configs, policy), per_node=per_node)
    seen = list(dict.fromkeys(ran.get("hosts", [])))
    if len(seen) != len(hosts):
        raise UserError(f"the {ranks} ranks ran on {plural(len(seen), 'host')} ({', '.join(seen)}), not on the job's "
                        f"{len(hosts)} nodes: the launcher did not take Slurm's allocation (is this MPI built with "
                        "Slurm support?)")
    measurements = mpi_runner.measurements(configs, records, ran["cpus"], policy, advance)
    inventory = replace(collect(), hostname=",".join(hosts))
    return ProfileRecord(node=fabric_node(node_type), inventory=inventory, mode=mode, measurements=measurements,
                         started_at=started, finished_at=utcnow(), duration_s=time.monotonic() - t0,
                         tool_version=__version__, compiler=node_mpi.version or None,
                         cflags=f"{Path(node_mpi.mpirun).name} -n {ranks} ({per_node} per node) across "
                                f"{','.join(seen)}")


_FIGURES = """
SELECT p.uid, p.host, u.name AS kernel, c.threads AS ranks, c.config_key, r.value AS us, r.bandwidth_gbs, r.unstable
FROM profiles p JOIN nodes n ON n.node_id = p.node_id JOIN profile_runs r ON r.profile_id = p.profile_id
JOIN ub_configs c ON c.config_id = r.config_id JOIN microbenchmarks u ON u.ub_id = c.ub_id
WHERE p.profile_id = (SELECT MAX(p2.profile_id) FROM profiles p2 JOIN nodes n2 ON n2.node_id = p2.node_id
                      WHERE n2.name = :node)
ORDER BY u.name, c.threads, r.run_id"""


def latest(conn, node: str) -> dict | None:
    """The latest profile of fabric node `node`: {node, uid, host, rows: [{kernel, ranks, nodes, bytes,
    us, bandwidth_gbs, unstable}]} (None: none stored)."""
    rows = execute(conn, _FIGURES, {"node": node}).mappings().all()
    if not rows:
        return None
    figures = []
    for r in rows:
        key = json.loads(r["config_key"])
        figures.append({"kernel": r["kernel"], "ranks": r["ranks"], "nodes": key.get("nodes"), "bytes": key["bytes"],
                        "us": r["us"], "bandwidth_gbs": r["bandwidth_gbs"], "unstable": bool(r["unstable"])})
    figures.sort(key=lambda f: (f["kernel"], f["bytes"]))
    return {"node": node, "uid": rows[0]["uid"], "host": rows[0]["host"], "rows": figures}
