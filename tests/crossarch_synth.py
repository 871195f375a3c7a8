"""Synthetic node types for the cross-node prediction tests (test_crossarch, test_learned_runs): CPU
families of two architectures, each with its own core and memory speed, nodes of several vCPU counts."""

import numpy as np
import pandas as pd

FAMILIES = [("Zen 4", "x86_64"), ("Zen 3", "x86_64"), ("Ice Lake", "x86_64"), ("Cascade Lake", "x86_64"),
            ("Graviton3", "aarch64"), ("Graviton4", "aarch64")]


def synthetic_nodes(rng: np.random.Generator, nodes_per_family: int, vcpus: list[int]) -> pd.DataFrame:
    """Index node (`Zen4-0`, ...); columns cpu_family, architecture, n_cpus, core and mem (speeds: a
    family's own, +-10% and +-25% per node)."""
    rows = []
    for fam, arch in FAMILIES:
        core_f, mem_f = rng.uniform(0.6, 1.6), rng.uniform(0.6, 1.6)
        for i in range(nodes_per_family):
            rows.append({"node": f"{fam.replace(' ', '')}-{i}", "cpu_family": fam, "architecture": arch,
                         "n_cpus": int(rng.choice(vcpus)),
                         "core": core_f * rng.uniform(0.9, 1.1), "mem": mem_f * rng.uniform(0.8, 1.25)})
    return pd.DataFrame(rows).set_index("node")
