"""Projection models for `nodereg match`: which microbenchmark configs a phase resembles, and how
long the phase would take on each registered node (``corredor``: the thesis method; ``similarity``:
signature distances). Each model lives in its own module and registers as a ``nodereg.models`` plugin.
"""
