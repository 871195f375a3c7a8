"""A fleet job: what it profiles where, its batch script, and its manifest.

The manifest (`LOG_DIR/JOB.json`, beside the batch script `JOB.sh` and each task's log
`JOB_TASK.log` and exit status `JOB_TASK.rc`) is what `fleet status` reads: Slurm forgets a job
some minutes after it ends, and knows nothing of hosts posing under other names or of registries.
"""

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from registry.errors import UserError
from registry.values import plural

# one task's files: Slurm's output pattern and the shell's own spelling of the same name
TASK_OUTPUT = "%A_%a"
SHELL_TASK = "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"


@dataclass
class FleetJob:
    node: str                       # the node type profiled
    hosts: list[str]                # task i records its profile under hosts[i] ...
    pins: list[str]                 # ... and runs on Slurm node pins[i]
    log_dir: Path
    nodereg: list[str]              # how a task runs nodereg on its host
    db_url: str | None = None       # the shared registry the tasks store into, or:
    to_dir: Path | None = None      # the shared directory they write bundles into
    profile_args: list[str] = field(default_factory=list)
    partition: str | None = None
    exclusive: bool = False
    sbatch_args: list[str] = field(default_factory=list)
    job_id: str | None = None
    submitted_at: str | None = None  # ISO, UTC

    def task_file(self, task: int, suffix: str) -> Path:
        return self.log_dir / f"{self.job_id}_{task}.{suffix}"

    def bundle(self, task: int) -> Path | None:
        return self.to_dir / f"{self.hosts[task]}_{self.job_id}.zip" if self.to_dir else None

    def _directives(self) -> list[str]:
        lines = ["--job-name=nodereg-fleet", f"--array=0-{len(self.hosts) - 1}", "--nodes=1", "--ntasks=1",
                 f"--output={self.log_dir / TASK_OUTPUT}.log"]
        if self.partition:
            lines.append(f"--partition={self.partition}")
        if self.exclusive:
            lines.append("--exclusive")
        return [f"#SBATCH {d}" for d in lines + list(self.sbatch_args)]

    def _profile(self, db: str) -> str:
        q = shlex.quote
        return " ".join(['"${nodereg[@]}"', "--db", db, "profile", '"$node"', '--host "$host"',
                         *map(q, self.profile_args)])

    def _body(self) -> list[str]:
        if self.to_dir is None:
            return [self._profile(shlex.quote(self.db_url or "")), "rc=$?"]
        final = f'{shlex.quote(str(self.to_dir))}/"${{host}}_${{SLURM_ARRAY_JOB_ID}}.zip"'
        part = f'{shlex.quote(str(self.to_dir))}/".${{host}}_${{SLURM_ARRAY_JOB_ID}}.zip.part"'
        return ["# a registry of its own on local disk, exported as a bundle; renamed into place when whole",
                'work=$(mktemp -d)',
                'db="duckdb:///$work/registry.duckdb"',
                self._profile('"$db"') + " \\",
                '  && "${nodereg[@]}" --db "$db" export "$work/bundle.zip" \\',
                f'  && cp "$work/bundle.zip" {part} && mv {part} {final}',
                "rc=$?",
                'rm -rf "$work"']

    def script(self) -> str:
        """The batch script (bash): one array task per host."""
        q = shlex.quote
        where = f"the registry {self.db_url}" if self.to_dir is None else f"bundles in {self.to_dir}"
        about = " ".join(f"profile node type {self.node} on {plural(len(self.hosts), 'host')} into {where}".split())
        return "\n".join([
            "#!/bin/bash",
            *self._directives(),
            f"# Written by `nodereg fleet submit`: {about}.",
            "# Task i records its profile as measured on hosts[i] and runs on that Slurm node (submit pins",
            "# each task with `scontrol update ReqNodeList=` before it releases the held job).",
            "set -u",
            f"node={q(self.node)}",
            f"hosts=({' '.join(map(q, self.hosts))})",
            'host="${hosts[$SLURM_ARRAY_TASK_ID]}"',
            f"nodereg=({' '.join(map(q, self.nodereg))})",
            'echo "nodereg fleet: task $SLURM_ARRAY_TASK_ID profiles $node as host $host on $(hostname)"',
            *self._body(),
            f'echo "$rc" > {q(str(self.log_dir))}/"{SHELL_TASK}.rc"',
            'exit "$rc"',
            ""])

    def manifest_path(self) -> Path:
        return self.log_dir / f"{self.job_id}.json"

    def save(self) -> None:
        data = {**asdict(self), "log_dir": str(self.log_dir), "to_dir": str(self.to_dir) if self.to_dir else None}
        self.manifest_path().write_text(json.dumps(data, indent=2))
        (self.log_dir / f"{self.job_id}.sh").write_text(self.script())


def load(log_dir: Path, job_id: str | None) -> FleetJob:
    """The manifest of job `job_id` in `log_dir` (None: the latest submitted from there)."""
    if job_id is None:
        found = sorted(log_dir.glob("*.json"), key=lambda p: (len(p.stem), p.stem)) if log_dir.is_dir() else []
        if not found:
            raise UserError(f"no fleet job has been submitted with logs in {log_dir} "
                            "(pass --log-dir where they are)")
        path = found[-1]
    else:
        path = log_dir / f"{job_id}.json"
        if not path.exists():
            raise UserError(f"no fleet job {job_id} in {log_dir}: pass --log-dir where its logs are "
                            f"(the job ids there: {', '.join(sorted(p.stem for p in log_dir.glob('*.json'))) or 'none'})")
    try:
        data = json.loads(path.read_text())
        data["log_dir"] = Path(data["log_dir"])
        data["to_dir"] = Path(data["to_dir"]) if data.get("to_dir") else None
        return FleetJob(**data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UserError(f"fleet manifest {path} is unreadable ({exc})") from None
