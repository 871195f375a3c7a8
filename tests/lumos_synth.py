"""A small synthetic dataset in the Lumos layout, with the quirks of the real one, for the tests.

Each app has a parallel fraction p: on a VM with c vCPUs it takes T1 x ((1 - p) + p x 4 / c)
(the base VM has 4 vCPUs), times a small per-run noise. Its sar trace on every VM shows it: a
share p of the seconds keeps every CPU busy with a run queue longer than the CPUs, the rest keep
one CPU busy. So the node-to-base ratio is predictable from the base trace, and a method that
reads the trace must beat one that ignores it.

Quirks, as upstream: a repeated column (`tps`), a text column (`IFACE`), a garbage cell, a Hive
run folder without the `_<run>` suffix, an incomplete run, a run without sar.csv, a folder whose
report.json is not JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

VMS = {"c6.large": 2, "g6.xlarge": 4, "g6.2xlarge": 8, "r6.xlarge": 4}
BASE = "g6.xlarge"
HEADER = ["timestamp", "%user", "%nice", "%system", "%iowait", "%steal", "%idle", "tps", "rd_sec/s", "wr_sec/s",
          "tps", "runq-sz", "%memused", "IFACE", "rxkB/s", "txkB/s", "cswch/s"]


def apps(n: int = 10) -> dict[str, tuple[float, float]]:
    """name -> (parallel fraction, time on the base VM in seconds)."""
    fw = ["hadoop", "spark"]
    out = {}
    for i in range(n):
        p = 0.05 + 0.9 * i / max(n - 1, 1)
        out[f"{fw[i % 2]}_work{i}_{'tiny' if i % 3 else 'small'}"] = (p, 30.0 + 7.0 * i)
    out["hive_query_small"] = (0.5, 40.0)                      # Hive: no run suffix, one run
    return out


def true_time(p: float, t1: float, vm: str) -> float:
    c = VMS[vm]
    mem = 0.97 if vm.startswith("r6") else 1.0
    return t1 * ((1 - p) + p * 4 / c) * mem


def sar_rows(p: float, seconds: int, vcpus: int, rng: np.random.Generator, garbage: bool = False) -> list[list]:
    rows = []
    for s in range(seconds):
        parallel = rng.random() < p
        busy = 0.95 if parallel else min(1.0, 1.0 / vcpus + 0.02)
        user = 100 * busy * 0.9
        system = 100 * busy * 0.1
        runq = vcpus + 2 if parallel else 1
        hh, mm, ss = 12, (s // 60) % 60, s % 60
        rows.append([f"{hh:02d}:{mm:02d}:{ss:02d}", round(user, 2), 0.0, round(system, 2), 0.1, 0.0,
                     round(100 - user - system - 0.1, 2), 10.0, 0.0, 800.0, 9.0, runq, 40.0 + 10 * p, "lo",
                     5.0, 5.0, 3000.0 + 2000 * busy])
    if garbage and rows:
        rows[len(rows) // 2][1] = "n/a"
    return rows


def write_run(folder: Path, report: dict | str | None, rows: list[list] | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if report is not None:
        (folder / "report.json").write_text(report if isinstance(report, str) else json.dumps(report))
    if rows is not None:
        lines = [",".join(HEADER)] + [",".join(str(v) for v in r) for r in rows]
        (folder / "sar.csv").write_text("\n".join(lines) + "\n")


def make_dataset(root: Path, *, n_apps: int = 10, runs: int = 3, seed: int = 1, interval_folder: bool = True,
                 quirks: bool = True) -> Path:
    """Write the dataset under `root` (DIR/1 second/<vm>/... or DIR/<vm>/...); returns the cloud folder."""
    rng = np.random.default_rng(seed)
    top = root / "1 second" if interval_folder else root
    for vm, vcpus in VMS.items():
        for app, (p, t1) in apps(n_apps).items():
            hive = app.startswith("hive")
            for run in range(1, (1 if hive else runs) + 1):
                t = true_time(p, t1, vm) * (1 + rng.normal(0, 0.01))
                folder = top / vm / (app if hive else f"{app}_{run}")
                fw, size = app.split("_")[0], app.rsplit("_", 1)[1]
                report = {"completed": True, "elapsed_time": f"{t:.3f}", "datasize": size,
                          "workload": app.split("_")[1], "timestamp": "2020-11-19 12:00:00"}
                if not hive:
                    report["framework"] = fw
                garbage = quirks and vm == BASE and run == 1 and "_work3_" in app
                write_run(folder, report, sar_rows(p, max(int(round(t)), 2), vcpus, rng, garbage))
    if quirks:
        write_run(top / "c6.large" / "spark_broken_tiny_1", {"completed": False, "elapsed_time": "0"},
                  sar_rows(0.5, 5, 2, rng))
        write_run(top / "g6.2xlarge" / "spark_broken_tiny_2", '{"completed": tru', None)
        notrace = top / "r6.xlarge" / "spark_work1_tiny_9"
        write_run(notrace, {"completed": True, "elapsed_time": "31.5", "datasize": "tiny", "framework": "spark"},
                  None)
    return root
