"""One Spare Cores server folder -> a ServerRecord: the task outputs parsed, what was not usable said.

``data/<vendor>/<server>/<task>/meta.json`` says when the task ran, with which tool version, and how
it ended; the output beside it is the tool's own (``stdout``, ``results.json`` or ``parsed.json``).
A task is skipped, with its reason, when: it has no meta.json, it did not finish (no exit code),
it failed (exit code != 0), its output file is missing, its output is not the tool's format, or it
holds no figure. Known tasks absent from the folder are listed as "not run"; folders of tasks
this importer does not read as "not imported". None of these is fatal for the other tasks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from registry.io.sparecores import appruns, micro
from registry.io.sparecores.family import same_cpu
from registry.io.sparecores.inventory import from_lscpu, from_specs, lscpu_fields, merge
from registry.io.sparecores.records import ServerRecord, TaskRun

# task -> (output file, parser kind); parsers that need the vCPUs take them as a second argument
TASKS = {
    "lscpu": "stdout", "virtualization": "stdout",
    "membench": "stdout", "bw_mem": "stdout", "stressng_benchmarks": "stdout", "stressngfull": "stdout",
    "stressng": "stdout", "stressngsinglecore": "stdout", "passmark": "stdout", "openssl": "parsed.json",
    "geekbench": "results.json", "compression_text": "stdout", "redis": "stdout", "static_web": "stdout",
    "llm": "stdout",
}
# tasks of older runs only, or of newer runs only: not listing them as "not run" on every server
OPTIONAL = {"stressng", "stressngsinglecore", "membench", "stressng_benchmarks", "virtualization", "llm"}

_MICRO = {"membench": micro.parse_membench, "bw_mem": micro.parse_bw_mem,
          "stressng_benchmarks": micro.parse_stressng_benchmarks, "stressngfull": micro.parse_stressngfull,
          "stressng": lambda t: micro.parse_stressng_cpu(t, "stressng"),
          "stressngsinglecore": lambda t: micro.parse_stressng_cpu(t, "stressngsinglecore"),
          "passmark": micro.parse_passmark, "openssl": micro.parse_openssl}
_APPS = {"geekbench": appruns.parse_geekbench, "redis": appruns.parse_redis,
         "llm": appruns.parse_llm}   # + compression_text, static_web

# tasks whose output names the CPU they ran on. A server type's tasks ran in sessions months apart,
# and a cloud moves a type to newer hosts: 7 of 62 x86 types' llm runs named another CPU model than
# their lscpu (Azure Standard_DS12_v2: E5-2673 v4 in 2024, Xeon 8370C in 2025). Such figures are not
# the measurements of the node the inventory and the profile describe.
_REPORTS_CPU = {"llm": appruns.llm_cpus}

MAX_OUTPUT = 64 * 2**20     # an output larger than this is not a benchmark's (a runaway log): skipped


def read_meta(path: Path) -> TaskRun | str:
    """The task's meta.json as a TaskRun, or the reason it is unusable."""
    try:
        meta = json.loads(path.read_text(errors="replace"))
    except FileNotFoundError:
        return "no meta.json"
    except (OSError, ValueError):
        return "unreadable meta.json"
    if not isinstance(meta, dict):
        return "unreadable meta.json"

    def text(key):
        v = meta.get(key)
        return None if v is None else str(v)[:200]

    code = meta.get("exit_code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    return TaskRun(path.parent.name, text("start"), text("end"), code, text("version"), text("error_msg"))


def _read_output(path: Path) -> str:
    if path.stat().st_size > MAX_OUTPUT:
        raise ValueError("output too large")
    return path.read_text(errors="replace")


def _passmark_memory(text: str) -> int | None:
    """PassMark's SystemInformation Memory (MiB the VM saw): the memory when no specs say it."""
    import re
    m = re.search(r"^\s*Memory:\s*(\d+)\s*$", text, re.M)
    return int(m[1]) * 2**20 if m and 0 < int(m[1]) < 2**40 else None


def _other_cpu(names: set[str], lscpu: dict | None) -> str | None:
    """The first CPU model a task reported that is not lscpu's (registry.io.sparecores.family.same_cpu),
    None when they agree or either names nothing."""
    model = (lscpu or {}).get("cpu_model")
    return next((n for n in sorted(names) if same_cpu(n, model) is False), None)


def parse_server(server_dir: Path | str, specs: dict | None = None) -> ServerRecord:
    """Parse `data/<vendor>/<server>/` (see the module doc); never raises for bad content.

    `specs` is the server's document of the specs dump (sc-data-dumps), when there is one.
    """
    server_dir = Path(server_dir)
    rec = ServerRecord(vendor=server_dir.parent.name, server=server_dir.name)
    try:
        present = sorted(e.name for e in os.scandir(server_dir) if e.is_dir())
    except OSError:
        rec.skipped["*"] = "unreadable folder"
        return rec
    outputs: dict[str, str] = {}
    for task in present:
        if task not in TASKS:
            rec.skipped[task] = "not imported (unknown task)"
            continue
        meta = read_meta(server_dir / task / "meta.json")
        if isinstance(meta, str):
            rec.skipped[task] = meta
            continue
        rec.tasks[task] = meta
        if meta.exit_code is None:
            rec.skipped[task] = "did not finish"
            continue
        if meta.exit_code != 0:
            rec.skipped[task] = f"failed (exit code {meta.exit_code})"
            continue
        try:
            outputs[task] = _read_output(server_dir / task / TASKS[task])
        except FileNotFoundError:
            rec.skipped[task] = "no output"
        except (OSError, ValueError):
            rec.skipped[task] = "unreadable output"
    for task in sorted(set(TASKS) - set(present) - OPTIONAL):
        rec.skipped[task] = "not run"

    lscpu = None
    if "lscpu" in outputs:
        try:
            lscpu = from_lscpu(lscpu_fields(outputs["lscpu"]), rec.vendor)
        except (ValueError, TypeError, AttributeError):
            rec.skipped["lscpu"] = "unreadable output"
    memory = _passmark_memory(outputs["passmark"]) if "passmark" in outputs else None
    rec.inventory = merge(lscpu, from_specs(specs) if specs else None, memory)
    if "virtualization" in outputs:
        try:
            virt = json.loads(outputs["virtualization"])
            rec.inventory["nested_kvm"] = bool(virt.get("kvm")) if isinstance(virt, dict) else None
        except ValueError:
            rec.skipped["virtualization"] = "unreadable output"
    vcpus = rec.inventory.get("vcpus")

    for task, text in outputs.items():
        if task in ("lscpu", "virtualization"):
            continue
        if task in _REPORTS_CPU and (other := _other_cpu(_REPORTS_CPU[task](text), lscpu)):
            rec.skipped[task] = f"ran on another CPU than lscpu's ({other})"
            continue
        try:
            if task in _MICRO:
                found = _MICRO[task](text)
                rec.measurements.extend(found)
            else:
                found = (appruns.parse_static_web(text, vcpus) if task == "static_web" else
                         appruns.parse_compression(text, rec.tasks[task].start) if task == "compression_text" else
                         _APPS[task](text))
                rec.apps.extend(found)
        except (ValueError, TypeError, AttributeError, RecursionError):
            rec.skipped[task] = "unreadable output"
            continue
        if not found:
            rec.skipped[task] = "no figures"
    return rec
