"""Profiling a node type on every host of a cluster, through Slurm (`nodereg fleet`).

Slurm does the scheduling: `submit` writes one batch script, a job array with one task per host
(job.py), and hands it to sbatch held; each task is pinned to its host, then the job is released
(slurm.py). Each task runs `nodereg profile TYPE --host HOST` into the shared registry, or into a
bundle in a shared directory that `collect` merges. `status` reads the tasks' states from squeue
and sacct, the exit status each task writes, and which profiles have landed (status.py).
"""

# A fabric's profile (`nodereg fleet mpi TYPE`, fabric.py) is stored as a node of its own, named
# here so that `match`, which leaves such nodes out of its candidates, needs nothing else of the fleet.
FABRIC_PREFIX = "fabric:"


def fabric_node(node_type: str) -> str:
    """The node a type's fabric profile is stored under."""
    return f"{FABRIC_PREFIX}{node_type}"
