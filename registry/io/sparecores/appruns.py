"""Parsers of the application tasks: each tool's own output -> AppResults (time = work / rate).

Names, jobs and groups are those of registry.io.sparecores.apps. Like the micro-benchmark
parsers, each raises ValueError when the text is not the tool's output at all and drops single
figures that are missing or not finite.
"""

from __future__ import annotations

import csv
import io
import json
import re

from registry.io.sparecores.apps import COMPRESSION_WORK, GEEKBENCH_WORK, REQUESTS_WORK
from registry.io.sparecores.figures import first_each, positive
from registry.io.sparecores.micro import size_label
from registry.io.sparecores.records import AppResult


def _run(app: str, threads: int | None, work: float, rate, unit: str, task: str) -> AppResult | None:
    r = positive(rate)
    return None if r is None else AppResult(app, threads, work / r, work, r, unit, task)


def _keep(items) -> list[AppResult]:
    return first_each(items, lambda a: a.app)


_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_THROUGHPUT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([KMGT]?)(B|[A-Za-z]+)/sec\s*$")
_BASE_UNIT = {"B": "bytes"}


def geekbench_rate(description: str) -> tuple[float, str] | None:
    """'10.3 Klines/sec' -> (10300.0, 'lines/s'), '1.2 GB/sec' -> (1.2e9, 'bytes/s'); None if not a rate."""
    m = _THROUGHPUT.match(str(description))
    if not m:
        return None
    prefix, noun = m[2], m[3]
    if noun[0].isupper() and noun not in _BASE_UNIT and not prefix and noun[0] in _PREFIX:
        prefix, noun = noun[0], noun[1:]          # "Mpixels": the prefix is glued to the noun
    return float(m[1]) * _PREFIX[prefix], f"{_BASE_UNIT.get(noun, noun)}/s"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def parse_geekbench(text: str) -> list[AppResult]:
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not a Geekbench results object")
    out, sections = [], 0
    for section, mode, threads in (("Single-Core Performance", "single", 1), ("Multi-Core Performance", "multi", None)):
        workloads = doc.get(section)
        if not isinstance(workloads, dict):
            continue
        sections += 1
        for workload, result in workloads.items():
            slug = _slug(str(workload))
            if slug not in GEEKBENCH_WORK or not isinstance(result, dict):
                continue                           # the composite "Score" has no throughput
            rate = geekbench_rate(result.get("description", ""))
            if rate is not None:
                out.append(_run(f"geekbench:{slug}:{mode}", threads, GEEKBENCH_WORK[slug], rate[0], rate[1],
                                "geekbench"))
    if not sections:
        raise ValueError("no 'Single-Core Performance' or 'Multi-Core Performance' section")
    return _keep(out)


# Up to this day, Spare Cores' all-core figures of zstd and bzip3 are another measurement than after
# it (the task's hash is the same): their speed-up per vCPU over one thread, median by level, was
# 0.04-0.13 for 483-876 runs up to 2024-09-20 and 0.46-0.79 for 899 runs after (zstd-14 on 32
# vCPUs: 1.3x, as one process whose own threads share the 10 MB corpus would give). Under one
# name, a node's `all` time was 10x apart depending on when it was measured, and the
# cross-architecture evaluation's 90th-percentile error came mostly from predicting one kind from
# the other. So the early kind is its own app, tagged `all-2024`.
EARLY_ALL_UNTIL = "2024-09-20"
EARLY_ALL_ALGOS = frozenset({"zstd", "bzip3"})


# Newer runs name lz4's block size by its frame-format id (python-lz4's BLOCKSIZE_*: 0 the default,
# 64 KiB; 4-7 = 64 KiB, 256 KiB, 1 MiB, 4 MiB), older ones in bytes. The same corpus gives the same
# compression ratio to 15 digits for 0 and 65536, 6 and 1048576, 7 and 4194304 (hcloud:cpx22 against
# aws:m7a.large): one app each, whichever way a run spelled it.
LZ4_BLOCK_IDS = {0: 64 * 2**10, 4: 64 * 2**10, 5: 256 * 2**10, 6: 2**20, 7: 4 * 2**20}


def parse_compression(text: str, started: str | None = None) -> list[AppResult]:
    """`started`: the task's start (meta.json), which tells the two kinds of all-core figures of
    EARLY_ALL_ALGOS apart (None: the later kind)."""
    early = bool(started) and str(started)[:10] <= EARLY_ALL_UNTIL
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not an {algo: {level: [...]}} object")
    runs = [(algo, level, e) for algo, levels in doc.items() if isinstance(levels, dict)
            and re.fullmatch(r"[a-z0-9_]+", str(algo))
            for level, entries in levels.items() if isinstance(entries, list)
            for e in entries if isinstance(e, dict) and type(e.get("threads")) is int and e["threads"] > 0]
    # "all" is one process per core: the most processes of the whole run (some algorithms run
    # single-threaded only); on a 1-core server that is 1, and its figure is both 1t and all
    most = max((e["threads"] for *_, e in runs), default=0)
    out = []
    for algo, level, e in runs:
        name = str(algo) if level in (None, "null", "") else f"{algo}-{level}"
        block = (e.get("extra_args") or {}).get("block_size") if isinstance(e.get("extra_args"), dict) else None
        if algo == "lz4" and type(block) is int:
            block = LZ4_BLOCK_IDS.get(block, block)
        if isinstance(block, int) and block > 0:
            name += f"-b{size_label(block)}"
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            continue
        # 1 thread, and one process per core ("all"); a 1-core server's figure is both
        tags = [(1, "1t")] if e["threads"] == 1 else []
        if e["threads"] == most:
            tags.append((None, "all-2024" if early and algo in EARLY_ALL_ALGOS else "all"))
        for threads, tag in tags:
            for op in ("compress", "decompress"):
                out.append(_run(f"compression:{name}:{op}:{tag}", threads, COMPRESSION_WORK, e.get(op),
                                "bytes/s", "compression_text"))
    return _keep(out)


def _csv_rows(text: str, needed: set[str]) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or not needed <= set(rows[0]):
        raise ValueError(f"not CSV with columns {', '.join(sorted(needed))}")
    return rows


def parse_redis(text: str) -> list[AppResult]:
    out = []
    for r in _csv_rows(text, {"operation", "pipeline", "rps"}):
        op, pipeline = (r.get("operation") or "").strip().lower(), (r.get("pipeline") or "").strip()
        if re.fullmatch(r"[a-z]+", op) and pipeline.isdigit():
            out.append(_run(f"redis:{op}:p{int(pipeline)}", None, REQUESTS_WORK, r.get("rps"), "requests/s", "redis"))
    return _keep(out)


def parse_static_web(text: str, vcpus: int | None) -> list[AppResult]:
    """Best requests/s over wrk's thread counts, per file size and connections per vCPU."""
    if not vcpus:
        raise ValueError("the node's vCPUs are unknown (connections are per vCPU)")
    best: dict[str, float] = {}
    for r in _csv_rows(text, {"size", "connections", "rps"}):
        size, conn, rps = (r.get("size") or "").strip(), (r.get("connections") or "").strip(), positive(r.get("rps"))
        if not re.fullmatch(r"[0-9]+[kmg]?", size) or not conn.isdigit() or rps is None:
            continue
        if (r.get("failed") or "0").strip() not in ("0", ""):
            continue
        per_vcpu = int(conn) / vcpus
        label = f"{per_vcpu:g}"
        app = f"static_web:{size}:c{label}"
        best[app] = max(best.get(app, 0.0), rps)
    return [AppResult(app, None, REQUESTS_WORK / rps, REQUESTS_WORK, rps, "requests/s", "static_web")
            for app, rps in best.items()]


_GGUF = re.compile(r"\.gguf$", re.I)


def _llm_records(text: str):
    """llama-bench's records: the JSON objects with an `avg_ts`, one per line; log lines between them
    (and a damaged line nested past the JSON parser's depth) are not records."""
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict) and "avg_ts" in row:
            yield row


def parse_llm(text: str) -> list[AppResult]:
    """llama-bench's JSON lines (Spare Cores' `llm` task, llama.cpp on every physical core): one
    app per model and test, ``llm:<model>:pp<N>`` (prompt processing of N tokens), ``tg<N>`` (text
    generation of N tokens) or ``pp<N>+tg<M>``; the job is the test's tokens, the rate llama-bench's
    mean tokens/s. Lines of a GPU build or with layers offloaded to a GPU are not CPU results:
    dropped (a server whose every line is one has no figures)."""
    out, lines = [], 0
    for row in _llm_records(text):
        lines += 1
        layers, backends = row.get("n_gpu_layers"), str(row.get("backends") or "CPU")
        if (layers not in (0, None) or backends.upper() != "CPU" or str(row.get("gpu_info") or "").strip()):
            continue
        model = _slug(_GGUF.sub("", str(row.get("model_filename") or "").rsplit("/", 1)[-1]))
        prompt, gen = row.get("n_prompt"), row.get("n_gen")
        if not 0 < len(model) <= 80 or type(prompt) is not int or type(gen) is not int or not (
                0 <= prompt <= 2**31 and 0 <= gen <= 2**31 and prompt + gen > 0):
            continue
        test = "+".join(f"{tag}{n}" for tag, n in (("pp", prompt), ("tg", gen)) if n)
        out.append(_run(f"llm:{model}:{test}", None, float(prompt + gen), row.get("avg_ts"), "tokens/s", "llm"))
    if not lines:
        raise ValueError("no llama-bench record (a JSON object with avg_ts)")
    return _keep(out)


def llm_cpus(text: str) -> set[str]:
    """The CPU model names llama-bench says it ran on (its records' `cpu_info`)."""
    return {row["cpu_info"][:200] for row in _llm_records(text) if isinstance(row.get("cpu_info"), str)}
