"""Sweep planning follows the node's caches, topology and the user's filters (fake inventories)."""

import json
import math

import pytest

from registry.errors import UserError
from registry.inventory import Cache, Inventory
from registry.profile import catalog, signatures, sweep
from registry.profile.placement import Cpu, order, placements
from registry.profile.stats import RepPolicy, converged

KB, MB = 1024, 1024 * 1024


def fake_inventory(l1=32 * KB, l2=512 * KB, l3=8 * MB, cpus=4, l3_shared=4, memory=64 * 1024 * MB) -> Inventory:
    return Inventory(
        hostname="fake", cpu_model="Fake CPU", architecture="x86_64", cpus=list(range(cpus)), cpu_count=cpus,
        cpu_list=f"0-{cpus - 1}", restricted=False, sockets=1, cores=cpus, threads_per_core=1, numa_nodes=1,
        memory_bytes=memory, max_mhz=3000.0, kernel="6.1", os="Linux", compiler="cc", isa_flags=["avx2"],
        caches=[Cache(1, "Data", l1, 64, 1, cpus), Cache(1, "Instruction", 32 * KB, 64, 1, cpus),
                Cache(2, "Unified", l2, 64, 1, cpus), Cache(3, "Unified", l3, 64, l3_shared, cpus // l3_shared)])


def flat_topology(cpus=4, per_llc=4, per_package=None) -> list[Cpu]:
    per_package = per_package or cpus
    return [Cpu(c, c // per_package, c % per_package, (c // per_llc) * per_llc) for c in range(cpus)]


@pytest.mark.parametrize("l1,l2,l3", [(32 * KB, 512 * KB, 8 * MB), (48 * KB, 1 * MB, 32 * MB),
                                      (64 * KB, 2 * MB, 16 * MB)])
def test_footprints_span_the_caches_with_points_around_every_boundary(l1, l2, l3):
    inv = fake_inventory(l1, l2, l3)
    grid = sweep.footprint_grid(inv, 1)
    assert min(grid) >= l1 / 2 and min(grid) < l1
    assert max(grid) >= 4 * l3 and max(grid) < 8 * l3
    for size in (l1, l2, l3):
        assert any(size / 2 <= p < size for p in grid), size
        assert any(size < p <= 2 * size for p in grid), size
    assert grid == sorted(set(grid))


def test_grid_is_shared_between_nodes_with_different_caches():
    """The thesis compares one config across nodes: most sizes must be common."""
    a = set(sweep.footprint_grid(fake_inventory(32 * KB, 512 * KB, 8 * MB), 1))
    b = set(sweep.footprint_grid(fake_inventory(48 * KB, 1 * MB, 32 * MB), 1))
    assert len(a & b) >= 8


def test_level_points_follow_the_caches_and_threads():
    inv = fake_inventory()
    topo = flat_topology()
    one = sweep.level_points(inv, topo, [0])
    assert one == {"L1": 16 * KB, "L2": int(math.sqrt(32 * KB * 512 * KB)), "L3": int(math.sqrt(512 * KB * 8 * MB)),
                   "memory": sweep.MEMORY_POINT_MIN}          # 4 x 8 MiB would still be cache on many hosts
    four = sweep.level_points(inv, topo, [0, 1, 2, 3])
    assert four["L1"] == 4 * 16 * KB                        # private level: once per core
    assert four["L3"] == int(math.sqrt(4 * 512 * KB * 8 * MB))
    assert four["memory"] == one["memory"]                  # one shared L3: same memory point
    two_domains = sweep.level_points(fake_inventory(l3_shared=2), flat_topology(per_llc=2), [0, 2])
    assert two_domains["memory"] == max(2 * 4 * 8 * MB, sweep.MEMORY_POINT_MIN)  # two L3 domains in use
    for point, level in zip(one.values(), one):
        assert sweep.level_of(inv, topo, [0], point) == level


def test_levels_without_room_are_skipped():
    inv = fake_inventory(l1=32 * KB, l2=1 * MB, l3=1536 * KB, l3_shared=1)
    points = sweep.level_points(inv, flat_topology(per_llc=1), [0])
    assert "L3" not in points and points["memory"] == sweep.MEMORY_POINT_MIN


def test_plan_covers_every_kernel_family_with_stream_descriptors():
    inv, topo = fake_inventory(), flat_topology()
    plan = sweep.plan(inv, topo, "default", threads=[1, 2])
    names = {c.ub.name for c in plan.configs}
    assert names == {ub.name for ub in catalog.ALL}
    keys = [c.key for c in plan.configs]
    assert len(keys) == len(set(keys))
    for c in plan.configs:
        if c.ub.family == "thesis":
            assert len(c.streams) == c.ub.n_streams
            for s, access, pattern in zip(c.streams, c.ub.access, c.ub.pattern):
                assert (s.access, s.pattern, s.dtype) == (access, pattern, c.ub.dtype)
                assert s.stride_bytes % s.elem_bytes == 0
                assert s.size_elems * s.elem_bytes // s.stride_bytes >= sweep.MIN_ACCESSES
        assert len(c.descriptors()) == c.ub.n_streams
    thesis = [c for c in plan.configs if c.ub.name == "mbw1c" and c.threads == 1]
    strides = {c.streams[0].stride_bytes for c in thesis}
    assert min(strides) == 8 and max(strides) > 4096            # one element to beyond a page
    sizes = {c.streams[0].size_elems * 8 for c in thesis}
    assert min(sizes) < 32 * KB and max(sizes) >= 4 * 8 * MB
    assert {c.threads for c in plan.configs} == {1, 2}


def test_quick_plan_still_covers_every_level():
    plan = sweep.plan(fake_inventory(), flat_topology(), "quick")
    levels = {(c.ub.name, c.level) for c in plan.configs}
    for kernel in ("load", "triad", "chase"):
        for level in ("L1", "L2", "L3", "memory"):
            assert (kernel, level) in levels
    assert any(c.ub.name == "peak_fma" for c in plan.configs)
    assert len(plan.configs) < len(sweep.plan(fake_inventory(), flat_topology(), "default").configs) / 5


def test_quick_plan_has_the_dependent_chain_wherever_the_other_compute_kernels_are():
    """fp_chain (the latency-bound reference) runs at every thread count of the quick sweep, one thread
    to all, and is signed there like scalar_fp64, so `nodereg match` can place a phase next to it."""
    inv, topo = fake_inventory(cpus=16, l3_shared=16), flat_topology(cpus=16, per_llc=16)
    plan = sweep.plan(inv, topo, "quick")
    assert plan.threads[0] == 1 and plan.threads[-1] == 16

    def threads(name, configs):
        return sorted(c.threads for c in configs if c.ub.name == name)

    assert threads("fp_chain", plan.configs) == threads("scalar_fp64", plan.configs) == plan.threads
    signed = signatures.representatives(plan.configs)
    assert threads("fp_chain", signed) == threads("scalar_fp64", signed) == plan.threads


def test_gemm_runs_from_l2_to_memory_with_its_side_from_each_level_point():
    """gemm, the compute kernel with a working set, runs at every level point but L1 (N would be
    about 15) at every thread count of the quick sweep, its N the multiple of 64 whose C, A and B
    (8 N (N + 2K) bytes) come nearest the point and still fit its level; its memory point is 4x the
    last-level cache. Each level's config is its own (N is in the key) and signed."""
    inv, topo = fake_inventory(), flat_topology()
    plan = sweep.plan(inv, topo, "quick")
    gemm = [c for c in plan.configs if c.ub.name == "gemm"]
    assert {(c.threads, c.level) for c in gemm} == {(t, lvl) for t in plan.threads for lvl in ("L2", "L3", "memory")}
    for c in gemm:
        point = sweep.level_points(inv, topo, c.cpus)[c.level] if c.level != "memory" else 4 * 8 * MB
        assert c.n % 64 == 0 and c.ws_bytes == 8 * c.n * (c.n + 2 * 64)
        assert abs(c.n - (math.sqrt(64**2 + point / 8) - 64)) <= 32, (c.level, c.n, point)
        assert c.ws_level == c.level == sweep.level_of(inv, topo, c.cpus, c.ws_bytes)
        assert c.driver_args() == {"kernel": "gemm", "threads": c.threads, "cpus": c.cpus, "n": c.n}
        assert json.loads(c.key)["n"] == c.n and c.params() == {"n": c.n}
    assert [c.n for c in gemm if c.threads == 1] == [64, 448, 1984]     # 96 KiB, 1.97 MiB, 32 MiB
    signed = signatures.representatives(plan.configs)
    assert {(c.threads, c.level) for c in signed if c.ub.name == "gemm"} == {(c.threads, c.level) for c in gemm}


def test_memory_level_writers_run_with_both_store_kinds_and_sign_with_ordinary_stores():
    plan = sweep.plan(fake_inventory(), flat_topology(), "quick", kernels=[catalog.get("triad"), catalog.get("load")])
    kinds: dict[tuple, set[bool]] = {}
    for c in plan.configs:
        kinds.setdefault((c.ub.name, c.level, c.threads), set()).add(c.nt)
    for (name, level, _), nts in kinds.items():
        assert nts == ({False, True} if name == "triad" and level == "memory" else {False})
    signed = signatures.representatives(plan.configs)
    assert not any(c.nt for c in signed)
    assert {(c.ub.name, c.threads) for c in signed if c.level == "memory"} == {
        (k, t) for k in ("triad", "load") for t in plan.threads}


def test_scatter_placement_where_it_differs():
    topo = flat_topology(cpus=8, per_llc=4, per_package=4)      # two sockets of four cores
    assert order(topo, "compact") == list(range(8))
    assert order(topo, "scatter") == [0, 4, 1, 5, 2, 6, 3, 7]
    assert placements(topo, 2) == {"compact": (0, 1), "scatter": (0, 4)}
    assert placements(topo, 8) == {"compact": tuple(range(8))}
    inv = fake_inventory(cpus=8, l3_shared=4)
    plan = sweep.plan(inv, topo, "default", kernels=[catalog.get("triad")], threads=[2])
    assert {c.placement for c in plan.configs} == {"compact", "scatter"}
    assert {c.cpus for c in plan.configs} == {(0, 1), (0, 4)}


def test_smt_siblings_come_after_every_core():
    topo = [Cpu(0, 0, 0, 0), Cpu(1, 0, 1, 0), Cpu(2, 0, 0, 0), Cpu(3, 0, 1, 0)]   # 2 cores x 2 threads
    assert order(topo, "compact") == [0, 1, 2, 3]


def test_filters_and_their_errors():
    inv, topo = fake_inventory(), flat_topology()
    plan = sweep.plan(inv, topo, "default", kernels=catalog.select("latency,peak_fma"), threads=[3])
    assert {c.ub.name for c in plan.configs} == {"chase", "peak_fma"} and {c.threads for c in plan.configs} == {3}
    with pytest.raises(UserError, match="threads must be 1..4"):
        sweep.plan(inv, topo, "default", threads=[5])
    with pytest.raises(UserError, match="unknown microbenchmark 'nope'"):
        catalog.select("triad,nope")
    assert [ub.name for ub in catalog.select("bandwidth")] == ["copy", "scale", "add", "triad", "load", "store"]


def test_working_sets_above_the_memory_limit_are_skipped():
    inv = fake_inventory(memory=256 * MB)
    plan = sweep.plan(inv, flat_topology(), "default", kernels=[catalog.get("mbw1p")], threads=[4])
    assert plan.configs and all(c.ws_bytes <= 64 * MB for c in plan.configs)
    assert any("skipped" in n for n in plan.notes)


def test_no_cache_information_falls_back_with_a_note():
    inv = fake_inventory()
    inv.caches = []
    plan = sweep.plan(inv, flat_topology(), "quick")
    assert plan.configs and plan.notes


def test_repetition_policy():
    policy = RepPolicy.for_mode("default")
    ms = 1e-3
    assert policy.first_reps == 3
    assert policy.more_needed([ms] * 3) == policy.min_reps - 3
    assert policy.more_needed([ms] * policy.min_reps) == 0                      # settled
    noisy = [ms, 2 * ms, ms, 2 * ms, ms, 2 * ms]
    assert not converged(noisy, 3, 0.01) and policy.more_needed(noisy) == 3
    assert policy.more_needed(noisy * 10) == 0                                  # max reached
    assert policy.is_unstable(noisy * 2)
    slow = [0.2, 0.21, 0.205]                                                   # budget used by 3 long reps
    assert policy.more_needed(slow) == 0 and not policy.is_unstable(slow)
    fixed = RepPolicy.for_mode("quick", reps=4)
    assert fixed.first_reps == 4 and fixed.more_needed([ms, 1.5 * ms, ms, 1.5 * ms]) == 0
