"""What one Spare Cores server folder holds, once parsed: plain records, no database.

The parsers (registry.io.sparecores.server) fill these; the importer (registry.io.sparecores.store)
writes them. Keeping them apart lets the parsers be tested and fuzzed without a registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Measurement:
    """One micro-benchmark figure: a config of the 'sparecores' suite measured on this server.

    `value` is the tool's own figure in `unit`; `threads` is 1 for single-thread configs and 0 for
    "all of the node's vCPUs" (the config_key says `1t` or `all`).
    """

    config_key: str            # sparecores:<task>:<what>[:<param>...]:<1t|all>
    microbenchmark: str        # sc-<task>
    family: str                # bandwidth | latency | compute | crypto | system
    unit: str
    higher_is_better: bool
    threads: int               # 1, or 0 = all vCPUs
    value: float
    task: str                  # the upstream task folder it came from
    ws_bytes: int | None = None


@dataclass(frozen=True)
class AppResult:
    """One application figure as a measured run: the time of a fixed job, work / rate."""

    app: str                   # TASK:... (geekbench:clang:single, compression:zstd-3:compress:1t)
    threads: int | None        # 1 for single-threaded results, None for all-CPU results
    time_s: float              # work / rate
    work: float                # the fixed job, in `unit` x seconds (see registry.io.sparecores.apps)
    rate: float                # the tool's throughput, in `unit`
    unit: str
    task: str


@dataclass(frozen=True)
class TaskRun:
    """The meta.json of one task: when it ran, with what, and how it ended."""

    task: str
    start: str | None
    end: str | None
    exit_code: int | None
    version: str | None
    error: str | None


@dataclass
class ServerRecord:
    """Everything usable from one `data/<vendor>/<server>/` folder."""

    vendor: str
    server: str
    inventory: dict = field(default_factory=dict)
    measurements: list[Measurement] = field(default_factory=list)
    apps: list[AppResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)      # task -> reason
    tasks: dict[str, TaskRun] = field(default_factory=dict)    # every task with a meta.json

    @property
    def name(self) -> str:
        return f"{self.vendor}:{self.server}"

    def provenance(self, commit: str | None) -> dict:
        """The profile's provenance_json: dataset, commit, and each used task's dates and version."""
        used = {m.task for m in self.measurements} | {a.task for a in self.apps} | {"lscpu"}
        return {"dataset": "sparecores/sc-inspector-data", "commit": commit,
                "tasks": {t: {"start": r.start, "end": r.end, "version": r.version}
                          for t, r in sorted(self.tasks.items()) if t in used}}
