"""Running the suite's own tools here (stress-ng, `openssl speed`) the way Spare Cores ran them,
watched by the trace's samplers so that each config gets the signature a phase would.

Each run is observed like a traced command (registry.trace.tracer.observe: the /proc sampler, perf
counters where the node has them, perf's timer samples for the instruction mix where perf runs), and
its signature is that of the whole run as one phase, so a
phase and a config are described by the same instruments on the same node.
"""

import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from registry.errors import UserError
from registry.measure import hotmix
from registry.measure.signature import counter_signature, proc_signature, spans_in, wss_reads
from registry.profile.suite.plan import ALL_THREADS, SuiteConfig
from registry.trace.tracer import observe

INTERVAL_S = 0.1
PACKAGES = {"stress-ng": "stress-ng", "openssl": "openssl"}   # command -> Debian package
_YAML_RATE = re.compile(r"^\s*bogo-ops-per-second-real-time:\s*([0-9.eE+-]+)", re.M)
_OPENSSL_TOTAL = re.compile(r"^\+F:\d+:([^:]+):([0-9.eE+-]+)\s*$", re.M)


def missing_tools(configs: list[SuiteConfig]) -> list[str]:
    """Commands the configs need that this machine lacks, as 'command (Debian package)'."""
    need = {"stress-ng" if c.task.startswith("stressng") else "openssl" for c in configs if c.task != "membench"
            and c.task != "bw_mem"}
    return [f"{cmd} (apt-get install -y {PACKAGES[cmd]})" for cmd in sorted(need) if shutil.which(cmd) is None]


def stress_ng_stressors() -> set[str]:
    """The stressors this stress-ng knows (older releases lack some of Spare Cores' 85)."""
    out = subprocess.run(["stress-ng", "--stressors"], capture_output=True, text=True, check=False).stdout
    return set(out.split())


def threads_of(config: SuiteConfig, n_cpus: int) -> int:
    return n_cpus if config.threads == ALL_THREADS else config.threads


# the tools write progress and metrics tables to standard error: dropped, through a shell that execs
# the tool (so that the sampler watches the tool itself); the figures come from the YAML report
# (stress-ng) and standard output (openssl -mr)
QUIET = ["sh", "-c", 'exec "$0" "$@" 2>/dev/null']


def argv(config: SuiteConfig, n_cpus: int, seconds: float, out: Path) -> list[str]:
    """The command line of a stress-ng or openssl config (`out`: stress-ng's YAML report)."""
    return QUIET + tool_argv(config, threads_of(config, n_cpus), str(max(1, int(round(seconds)))), out)


def tool_argv(config: SuiteConfig, n: int, secs: str, out: Path) -> list[str]:
    if config.task == "stressngfull":
        return ["stress-ng", "-q", "--cpu", str(n), "--cpu-method", "div16", "-t", secs, "--metrics", "-Y", str(out)]
    if config.task == "stressng" and config.what == "cpu_all":
        return ["stress-ng", "-q", "--cpu", str(n), "-t", secs, "--metrics", "-Y", str(out)]
    if config.task == "stressng":
        return ["stress-ng", "-q", f"--{config.what}", str(n), "-t", secs, "--metrics", "-Y", str(out)]
    if config.task == "openssl":
        return ["openssl", "speed", "-mr", "-elapsed", "-seconds", secs,
                "-bytes", str(config.params[0]), "-multi", str(n), "-evp", config.what]
    raise ValueError(f"{config.task} is not run by a tool")


def parse_stress_ng(yaml_text: str) -> float:
    """Bogo ops per second of real time, summed over the stressor's instances (one metrics entry)."""
    rates = [float(v) for v in _YAML_RATE.findall(yaml_text)]
    if not rates:
        raise UserError("stress-ng wrote no bogo-ops-per-second-real-time metric")
    return sum(rates)


def parse_openssl(stdout: str, algo: str) -> float:
    """Bytes per second of all `-multi` processes: the last '+F:...' line (the sum over processes)."""
    found = [float(v) for name, v in _OPENSSL_TOTAL.findall(stdout) if name.lower() == algo.lower()]
    if not found:
        raise UserError(f"openssl speed printed no figure for {algo}")
    return found[-1]


def whole_run_signature(obs, llc_bytes: int | None) -> dict[str, dict[str, float]]:
    """The signature of an observed run taken as one phase: {source: {metric: value}}."""
    run = obs.run
    whole = [[0.0, run.wall_s]]
    sig = {"proc": proc_signature(spans_in(run.samples, whole), llc_bytes, wss_reads(run.samples, whole, INTERVAL_S)),
           "counters": counter_signature(obs.counter_rows), "mix": hotmix.mix(obs.mix_samples)}
    return {source: metrics for source, metrics in sig.items() if metrics}


def run(config: SuiteConfig, n_cpus: int, seconds: float, llc_bytes: int | None) -> tuple[float, dict]:
    """Run one stress-ng or openssl config; (its figure in config.unit, its signature)."""
    with tempfile.TemporaryDirectory(prefix="nodereg-suite-") as tmp:
        report = Path(tmp) / "stress-ng.yaml"
        stdout = Path(tmp) / "stdout"
        cmd = argv(config, n_cpus, seconds, report)
        with stdout.open("w") as fh:
            obs = _observe(cmd, fh.fileno())
        if obs.run.status != "ok":
            raise UserError(f"{' '.join(cmd)} {obs.run.status} (exit status {obs.run.exit_status})")
        text = stdout.read_text()
        value = parse_openssl(text, config.what) if config.task == "openssl" else \
            parse_stress_ng(report.read_text() if report.exists() else "")
    if not (value > 0 and math.isfinite(value)):
        raise UserError(f"{config.key}: the tool reported {value!r}")
    return value, whole_run_signature(obs, llc_bytes)


def _observe(cmd: list[str], stdout_fd: int):
    """The command under the trace's samplers, its standard output to `stdout_fd` (stderr: discarded
    by the tools' own quiet flags; stress-ng's progress lines go to its stdout)."""
    return observe(cmd, interval_s=INTERVAL_S, omp=False, stdout=stdout_fd)
