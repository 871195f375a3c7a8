"""Application tracing: run a command once, sample it, find its phases, describe each with a signature.

Modules, in data-flow order: `runner` (run the command, pass its stdio through, kill its tree),
`procfs` + `sampler` (per-interval samples of the whole process tree), `counters` (perf stat -I where
the kernel has counters), `omp` (GOMP_parallel shim records), `markers` (application phase markers),
`phases` (automatic change points, marker and OpenMP phases), `signature` (per-phase metrics),
`cachegrind` (simulated cache behaviour), `tracer` (all of it for one command), `tracefile` (the
portable JSON file) and `store` (the registry tables).

This package's `__init__` imports nothing, so that `from registry.trace.markers import phase` in an
application stays cheap.
"""
