"""Did the cores a profile used run side by side? A check of the profile's own measurements.

The core-local compute kernels (each thread works in its own registers: no cache, memory or other
shared resource) scale with threads on distinct cores nearly linearly: the all-core clock costs a
few percent to a fifth. On the 2-vCPU KVM guest the project is built on, one `profile --quick` of
its two CPUs (27 November 2026, 06:06 UTC) measured peak_fma at 58.7 GFLOP/s on two threads on two
vCPUs against 58.3 on one (116.7 in a profile 32 minutes later), int_ops and scalar_fp64 likewise,
over a stretch of the sweep, while its host-load watch saw 0.04 CPUs of other work: the hypervisor
had run both vCPUs on one physical core, or taken one away without counting it as steal. Nothing
in the guest shows that but the measurements themselves, and every projection from that profile
took half the node for all of it (NPB EP.A, a pure compute program, predicted 39% too fast on one
CPU; docs/validation.md, stop 21). A CPU quota below the CPUs a container sees does the same, for
the whole profile: flagged too, since the node then cannot give its threads the cores it shows.

The host can also take a core for a stretch of the sweep only. One quick profile of the two CPUs
(28 November 2026, 02:06 UTC) measured peak_fma at 1.34x one thread and scalar_fp64 at 1.45x, above
the 0.6-of-linear bar, while int_ops in the same profile scaled 2.2x; the profiles before it gave
1.8-2.1x for all three, and NPB EP.A ran 2.0x on two CPUs in that very round, yet was predicted
1.5x from those kernels (25% too fast on one CPU; docs/validation.md, stop 30). So the core-local
kernels at one thread count are also checked against each other: one that scaled less than
1 / MAX_SPREAD of the best of them is named. A real core's clocks do not part them that far: a
heavy vector FMA's all-core clock can be 60-70% of the one-core clock where integer work keeps
85-95% (a ratio of about 1.4), hence 1.5.
"""

from __future__ import annotations

from collections.abc import Sequence

from registry.profile.placement import Cpu
from registry.profile.runner import Measurement

CORE_LOCAL = frozenset({"peak_fma", "scalar_fp64", "int_ops"})
MIN_SCALING = 0.6     # of linear: below it, threads on distinct cores did not run side by side
MAX_SPREAD = 1.5      # between the core-local kernels' scalings at one thread count: beyond it, part of the sweep


def unscaled(measurements: Sequence[Measurement], topology: Sequence[Cpu]) -> list[str]:
    """'peak_fma x2: 1.0x one thread' for each core-local kernel whose threads ran on distinct cores
    (where each ran, by the topology's cores) and did not reach MIN_SCALING of linear scaling over
    the kernel's one-thread rate, or scaled less than 1 / MAX_SPREAD of the best core-local kernel at
    that thread count ('... (int_ops 2.2x)'). Threads that shared a core (SMT siblings) are not
    checked: there a core-local kernel legitimately stays near one core's rate."""
    core_of = {c.cpu: (c.package, c.core) for c in topology}
    one = {m.config.ub.name: m.gflops for m in measurements
           if m.config.threads == 1 and m.config.ub.name in CORE_LOCAL and m.gflops}
    out, checked = [], {}
    for m in measurements:
        name, threads = m.config.ub.name, m.config.threads
        if name not in one or threads < 2 or not m.gflops:
            continue
        cores = {core_of.get(cpu) for cpu in m.cpus_used}
        if None in cores or len(cores) < threads:
            continue
        scaling = m.gflops / one[name]
        if scaling < MIN_SCALING * threads:
            out.append(f"{name} x{threads}: {scaling:.1f}x one thread")
        else:
            checked.setdefault(threads, []).append((scaling, name))
    for threads, scalings in checked.items():
        best, best_name = max(scalings)
        out += [f"{name} x{threads}: {scaling:.1f}x one thread ({best_name} {best:.1f}x)"
                for scaling, name in scalings if scaling * MAX_SPREAD < best]
    return out
