"""Slurm's own commands (sbatch, scontrol, squeue, sacct, sinfo, scancel), run without a shell.

Every failure becomes one line: a command missing from PATH, one that does not answer, one that
refuses (a partition that does not exist, a malformed host list).
"""

import re
import shutil
import subprocess

from registry.errors import UserError

TIMEOUT_S = 60
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_PREFIX = re.compile(r"^\s*(sbatch|scontrol|squeue|sacct|sinfo|scancel|slurm_\w+)(: error)?:\s*")


def _reason(stderr: str) -> str:
    lines = [_PREFIX.sub("", ln).strip() for ln in stderr.splitlines()]
    return "; ".join(dict.fromkeys(ln for ln in lines if ln)) or "no message"


def run(cmd: str, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which(cmd)
    if exe is None:
        raise UserError(f"Slurm's {cmd} is not on PATH: run `nodereg fleet` where Slurm's commands are "
                        "installed (a login node of the cluster)")
    try:
        res = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UserError(f"{cmd} did not answer in {TIMEOUT_S} s: is the Slurm controller up?") from None
    if check and res.returncode != 0:
        raise UserError(f"{cmd} failed: {_reason(res.stderr)}")
    return res


def expand_hosts(hostlist: str) -> list[str]:
    """A Slurm host list ('cn[01-04],gpu7') as host names, in order, each once."""
    text = hostlist.strip()
    if any(c in text for c in "[]"):
        hosts = run("scontrol", "show", "hostnames", text).stdout.split()
    else:
        hosts = [h.strip() for h in text.split(",")]
    bad = [h for h in hosts if not _HOST.match(h)]
    if bad or not hosts:
        raise UserError(f"malformed host list {hostlist!r}: expected Slurm's syntax, e.g. cn[01-04],gpu7")
    return list(dict.fromkeys(hosts))


def partition_nodes(partition: str | None) -> list[str]:
    """The nodes of `partition` (of every partition when None), each once."""
    args = ["--noheader", "--Node", "--format=%N"] + ([f"--partition={partition}"] if partition else [])
    nodes = list(dict.fromkeys(run("sinfo", *args).stdout.split()))
    if not nodes:
        where = f"partition {partition!r}" if partition else "this cluster"
        raise UserError(f"{where} has no nodes, or does not exist (see `sinfo`)")
    return nodes


def submit_held(script: str) -> str:
    """Submit a batch script held (its tasks wait for `release`); returns the job id."""
    out = run("sbatch", "--parsable", "--hold", stdin=script).stdout.strip()
    job = out.split(";")[0]
    if not job.isdigit():
        raise UserError(f"sbatch answered {out!r}, not a job id")
    return job


def pin(job: str, task: int, node: str) -> None:
    """Make array task `task` run on `node` (and nowhere else)."""
    run("scontrol", "update", f"JobId={job}_{task}", f"ReqNodeList={node}")


def release(job: str) -> None:
    run("scontrol", "release", job)


def cancel(job: str) -> None:
    """Best effort: used while undoing a submission that failed half-way."""
    run("scancel", job, check=False)


def _table(res: subprocess.CompletedProcess, width: int) -> list[list[str]]:
    if res.returncode != 0:
        return []
    rows = [ln.split("|") for ln in res.stdout.splitlines() if ln.strip()]
    return [r for r in rows if len(r) >= width]


def queue(job: str) -> dict[int, dict]:
    """Array task -> {state, reason, node} of the tasks the controller still knows (for a while
    after they end: MinJobAge)."""
    res = run("squeue", f"--jobs={job}", "--states=all", "--array", "--noheader", "--format=%K|%T|%N|%r",
              check=False)  # a job the controller has forgotten is an error to squeue
    return {int(task): {"state": state, "reason": reason, "node": node}
            for task, state, node, reason in _table(res, 4) if task.isdigit()}


def queue_job(job: str) -> dict | None:
    """{state, reason} of a job that is not an array, while the controller knows it (None: not)."""
    res = run("squeue", f"--jobs={job}", "--states=all", "--noheader", "--format=%T|%r", check=False)
    rows = _table(res, 2)
    return {"state": rows[0][0], "reason": rows[0][1]} if rows else None


def accounting(job: str) -> dict[int, dict]:
    """Array task -> {state, exit_code, node} from Slurm's accounting, where the cluster keeps it
    (sacct says so and fails where it does not: nothing then)."""
    if shutil.which("sacct") is None:
        return {}
    res = run("sacct", f"--jobs={job}", "--allocations", "--noheader", "--parsable2",
              "--format=JobID,State,ExitCode,NodeList", check=False)
    out = {}
    for job_id, state, exit_code, node in _table(res, 4):
        _, _, task = job_id.partition("_")
        if task.isdigit():
            out[int(task)] = {"state": state.split()[0], "exit_code": exit_code, "node": node}
    return out
