#!/usr/bin/env python3
"""Time `nodereg import sparecores` on the shared Spare Cores data (issue 27: ~2,500 servers < 2 min, DuckDB).

    python scripts/bench_import_sparecores.py [--db URL] [--workers N] [--cache DIR]

Unpacks ../shared/datasets/sparecores/*.tar.gz ($NODEREG_SHARED/datasets/sparecores when set) into
a cache folder (once), imports everything into a fresh registry (a temporary DuckDB file unless
--db names one), then imports again (nothing to add: the idempotent path), and prints both times
beside the target, with the parse-only time of the same servers (the floor the writes add to).
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from platformdirs import user_cache_dir
from rich.console import Console

from registry.db import open_registry
from registry.io.sparecores.archive import shared_dir, unpack
from registry.io.sparecores.dataset import discover, load_specs
from registry.io.sparecores.store import import_sparecores, parsed_servers

TARGET_S = 120.0
console = Console()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="registry URL (default: a new DuckDB file in a temporary folder)")
    ap.add_argument("--workers", type=int, default=2, help="parsing processes (default 2)")
    ap.add_argument("--cache", type=Path, default=Path(user_cache_dir("nodereg")) / "sparecores",
                    help="where the archives are unpacked (reused)")
    args = ap.parse_args()
    folder = shared_dir(Path(__file__).resolve().parents[1])
    try:
        t0 = time.perf_counter()
        inspector, specs = unpack(folder, args.cache)
        console.print(f"data: {inspector} (unpacked or reused in {time.perf_counter() - t0:.1f} s)")
    except FileNotFoundError as exc:
        sys.exit(f"error: {exc}")
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"duckdb:///{tmp}/bench.duckdb"
        reg = open_registry(url)
        _, servers = discover(inspector)
        spec_docs = load_specs(specs, {s.vendor for s in servers}) if specs else {}
        t0 = time.perf_counter()
        n = sum(1 for _ in parsed_servers(servers, spec_docs, args.workers))
        parse_s = time.perf_counter() - t0
        first = import_sparecores(reg, inspector, specs, workers=args.workers)
        second = import_sparecores(reg, inspector, specs, workers=args.workers)
        reg.close()
    console.print(f"backend {url.split(':')[0]}, {n} server folders, {args.workers} parsing processes")
    console.print(f"  parse only:     {parse_s:7.1f} s")
    console.print(f"  first import:   {first.seconds:7.1f} s  ({first.nodes_added} nodes, {first.measurements_added} "
                  f"measurements, {first.runs_added} runs; target < {TARGET_S:.0f} s: "
                  f"{'met' if first.seconds < TARGET_S else 'NOT met'})")
    console.print(f"  second import:  {second.seconds:7.1f} s  (added {second.measurements_added} measurements, "
                  f"{second.runs_added} runs: the idempotent path)")


if __name__ == "__main__":
    main()
