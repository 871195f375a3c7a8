"""Synthetic Spare Cores server folders, written in the upstream formats (sc-inspector-data layout).

Each writer returns the text of one task's output and the figures it holds, so tests compare what
the importer stored with what was written, never with the importer's own reading. Figures scale
with a server's `speed`; nothing here is copied from the real dataset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

OUTPUT = {"openssl": "parsed.json", "geekbench": "results.json"}


@dataclass
class Server:
    vendor: str = "aws"
    name: str = "m7a.large"
    vcpus: int = 2
    arch: str = "x86_64"
    vendor_id: str = "AuthenticAMD"
    model_name: str = "AMD EPYC 9R14"
    family: int | None = 25
    model: int | None = 17
    stepping: int = 1
    speed: float = 1.0
    start: str = "2025-06-08T20:00:00.000001"
    flags: list[str] = field(default_factory=lambda: ["fpu", "sse2", "avx2"])


def lscpu(s: Server) -> tuple[str, dict]:
    fields = [("Architecture:", s.arch), ("CPU(s):", str(s.vcpus)), ("Vendor ID:", s.vendor_id),
              ("Model name:", s.model_name)]
    if s.family is not None:
        fields.append(("CPU family:", str(s.family)))
    fields += [("Model:", str(s.model)), ("Thread(s) per core:", "1"), ("Core(s) per socket:", str(s.vcpus)),
               ("Socket(s):", "1"), ("Stepping:", str(s.stepping)), ("Flags:", " ".join(s.flags)),
               ("Hypervisor vendor:", "KVM"), ("L1d cache:", f"{32768 * s.vcpus} ({s.vcpus} instances)"),
               ("L2 cache:", f"{2**20 * s.vcpus} ({s.vcpus} instances)"), ("L3 cache:", "8388608 (1 instance)"),
               ("NUMA node(s):", "1")]
    doc = {"lscpu": [{"field": k, "data": v} for k, v in fields]}
    return json.dumps(doc, indent=2), {"vcpus": s.vcpus, "l1d": 32768, "l2": 2**20, "l3": 8388608}


MEMBENCH_SIZES_KB = [16, 64, 8192, 65536]


def membench(s: Server, old: bool = False) -> tuple[str, dict]:
    head = ("size_kb,operation,bandwidth_mb_s,latency_ns,threads,iterations,elapsed_s" if old else
            "size_kb,operation,bandwidth_mb_s,latency_ns,latency_stddev_ns,latency_samples,threads,iterations,elapsed_s")
    lines, figures = [head], {}
    label = {16: "16KiB", 64: "64KiB", 8192: "8MiB", 65536: "64MiB"}
    for i, kb in enumerate(MEMBENCH_SIZES_KB):
        for op, base in (("read", 100000.0), ("write", 60000.0), ("copy", 40000.0)):
            bw = round(base * s.speed / (i + 1), 2)
            extra = "" if old else "0,0,"
            lines.append(f"{kb},{op},{bw},0,{extra}{s.vcpus},100,0.1")
            figures[f"sparecores:membench:{op}:{label[kb]}:all"] = bw
        lat = round((1.5 + 10 * i) / s.speed, 2)
        extra = "" if old else "0.01,7,"
        lines.append(f"{kb},latency,0,{lat},{extra}1,7,0.6")
        figures[f"sparecores:membench:latency:{label[kb]}:1t"] = lat
    return "\n".join(lines) + "\n", figures


BW_MEM_SIZES = [("0.016384", "16KB"), ("0.262144", "256KB"), ("1.00", "1MB"), ("512.00", "512MB")]


def bw_mem(s: Server) -> tuple[str, dict]:
    lines, figures = [], {}
    for op, base in (("rd", 200000.0), ("wr", 150000.0), ("rdwr", 100000.0)):
        for i, (size, label) in enumerate(BW_MEM_SIZES):
            v = round(base * s.speed / (i + 1), 2)
            lines.append(f"{op} {size} {v}")
            figures[f"sparecores:bw_mem:{op}:{label}:all"] = v
    return "\n".join(lines) + "\n", figures


def stressngfull(s: Server) -> tuple[str, dict]:
    pts = {n: round(3000.0 * s.speed * n ** 0.9, 2) for n in range(1, s.vcpus + 1)}
    text = "".join(f"{n},{v}\n" for n, v in pts.items())
    return text, {"sparecores:stressngfull:cpu-div16:1t": pts[1],
                  "sparecores:stressngfull:cpu-div16:all": pts[s.vcpus]}


def stressng_old(s: Server, single: bool) -> tuple[str, dict]:
    n = 1 if single else s.vcpus
    rate = round(3000.0 * s.speed * n, 2)
    text = (f"stress-ng: info:  [1] setting to a 20 secs run per stressor\n"
            f"stress-ng: info:  [1] dispatching hogs: {n} cpu\n"
            "stress-ng: metrc: [1] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s\n"
            "stress-ng: metrc: [1]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)\n"
            f"stress-ng: metrc: [1] cpu              {int(rate * 20)}     20.00     {20.0 * n:.2f}      0.00"
            f"      {rate}        {rate / n:.2f}        99.19          1104\n"
            "stress-ng: info:  [1] successful run completed in 20.00 secs\n")
    return text, {f"sparecores:stressng:cpu_all:{'1t' if single else 'all'}": rate}


STRESSORS = {"branch": ("cpu_integer", "compute"), "fma": ("cpu_float_simd", "compute"),
             "crypt": ("crypto", "crypto"), "stream": ("memory", "bandwidth"), "fork": ("os", "system")}


def stressng_benchmarks(s: Server) -> tuple[str, dict]:
    doc = {"stressors": {}, "categories": {}, "meta": {"physical_cpus": s.vcpus, "stressor_count": len(STRESSORS)}}
    figures = {}
    for i, (name, (cat, _)) in enumerate(STRESSORS.items()):
        one, many = round(1000.0 * (i + 1) * s.speed, 2), round(1000.0 * (i + 1) * s.speed * s.vcpus * 0.9, 2)
        if s.vcpus == 1:
            many = one
        doc["stressors"][name] = {"1": {"bogo_ops_per_sec": one}, str(s.vcpus): {"bogo_ops_per_sec": many}}
        doc["categories"].setdefault(cat, []).append(name)
        figures[f"sparecores:stressng:{name}:1t"] = one
        figures[f"sparecores:stressng:{name}:all"] = many
    return json.dumps(doc, indent=2), figures


PASSMARK = {"CPU_INTEGER_MATH": 12000.0, "CPU_SINGLETHREAD": 2900.0, "ME_LATENCY": 80.0, "ME_READ_S": 27000.0,
            "m_CPU_enc_SHA": 3.5e9}


def passmark(s: Server) -> tuple[str, dict]:
    figures, lines = {}, ["BaselineInfo:", "  WebDBID: -1", "Version:", "  Major: 11", "  Build: 1002",
                          "Results:", "  Results Complete: true", f"  NumTestProcesses: {s.vcpus}"]
    for key, base in PASSMARK.items():
        v = base / s.speed if key == "ME_LATENCY" else base * s.speed
        lines.append(f"  {key}: {v!r}")
        figures[f"sparecores:passmark:{key}:{'1t' if key == 'CPU_SINGLETHREAD' else 'all'}"] = v
    lines += ["SystemInformation:", f"  Processor: {s.model_name}", "  Memory: 7736",
              "Checksum: 0CD87BF162E1759BD1617202F9A30D9C9B783BDD"]
    return "\n".join(lines) + "\n", figures


def openssl(s: Server) -> tuple[str, dict]:
    rows, figures = [], {}
    for algo, base in (("sha256", 3e9), ("AES-256-CBC", 2e9)):
        for block in (16, 16384):
            v = round(base * s.speed * (1 if block == 16384 else 0.1), 2)
            rows.append({"algo": algo, "block_size": block, "speed": v})
            figures[f"sparecores:openssl:{algo}:{block}:all"] = v
    return json.dumps(rows, indent=2), figures


# workload: (description text at speed 1, rate at speed 1 in base units/s, unit)
GEEKBENCH = {"Clang": ("{:.1f} Klines/sec", 10.0, 1e3, "lines/s"),
             "File Compression": ("{:.1f} MB/sec", 250.0, 1e6, "bytes/s"),
             "Ray Tracer": ("{:.2f} Mpixels/sec", 2.0, 1e6, "pixels/s"),
             "Structure from Motion": ("{:.1f} Kpixels/sec", 60.0, 1e3, "pixels/s")}


def geekbench(s: Server) -> tuple[str, dict]:
    doc, figures = {}, {}
    for section, mode, mult in (("Single-Core Performance", "single", 1.0), ("Multi-Core Performance", "multi", 1.8)):
        doc[section] = {"Score": {"score": int(2000 * s.speed * mult)}}
        for workload, (fmt, base, scale, unit) in GEEKBENCH.items():
            shown = fmt.format(base * s.speed * mult)
            doc[section][workload] = {"score": 2000, "description": shown}
            slug = workload.lower().replace(" ", "-")
            figures[f"geekbench:{slug}:{mode}"] = (float(shown.split()[0]) * scale, unit)
    return json.dumps(doc, indent=1), figures


def compression(s: Server) -> tuple[str, dict]:
    doc, figures = {}, {}
    cores = max(1, s.vcpus // 2) if s.vcpus > 2 else s.vcpus
    for algo, level, extra, base, multi in (("zstd", "3", {}, 5e7, True), ("gzip", "9", {}, 1e7, True),
                                            ("lz4", "1", {"block_size": 65536}, 4e8, True),
                                            ("bzip3", None, {"block_size": 1048576}, 9e6, True),
                                            ("brotli", "4", {}, 6e7, False)):    # upstream: single-threaded only
        entries = []
        name = algo if level is None else f"{algo}-{level}"
        if extra:
            name += "-b" + {65536: "64KiB", 1048576: "1MiB"}[extra["block_size"]]
        for n in sorted({1, cores if multi else 1}):
            c, d = base * s.speed * n, base * 3 * s.speed * n
            entries.append({"threads": n, "extra_args": extra, "ratio": 30.0, "compress": c, "decompress": d})
            for tag in (["1t"] if n == 1 else []) + (["all"] if n == cores else []):
                figures[f"compression:{name}:compress:{tag}"] = c
                figures[f"compression:{name}:decompress:{tag}"] = d
        doc.setdefault(algo, {})["null" if level is None else level] = entries
    return json.dumps(doc, indent=2), figures


def redis(s: Server) -> tuple[str, dict]:
    lines = ['"operation","threads","pipeline","rps","latency","server_usr","server_sys","client_usr","client_sys"']
    figures = {}
    for p in (1, 16, 512):
        rps = int(100000 * s.speed * p ** 0.5)
        lines.append(f'"SET",1,{p},{rps},0.84,1.37,7.19,2.00,9.33')
        figures[f"redis:set:p{p}"] = float(rps)
    return "\n".join(lines) + "\n", figures


def static_web(s: Server) -> tuple[str, dict]:
    lines = ['"size","threads","connections","rps","latency","failed","server_usr","server_sys","client_usr","client_sys"']
    figures = {}
    for size in ("1k", "64k"):
        for per in (1, 4):
            conn = per * s.vcpus
            best = 0
            for threads in (2, 4):
                rps = int(80000 * s.speed * per ** 0.3 * (1.1 if threads == 4 else 1.0))
                lines.append(f'"{size}",{threads},{conn},{rps},0.000025,0,2.3,7.9,1.2,8.5')
                best = max(best, rps)
            figures[f"static_web:{size}:c{per}"] = float(best)
    return "\n".join(lines) + "\n", figures


def llm(s: Server, gpu: bool = False) -> tuple[str, dict]:
    """llama-bench JSON lines: two models, prompt processing and text generation; `gpu` adds the
    lines of a GPU build with every layer offloaded (not CPU results: no figures)."""
    lines, figures = ["build: 51f311e0 (4753) with cc for x86_64"], {}   # a log line between the records
    cores = max(1, s.vcpus // 2) if s.vcpus > 2 else s.vcpus
    for path, size in (("/models/SmolLM-135M.Q4_K_M.gguf", 1.0), ("/models/gemma-2b.Q4_K_M.gguf", 12.0)):
        for prompt, gen in ((16, 0), (512, 0), (0, 16), (0, 128)):
            rate = (400.0 * cores if prompt else 150.0) * s.speed / size
            row = {"build_commit": "51f311e0", "cpu_info": s.model_name, "gpu_info": "", "backends": "CPU",
                   "model_filename": path, "n_threads": cores, "n_gpu_layers": 0, "n_prompt": prompt, "n_gen": gen,
                   "avg_ns": int(1e9 * (prompt + gen) / rate), "avg_ts": rate, "stddev_ts": rate / 100}
            lines.append(json.dumps(row))
            slug = path.rsplit("/", 1)[1].removesuffix(".gguf").lower().replace(".", "-").replace("_", "-")
            figures[f"llm:{slug}:{'pp' if prompt else 'tg'}{prompt or gen}"] = rate
            if gpu:
                lines.append(json.dumps(row | {"gpu_info": "NVIDIA L4", "backends": "CUDA", "n_gpu_layers": 99,
                                               "avg_ts": rate * 20}))
    return "\n".join(lines) + "\n", figures


def writers(s: Server, old_stressng: bool = False, old_membench: bool = False) -> dict:
    """task -> (output text, figures) for a full server of the current (or older) layout."""
    out = {"lscpu": lscpu(s), "membench": membench(s, old_membench), "bw_mem": bw_mem(s),
           "stressngfull": stressngfull(s), "stressng_benchmarks": stressng_benchmarks(s), "passmark": passmark(s),
           "openssl": openssl(s), "geekbench": geekbench(s), "compression_text": compression(s), "redis": redis(s),
           "static_web": static_web(s), "llm": llm(s), "virtualization": ('{"kvm":false}', {})}
    if old_stressng:
        out["stressng"] = stressng_old(s, single=False)
        out["stressngsinglecore"] = stressng_old(s, single=True)
    return out


def meta(start: str, exit_code: int | None = 0, version: str | None = "1.0", error: str | None = None) -> str:
    return json.dumps({"start": start, "end": start.replace("T20", "T21") if exit_code is not None else None,
                       "exit_code": exit_code, "error_msg": error, "task_hash": "0" * 40, "version": version,
                       "stdout_bytes": 1, "stderr_bytes": 0, "outputs": ["stdout"]})


def write_task(root: Path, s: Server, task: str, text: str | None, exit_code: int | None = 0,
               start: str | None = None) -> None:
    folder = root / "data" / s.vendor / s.name / task
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text(meta(start or s.start, exit_code))
    if text is not None:
        (folder / OUTPUT.get(task, "stdout")).write_text(text)


def write_server(root: Path, s: Server, *, skip: tuple[str, ...] = (), failed: dict[str, int | None] | None = None,
                 old_stressng: bool = False, old_membench: bool = False) -> dict:
    """Write `s`'s folder under root/data; return {task: figures} of the tasks written successfully."""
    failed = failed or {}
    written = {}
    for task, (text, figures) in writers(s, old_stressng, old_membench).items():
        if task in skip:
            continue
        if task in failed:
            write_task(root, s, task, None, failed[task])
            continue
        write_task(root, s, task, text)
        written[task] = figures
    return written


def write_specs(root: Path, s: Server, memory_mib: int = 8192, gpus: int = 0, allocation: str = "DEDICATED") -> None:
    folder = root / "data" / "server" / s.vendor
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"vendor_id": s.vendor, "server_id": s.name, "name": s.name, "api_reference": s.name, "vcpus": s.vcpus,
           "cpu_cores": s.vcpus, "cpu_architecture": "ARM64" if s.arch == "aarch64" else "X86_64",
           "cpu_manufacturer": "AMD", "memory_amount": memory_mib, "hypervisor": "nitro", "gpu_count": gpus,
           "gpu_model": "L4" if gpus else None, "cpu_flags": s.flags, "cpu_allocation": allocation}
    (folder / f"{s.name.replace('.', '_')}.json").write_text(json.dumps(doc))
