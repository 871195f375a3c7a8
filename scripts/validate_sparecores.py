"""Validate the trace path onto imported Spare Cores types (docs/sparecores-trace.md quotes what this prints).

Runs here the programs Spare Cores measured that run on this machine, traces each (`nodereg
trace`), predicts it on every imported node (`nodereg match --suite sparecores`) and compares the
predicted ratios node / same-CPU type with the measured ones (Spare Cores' own figures):

- compression: Python's gzip, bz2 and lzma (and brotli, zstandard when installed) at Spare Cores'
  levels on a text corpus (Debian's /usr/share/common-licenses, repeated), one thread
  (`compression:<algo>-<level>:compress|decompress:1t`);
- redis: one redis-server and one `redis-benchmark -t set -P <pipeline>` per vCPU (`redis:set:p<n>`);
- openssl: `openssl speed -evp sha256 -bytes 16384 -multi $(nproc)`, against the imported
  `sparecores:openssl:sha256:16384:all` figures, with every openssl config left out of the references;
- stress-ng: `stress-ng --cpu $(nproc) --cpu-method div16`, against `sparecores:stressngfull:cpu-div16:all`,
  with the stress-ng cpu configs left out of the references.

The registry must hold the Spare Cores import (`nodereg import sparecores`) and this machine's suite
profile (`nodereg profile NODE --suite sparecores`). Nothing is installed: a missing tool or module
is named and its programs are skipped.

    .venv/bin/python scripts/validate_sparecores.py --db REGISTRY --node here [--same aws:m7a.large]
        [--programs gzip-1:compress,redis:p16,...] [--quick] [--cachegrind-sample S] [--json FILE]
        [--calibration-out registry/match/interval_calibration.json]

For each program: the median |error| of the predicted ratio to the same-CPU type against the
measured one over the imported nodes that measured the app, the Spearman correlation of predicted
and measured times over them; then the medians over programs (the targets: error <= 15%,
Spearman >= 0.9). One more node set, "all, to the same-CPU group", divides by the geometric mean of
every type of this machine's microarchitecture and vCPU count instead of one type, whose own
measurement of an app would otherwise move every ratio.

Then the intervals' calibration (registry.models.intervals, per interval group of `match`): each
checked prediction's conformal score against the model's own interval (the scale `match` applied
divided out), and, held out by program family (a family's programs - gzip's six, redis' four - are
scored with the scale the other families' scores give), the share of outcomes inside the 80%
interval. `--calibration-out FILE` writes the scales of all programs' scores in the form of
registry/match/interval_calibration.json, the calibration nodereg ships for the groups a registry
has not checked enough predictions of.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table
from scipy.stats import spearmanr

from registry import __version__
from registry.db.engine import open_registry
from registry.match.calibration import FULL_SHARE
from registry.models import intervals
from registry.errors import UserError
from registry.like import like

LICENSES = Path("/usr/share/common-licenses")
CORPUS_BYTES = 4 << 20
COMPRESSORS = {   # algorithm -> (module, compress call, decompress call, levels Spare Cores ran)
    "gzip": ("gzip", "gzip.compress(data, compresslevel={level})", "gzip.decompress(blob)", (1, 5, 9)),
    "bzip2": ("bz2", "bz2.compress(data, compresslevel={level})", "bz2.decompress(blob)", (1, 5, 9)),
    "lzma": ("lzma", "lzma.compress(data, preset={level})", "lzma.decompress(blob)", (1, 5, 9)),
    "brotli": ("brotli", "brotli.compress(data, quality={level})", "brotli.decompress(blob)", (0, 4, 8, 11)),
    "zstd": ("zstandard", "zstandard.ZstdCompressor(level={level}).compress(data)",
             "zstandard.ZstdDecompressor().decompress(blob)", (1, 7, 14, 22)),
}
REDIS_PIPELINES = (1, 16, 64, 256)
GROUP_SET = "all, to the same-CPU group"   # the node set whose anchor is every type of this CPU and size
QUICK = ("gzip-1:compress", "gzip-9:compress", "gzip-5:decompress", "bzip2-1:compress", "bzip2-9:decompress",
         "lzma-1:compress", "lzma-1:decompress", "redis:p16", "openssl", "stress-ng")
TARGET_S = 2.0   # about how long each traced run lasts here
PROBE_S = 3600.0  # a compression's loop under cachegrind: longer than any sample, which stops it (valgrind
                  # runs it 20-100x slower, after 3-5 s of the interpreter's start-up: a loop of TARGET_S
                  # would leave a sample counting mostly the start-up)


@dataclass
class Program:
    name: str                        # as --programs names it
    app: str                         # the imported app (or config key) it is measured by
    argv: list[str]
    needs: list[str]                 # commands (Debian) or python modules (PyPI)
    one_thread: bool = False
    exclude: list[str] = field(default_factory=list)   # prefixes of references and of judging apps left out
    config: bool = False             # measured by an imported config's figures, not an app's runs
    prepare: Callable[[], None] | None = None   # makes its input, before it is traced
    probe_argv: list[str] | None = None          # its cachegrind pass (`--probe-cmd`): the same work, longer


def corpus(tmp: Path) -> Path:
    """A text corpus: Debian's license texts, repeated up to CORPUS_BYTES."""
    text = b"".join(p.read_bytes() for p in sorted(LICENSES.iterdir()) if p.is_file())
    out = tmp / "corpus.txt"
    out.write_bytes((text * (CORPUS_BYTES // len(text) + 1))[:CORPUS_BYTES])
    return out


def compression_program(algo: str, level: int, op: str, corpus_path: Path, seconds: float) -> Program:
    """One-thread (de)compression of the corpus, repeated for about `seconds` (only ratios between
    nodes are compared, so the amount of work need not be Spare Cores'). A decompression reads
    the compressed corpus from a file written before it is traced (`prepare`): compressing it in
    the traced program would make its trace, and the start of a cachegrind sample, a compression
    (lzma-9 takes longer to compress the corpus than the loop runs)."""
    module, comp, decomp, _ = COMPRESSORS[algo]
    blob_path = corpus_path.with_name(f"{algo}-{level}.blob")
    call = (comp if op == "compress" else decomp).format(level=level)
    read = f"data = open({str(corpus_path)!r}, 'rb').read()" if op == "compress" else \
        f"blob = open({str(blob_path)!r}, 'rb').read()"

    def code(secs: float) -> str:
        return (f"import time, {module}\n{read}\nt0 = time.perf_counter()\n"
                f"while True:\n    {call}\n    if time.perf_counter() - t0 > {secs}:\n        break\n")

    def prepare() -> None:
        if op == "decompress" and not blob_path.exists():
            subprocess.run([sys.executable, "-c", f"import {module}\ndata = open({str(corpus_path)!r}, 'rb').read()\n"
                            f"open({str(blob_path)!r}, 'wb').write({comp.format(level=level)})\n"], check=True)

    # its own algorithm's imported results do not judge the references it is matched to (registry.match.track)
    return Program(f"{algo}-{level}:{op}", f"compression:{algo}-{level}:{op}:1t", [sys.executable, "-c", code(seconds)],
                   [f"py:{module}"], one_thread=True, exclude=[f"compression:{algo}-"], prepare=prepare,
                   probe_argv=[sys.executable, "-c", code(PROBE_S)])


def redis_program(pipeline: int, tmp: Path, requests: int) -> Program:
    """Spare Cores' shape: a redis-server per vCPU, a SET client on each (here redis-benchmark)."""
    script = tmp / f"redis-p{pipeline}.sh"
    script.write_text(f"""#!/bin/sh
n=$(nproc); dir=$(mktemp -d); servers=""; clients=""
for i in $(seq $n); do
    redis-server --port $((17100 + i)) --dir $dir --save '' --appendonly no > /dev/null 2>&1 &
    servers="$servers $!"
done
for i in $(seq $n); do until redis-cli -p $((17100 + i)) ping > /dev/null 2>&1; do sleep 0.05; done; done
for i in $(seq $n); do
    redis-benchmark -p $((17100 + i)) -t set -P {pipeline} -n {requests} -q > /dev/null &
    clients="$clients $!"
done
status=0
for pid in $clients; do wait $pid || status=1; done
for i in $(seq $n); do redis-cli -p $((17100 + i)) shutdown nosave > /dev/null 2>&1; done
for pid in $servers; do wait $pid; done
rm -rf $dir
exit $status
""")
    script.chmod(0o755)
    return Program(f"redis:p{pipeline}", f"redis:set:p{pipeline}", [str(script)],
                   ["redis-server", "redis-cli", "redis-benchmark"], exclude=["redis:"])


def programs(tmp: Path, quick: bool) -> list[Program]:
    path = corpus(tmp)
    out = [compression_program(a, lvl, op, path, TARGET_S / 2 if quick else TARGET_S) for a, spec in COMPRESSORS.items() for lvl in spec[3]
           for op in ("compress", "decompress")]
    out += [redis_program(p, tmp, 200_000 if quick else 400_000) for p in REDIS_PIPELINES]
    n = str(os.cpu_count() or 1)
    out.append(Program("openssl", "sparecores:openssl:sha256:16384:all",
                       ["openssl", "speed", "-seconds", "2", "-bytes", "16384", "-multi", n, "-evp", "sha256"],
                       ["openssl"], exclude=["sparecores:openssl"], config=True))
    out.append(Program("stress-ng", "sparecores:stressngfull:cpu-div16:all",
                       ["stress-ng", "-q", "--cpu", n, "--cpu-method", "div16", "-t", "3"], ["stress-ng"],
                       exclude=["sparecores:stressngfull", "sparecores:stressng:cpu"], config=True))
    return out


def missing(p: Program) -> list[str]:
    """What the program needs that this machine lacks, as install hints."""
    out = []
    for need in p.needs:
        if need.startswith("py:"):
            if importlib.util.find_spec(need[3:]) is None:
                out.append(f"python module {need[3:]} (pip install {need[3:]})")
        elif shutil.which(need) is None:
            pkg = {"redis-server": "redis-server", "redis-cli": "redis-tools",
                   "redis-benchmark": "redis-tools"}.get(need, need)
            out.append(f"{need} (apt-get install -y {pkg})")
    return out


def nodereg(db: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("nodereg")
    return subprocess.run([str(exe), "--db", db, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def measured(conn: sa.Connection, p: Program) -> dict[str, float]:
    """Per imported node: the measured time of the app (median of its runs) or the config's cost."""
    if p.config:
        sql = """SELECT n.name, r.median_s FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id
                 JOIN profiles pr ON pr.profile_id = r.profile_id JOIN nodes n ON n.node_id = pr.node_id
                 WHERE c.config_key = :k AND pr.mode = 'import'"""
    else:
        sql = """SELECT n.name, r.time_s FROM runs r JOIN apps a ON a.app_id = r.app_id
                 JOIN nodes n ON n.node_id = r.node_id WHERE a.name = :k AND r.source = 'sparecores'"""
    per: dict[str, list[float]] = {}
    for node, t in conn.execute(sa.text(sql), {"k": p.app}):
        if t and t > 0:
            per.setdefault(node, []).append(float(t))
    return {n: statistics.median(ts) for n, ts in per.items()}


def compare(pred: dict[str, float], meas: dict[str, float], same: str | list[str], among: set[str] | None = None,
            bounds: dict[str, tuple[float, float]] | None = None) -> dict | None:
    """Predicted against measured ratios to the same-CPU type, over the nodes that have both (and
    are `among`); `bounds`: each node's interval (low, high seconds), whose share of measured
    ratios inside it, both ends divided by the same-CPU type's prediction, is `inside`. `same` may be
    a group of types: the anchor is then the geometric mean over those that have both figures, so that
    one type's own measurement of the app does not move every ratio."""
    anchors = [a for a in ([same] if isinstance(same, str) else same) if a in pred and a in meas]
    nodes = sorted((set(pred) & set(meas) & (among if among is not None else set(pred))) - set(anchors))
    if not anchors or len(nodes) < 3:
        return None
    p0 = math.exp(statistics.fmean(math.log(pred[a]) for a in anchors))
    m0 = math.exp(statistics.fmean(math.log(meas[a]) for a in anchors))
    pr = np.array([pred[n] / p0 for n in nodes])
    mr = np.array([meas[n] / m0 for n in nodes])
    err = pr / mr - 1.0
    rho = spearmanr([pred[n] for n in nodes], [meas[n] for n in nodes]).statistic
    out = {"nodes": len(nodes), "median_abs_error": float(np.median(np.abs(err))),
           "median_error": float(np.median(err)), "spearman": float(rho),
           "within_15": float(np.mean(np.abs(err) <= 0.15))}
    if bounds:
        inside = [bounds[n][0] / p0 <= r <= bounds[n][1] / p0 for n, r in zip(nodes, mr)]
        out["inside"] = float(np.mean(inside))
    return out


def scores(doc: dict, meas: dict[str, float], same: dict[str, str]) -> dict[str, list[float]]:
    """Per interval group, the conformal score (intervals.score) of each node's predicted ratio to the
    same-CPU type of its node set (`same`: the full suite's for a `:full` group, the partial suite's
    for the other) against the measured one, with the model's own interval (the calibration scale
    `match` applied divided out): what `match` would score had the runs been measured after it."""
    pred = {r["node"]: r for r in doc["predictions"]}
    out: dict[str, list[float]] = {}
    for node, r in pred.items():
        group = r.get("interval_group") or ""
        ref = same["full suite" if group.endswith(":full") else "partial suite"]
        if node == ref or node not in meas or ref not in meas or ref not in pred or not r.get("low_s"):
            continue
        base = pred[ref]["predicted_s"]
        score = intervals.score(r["predicted_s"] / base, r["low_s"] / base, r["high_s"] / base, meas[node] / meas[ref],
                                r.get("interval_scale") or 1.0)
        out.setdefault(group, []).append(score)
    return out


def family(program: str) -> str:
    """gzip-5:compress -> gzip: programs of one family are held out together (their errors go together)."""
    return re.split(r"[-:]", program)[0]


def held_out(results: list[dict]) -> dict[str, dict]:
    """Per group: the scale of all programs' scores, and the share of outcomes inside the 80% interval
    when each family is scored with the scale of the other families' scores (pooled over outcomes, and
    the median of the programs' shares)."""
    out = {}
    groups = sorted({g for r in results for g in r.get("scores", {})})
    for group in groups:
        per = {r["program"]: r["scores"][group] for r in results if r.get("scores", {}).get(group)}
        shares, inside, total = [], 0, 0
        for name, mine in per.items():
            others = [x for n, xs in per.items() if family(n) != family(name) for x in xs]
            if len(others) < intervals.MIN_CHECKS:
                continue
            scale = intervals.conformal_scale(others)
            hits = sum(x <= scale for x in mine)
            shares.append(hits / len(mine))
            inside, total = inside + hits, total + len(mine)
        pooled = [x for xs in per.values() for x in xs]
        out[group] = {"programs": len(per), "checks": len(pooled), "scale": intervals.conformal_scale(pooled),
                      "own_inside": float(np.mean([x <= 1.0 for x in pooled])),
                      "held_out_inside": inside / total if total else math.nan,
                      "held_out_program_median": float(np.median(shares)) if shares else math.nan}
    return out


def _read(db: str, fn, whole: bool = False):
    """`fn(conn)` (`whole`: `fn(registry)`) on a registry opened for it alone: DuckDB lets one
    process hold the file, and the `nodereg` commands run in between."""
    reg = open_registry(db, readonly=True)
    try:
        if whole:
            return fn(reg)
        with reg.connect() as conn:
            return fn(conn)
    finally:
        reg.close()


_KEYS = """
SELECT n.name, c.config_key FROM profile_runs r JOIN ub_configs c ON c.config_id = r.config_id
JOIN microbenchmarks u ON u.ub_id = c.ub_id AND u.suite = 'sparecores'
JOIN profiles p ON p.profile_id = r.profile_id JOIN nodes n ON n.node_id = p.node_id"""


def suite_coverage(conn: sa.Connection, node: str) -> tuple[set[str], set[str]]:
    """The imported nodes that measured at least FULL_SHARE of the configs this machine measured, and
    the others (match's interval groups, by the same share: registry.match.calibration.node_groups).
    On the first every phase is projected from the same references as on the same-CPU type; the
    others (without Spare Cores' 85-stressor task or membench) fall back to the few configs they
    have, and their intervals are scored apart: a blend of the two sets hid that the first's were
    far too wide and the others' too narrow."""
    keys: dict[str, set[str]] = {}
    for name, key in conn.execute(sa.text(_KEYS)):
        keys.setdefault(name, set()).add(key)
    mine = keys.get(node, set())
    full = {n for n, k in keys.items() if n != node and len(k & mine) >= FULL_SHARE * len(mine)}
    return full, set(keys) - full - {node}


def without_source(trace_file: Path, source: str) -> Path:
    """A copy of the trace file whose phases lack the signature `source`: matched, it gives what the
    same traced run predicts without that source (a feature the phase lacks enters no distance)."""
    doc = json.loads(trace_file.read_text())
    for phase in doc["phases"]:
        phase.get("signature", {}).pop(source, None)
    out = trace_file.with_name(f"{trace_file.stem}.without-{source}.json")
    out.write_text(json.dumps(doc))
    return out


def run_one(db: str, node: str, p: Program, tmp: Path, same: dict[str, str], sets: dict[str, set[str] | None],
            console: Console, cachegrind_s: float | None = None, without: str | None = None,
            rematch: bool = False) -> dict:
    """Trace, match and compare one program; `same` and `sets`: per node set, its same-CPU type and
    its nodes (None: every imported node); `cachegrind_s`: trace with a cachegrind sample that long;
    `without`: also match the same trace without that signature source (key "without"); `rematch`:
    no tracing, match the program's latest stored trace again (a change to `match` measured on the
    same traces)."""
    out = tmp / f"{p.name.replace(':', '_')}.json"
    app = f"sc-check:{p.name}"
    if not rematch:
        failed = _trace(db, node, p, app, out, cachegrind_s)
        if failed:
            return {"program": p.name, "skipped": failed}
    meas = _read(db, lambda conn: measured(conn, p))
    m = nodereg(db, *match_args(app, p))
    if m.returncode:
        return {"program": p.name, "skipped": f"match failed: {m.stderr.strip()}"}
    doc = json.loads(m.stdout)
    wall = json.loads(out.read_text()).get("wall_s") if not rematch else doc["base_time_s"]
    by_set = scored(doc, meas, same, sets)
    if all(r is None for r in by_set.values()):
        return {"program": p.name, "skipped": f"fewer than 3 imported nodes measured {p.app}"}
    nearest = doc["phases"][0]["matches"][:3] if doc["phases"] else []
    serial = [round(ph["serial_share"], 2) for ph in doc["phases"] if ph["mode"] != "idle"]
    console.print(f"  {p.name}: traced {wall:.2f} s; " + _summary(by_set))
    result = {"program": p.name, "app": p.app, "traced_s": wall, "excluded": p.exclude, "serial_share": serial,
              "nearest": [m["config"] for m in nearest], "sets": by_set, "scores": scores(doc, meas, same)}
    if without:
        w = nodereg(db, *match_args(str(without_source(out, without)), p))
        if w.returncode:
            return {"program": p.name, "skipped": f"match without {without} failed: {w.stderr.strip()}"}
        wdoc = json.loads(w.stdout)
        result["without"] = scored(wdoc, meas, same, sets)
        result["nearest_without"] = [m["config"] for m in (wdoc["phases"][0]["matches"][:3] if wdoc["phases"] else [])]
        console.print(f"    without {without}: " + _summary(result["without"]))
    return result


def _trace(db: str, node: str, p: Program, app: str, out: Path, cachegrind_s: float | None) -> str | None:
    """Trace `p` on `node` as `app` into the registry and `out`; the reason when it failed."""
    env = {"OMP_NUM_THREADS": "1"} if p.one_thread else {}
    if p.prepare:
        p.prepare()
    sample = ["--cachegrind-sample", f"{cachegrind_s:g}"] if cachegrind_s else []
    if cachegrind_s and p.probe_argv:
        sample += ["--probe-cmd", shlex.join(p.probe_argv)]
    t = nodereg(db, "trace", "--name", app, "--node", node, "--no-omp", *sample, "--out", str(out), "--", *p.argv,
                env=env)
    return f"trace failed: {(t.stderr or t.stdout).strip().splitlines()[-1:]}" if t.returncode else None


def match_args(trace: str, p: Program) -> list[str]:
    """`nodereg match` of `trace` (an app name or a trace file) onto the imported types."""
    args = ["match", trace, "--suite", "sparecores", "--json", "--no-store"]
    for prefix in p.exclude:
        args += ["--exclude", prefix]
    return args


def scored(doc: dict, meas: dict[str, float], same: dict[str, str | list[str]], sets: dict[str, set[str] | None]
           ) -> dict:
    """`compare` of a match's predictions per node set."""
    pred = {r["node"]: r["predicted_s"] for r in doc["predictions"]}
    bounds = {r["node"]: (r["low_s"], r["high_s"]) for r in doc["predictions"]}
    return {name: compare(pred, meas, same[name], among, bounds) for name, among in sets.items()}


def _summary(by_set: dict) -> str:
    return "; ".join(f"{name}: {r['nodes']} nodes, median |error| {r['median_abs_error']:.1%}, "
                     f"Spearman {r['spearman']:.3f}" for name, r in by_set.items() if r)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="registry with the Spare Cores import and this machine's suite profile")
    ap.add_argument("--node", default="here", help="this machine's node (its suite profile)")
    ap.add_argument("--same", default=None, help="the imported type with this CPU (default: `nodes like`'s first)")
    ap.add_argument("--programs", default=None, help="comma-separated names (default: all; --quick: a subset)")
    ap.add_argument("--quick", action="store_true", help="a subset, shorter runs")
    ap.add_argument("--cachegrind-sample", dest="cachegrind_s", type=float, default=None, metavar="S",
                    help="trace each program with a cachegrind sample of S seconds (`trace --cachegrind-sample`), "
                         "matched with the suite profile's cachegrind signatures (`profile --suite sparecores "
                         "--cachegrind`)")
    ap.add_argument("--without", default=None, metavar="SOURCE",
                    help="also match each trace without its phases' SOURCE signatures (such as mix): "
                         "the two predictions of one traced run, side by side")
    ap.add_argument("--rematch", action="store_true",
                    help="trace nothing: match each program's latest trace in the registry again (a change to "
                         "`match` measured on the same traces)")
    ap.add_argument("--json", dest="json_out", default=None, help="write the results here as JSON")
    ap.add_argument("--calibration-out", default=None, metavar="FILE",
                    help="write the intervals' calibration of every program's scores here, in the form of "
                         "registry/match/interval_calibration.json")
    args = ap.parse_args(argv)
    console = Console()
    if args.rematch and (args.without or args.cachegrind_s):
        console.print("error: --rematch matches the stored traces: --without and --cachegrind-sample need new ones")
        return 2
    if args.cachegrind_s and shutil.which("valgrind") is None:
        console.print("error: --cachegrind-sample needs valgrind (apt-get install -y valgrind)")
        return 1
    try:
        alike = _read(args.db, lambda reg: like(reg, args.node, "sparecores", 500), whole=True)
        full, partial = _read(args.db, lambda conn: suite_coverage(conn, args.node))
    except UserError as exc:   # a one-line reason (no import, no suite profile here)
        console.print(f"error: {exc}")
        return 1
    sets = {"all": None, "full suite": full, "partial suite": partial}
    same: dict[str, str | list[str]] = {
        name: args.same or next((r["node"] for r in alike["like"] if among is None or r["node"] in among), "")
        for name, among in sets.items()}
    # every type of this CPU's microarchitecture and vCPU count (`nodes like`'s first two tiers): the
    # anchor as their geometric mean (`compare`), beside the single same-CPU type
    group = [r["node"] for r in alike["like"] if r["tier"] <= 1 and r["n_cpus"] == alike["n_cpus"]]
    if len(group) > 1:
        sets[GROUP_SET] = None
        same[GROUP_SET] = group
    console.print(f"{args.node} ({alike['cpu_family']}, {alike['n_cpus']} CPUs); same-CPU type: "
                  + "; ".join(f"{name}: {_named(same[name])}" for name in sets) + f"; full-suite nodes: {len(full)}")
    with tempfile.TemporaryDirectory(prefix="nodereg-scval-") as tmp_name:
        tmp = Path(tmp_name)
        chosen = programs(tmp, args.quick)
        wanted = args.programs.split(",") if args.programs else (QUICK if args.quick else None)
        if wanted:
            unknown = set(wanted) - {p.name for p in chosen}
            if unknown:
                console.print(f"error: unknown program(s) {', '.join(sorted(unknown))}")
                return 2
            chosen = [p for p in chosen if p.name in wanted]
        results = []
        for p in chosen:
            lack = missing(p)
            if lack:
                console.print(f"  {p.name}: skipped, needs {', '.join(lack)}")
                results.append({"program": p.name, "skipped": f"needs {', '.join(lack)}"})
                continue
            results.append(run_one(args.db, args.node, p, tmp, same, sets, console, args.cachegrind_s,
                                   args.without, args.rematch))
    done = [r for r in results if "skipped" not in r]
    for name in sets:
        report(console, name, _named(same[name]), [(r, r["sets"][name]) for r in done if r["sets"].get(name)])
        if args.without:
            report(console, f"{name}, without {args.without}", _named(same[name]),
                   [(r, r["without"][name]) for r in done if r["without"].get(name)], "nearest_without")
    calibration = held_out(done)
    report_calibration(console, calibration)
    for r in results:
        if "skipped" in r:
            console.print(f"skipped {r['program']}: {r['skipped']}")
    if args.calibration_out:
        Path(args.calibration_out).write_text(json.dumps(shipped_entries(calibration, len(done)), indent=1) + "\n")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"same": same, "full_suite_nodes": len(full), "calibration": calibration,
                                                   "cachegrind_sample_s": args.cachegrind_s,
                                                   "like": alike["like"][:10], "results": results}, indent=1))
    return 0 if done else 1


def report_calibration(console: Console, calibration: dict[str, dict]) -> None:
    table = Table(title="80% intervals per group of `match` (the model's own; conformal, held out by program family)")
    for col in ("group", "programs", "checked", "inside, the model's own", "scale (all programs)",
                "inside, held out", "programs' median, held out"):
        table.add_column(col)
    for group, c in calibration.items():
        table.add_row(group, str(c["programs"]), str(c["checks"]), f"{c['own_inside']:.0%}", f"x{c['scale']:.2f}",
                      f"{c['held_out_inside']:.0%}", f"{c['held_out_program_median']:.0%}")
    console.print(table)


def shipped_entries(calibration: dict[str, dict], programs: int) -> dict:
    """registry/match/interval_calibration.json's content: one entry per group, for this model version."""
    from registry.models.similarity import SimilarityModel

    when = time.strftime("%Y-%m-%d")
    return {"about": "conformal scales of `match`'s 80% intervals per interval group, for groups a registry has "
                     "checked fewer than 10 predictions of (registry/match/calibration.py); written by "
                     "scripts/validate_sparecores.py --calibration-out",
            "entries": [{"model": "similarity", "version": SimilarityModel.version, "group": group,
                         "scale": round(c["scale"], 4), "checks": c["checks"],
                         "measured_by": f"scripts/validate_sparecores.py, {programs} programs traced on this "
                                        f"machine, {when}, nodereg {__version__}; held out by program family "
                                        f"{c['held_out_inside']:.0%} inside",
                         "held_out_inside": round(c["held_out_inside"], 4)}
                        for group, c in calibration.items() if group]}


def _named(same: str | list[str]) -> str:
    return same if isinstance(same, str) else f"the geometric mean of {len(same)} types ({', '.join(same)})"


def report(console: Console, name: str, same: str, rows: list[tuple[dict, dict]], nearest: str = "nearest") -> None:
    """One node set's table and its medians over programs (`nearest`: the result's key of the
    references its match chose)."""
    table = Table(title=f"{name}: predicted / measured ratio to {same}")
    for col in ("program", "nodes", "median |error|", "median error", "within 15%", "Spearman", "inside 80%",
                "serial share", "nearest refs"):
        table.add_column(col)
    for r, f in rows:
        table.add_row(r["program"], str(f["nodes"]), f"{f['median_abs_error']:.1%}", f"{f['median_error']:+.1%}",
                      f"{f['within_15']:.0%}", f"{f['spearman']:.3f}", f"{f.get('inside', float('nan')):.0%}",
                      ",".join(map(str, r["serial_share"])),
                      ", ".join(c.removeprefix("sparecores:") for c in r[nearest]))
    console.print(table)
    if rows:
        err = statistics.median(f["median_abs_error"] for _, f in rows)
        rho = statistics.median(f["spearman"] for _, f in rows)
        inside = [f["inside"] for _, f in rows if "inside" in f]
        console.print(f"{name} ({len(rows)} programs): median error {err:.1%} (target <= 15%), "
                      f"median Spearman {rho:.3f} (target >= 0.9)"
                      + (f", median share inside the 80% interval {statistics.median(inside):.0%} (target 70-90%)"
                         if inside else ""))


if __name__ == "__main__":
    sys.exit(main())
