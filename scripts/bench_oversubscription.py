#!/usr/bin/env python3
"""What two threads cost on one CPU: nodereg's pointer chase per working-set size (each thread its
own chain), one thread alone on a CPU, two threads time-sliced on that CPU, and two threads on two CPUs
(docs/validation.md, "Two threads on one CPU"; issue 28: the compressors' one-CPU runs).

    python scripts/bench_oversubscription.py [--cpus 0,1] [--rounds 3] [--json FILE]

Each line: the per-pass time of every placement as a multiple of one thread's per-pass time on the
first CPU. Each thread times its own passes (the driver's rule: a repetition is its slowest thread), so
a fixed team of two threads sharing one CPU with no loss is 2.0x; two threads on two CPUs with
no loss 1.0x. The profiles measure one thread per CPU, and `match` bounds a prediction for a CPU
subset of the base node's machine at the ratio of CPUs (registry/match/project.py
`_within_cpu_ratio`). Where this table's one-CPU column is above 2.0, that bound is too low for a
fixed team of threads.
"""

import argparse
import json
import statistics
import sys

from rich.console import Console
from rich.table import Table

from registry.cpulist import parse as parse_list
from registry.errors import UserError
from registry.microbench.driver import Driver

LINES = (4096, 16384, 65536, 262144, 1048576)     # 64-byte lines per thread: 256 KiB .. 64 MiB


def per_pass(driver: Driver, n: int, cpus: list[int]) -> float:
    """The chase's median per-pass time (s), one thread per entry of `cpus` (a CPU twice: time-sliced)."""
    reply = driver.run({"id": 1, "kernel": "chase", "threads": len(cpus), "cpus": ",".join(map(str, cpus)), "n": n,
                        "reps": 5, "target": 0.05})
    return statistics.median(reply["times"]) / reply["passes"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="0,1", help="two CPUs: the first is shared in the one-CPU placement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args()
    try:
        cpus = parse_list(args.cpus)
    except UserError as exc:
        sys.exit(f"error: --cpus: {exc}")
    if len(cpus) < 2 or args.rounds < 1:
        sys.exit("error: needs two CPUs (--cpus A,B) and at least one round")
    first, second = cpus[:2]
    placements = {"2 threads, 1 CPU": [first, first], "2 threads, 2 CPUs": [first, second]}
    rows = []
    try:
        with Driver() as driver:
            for r in range(args.rounds):
                for n in LINES:
                    alone = per_pass(driver, n, [first])
                    rows.append({"round": r + 1, "KiB per thread": n * 64 // 1024, "1 thread, s/pass": alone}
                                | {p: per_pass(driver, n, c) / alone for p, c in placements.items()})
    except UserError as exc:   # the driver's own error (a CPU this process may not use, a failed build)
        sys.exit(f"error: {exc}")
    table = Table(title="per-pass time over one thread alone (2 threads on 1 CPU with no loss: 2.0x)")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()))
    Console().print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
