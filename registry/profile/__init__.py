"""Node profiles: which microbenchmark configurations to run on a node (sweep, placement), how
to repeat them (stats), running them through the C driver (runner), storing a profile in one
transaction (store), packed for `nodereg match` (vectors), and its headline figures (summary). `profiler` ties these together for
`nodereg profile`; `catalog` names the microbenchmarks.
"""
