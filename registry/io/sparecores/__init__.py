"""Spare Cores (https://sparecores.com, data CC BY-SA 4.0) as nodes, a micro-benchmark suite and apps.

SpareCores/sc-inspector-data holds, per cloud server type, the raw outputs of the benchmarks Spare
Cores ran on it; SpareCores/sc-data-dumps the vendors' specs and the benchmarks' descriptions.
Modules: records (the parsed records), server (one server folder -> records), micro and appruns
(each tool's output), inventory (lscpu and specs), family (CPU vendor and microarchitecture),
apps (app names, fixed jobs, groups), store (the import into a registry).
"""

from registry.io.sparecores.apps import app_group
from registry.io.sparecores.family import cpu_family
from registry.io.sparecores.records import AppResult, Measurement, ServerRecord
from registry.io.sparecores.server import parse_server

__all__ = ["AppResult", "Measurement", "ServerRecord", "app_group", "cpu_family", "parse_server"]
