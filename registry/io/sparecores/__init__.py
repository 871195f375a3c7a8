"""Spare Cores (https://sparecores.com, data CC BY-SA 4.0) as nodes, a micro-benchmark suite and apps.

SpareCores/sc-inspector-data holds, per cloud server type, the raw outputs of the benchmarks Spare
Cores ran on it; SpareCores/sc-data-dumps the vendors' specs and the benchmarks' descriptions.
Modules: records (the parsed records), server (one server folder -> records), micro and appruns
(each tool's output), inventory (lscpu and specs), family (CPU vendor and microarchitecture),
apps (app names, fixed jobs, groups), store (the import into a registry).
"""

import importlib

# loaded on first use: `match` reads only the apps' naming rules (apps), not the parsers
_FROM = {"app_group": "apps", "cpu_family": "family", "AppResult": "records", "Measurement": "records",
         "ServerRecord": "records", "parse_server": "server"}
__all__ = sorted(_FROM)


def __getattr__(name: str):
    if name in _FROM:
        return getattr(importlib.import_module(f"registry.io.sparecores.{_FROM[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
