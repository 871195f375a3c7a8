"""`nodereg fleet submit`: which hosts, then one held job array, each task pinned, released.

The job is submitted held so that no task starts before every task is pinned to its host (an
array's tasks share one node list otherwise); if pinning fails half-way the job is cancelled and
nothing is left behind: no job, no manifest.
"""

from pathlib import Path

from registry.db import utcnow
from registry.errors import UserError
from registry.fleet import slurm
from registry.fleet.job import FleetJob


def plan_hosts(nodelist: str | None, partition: str | None, as_hosts: str | None) -> tuple[list[str], list[str]]:
    """(host each task records, Slurm node each task runs on).

    Normally one task per Slurm node, recorded under the node's name. `as_hosts` names the tasks'
    hosts instead, cycling over the Slurm nodes: a one-host test cluster poses as several hosts
    (`--nodelist vm --as-hosts a,b,c` runs three tasks on vm, recorded as hosts a, b and c).
    """
    pins = slurm.expand_hosts(nodelist) if nodelist else slurm.partition_nodes(partition)
    if as_hosts is None:
        return pins, pins
    hosts = slurm.expand_hosts(as_hosts)
    if len(pins) not in (1, len(hosts)):
        raise UserError(f"--as-hosts names {len(hosts)} hosts for {len(pins)} Slurm nodes: "
                        "give one name per node, or one node for them all")
    return hosts, [pins[i % len(pins)] for i in range(len(hosts))]


def submit(job: FleetJob) -> str:
    """Submit `job` (its tasks pinned, then released); writes its manifest; returns the job id."""
    try:
        job.log_dir.mkdir(parents=True, exist_ok=True)
        if job.to_dir is not None:
            job.to_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {exc.filename}: {exc.strerror}") from None
    job.job_id = slurm.submit_held(job.script())
    job.submitted_at = utcnow().isoformat()
    try:
        for task, node in enumerate(job.pins):
            try:
                slurm.pin(job.job_id, task, node)
            except UserError as exc:
                raise UserError(f"cannot pin task {task} to Slurm node {node} (job {job.job_id} cancelled): "
                                f"{exc}") from None
        job.save()
        slurm.release(job.job_id)
    except BaseException:
        slurm.cancel(job.job_id)
        for path in (job.manifest_path(), job.log_dir / f"{job.job_id}.sh"):
            Path(path).unlink(missing_ok=True)
        raise
    return job.job_id
