"""Repetitions and their statistics: when to stop repeating a configuration, and what to report.

The driver times repetitions; Python only decides how many. A configuration is repeated in
batches until its median moves by less than `rel_tol` when the last batch is added (or exactly
`--reps N` times), or until its repetitions have used `budget_s` (a memory-sized random-access
config can take a second per repetition; a few such repetitions vary little). It is flagged
unstable when the median never settled, or when the coefficient of variation of its
repetitions exceeds CV_LIMIT (another process was competing for the core, frequency changed...).
"""

import statistics
from dataclasses import dataclass

CV_LIMIT = 0.10
FEWEST = 3          # repetitions every configuration gets


@dataclass(frozen=True)
class RepPolicy:
    target_s: float      # calibrated length of one repetition
    min_reps: int
    max_reps: int
    batch: int
    rel_tol: float
    budget_s: float      # timed seconds after which a configuration gets no more repetitions
    fixed: bool = False  # exactly min_reps repetitions (--reps N)

    @classmethod
    def for_mode(cls, mode: str, reps: int | None = None) -> "RepPolicy":
        base = {
            "quick": cls(target_s=0.005, min_reps=7, max_reps=21, batch=4, rel_tol=0.01, budget_s=0.5),
            "default": cls(target_s=0.002, min_reps=5, max_reps=15, batch=3, rel_tol=0.01, budget_s=0.25),
            "full": cls(target_s=0.01, min_reps=9, max_reps=31, batch=5, rel_tol=0.005, budget_s=2.0),
        }[mode]
        if reps is None:
            return base
        return cls(base.target_s, reps, reps, 1, base.rel_tol, base.budget_s, fixed=True)

    @property
    def first_reps(self) -> int:
        """Repetitions asked for with the configuration itself."""
        return self.min_reps if self.fixed else min(self.min_reps, FEWEST)

    def _spent(self, times: list[float]) -> bool:
        return len(times) >= FEWEST and sum(times) >= self.budget_s

    def more_needed(self, times: list[float]) -> int:
        """How many more repetitions to ask for (0: done)."""
        if self.fixed or len(times) >= self.max_reps or self._spent(times):
            return 0
        if len(times) < self.min_reps:
            return self.min_reps - len(times)
        if converged(times, self.batch, self.rel_tol):
            return 0
        return min(self.batch, self.max_reps - len(times))

    def is_unstable(self, times: list[float]) -> bool:
        settled = self.fixed or self._spent(times) or converged(times, self.batch, self.rel_tol)
        return not settled or summarize(times).cv > CV_LIMIT


def converged(times: list[float], batch: int, rel_tol: float) -> bool:
    """The median of all repetitions is within rel_tol of the median before the last batch."""
    if len(times) <= batch:
        return False
    now, before = statistics.median(times), statistics.median(times[:-batch])
    return abs(now - before) <= rel_tol * now


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    cv: float


def summarize(times: list[float]) -> Summary:
    median = statistics.median(times)
    mean = statistics.fmean(times)
    cv = statistics.pstdev(times) / mean if len(times) > 1 and mean > 0 else 0.0
    return Summary(median, min(times), cv)
