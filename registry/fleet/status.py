"""`nodereg fleet status`: each host's task (pending, running, done, failed) and its profile.

A task's state comes, in order, from the exit status its script wrote (`JOB_TASK.rc`: it ran to
the end), from squeue (the controller remembers a job for some minutes after it ends), from sacct
(where the cluster keeps accounting), else it is unknown. Whether its profile landed is read from
the registry (a profile of the type from that host, started after the job was submitted) or,
with --to-dir, from the bundle's presence. Failed tasks carry the tail of their log.
"""

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from registry.db import open_registry
from registry.errors import UserError
from registry.fleet import slurm
from registry.fleet.job import FleetJob
from registry.values import plural

# Slurm's job states -> ours; any state not listed (FAILED, CANCELLED, TIMEOUT, NODE_FAIL,
# OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, PREEMPTED, ...) is a failure
_STATES = {"PENDING": "pending", "REQUEUED": "pending", "CONFIGURING": "running", "RUNNING": "running",
           "COMPLETING": "running", "SUSPENDED": "running", "RESIZING": "running", "COMPLETED": "done"}
CLOCK_SLACK = timedelta(minutes=2)   # hosts' clocks against the submitting one's
LOG_LINES = 3


@dataclass
class TaskStatus:
    task: int
    host: str
    slurm_node: str
    state: str                 # pending | running | done | failed | unknown
    detail: str = ""           # why pending, how it failed (exit status, log tail)
    profile: str | None = None # uid of the landed profile, or the bundle's file name

    def to_dict(self) -> dict:
        return asdict(self)


def log_tail(job: FleetJob, task: int, lines: int = LOG_LINES) -> str:
    try:
        text = job.task_file(task, "log").read_text(errors="replace")
    except OSError:
        return "no log"
    kept = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept) or "empty log"


def _exit_status(job: FleetJob, task: int) -> int | None:
    try:
        return int(job.task_file(task, "rc").read_text().strip())
    except (OSError, ValueError):
        return None


def _from_slurm(info: dict) -> tuple[str, str]:
    state = _STATES.get(info["state"], "failed")
    if state == "pending":
        return state, info.get("reason", "")
    if state == "failed":
        code = info.get("exit_code")
        return state, info["state"].lower() + (f" (exit {code})" if code else "")
    return state, ""


def task_states(job: FleetJob) -> list[TaskStatus]:
    queued = slurm.queue(job.job_id)
    unseen = [t for t in range(len(job.hosts)) if t not in queued and _exit_status(job, t) is None]
    accounted = slurm.accounting(job.job_id) if unseen else {}
    out = []
    for task, host in enumerate(job.hosts):
        rc = _exit_status(job, task)
        info = queued.get(task) or accounted.get(task)
        node = (info or {}).get("node") or job.pins[task]
        if rc is not None:
            state, detail = ("done", "") if rc == 0 else ("failed", f"exit {rc}")
        elif info:
            state, detail = _from_slurm(info)
        else:
            state, detail = "unknown", "Slurm no longer knows the task and it wrote no exit status"
        if state in ("failed", "unknown"):
            detail = f"{detail}: {log_tail(job, task)}"
        out.append(TaskStatus(task, host, node, state, detail))
    return out


def landed_profiles(conn: sa.Connection, job: FleetJob) -> dict[str, str]:
    """{host: uid} of the job's hosts' profiles of its type that started after it was submitted."""
    since = datetime.fromisoformat(job.submitted_at) - CLOCK_SLACK
    rows = conn.execute(sa.text(
        "SELECT p.host, p.uid FROM profiles p JOIN nodes n ON n.node_id = p.node_id "
        "WHERE n.name = :node AND p.started_at >= :since ORDER BY p.profile_id"), {"node": job.node, "since": since})
    hosts = set(job.hosts)
    return {host: uid for host, uid in rows if host in hosts}


def landed_bundles(job: FleetJob) -> dict[str, str]:
    """{host: bundle file name} of the bundles the job's tasks have written."""
    return {job.hosts[t]: job.bundle(t).name for t in range(len(job.hosts)) if job.bundle(t).exists()}


def landed(job: FleetJob) -> tuple[dict[str, str], str | None]:
    """({host: profile uid or bundle name} of what the job's tasks delivered, a note when the job's
    registry cannot be read: the tasks' states are worth showing anyway)."""
    if job.to_dir:
        return landed_bundles(job), None
    try:
        reg = open_registry(job.db_url, readonly=True)
        try:
            with reg.connect() as conn:
                return landed_profiles(conn, job), None
        finally:
            reg.close()
    except UserError as exc:
        return {}, f"cannot tell which profiles landed: {exc}"


def summary(job: FleetJob, tasks: list[TaskStatus]) -> str:
    counts = {s: sum(t.state == s for t in tasks) for s in ("done", "running", "pending", "failed", "unknown")}
    states = ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in ("done", "failed"))
    landed = sum(t.profile is not None for t in tasks)
    where = "bundles written" if job.to_dir else "profiles in the registry"
    return f"job {job.job_id}, node type {job.node}, {plural(len(tasks), 'host')}: {states}; {landed} {where}"
