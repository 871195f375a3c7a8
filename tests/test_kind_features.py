"""Features that tell kinds of work apart on a node without hardware counters (issue 28, item 2).

Real programs of four kinds (tests/programs/kinds.c: an FP multiply-add loop, a memory-bound triad,
a branchy integer hash, a cache-tiled matrix product) and the microbenchmark configs that are
`nodereg match`'s references are measured with the same cachegrind pass, on a node whose
last-level cache is 1 MiB so that memory-resident sizes stay small under valgrind. The similarity
model's nearest reference for each program must be one of its own kind (register-resident
arithmetic, a memory-level stream, the branchy integer hash, cache-resident work). Before the branch
simulation and the integer references, the hash could only match FP or memory kernels, and only
the working set (which the tiled product shares with the stream) told memory from compute."""

import dataclasses
import os

import numpy as np
import pytest

from registry.inventory import Cache, collect
from registry.measure import cachegrind
from registry.models.base import Matrix, Query, ReferenceSet
from registry.models.similarity import SimilarityModel
from registry.profile import cachegrind_pass, catalog
from registry.profile.signatures import SIGNED_KERNELS
from registry.profile.sweep import Config

CPU = min(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(not cachegrind.available(), reason="needs valgrind")

# kernel, working set in bytes (0: none), level
REFERENCES = [("peak_fma", 0, "compute"), ("scalar_fp64", 0, "compute"), ("int_ops", 0, "compute"),
              ("int_branch", 0, "compute"), ("triad", 24 << 10, "L1"), ("load", 16 << 10, "L1"),
              ("store", 16 << 10, "L1"), ("triad", 24 << 20, "memory"), ("load", 16 << 20, "memory"),
              ("store", 16 << 20, "memory"), ("chase", 8 << 20, "memory")]
# program argument -> the references of its own kind
# (cachegrind counts instructions, not their kind: FP and integer multiply-add chains look alike)
KINDS = {("fma", "20000"): {"peak_fma", "scalar_fp64", "int_ops"},
         ("stream", "1000000"): {"triad|memory", "load|memory", "store|memory"},
         ("hash", "3000000"): {"int_branch"},
         ("matmul", "192"): {"peak_fma", "scalar_fp64", "int_ops", "triad|L1", "load|L1", "store|L1"}}


@pytest.fixture(scope="module")
def node():
    """This host with a 32 KiB L1 and a 1 MiB last-level cache, as cachegrind simulates them."""
    return dataclasses.replace(collect([CPU]), caches=[Cache(1, "Data", 32768, 64, 1, 1),
                                                       Cache(2, "Unified", 1 << 20, 64, 1, 1)])


@pytest.fixture(scope="module")
def references(node, binary):
    out = {}
    for name, ws, level in REFERENCES:
        ub = catalog.get(name)
        per_element = {"triad": 24, "load": 8, "store": 8}.get(name, 64)
        config = Config(ub=ub, threads=1, placement="compact", cpus=(CPU,), n=ws // per_element if ws else None,
                        line=64 if name == "chase" else None, level=level if ws else None)
        out[f"{name}|{level}" if ws else name] = cachegrind_pass.measure(config, node)
    return out


def _model(references: dict[str, dict[str, float]]) -> SimilarityModel:
    rows = list(references)
    columns = sorted({f"cachegrind.{m}" for sig in references.values() for m in sig})
    values = np.array([[references[r].get(c.split(".", 1)[1], np.nan) for c in columns] for r in rows])
    # the distance does not read the ratios (relevance_power=0: the shipped prior weights only)
    ratios = Matrix(rows, ["other"], np.zeros((len(rows), 1)))
    return SimilarityModel(relevance_power=0).fit(ReferenceSet("base", Matrix(rows, columns, values), ratios))


def test_the_signed_kernels_include_integer_and_store_references():
    assert {"int_ops", "int_branch", "store"} <= SIGNED_KERNELS


def test_the_branch_simulation_tells_the_integer_hash_from_fp_chains(references):
    assert references["int_branch"]["branch_miss_rate"] > 0.2 > 0.05 > references["peak_fma"]["branch_miss_rate"]
    assert references["store|memory"]["write_share"] > 0.9 > 0.1 > references["load|memory"]["write_share"]


@pytest.mark.parametrize("argv", list(KINDS), ids=[a[0] for a in KINDS])
def test_each_program_matches_a_reference_of_its_own_kind(argv, references, node, kinds_program):
    model = _model(references)
    stats = cachegrind.run([str(kinds_program), *argv], node)
    signature = {f"cachegrind.{m}": v for m, v in cachegrind.metrics(stats.total).items()}
    nearest = model.nearest(Query(argv[0], signature, 1.0), 3)
    assert nearest[0][0] in KINDS[argv], (argv[0], nearest)
    if argv[0] == "matmul":   # a tiled product is not a memory kernel, though its arrays exceed the cache
        assert not any(ref.endswith("|memory") for ref, _ in nearest[:2]), nearest
