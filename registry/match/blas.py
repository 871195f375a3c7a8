"""One BLAS thread for `nodereg match`.

The projection's matrix products are small (a phase against a few hundred references), yet
OpenBLAS starts a thread per CPU when numpy loads and keeps each spinning for a while after every
call. On a 2-vCPU node that spinning thread takes the CPU the reading thread and the database
server need: a 10,000-node match ran 3% more instructions with it (valgrind, docs/match.md).
"""

import os
import sys

_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> bool:
    """Ask the BLAS numpy loads for one thread, unless the user set a count; False where numpy is
    loaded already (its BLAS has its threads then)."""
    if "numpy" in sys.modules:
        return False
    for var in _VARS:
        os.environ.setdefault(var, "1")
    return True
