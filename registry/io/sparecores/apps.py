"""Spare Cores application results as apps of the registry: names, the fixed job of each, groups.

A result upstream is a rate (Geekbench's "10.3 Klines/sec", compressed bytes per second, Redis
requests per second); the registry stores measured runs as times. The time of a fixed job is
work / rate, with one constant `work` per app, so that ratios between servers are the tools' own:

* ``geekbench:<workload>:single|multi``: the workload's own throughput unit, with its SI prefix
  applied (MB/sec -> bytes/s, Kpixels/sec -> pixels/s); the job is `GEEKBENCH_WORK[workload]`
  of that unit (clang: 1,000 Klines, i.e. 1e6 lines). Multi-core results are all-CPU runs.
* ``compression:<algo>-<level>[-b<block>]:compress|decompress:1t|all``: bytes/s over the text
  corpus (dickens of the Silesia corpus); the job is the corpus once, `COMPRESSION_WORK` bytes.
  zstd's and bzip3's all-core figures measured up to 2024-09-20 are tagged ``all-2024`` instead:
  another measurement under the same name upstream (registry.io.sparecores.appruns).
* ``redis:set:p<pipeline>``: SET requests/s of redis-server + memtier_benchmark on every vCPU;
  the job is `REQUESTS_WORK` requests.
* ``static_web:<size>:c<k>``: requests/s of a static web server (binserve) under wrk with k
  connections per vCPU, the best over wrk's thread counts (Spare Cores keeps the best too); the
  job is `REQUESTS_WORK` requests.
* ``llm:<model>:pp<N>|tg<N>``: tokens/s of llama.cpp's llama-bench on every physical core (Spare
  Cores' choice), CPU builds only; pp = prompt processing (batched: compute-bound), tg = text
  generation (one token at a time: the model's weights stream from memory); the job is the test's
  N tokens. Another kind of application than the four above, in a group of its own.
"""

from __future__ import annotations

# base-unit count of one job per Geekbench 6 workload (the unit is what Geekbench reports)
GEEKBENCH_WORK = {
    "file-compression": 1e9,       # bytes
    "navigation": 100.0,           # routes
    "html5-browser": 100.0,        # pages
    "pdf-renderer": 1e9,           # pixels
    "photo-library": 100.0,        # images
    "clang": 1e6,                  # lines (1,000 Klines)
    "text-processing": 1000.0,     # pages
    "asset-compression": 1e9,      # bytes
    "object-detection": 1000.0,    # images
    "background-blur": 100.0,      # images
    "horizon-detection": 1e9,      # pixels
    "object-remover": 1e9,         # pixels
    "hdr": 1e9,                    # pixels
    "photo-filter": 100.0,         # images
    "ray-tracer": 1e7,             # pixels
    "structure-from-motion": 1e6,  # pixels
}
COMPRESSION_WORK = 10_192_446.0    # bytes: dickens, Silesia corpus
REQUESTS_WORK = 1e6                # requests (Redis SET, static web GET)

GROUPS = ("geekbench-single", "geekbench-multi", "compression", "redis-web", "llm")


def app_family(app: str) -> str:
    """The apps that must not serve as references when `app` is predicted: one Geekbench workload
    (single and multi), one compression algorithm (every level, direction and thread count), all of
    Redis, all of the static web server, all of llama.cpp (every model and test: one program, its
    models are inputs); any other app is a family of its own."""
    parts = app.split(":")
    if parts[0] == "geekbench" and len(parts) >= 2:
        return f"geekbench:{parts[1]}"
    if parts[0] == "compression" and len(parts) >= 2:
        return f"compression:{parts[1].split('-')[0]}"
    if parts[0] in ("redis", "static_web", "llm"):
        return parts[0]
    return app


def app_group(name: str) -> str | None:
    """The evaluation's group of an imported app (one of GROUPS); None for an app that is not a
    Spare Cores one."""
    task, _, rest = str(name).partition(":")
    if not rest:
        return None
    if task == "geekbench":
        mode = rest.rsplit(":", 1)[-1]
        return {"single": "geekbench-single", "multi": "geekbench-multi"}.get(mode)
    if task == "compression":
        return "compression"
    if task in ("redis", "static_web"):
        return "redis-web"
    if task == "llm":
        return "llm"
    return None
